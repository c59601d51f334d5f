//! `#[derive(ScopeValue)]`, in three steps (as `thiserror` does):
//!
//! - `parse`: the input and its `#[scope_value(..)]` attributes, into [`parse::Input`];
//! - `validate`: what parses but is not allowed (a union, the attribute on the type or
//!   on a variant);
//! - `expand`: the `ScopeValue` impl, visiting every field not `#[scope_value(skip)]`.
//!
//! A mistake is its own error plus a fallback impl (visiting nothing), so that no second
//! error follows where the type is used as a `ScopeValue`. (The derived item itself is
//! emitted by the compiler, not by the derive.)

mod expand;
mod parse;
mod validate;

use proc_macro2::TokenStream;
use syn::DeriveInput;

/// `#[derive(ScopeValue)]`.
pub(crate) fn derive_scope_value(input: TokenStream) -> TokenStream {
    let input: DeriveInput = match syn::parse2(input) {
        Ok(input) => input,
        Err(e) => return e.to_compile_error(),
    };
    let parsed = parse::Input::from_syn(&input).and_then(|parsed| {
        validate::check(&parsed)?;
        Ok(parsed)
    });
    match parsed {
        Ok(parsed) => expand::impl_scope_value(&parsed),
        Err(e) => {
            let mut out = e.to_compile_error();
            out.extend(expand::fallback(&input));
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    #[test]
    fn a_mistake_is_its_error_and_a_fallback_impl() {
        let out = derive_scope_value(quote! {
            struct S<T> { #[scope_value(skp)] a: T }
        })
        .to_string();
        assert_eq!(out.matches("compile_error").count(), 1, "{out}");
        assert!(out.contains("did you mean `skip`?"), "{out}");
        // The fallback visits nothing and bounds nothing.
        let fallback = &out[out.find("impl").expect("a fallback impl")..];
        assert!(!fallback.contains("where"), "{out}");
        assert!(!fallback.contains("for_each_tensor (& self . a"), "{out}");

        let out = derive_scope_value(quote! {
            struct S<T> { a: T, #[scope_value(skip)] b: u8 }
        })
        .to_string();
        assert!(!out.contains("compile_error"), "{out}");
        assert!(
            out.contains("where T : :: gpuscope :: __private :: ScopeValue"),
            "{out}"
        );
    }
}
