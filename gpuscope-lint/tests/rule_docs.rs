//! Every rule's documentation is complete and its examples are right: the example fires
//! the rule, the fix does not.

use gpuscope_lint::{Level, Levels, RULES, lint_source};

/// The Rust code blocks of a Markdown section that starts after `marker`.
fn code_after<'a>(docs: &'a str, marker: &str) -> &'a str {
    let after = &docs[docs.find(marker).unwrap_or_else(|| panic!("no `{marker}`"))..];
    let start = after.find("```rust\n").expect("a rust code block") + "```rust\n".len();
    let end = after[start..].find("```").expect("the block ends") + start;
    &after[start..end]
}

fn fires(rule: &str, code: &str) -> usize {
    let mut levels = Levels::default();
    if levels.get(rule) == Some(Level::Allow) {
        levels.set(rule, Level::Warn).unwrap();
    }
    lint_source(code, &levels)
        .unwrap_or_else(|e| panic!("{rule}: the example does not parse: {e}\n{code}"))
        .iter()
        .filter(|d| d.rule == rule)
        .count()
}

#[test]
fn every_rule_has_the_sections_of_a_clippy_lint() {
    for rule in RULES {
        let docs = rule.docs;
        assert!(
            docs.starts_with(&format!("## `{}`\n", rule.name)),
            "{}",
            rule.name
        );
        assert!(
            docs.contains(&format!("Default level: **{}**", rule.default)),
            "{}: states its default level",
            rule.name
        );
        for section in [
            "### What it does",
            "### Why is this bad",
            "### Example",
            "Use instead:",
            "### Known problems",
        ] {
            assert!(docs.contains(section), "{}: no `{section}`", rule.name);
        }
    }
}

#[test]
fn every_example_fires_and_its_fix_does_not() {
    for rule in RULES {
        let example = code_after(rule.docs, "### Example");
        let fix = code_after(rule.docs, "Use instead:");
        assert!(
            fires(rule.name, example) >= 1,
            "{}: the example does not fire",
            rule.name
        );
        assert_eq!(fires(rule.name, fix), 0, "{}: the fix fires", rule.name);
    }
}
