//! What a new user sees: a program with no `tracing` subscriber whose `#[gpu_scope]`
//! function pushes a clone of a tensor into a `&mut Vec<Tensor>` argument, run in a
//! debug build. The leak goes to stderr, rustc-like, with the source line; a thousand
//! repeats from the same line fold into a few lines; at exit, a one-screen summary
//! groups the tensors still alive by site.
//!
//! In a release build (`cargo test --release`) nothing is reported unless asked: the
//! tests there ask with `GPUSCOPE_LEAKS=warn`, and one more checks the silence.
//!
//! Each test runs this test binary again as the program (`child_program` below, chosen
//! by an environment variable), so that the program is a real process: its own exit,
//! its own (absent) subscriber, its own stderr.

use std::process::Command;
use std::sync::Mutex;

use gpuscope::{Device, Tensor, TensorError, gpu_scope};

const CHILD: &str = "GPUSCOPE_TEST_CHILD";

/// What the program keeps until it exits (so the exit summary has something to list).
static KEPT: Mutex<Vec<Tensor>> = Mutex::new(Vec::new());

#[gpu_scope(allow(scope_escape))] // the leak the test is about
fn step(dev: &Device, history: &mut Vec<Tensor>) -> Result<Tensor, TensorError> {
    let activation = Tensor::ones(&[64, 64], dev)?;
    history.push(activation.clone()); // outlives the scope: reported
    Tensor::zeros(&[1], dev)
}

/// The program: 1000 steps, each leaking one 16 KiB tensor from the same line; then the
/// history goes into a static, alive at exit.
#[test]
fn child_program() {
    let Ok(mode) = std::env::var(CHILD) else {
        return; // only as a child
    };
    if mode == "subscriber" {
        tracing_subscriber::fmt()
            .with_writer(std::io::stdout)
            .init();
    }
    let dev = Device::host().unwrap();
    let mut history = Vec::new();
    for _ in 0..1000 {
        step(&dev, &mut history).unwrap();
    }
    KEPT.lock().unwrap().extend(history);
}

struct Run {
    stdout: String,
    stderr: String,
}

/// What the program's environment needs for leaks to be reported: nothing in a debug
/// build; `GPUSCOPE_LEAKS=warn` in a release build, which is silent unless asked.
fn reporting_on() -> &'static [(&'static str, &'static str)] {
    if cfg!(debug_assertions) {
        &[]
    } else {
        &[("GPUSCOPE_LEAKS", "warn")]
    }
}

fn run_child(mode: &str, env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "child_program",
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .env(CHILD, mode)
    .env_remove("GPUSCOPE_LEAKS")
    .env_remove("GPUSCOPE_TRACK")
    .env_remove("RUST_LOG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let run = Run {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(
        out.status.success(),
        "child failed:\n{}\n{}",
        run.stdout,
        run.stderr
    );
    run
}

/// The line of this file that holds `needle` (1-based).
fn line_of(needle: &str) -> usize {
    include_str!("leak_stderr.rs")
        .lines()
        .position(|l| l.contains(needle))
        .unwrap()
        + 1
}

#[test]
fn without_a_subscriber_leaks_go_to_stderr_folded_with_an_exit_summary() {
    let run = run_child("plain", reporting_on());
    let err = &run.stderr;
    let site = format!(
        "tests/leak_stderr.rs:{}:22",
        line_of("let activation = Tensor::ones")
    );

    // The first leak, in full: what, the arrow to the creating line, the source line
    // with a caret under the call, the scope, the help.
    let first = format!(
        "warning: tensor leaked from scope `step`: f32[64, 64] (16.00 KiB) on host:0 (host)\n  --> {site}\n   |\n{} |     let activation = Tensor::ones(&[64, 64], dev)?;\n   |                      ^ created here, still alive when `step` returned\n",
        line_of("let activation = Tensor::ones")
    );
    assert!(err.contains(&first), "expected\n{first}\nin\n{err}");
    assert!(
        err.contains("= note: scope `step` is at tests/leak_stderr.rs:"),
        "{err}"
    );
    assert!(err.contains("gpuscope::keep(&t)"), "{err}");

    // 999 more leaks from the same line: three lines (×10, ×100, ×1000), not 999.
    let folded: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("warning: ×"))
        .collect();
    assert_eq!(folded.len(), 3, "{err}");
    assert!(
        folded[0].starts_with(&format!("warning: ×10 at {site}, 160.00 KiB in all")),
        "{err}"
    );
    assert!(
        folded[1].starts_with(&format!("warning: ×100 at {site}, 1.56 MiB in all")),
        "{err}"
    );
    assert!(
        folded[2].starts_with(&format!("warning: ×1000 at {site}, 15.62 MiB in all")),
        "{err}"
    );

    // At exit: the thousand tensors the static holds, grouped under their one site.
    let summary = err
        .find("warning: 1000 tracked tensors still alive at exit (15.62 MiB), from 1 site:")
        .unwrap_or_else(|| panic!("no exit summary in\n{err}"));
    let rest = &err[summary..];
    assert!(
        rest.lines().nth(1).unwrap().contains(&format!(
            "×1000  15.62 MiB  {site}  f32[64, 64], leaked from scope `step`"
        )),
        "{rest}"
    );
    assert_eq!(err.matches("warning:").count(), 5, "{err}");
}

#[test]
fn gpuscope_leaks_off_silences_reports_and_the_summary() {
    let run = run_child("plain", &[("GPUSCOPE_LEAKS", "off")]);
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);
}

#[test]
fn a_subscriber_gets_the_events_and_stderr_stays_quiet() {
    let run = run_child("subscriber", reporting_on());
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);
    // Every leak is one structured event (plus one per scope).
    let events = run
        .stdout
        .lines()
        .filter(|l| l.contains("gpuscope::leak") && l.contains("tensor leaked from scope `step`"))
        .count();
    assert_eq!(events, 1000, "{}", run.stdout);
}

/// A release build reports nothing and prints no exit summary unless asked, though the
/// program leaks a thousand tensors; `GPUSCOPE_LEAKS=warn` asks (the tests above).
#[test]
#[cfg(not(debug_assertions))]
fn release_builds_stay_silent_unless_asked() {
    let run = run_child("plain", &[]);
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);
    assert!(!run.stderr.contains("gpuscope"), "{}", run.stderr);
}
