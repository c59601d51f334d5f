//! # gpuscope
//!
//! GPU memory in training code that is safe to reason about. This facade re-exports
//! [`gpuscope_runtime`] (devices, the caching allocator, traces) and, as `tokio` does
//! with `tokio-macros`, the attribute macros of `gpuscope-macros`.

pub use gpuscope_runtime::*;
