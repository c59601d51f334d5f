//! Levels from configuration: config files and their errors, unknown rule names, path
//! tables, `.gitignore`, and attributes in the code.

use super::*;

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
fn hidden_directories_are_skipped_unless_named() {
    let dir = temp_dir("hidden");
    std::fs::create_dir_all(dir.join(".plan")).unwrap();
    std::fs::write(
        dir.join(".plan/leak.rs"),
        "use gpuscope::Tensor;\nfn f(t: Tensor) {\n    std::mem::forget(t);\n}\n",
    )
    .unwrap();
    std::fs::write(dir.join("lib.rs"), "fn ok() {}\n").unwrap();
    assert!(stdout(&lint(&dir, &[])).ends_with("in 1 file\n"));
    // Named, a hidden directory is linted.
    let named = json(&lint(&dir, &["--format", "json", ".plan"]));
    assert!(
        summary(&named).contains(&row("forget_tensor", "deny", ".plan/leak.rs", 3, 5)),
        "{named:?}"
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
