//! `gpuscope replay`: JSON and text output on a real trace, and clear errors for bad
//! traces and configuration: every hostile trace of the table in
//! `tests/data/traces/README.md` is answered with an error naming the file and the
//! line (exit status 1, never a panic), or replayed.

use std::process::{Command, Output};

mod common;
use common::trace;

fn gpuscope(args: &[&str], conf: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpuscope"));
    c.args(args).env_remove("GPUSCOPE_ALLOC_CONF");
    if let Some(conf) = conf {
        c.env("GPUSCOPE_ALLOC_CONF", conf);
    }
    c.output().expect("gpuscope runs")
}

fn temp_trace(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("gpuscope-replay-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn json_has_the_documented_keys_and_sane_figures() {
    let out = gpuscope(
        &[
            "replay",
            "--backend",
            "sim",
            "--format",
            "json",
            &trace("prefetch_train.csv"),
        ],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8(out.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    for key in [
        "trace",
        "ops",
        "cold_ns_per_op",
        "warm_ns_per_op",
        "peak_allocated",
        "peak_reserved",
        "device_allocs",
    ] {
        assert!(v.get(key).is_some(), "missing {key} in {v}");
    }
    assert_eq!(v["ops"], 1431);
    let (alloc, reserved) = (
        v["peak_allocated"].as_u64().unwrap(),
        v["peak_reserved"].as_u64().unwrap(),
    );
    assert!(alloc > 0 && reserved >= alloc, "{v}");
    assert!(v["warm_ns_per_op"].as_f64().unwrap() > 0.0);
    // Driver calls by kind: the cold pass grew, warm passes only record and query the
    // events of cross-stream frees.
    for key in [
        "allocs",
        "maps",
        "set_access",
        "stream_syncs",
        "event_syncs",
    ] {
        assert!(v["cold_calls"].get(key).is_some(), "cold_calls.{key}: {v}");
        assert_eq!(v["warm_calls"][key], 0, "warm_calls.{key}: {v}");
    }
    assert!(v["cold_calls"]["allocs"].as_u64().unwrap() > 0);
    assert_eq!(v["pass_calls"].as_array().unwrap().len(), 4);
    assert_eq!(v["warm_passes_identical"], true);
}

#[test]
fn text_output_names_every_figure() {
    let out = gpuscope(
        &["replay", "--backend", "host", &trace("prefetch_train.csv")],
        None,
    );
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for label in [
        "ops",
        "cold ns/op",
        "warm ns/op",
        "peak allocated",
        "peak reserved",
        "reserved/allocated",
        "device allocs",
        "cold pass calls",
        "warm calls/pass",
        "warm passes alike",
    ] {
        assert!(text.contains(label), "missing {label}:\n{text}");
    }
}

#[test]
fn a_malformed_line_names_the_file_and_line() {
    let bad = temp_trace(
        "bad.csv",
        "op,id,size,stream\na,1,100,0\nx,2,5,0\nf,1,0,0\n",
    );
    let out = gpuscope(&["replay", &bad], None);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains(&format!("{bad}:3")), "{err}");
}

#[test]
fn a_free_of_an_unknown_id_is_an_error() {
    let bad = temp_trace("unknown.csv", "op,id,size,stream\na,1,100,0\nf,2,0,0\n");
    let out = gpuscope(&["replay", &bad], None);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains(&format!("{bad}:3")) && err.contains("free of id 2"),
        "{err}"
    );
}

#[test]
fn a_bad_configuration_key_is_an_error_with_a_suggestion() {
    let out = gpuscope(
        &["replay", &trace("prefetch_train.csv")],
        Some("max_split_size:100"),
    );
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("unknown key `max_split_size`")
            && err.contains("did you mean `max_split_size_mb`"),
        "{err}"
    );
}

/// Runs `gpuscope replay --backend sim` on a trace with `text`; (exit code, stderr).
fn replay_text(name: &str, text: &[u8]) -> (Option<i32>, String, String) {
    let dir = std::env::temp_dir().join(format!("gpuscope-replay-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    let out = gpuscope(
        &[
            "replay",
            "--backend",
            "sim",
            "--warm-passes",
            "1",
            &path.display().to_string(),
        ],
        None,
    );
    (
        out.status.code(),
        path.display().to_string(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every hostile trace: an error (exit 1, never 101) naming the file and the line.
#[test]
fn hostile_traces_get_an_error_naming_the_file_and_line() {
    let h = "op,id,size,stream\n";
    let long = format!("{h}a,1,{},0\n", "7".repeat(5 << 20));
    let cases: Vec<(&str, Vec<u8>, usize, &str)> = vec![
        (
            "size_max.csv",
            format!("{h}a,1,18446744073709551615,0\n").into_bytes(),
            2,
            "larger than any device memory",
        ),
        (
            "size_over.csv",
            format!("{h}a,1,18446744073709551616,0\n").into_bytes(),
            2,
            "size `18446744073709551616` is not a byte count",
        ),
        (
            "size_negative.csv",
            format!("{h}a,1,-5,0\n").into_bytes(),
            2,
            "size `-5`",
        ),
        (
            "stream_over.csv",
            format!("{h}a,1,512,4294967296\n").into_bytes(),
            2,
            "stream `4294967296` is not a stream number",
        ),
        (
            "id_over.csv",
            format!("{h}a,18446744073709551616,512,0\n").into_bytes(),
            2,
            "id `18446744073709551616`",
        ),
        (
            "duplicate.csv",
            format!("{h}a,1,512,0\na,1,512,0\n").into_bytes(),
            3,
            "allocated again while still live (allocated at line 2)",
        ),
        (
            "unknown_free.csv",
            format!("{h}a,1,512,0\nf,9,0,0\n").into_bytes(),
            3,
            "free of id 9",
        ),
        (
            "unknown_record.csv",
            format!("{h}r,9,0,1\n").into_bytes(),
            2,
            "record_stream of id 9",
        ),
        ("long_line.csv", long.into_bytes(), 2, "(5242880 bytes)"),
        (
            "binary.csv",
            [
                h.as_bytes(),
                &[0x89, b'P', b'N', b'G', 0, 0xff, 0xfe, b'\n'],
            ]
            .concat(),
            2,
            "not UTF-8 text",
        ),
        (
            "no_header.csv",
            b"a,1,512,0\n".to_vec(),
            1,
            "is an operation, not the header: add the line `op,id,size,stream` before it",
        ),
        (
            "wrong_header.csv",
            b"op,id,bytes,stream\na,1,512,0\n".to_vec(),
            1,
            "expected the header `op,id,size,stream`, found `op,id,bytes,stream` (no column `size`",
        ),
        ("empty.csv", Vec::new(), 1, "empty file"),
        (
            "fields.csv",
            format!("{h}a,1,512\n").into_bytes(),
            2,
            "expected 4 fields",
        ),
        (
            "op.csv",
            format!("{h}q,1,512,0\n").into_bytes(),
            2,
            "unknown op `q`",
        ),
    ];
    for (name, text, line, message) in cases {
        let (code, path, err) = replay_text(name, &text);
        assert_eq!(code, Some(1), "{name}: exit status {code:?}\n{err}");
        assert!(
            err.contains(&format!("{path}:{line}:")) && err.contains(message),
            "{name}: expected `{path}:{line}:` and `{message}` in\n{err}"
        );
        assert!(!err.contains("panicked"), "{name}: {err}");
        assert!(err.len() < 4096, "{name}: a {} byte message", err.len());
    }
}

/// Traces that look odd but are valid replay: CRLF line endings, huge stream numbers,
/// ids at their limit, zero-byte requests, many streams (fast: per-stream work scales).
#[test]
fn odd_but_valid_traces_replay() {
    let crlf = "op,id,size,stream\r\na,1,512,0\r\nr,1,0,4294967295\r\nf,1,0,0\r\n";
    let (code, _, err) = replay_text("crlf.csv", crlf.as_bytes());
    assert_eq!(code, Some(0), "{err}");
    let limits = "op,id,size,stream\na,18446744073709551615,0,4294967295\nf,18446744073709551615,0,4294967295\n";
    let (code, _, err) = replay_text("limits.csv", limits.as_bytes());
    assert_eq!(code, Some(0), "{err}");
    // As a spreadsheet or pandas writes it: byte order mark, quotes, columns in another
    // order with one more, decimals, the unused sizes left empty.
    let other_tool = "\u{feff}\"stream\",\"op\",\"id\",\"size\",\"t\"\r\n\"0\",\"a\",\"1\",\"4096.0\",\"0.1\"\r\n\"1\",\"r\",\"1\",\"\",\"0.2\"\r\n\"0\",\"f\",\"1\",\"\",\"0.3\"\r\n";
    let (code, _, err) = replay_text("other_tool.csv", other_tool.as_bytes());
    assert_eq!(code, Some(0), "{err}");

    let mut many = String::from("op,id,size,stream\n");
    for i in 0..20_000u64 {
        many.push_str(&format!("a,{i},{},{}\n", 4096 * (1 + i % 7), i * 7));
    }
    for i in 0..20_000u64 {
        many.push_str(&format!("r,{i},0,{}\n", (i * 7 + 7) % 140_000));
    }
    for i in 0..20_000u64 {
        many.push_str(&format!("f,{i},0,{}\n", i * 7));
    }
    let start = std::time::Instant::now();
    let (code, _, err) = replay_text("streams.csv", many.as_bytes());
    let took = start.elapsed();
    assert_eq!(code, Some(0), "{err}");
    assert!(
        took < std::time::Duration::from_secs(10),
        "20,000 streams took {took:?}"
    );
}

#[test]
fn a_removed_configuration_key_says_what_to_do() {
    let out = gpuscope(
        &["replay", "--backend", "sim", &trace("prefetch_train.csv")],
        Some("reserve_ratio:1.05"),
    );
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("`reserve_ratio` is no longer a gpuscope option")
            && err.contains("remove the key"),
        "{err}"
    );
}

fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// `gpuscope replay --backend sim --warm-passes 1 --format json INPUT`, with no
/// configuration from the environment.
fn replay_json(input: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpuscope"));
    c.args([
        "replay",
        "--backend",
        "sim",
        "--warm-passes",
        "1",
        "--format",
        "json",
        input,
    ])
    .env_remove("GPUSCOPE_ALLOC_CONF")
    .env_remove("GPUSCOPE_MAX_INPUT_MIB");
    c
}

/// The figures of one trace's JSON result that do not depend on timing.
fn figures(v: &serde_json::Value) -> Vec<u64> {
    [
        "ops",
        "peak_allocated",
        "peak_reserved",
        "device_allocs",
        "device_frees",
    ]
    .iter()
    .map(|k| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}")))
    .collect()
}

/// The figures of `gpuscope replay --format json` on `path` that do not depend on
/// timing, or the error it printed.
fn replay_figures(path: &str, max_input_mib: Option<&str>) -> Result<Vec<u64>, String> {
    let mut c = replay_json(path);
    if let Some(mib) = max_input_mib {
        c.env("GPUSCOPE_MAX_INPUT_MIB", mib);
    }
    let out = c.output().expect("gpuscope runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        return Err(stderr);
    }
    Ok(figures(&serde_json::from_slice(&out.stdout).unwrap()))
}

/// A gzip-compressed trace replays as the trace inside; a damaged one, one larger than
/// the limit once decompressed, and other compressed formats are errors that say what
/// to do.
#[test]
fn compressed_traces_replay_or_say_what_to_do() {
    let plain = trace("wgan_gp_train.csv");
    let text = std::fs::read(&plain).unwrap();
    let gz = gzip(&text);
    let gz_path = temp_trace("wgan_gp_train.csv.gz", "");
    std::fs::write(&gz_path, &gz).unwrap();
    let want = replay_figures(&plain, None).unwrap();
    assert_eq!(replay_figures(&gz_path, None).unwrap(), want);

    // 4 MiB of trace in a small file: refused past a 1 MiB limit, with how to raise it.
    let mut big = String::from("op,id,size,stream\n");
    for i in 0..100_000u64 {
        big.push_str(&format!("a,{i},512,0\nf,{i},0,0\n"));
    }
    assert!(big.len() > 2 << 20);
    let big_path = temp_trace("big.csv.gz", "");
    std::fs::write(&big_path, gzip(big.as_bytes())).unwrap();
    let e = replay_figures(&big_path, Some("1")).unwrap_err();
    assert!(
        e.contains("gzip-compressed, and more than 1.00 MiB decompressed")
            && e.contains("GPUSCOPE_MAX_INPUT_MIB=4"),
        "{e}"
    );
    assert_eq!(replay_figures(&big_path, Some("4")).unwrap()[0], 200_000);

    let (code, name, e) = replay_text("cut.csv.gz", &gz[..gz.len() / 2]);
    assert_eq!(code, Some(1), "{e}");
    assert!(
        e.starts_with(&format!("error: {name}: gzip-compressed"))
            && e.contains("is the file complete?"),
        "{e}"
    );
    let (code, name, e) = replay_text("t.csv.zst", b"\x28\xb5\x2f\xfd\x04\x00rest");
    assert_eq!(code, Some(1), "{e}");
    assert!(
        e.starts_with(&format!("error: {name}: zstd-compressed")) && e.contains("`zstd -d FILE`"),
        "{e}"
    );
}

/// A file over the input limit is refused before it is read, naming the environment
/// variable that raises the limit for `replay` (its option is `view`'s).
#[test]
fn a_trace_over_the_input_limit_names_the_variable_that_raises_it() {
    let p = temp_trace("two_mib.csv", &"x".repeat(2 << 20));
    let e = replay_figures(&p, Some("1")).unwrap_err();
    assert!(
        e.contains("more than the 1.00 MiB") && e.contains("GPUSCOPE_MAX_INPUT_MIB=2"),
        "{e}"
    );
    assert!(!e.contains("--max-input-mib"), "{e}");
}

/// Runs `c` with `input` on its standard input (written from another thread, so that a
/// large input cannot block on a full pipe; a reader that stops early, past its limit,
/// closes the pipe, and the writer's error is ignored).
fn with_stdin(mut c: Command, input: Vec<u8>) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

/// `-` reads the trace from standard input, gzip-compressed or not (as `zcat t.csv.gz |
/// gpuscope replay -` or `curl ... | gpuscope replay -` give it), named `<stdin>`.
#[test]
fn a_trace_on_standard_input_replays_as_the_file_does() {
    let plain = trace("wgan_gp_train.csv");
    let text = std::fs::read(&plain).unwrap();
    let want = replay_figures(&plain, None).unwrap();
    for input in [text.clone(), gzip(&text)] {
        let out = with_stdin(replay_json("-"), input);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["trace"], "<stdin>");
        assert_eq!(figures(&v), want);
    }
    // More than the limit on standard input: refused, with how to raise it.
    let mut c = replay_json("-");
    c.env("GPUSCOPE_MAX_INPUT_MIB", "1");
    let out = with_stdin(c, vec![b'x'; 2 << 20]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(
        e.starts_with("error: <stdin>: more than the 1.00 MiB")
            && e.contains("GPUSCOPE_MAX_INPUT_MIB=4"),
        "{e}"
    );
    // A bad trace on standard input is named so.
    let out = Command::new(env!("CARGO_BIN_EXE_gpuscope"))
        .args(["replay", "--backend", "sim", "-"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(e.starts_with("error: <stdin>"), "{e}");
}

/// `--touch` writes every block on its stream: on the host (writes done at once) the
/// replay places exactly as without it, and says so in the JSON; on the simulated device,
/// which has no memory to write, it is refused with what to do.
#[test]
fn touch_writes_every_block_where_there_is_memory_and_is_refused_on_the_simulated_device() {
    let t = trace("side_stream_loader_train.csv");
    let run = |extra: &[&str]| {
        let mut args = vec!["replay", "--backend", "host", "--format", "json"];
        args.extend_from_slice(extra);
        args.push(&t);
        let out = gpuscope(&args, None);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str::<serde_json::Value>(String::from_utf8(out.stdout).unwrap().trim())
            .unwrap()
    };
    let (plain, touched) = (run(&[]), run(&["--touch"]));
    assert_eq!(
        (&plain["touch"], &touched["touch"]),
        (&false.into(), &true.into())
    );
    for key in [
        "peak_reserved",
        "peak_allocated",
        "device_allocs",
        "warm_calls",
    ] {
        assert_eq!(plain[key], touched[key], "{key}");
    }
    let out = gpuscope(&["replay", "--backend", "sim", "--touch", &t], None);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--touch") && err.contains("--backend cuda"),
        "{err}"
    );
}
