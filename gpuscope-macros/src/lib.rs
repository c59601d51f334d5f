//! The macros of gpuscope: `#[gpu_scope]`, `#[no_grad]` and `#[derive(ScopeValue)]`.
//!
//! Use them through the `gpuscope` crate (`use gpuscope::{gpu_scope, no_grad,
//! ScopeValue};`), whose documentation of
//! [`gpu_scope`](https://docs.rs/gpuscope/latest/gpuscope/attr.gpu_scope.html),
//! [`no_grad`](https://docs.rs/gpuscope/latest/gpuscope/attr.no_grad.html) and
//! [`ScopeValue`](https://docs.rs/gpuscope/latest/gpuscope/derive.ScopeValue.html) is
//! the reference (in this repository: `src/lib.rs`; its examples run as tests there).
//! The expansions name `::gpuscope::__private`, so that crate must be a dependency under
//! the name `gpuscope`. This page is for who works on the macros.
//!
//! # Where things live
//!
//! | module | job |
//! |---|---|
//! | `lib.rs` | the three entry points |
//! | `item.rs` | what an attribute is on: a function with a body, a bodiless trait method, a function whose body does not parse, or another kind of item (`ItemKind`) |
//! | `args/` | the attributes' arguments (`ScopeArgs`, `parse_no_grad`); self-contained (syn, proc-macro2, strsim), so a fuzz target can include it by `#[path]`; `args/words.rs`: "did you mean" and lists in messages |
//! | `lint.rs` | the lint rules of `gpuscope-lint` on the body: `deny` findings as errors, `warn` findings as deprecation warnings; lint-level arguments (`LintArgs`) |
//! | `expand/` | `#[gpu_scope]` and `#[no_grad]`: `mod.rs` finds the function and checks it, then `scope.rs` and `no_grad.rs` generate the code, with `returns.rs` (what a function returns; the rewriter of its returns), `future.rs` (async bodies; a returned async block) and `paths.rs` (the runtime path; hygienic locals) |
//! | `derive/` | `#[derive(ScopeValue)]` in three steps: `parse.rs`, `validate.rs`, `expand.rs` (the impl, or a fallback impl beside an error) |
//! | `diagnostics.rs` | how the attributes fail: one `compile_error!`, then the item unchanged |
//! | `expansion_size.rs` | (tests) the size of the expansions of the ui pass cases, for `bench/expansion_size.sh` |
//!
//! # Expansion
//!
//! Everything an expansion runs is defined once in the runtime (`gpuscope_runtime::private`,
//! reached as `::gpuscope::__private`); the expansion holds calls only. For a synchronous
//! function:
//!
//! ```ignore
//! fn step(x: &Tensor) -> Tensor {
//!     let __gpuscope_scope = ::gpuscope::__private::ScopeGuard::enter(
//!         ::gpuscope::__private::options("step", file!(), line!(), column!()) // spanned at `step`
//!             .leaks(::gpuscope::__private::LeakPolicy::Deny), // when given; `.sync(true)` too
//!     );
//!     // with `device = <expr>`: `let __gpuscope_device: &Device = &(<expr>);`
//!     // and with `sync`: `let __gpuscope_sync_device = SyncDevice::new(__gpuscope_device, "step");`
//!     // ... the body, where each `return <e>` and the tail expression <e> become:
//!     {
//!         let __gpuscope_ret: Tensor = <e>; // the declared return type, unless `impl Trait`
//!         ::gpuscope::__private::escape!(&__gpuscope_scope, &__gpuscope_ret);
//!         __gpuscope_ret
//!     }
//! }
//! ```
//!
//! - The guard is the body's first local, so it drops last, after the body's locals
//!   (and also on `?`, early `return` and panic).
//! - `escape!` is autoref dispatch over three traits with one method name (the runtime's
//!   `private::dispatch` explains it): a `ScopeValue` has all its tensors escape, a
//!   `Result<T: ScopeValue, E>` its `Ok` value's, any other type none.
//! - `return`s inside closures, async blocks and nested items are left alone, and so are
//!   those a macro invocation expands to.
//! - The user's tokens keep their spans, so errors in the body point at the body; the
//!   added locals are hygienic (`Span::mixed_site`).
//!
//! For an `async fn`, the body becomes (the scope stays open across `.await`s and closes
//! when the future completes or is dropped):
//!
//! ```ignore
//! ::gpuscope::__private::scope_future(options, async move {
//!     // Fixes the block's output type to the declared one (tracing-attributes' trick),
//!     // so that `?` infers and mismatches are reported at the user's expressions.
//!     if false { let __fake: Output = loop {}; return __fake; }
//!     /* `device = ..` statements, then the body, unchanged */
//! }, |__gpuscope_ret, __gpuscope_scope| {
//!     ::gpuscope::__private::escape!(__gpuscope_scope, __gpuscope_ret);
//! })
//! .await
//! ```
//!
//! A synchronous function whose last expression is `async [move] { .. }` or
//! `Box::pin(async [move] { .. })` gets the same around that block, inside a new
//! `async [move] { .. }` (so that the scope opens at the first poll).
//!
//! `#[no_grad]` puts `let __gpuscope_no_grad = ::gpuscope::__private::GradModeGuard::no_grad();`
//! first in a synchronous body, and `::gpuscope::__private::no_grad_future(<body>).await`
//! around an async one (off during each poll). Both attributes lint the body first (see
//! `lint.rs`); on a function with both, the first to expand lints it for both.
//!
//! `#[derive(ScopeValue)]` writes `for_each_tensor` calling each visited field's, spanned
//! at the field's type (a field whose type is not a `ScopeValue` is the error's place).
//!
//! # Errors
//!
//! A misuse is one compile error spanned on the offending token, and the item is emitted
//! unchanged, so nothing cascades from it. A function whose body does not parse is
//! emitted as written (after its arguments are checked), for rustc to report once. The
//! derive reports each mistake and adds a fallback impl. Every diagnostic has a ui test
//! in `tests/ui/fail/`.

mod args;
mod derive;
mod diagnostics;
mod expand;
#[cfg(test)]
mod expansion_size;
mod item;
mod lint;

use proc_macro::TokenStream;

/// (Defined in `gpuscope-macros`, documented with runnable examples on its re-export
/// [`gpuscope::gpu_scope`](https://docs.rs/gpuscope/latest/gpuscope/attr.gpu_scope.html).)
#[proc_macro_attribute]
pub fn gpu_scope(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::gpu_scope(args.into(), item.into()).into()
}

/// (Defined in `gpuscope-macros`, documented with runnable examples on its re-export
/// [`gpuscope::no_grad`](https://docs.rs/gpuscope/latest/gpuscope/attr.no_grad.html).)
#[proc_macro_attribute]
pub fn no_grad(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::no_grad(args.into(), item.into()).into()
}

/// (Defined in `gpuscope-macros`, documented on its re-export
/// [`gpuscope::lints::allow`](https://docs.rs/gpuscope/latest/gpuscope/lints/index.html).)
#[proc_macro_attribute]
pub fn allow(args: TokenStream, item: TokenStream) -> TokenStream {
    lint::allow(args.into(), item.into()).into()
}

/// (Defined in `gpuscope-macros`, documented with runnable examples on its re-export
/// [`gpuscope::ScopeValue`](https://docs.rs/gpuscope/latest/gpuscope/derive.ScopeValue.html).)
#[proc_macro_derive(ScopeValue, attributes(scope_value))]
pub fn derive_scope_value(input: TokenStream) -> TokenStream {
    derive::derive_scope_value(input.into()).into()
}
