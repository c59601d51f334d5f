//! The item an attribute is put on: a function with a body (free, in an `impl`, or a
//! trait method with a default body), or something else, which is an error.
//!
//! A function whose body does not parse is [`Target::Unparsed`]: the attribute emits it
//! as written, so that rustc reports the mistake once, itself (see `expand`).

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{ToTokens, TokenStreamExt};
use syn::parse::{Parse, ParseStream, Parser};
use syn::{Attribute, Block, Signature, Stmt, Visibility, braced, token};

/// A function with a body, as an attribute sees it. Unlike [`syn::ItemFn`] it also takes
/// `default fn` (specialisation) and keeps the body's inner attributes apart.
pub(crate) struct FnItem {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    /// `default` of `default fn`.
    pub defaultness: Option<proc_macro2::Ident>,
    pub sig: Signature,
    pub brace: token::Brace,
    /// `#![...]` at the top of the body.
    pub inner_attrs: Vec<Attribute>,
    pub stmts: Vec<Stmt>,
    /// Statements the expansion puts first in the body (lint warnings).
    pub prelude: TokenStream,
}

impl FnItem {
    /// The function with `body` (after [`FnItem::prelude`]) in place of its statements.
    pub(crate) fn to_tokens_with_body(&self, body: TokenStream) -> TokenStream {
        let mut out = TokenStream::new();
        out.append_all(&self.attrs);
        self.vis.to_tokens(&mut out);
        self.defaultness.to_tokens(&mut out);
        self.sig.to_tokens(&mut out);
        let inner = &self.inner_attrs;
        let prelude = &self.prelude;
        self.brace.surround(&mut out, |out| {
            for attr in inner {
                attr.to_tokens(out);
            }
            out.extend(prelude.clone());
            out.extend(body);
        });
        out
    }
}

/// What the attribute was put on.
pub(crate) enum Target {
    /// A function with a body.
    Fn(Box<FnItem>),
    /// A function without a body (a trait method's declaration); the span is its `;`.
    Bodiless { semi: Span },
    /// A function whose signature parses but whose body does not.
    Unparsed,
    /// Something else, and the span of the keyword that says what.
    Other { kind: ItemKind, span: Span },
}

/// The kinds of items that are not functions, for the error that says where the
/// attribute goes instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ItemKind {
    Struct,
    Enum,
    Union,
    Const,
    Static,
    Impl,
    Trait,
    Mod,
    TypeAlias,
    Use,
    ExternBlock,
    Macro,
    /// Anything else (a macro invocation, an `extern crate`...).
    Unknown,
}

impl ItemKind {
    /// The kind named by an item's keyword (`None` for `unsafe` and `auto`, which are
    /// followed by the keyword that says).
    fn of_keyword(word: &str) -> Option<ItemKind> {
        Some(match word {
            "struct" => ItemKind::Struct,
            "enum" => ItemKind::Enum,
            "union" => ItemKind::Union,
            "const" => ItemKind::Const,
            "static" => ItemKind::Static,
            "impl" => ItemKind::Impl,
            "trait" => ItemKind::Trait,
            "mod" => ItemKind::Mod,
            "type" => ItemKind::TypeAlias,
            "use" => ItemKind::Use,
            "extern" => ItemKind::ExternBlock,
            "macro_rules" => ItemKind::Macro,
            "unsafe" | "auto" => return None,
            _ => ItemKind::Unknown,
        })
    }

    /// "a struct", "an impl block"...
    pub(crate) fn description(self) -> &'static str {
        match self {
            ItemKind::Struct => "a struct",
            ItemKind::Enum => "an enum",
            ItemKind::Union => "a union",
            ItemKind::Const => "a const item",
            ItemKind::Static => "a static",
            ItemKind::Impl => "an impl block",
            ItemKind::Trait => "a trait",
            ItemKind::Mod => "a module",
            ItemKind::TypeAlias => "a type alias",
            ItemKind::Use => "a use declaration",
            ItemKind::ExternBlock => "an extern block",
            ItemKind::Macro => "a macro",
            ItemKind::Unknown => "this item",
        }
    }

    /// Where the attribute goes instead, for items holding functions.
    pub(crate) fn hint(self) -> &'static str {
        match self {
            ItemKind::Impl | ItemKind::Trait => "; put it on the methods that should have it",
            _ => "",
        }
    }
}

impl Parse for Target {
    fn parse(input: ParseStream<'_>) -> syn::Result<Target> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis: Visibility = input.parse()?;
        let fork = input.fork();
        let defaultness = if fork.peek(syn::Ident) && !fork.peek2(syn::Token![!]) {
            let ident: proc_macro2::Ident = fork.parse()?;
            if ident == "default"
                && (fork.peek(syn::Token![fn])
                    || fork.peek(syn::Token![const])
                    || fork.peek(syn::Token![async])
                    || fork.peek(syn::Token![unsafe])
                    || fork.peek(syn::Token![extern]))
            {
                Some(input.parse::<proc_macro2::Ident>()?)
            } else {
                None
            }
        } else {
            None
        };
        if !looks_like_fn(input) {
            let (kind, span) = describe_item(input);
            // Leave the rest unread: the item is passed through unchanged.
            input.parse::<TokenStream>()?;
            return Ok(Target::Other { kind, span });
        }
        let sig: Signature = input.parse()?;
        if input.peek(syn::Token![;]) {
            let semi: syn::Token![;] = input.parse()?;
            return Ok(Target::Bodiless { semi: semi.span });
        }
        let content;
        let brace = braced!(content in input);
        let body: TokenStream = content.parse()?;
        let parsed = (|input: ParseStream<'_>| {
            Ok((
                input.call(Attribute::parse_inner)?,
                input.call(Block::parse_within)?,
            ))
        })
        .parse2(body);
        let Ok((inner_attrs, stmts)) = parsed else {
            return Ok(Target::Unparsed);
        };
        Ok(Target::Fn(Box::new(FnItem {
            attrs,
            vis,
            defaultness,
            sig,
            brace,
            inner_attrs,
            stmts,
            prelude: TokenStream::new(),
        })))
    }
}

/// Whether the tokens ahead start a function signature.
fn looks_like_fn(input: ParseStream<'_>) -> bool {
    let fork = input.fork();
    loop {
        if fork.peek(syn::Token![fn]) {
            return true;
        }
        if fork.peek(syn::Token![const])
            || fork.peek(syn::Token![async])
            || fork.peek(syn::Token![unsafe])
        {
            if fork.parse::<TokenTree>().is_err() {
                return false;
            }
            continue;
        }
        if fork.peek(syn::Token![extern]) {
            if fork.parse::<TokenTree>().is_err() {
                return false;
            }
            if fork.peek(syn::LitStr) && fork.parse::<TokenTree>().is_err() {
                return false;
            }
            continue;
        }
        return false;
    }
}

/// What the item ahead is, and the span of the keyword that says so.
fn describe_item(input: ParseStream<'_>) -> (ItemKind, Span) {
    let fork = input.fork();
    let mut first: Option<Span> = None;
    while let Ok(tt) = fork.parse::<TokenTree>() {
        let span = tt.span();
        let TokenTree::Ident(ident) = tt else {
            return (ItemKind::Unknown, first.unwrap_or(span));
        };
        match ItemKind::of_keyword(&ident.to_string()) {
            Some(kind) => return (kind, span),
            // `unsafe impl`, `auto trait`: look at the next word.
            None => {
                first.get_or_insert(span);
            }
        }
    }
    (ItemKind::Unknown, first.unwrap_or_else(Span::call_site))
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    fn kind(tokens: TokenStream) -> ItemKind {
        match syn::parse2::<Target>(tokens).unwrap_or_else(|e| panic!("{e}")) {
            Target::Other { kind, .. } => kind,
            Target::Fn(_) => panic!("a function"),
            Target::Bodiless { .. } | Target::Unparsed => panic!("a function"),
        }
    }

    #[test]
    fn kinds() {
        assert_eq!(
            kind(quote!(
                struct S;
            )),
            ItemKind::Struct
        );
        assert_eq!(
            kind(quote!(
                pub enum E {}
            )),
            ItemKind::Enum
        );
        assert_eq!(kind(quote!(union U { a: u8 })), ItemKind::Union);
        assert_eq!(
            kind(quote!(
                const C: u8 = 1;
            )),
            ItemKind::Const
        );
        assert_eq!(
            kind(quote!(
                static S: u8 = 1;
            )),
            ItemKind::Static
        );
        assert_eq!(
            kind(quote!(
                unsafe impl Send for S {}
            )),
            ItemKind::Impl
        );
        assert_eq!(kind(quote!(impl S {})), ItemKind::Impl);
        assert_eq!(kind(quote!(auto trait T {})), ItemKind::Trait);
        assert_eq!(
            kind(quote!(
                mod m {}
            )),
            ItemKind::Mod
        );
        assert_eq!(
            kind(quote!(
                type T = u8;
            )),
            ItemKind::TypeAlias
        );
        assert_eq!(
            kind(quote!(
                use std::fmt;
            )),
            ItemKind::Use
        );
        assert_eq!(
            kind(quote!(
                extern "C" {}
            )),
            ItemKind::ExternBlock
        );
        assert_eq!(
            kind(quote!(
                macro_rules! m {
                    () => {};
                }
            )),
            ItemKind::Macro
        );
        assert_eq!(kind(quote!(thread_local! {})), ItemKind::Unknown);
        assert_eq!(
            ItemKind::Impl.hint(),
            "; put it on the methods that should have it"
        );
        assert_eq!(ItemKind::Struct.hint(), "");
    }

    #[test]
    fn bodies() {
        let Ok(Target::Fn(f)) = syn::parse2::<Target>(quote!(
            fn f() {
                #![allow(x)]
                let a = 1;
                a
            }
        )) else {
            panic!("a function")
        };
        assert_eq!((f.inner_attrs.len(), f.stmts.len()), (1, 2));
        for body in [quote!(let a = ; a), quote!(#![=] x), quote!(x+)] {
            assert!(matches!(
                syn::parse2::<Target>(quote!(fn f() -> u8 { #body })),
                Ok(Target::Unparsed)
            ));
        }
        assert!(matches!(
            syn::parse2::<Target>(quote!(
                fn f(&self);
            )),
            Ok(Target::Bodiless { .. })
        ));
        // A signature that does not parse is an error.
        assert!(syn::parse2::<Target>(quote!(fn f(a) {})).is_err());
    }
}
