//! `gpuscope lint` against real-code shapes (see `tests/data/lint-corpus/README.md`):
//!
//! - the checked-in sample (`sample/`, code written for this test in the style of the
//!   reviewed crates, one file per false-alarm shape and per true-finding shape seen) gives
//!   exactly `sample-expected.tsv`;
//! - the fetched corpus itself, when `GPUSCOPE_LINT_CORPUS` points at it (one directory per
//!   repository of `repos.tsv`, named `owner+name`, holding that commit's `.rs` files), gives
//!   exactly the findings reviewed in `reviewed.tsv`; without it the test prints
//!   `skipped: <reason>`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn corpus_data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/lint-corpus")
}

/// The rows of a TSV file with a header, as string fields.
fn tsv(path: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}

/// `gpuscope lint --format json` over `dir`, run from `dir`: (file, line, rule) of each finding.
fn lint(dir: &Path) -> BTreeSet<(String, u64, String)> {
    let output = Command::new(env!("CARGO_BIN_EXE_gpuscope"))
        .current_dir(dir)
        .args(["lint", "--format", "json", "."])
        .output()
        .expect("gpuscope runs");
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{}: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let findings: Vec<Value> = serde_json::from_slice(&output.stdout).expect("JSON findings");
    findings
        .iter()
        .map(|f| {
            (
                f["file"].as_str().unwrap().replace('\\', "/"),
                f["line"].as_u64().unwrap(),
                f["rule"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn the_sample_gives_exactly_the_expected_findings() {
    let expected: BTreeSet<(String, u64, String)> = tsv(&corpus_data().join("sample-expected.tsv"))
        .into_iter()
        .map(|row| (row[0].clone(), row[1].parse().unwrap(), row[2].clone()))
        .collect();
    let found = lint(&corpus_data().join("sample"));
    let missed: Vec<_> = expected.difference(&found).collect();
    let extra: Vec<_> = found.difference(&expected).collect();
    assert!(
        missed.is_empty() && extra.is_empty(),
        "missed (lost recall): {missed:?}\nextra (false alarms or new findings to review): {extra:?}"
    );
    // Every false-alarm file stays silent, every true-finding file fires.
    let firing: BTreeSet<&str> = expected.iter().map(|(f, _, _)| f.as_str()).collect();
    let files = std::fs::read_dir(corpus_data().join("sample"))
        .unwrap()
        .count();
    assert!(
        firing.len() >= 5 && files >= firing.len() + 9,
        "{firing:?} of {files}"
    );
}

#[test]
fn the_fetched_corpus_gives_exactly_the_reviewed_findings() {
    let Some(root) = std::env::var_os("GPUSCOPE_LINT_CORPUS").map(PathBuf::from) else {
        println!(
            "skipped: GPUSCOPE_LINT_CORPUS is not set (see tests/data/lint-corpus/README.md to fetch the corpus)"
        );
        return;
    };
    let repos = tsv(&corpus_data().join("repos.tsv"));
    let missing: Vec<&str> = repos
        .iter()
        .map(|r| r[0].as_str())
        .filter(|repo| !root.join(repo.replace('/', "+")).is_dir())
        .collect();
    if !missing.is_empty() {
        println!("skipped: {} lacks {missing:?}", root.display());
        return;
    }
    let reviewed = tsv(&corpus_data().join("reviewed.tsv"));
    let expected: BTreeSet<(String, String, u64, String)> = reviewed
        .iter()
        .map(|r| {
            (
                r[0].clone(),
                r[2].clone(),
                r[3].parse().unwrap(),
                r[4].clone(),
            )
        })
        .collect();
    let mut found = BTreeSet::new();
    for repo in &repos {
        let dir = root.join(repo[0].replace('/', "+"));
        for (file, line, rule) in lint(&dir) {
            found.insert((repo[0].clone(), file, line, rule));
        }
    }
    let missed: Vec<_> = expected.difference(&found).collect();
    let extra: Vec<_> = found.difference(&expected).collect();
    assert!(
        missed.is_empty() && extra.is_empty(),
        "missed: {missed:?}\nnot reviewed yet: {extra:?}"
    );
    let rule_findings: Vec<&Vec<String>> = reviewed
        .iter()
        .filter(|r| gpuscope_lint::rule(&r[4]).is_some())
        .collect();
    let true_ones = rule_findings.iter().filter(|r| r[5] == "true").count();
    println!(
        "{} repositories, {} findings of rules, {true_ones} true: precision {:.1}%",
        repos.len(),
        rule_findings.len(),
        100.0 * true_ones as f64 / rule_findings.len().max(1) as f64
    );
}
