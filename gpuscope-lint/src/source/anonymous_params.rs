//! Rust 2015's anonymous parameters in trait methods (`fn set_value(&self, T);`): valid in
//! crates of the 2015 edition (a Cargo.toml with no `edition` key), a hard error since 2018,
//! and not parsed by `syn`. A file that does not parse is tried once more with each such
//! parameter named `_` (`fn set_value(&self, _: T);`), as rustc reads it; the tokens keep
//! their spans, so positions do not move.

use proc_macro2::{Delimiter, Group, Ident, Punct, Spacing, TokenStream, TokenTree};

/// `tokens` with every anonymous parameter of a method in a `trait { .. }` named `_`, or
/// `None` where there is none.
pub(super) fn named(tokens: TokenStream) -> Option<TokenStream> {
    let mut changed = false;
    let named = walk(tokens, false, &mut changed);
    changed.then_some(named)
}

/// `stream` rebuilt, its trait bodies' parameter lists named; `trait_body`: `stream` is the
/// inside of a trait's braces.
fn walk(stream: TokenStream, trait_body: bool, changed: &mut bool) -> TokenStream {
    let tokens: Vec<TokenTree> = stream.into_iter().collect();
    let params = if trait_body {
        parameter_lists(&tokens)
    } else {
        Vec::new()
    };
    // After `trait`, the next `{ .. }` at this level is its body (`;` ends a trait alias).
    let mut awaiting_body = false;
    let mut out = Vec::with_capacity(tokens.len());
    for (i, token) in tokens.into_iter().enumerate() {
        let token = match token {
            TokenTree::Ident(ident) => {
                awaiting_body |= ident == "trait";
                TokenTree::Ident(ident)
            }
            TokenTree::Punct(punct) => {
                awaiting_body &= punct.as_char() != ';';
                TokenTree::Punct(punct)
            }
            TokenTree::Group(group) => {
                let inner = if params.contains(&i) {
                    name_parameters(group.stream(), changed)
                } else {
                    let body = awaiting_body && group.delimiter() == Delimiter::Brace;
                    awaiting_body &= !body;
                    walk(group.stream(), body, changed)
                };
                let mut rebuilt = Group::new(group.delimiter(), inner);
                rebuilt.set_span(group.span());
                TokenTree::Group(rebuilt)
            }
            literal @ TokenTree::Literal(_) => literal,
        };
        out.push(token);
    }
    out.into_iter().collect()
}

/// The indices of the parameter lists `( .. )` of the `fn name<..>( .. )` at this level.
fn parameter_lists(tokens: &[TokenTree]) -> Vec<usize> {
    let mut lists = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let TokenTree::Ident(ident) = token else {
            continue;
        };
        if ident != "fn" || !matches!(tokens.get(i + 1), Some(TokenTree::Ident(_))) {
            continue;
        }
        let mut at = i + 2;
        if is_punct(tokens.get(at), '<') {
            let mut depth = 0usize;
            while at < tokens.len() {
                depth = angle_depth(depth, tokens, at);
                at += 1;
                if depth == 0 {
                    break;
                }
            }
        }
        if matches!(tokens.get(at), Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis)
        {
            lists.push(at);
        }
    }
    lists
}

/// The parameters `stream` holds (split at `,` outside `<..>`), each without a pattern
/// (no `:` of its own, not a `self` receiver) given `_:`.
fn name_parameters(stream: TokenStream, changed: &mut bool) -> TokenStream {
    let tokens: Vec<TokenTree> = stream.into_iter().collect();
    let mut out = Vec::with_capacity(tokens.len() + 4);
    let mut start = 0;
    let mut depth = 0usize;
    for i in 0..=tokens.len() {
        let end = i == tokens.len();
        if !end {
            depth = angle_depth(depth, &tokens, i);
        }
        if end || (depth == 0 && is_punct(tokens.get(i), ',')) {
            let parameter = &tokens[start..i];
            if let Some(ty) = anonymous_type_start(parameter) {
                let span = parameter[ty].span();
                out.extend_from_slice(&parameter[..ty]);
                out.push(TokenTree::Ident(Ident::new("_", span)));
                let mut colon = Punct::new(':', Spacing::Alone);
                colon.set_span(span);
                out.push(TokenTree::Punct(colon));
                out.extend_from_slice(&parameter[ty..]);
                *changed = true;
            } else {
                out.extend_from_slice(parameter);
            }
            if !end {
                out.push(tokens[i].clone());
            }
            start = i + 1;
        }
    }
    out.into_iter().collect()
}

/// Where the type of `parameter` starts, past its attributes, when it is a type alone: no
/// `:` outside `<..>` that is not part of a `::`, and not a receiver ending in `self`.
fn anonymous_type_start(parameter: &[TokenTree]) -> Option<usize> {
    let mut ty = 0;
    while is_punct(parameter.get(ty), '#')
        && matches!(parameter.get(ty + 1), Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Bracket)
    {
        ty += 2;
    }
    let rest = &parameter[ty..];
    if rest.is_empty() || matches!(rest.last(), Some(TokenTree::Ident(i)) if i == "self") {
        return None;
    }
    let mut depth = 0usize;
    for i in 0..rest.len() {
        depth = angle_depth(depth, rest, i);
        if depth == 0 && is_lone_colon(rest, i) {
            return None;
        }
    }
    Some(ty)
}

/// The `<..>` depth after `tokens[i]`: `<` opens, `>` closes unless it ends a `->`.
fn angle_depth(depth: usize, tokens: &[TokenTree], i: usize) -> usize {
    match &tokens[i] {
        TokenTree::Punct(p) if p.as_char() == '<' => depth + 1,
        TokenTree::Punct(p) if p.as_char() == '>' => {
            let arrow = i > 0
                && matches!(&tokens[i - 1], TokenTree::Punct(q) if q.as_char() == '-' && q.spacing() == Spacing::Joint);
            if arrow {
                depth
            } else {
                depth.saturating_sub(1)
            }
        }
        _ => depth,
    }
}

/// `tokens[i]` is a `:` that is neither half of a `::`.
fn is_lone_colon(tokens: &[TokenTree], i: usize) -> bool {
    let TokenTree::Punct(p) = &tokens[i] else {
        return false;
    };
    if p.as_char() != ':' {
        return false;
    }
    let joins_next = p.spacing() == Spacing::Joint && is_punct(tokens.get(i + 1), ':');
    let joins_previous = i > 0
        && matches!(&tokens[i - 1], TokenTree::Punct(q) if q.as_char() == ':' && q.spacing() == Spacing::Joint);
    !joins_next && !joins_previous
}

fn is_punct(token: Option<&TokenTree>, c: char) -> bool {
    matches!(token, Some(TokenTree::Punct(p)) if p.as_char() == c)
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    fn named_text(src: &str) -> Option<String> {
        named(TokenStream::from_str(src).unwrap()).map(|t| t.to_string())
    }

    fn tokens_text(src: &str) -> String {
        TokenStream::from_str(src).unwrap().to_string()
    }

    #[test]
    fn anonymous_trait_method_parameters_are_named_and_parse() {
        let src = "pub trait DataInput<T> { fn set_value(&self, T); \
                   fn backward(&self, &Ref<Self::InputGradient>); \
                   fn merge<F: Fn(u8) -> u8>(&mut self, HashMap<K, V>, f: F, &'a [u8]) -> u8 { 0 } }";
        let expected = "pub trait DataInput<T> { fn set_value(&self, _: T); \
                        fn backward(&self, _: &Ref<Self::InputGradient>); \
                        fn merge<F: Fn(u8) -> u8>(&mut self, _: HashMap<K, V>, f: F, _: &'a [u8]) -> u8 { 0 } }";
        assert_eq!(named_text(src), Some(tokens_text(expected)));
        assert!(syn::parse_str::<syn::File>(src).is_err());
        syn::parse_str::<syn::File>(expected).expect("the named text parses");
    }

    #[test]
    fn named_parameters_receivers_and_fns_outside_traits_are_left_alone() {
        for src in [
            "trait T { fn f(&'a mut self, x: Vec<u8>, (a, b): (u8, u8), #[cfg(x)] y: std::vec::Vec<u8>); }",
            "trait T { fn f(self: Box<Self>); const F: fn(u8) = g; type G = fn(u8); }",
            "impl S { fn f(&self, T) {} } fn g(x: u8) {}",
            "trait A = B; fn h(T) {}",
        ] {
            assert_eq!(named_text(src), None, "{src}");
        }
        // A trait inside a module or a function body is found.
        assert_eq!(
            named_text("mod m { fn f() { trait T { fn g(#[a] u8); } } }"),
            Some(tokens_text(
                "mod m { fn f() { trait T { fn g(#[a] _: u8); } } }"
            ))
        );
    }

    #[test]
    fn positions_are_kept() {
        let src = "trait T {\n    fn f(&self, Vec<u8>);\n}";
        let file: syn::File =
            syn::parse2(named(TokenStream::from_str(src).unwrap()).unwrap()).expect("parses");
        let syn::Item::Trait(t) = &file.items[0] else {
            panic!()
        };
        let syn::TraitItem::Fn(f) = &t.items[0] else {
            panic!()
        };
        let syn::FnArg::Typed(arg) = &f.sig.inputs[1] else {
            panic!()
        };
        let start = syn::spanned::Spanned::span(&arg.ty).start();
        assert_eq!((start.line, start.column), (2, 16));
    }
}
