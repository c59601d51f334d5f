//! [`lint_source`]: the lint of one source text, from text to [`Diagnostic`]s, safe on any
//! input: text that does not lex or parse is a [`SourceError`], and so is text nesting
//! deeper than [`MAX_NESTING`] (parsing, walking and dropping a syntax tree all recurse,
//! so a file of `((((..))))` or `a + a + .. + a` thousands deep would otherwise overflow
//! the stack).
//!
//! In order: the text is lexed; one pass over its bytes ([`scan`]) bounds the nesting from
//! above (as [`nesting`] does on the tokens, which runs only past the limit, for the exact
//! figure and the error's position) and looks for the rules' trigger words ([`triggers`]);
//! the tokens are parsed (where they do not, once more with Rust 2015's anonymous
//! trait-method parameters named `_`: [`anonymous_params`]); the rules walk the functions
//! that hold a trigger word (or the whole file, where something outside a function can change
//! what it reports).

mod anonymous_params;
mod nesting;
mod scan;
mod triggers;

use std::str::FromStr;

use proc_macro2::TokenStream;

use crate::entry::{lint_file_at_lines, lint_file_in_package};
use crate::finding::{Diagnostic, Finding, Position};
use crate::package::FileFacts;
use crate::{Levels, lint_file};

use triggers::{Triggers, Walk};

/// The deepest nesting [`lint_source`] parses. Real code stays far below: the deepest of
/// the 6,600 files of the reviewed corpus (`tests/data/lint-corpus/`) estimates at 432.
pub const MAX_NESTING: usize = 3_000;

/// The stack a thread needs to run [`lint_source`] on any input: [`MAX_NESTING`] levels of
/// parenthesised expressions take between 32 and 64 MiB in a debug build (less in release);
/// this is four times that. It is address space, not memory, until it is used.
pub const STACK_SIZE: usize = 256 << 20;

/// Why a source text was not linted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// The text does not lex or parse as a Rust file.
    #[error("does not parse: {message}")]
    Parse {
        /// Where the error starts.
        start: Position,
        /// Where it ends.
        end: Position,
        /// What syn said.
        message: String,
    },
    /// The text nests deeper than [`MAX_NESTING`].
    #[error(
        "nests about {depth} levels deep (from line {}, column {}), deeper than the {limit} levels `gpuscope lint` parses: not linted, so that it cannot overflow its stack",
        at.line,
        at.column
    )]
    TooDeep {
        /// Where the deepest point starts.
        at: Position,
        /// The estimated depth.
        depth: usize,
        /// [`MAX_NESTING`].
        limit: usize,
    },
}

/// Lints the Rust source `source` (a whole file) at `levels`; findings come back with their
/// positions resolved, ordered by position.
///
/// Safe on any text, on a thread with a stack of [`STACK_SIZE`] (the main thread's 8 MiB is
/// enough for code nesting up to a few hundred levels). Span positions live in a
/// thread-local source map, which this function clears before it returns, so memory stays
/// bounded by the largest text; it must not be called from a procedural macro, or on a
/// thread holding other `proc_macro2` spans that it still needs.
///
/// ```
/// use gpuscope_lint::{Levels, SourceError, lint_source};
///
/// let found = lint_source("fn f(t: Tensor) { std::mem::forget(t); }", &Levels::default()).unwrap();
/// assert_eq!(found[0].rule, "forget_tensor");
/// assert_eq!((found[0].start.line, found[0].start.column), (1, 19));
///
/// let deep = format!("fn f() {{ {}1{} }}", "(".repeat(5000), ")".repeat(5000));
/// assert!(matches!(lint_source(&deep, &Levels::default()), Err(SourceError::TooDeep { .. })));
/// assert!(matches!(lint_source("fn f( {", &Levels::default()), Err(SourceError::Parse { .. })));
/// ```
///
/// # Errors
/// [`SourceError::Parse`] when the text is not a Rust file, [`SourceError::TooDeep`] when
/// it nests deeper than [`MAX_NESTING`].
pub fn lint_source(source: &str, levels: &Levels) -> Result<Vec<Diagnostic>, SourceError> {
    let result = lint_tokens(source, levels);
    proc_macro2::extra::invalidate_current_thread_spans();
    result
}

fn lint_tokens(source: &str, levels: &Levels) -> Result<Vec<Diagnostic>, SourceError> {
    let (file, walk) = parse(source, levels)?;
    let findings = match walk {
        None | Some(Walk::Everything) => lint_file(&file, levels),
        Some(Walk::Lines(lines)) => lint_file_at_lines(&file, levels, &lines),
        Some(Walk::Nothing) => without_triggers(&file, levels),
    };
    Ok(findings.into_iter().map(Diagnostic::resolve).collect())
}

/// The syntax tree of `source`, and which of its functions the rules enabled at `levels`
/// need to walk (`None`: all of them, as some rule has no trigger words).
fn parse(source: &str, levels: &Levels) -> Result<(syn::File, Option<Walk>), SourceError> {
    let text = without_shebang(source.strip_prefix('\u{feff}').unwrap_or(source));
    let tokens = TokenStream::from_str(&text).map_err(|e| {
        let span = e.span();
        SourceError::Parse {
            start: Position::from_line_column(span.start()),
            end: Position::from_line_column(span.end()),
            message: e.to_string(),
        }
    })?;
    let mut triggers = Triggers::of(levels);
    let estimate = scan::depth(&text, |start, end| {
        if let Some(triggers) = &mut triggers {
            triggers.ident(&text, start, end);
        }
    });
    let tokens = if estimate > MAX_NESTING {
        // The exact figure, and where: the scan may count a few more tokens.
        let (tokens, depth, at) = nesting::nesting(tokens);
        if depth > MAX_NESTING {
            return Err(SourceError::TooDeep {
                at,
                depth,
                limit: MAX_NESTING,
            });
        }
        tokens
    } else {
        tokens
    };
    let file: syn::File = match syn::parse2(tokens) {
        Ok(file) => file,
        // Rust 2015's anonymous trait-method parameters, named `_` on the text's tokens
        // lexed again (the same text lexed before, so it lexes and nests as it did).
        Err(e) => TokenStream::from_str(&text)
            .ok()
            .and_then(anonymous_params::named)
            .and_then(|named| syn::parse2(named).ok())
            .ok_or_else(|| SourceError::Parse {
                start: Position::from_line_column(e.span().start()),
                end: Position::from_line_column(e.span().end()),
                message: e.to_string(),
            })?,
    };
    let walk = triggers.map(|t| t.walk(&text));
    Ok((file, walk))
}

/// [`lint_source`] for a file of a crate whose other files are linted too: also what
/// [`package_findings`](crate::package_findings) needs of the file to find the reads that
/// callers in the crate's other files repeat (`item_in_hot_loop`'s callers' loops across
/// files). The findings it returns are those [`lint_source`] returns.
///
/// # Errors
/// As [`lint_source`].
pub fn lint_source_in_package(
    source: &str,
    levels: &Levels,
) -> Result<(Vec<Diagnostic>, FileFacts), SourceError> {
    let result = parse(source, levels).map(|(file, walk)| {
        let (findings, deferred, calls) = match walk {
            None | Some(Walk::Everything) => lint_file_in_package(&file, levels, None, true),
            Some(Walk::Lines(lines)) => lint_file_in_package(&file, levels, Some(&lines), true),
            Some(Walk::Nothing) => {
                let found = lint_file_in_package(&file, levels, None, cfg!(debug_assertions));
                debug_assert!(
                    found.0.is_empty() && found.1.is_empty(),
                    "a finding in a file without any of the trigger words of the rules enabled"
                );
                found
            }
        };
        let diagnostics = findings.into_iter().map(Diagnostic::resolve).collect();
        (diagnostics, FileFacts::new(calls, deferred))
    });
    proc_macro2::extra::invalidate_current_thread_spans();
    result
}

/// The upper estimate of how deep a syntax tree parsed from `source` nests, as
/// [`lint_source`] computes it to decide whether to parse; `None` when `source` does not
/// lex.
///
/// ```
/// use gpuscope_lint::nesting_depth;
///
/// assert!(nesting_depth("fn f() { a(b(c)) }").unwrap() < 10);
/// assert!(nesting_depth(&format!("fn f() {{ 1{} }}", " + 1".repeat(500))).unwrap() > 500);
/// assert_eq!(nesting_depth("fn f( {"), None);
/// ```
pub fn nesting_depth(source: &str) -> Option<usize> {
    let lexed = TokenStream::from_str(source).is_ok();
    proc_macro2::extra::invalidate_current_thread_spans();
    lexed.then(|| scan::depth(source, |_, _| {}))
}

/// `source` with a first line `#!...` (not `#![`) blanked out, keeping positions, as rustc
/// and `syn::parse_file` skip it.
fn without_shebang(source: &str) -> std::borrow::Cow<'_, str> {
    if source.starts_with("#!") && !source[2..].trim_start().starts_with('[') {
        let end = source.find('\n').unwrap_or(source.len());
        let mut text = " ".repeat(end);
        text.push_str(&source[end..]);
        std::borrow::Cow::Owned(text)
    } else {
        std::borrow::Cow::Borrowed(source)
    }
}

/// The findings of a file in which no enabled rule's trigger word appears: none. Debug
/// builds walk it anyway and panic if that is wrong, so that the tests and the fuzzer
/// check every rule's `triggers`.
fn without_triggers(file: &syn::File, levels: &Levels) -> Vec<Finding> {
    if cfg!(debug_assertions) {
        let found = lint_file(file, levels);
        assert!(
            found.is_empty(),
            "`{}` fired on a file without any of the trigger words of the rules enabled: add the word its finding needs to its `Check::triggers`",
            found[0].rule
        );
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_deep_text_is_an_error_naming_where() {
        let src = format!(
            "fn f() {{\n    let x = {}1{};\n}}",
            "[".repeat(4_000),
            "]".repeat(4_000)
        );
        match lint_source(&src, &Levels::default()) {
            Err(SourceError::TooDeep { at, depth, limit }) => {
                assert_eq!(at.line, 2);
                assert!(depth > limit && limit == MAX_NESTING);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn lex_and_parse_errors_name_the_position() {
        match lint_source("fn f() {\n    let s = \"open;\n", &Levels::default()) {
            Err(SourceError::Parse { start, message, .. }) => {
                assert_eq!(start.line, 2, "{message}");
            }
            other => panic!("{other:?}"),
        }
        match lint_source("fn f() {\n    let y = 1\n    y\n}", &Levels::default()) {
            Err(SourceError::Parse { start, message, .. }) => {
                assert_eq!((start.line, start.column), (3, 5));
                assert!(message.contains("expected `;`"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_2015_file_with_anonymous_trait_parameters_is_linted() {
        // wyrm's shape: a crate of the 2015 edition declaring `fn set_value(&self, T);`.
        let src = "pub trait DataInput<T> {\n    fn set_value(&self, T);\n}\n\
                   fn f(t: Tensor) { std::mem::forget(t); }\n";
        let found = lint_source(src, &Levels::default()).expect("parses as rustc 2015 does");
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].rule, "forget_tensor");
        assert_eq!((found[0].start.line, found[0].start.column), (4, 19));
        // Not a licence for anything: an unnamed parameter outside a trait still fails.
        let outside = "impl S {\n    fn set_value(&self, T) {}\n}\n";
        match lint_source(outside, &Levels::default()) {
            Err(SourceError::Parse { start, .. }) => assert_eq!(start.line, 2),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn shebang_and_bom_are_skipped_with_positions_kept() {
        let src =
            "\u{feff}#!/usr/bin/env run-cargo-script\nfn f(t: Tensor) { std::mem::forget(t); }\n";
        let found = lint_source(src, &Levels::default()).unwrap();
        assert_eq!((found[0].start.line, found[0].start.column), (2, 19));
        let inner = "#![allow(dead_code)]\nfn f() {}\n";
        assert!(lint_source(inner, &Levels::default()).unwrap().is_empty());
    }
}
