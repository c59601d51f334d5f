//! Bad input: a file that does not parse, is not UTF-8, nests too deep or is too large,
//! and a symbolic link loop; each is an error naming where, and the rest is linted.

use super::*;

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
