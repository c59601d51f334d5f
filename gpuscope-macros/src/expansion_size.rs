//! The size of what the macros generate for the ui pass cases (`tests/ui/pass/*.rs`):
//! each file with every `#[gpu_scope]`, `#[no_grad]` and `#[derive(ScopeValue)]`
//! expanded in process (nested ones too, outermost attribute first, as rustc does),
//! against the same file with those attributes removed. Both are pretty-printed as
//! `cargo expand` does (`prettyplease`); the table gives what the expansion adds.
//!
//! `bash bench/expansion_size.sh` prints the table; as a test it checks that every
//! expansion of every pass case is well-formed Rust.

use std::path::Path;

use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;
use syn::visit_mut::VisitMut;
use syn::{Attribute, ImplItem, Item, Meta, Stmt, TraitItem};

/// Expands (or, with `expand: false`, strips) the gpuscope macros of a parsed file.
struct Expander {
    expand: bool,
    /// Macro invocations expanded.
    calls: usize,
}

#[derive(Clone, Copy)]
enum Attr {
    GpuScope,
    NoGrad,
}

fn gpuscope_attr(attrs: &[Attribute]) -> Option<(usize, Attr)> {
    attrs.iter().enumerate().find_map(|(i, a)| {
        match a.path().segments.last()?.ident.to_string().as_str() {
            "gpu_scope" => Some((i, Attr::GpuScope)),
            "no_grad" => Some((i, Attr::NoGrad)),
            _ => None,
        }
    })
}

/// Takes the first gpuscope attribute off `attrs`: which one and its arguments.
fn take_attr(attrs: &mut Vec<Attribute>) -> Option<(Attr, TokenStream)> {
    let (i, which) = gpuscope_attr(attrs)?;
    let attr = attrs.remove(i);
    let args = match attr.meta {
        Meta::List(list) => list.tokens,
        _ => TokenStream::new(),
    };
    Some((which, args))
}

fn call_attr(which: Attr, args: TokenStream, item: TokenStream) -> TokenStream {
    match which {
        Attr::GpuScope => crate::expand::gpu_scope(args, item),
        Attr::NoGrad => crate::expand::no_grad(args, item),
    }
}

/// Removes `ScopeValue` from the item's derives; whether it was there.
fn take_derive(attrs: &mut Vec<Attribute>) -> bool {
    let mut found = false;
    for attr in attrs.iter_mut() {
        if !attr.path().is_ident("derive") {
            continue;
        }
        let paths = attr
            .parse_args_with(
                syn::punctuated::Punctuated::<syn::Path, syn::Token![,]>::parse_terminated,
            )
            .expect("a derive list");
        let kept: Vec<&syn::Path> = paths
            .iter()
            .filter(|p| {
                let is = p.segments.last().is_some_and(|s| s.ident == "ScopeValue");
                found |= is;
                !is
            })
            .collect();
        *attr = syn::parse_quote!(#[derive(#(#kept),*)]);
    }
    attrs.retain(|a| match &a.meta {
        Meta::List(l) => !(l.path.is_ident("derive") && l.tokens.is_empty()),
        _ => true,
    });
    found
}

fn strip_helper_attrs(item: &mut Item) {
    struct Strip;
    impl VisitMut for Strip {
        fn visit_field_mut(&mut self, f: &mut syn::Field) {
            f.attrs.retain(|a| !a.path().is_ident("scope_value"));
        }
    }
    Strip.visit_item_mut(item);
}

impl Expander {
    fn items(&mut self, items: &mut Vec<Item>) {
        let old = std::mem::take(items);
        for item in old {
            items.extend(self.item(item));
        }
    }

    fn item(&mut self, mut item: Item) -> Vec<Item> {
        if let Item::Fn(f) = &mut item {
            if let Some((which, args)) = take_attr(&mut f.attrs) {
                if self.expand {
                    self.calls += 1;
                    let out = call_attr(which, args, f.to_token_stream());
                    let file: syn::File = syn::parse2(out).expect("the expansion parses");
                    return file.items.into_iter().flat_map(|i| self.item(i)).collect();
                }
                return self.item(item);
            }
        }
        let derived = match &mut item {
            Item::Struct(s) => take_derive(&mut s.attrs),
            Item::Enum(e) => take_derive(&mut e.attrs),
            _ => false,
        };
        if derived {
            let mut out = Vec::new();
            if self.expand {
                self.calls += 1;
                let tokens = crate::derive::derive_scope_value(item.to_token_stream());
                let file: syn::File = syn::parse2(tokens).expect("the derive parses");
                out.extend(file.items);
            }
            strip_helper_attrs(&mut item);
            out.insert(0, item);
            return out;
        }
        self.visit_item_mut(&mut item);
        vec![item]
    }

    fn impl_item(&mut self, item: &mut ImplItem) {
        if let ImplItem::Fn(f) = item {
            if let Some((which, args)) = take_attr(&mut f.attrs) {
                if self.expand {
                    self.calls += 1;
                    let out = call_attr(which, args, f.to_token_stream());
                    *item = syn::parse2(out).expect("the expansion parses");
                }
                return self.impl_item(item);
            }
        }
        syn::visit_mut::visit_impl_item_mut(self, item);
    }

    fn trait_item(&mut self, item: &mut TraitItem) {
        if let TraitItem::Fn(f) = item {
            if let Some((which, args)) = take_attr(&mut f.attrs) {
                if self.expand {
                    self.calls += 1;
                    let out = call_attr(which, args, f.to_token_stream());
                    *item = syn::parse2(out).expect("the expansion parses");
                }
                return self.trait_item(item);
            }
        }
        syn::visit_mut::visit_trait_item_mut(self, item);
    }
}

impl VisitMut for Expander {
    fn visit_file_mut(&mut self, f: &mut syn::File) {
        self.items(&mut f.items);
    }

    fn visit_item_mod_mut(&mut self, m: &mut syn::ItemMod) {
        if let Some((_, items)) = &mut m.content {
            self.items(items);
        }
    }

    fn visit_block_mut(&mut self, b: &mut syn::Block) {
        let old = std::mem::take(&mut b.stmts);
        for stmt in old {
            match stmt {
                Stmt::Item(item) => b.stmts.extend(self.item(item).into_iter().map(Stmt::Item)),
                mut other => {
                    syn::visit_mut::visit_stmt_mut(self, &mut other);
                    b.stmts.push(other);
                }
            }
        }
    }

    fn visit_impl_item_mut(&mut self, i: &mut ImplItem) {
        self.impl_item(i);
    }

    fn visit_trait_item_mut(&mut self, i: &mut TraitItem) {
        self.trait_item(i);
    }
}

/// Leaf tokens, each delimiter pair counting as two.
fn count_tokens(tokens: TokenStream) -> usize {
    tokens
        .into_iter()
        .map(|t| match t {
            TokenTree::Group(g) => 2 + count_tokens(g.stream()),
            _ => 1,
        })
        .sum()
}

/// One pass case: (macro calls, plain tokens, expanded tokens, plain bytes, expanded
/// bytes), bytes of the pretty-printed file.
fn measure(path: &Path) -> (usize, usize, usize, usize, usize) {
    let source = std::fs::read_to_string(path).expect("read a pass case");
    let parsed: syn::File = syn::parse_file(&source).expect("a pass case parses");
    let mut plain = parsed.clone();
    Expander {
        expand: false,
        calls: 0,
    }
    .visit_file_mut(&mut plain);
    let mut expanded = parsed;
    let mut expander = Expander {
        expand: true,
        calls: 0,
    };
    expander.visit_file_mut(&mut expanded);
    (
        expander.calls,
        count_tokens(plain.to_token_stream()),
        count_tokens(expanded.to_token_stream()),
        prettyplease::unparse(&plain).len(),
        prettyplease::unparse(&expanded).len(),
    )
}

#[test]
fn expansion_sizes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/ui/pass");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/ui/pass")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    assert!(files.len() >= 20, "pass cases in {}", dir.display());
    println!("| pass case | macro calls | added tokens | added bytes (pretty) | tokens per call |");
    println!("|---|---:|---:|---:|---:|");
    let (mut calls, mut tokens, mut bytes) = (0, 0, 0);
    for file in &files {
        let (n, plain_t, exp_t, plain_b, exp_b) = measure(file);
        assert!(n > 0, "{} uses no gpuscope macro", file.display());
        let name = file.file_name().unwrap().to_string_lossy();
        let (dt, db) = (exp_t - plain_t, exp_b - plain_b);
        println!("| {name} | {n} | {dt} | {db} | {} |", dt / n);
        calls += n;
        tokens += dt;
        bytes += db;
    }
    println!(
        "| **all {} files** | {calls} | {tokens} | {bytes} | {} |",
        files.len(),
        tokens / calls
    );
}
