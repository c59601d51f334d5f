//! The path every expansion calls into, and the locals it adds.

use proc_macro2::{Ident, Span, TokenStream};
use quote::quote;

/// `::gpuscope::__private`: the runtime's support for expansions (so the crate must be a
/// dependency under the name `gpuscope`).
pub(super) fn private() -> TokenStream {
    quote!(::gpuscope::__private)
}

/// A local of the expansion: hygienic (`Span::mixed_site`), so that the user's code can
/// neither see nor shadow it.
pub(super) fn local(name: &str) -> Ident {
    Ident::new(name, Span::mixed_site())
}
