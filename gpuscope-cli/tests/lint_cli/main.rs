//! `gpuscope lint` end to end: the built binary on the fixture crate in
//! `tests/fixtures/lint/sample` (a parse error in `src/broken.rs`, a `.gitignore`d
//! `src/ignored.rs` that would be an error if linted, a `gpuscope.toml` turning
//! `out_of_place_update` on) and the config files beside it.
//!
//! The text snapshot is `tests/fixtures/lint/expected.txt`; after an intended change to the
//! output, rewrite it with `UPDATE_EXPECT=1 cargo test --test lint_cli` and review the diff.
//!
//! Where things live: the helpers are here; `output` (formats, exit codes, the
//! rules' documentation), `config` (levels from configuration and attributes) and
//! `bad_input` (files that cannot be linted) hold the tests.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

mod bad_input;
mod config;
mod output;

pub(crate) fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lint")
}

pub(crate) fn sample() -> PathBuf {
    fixtures().join("sample")
}

/// Runs `gpuscope lint ARGS` in `dir`.
pub(crate) fn lint(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpuscope"))
        .current_dir(dir)
        .arg("lint")
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("gpuscope runs")
}

pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("UTF-8 stdout")
}

pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("UTF-8 stderr")
}

pub(crate) fn code(output: &Output) -> i32 {
    output.status.code().expect("exited with a code")
}

pub(crate) fn json(output: &Output) -> Vec<Value> {
    match serde_json::from_str(&stdout(output)) {
        Ok(Value::Array(items)) => items,
        other => panic!(
            "expected a JSON array, got {other:?}\nstderr: {}",
            stderr(output)
        ),
    }
}

/// `(rule, level, file, line, column)` of each JSON finding.
pub(crate) fn summary(findings: &[Value]) -> Vec<(String, String, String, u64, u64)> {
    findings
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_owned(),
                f["level"].as_str().unwrap().to_owned(),
                f["file"].as_str().unwrap().to_owned(),
                f["line"].as_u64().unwrap(),
                f["column"].as_u64().unwrap(),
            )
        })
        .collect()
}

pub(crate) fn row(
    rule: &str,
    level: &str,
    file: &str,
    line: u64,
    column: u64,
) -> (String, String, String, u64, u64) {
    (
        rule.to_owned(),
        level.to_owned(),
        file.to_owned(),
        line,
        column,
    )
}

/// Copies `from` into `to`, recursively.
pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A fresh temporary directory for one test.
pub(crate) fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gpuscope-lint-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A file with one `forget_tensor` error, to show that the other files are still linted.
pub(crate) const LEAKY: &str = "fn f(t: Tensor) {\n    std::mem::forget(t);\n}\n";

pub(crate) fn rules_of(findings: &[Value]) -> Vec<(String, String)> {
    findings
        .iter()
        .map(|f| {
            (
                f["file"].as_str().unwrap().to_owned(),
                f["rule"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}
