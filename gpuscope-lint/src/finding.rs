//! [`Rule`] (a rule's name, default level and summary) and [`Finding`] (one report of a rule).

use proc_macro2::Span;

use crate::Level;

/// A lint rule's fixed description. Every rule is listed in [`RULES`](crate::RULES).
///
/// ```
/// use gpuscope_lint::{Level, RULES, rule};
///
/// let forget = rule("forget_tensor").expect("a known rule");
/// assert_eq!(forget.default, Level::Deny);
/// assert!(RULES.iter().any(|r| r.name == "graph_accumulation" && r.default == Level::Warn));
/// assert!(rule("no_such_rule").is_none());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The rule's name, as written in `gpuscope.toml` and shown in diagnostics (`error[forget_tensor]`).
    pub name: &'static str,
    /// The level the rule has unless configured otherwise.
    pub default: Level,
    /// One line saying what the rule catches.
    pub summary: &'static str,
}

/// One place where a rule fired.
///
/// `span` covers the offending expression (or, for a loop, the loop's head); its
/// [`start`](proc_macro2::Span::start) is the position the command line reports. Outside a
/// procedural macro (the `span-locations` feature of `proc-macro2` is on) the position is
/// real: 1-based line, 0-based column in characters.
///
/// ```
/// use gpuscope_lint::{Level, Levels, lint_file};
///
/// let file: syn::File = syn::parse_str("fn f(t: Tensor) {\n    std::mem::forget(t);\n}").unwrap();
/// let findings = lint_file(&file, &Levels::default());
/// let finding = &findings[0];
/// assert_eq!((finding.rule, finding.level), ("forget_tensor", Level::Deny));
/// let start = finding.span.start();
/// assert_eq!((start.line, start.column), (2, 4));
/// assert!(finding.help.contains("drop"));
/// ```
#[derive(Clone, Debug)]
pub struct Finding {
    /// The name of the rule that fired (one of [`RULES`](crate::RULES)).
    pub rule: &'static str,
    /// The rule's configured level: `Warn` or `Deny` (`Allow` findings are never returned).
    pub level: Level,
    /// Where: the offending expression.
    pub span: Span,
    /// What is wrong, in one line.
    pub message: String,
    /// What to write instead, in one line.
    pub help: String,
}
