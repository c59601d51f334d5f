//! Futures: the async block an `async fn`'s body becomes, and the async block a
//! synchronous function returns (`async [move] { .. }` or `Box::pin(async [move] {
//! .. })`, what `#[async_trait]` writes or a hand-written `-> impl Future`), around which
//! the attributes put their work instead of around building it.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::{Expr, ExprAsync, Stmt};

use super::returns::ReturnKind;
use crate::item::FnItem;

/// `async move { <prelude> <body> }` for an `async fn`'s body, with its output type
/// fixed to the declared one: an async block's output type is inferred from its first
/// `return` or its tail, so a fake `return` of the declared type in front (the trick of
/// `tracing-attributes`) makes `?` infer and reports a mismatch at the user's
/// expression, with no code after the body. `prelude` runs at the first poll, before
/// the body.
pub(super) fn async_body(f: &FnItem, prelude: TokenStream) -> TokenStream {
    let ret = ReturnKind::of(&f.sig.output);
    let body = &f.stmts;
    let fake_return = match (ret.annotation(), ret.span()) {
        (Some(annotation), Some(at)) => {
            // Located at the declared type: "return type inferred to be `T` here" points
            // at the signature.
            let fake = proc_macro2::Ident::new(
                "__gpuscope_fake_return",
                Span::mixed_site().located_at(at),
            );
            let fake_return = quote_spanned!(at=> return #fake;);
            quote! {
                #[allow(
                    unknown_lints,
                    unreachable_code,
                    clippy::diverging_sub_expression,
                    clippy::empty_loop,
                    clippy::needless_return,
                    clippy::unreachable
                )]
                if false {
                    let #fake #annotation = loop {};
                    #fake_return
                }
            }
        }
        _ => TokenStream::new(),
    };
    quote!(async move { #fake_return #prelude #(#body)* })
}

/// The async block a function returns from its last statement.
pub(super) struct ReturnedFuture<'a> {
    /// The index of the last statement.
    pub index: usize,
    pub block: &'a ExprAsync,
}

impl ReturnedFuture<'_> {
    /// The `move` of the user's block, for the blocks put around it.
    pub(super) fn capture(&self) -> Option<syn::Token![move]> {
        self.block.capture
    }

    /// The user's async block.
    pub(super) fn tokens(&self) -> TokenStream {
        self.block.to_token_stream()
    }
}

/// The async block returned by the last statement, when it is `async [move] { .. }` or
/// `Box::pin(async [move] { .. })`.
pub(super) fn returned_future(stmts: &[Stmt]) -> Option<ReturnedFuture<'_>> {
    let index = stmts.len().checked_sub(1)?;
    let Stmt::Expr(expr, None) = &stmts[index] else {
        return None;
    };
    let block = match expr {
        Expr::Async(a) => a,
        Expr::Call(call) => {
            let Expr::Path(path) = &*call.func else {
                return None;
            };
            let segments = &path.path.segments;
            let n = segments.len();
            if n < 2
                || segments[n - 2].ident != "Box"
                || segments[n - 1].ident != "pin"
                || call.args.len() != 1
            {
                return None;
            }
            match &call.args[0] {
                Expr::Async(a) => a,
                _ => return None,
            }
        }
        _ => return None,
    };
    Some(ReturnedFuture { index, block })
}

/// `stmts` with `wrapped` where the async block of [`returned_future`] was.
pub(super) fn replace_future(
    stmts: &[Stmt],
    found: &ReturnedFuture<'_>,
    wrapped: Expr,
) -> Vec<Stmt> {
    let mut stmts = stmts.to_vec();
    if let Stmt::Expr(expr, None) = &mut stmts[found.index] {
        match expr {
            Expr::Async(_) => *expr = wrapped,
            Expr::Call(call) => {
                if let Some(arg) = call.args.first_mut() {
                    *arg = wrapped;
                }
            }
            _ => {}
        }
    }
    stmts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(body: TokenStream) -> Option<String> {
        let block: syn::Block = syn::parse2(quote!({ #body })).unwrap();
        returned_future(&block.stmts).map(|f| f.tokens().to_string())
    }

    #[test]
    fn finds_returned_blocks() {
        assert_eq!(
            found(quote!(async move { 1 })),
            Some(quote!(async move { 1 }).to_string())
        );
        assert_eq!(
            found(quote!(let a = 1; Box::pin(async { a }))),
            Some(quote!(async { a }).to_string())
        );
        assert!(found(quote!(std::boxed::Box::pin(async {}))).is_some());
        assert!(found(quote!(Box::new(async {}))).is_none());
        assert!(found(quote!(pin(async {}))).is_none());
        assert!(found(quote!(async {};)).is_none());
        assert!(found(quote!(f(async {}))).is_none());
        assert!(found(quote!()).is_none());
    }
}
