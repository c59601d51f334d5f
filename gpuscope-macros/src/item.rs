//! The item an attribute is put on: a function with a body (free, in an `impl`, or a
//! trait method with a default body), or something else, which is an error.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{ToTokens, TokenStreamExt};
use syn::parse::{Parse, ParseStream};
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
    /// Something else: what it is (`a struct`) and the span of its keyword.
    Other { what: &'static str, span: Span },
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
            let (what, span) = describe_item(input);
            // Leave the rest unread: the item is passed through unchanged.
            input.parse::<TokenStream>()?;
            return Ok(Target::Other { what, span });
        }
        let sig: Signature = input.parse()?;
        if input.peek(syn::Token![;]) {
            let semi: syn::Token![;] = input.parse()?;
            return Ok(Target::Bodiless { semi: semi.span });
        }
        let content;
        let brace = braced!(content in input);
        let inner_attrs = content.call(Attribute::parse_inner)?;
        let stmts = content.call(Block::parse_within)?;
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
fn describe_item(input: ParseStream<'_>) -> (&'static str, Span) {
    let fork = input.fork();
    let mut first: Option<Span> = None;
    while let Ok(tt) = fork.parse::<TokenTree>() {
        let span = tt.span();
        let TokenTree::Ident(ident) = tt else {
            return ("this item", first.unwrap_or(span));
        };
        let what = match ident.to_string().as_str() {
            "struct" => "a struct",
            "enum" => "an enum",
            "union" => "a union",
            "const" => "a const item",
            "static" => "a static",
            "impl" => "an impl block",
            "trait" => "a trait",
            "mod" => "a module",
            "type" => "a type alias",
            "use" => "a use declaration",
            "extern" => "an extern block",
            "macro_rules" => "a macro",
            // `unsafe impl`, `auto trait`: look at the next word.
            "unsafe" | "auto" => {
                first.get_or_insert(span);
                continue;
            }
            _ => "this item",
        };
        return (what, span);
    }
    ("this item", first.unwrap_or_else(Span::call_site))
}
