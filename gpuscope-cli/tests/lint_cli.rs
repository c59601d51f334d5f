//! `gpuscope lint` end to end: the built binary on the fixture crate in
//! `tests/fixtures/lint/sample` (a parse error in `src/broken.rs`, a `.gitignore`d
//! `src/ignored.rs` that would be an error if linted, a `gpuscope.toml` turning
//! `out_of_place_update` on) and the config files beside it.
//!
//! The text snapshot is `tests/fixtures/lint/expected.txt`; after an intended change to the
//! output, rewrite it with `UPDATE_EXPECT=1 cargo test --test lint_cli` and review the diff.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lint")
}

fn sample() -> PathBuf {
    fixtures().join("sample")
}

/// Runs `gpuscope lint ARGS` in `dir`.
fn lint(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpuscope"))
        .current_dir(dir)
        .arg("lint")
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("gpuscope runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("UTF-8 stdout")
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("UTF-8 stderr")
}

fn code(output: &Output) -> i32 {
    output.status.code().expect("exited with a code")
}

fn json(output: &Output) -> Vec<Value> {
    match serde_json::from_str(&stdout(output)) {
        Ok(Value::Array(items)) => items,
        other => panic!(
            "expected a JSON array, got {other:?}\nstderr: {}",
            stderr(output)
        ),
    }
}

/// `(rule, level, file, line, column)` of each JSON finding.
fn summary(findings: &[Value]) -> Vec<(String, String, String, u64, u64)> {
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

fn row(
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

#[test]
fn text_output_matches_snapshot() {
    let output = lint(&sample(), &[]);
    assert_eq!(code(&output), 1, "stderr: {}", stderr(&output));
    let text = stdout(&output).replace('\\', "/");
    let expected_path = fixtures().join("expected.txt");
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(&expected_path, &text).expect("write the snapshot");
    }
    let expected = std::fs::read_to_string(&expected_path).expect("read the snapshot");
    assert_eq!(
        text,
        expected,
        "text output differs from {}",
        expected_path.display()
    );
    assert!(
        text.ends_with("gpuscope lint: 4 errors, 5 warnings in 4 files\n"),
        "{text}"
    );
}

#[test]
fn output_does_not_depend_on_the_thread_count() {
    let default = lint(&sample(), &[]);
    for jobs in ["1", "3"] {
        let other = lint(&sample(), &["-j", jobs]);
        assert_eq!(stdout(&other), stdout(&default), "-j {jobs}");
        assert_eq!(code(&other), code(&default));
    }
    assert_eq!(code(&lint(&sample(), &["-j", "0"])), 2);
}

#[test]
fn json_findings_have_the_documented_schema() {
    let output = lint(&sample(), &["--format", "json"]);
    assert_eq!(code(&output), 1);
    let findings = json(&output);
    assert_eq!(findings.len(), 9);
    let keys: BTreeSet<&str> = [
        "rule",
        "level",
        "file",
        "line",
        "column",
        "end_line",
        "end_column",
        "message",
        "help",
    ]
    .into();
    for finding in &findings {
        let object = finding.as_object().expect("each finding is an object");
        let mut found: BTreeSet<&str> = object.keys().map(String::as_str).collect();
        // `note` only where the rule has one.
        if found.remove("note") {
            assert!(
                object["note"].as_str().is_some_and(|s| !s.is_empty()),
                "{finding}"
            );
        }
        assert_eq!(found, keys, "{finding}");
        for key in ["rule", "file", "message", "help"] {
            assert!(
                object[key].as_str().is_some_and(|s| !s.is_empty()),
                "{key} in {finding}"
            );
        }
        assert!(
            matches!(object["level"].as_str(), Some("deny" | "warn")),
            "{finding}"
        );
        for key in ["line", "column", "end_line", "end_column"] {
            assert!(
                object[key].as_u64().is_some_and(|n| n >= 1),
                "{key} in {finding}"
            );
        }
        assert!(
            (object["end_line"].as_u64(), object["end_column"].as_u64())
                >= (object["line"].as_u64(), object["column"].as_u64()),
            "{finding}"
        );
    }
    let rows = summary(&findings);
    // 1-based positions of the start of the offending expressions.
    assert!(
        rows.contains(&row("forget_tensor", "deny", "src/lib.rs", 16, 5)),
        "{rows:?}"
    );
    assert!(
        rows.contains(&row("graph_accumulation", "warn", "src/train.rs", 10, 9)),
        "{rows:?}"
    );
    assert!(
        rows.contains(&row("missing_zero_grad", "warn", "src/train.rs", 6, 5)),
        "{rows:?}"
    );
    // Turned on by the sample's own gpuscope.toml.
    assert!(
        rows.contains(&row("out_of_place_update", "warn", "src/train.rs", 19, 9)),
        "{rows:?}"
    );
    let forget = &findings[rows.iter().position(|r| r.0 == "forget_tensor").unwrap()];
    assert!(
        forget["message"]
            .as_str()
            .unwrap()
            .starts_with("`mem::forget(hidden)` leaks `hidden`")
    );
    assert!(forget["help"].as_str().unwrap().contains("drop(hidden)"));
    // Ordered by file, then position.
    let mut sorted = rows.clone();
    sorted.sort_by(|a, b| (&a.2, a.3, a.4).cmp(&(&b.2, b.3, b.4)));
    assert_eq!(rows, sorted);
    // Nothing from the clean file or the ignored one.
    assert!(
        rows.iter()
            .all(|r| r.2 != "src/clean.rs" && r.2 != "src/ignored.rs"),
        "{rows:?}"
    );
}

#[test]
fn sarif_has_the_2_1_0_shape() {
    let output = lint(&sample(), &["--format", "sarif"]);
    assert_eq!(code(&output), 1);
    let sarif: Value = serde_json::from_str(&stdout(&output)).expect("SARIF is JSON");
    assert_eq!(sarif["version"], "2.1.0");
    assert!(sarif["$schema"].as_str().unwrap().contains("sarif-2.1.0"));
    let run = &sarif["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "gpuscope");
    let rule_ids: Vec<&str> = run["tool"]["driver"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    for rule in gpuscope_lint::RULES {
        assert!(
            rule_ids.contains(&rule.name),
            "{} missing from {rule_ids:?}",
            rule.name
        );
    }
    assert!(rule_ids.contains(&"parse"));

    let results = run["results"].as_array().expect("results");
    let findings = json(&lint(&sample(), &["--format", "json"]));
    assert_eq!(results.len(), findings.len());
    for (result, finding) in results.iter().zip(&findings) {
        let rule = result["ruleId"].as_str().unwrap();
        assert_eq!(rule, finding["rule"]);
        assert_eq!(
            rule_ids[result["ruleIndex"].as_u64().unwrap() as usize],
            rule
        );
        let level = match finding["level"].as_str().unwrap() {
            "deny" => "error",
            _ => "warning",
        };
        assert_eq!(result["level"], level);
        assert!(
            result["message"]["text"]
                .as_str()
                .unwrap()
                .starts_with(finding["message"].as_str().unwrap())
        );
        let location = &result["locations"][0]["physicalLocation"];
        assert_eq!(location["artifactLocation"]["uri"], finding["file"]);
        assert_eq!(location["region"]["startLine"], finding["line"]);
        assert_eq!(location["region"]["startColumn"], finding["column"]);
    }
}

#[test]
fn exit_codes() {
    let clean = lint(&sample(), &["src/clean.rs"]);
    assert_eq!(code(&clean), 0, "{}", stdout(&clean));
    assert!(
        stdout(&clean).ends_with("gpuscope lint: 0 errors, 0 warnings in 1 file\n"),
        "{}",
        stdout(&clean)
    );
    // Warnings only: still 0.
    let warnings = lint(&sample(), &["src/train.rs"]);
    assert_eq!(code(&warnings), 0, "{}", stdout(&warnings));
    assert!(stdout(&warnings).contains("warning[graph_accumulation]"));
    // A deny finding: 1.
    assert_eq!(code(&lint(&sample(), &["src/lib.rs"])), 1);
    // ... unless it is allowed on the command line.
    let allowed = lint(
        &sample(),
        &[
            "src/lib.rs",
            "-A",
            "forget_tensor",
            "-A",
            "static_escape",
            "-W",
            "backward_in_no_grad",
        ],
    );
    assert_eq!(code(&allowed), 0, "{}", stdout(&allowed));
    // Usage and config errors: 2.
    for args in [
        &["--config", "../bad_rule.toml"][..],
        &["--config", "../bad_level.toml"],
        &["--config", "../no_such_config.toml"],
        &["no_such_dir"],
        &["-D", "no_such_rule"],
        &["--format", "xml"],
    ] {
        let output = lint(&sample(), args);
        assert_eq!(code(&output), 2, "{args:?}: {}", stderr(&output));
        assert!(stdout(&output).is_empty(), "{args:?}: {}", stdout(&output));
    }
}

#[test]
fn config_errors_name_the_file_key_and_accepted_values() {
    let err = stderr(&lint(&sample(), &["--config", "../bad_rule.toml"]));
    assert!(
        err.contains("bad_rule.toml:2:1: unknown lint rule `graph_acumulation`"),
        "{err}"
    );
    assert!(err.contains("did you mean `graph_accumulation`?"), "{err}");
    assert!(
        err.contains("known rules: forget_tensor, static_escape"),
        "{err}"
    );
    let err = stderr(&lint(&sample(), &["--config", "../bad_level.toml"]));
    assert!(
        err.contains("bad_level.toml:2:17: [lints] forget_tensor: unknown lint level `forbid`"),
        "{err}"
    );
    assert!(
        err.contains("expected one of `allow`, `warn`, `deny`"),
        "{err}"
    );
}

#[test]
fn unparsable_file_is_reported_and_the_others_still_linted() {
    let output = lint(&sample(), &["--format", "json"]);
    assert_eq!(code(&output), 1);
    let findings = json(&output);
    let parse: Vec<&Value> = findings.iter().filter(|f| f["rule"] == "parse").collect();
    assert_eq!(parse.len(), 1, "{findings:?}");
    assert_eq!(parse[0]["file"], "src/broken.rs");
    assert_eq!(
        (parse[0]["line"].as_u64(), parse[0]["column"].as_u64()),
        (Some(3), Some(5))
    );
    assert!(
        parse[0]["message"]
            .as_str()
            .unwrap()
            .contains("does not parse: expected `;`"),
        "{}",
        parse[0]
    );
    for file in ["src/lib.rs", "src/train.rs"] {
        assert!(
            findings.iter().any(|f| f["file"] == file),
            "{file} not linted"
        );
    }
    // A parse error alone fails the run.
    assert_eq!(code(&lint(&sample(), &["src/broken.rs"])), 1);
    let text = stdout(&lint(&sample(), &["src/broken.rs"]));
    assert!(
        text.starts_with(
            "error[parse]: `src/broken.rs` does not parse: expected `;`\n --> src/broken.rs:3:5\n"
        ),
        "{text}"
    );
}

#[test]
fn config_file_overrides_levels() {
    // --config replaces the sample's gpuscope.toml: out_of_place_update is back to allow.
    let output = lint(
        &sample(),
        &[
            "--format",
            "json",
            "--config",
            "../lenient.toml",
            "src/lib.rs",
            "src/train.rs",
        ],
    );
    let rows = summary(&json(&output));
    let expected = vec![
        row("forget_tensor", "warn", "src/lib.rs", 16, 5),
        row("static_escape", "warn", "src/lib.rs", 21, 5),
        row("backward_in_no_grad", "warn", "src/lib.rs", 27, 5),
        row("missing_zero_grad", "warn", "src/train.rs", 6, 5),
        row("empty_cache_in_loop", "warn", "src/train.rs", 12, 9),
        row("item_in_hot_loop", "deny", "src/train.rs", 28, 22),
    ];
    assert_eq!(rows, expected);
    assert_eq!(code(&output), 1, "item_in_hot_loop is deny in lenient.toml");

    // The default config is looked up in the first path's directory, too.
    let from_parent = summary(&json(&lint(&fixtures(), &["--format", "json", "sample"])));
    assert!(
        from_parent.contains(&row(
            "out_of_place_update",
            "warn",
            "sample/src/train.rs",
            19,
            9
        )),
        "{from_parent:?}"
    );
    // Flags come after the config.
    let flagged = summary(&json(&lint(
        &sample(),
        &[
            "--format",
            "json",
            "-A",
            "out_of_place_update",
            "src/train.rs",
        ],
    )));
    assert!(
        flagged.iter().all(|r| r.0 != "out_of_place_update"),
        "{flagged:?}"
    );
}

/// Copies `from` into `to`, recursively.
fn copy_dir(from: &Path, to: &Path) {
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

#[test]
fn gitignore_is_honoured_outside_a_git_repository() {
    let dir = std::env::temp_dir().join(format!("gpuscope-lint-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    copy_dir(&sample(), &dir);
    assert!(dir.join("src/ignored.rs").is_file() && dir.join(".gitignore").is_file());

    let ignored = lint(&dir, &["--format", "json"]);
    let files: BTreeSet<String> = json(&ignored)
        .iter()
        .map(|f| f["file"].as_str().unwrap().to_owned())
        .collect();
    assert!(!files.contains("src/ignored.rs"), "{files:?}");
    assert!(stdout(&lint(&dir, &[])).ends_with("in 4 files\n"));

    // Without the .gitignore the same file is linted (and is an error).
    std::fs::remove_file(dir.join(".gitignore")).unwrap();
    let linted = json(&lint(&dir, &["--format", "json"]));
    assert!(
        summary(&linted).contains(&row("forget_tensor", "deny", "src/ignored.rs", 3, 5)),
        "{linted:?}"
    );
    assert!(stdout(&lint(&dir, &[])).ends_with("in 5 files\n"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn list_rules_shows_configured_levels() {
    let output = lint(&sample(), &["--list-rules", "-D", "item_in_hot_loop"]);
    assert_eq!(code(&output), 0);
    let text = stdout(&output);
    for rule in gpuscope_lint::RULES {
        assert!(text.contains(rule.name), "{text}");
    }
    let level_of = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .map(str::to_owned)
    };
    assert_eq!(level_of("item_in_hot_loop").as_deref(), Some("deny"));
    assert_eq!(
        level_of("out_of_place_update").as_deref(),
        Some("warn"),
        "from the sample's gpuscope.toml"
    );
    assert_eq!(level_of("graph_accumulation").as_deref(), Some("warn"));
}

#[test]
fn works_as_a_cargo_subcommand() {
    // `cargo gpuscope lint ..` runs `cargo-gpuscope gpuscope lint ..`.
    let out = Command::new(env!("CARGO_BIN_EXE_cargo-gpuscope"))
        .args(["gpuscope", "lint", "--format", "json"])
        .arg(sample())
        .output()
        .unwrap();
    let direct = lint(&sample(), &["--format", "json"]);
    assert_eq!(code(&out), code(&direct), "{}", stderr(&out));
    assert_eq!(json(&out).len(), json(&direct).len());
    assert!(!json(&out).is_empty());
}

/// A fresh temporary directory for one test.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gpuscope-lint-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A file with one `forget_tensor` error, to show that the other files are still linted.
const LEAKY: &str = "fn f(t: Tensor) {\n    std::mem::forget(t);\n}\n";

fn rules_of(findings: &[Value]) -> Vec<(String, String)> {
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

#[test]
fn a_file_that_is_not_utf8_is_an_error_naming_where_and_the_rest_is_linted() {
    let dir = temp_dir("utf8");
    std::fs::write(dir.join("good.rs"), LEAKY).unwrap();
    std::fs::write(dir.join("latin1.rs"), b"// caf\xe9\nfn f() {}\n").unwrap();
    let output = lint(&dir, &["--format", "json"]);
    assert_eq!(code(&output), 1);
    let findings = json(&output);
    assert_eq!(
        rules_of(&findings),
        [
            ("good.rs".to_owned(), "forget_tensor".to_owned()),
            ("latin1.rs".to_owned(), "not_utf8".to_owned())
        ]
    );
    let bad = &findings[1];
    // The first invalid byte follows `// caf`: line 1, column 7.
    assert_eq!(
        (bad["line"].as_u64(), bad["column"].as_u64()),
        (Some(1), Some(7))
    );
    assert!(
        bad["message"]
            .as_str()
            .unwrap()
            .contains("is not valid UTF-8"),
        "{bad}"
    );
    let text = stdout(&lint(&dir, &[]));
    assert!(
        text.contains("error[not_utf8]: `latin1.rs` is not valid UTF-8"),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let dir = temp_dir("deep");
    std::fs::write(dir.join("good.rs"), LEAKY).unwrap();
    let parens = format!(
        "fn f() -> u8 {{\n    {}1{}\n}}\n",
        "(".repeat(50_000),
        ")".repeat(50_000)
    );
    std::fs::write(dir.join("parens.rs"), parens).unwrap();
    let chain = format!("fn g() -> u8 {{\n    1{}\n}}\n", " + 1".repeat(200_000));
    std::fs::write(dir.join("chain.rs"), chain).unwrap();
    let unary = format!("fn h() -> bool {{\n    {}true\n}}\n", "!".repeat(100_000));
    std::fs::write(dir.join("unary.rs"), unary).unwrap();
    // Deep, but under the limit: parsed and linted on a thread with a deep enough stack.
    let fine = format!(
        "fn k(t: Tensor) -> u8 {{\n    std::mem::forget(t);\n    {}1{}\n}}\n",
        "(".repeat(2_500),
        ")".repeat(2_500)
    );
    std::fs::write(dir.join("fine.rs"), fine).unwrap();
    let output = lint(&dir, &["--format", "json", "-j", "2"]);
    assert_eq!(code(&output), 1, "{}", stderr(&output));
    let findings = json(&output);
    assert_eq!(
        rules_of(&findings),
        [
            ("chain.rs".to_owned(), "too_deep".to_owned()),
            ("fine.rs".to_owned(), "forget_tensor".to_owned()),
            ("good.rs".to_owned(), "forget_tensor".to_owned()),
            ("parens.rs".to_owned(), "too_deep".to_owned()),
            ("unary.rs".to_owned(), "too_deep".to_owned()),
        ]
    );
    let parens = &findings[3];
    assert_eq!(parens["line"].as_u64(), Some(2));
    assert!(
        parens["message"]
            .as_str()
            .unwrap()
            .contains("deeper than the 3000 levels"),
        "{parens}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_50_mb_file_is_an_error_and_the_rest_is_linted() {
    let dir = temp_dir("huge");
    std::fs::write(dir.join("good.rs"), LEAKY).unwrap();
    let file = std::fs::File::create(dir.join("huge.rs")).unwrap();
    file.set_len(50 << 20).unwrap();
    drop(file);
    let output = lint(&dir, &["--format", "json"]);
    assert_eq!(code(&output), 1);
    let findings = json(&output);
    assert_eq!(
        rules_of(&findings),
        [
            ("good.rs".to_owned(), "forget_tensor".to_owned()),
            ("huge.rs".to_owned(), "too_large".to_owned())
        ]
    );
    let message = findings[1]["message"].as_str().unwrap();
    assert!(
        message.contains("50.0 MiB, larger than the 16 MiB"),
        "{message}"
    );
    assert!(
        findings[1]["help"]
            .as_str()
            .unwrap()
            .contains("--max-file-size")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(unix)]
#[test]
fn a_symbolic_link_loop_is_reported_and_the_rest_is_linted() {
    let dir = temp_dir("loop");
    std::fs::create_dir_all(dir.join("src/inner")).unwrap();
    std::fs::write(dir.join("src/inner/good.rs"), LEAKY).unwrap();
    std::os::unix::fs::symlink("..", dir.join("src/inner/up")).unwrap();
    // A link to a file is followed (and the file linted once).
    std::os::unix::fs::symlink("inner/good.rs", dir.join("src/alias.rs")).unwrap();
    let output = lint(&dir, &["--format", "json"]);
    assert_eq!(code(&output), 1);
    let findings = json(&output);
    let rules = rules_of(&findings);
    assert_eq!(
        rules.iter().filter(|r| r.1 == "forget_tensor").count(),
        1,
        "{rules:?}"
    );
    let walk: Vec<&Value> = findings.iter().filter(|f| f["rule"] == "walk").collect();
    assert_eq!(walk.len(), 1, "{rules:?}");
    assert!(
        walk[0]["file"].as_str().unwrap().ends_with("up"),
        "{}",
        walk[0]
    );
    assert!(
        walk[0]["message"]
            .as_str()
            .unwrap()
            .contains("symbolic link loop"),
        "{}",
        walk[0]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn unknown_rule_names_are_errors_everywhere() {
    let dir = temp_dir("unknown");
    // In an attribute: an error finding at the name, the file's other findings kept.
    std::fs::write(
        dir.join("attr.rs"),
        "#[gpuscope::lints::allow(forget_tensors)]\nfn f(t: Tensor) {\n    std::mem::forget(t);\n}\n",
    )
    .unwrap();
    let output = lint(&dir, &["--format", "json"]);
    assert_eq!(code(&output), 1);
    let findings = json(&output);
    let unknown = &findings[0];
    assert_eq!(unknown["rule"], "unknown_rule");
    assert_eq!(
        (unknown["line"].as_u64(), unknown["column"].as_u64()),
        (Some(1), Some(26))
    );
    let message = unknown["message"].as_str().unwrap();
    assert!(
        message.contains("did you mean `forget_tensor`?"),
        "{message}"
    );
    assert!(
        message.contains("known rules: forget_tensor, static_escape"),
        "{message}"
    );
    assert_eq!(findings[1]["rule"], "forget_tensor");
    // On the command line and in the config: a usage error listing the known rules.
    let flag = lint(&dir, &["-W", "mystery"]);
    assert_eq!(code(&flag), 2);
    assert!(
        stderr(&flag)
            .contains("-W mystery: unknown lint rule `mystery` (known rules: forget_tensor")
    );
    std::fs::write(dir.join("gpuscope.toml"), "[lints]\n\nmystery = \"warn\"\n").unwrap();
    let config = lint(&dir, &[]);
    assert_eq!(code(&config), 2);
    assert!(
        stderr(&config).contains("gpuscope.toml:3:1: unknown lint rule `mystery` (known rules:"),
        "{}",
        stderr(&config)
    );
    let explain = lint(&dir, &["--explain", "forget_tensr"]);
    assert_eq!(code(&explain), 2);
    assert!(stderr(&explain).contains("did you mean `forget_tensor`?"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_broken_config_is_an_error_naming_file_line_and_column() {
    let dir = temp_dir("config");
    std::fs::write(dir.join("a.rs"), LEAKY).unwrap();
    for (text, expected) in [
        (
            "[lints]\nforget_tensor = \"warn\n",
            "error: gpuscope.toml:2:22: invalid TOML",
        ),
        (
            "[lints]\nforget_tensor = 2\n",
            "error: gpuscope.toml:2:17: [lints] forget_tensor = 2: expected a string",
        ),
        ("[lint]\n", "error: gpuscope.toml:1:2: unknown table `lint`"),
        (
            "[paths.\"src/[\"]\n",
            "error: gpuscope.toml:1:8: [paths] `src/[` is not a glob",
        ),
    ] {
        std::fs::write(dir.join("gpuscope.toml"), text).unwrap();
        let output = lint(&dir, &[]);
        assert_eq!(code(&output), 2, "{text}");
        assert!(stdout(&output).is_empty());
        let err = stderr(&output);
        assert!(err.contains(expected), "{text}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn path_tables_in_the_config_set_levels_per_file() {
    let dir = temp_dir("paths");
    std::fs::create_dir_all(dir.join("examples")).unwrap();
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("examples/demo.rs"), LEAKY).unwrap();
    std::fs::write(dir.join("src/lib.rs"), LEAKY).unwrap();
    std::fs::write(
        dir.join("gpuscope.toml"),
        "[lints]\nforget_tensor = \"warn\"\n\n[paths.\"examples/**\"]\nforget_tensor = \"allow\"\n",
    )
    .unwrap();
    let output = lint(&dir, &["--format", "json"]);
    assert_eq!(code(&output), 0, "warn only");
    let rows = summary(&json(&output));
    assert_eq!(rows, [row("forget_tensor", "warn", "src/lib.rs", 2, 5)]);
    // The command line comes after the config.
    let denied = summary(&json(&lint(
        &dir,
        &["--format", "json", "-D", "forget_tensor"],
    )));
    assert_eq!(denied.len(), 2, "{denied:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn attributes_in_the_code_set_levels_as_the_macros_read_them() {
    let dir = temp_dir("attrs");
    std::fs::write(
        dir.join("lib.rs"),
        r#"
static CACHE: std::sync::Mutex<Vec<Tensor>> = std::sync::Mutex::new(Vec::new());

#[gpu_scope(name = "x", allow(forget_tensor), deny(empty_cache_in_loop))]
fn scoped(t: Tensor, alloc: &Allocator) {
    std::mem::forget(t);
    loop { alloc.empty_cache(); }
}

#[gpuscope::lints::allow(static_escape)]
impl Cache {
    fn fill(&self, t: Tensor) { CACHE.lock().unwrap().push(t); }
}

#[gpuscope::lints::allow(forget_tensor)]
mod quiet {
    fn f(t: Tensor) { std::mem::forget(t); }
}

#[gpu_scope]
fn statement(t: Tensor, u: Tensor) {
    #[gpuscope::lints::allow(forget_tensor)]
    std::mem::forget(t);
    std::mem::forget(u);
}
"#,
    )
    .unwrap();
    let rows = summary(&json(&lint(&dir, &["--format", "json"])));
    assert_eq!(
        rows,
        [
            row("empty_cache_in_loop", "deny", "lib.rs", 7, 12),
            row("forget_tensor", "deny", "lib.rs", 24, 5),
        ]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn explain_prints_a_rule_s_documentation() {
    for rule in gpuscope_lint::RULES {
        let output = lint(&sample(), &["--explain", rule.name]);
        assert_eq!(code(&output), 0);
        assert_eq!(stdout(&output), rule.docs);
    }
}

#[test]
fn the_rules_page_is_generated_from_the_rules_docs() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/lints.md");
    let page = gpuscope_lint::rules_page();
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &page).unwrap();
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        written == page,
        "docs/lints.md is out of date: run `UPDATE_EXPECT=1 cargo test -p gpuscope-cli --test lint_cli rules_page`"
    );
}
