//! The arguments of `#[gpu_scope(..)]` and `#[no_grad(..)]` on arbitrary token streams:
//! the macros' own parser (compiled here by path) with the lint crate's level parser, as
//! the macros combine them: arguments or one error, never a panic.
#![no_main]

use std::str::FromStr;

use libfuzzer_sys::fuzz_target;
use proc_macro2::TokenStream;
use syn::meta::ParseNestedMeta;

#[allow(dead_code, unused_imports)]
#[path = "../../gpuscope-macros/src/args/mod.rs"]
mod args;

#[derive(Default)]
struct Levels(Vec<gpuscope_lint::attrs::LevelArg>);

impl args::LevelArgs for Levels {
    fn parse_meta(&mut self, meta: &ParseNestedMeta<'_>, key: &str) -> syn::Result<bool> {
        match gpuscope_lint::attrs::parse_level_list(meta, key)? {
            Some(list) => {
                self.0.extend(list);
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

fuzz_target!(|text: &str| {
    let Ok(tokens) = TokenStream::from_str(text) else {
        return;
    };
    let _ = args::ScopeArgs::<Levels>::parse(tokens.clone());
    let _ = args::parse_no_grad::<Levels>(tokens.clone());
    let _ = gpuscope_lint::attrs::parse_allow_list(tokens);
});
