//! Linting one file: read it (up to a size limit), check it is UTF-8, run
//! [`gpuscope_lint::lint_source`], and turn every outcome into [`Diag`]s, so that a file that
//! cannot be linted is reported like a finding (with a pseudo-rule: `parse`, `not_utf8`,
//! `too_deep`, `too_large`, `unreadable`, `walk`, `internal`) and the other files go on.

use std::path::Path;

use std::collections::HashMap;

use gpuscope_lint::{
    Diagnostic, FileFacts, Level, Levels, SourceError, lint_source, lint_source_in_package,
};

/// A finding as printed: positions resolved (1-based line and column, in characters), owned
/// text, and the source line it starts on (so that the file's text need not be kept).
#[derive(Clone, Debug)]
pub struct Diag {
    pub rule: &'static str,
    pub level: Level,
    pub line: usize,
    pub column: usize,
    pub end_line: usize,
    pub end_column: usize,
    pub message: String,
    pub help: String,
    pub note: Option<String>,
    /// The text of line `line` (empty when there is no source to show).
    pub source_line: String,
}

/// The outcome for one file or walk problem.
#[derive(Debug)]
pub struct FileReport {
    /// The path as shown: as walked, without a leading `./`.
    pub file: String,
    pub diags: Vec<Diag>,
}

/// The pseudo-rules of problems that are not a rule's findings, with what each means.
pub const PSEUDO_RULES: &[(&str, &str)] = &[
    (
        "parse",
        "the file does not parse as Rust, so it was not linted",
    ),
    ("not_utf8", "the file is not UTF-8, so it was not linted"),
    (
        "too_deep",
        "the file nests expressions deeper than gpuscope lint parses, so it was not linted",
    ),
    (
        "too_large",
        "the file is larger than --max-file-size, so it was not linted",
    ),
    ("unreadable", "the file could not be read"),
    (
        "walk",
        "a path could not be walked (a symbolic link loop, an unreadable directory)",
    ),
    ("internal", "gpuscope lint failed on the file (a bug)"),
    (
        gpuscope_lint::UNKNOWN_RULE,
        "an attribute names a lint rule that does not exist",
    ),
];

/// The path as shown to the user.
pub fn display_path(path: &Path) -> String {
    let shown = path.strip_prefix(".").unwrap_or(path);
    let text = shown.to_string_lossy();
    if text.is_empty() {
        path.to_string_lossy().into_owned()
    } else {
        text.into_owned()
    }
}

/// An error about the whole file, at `line`:`column` when known (else 1:1).
pub fn file_error(
    rule: &'static str,
    at: Option<(usize, usize)>,
    message: String,
    help: &str,
    source_line: String,
) -> Diag {
    let (line, column) = at.unwrap_or((1, 1));
    Diag {
        rule,
        level: Level::Deny,
        line,
        column,
        end_line: line,
        end_column: column,
        message,
        help: help.to_owned(),
        note: None,
        source_line,
    }
}

/// What linting a file of a package leaves for the package's other files, with the
/// source lines where those may report.
#[derive(Debug)]
pub struct Left {
    pub facts: FileFacts,
    pub lines: HashMap<usize, String>,
}

/// Lints the file at `path` at `levels`, reading at most `max_bytes`; as a file of a
/// package (`in_package`), also what that leaves for the package's other files.
pub fn lint_path(
    path: &Path,
    levels: &Levels,
    max_bytes: u64,
    in_package: bool,
) -> (FileReport, Option<Left>) {
    let file = display_path(path);
    let (diags, left) = match read(path, &file, max_bytes) {
        Ok(source) if in_package => lint_text_in_package(&file, &source, levels),
        Ok(source) => (lint_text(&file, &source, levels), None),
        Err(diag) => (vec![*diag], None),
    };
    (FileReport { file, diags }, left)
}

/// The file's text, or the error saying why it is not linted.
fn read(path: &Path, file: &str, max_bytes: u64) -> Result<String, Box<Diag>> {
    let unreadable = |e: std::io::Error| {
        Box::new(file_error(
            "unreadable",
            None,
            format!("cannot read `{file}`: {e}"),
            "check that the file exists and is readable",
            String::new(),
        ))
    };
    let size = std::fs::metadata(path).map_err(unreadable)?.len();
    if size > max_bytes {
        return Err(Box::new(file_error(
            "too_large",
            None,
            format!(
                "`{file}` is {:.1} MiB, larger than the {} MiB that `gpuscope lint` reads: not linted",
                size as f64 / f64::from(1 << 20),
                max_bytes >> 20
            ),
            "raise the limit with `--max-file-size MIB`, or leave the file out (`.gitignore`, `.ignore`)",
            String::new(),
        )));
    }
    let bytes = std::fs::read(path).map_err(unreadable)?;
    String::from_utf8(bytes).map_err(|e| {
        let bytes = e.as_bytes();
        let valid = e.utf8_error().valid_up_to();
        let before = std::str::from_utf8(&bytes[..valid]).unwrap_or_default();
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        Box::new(file_error(
            "not_utf8",
            Some((line, column)),
            format!("`{file}` is not valid UTF-8 (byte {valid} is not): not linted"),
            "save the file as UTF-8",
            before[line_start..].to_owned(),
        ))
    })
}

/// A finding as printed, `source_line` the text of its line.
pub fn diag(d: Diagnostic, source_line: String) -> Diag {
    Diag {
        rule: d.rule,
        level: d.level,
        line: d.start.line,
        column: d.start.column,
        end_line: d.end.line,
        end_column: d.end.column,
        source_line,
        message: d.message,
        help: d.help,
        note: d.note,
    }
}

/// The text of line `n` (1-based) of `source`.
fn line_of(source: &str, n: usize) -> String {
    source
        .lines()
        .nth(n.saturating_sub(1))
        .unwrap_or("")
        .to_owned()
}

/// Lints `source`, the text of `file`.
pub fn lint_text(file: &str, source: &str, levels: &Levels) -> Vec<Diag> {
    match lint_source(source, levels) {
        Ok(found) => found
            .into_iter()
            .map(|d| {
                let line = line_of(source, d.start.line);
                diag(d, line)
            })
            .collect(),
        Err(e) => source_error(file, source, e),
    }
}

/// [`lint_text`] for a file of a package, and what it leaves for the package's other files.
fn lint_text_in_package(file: &str, source: &str, levels: &Levels) -> (Vec<Diag>, Option<Left>) {
    match lint_source_in_package(source, levels) {
        Ok((found, facts)) => {
            let diags = found
                .into_iter()
                .map(|d| {
                    let line = line_of(source, d.start.line);
                    diag(d, line)
                })
                .collect();
            let lines = facts
                .read_lines()
                .map(|n| (n, line_of(source, n)))
                .collect();
            (diags, Some(Left { facts, lines }))
        }
        Err(e) => (source_error(file, source, e), None),
    }
}

/// Why `source`, the text of `file`, was not linted, as a diagnostic.
fn source_error(file: &str, source: &str, error: SourceError) -> Vec<Diag> {
    let line_of = |n: usize| line_of(source, n);
    match error {
        SourceError::Parse {
            start,
            end,
            message,
        } => vec![Diag {
            end_line: end.line,
            end_column: end.column,
            ..file_error(
                "parse",
                Some((start.line, start.column)),
                format!("`{file}` does not parse: {message}"),
                "fix the syntax error; the rest of this file was not linted",
                line_of(start.line),
            )
        }],
        e @ SourceError::TooDeep { at, .. } => vec![file_error(
            "too_deep",
            Some((at.line, at.column)),
            format!("`{file}` {e}"),
            "split the expression (or leave generated code out with `.gitignore` / `.ignore`)",
            line_of(at.line),
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_keep_their_source_line() {
        let diags = lint_text(
            "a.rs",
            "fn f(t: Tensor) {\n    std::mem::forget(t);\n}\n",
            &Levels::default(),
        );
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].source_line, "    std::mem::forget(t);");
        assert_eq!(
            (diags[0].line, diags[0].column, diags[0].end_column),
            (2, 5, 24)
        );
    }

    #[test]
    fn parse_and_depth_errors_are_diagnostics() {
        let parse = lint_text(
            "a.rs",
            "fn f() {\n    let y = 1\n    y\n}\n",
            &Levels::default(),
        );
        assert_eq!(
            (parse[0].rule, parse[0].line, parse[0].column),
            ("parse", 3, 5)
        );
        let deep = format!("fn f() {{ {}1{} }}", "(".repeat(4000), ")".repeat(4000));
        let too_deep = lint_text("a.rs", &deep, &Levels::default());
        assert_eq!(too_deep[0].rule, "too_deep");
        assert!(
            too_deep[0].message.starts_with("`a.rs` nests about"),
            "{}",
            too_deep[0].message
        );
    }
}
