//! The output: the text snapshot, independence from the thread count, the JSON
//! schema, SARIF 2.1.0, exit codes, `--list-rules`, `--explain`, the rules page, and
//! running as a cargo subcommand.

use super::*;

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
