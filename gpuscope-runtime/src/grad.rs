//! Grad mode: a per-thread flag saying whether operations record the autograd graph.
//! [`no_grad`] and `#[no_grad]` turn it off inside and restore it on exit, also on
//! panic and early return.
//!
//! ```
//! use gpuscope_runtime::grad::{is_grad_enabled, no_grad};
//! assert!(is_grad_enabled());
//! let inside = no_grad(|| is_grad_enabled());
//! assert!(!inside);
//! assert!(is_grad_enabled());
//! ```

use std::cell::Cell;

thread_local! {
    static ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Whether operations on this thread record the graph.
#[inline]
pub fn is_grad_enabled() -> bool {
    ENABLED.with(Cell::get)
}

/// Restores the previous grad mode when dropped.
#[must_use = "grad mode is restored when this guard is dropped"]
pub struct GradModeGuard {
    previous: bool,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl GradModeGuard {
    /// Sets grad mode to `enabled` until the guard is dropped.
    pub fn set(enabled: bool) -> GradModeGuard {
        let previous = ENABLED.with(|c| c.replace(enabled));
        GradModeGuard {
            previous,
            _not_send: std::marker::PhantomData,
        }
    }

    /// Turns recording off until the guard is dropped.
    pub fn no_grad() -> GradModeGuard {
        GradModeGuard::set(false)
    }
}

impl Drop for GradModeGuard {
    fn drop(&mut self) {
        ENABLED.with(|c| c.set(self.previous));
    }
}

/// Runs `f` with recording off, restoring the previous mode afterwards (also if `f`
/// panics).
pub fn no_grad<R>(f: impl FnOnce() -> R) -> R {
    let _guard = GradModeGuard::no_grad();
    f()
}

/// Runs `f` with recording on (inside a `no_grad` region, for example).
pub fn enable_grad<R>(f: impl FnOnce() -> R) -> R {
    let _guard = GradModeGuard::set(true);
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restored_after_panic() {
        let r = std::panic::catch_unwind(|| no_grad(|| panic!("boom")));
        assert!(r.is_err());
        assert!(is_grad_enabled());
    }

    #[test]
    fn nested() {
        no_grad(|| {
            enable_grad(|| assert!(is_grad_enabled()));
            assert!(!is_grad_enabled());
        });
        assert!(is_grad_enabled());
    }
}
