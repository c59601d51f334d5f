//! # gpuscope
//!
//! GPU memory in training code that is safe to reason about. This facade re-exports
//! [`gpuscope_runtime`] (devices, the caching allocator, tensors, scopes, traces) and,
//! as `tokio` does with `tokio-macros`, the macros of `gpuscope-macros`:
//! [`#[gpu_scope]`](macro@gpu_scope), [`#[no_grad]`](macro@no_grad) and
//! [`#[derive(ScopeValue)]`](derive@ScopeValue). Their documentation is here, on the
//! re-exports, and every example in it is compiled and run as a test of this crate.
//!
//! ```
//! use gpuscope::{gpu_scope, is_grad_enabled, no_grad, scope, Device, ScopeValue, Tensor, TensorError};
//!
//! #[derive(ScopeValue)]
//! struct Step {
//!     out: Tensor,
//!     #[scope_value(skip)]
//!     label: String,
//! }
//!
//! #[gpu_scope(leaks = "deny")] // a leak would panic at exit, naming the line that made it
//! fn step(x: &Tensor, dev: &Device) -> Result<Step, TensorError> {
//!     let tmp = Tensor::ones(x.shape(), dev)?; // dropped before the scope exits: fine
//!     let out = Tensor::zeros(x.shape(), dev)?;
//!     drop(tmp);
//!     Ok(Step { out, label: "step".into() }) // returned: moves to the caller's scope
//! }
//!
//! #[no_grad]
//! fn evaluate() -> bool {
//!     is_grad_enabled()
//! }
//!
//! scope::set_tracking(true);
//! let dev = Device::host().unwrap();
//! let x = Tensor::randn(&[4, 4], &dev).unwrap();
//! let s = step(&x, &dev).unwrap();
//! assert_eq!((s.out.shape(), s.label.as_str()), (&[4, 4][..], "step"));
//! assert!(!evaluate());
//! assert!(is_grad_enabled());
//! ```
//!
//! Where things live: `gpuscope-runtime/` (the runtime, see its crate docs),
//! `gpuscope-macros/` (the macros; its crate docs map the code generation),
//! `gpuscope-lint/` (lint rules shared by the macros and `gpuscope lint`),
//! `gpuscope-cli/` (the `gpuscope` command: `replay`, `lint`, `view`; a package of its own, so
//! that this library compiles none of its dependencies).

pub use gpuscope_runtime::*;

/// The function runs in a scope: every tensor made while it runs belongs to the scope;
/// when it returns, the tensors in its return value move to the caller's scope, and any
/// other tensor made inside and still alive has leaked and is reported (through
/// `tracing`, target `gpuscope::leak`, fields `site`, `bytes`, `dtype`, `shape`,
/// `scope`) with the file:line:column that made it.
///
/// ```
/// use gpuscope::{gpu_scope, scope, Device, Tensor, TensorError};
///
/// #[gpu_scope(leaks = "deny")]
/// fn step(x: &Tensor, dev: &Device) -> Result<Tensor, TensorError> {
///     let tmp = Tensor::ones(x.shape(), dev)?; // freed before the scope exits: fine
///     let out = Tensor::zeros(x.shape(), dev)?;
///     drop(tmp);
///     Ok(out) // returned: moves to the caller's scope
/// }
///
/// #[gpu_scope(name = "cache_fill")]
/// fn fill(cache: &mut Vec<Tensor>, dev: &Device) {
///     cache.push(Tensor::zeros(&[16], dev).unwrap()); // outlives the scope: reported
/// }
///
/// scope::set_tracking(true);
/// let dev = Device::host().unwrap();
/// let x = Tensor::ones(&[2, 2], &dev).unwrap();
/// assert_eq!(step(&x, &dev).unwrap().shape(), &[2, 2]);
/// let mut cache = Vec::new();
/// fill(&mut cache, &dev);
/// let live = gpuscope::report_live();
/// assert!(live.iter().any(|l| l.record.leaked_from().is_some_and(|s| s.contains("cache_fill"))));
/// ```
///
/// # Arguments
///
/// All optional, in any order:
///
/// | argument | meaning |
/// |---|---|
/// | `name = "train_step"` | the scope's name in reports (default: the function's name) |
/// | `leaks = "warn"` / `"deny"` / `"allow"` | what a leak does: report it, report it and panic at exit, or nothing (default: the process-wide policy, `GPUSCOPE_LEAKS`, `warn` unless set) |
/// | `sync` (or `sync = true` / `sync = false`) | at exit, wait for the GPU streams the scope's tensors were made or recorded on |
/// | `device = <expr>` | the device the scope runs on, see below |
/// | `allow(rule, ..)`, `warn(..)`, `deny(..)` | levels of gpuscope's lint rules for this function, see [Lints](#lints) |
///
/// `device = <expr>` is evaluated once when the scope opens (after the parameters are
/// bound, before the body; for an `async fn`, at its first poll) and must be, or deref
/// to, a [`Device`] (`device = &self.device`, `device = dev`, an `Arc<Device>`...): a
/// wrong type is a compile error at the expression. It is borrowed only for that moment.
/// With `sync`, the scope also waits for that whole device at exit (before its leak
/// report), which covers work on streams none of the scope's tensors was made or
/// recorded on.
///
/// ```
/// use gpuscope::{gpu_scope, Device, Tensor, TensorError};
///
/// struct Layer {
///     device: Device,
///     w: Tensor,
/// }
///
/// impl Layer {
///     #[gpu_scope(name = "forward", sync, device = &self.device)]
///     fn forward(&self, x: &Tensor) -> Result<Tensor, TensorError> {
///         x.matmul(&self.w)?.relu()
///     }
/// }
///
/// let device = Device::host().unwrap();
/// let layer = Layer { w: Tensor::ones(&[4, 2], &device).unwrap(), device };
/// let x = Tensor::ones(&[3, 4], &layer.device).unwrap();
/// assert_eq!(layer.forward(&x).unwrap().shape(), &[3, 2]);
/// ```
///
/// At exit every scope records a fence (an event) on each stream its tensors were made
/// or recorded on: memory they gave back goes to other streams once the fence has
/// completed, without a stream synchronisation. `sync` waits for those streams too, with
/// tracking on or off.
///
/// # What escapes
///
/// - A returned value whose type implements [`ScopeValue`](trait@ScopeValue) (tensors,
///   tuples, `Option`, `Vec`, `Result`s of them, [`#[derive(ScopeValue)]`](derive@ScopeValue)
///   types) takes all its tensors to the caller's scope. A `Result<T, E>` whose `T`
///   implements it but whose `E` does not (an error type of your own) takes its `Ok`
///   value's. Any other type holds no tensor the scope can find: tensors inside it are
///   reported.
/// - Every `return` of the function and its last expression escape; `return`s inside
///   closures, async blocks and nested items are theirs, not the function's, and so are
///   `return`s that a macro invocation expands to, which the attribute cannot see.
/// - `?` returns do not escape: an `Err` holding tensors is reported.
/// - [`keep`] adopts a tensor into the caller's scope on purpose.
///
/// # Where it goes
///
/// Free functions, methods (`self`, `&self`, `&mut self`), generic functions, `unsafe
/// fn`, `extern fn`, functions returning `impl Trait`, trait methods with a default
/// body, and `async fn`: for an `async fn` the scope stays open across `.await`s (other
/// tasks on the thread do not see it while the future is suspended) and closes when the
/// future completes or is dropped.
///
/// ```
/// use gpuscope::{gpu_scope, scope, Device, Tensor, TensorError};
///
/// #[gpu_scope(leaks = "deny")]
/// async fn load(dev: &Device, n: usize) -> Result<Tensor, TensorError> {
///     let staging = Tensor::ones(&[n], dev)?;
///     std::future::ready(()).await; // still inside the scope
///     assert_eq!(scope::current_scope().as_deref(), Some("load"));
///     drop(staging);
///     Tensor::zeros(&[n], dev)
/// }
///
/// scope::set_tracking(true);
/// let dev = Device::host().unwrap();
/// let t = block_on(load(&dev, 8)).unwrap();
/// assert_eq!(t.shape(), &[8]);
/// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     use std::task::{Context, Poll, Waker};
/// #     let mut f = std::pin::pin!(f);
/// #     let mut cx = Context::from_waker(Waker::noop());
/// #     loop { if let Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
/// # }
/// ```
///
/// A synchronous function whose last expression is `async [move] { .. }` or
/// `Box::pin(async [move] { .. })` (what `#[async_trait]` generates, or a hand-written
/// `-> impl Future`) gets the same treatment on that future: the scope is open while
/// the future runs, not while the function builds it.
///
/// Not on a `const fn`, a trait method without a body, or anything that is not a
/// function.
///
/// # Lints
///
/// Both attributes, `#[gpu_scope]` and [`#[no_grad]`](macro@no_grad), run the rules of
/// `gpuscope-lint` on the function's body (the same rules as the `gpuscope lint`
/// command), knowing whether the function is `#[gpu_scope]` and/or `#[no_grad]`:
///
/// - a `deny` finding (`forget_tensor`, `static_escape`, `backward_in_no_grad` by
///   default) is a compile error at the offending expression, with the rule's help;
/// - a `warn` finding (`graph_accumulation`, `missing_zero_grad`, `scope_escape`, ... by
///   default) is a real compiler warning over the expression, on stable Rust: the
///   expansion leaves an unused `#[must_use]` value named after the rule there
///   (`warning: unused `gpuscope_graph_accumulation` in tuple element 0 that must be
///   used`, then the message and help), so `#[allow(unused_must_use)]` also silences it.
///   The function compiles and behaves the same.
///
/// Both underline the whole offending expression. `allow(rule, ..)`, `warn(rule, ..)` and
/// `deny(rule, ..)` set levels for the function (an unknown rule is an error, with a
/// suggestion); [`#[gpuscope::lints::allow(rule, ..)]`](lints) allows rules on any item,
/// and on a statement inside these functions. On a function with both attributes, the
/// levels of both apply and the body is linted once. The rules are documented like
/// clippy's lints on the rules page, `docs/lints.md`.
///
/// ```compile_fail
/// use gpuscope::{gpu_scope, Device, Tensor};
///
/// #[gpu_scope]
/// fn make(dev: &Device) -> usize {
///     let t = Tensor::zeros(&[4], dev).unwrap();
///     let n = t.numel();
///     std::mem::forget(t); // error: gpuscope::forget_tensor: `mem::forget(t)` leaks `t` ...
///     n
/// }
/// ```
///
/// ```
/// use std::sync::{Mutex, OnceLock};
/// use gpuscope::{gpu_scope, Device, Tensor, TensorError};
///
/// static CACHE: OnceLock<Mutex<Vec<Tensor>>> = OnceLock::new();
///
/// #[gpu_scope(leaks = "allow", allow(static_escape))] // a cache on purpose
/// fn warm_up(dev: &Device) -> Result<(), TensorError> {
///     let t = Tensor::zeros(&[1 << 10], dev)?;
///     CACHE.get_or_init(Default::default).lock().unwrap().push(t);
///     Ok(())
/// }
///
/// warm_up(&Device::host().unwrap()).unwrap();
/// ```
///
/// # Errors
///
/// A misuse is one compile error spanned on the offending token, and the function is
/// emitted unchanged, so nothing cascades from it: an unknown argument (with a
/// suggestion for near misses), a repeated argument, a value of the wrong kind, an
/// unknown lint rule, the attribute on something that is not a function with a body, or
/// on a `const fn`. A body that does not parse is reported once, by the compiler.
///
/// ```compile_fail
/// #[gpuscope::gpu_scope(leak = "deny")] // error: unknown argument `leak` for #[gpu_scope]: ... did you mean `leaks`?
/// fn step() {}
/// ```
pub use gpuscope_macros::gpu_scope;

/// Grad mode is off while the function runs and is restored when it returns, also on
/// early return and panic: [`GradModeGuard::no_grad`](grad::GradModeGuard::no_grad)
/// first in the body. On an `async fn` (or a function returning an async block, as
/// [`#[gpu_scope]`](macro@gpu_scope) describes), grad mode is off during each poll of
/// the body's future only, since grad mode is per thread and the future may move
/// between threads at each `.await`.
///
/// Takes no arguments but lint levels (`#[no_grad(allow(rule))]`, see
/// [`#[gpu_scope]`'s Lints](macro@gpu_scope#lints)); goes where `#[gpu_scope]` goes, and
/// with it (in either order).
///
/// ```
/// use gpuscope::{gpu_scope, is_grad_enabled, no_grad, Device, Tensor, TensorError};
///
/// #[no_grad]
/// #[gpu_scope(leaks = "deny")]
/// fn evaluate(x: &Tensor, w: &Tensor) -> Result<(Tensor, bool), TensorError> {
///     Ok((x.matmul(w)?, is_grad_enabled()))
/// }
///
/// let dev = Device::host().unwrap();
/// let w = Tensor::ones(&[2, 2], &dev).unwrap();
/// let (y, recording) = evaluate(&Tensor::ones(&[1, 2], &dev).unwrap(), &w).unwrap();
/// assert_eq!((y.shape(), recording), (&[1, 2][..], false));
/// assert!(is_grad_enabled()); // restored
/// ```
pub use gpuscope_macros::no_grad;

/// Implements [`ScopeValue`](trait@ScopeValue) for a struct (named, tuple or unit) or an
/// enum by visiting each field, so that a value of the type returned from a
/// [`#[gpu_scope]`](macro@gpu_scope) function takes its tensors along. A field whose type
/// does not implement it (or that holds no tensors worth tracking) is left out with
/// `#[scope_value(skip)]`. Each type parameter used in a visited field gets a
/// `T: ScopeValue` bound. Unions are rejected.
///
/// ```
/// use std::sync::Arc;
/// use gpuscope::{gpu_scope, Device, ScopeValue, Tensor, TensorError};
///
/// struct Tokenizer;
///
/// #[derive(ScopeValue)]
/// struct Output<T> {
///     logits: Tensor,
///     cache: Vec<T>,
///     #[scope_value(skip)]
///     tokenizer: Arc<Tokenizer>,
/// }
///
/// #[derive(ScopeValue)]
/// enum Prediction {
///     Class(Tensor),
///     Boxes { boxes: Tensor, scores: Tensor },
///     Nothing,
/// }
///
/// #[gpu_scope(leaks = "deny")]
/// fn run(dev: &Device, tokenizer: &Arc<Tokenizer>) -> Result<(Output<Tensor>, Prediction), TensorError> {
///     let out = Output {
///         logits: Tensor::zeros(&[2, 3], dev)?,
///         cache: vec![Tensor::ones(&[3], dev)?],
///         tokenizer: tokenizer.clone(),
///     };
///     Ok((out, Prediction::Class(Tensor::zeros(&[1], dev)?)))
/// }
///
/// gpuscope::scope::set_tracking(true);
/// let (out, _) = run(&Device::host().unwrap(), &Arc::new(Tokenizer)).unwrap();
/// let mut n = 0;
/// out.for_each_tensor(&mut |_| n += 1);
/// assert_eq!(n, 2);
/// ```
///
/// A mistake in `#[scope_value(..)]` is one error; the type still implements
/// `ScopeValue`, so no second error follows where it is used as one.
pub use gpuscope_macros::ScopeValue;

/// Lint levels in code: `#[gpuscope::lints::allow(rule, ..)]` on a function, `impl`,
/// trait or module, or on a statement inside a `#[gpu_scope]` / `#[no_grad]` function
/// (see [`#[gpu_scope]`'s Lints](macro@gpu_scope#lints) and the rules page,
/// `docs/lints.md`). Not at the crate root, where it would make the built-in `#[allow]`
/// ambiguous after `use gpuscope::*`.
pub mod lints {
    pub use gpuscope_macros::allow;
}

/// Support for the macros' expansions (the runtime's `private` module): the one path
/// they name. Not a public API: it changes without notice.
#[doc(hidden)]
pub use gpuscope_runtime::private as __private;
