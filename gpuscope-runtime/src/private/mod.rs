//! What the expansions of `gpuscope-macros` call, reached as `::gpuscope::__private`:
//! defined once here, so that each annotated function holds small calls, not
//! definitions. Not a public API: it changes without notice.
//!
//! - `options`: a scope's `ScopeOptions` at the annotated function's site.
//! - `dispatch`: escaping a returned value of any type (autoref dispatch), called
//!   through `escape!`.
//! - `scope_future` (from `scope::future`): the scope of an `async fn` (or of a
//!   returned async block).
//! - `sync_device`: `SyncDevice`, the guard of `device = <expr>, sync`.
//! - `no_grad`: `NoGradFuture`, grad mode off during each poll of a future.
//!
//! `#[derive(ScopeValue)]` names `ScopeValue` and `Tensor` from here.

pub mod dispatch;
mod no_grad;
mod sync_device;

pub use crate::__gpuscope_escape as escape;
pub use crate::ScopeValue;
pub use crate::device::Device;
pub use crate::grad::GradModeGuard;
use crate::scope::ScopeOptions;
pub use crate::scope::{LeakPolicy, ScopeGuard};
pub use crate::scope::{ScopeFuture, scope_future};
pub use crate::tensor::Tensor;
pub use no_grad::{NoGradFuture, no_grad_future};
pub use sync_device::SyncDevice;

/// The options of a scope named `name` at `file:line:column` (the annotated
/// function's name), with the process-wide leak policy and no `sync`.
#[inline]
pub fn options(name: &'static str, file: &'static str, line: u32, column: u32) -> ScopeOptions {
    ScopeOptions {
        name,
        file,
        line,
        column,
        leaks: None,
        sync: false,
    }
}
