//! The code of `#[no_grad]`: `let __gpuscope_no_grad =
//! ::gpuscope::__private::GradModeGuard::no_grad();` first in a synchronous body; for
//! an `async fn` (and around an async block the function returns), the runtime's
//! `no_grad_future`, off during each poll only, since grad mode is per thread and the
//! future may move between threads at each `.await`.

use proc_macro2::TokenStream;
use quote::quote;
use syn::Expr;

use super::future::{async_body, replace_future, returned_future};
use super::paths::{local, private};
use crate::item::FnItem;

/// The function `f` with grad mode off.
pub(super) fn expand(f: &FnItem) -> TokenStream {
    let p = private();
    if f.sig.asyncness.is_some() {
        let future = async_body(f, TokenStream::new());
        return f.to_tokens_with_body(quote!(#p::no_grad_future(#future).await));
    }
    if let Some(found) = returned_future(&f.stmts) {
        // Still an async block, so that `#[gpu_scope]` expanding after finds it.
        let capture = found.capture();
        let user = found.tokens();
        let wrapped = quote!(async #capture { #p::no_grad_future(#user).await });
        let stmts = replace_future(&f.stmts, &found, Expr::Verbatim(wrapped));
        return f.to_tokens_with_body(quote!(#(#stmts)*));
    }
    let guard = local("__gpuscope_no_grad");
    let stmts = &f.stmts;
    f.to_tokens_with_body(quote! {
        let #guard = #p::GradModeGuard::no_grad();
        #(#stmts)*
    })
}
