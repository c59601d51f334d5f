//! `gpuscope replay`: JSON and text output on a real trace, and clear errors for bad
//! traces and configuration.

use std::path::PathBuf;
use std::process::{Command, Output};

fn gpuscope(args: &[&str], conf: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpuscope"));
    c.args(args).env_remove("GPUSCOPE_ALLOC_CONF");
    if let Some(conf) = conf {
        c.env("GPUSCOPE_ALLOC_CONF", conf);
    }
    c.output().expect("gpuscope runs")
}

fn trace(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/traces")
        .join(name)
        .display()
        .to_string()
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
