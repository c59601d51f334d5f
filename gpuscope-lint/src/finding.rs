//! [`Rule`] (a rule's name, default level, summary and documentation), [`Finding`] (one
//! report of a rule, with spans) and [`Diagnostic`] (a finding with its positions resolved
//! to lines and columns, as [`lint_source`](crate::lint_source) returns them).

use proc_macro2::Span;

use crate::Level;

/// A lint rule's fixed description. Every rule is listed in [`RULES`](crate::RULES).
///
/// ```
/// use gpuscope_lint::{Level, RULES, rule};
///
/// let forget = rule("forget_tensor").expect("a known rule");
/// assert_eq!(forget.default, Level::Deny);
/// assert!(forget.docs.contains("### Example"));
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
    /// The rule's documentation in Markdown, as `gpuscope lint --explain RULE` prints it:
    /// what it does, why it is bad for GPU memory, an example that fires and its fix, and
    /// known problems (false negatives and false positives).
    pub docs: &'static str,
}

/// One place where a rule fired.
///
/// `span` is the first token of the offending expression (or, for a loop, of the loop's
/// head) and `end` its last token, so that a diagnostic can underline the whole of it (in a
/// procedural macro spans cannot be joined, so both are kept). Outside a procedural macro
/// (the `span-locations` feature of `proc-macro2` is on) positions are real: 1-based line,
/// 0-based column in characters.
///
/// ```
/// use gpuscope_lint::{Level, Levels, lint_file};
///
/// let file: syn::File = syn::parse_str("fn f(t: Tensor) {\n    std::mem::forget(t);\n}").unwrap();
/// let findings = lint_file(&file, &Levels::default());
/// let finding = &findings[0];
/// assert_eq!((finding.rule, finding.level), ("forget_tensor", Level::Deny));
/// let (start, end) = (finding.span.start(), finding.end.end());
/// assert_eq!((start.line, start.column), (2, 4));
/// assert_eq!((end.line, end.column), (2, 23));
/// assert!(finding.help.contains("drop"));
/// ```
#[derive(Clone, Debug)]
pub struct Finding {
    /// The name of the rule that fired (one of [`RULES`](crate::RULES)), or
    /// [`UNKNOWN_RULE`] for an attribute naming a rule that does not exist.
    pub rule: &'static str,
    /// The rule's configured level: `Warn` or `Deny` (`Allow` findings are never returned).
    pub level: Level,
    /// Where it starts: the first token of the offending expression.
    pub span: Span,
    /// Where it ends: the last token of the offending expression.
    pub end: Span,
    /// What is wrong, in one line.
    pub message: String,
    /// What to write instead, in one line.
    pub help: String,
    /// More context, when the rule has some (how to keep a value on purpose, ...).
    pub note: Option<String>,
}

/// A position in a source text: 1-based line, 1-based column counted in characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters (not bytes).
    pub column: usize,
}

impl Position {
    /// The position of a `proc_macro2` line/column (1-based line, 0-based column).
    pub fn from_line_column(at: proc_macro2::LineColumn) -> Self {
        Position {
            line: at.line.max(1),
            column: at.column + 1,
        }
    }
}

/// A [`Finding`] with its span resolved to positions, owning everything it needs: what
/// [`lint_source`](crate::lint_source) returns, and what can cross threads (spans cannot).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The rule (see [`Finding::rule`]).
    pub rule: &'static str,
    /// `Warn` or `Deny`.
    pub level: Level,
    /// The first character of the offending expression.
    pub start: Position,
    /// Just past its last character (exclusive).
    pub end: Position,
    /// What is wrong.
    pub message: String,
    /// What to write instead.
    pub help: String,
    /// More context, when there is some.
    pub note: Option<String>,
}

impl Diagnostic {
    /// Resolves `finding`'s spans. Only meaningful on the thread that parsed the source,
    /// outside a procedural macro.
    pub fn resolve(finding: Finding) -> Self {
        Diagnostic {
            rule: finding.rule,
            level: finding.level,
            start: Position::from_line_column(finding.span.start()),
            end: Position::from_line_column(finding.end.end()),
            message: finding.message,
            help: finding.help,
            note: finding.note,
        }
    }
}

/// The pseudo-rule of a finding about an attribute that names a rule that does not exist
/// (or a malformed level list): always an error.
pub const UNKNOWN_RULE: &str = "unknown_rule";

/// What the macros know about the function they lint.
///
/// Attributes written on the function (`#[no_grad]`, `#[gpu_scope]`, under any path) count
/// as well, so `FnContext::default()` is right for [`lint_file`](crate::lint_file)-style use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FnContext {
    /// The function is `#[no_grad]`: gradients are off in its body.
    pub no_grad: bool,
    /// The function is `#[gpu_scope]`: its tensors are freed when it returns.
    pub scoped: bool,
}
