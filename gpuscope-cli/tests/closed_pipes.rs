//! A reader that stops early (`gpuscope replay ... | head -1`, `2>&1 | head`) ends the
//! command with exit status 1 and, where standard error is still open, a line saying the
//! report could not be written: never Rust's panic on a broken pipe (status 101 and a
//! backtrace on the terminal).

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

mod common;
use common::trace;

fn gpuscope() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpuscope"));
    c.env_remove("GPUSCOPE_ALLOC_CONF");
    c
}

#[test]
fn replay_whose_reader_stops_after_the_first_line_says_so_and_exits_1() {
    for format in ["text", "json"] {
        let mut child = gpuscope()
            .args(["replay", "--backend", "sim", "--format", format])
            // Each replay takes milliseconds, so the reader is gone before the second
            // trace's report (the text header is the first line, JSON a line per trace).
            .args(["gpt2_train.csv", "bert_infer.csv", "gpt2_train.csv"].map(trace))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("gpuscope runs");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        assert!(!first.is_empty(), "{format}: no first line");
        drop(stdout);
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(1), "{format}: {stderr}");
        assert!(
            stderr.contains("cannot write the report") && !stderr.contains("panicked"),
            "{format}: {stderr}"
        );
    }
}

#[test]
fn an_error_with_standard_error_closed_exits_1_not_101() {
    let bad =
        std::env::temp_dir().join(format!("gpuscope-closed-pipes-{}.csv", std::process::id()));
    std::fs::write(&bad, "op,id,size,stream\nf,7,0,0\n").unwrap();
    let mut child = gpuscope()
        .args(["replay", "--backend", "sim"])
        .arg(&bad)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gpuscope runs");
    // Closed before the command reads the trace and reports its error.
    drop(child.stderr.take());
    let status = child.wait().unwrap();
    std::fs::remove_file(&bad).unwrap();
    assert_eq!(status.code(), Some(1));
}
