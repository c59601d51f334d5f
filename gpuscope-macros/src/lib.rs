//! Attribute macros for gpuscope: `#[gpu_scope]`, `#[no_grad]` and
//! `#[derive(ScopeValue)]`.
//!
//! Use them through the `gpuscope` crate (`use gpuscope::{gpu_scope, no_grad,
//! ScopeValue};`): the expansions name `::gpuscope::__private`, so the crate must be a
//! dependency under the name `gpuscope`. Runnable examples are in `gpuscope`'s docs;
//! the examples here are not compiled.
//!
//! # `#[gpu_scope]`
//!
//! Opens a scope for the duration of a function: every tensor made while it runs belongs
//! to the scope; when it returns, the tensors in its return value move to the caller's
//! scope, and any other tensor made inside and still alive has leaked and is reported
//! (through `tracing`, target `gpuscope::leak`) with the file:line:column that made it.
//!
//! ```ignore
//! use gpuscope::{gpu_scope, Device, Tensor, TensorError};
//!
//! #[gpu_scope(leaks = "deny")]
//! fn step(x: &Tensor, dev: &Device) -> Result<Tensor, TensorError> {
//!     let tmp = Tensor::ones(x.shape(), dev)?; // freed before the scope exits: fine
//!     let out = Tensor::zeros(x.shape(), dev)?;
//!     drop(tmp);
//!     Ok(out) // returned: moves to the caller's scope
//! }
//! ```
//!
//! Arguments, all optional, in any order:
//!
//! | argument | meaning |
//! |---|---|
//! | `name = "train_step"` | the scope's name in reports (default: the function's name) |
//! | `leaks = "warn"` / `"deny"` / `"allow"` | what a leak does: report it, report it and panic at exit, or nothing (default: the process-wide policy, `GPUSCOPE_LEAKS`, `warn` unless set) |
//! | `sync` (or `sync = true` / `sync = false`) | at exit, wait for the GPU streams the scope's tensors were made or recorded on |
//! | `device = <expr>` | the device the scope runs on, see below |
//! | `allow(rule, ..)`, `warn(..)`, `deny(..)` | levels of gpuscope's lint rules for this function, see [Lints](#lints) |
//!
//! `device = <expr>` is evaluated once when the scope opens (after the parameters are
//! bound, before the body; for an `async fn`, at its first poll) and must be, or deref
//! to, a `Device` (`device = &self.device`, `device = dev`, an `Arc<Device>`...): a wrong
//! type is a compile error at the expression. It is borrowed only for that moment. With
//! `sync`, the scope also waits for that whole device at exit (before its leak report),
//! which covers work on streams none of the scope's tensors was made or recorded on.
//!
//! At exit every scope records a fence (an event) on each stream its tensors were made
//! or recorded on: memory they gave back goes to other streams once the fence has
//! completed, without a stream synchronisation. `sync` waits for those streams too, with
//! tracking on or off.
//!
//! ## Expansion
//!
//! For a synchronous function:
//!
//! ```ignore
//! fn step(x: &Tensor) -> Tensor {
//!     let __gpuscope_scope = ::gpuscope::__private::ScopeGuard::enter(
//!         ::gpuscope::__private::ScopeOptions {
//!             name: "step",
//!             file: file!(), line: line!(), column: column!(), // spanned at `step`
//!             leaks: None,
//!             sync: false,
//!         });
//!     mod __gpuscope_escape { /* traits All, Ok, None: see below */ }
//!     // ... the body, where each `return <e>` and the tail expression <e> become:
//!     {
//!         let __gpuscope_ret: Tensor = <e>; // the declared return type, unless `impl Trait`
//!         {
//!             use __gpuscope_escape::{All as _, None as _, Ok as _};
//!             (&&&::gpuscope::__private::Escapee(&__gpuscope_ret))
//!                 .__gpuscope_escape(&__gpuscope_scope);
//!         }
//!         __gpuscope_ret
//!     }
//! }
//! ```
//!
//! - The guard is the body's first local, so it drops last, after the body's locals
//!   (and also on `?`, early `return` and panic).
//! - Escaping uses autoref dispatch over three traits with one method name, tried in
//!   this order: a returned type implementing `ScopeValue` has all its tensors moved to
//!   the caller (`All`); a `Result<T, E>` whose `T` implements it but whose `E` does not
//!   (`TensorError`, `Box<dyn Error>`...) has its `Ok` value's tensors moved (`Ok`); any
//!   other type is let through untouched (`None`): it holds no tensor the scope could
//!   find, so tensors inside it are reported.
//! - `return`s inside closures, async blocks and nested items are theirs, not the
//!   function's, and are left alone. So are `return`s that a macro invocation expands
//!   to, which the attribute cannot see: tensors returned that way are reported.
//! - `?` returns are not rewritten: an `Err` holding tensors is reported as a leak.
//! - The user's tokens keep their spans, so errors in the body point at the body; the
//!   added locals are hygienic (`Span::mixed_site`).
//!
//! For an `async fn`, the scope stays open across `.await`s and closes when the future
//! completes or is dropped; the body becomes:
//!
//! ```ignore
//! mod __gpuscope_escape { /* as above */ }
//! struct __GpuscopeOut<T>(T); // a ScopeValue holding no tensors, for any output type
//! ::gpuscope::__private::scoped(options, async move {
//!     let __gpuscope_ret = async move {
//!         // Fixes the block's output type to the declared one (tracing-attributes' trick),
//!         // so that `?` infers and mismatches are reported at the user's expressions.
//!         if false { let __fake: Output = loop {}; return __fake; }
//!         /* the body, unchanged */
//!     }
//!     .await;
//!     { /* escape __gpuscope_ret's tensors, as above, through a short-lived nested guard */ }
//!     __GpuscopeOut(__gpuscope_ret)
//! })
//! .await
//! .0
//! ```
//!
//! A synchronous function whose last expression is `async [move] { .. }` or
//! `Box::pin(async [move] { .. })` (what `#[async_trait]` generates, or a hand-written
//! `-> impl Future`) gets the same treatment on that future: the scope is open while
//! the future runs, not while the function builds it.
//!
//! It goes on free functions, methods (`self`, `&self`, `&mut self`), generic
//! functions, `unsafe fn`, `extern fn`, `async fn`, functions returning `impl Trait`,
//! and trait methods with a default body. Not on a `const fn`, a trait method without a
//! body, or anything that is not a function.
//!
//! # `#[no_grad]`
//!
//! Turns grad mode off for the function's body and restores the previous mode when it
//! returns (also on early return and panic):
//! `let __gpuscope_no_grad = ::gpuscope::__private::GradModeGuard::no_grad();` first
//! in the body. On an `async fn` (or a function returning an async block, as above),
//! grad mode is off during each poll of the body's future only, since grad mode is per
//! thread and the future may move between threads at each `.await`. Takes no arguments
//! but lint levels (`#[no_grad(allow(rule))]`, see [Lints](#lints)).
//!
//! # `#[derive(ScopeValue)]`
//!
//! Implements `ScopeValue` for a struct (named, tuple or unit) or an enum by visiting
//! each field. A field whose type does not implement it (or that holds no tensors worth
//! tracking) is left out with `#[scope_value(skip)]`. Each type parameter used in a
//! visited field gets a `T: ScopeValue` bound. Unions are rejected.
//!
//! ```ignore
//! #[derive(ScopeValue)]
//! struct Output<T> {
//!     logits: Tensor,
//!     cache: Vec<T>,
//!     #[scope_value(skip)]
//!     tokenizer: std::sync::Arc<Tokenizer>,
//! }
//! ```
//!
//! # Lints
//!
//! Both attributes run the rules of `gpuscope-lint` on the function's body (the same
//! rules as the `gpuscope lint` command), knowing whether the function is
//! `#[gpu_scope]` and/or `#[no_grad]`:
//!
//! - a `deny` finding (`forget_tensor`, `static_escape`, `backward_in_no_grad` by
//!   default) is a compile error at the offending expression, with the rule's help;
//! - a `warn` finding (`graph_accumulation`, `missing_zero_grad`, ... by default) is a
//!   real compiler warning over the expression, on stable Rust: the expansion leaves an
//!   unused `#[must_use]` value named after the rule there (`warning: unused
//!   `gpuscope_graph_accumulation` in tuple element 0 that must be used`, then the message
//!   and help), so `#[allow(unused_must_use)]` also silences it. The function compiles and
//!   behaves the same.
//!
//! Both underline the whole offending expression. `allow(rule, ..)`, `warn(rule, ..)` and
//! `deny(rule, ..)` set levels for the function (an unknown rule is an error, with a
//! suggestion); `#[gpuscope::lints::allow(rule, ..)]` allows rules on any item, and on a
//! statement inside these functions; the rules page is `docs/lints.md`. On a function with both attributes,
//! the levels of both apply and the body is linted once, by the attribute that expands
//! first (it marks the other with a hidden `__gpuscope_linted` argument).
//!
//! ```ignore
//! #[gpu_scope(allow(static_escape))] // a cache on purpose
//! fn warm_up(dev: &Device) -> Result<(), TensorError> {
//!     CACHE.lock().unwrap().push(Tensor::zeros(&[1 << 20], dev)?);
//!     Ok(())
//! }
//! ```
//!
//! # Errors
//!
//! A misuse is one compile error spanned on the offending token, and the item is
//! emitted unchanged, so nothing cascades from it: an unknown argument (with a
//! suggestion for near misses), a repeated argument, a value of the wrong kind, an
//! unknown lint rule, the attribute on something that is not a function with a body,
//! or on a `const fn`.

mod args;
mod derive;
mod diagnostics;
mod expand;
mod item;
mod lint;

use proc_macro::TokenStream;

/// `#[gpu_scope]`, `#[gpu_scope(name = "...", leaks = "warn" | "deny" | "allow", sync,
/// device = <expr>)]`: the function runs in a scope. Tensors made inside and returned
/// (in any `ScopeValue`: tuples, `Option`, `Result`, `Vec`, `#[derive(ScopeValue)]`
/// types) move to the caller's scope; tensors made inside and still alive at exit
/// otherwise (stored in a static or a captured container, in an `Rc` cycle, forgotten)
/// are reported with the file:line:column that made them.
///
/// - `name`: the scope's name in reports (default: the function's name).
/// - `leaks`: `"warn"` reports through `tracing` (target `gpuscope::leak`), `"deny"`
///   also panics at exit, `"allow"` says nothing (default: `GPUSCOPE_LEAKS`, else warn).
/// - `sync`: at exit, wait for the streams the scope's tensors were made on.
/// - `device = <expr>`: evaluated when the scope opens, must be (or deref to) a
///   `Device`; with `sync`, the scope also waits for that whole device at exit.
/// - `allow(rule, ..)`, `warn(..)`, `deny(..)`: levels of gpuscope's lint rules, which
///   run on the body: `deny` findings are compile errors, `warn` findings warnings.
///
/// On an `async fn` the scope stays open across `.await`s and closes when the future
/// completes or is dropped. `?` returns do not escape (an `Err` holding tensors is
/// reported). Not for `const fn` or bodiless trait methods.
#[proc_macro_attribute]
pub fn gpu_scope(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::gpu_scope(args.into(), item.into()).into()
}

/// `#[no_grad]`: grad mode is off while the function runs and is restored when it
/// returns, also on early return and panic. On an `async fn`, it is off during each poll
/// of the body (grad mode is per thread). Takes no arguments but lint levels
/// (`allow(rule, ..)`, `warn(..)`, `deny(..)`), as `#[gpu_scope]`.
#[proc_macro_attribute]
pub fn no_grad(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::no_grad(args.into(), item.into()).into()
}

/// `#[gpuscope::lints::allow(rule, ..)]`: allows gpuscope lint rules on an item (function,
/// `impl`, trait, module), as clippy's `#[allow(..)]` does for clippy's lints; and, inside a
/// function carrying `#[gpu_scope]`, `#[no_grad]` or this attribute, on a statement. An
/// unknown rule is an error. `gpuscope lint` reads the same attributes. Re-exported as
/// `gpuscope::lints::allow` (not at the crate root, where it would make the built-in
/// `#[allow]` ambiguous after `use gpuscope::*`).
#[proc_macro_attribute]
pub fn allow(args: TokenStream, item: TokenStream) -> TokenStream {
    lint::allow(args.into(), item.into()).into()
}

/// `#[derive(ScopeValue)]`: implements `ScopeValue` for a struct or an enum by visiting
/// every field, so that a value of the type returned from a `#[gpu_scope]` function
/// takes its tensors along. Leave a field out with `#[scope_value(skip)]` (types that
/// do not implement `ScopeValue`). Each type parameter used in a visited field gets a
/// `T: ScopeValue` bound. Not for unions.
#[proc_macro_derive(ScopeValue, attributes(scope_value))]
pub fn derive_scope_value(input: TokenStream) -> TokenStream {
    derive::derive_scope_value(input.into()).into()
}
