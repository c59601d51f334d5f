//! [`lint_source`]: the lint of one source text, from text to [`Diagnostic`]s, safe on any
//! input: text that does not lex or parse is a [`SourceError`], and so is text nesting
//! deeper than [`MAX_NESTING`] (parsing, walking and dropping a syntax tree all recurse,
//! so a file of `((((..))))` or `a + a + .. + a` thousands deep would otherwise overflow
//! the stack).
//!
//! The nesting is estimated on the tokens before anything recurses, with an explicit stack
//! (the lexer and the token trees' destructor do not recurse either): at each delimiter
//! level, the tokens of the current statement or element so far (a segment ends at `;`,
//! `,`, or after a `{ .. }` that a new item, arm or statement follows) are added to those of
//! the levels around. Every syntax-tree level costs at least one token of its segment, so
//! this bounds the tree's depth from above.

use std::str::FromStr;

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};

use crate::finding::{Diagnostic, Position};
use crate::{Levels, lint_file};

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
    let text = without_shebang(source.strip_prefix('\u{feff}').unwrap_or(source));
    let tokens = TokenStream::from_str(&text).map_err(|e| {
        let span = e.span();
        SourceError::Parse {
            start: Position::from_line_column(span.start()),
            end: Position::from_line_column(span.end()),
            message: e.to_string(),
        }
    })?;
    let (tokens, depth, at) = nesting(tokens);
    if depth > MAX_NESTING {
        return Err(SourceError::TooDeep {
            at,
            depth,
            limit: MAX_NESTING,
        });
    }
    let file: syn::File = syn::parse2(tokens).map_err(|e| SourceError::Parse {
        start: Position::from_line_column(e.span().start()),
        end: Position::from_line_column(e.span().end()),
        message: e.to_string(),
    })?;
    let findings = lint_file(&file, levels);
    Ok(findings.into_iter().map(Diagnostic::resolve).collect())
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

/// An upper estimate of how deep a syntax tree parsed from `tokens` nests, and where the
/// deepest point starts (see the module documentation).
pub fn nesting_depth(source: &str) -> Option<usize> {
    let tokens = TokenStream::from_str(source).ok()?;
    let depth = nesting(tokens).1;
    proc_macro2::extra::invalidate_current_thread_spans();
    Some(depth)
}

/// The nesting estimate of `tokens` and where its deepest point starts, and the same tokens
/// back: they are moved out and rebuilt (iterating a shared token stream would copy every
/// token).
fn nesting(tokens: TokenStream) -> (TokenStream, usize, Position) {
    struct Level {
        tokens: proc_macro2::token_stream::IntoIter,
        /// The tokens seen so far, to rebuild the stream.
        out: Vec<TokenTree>,
        /// The group this level is the inside of (none for the top level).
        group: Option<(Delimiter, proc_macro2::Span)>,
        /// Tokens of the current segment at this level.
        segment: usize,
        /// The previous token was a `{ .. }` group.
        after_brace: bool,
        /// The previous tokens were `#` or `#!`: a bracket group now is an attribute.
        after_hash: bool,
        /// The previous token ended an attribute: the next one starts a new segment.
        after_attr: bool,
    }
    impl Level {
        fn new(tokens: TokenStream, group: Option<(Delimiter, proc_macro2::Span)>) -> Self {
            Level {
                tokens: tokens.into_iter(),
                out: Vec::new(),
                group,
                segment: 0,
                after_brace: false,
                after_hash: false,
                after_attr: false,
            }
        }
    }
    let mut stack = vec![Level::new(tokens, None)];
    let mut total = 0usize;
    // Where the deepest point starts is resolved to a line and column once, at the end:
    // the running maximum moves hundreds of times in a file.
    let mut deepest: (usize, Option<proc_macro2::Span>) = (0, None);
    loop {
        let level = stack.last_mut().expect("the top level is popped last");
        let Some(token) = level.tokens.next() else {
            let done = stack.pop().expect("not empty");
            total -= done.segment;
            let stream: TokenStream = done.out.into_iter().collect();
            match (done.group, stack.last_mut()) {
                (Some((delimiter, span)), Some(parent)) => {
                    let mut group = proc_macro2::Group::new(delimiter, stream);
                    group.set_span(span);
                    parent.out.push(TokenTree::Group(group));
                    continue;
                }
                _ => {
                    let at = deepest.1.map_or(Position { line: 1, column: 1 }, |span| {
                        Position::from_line_column(span.start())
                    });
                    return (stream, deepest.0, at);
                }
            }
        };
        let ends_segment = match &token {
            TokenTree::Punct(p) => {
                (p.as_char() == ';' || p.as_char() == ',') && p.spacing() == Spacing::Alone
            }
            _ => false,
        };
        if ends_segment {
            total -= level.segment;
            level.segment = 0;
            level.after_brace = false;
            level.after_attr = false;
            level.after_hash = false;
            level.out.push(token);
            continue;
        }
        // After `{ .. }`, an item, an arm or a statement starts a new segment; `else`, `as`,
        // `.`, `?` and operators continue the expression.
        let starts_new = level.after_attr
            || (level.after_brace
                && match &token {
                    TokenTree::Ident(i) => i != "else" && i != "as",
                    TokenTree::Literal(_) => true,
                    TokenTree::Punct(p) => p.as_char() == '#',
                    TokenTree::Group(g) => g.delimiter() == Delimiter::Parenthesis,
                });
        if starts_new {
            total -= level.segment;
            level.segment = 0;
        }
        level.segment += 1;
        total += 1;
        level.after_brace =
            matches!(&token, TokenTree::Group(g) if g.delimiter() == Delimiter::Brace);
        // An attribute (`#[..]`, `#![..]`, doc comments) is not part of what follows.
        level.after_attr = level.after_hash
            && matches!(&token, TokenTree::Group(g) if g.delimiter() == Delimiter::Bracket);
        level.after_hash = match &token {
            TokenTree::Punct(p) if p.as_char() == '#' => true,
            TokenTree::Punct(p) if p.as_char() == '!' => level.after_hash,
            _ => false,
        };
        if total > deepest.0 {
            deepest = (total, Some(token.span()));
        }
        match token {
            TokenTree::Group(group) => {
                let inner = group.stream();
                let meta = (group.delimiter(), group.span());
                drop(group);
                stack.push(Level::new(inner, Some(meta)));
            }
            other => level.out.push(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth(src: &str) -> usize {
        nesting_depth(src).unwrap()
    }

    #[test]
    fn estimates_bound_the_nesting_from_above() {
        assert!(depth("fn f() { a }") < 10);
        assert!(
            depth(&format!(
                "fn f() {{ {}1{} }}",
                "(".repeat(100),
                ")".repeat(100)
            )) >= 100
        );
        assert!(depth(&format!("fn f() {{ 1{} }}", " + 1".repeat(100))) >= 100);
        assert!(depth(&format!("fn f() {{ x{} }}", ".f()".repeat(100))) >= 100);
        assert!(depth(&format!("fn f() {{ {}x }}", "!".repeat(100))) >= 100);
        let else_ifs = format!("fn f() {{ if a {{}}{} }}", " else if a {}".repeat(100));
        assert!(depth(&else_ifs) >= 100);
    }

    #[test]
    fn flat_code_stays_shallow_however_long() {
        let items = "fn a() { let x = 1; x }\n".repeat(2_000);
        assert!(depth(&items) < 20, "{}", depth(&items));
        let arms = format!(
            "fn f(x: u32) {{ match x {{ {} _ => {{}} }} }}",
            (0..2_000)
                .map(|i| format!("{i} => {{ g({i}) }}"))
                .collect::<String>()
        );
        assert!(depth(&arms) < 20, "{}", depth(&arms));
        let list = format!("const A: [u8; 5000] = [{}];", "1, ".repeat(5_000));
        assert!(depth(&list) < 20);
        let methods = format!(
            "impl A {{ {} }}",
            "pub fn f(&self) -> u8 { 1 }\n".repeat(2_000)
        );
        assert!(depth(&methods) < 30, "{}", depth(&methods));
    }

    #[test]
    fn the_tokens_come_back_unchanged() {
        let src = "#![doc = \"x\"]\nfn f(a: [u8; 2]) -> u8 {\n    match a { [x, _] => { (x + 1) * 2 } }\n}\n";
        let tokens = TokenStream::from_str(src).unwrap();
        let before = tokens.to_string();
        let spans: Vec<_> = tokens
            .clone()
            .into_iter()
            .map(|t| t.span().start())
            .collect();
        let (back, _, _) = nesting(tokens);
        assert_eq!(back.to_string(), before);
        let back_spans: Vec<_> = back.into_iter().map(|t| t.span().start()).collect();
        assert_eq!(back_spans, spans);
        let file = syn::parse_file(src).unwrap();
        let (back, _, _) = nesting(TokenStream::from_str(src).unwrap());
        assert_eq!(syn::parse2::<syn::File>(back).unwrap(), file);
    }

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
    fn shebang_and_bom_are_skipped_with_positions_kept() {
        let src =
            "\u{feff}#!/usr/bin/env run-cargo-script\nfn f(t: Tensor) { std::mem::forget(t); }\n";
        let found = lint_source(src, &Levels::default()).unwrap();
        assert_eq!((found[0].start.line, found[0].start.column), (2, 19));
        let inner = "#![allow(dead_code)]\nfn f() {}\n";
        assert!(lint_source(inner, &Levels::default()).unwrap().is_empty());
    }
}
