//! How the attributes fail: one `compile_error!` spanned on the offending token,
//! followed by the user's item unchanged (as `tokio-macros` does), so that nothing else
//! cascades from the mistake. (The derive's failures add a fallback impl instead: see
//! `derive`.)

use proc_macro2::TokenStream;
use quote::ToTokens;

/// The error as a `compile_error!`, then `original` untouched.
pub(crate) fn error_with_item(error: syn::Error, original: TokenStream) -> TokenStream {
    let mut out = error.to_compile_error();
    original.to_tokens(&mut out);
    out
}
