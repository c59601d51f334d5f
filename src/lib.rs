//! # gpuscope
//!
//! GPU memory in training code that is safe to reason about. This facade re-exports
//! [`gpuscope_runtime`] (devices, the caching allocator, tensors, scopes, traces) and,
//! as `tokio` does with `tokio-macros`, the attribute macros of `gpuscope-macros`:
//! `#[gpu_scope]`, `#[no_grad]` and `#[derive(ScopeValue)]`.
//!
//! Where things live: `gpuscope-runtime/` (the runtime, see its crate docs),
//! `gpuscope-macros/` (the attribute macros), `gpuscope-lint/` (lint rules shared by
//! the macros and `gpuscope lint`), `gpuscope-cli/` (the `gpuscope` command: `replay`,
//! `lint`; a package of its own, so that this library compiles none of its
//! dependencies).

pub use gpuscope_runtime::*;

/// The macros (from `gpuscope-macros`; their crate docs describe the expansions):
///
/// - `#[gpu_scope]` / `#[gpu_scope(name = "...", leaks = "warn" | "deny" | "allow", sync,
///   device = <expr>)]`: the function runs in a scope; the tensors it returns move to
///   the caller's scope, any other tensor made inside and still alive at exit is
///   reported as a leak with the line that made it. Works on free functions, methods,
///   generic functions, `async fn` (the scope stays open across `.await`s) and trait
///   methods with a default body.
/// - `#[no_grad]`: grad mode is off while the function runs (during each poll, for an
///   `async fn`) and restored afterwards, also on early return and panic.
/// - Both attributes run gpuscope's lint rules on the body: `deny` findings (a tensor
///   `mem::forget`-ten or stored in a static, `backward()` under `no_grad`) are compile
///   errors, `warn` findings (a loss accumulated across iterations, ...) are warnings;
///   `allow(rule, ..)`, `warn(..)`, `deny(..)` arguments change the levels.
/// - `#[derive(ScopeValue)]`: lets a struct or enum holding tensors be returned from a
///   scope (fields that do not implement [`ScopeValue`](trait@ScopeValue) are skipped with
///   `#[scope_value(skip)]`).
///
/// ```
/// use gpuscope::{gpu_scope, is_grad_enabled, no_grad, scope, Device, ScopeValue, Tensor, TensorError};
///
/// #[derive(ScopeValue)]
/// struct Step {
///     out: Tensor,
///     #[scope_value(skip)]
///     label: String,
/// }
///
/// #[gpu_scope(leaks = "deny")] // a leak would panic at exit, naming the line that made it
/// fn step(x: &Tensor, dev: &Device) -> Result<Step, TensorError> {
///     let tmp = Tensor::ones(x.shape(), dev)?; // dropped before the scope exits: fine
///     let out = Tensor::zeros(x.shape(), dev)?;
///     drop(tmp);
///     Ok(Step { out, label: "step".into() }) // returned: moves to the caller's scope
/// }
///
/// #[no_grad]
/// fn evaluate() -> bool {
///     is_grad_enabled()
/// }
///
/// scope::set_tracking(true);
/// let dev = Device::host().unwrap();
/// let x = Tensor::randn(&[4, 4], &dev).unwrap();
/// let s = step(&x, &dev).unwrap();
/// assert_eq!((s.out.shape(), s.label.as_str()), (&[4, 4][..], "step"));
/// assert!(!evaluate());
/// assert!(is_grad_enabled());
/// ```
///
/// A leak, reported through `tracing` (target `gpuscope::leak`, fields `site`, `bytes`,
/// `dtype`, `shape`, `scope`):
///
/// ```
/// use gpuscope::{gpu_scope, scope, Device, Tensor};
///
/// #[gpu_scope(name = "cache_fill")] // (a static here would not compile: `static_escape`)
/// fn fill(cache: &mut Vec<Tensor>, dev: &Device) {
///     cache.push(Tensor::zeros(&[16], dev).unwrap()); // outlives the scope: reported
/// }
///
/// scope::set_tracking(true);
/// let dev = Device::host().unwrap();
/// let mut cache = Vec::new();
/// fill(&mut cache, &dev);
/// let live = gpuscope::report_live();
/// assert!(live.iter().any(|l| l.record.leaked_from().is_some_and(|s| s.contains("cache_fill"))));
/// ```
pub use gpuscope_macros::{ScopeValue, gpu_scope, no_grad};

/// Lint levels in code: `#[gpuscope::lints::allow(rule, ..)]` on an item, or on a statement
/// inside a `#[gpu_scope]` / `#[no_grad]` function. See the rules page, `docs/lints.md`.
pub mod lints {
    pub use gpuscope_macros::allow;
}

/// Support for the macros' expansions. Not a public API: it changes without notice.
#[doc(hidden)]
pub mod __private {
    pub use gpuscope_runtime::Device;
    pub use gpuscope_runtime::grad::GradModeGuard;
    pub use gpuscope_runtime::scope::escape::dispatch::{EscapeOther, EscapeScopeValue, Escapee};
    pub use gpuscope_runtime::scope::{
        LeakPolicy, ScopeGuard, ScopeOptions, ScopeValue, Scoped, scoped,
    };
    pub use gpuscope_runtime::tensor::Tensor;
}
