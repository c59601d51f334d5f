//! The nesting estimate on tokens: at each delimiter level, the tokens of the current
//! statement or element so far (a segment ends at `;`, `,`, or after a `{ .. }` that a new
//! item, arm or statement follows) are added to those of the levels around. Every
//! syntax-tree level costs at least one token of its segment, so this bounds the tree's
//! depth from above.
//!
//! This is the reference: [`scan`](super::scan) computes the same estimate (or a larger
//! one) straight from the text, which is cheaper, and this one runs only where that one
//! is over the limit, for the exact figure and the position of the error.

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};

use crate::finding::Position;

/// The nesting estimate of `tokens` and where its deepest point starts, and the same tokens
/// back: they are moved out and rebuilt (iterating a shared token stream would copy every
/// token).
pub(super) fn nesting(tokens: TokenStream) -> (TokenStream, usize, Position) {
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
    use std::str::FromStr;

    use super::*;

    fn depth(src: &str) -> usize {
        let depth = nesting(TokenStream::from_str(src).unwrap()).1;
        proc_macro2::extra::invalidate_current_thread_spans();
        depth
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
}
