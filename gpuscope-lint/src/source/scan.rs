//! The nesting estimate of [`nesting`](super::nesting), read straight from the text: one pass
//! over the bytes of a source text that has already lexed, finding where its tokens start
//! and end and of which kind they are, without building them. Every identifier is handed to
//! a callback on the way (the rules' trigger words).
//!
//! The tokens are those of `proc_macro2`'s lexer with one difference: a number is cut at
//! `.` and at an exponent's sign (`1.5e-3` is `1` `.` `5e` `-` `3`, one literal there). A
//! number holds no `;`, `,`, `#` or delimiter, so the segments end where they end on the
//! real tokens, each with at least as many tokens: the estimate is never below the
//! reference's (a property test checks it), which is what a bound on the stack needs.
//! Only text that lexed is scanned, so every string, character and comment is closed.

/// The nesting estimate of `text` (which must lex: `TokenStream::from_str` accepted it),
/// calling `on_ident(start, end)` with the byte range of every identifier outside comments
/// and literals, lifetimes and labels excepted.
pub(super) fn depth(text: &str, mut on_ident: impl FnMut(usize, usize)) -> usize {
    let b = text.as_bytes();
    let mut est = Estimate::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b' ' | b'\t'..=b'\r' => i += 1,
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = text[i..].find('\n').map_or(b.len(), |n| i + n);
                if text[i..].starts_with("//!") {
                    est.doc_comment(true);
                } else if text[i..].starts_with("///") && !text[i..].starts_with("////") {
                    est.doc_comment(false);
                }
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let rest = &text[i..];
                if rest.starts_with("/**/") {
                    i += 4;
                    continue;
                }
                if rest.starts_with("/*!") {
                    est.doc_comment(true);
                } else if rest.starts_with("/**") && !rest.starts_with("/***") {
                    est.doc_comment(false);
                }
                i = block_comment_end(b, i);
            }
            b'(' | b'[' | b'{' => {
                est.token(Token::Open(c));
                i += 1;
            }
            b')' | b']' | b'}' => {
                est.close();
                i += 1;
            }
            b'"' => {
                i = suffix_end(text, cooked_end(b, i + 1));
                est.token(Token::Literal);
            }
            b'\'' => {
                if let Some(end) = char_literal_end(text, i + 1) {
                    i = end;
                    est.token(Token::Literal);
                } else {
                    // A lifetime or label: `'` and an identifier, not handed to `on_ident`.
                    est.token(Token::Punct {
                        ch: c,
                        alone: false,
                    });
                    let end = ident_end(text, i + 1);
                    est.token(Token::ident(&text[i + 1..end]));
                    i = end;
                }
            }
            b'0'..=b'9' => {
                i = word_end(text, i);
                est.token(Token::Literal);
            }
            b'r' | b'b' | b'c' if prefixed_literal_end(text, i).is_some() => {
                i = prefixed_literal_end(text, i).expect("checked");
                est.token(Token::Literal);
            }
            _ if c == b'_' || c.is_ascii_alphabetic() || c >= 0x80 => {
                if c >= 0x80 {
                    let ch = text[i..].chars().next().expect("in bounds");
                    if is_whitespace(ch) {
                        i += ch.len_utf8();
                        continue;
                    }
                }
                let end = ident_end(text, i);
                let ident = &text[i..end];
                on_ident(i, end);
                est.token(Token::ident(ident));
                i = end;
            }
            _ if is_punct(c) => {
                let alone = !punct_at(b, i + 1);
                est.token(Token::Punct { ch: c, alone });
                i += 1;
            }
            // Nothing else lexes outside literals and comments.
            _ => i += 1,
        }
    }
    est.deepest
}

/// Whether `proc_macro2` lexes `c` as punctuation (`'` aside).
fn is_punct(c: u8) -> bool {
    matches!(
        c,
        b'~' | b'!'
            | b'@'
            | b'#'
            | b'$'
            | b'%'
            | b'^'
            | b'&'
            | b'*'
            | b'-'
            | b'='
            | b'+'
            | b'|'
            | b';'
            | b':'
            | b','
            | b'<'
            | b'.'
            | b'>'
            | b'/'
            | b'?'
    )
}

/// A token's kind, as far as the estimate needs it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Token {
    /// `continues`: `else` or `as`, which go on with the expression before them.
    Ident {
        continues: bool,
    },
    Literal,
    /// `alone`: not followed by another punctuation character (`;` there ends a segment).
    Punct {
        ch: u8,
        alone: bool,
    },
    /// An opening delimiter: the group as a token of its level, and a new level.
    Open(u8),
}

impl Token {
    fn ident(text: &str) -> Token {
        Token::Ident {
            continues: text == "else" || text == "as",
        }
    }
}

/// One delimiter level's state, as in the reference.
#[derive(Default)]
struct Level {
    segment: usize,
    after_brace: bool,
    after_hash: bool,
    after_attr: bool,
}

/// The running estimate: the levels open, the sum of their segments, its maximum.
struct Estimate {
    levels: Vec<Level>,
    total: usize,
    deepest: usize,
}

impl Estimate {
    fn new() -> Self {
        Estimate {
            levels: vec![Level::default()],
            total: 0,
            deepest: 0,
        }
    }

    fn token(&mut self, token: Token) {
        let level = self
            .levels
            .last_mut()
            .expect("the top level is never closed");
        if let Token::Punct {
            ch: b';' | b',',
            alone: true,
        } = token
        {
            self.total -= level.segment;
            *level = Level::default();
            return;
        }
        let starts_new = level.after_attr
            || (level.after_brace
                && match token {
                    Token::Ident { continues } => !continues,
                    Token::Literal => true,
                    Token::Punct { ch, .. } => ch == b'#',
                    Token::Open(delimiter) => delimiter == b'(',
                });
        if starts_new {
            self.total -= level.segment;
            level.segment = 0;
        }
        level.segment += 1;
        self.total += 1;
        level.after_brace = token == Token::Open(b'{');
        level.after_attr = level.after_hash && token == Token::Open(b'[');
        level.after_hash = match token {
            Token::Punct { ch: b'#', .. } => true,
            Token::Punct { ch: b'!', .. } => level.after_hash,
            _ => false,
        };
        self.deepest = self.deepest.max(self.total);
        if let Token::Open(_) = token {
            self.levels.push(Level::default());
        }
    }

    fn close(&mut self) {
        if self.levels.len() > 1 {
            let done = self.levels.pop().expect("more than one");
            self.total -= done.segment;
        }
    }

    /// A doc comment, as the lexer gives it: `#` (`!`) `[doc = "..."]`.
    fn doc_comment(&mut self, inner: bool) {
        self.token(Token::Punct {
            ch: b'#',
            alone: true,
        });
        if inner {
            self.token(Token::Punct {
                ch: b'!',
                alone: true,
            });
        }
        self.token(Token::Open(b'['));
        self.token(Token::ident("doc"));
        self.token(Token::Punct {
            ch: b'=',
            alone: true,
        });
        self.token(Token::Literal);
        self.close();
    }
}

/// Rust's whitespace outside ASCII, as the lexer skips it.
fn is_whitespace(ch: char) -> bool {
    ch.is_whitespace() || ch == '\u{200e}' || ch == '\u{200f}'
}

/// Whether a punctuation character starts at `i` (the one before is then joint to it).
fn punct_at(b: &[u8], i: usize) -> bool {
    match b.get(i) {
        Some(b'/') => !matches!(b.get(i + 1), Some(b'/' | b'*')),
        Some(&c) => c == b'\'' || is_punct(c),
        None => false,
    }
}

/// Where the identifier starting at `i` ends, a raw identifier's `r#` included.
fn ident_end(text: &str, i: usize) -> usize {
    if text[i..].starts_with("r#") {
        word_end(text, i + 2)
    } else {
        word_end(text, i)
    }
}

/// Where the word (identifier without `r#`, number, or suffix) starting at `i` ends: ASCII
/// letters, digits and `_`, and any character beyond ASCII that is not whitespace (in text
/// that lexed, those are identifier characters).
fn word_end(text: &str, mut i: usize) -> usize {
    let b = text.as_bytes();
    while i < b.len() {
        let c = b[i];
        if c == b'_' || c.is_ascii_alphanumeric() {
            i += 1;
        } else if c >= 0x80 {
            let ch = text[i..].chars().next().expect("in bounds");
            if is_whitespace(ch) {
                break;
            }
            i += ch.len_utf8();
        } else {
            break;
        }
    }
    i
}

/// Where a literal's suffix (`"x"suffix`, `'c'u8`) starting at `i` ends: an identifier
/// if one starts there (not a digit).
fn suffix_end(text: &str, i: usize) -> usize {
    match text.as_bytes().get(i) {
        Some(&c) if c == b'_' || c.is_ascii_alphabetic() => word_end(text, i),
        Some(&c) if c >= 0x80 => {
            let ch = text[i..].chars().next().expect("in bounds");
            if is_whitespace(ch) {
                i
            } else {
                word_end(text, i)
            }
        }
        _ => i,
    }
}

/// Where a string whose contents start at `i` ends (after its closing `"`).
fn cooked_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// Where a raw string whose `#`s start at `i` ends (after its closing `"` and `#`s), if a
/// raw string starts there.
fn raw_end(b: &[u8], i: usize) -> Option<usize> {
    let hashes = b[i..].iter().take_while(|&&c| c == b'#').count();
    let mut j = i + hashes;
    if b.get(j) != Some(&b'"') {
        return None;
    }
    j += 1;
    while j < b.len() {
        if b[j] == b'"'
            && b[j + 1..]
                .iter()
                .take(hashes)
                .filter(|&&c| c == b'#')
                .count()
                == hashes
        {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(b.len())
}

/// Where a character literal whose contents start at `i` (after its `'`) ends, suffix
/// included; `None` when the `'` starts a lifetime or label instead.
fn char_literal_end(text: &str, i: usize) -> Option<usize> {
    let b = text.as_bytes();
    if b.get(i) == Some(&b'\\') {
        // An escape: the character after the backslash, then up to the closing `'`
        // (`\x7f` and `\u{..}` hold none).
        let after = (i + 2).min(b.len());
        let close = text[after..].find('\'').map_or(b.len(), |n| after + n);
        return Some(suffix_end(text, close + 1));
    }
    let ch = text.get(i..)?.chars().next()?;
    let close = i + ch.len_utf8();
    (b.get(close) == Some(&b'\'')).then(|| suffix_end(text, close + 1))
}

/// Where the literal starting at `i` with a prefix ends (`r"..."`, `r#"..."#`, `b'x'`,
/// `b"..."`, `br#"..."#`, `c"..."`, `cr"..."`), if one starts there; `None` for an
/// identifier (`r#type` included).
fn prefixed_literal_end(text: &str, i: usize) -> Option<usize> {
    let b = text.as_bytes();
    let end = match (b[i], b.get(i + 1), b.get(i + 2)) {
        (b'r', Some(b'"' | b'#'), _) => raw_end(b, i + 1)?,
        (b'b', Some(b'\''), _) => char_literal_end(text, i + 2)?,
        (b'b' | b'c', Some(b'"'), _) => cooked_end(b, i + 2),
        (b'b' | b'c', Some(b'r'), Some(b'"' | b'#')) => raw_end(b, i + 2)?,
        _ => return None,
    };
    Some(suffix_end(text, end))
}

/// Where the block comment starting at `i` ends (after its `*/`): comments nest.
fn block_comment_end(b: &[u8], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i + 1 < b.len() {
        if b[i] == b'/' && b[i + 1] == b'*' {
            depth += 1;
            i += 1;
        } else if b[i] == b'*' && b[i + 1] == b'/' {
            depth -= 1;
            if depth == 0 {
                return i + 2;
            }
            i += 1;
        }
        i += 1;
    }
    b.len()
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use proc_macro2::TokenStream;
    use proptest::prelude::*;

    use super::*;

    /// The reference estimate of `src`, if it lexes.
    fn reference(src: &str) -> Option<usize> {
        let tokens = TokenStream::from_str(src).ok()?;
        let depth = super::super::nesting::nesting(tokens).1;
        proc_macro2::extra::invalidate_current_thread_spans();
        Some(depth)
    }

    fn scanned(src: &str) -> usize {
        depth(src, |_, _| {})
    }

    fn idents(src: &str) -> Vec<&str> {
        let mut found = Vec::new();
        depth(src, |start, end| found.push(&src[start..end]));
        found
    }

    #[test]
    fn equals_the_reference_on_every_kind_of_token() {
        let cases = [
            "fn f() { a }",
            "fn f(x: u32) -> u32 { match x { 0 => { 1 } _ => 2 } }",
            "/// doc\n//! inner\n/** block */\n/*! inner block */\n/* plain /* nested */ */\n//// four\n/***/ /**/\nfn f() {}",
            "#[derive(Debug)]\n#![allow(x)]\nstruct S { a: u8, b: [u8; 2] }",
            "fn f<'a>(x: &'a str) -> &'static str { 'outer: loop { break 'outer; } }",
            "fn f() { let c = 'a'; let d = '\\''; let e = '\\u{1F600}'; let g = b'x'; let h = 'é'; }",
            "fn f() { let s = \"a;b,c{\\\"\"; let r = r#\"x\"y\"#; let b = br##\"q\"#\"##; let c = c\"z\"; let k = cr#\"k\"#; }",
            "fn f() { let x = 1u8 + 0x1F + 1_000 + 2 * 3i64; x.0; 1..2; }",
            "fn r#type() { let r#else = 1; a as u8; if a {} else {} }",
            "fn f() { a;-1; b,-2; x >>= 1; y ..= 2; z => w; }",
            "fn f() { let é = 1; let x\u{a0}= 2; }",
            "macro_rules! m { ($x:expr) => { $x + 1 }; }",
            "fn f() { g(/*ERROR*/); (/*ERROR*/) }",
            "const S: &str = \"line\\\ncontinued\";",
        ];
        for src in cases {
            assert_eq!(Some(scanned(src)), reference(src), "{src}");
        }
    }

    #[test]
    fn numbers_count_at_least_as_many_tokens() {
        for src in [
            "fn f() { 1.5 }",
            "fn f() { x.0.1 }",
            "fn f() { 1e-5 }",
            "fn f() { let x = 1.5e-3 + 2. + 3.0f32; }",
        ] {
            assert!(Some(scanned(src)) >= reference(src), "{src}");
        }
    }

    #[test]
    fn hands_over_identifiers_outside_comments_literals_and_lifetimes() {
        let src = "// loss\n/// backward\nfn f<'static_like>(x: &'static str) { let s = \"forget\"; r#loss.backward(); CACHE.push(1u8) }";
        assert_eq!(
            idents(src),
            [
                "fn", "f", "x", "str", "let", "s", "r#loss", "backward", "CACHE", "push"
            ]
        );
        let src = "let é = X . lock();";
        let mut ranges = Vec::new();
        depth(src, |start, end| ranges.push((start, end)));
        assert_eq!(ranges, [(0, 3), (4, 6), (9, 10), (13, 17)]);
    }

    #[test]
    fn deep_text_is_deep() {
        let deep = format!("fn f() {{ {}1{} }}", "(".repeat(5000), ")".repeat(5000));
        assert!(scanned(&deep) > 5000);
        let chain = format!("fn f() {{ 1{} }}", " + 1".repeat(4000));
        assert_eq!(Some(scanned(&chain)), reference(&chain));
    }

    /// Rust-like text from fragments that exercise the lexer's corners.
    fn fragments() -> impl Strategy<Value = String> {
        let fragment = prop::sample::select(vec![
            "fn",
            "f",
            "else",
            "as",
            "r#as",
            "x",
            "é",
            " ",
            "\n",
            "\t",
            ";",
            ",",
            ";-",
            ",,",
            "#",
            "!",
            "#[a]",
            "#![b]",
            "=",
            "=>",
            ".",
            "..",
            "+=",
            "'a",
            "'a'",
            "'\\n'",
            "b'x'",
            "\"s;\"",
            "\"\\\"\"",
            "r\"r\"",
            "r#\"}\"#",
            "br\"q\"",
            "c\"c\"",
            "1",
            "1.5",
            "1e5",
            "0x1F",
            "1u8",
            "/* c */",
            "/* /* n */ */",
            "// l\n",
            "/// d\n",
            "//! i\n",
            "/** b */",
            "/*! i */",
            "(",
            ")",
            "[",
            "]",
            "{",
            "}",
            "{}",
            "()",
            "[]",
            "$",
            "?",
            "::",
            "'static",
            "\u{a0}",
            "\u{200e}",
        ]);
        prop::collection::vec(fragment, 0..80).prop_map(|parts| parts.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// On any text that lexes, the scan's estimate is at least the reference's.
        #[test]
        fn never_below_the_reference(src in fragments()) {
            if let Some(expected) = reference(&src) {
                prop_assert!(scanned(&src) >= expected, "{} < {}", scanned(&src), expected);
            }
        }
    }
}
