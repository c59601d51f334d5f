//! The code of `#[gpu_scope]`. For a synchronous function:
//!
//! ```ignore
//! let __gpuscope_scope = ::gpuscope::__private::ScopeGuard::enter(
//!     ::gpuscope::__private::options("step", file!(), line!(), column!()), // at `step`
//! );
//! // `device = <expr>`, `sync`: see `device_statements`
//! // the body, where each returned value <e> becomes:
//! {
//!     let __gpuscope_ret: Ret = <e>;
//!     ::gpuscope::__private::escape!(&__gpuscope_scope, &__gpuscope_ret);
//!     __gpuscope_ret
//! }
//! ```
//!
//! For an `async fn` (and around an async block the function returns), the scope is the
//! runtime's `scope_future`, which hands the output to the same escape when the future
//! completes.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::Expr;
use syn::spanned::Spanned;

use super::future::{async_body, replace_future, returned_future};
use super::paths::{local, private};
use super::returns::{ReturnKind, rewrite_returns};
use crate::args::{Leaks, ScopeArgs};
use crate::item::FnItem;
use crate::lint::LintArgs;

type Args = ScopeArgs<LintArgs>;

/// The function `f` with its scope.
pub(super) fn expand(f: &FnItem, args: &Args) -> TokenStream {
    let options = options(f, args);
    let device = device_statements(args, &scope_name(f, args));

    if f.sig.asyncness.is_some() {
        let body = scope_future(&options, async_body(f, device));
        return f.to_tokens_with_body(body);
    }

    if let Some(found) = returned_future(&f.stmts) {
        // `fn f() -> Pin<Box<dyn Future<..>>> { Box::pin(async move { .. }) }` (what
        // `#[async_trait]` writes) or `fn f() -> impl Future { async move { .. } }`: the
        // scope goes around the future, not around making it. The scope opens at the
        // first poll of the block put in place of the user's, as an `async fn`'s does.
        let capture = found.capture();
        let user = found.tokens();
        let future = if device.is_empty() {
            user
        } else {
            quote!(async #capture { #device #user.await })
        };
        let body = scope_future(&options, future);
        let stmts = replace_future(
            &f.stmts,
            &found,
            Expr::Verbatim(quote!(async #capture { #body })),
        );
        return f.to_tokens_with_body(quote!(#(#stmts)*));
    }

    let p = private();
    let guard = local("__gpuscope_scope");
    let ret = ReturnKind::of(&f.sig.output);
    let mut stmts = f.stmts.clone();
    if ret.escapes() {
        let value = local("__gpuscope_ret");
        let annotation = ret.annotation();
        rewrite_returns(&mut stmts, &|expr| {
            Expr::Verbatim(quote! {
                {
                    // A diverging `todo!()` tail is no more a "diverging sub-expression"
                    // than it was before the rewrite.
                    #[allow(clippy::diverging_sub_expression)]
                    let #value #annotation = #expr;
                    #p::escape!(&#guard, &#value);
                    #value
                }
            })
        });
    }
    f.to_tokens_with_body(quote! {
        let #guard = #p::ScopeGuard::enter(#options);
        #device
        #(#stmts)*
    })
}

/// `scope_future(options, future, escape).await`: `future` runs in the scope, and its
/// output's tensors escape through the dispatch of `escape!`.
fn scope_future(options: &TokenStream, future: TokenStream) -> TokenStream {
    let p = private();
    let value = local("__gpuscope_ret");
    let guard = local("__gpuscope_scope");
    quote! {
        #p::scope_future(#options, #future, |#value, #guard| {
            #p::escape!(#guard, #value);
        })
        .await
    }
}

/// `options(name, file!(), line!(), column!())` (the site being the function's name),
/// then `.leaks(..)` and `.sync(true)` when given.
fn options(f: &FnItem, args: &Args) -> TokenStream {
    let p = private();
    let ident = &f.sig.ident;
    let name = scope_name(f, args);
    // `line!()` and `column!()` spanned at the function's name report its position.
    let file = quote_spanned!(ident.span()=> ::core::file!());
    let line = quote_spanned!(ident.span()=> ::core::line!());
    let column = quote_spanned!(ident.span()=> ::core::column!());
    let mut options = quote!(#p::options(#name, #file, #line, #column));
    if let Some(leaks) = args.leaks {
        let variant = match leaks {
            Leaks::Warn => quote!(Warn),
            Leaks::Deny => quote!(Deny),
            Leaks::Allow => quote!(Allow),
        };
        options.extend(quote!(.leaks(#p::LeakPolicy::#variant)));
    }
    if args.sync {
        options.extend(quote!(.sync(true)));
    }
    options
}

/// The statements that evaluate `device = <expr>`: checked to be (or deref to) a
/// `Device`; with `sync`, a guard that waits for the whole device when dropped.
fn device_statements(args: &Args, name: &syn::LitStr) -> TokenStream {
    let Some((key, expr)) = &args.device else {
        return TokenStream::new();
    };
    let p = private();
    // A wrong type is reported at the expression, "expected due to" `device`.
    let device_ref = quote_spanned!(expr.span()=> &(#expr));
    let device_type = quote_spanned!(*key=> &#p::Device);
    let device = local("__gpuscope_device");
    let check = quote! {
        let #device: #device_type = #device_ref;
    };
    if !args.sync {
        return check;
    }
    let guard = local("__gpuscope_sync_device");
    quote! {
        #check
        let #guard = #p::SyncDevice::new(#device, #name);
    }
}

/// The scope's name: `name = "..."`, else the function's name.
fn scope_name(f: &FnItem, args: &Args) -> syn::LitStr {
    match &args.name {
        Some(lit) => lit.clone(),
        None => {
            let ident = &f.sig.ident;
            let name = ident.to_string();
            let name = name.strip_prefix("r#").unwrap_or(&name);
            syn::LitStr::new(name, ident.span())
        }
    }
}
