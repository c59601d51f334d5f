//! # gpuscope
//!
//! GPU memory in training code that is safe to reason about. This facade re-exports
//! [`gpuscope_runtime`] (devices, the caching allocator, tensors, scopes, traces) and,
//! as `tokio` does with `tokio-macros`, the attribute macros of `gpuscope-macros`:
//! `#[gpu_scope]`, `#[no_grad]` and `#[derive(ScopeValue)]`.
//!
//! Where things live: `gpuscope-runtime/` (the runtime, see its crate docs),
//! `gpuscope-macros/` (the attribute macros), `gpuscope-lint/` (lint rules shared by
//! the macros and `gpuscope lint`), `src/bin/gpuscope/` (the `gpuscope` command:
//! `replay`, `lint`).

pub use gpuscope_runtime::*;

/// Support for the macros' expansions. Not a public API: it changes without notice.
#[doc(hidden)]
pub mod __private {
    pub use gpuscope_runtime::Device;
    pub use gpuscope_runtime::grad::GradModeGuard;
    pub use gpuscope_runtime::scope::escape::dispatch::{EscapeOther, EscapeScopeValue, Escapee};
    pub use gpuscope_runtime::scope::{LeakPolicy, ScopeGuard, ScopeOptions, ScopeValue, Scoped, scoped};
    pub use gpuscope_runtime::tensor::Tensor;
}
