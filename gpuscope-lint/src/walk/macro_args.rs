//! The arguments of format and logging macros as expressions, so that the rules see the
//! code in them: `println!("loss {}", loss.double_value(&[]))` reads a tensor to the host
//! as surely as `let l = loss.double_value(&[]);` does. Other macros' tokens stay unread:
//! their syntax is their own.
//!
//! Read are the arguments that run each time the macro does: every argument of `print!`,
//! `println!`, `eprint!`, `eprintln!`, `format!`, `format_args!`, `write!`, `writeln!`,
//! `dbg!` and of `log`'s and `tracing`'s `info!`, `warn!`, `error!` and `event!`; the
//! condition of `assert!` and `ensure!` and the two sides of `assert_eq!` and `assert_ne!`
//! (their messages are formatted only on failure). The arguments of `debug!` and `trace!`
//! run only where that level is enabled, and those of `debug_assert!` and its kin only in
//! debug builds: they are read as if under a debug switch (`switches`). `panic!`,
//! `unreachable!`, `todo!`, `unimplemented!`, `bail!` and `anyhow!` run once, on the way
//! out, and are not read.
//!
//! The logging macros' own syntax is stepped over: `target: ..`, `parent: ..` and `name: ..`
//! before the arguments, `field = value` and `field.name = value`, and the `%` and `?`
//! that ask for `Display` and `Debug`. Only arguments that may call something are parsed
//! (calls need parentheses: `println!("{} {}", step, loss)` costs no parse), and one that
//! does not parse as an expression is skipped.

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};
use syn::Expr;

/// The expressions a format or logging macro evaluates each time it runs.
pub(crate) struct MacroArgs {
    pub(crate) exprs: Vec<Expr>,
    /// Whether they run only while someone is debugging (`debug!`, `debug_assert!`).
    pub(crate) debug: bool,
}

/// The arguments of `mac` that run each time it does, if it is a format or logging macro.
pub(crate) fn of(mac: &syn::Macro) -> Option<MacroArgs> {
    let name = mac.path.segments.last()?.ident.to_string();
    let (taken, debug) = match name.as_str() {
        "print" | "println" | "eprint" | "eprintln" | "format" | "format_args" | "write"
        | "writeln" | "dbg" | "info" | "warn" | "error" | "event" => (usize::MAX, false),
        "assert" | "ensure" => (1, false),
        "assert_eq" | "assert_ne" => (2, false),
        "debug" | "trace" => (usize::MAX, true),
        "debug_assert" => (1, true),
        "debug_assert_eq" | "debug_assert_ne" => (2, true),
        _ => return None,
    };
    let pieces = pieces(mac.tokens.clone());
    let mut exprs = Vec::new();
    let (mut start, mut args) = (0, 0);
    while start < pieces.len() && args < taken {
        args += 1;
        if !pieces[start].1 {
            // Names, fields, literals and operators: nothing in it calls anything.
            start += 1;
            continue;
        }
        // A comma between angle brackets (`f::<A, B>(x)`) cuts an argument in two: pieces
        // that do not parse are joined with the next ones, up to a few.
        let parsed = (start + 1..=pieces.len().min(start + MAX_JOINED)).find_map(|end| {
            let joined = pieces[start..end]
                .iter()
                .map(|(tokens, _)| tokens.as_slice())
                .collect::<Vec<_>>()
                .join(&comma()[..]);
            syn::parse2::<Expr>(value_of(joined)).ok().map(|e| (e, end))
        });
        match parsed {
            Some((e, end)) => {
                exprs.push(e);
                start = end;
            }
            None => start += 1,
        }
    }
    Some(MacroArgs { exprs, debug })
}

/// The most pieces [`of`] joins into one argument.
const MAX_JOINED: usize = 4;

fn comma() -> [TokenTree; 1] {
    [TokenTree::Punct(proc_macro2::Punct::new(
        ',',
        Spacing::Alone,
    ))]
}

/// `tokens` cut at the commas outside any brackets, each piece with whether it may call
/// something: calls need parentheses (or a block's braces), and a `<` may open generic
/// arguments whose commas cut a call in two (`t.get::<A, B>(0)`).
fn pieces(tokens: TokenStream) -> Vec<(Vec<TokenTree>, bool)> {
    let mut out = vec![(Vec::new(), false)];
    for token in tokens {
        let last = out.last_mut().expect("never empty");
        match &token {
            TokenTree::Punct(p) if p.as_char() == ',' => out.push((Vec::new(), false)),
            TokenTree::Group(g) => {
                last.1 |= matches!(g.delimiter(), Delimiter::Parenthesis | Delimiter::Brace);
                last.0.push(token);
            }
            TokenTree::Punct(p) => {
                last.1 |= p.as_char() == '<';
                last.0.push(token);
            }
            _ => last.0.push(token),
        }
    }
    if out.last().is_some_and(|(tokens, _)| tokens.is_empty()) {
        out.pop();
    }
    out
}

/// The value in one argument: without a leading `target:`-style key, a `field =` or
/// `field.name =`, and the `%` or `?` sigil.
fn value_of(piece: Vec<TokenTree>) -> TokenStream {
    let mut rest: &[TokenTree] = &piece;
    // `target: "x"`, `parent: span`, `name: "n"` (a lone `:`, not a path's `::`).
    if let [TokenTree::Ident(_), TokenTree::Punct(colon), after @ ..] = rest {
        if colon.as_char() == ':' && colon.spacing() == Spacing::Alone {
            rest = after;
        }
    }
    // `field = value`, `field.name = value` (a lone `=`, not `==` or `=>`).
    let mut i = 0;
    while let Some(TokenTree::Ident(_)) = rest.get(i) {
        match rest.get(i + 1) {
            Some(TokenTree::Punct(p)) if p.as_char() == '.' => i += 2,
            Some(TokenTree::Punct(p)) if p.as_char() == '=' && p.spacing() == Spacing::Alone => {
                rest = &rest[i + 2..];
                break;
            }
            _ => break,
        }
    }
    if let [TokenTree::Punct(p), after @ ..] = rest {
        if matches!(p.as_char(), '%' | '?') {
            rest = after;
        }
    }
    rest.iter().cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(src: &str) -> Option<(Vec<String>, bool)> {
        let mac: syn::Macro = syn::parse_str(src).unwrap();
        of(&mac).map(|a| {
            let shown = a
                .exprs
                .iter()
                .map(|e| quote::quote!(#e).to_string())
                .collect();
            (shown, a.debug)
        })
    }

    #[test]
    fn format_macros_give_every_argument() {
        let (exprs, debug) =
            args(r#"println!("{} {x}", loss.double_value(&[]), n = t.item())"#).unwrap();
        assert_eq!(exprs, ["loss . double_value (& [])", "t . item ()"]);
        assert!(!debug);
        let (exprs, _) = args(r#"write!(f, "{:?}", a.to_vec1::<f32>()?,)"#).unwrap();
        assert_eq!(exprs.len(), 1);
    }

    #[test]
    fn logging_syntax_is_stepped_over() {
        let (exprs, debug) = args(
            r#"tracing::info!(target: "train", step, loss = %l.item(), grad.norm = ?g.norm(), "done {}", a == b)"#,
        )
        .unwrap();
        assert_eq!(exprs, ["l . item ()", "g . norm ()"]);
        assert!(!debug);
        assert!(args(r#"log::debug!("{}", x.item())"#).unwrap().1);
    }

    #[test]
    fn assertions_give_what_runs_every_time() {
        let (exprs, _) = args(r#"assert!(x.item() > 0.0, "{}", y.item())"#).unwrap();
        assert_eq!(exprs, ["x . item () > 0.0"]);
        let (exprs, debug) = args(r#"debug_assert_eq!(a.item(), b, "{}", c.item())"#).unwrap();
        assert_eq!(exprs, ["a . item ()"]);
        assert!(debug);
    }

    #[test]
    fn other_macros_are_not_read() {
        for src in [
            "panic!(\"{}\", x.item())",
            "vec![x.item(); 3]",
            "bail!(\"{}\", x.item())",
            "my_dsl!(a => b)",
        ] {
            assert!(args(src).is_none(), "{src}");
        }
        // An argument that does not parse is skipped, the others kept.
        let (exprs, _) = args("println!(\"{}\", => x(), y.item())").unwrap();
        assert_eq!(exprs, ["y . item ()"]);
        // A comma inside a turbofish does not cut the argument.
        let (exprs, _) = args("println!(\"{}\", t.get::<A, B>(0).item(), z)").unwrap();
        assert_eq!(exprs, ["t . get :: < A , B > (0) . item ()"]);
    }
}
