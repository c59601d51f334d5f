//! Escaping a returned value of any type, by autoref dispatch on
//! `&&&Escapee(&value)`: method lookup tries the receiver `&&&Escapee` (then
//! `&&&&Escapee`), then `&&Escapee`, then `&Escapee`, so the first impl that applies
//! wins:
//!
//! 1. [`EscapeAll`] on `&&Escapee<T>` with `T: ScopeValue`: every tensor in the value
//!    escapes;
//! 2. [`EscapeOk`] on `&Escapee<Result<T, E>>` with `T: ScopeValue` (and an `E` that
//!    is not, such as `TensorError` or `Box<dyn Error>`): the `Ok` value escapes;
//! 3. [`EscapeNone`] on `Escapee<T>`: any other type holds no tensor a scope could find.
//!
//! The dispatch must be written where the type is concrete, so the expansion calls the
//! [`escape!`](crate::__gpuscope_escape) macro, which writes it.

use crate::ScopeValue;
use crate::scope::ScopeGuard;

/// A reference to a returned value, the receiver of the dispatch.
pub struct Escapee<'a, T: ?Sized>(pub &'a T);

/// Rung 1: a [`ScopeValue`]; all its tensors escape.
pub trait EscapeAll {
    fn __gpuscope_escape(&self, guard: &ScopeGuard);
}

impl<T: ScopeValue + ?Sized> EscapeAll for &&Escapee<'_, T> {
    #[inline]
    fn __gpuscope_escape(&self, guard: &ScopeGuard) {
        guard.escape(self.0)
    }
}

/// Rung 2: a `Result` whose `Ok` type is a [`ScopeValue`]; the `Ok` value's tensors
/// escape.
pub trait EscapeOk {
    fn __gpuscope_escape(&self, guard: &ScopeGuard);
}

impl<T: ScopeValue, E> EscapeOk for &Escapee<'_, Result<T, E>> {
    #[inline]
    fn __gpuscope_escape(&self, guard: &ScopeGuard) {
        if let Ok(value) = self.0 {
            guard.escape(value)
        }
    }
}

/// Rung 3: any other type; nothing escapes.
pub trait EscapeNone {
    fn __gpuscope_escape(&self, guard: &ScopeGuard);
}

impl<T: ?Sized> EscapeNone for Escapee<'_, T> {
    #[inline]
    fn __gpuscope_escape(&self, _: &ScopeGuard) {}
}

/// `escape!(guard, value)`, both references: marks the tensors of `value` (of any
/// type, see [the dispatch](self)) as returned from the scope of `guard`. A statement.
#[doc(hidden)]
#[macro_export]
macro_rules! __gpuscope_escape {
    ($guard:expr, $value:expr) => {
        // `unreachable_code`: when the returned expression diverges (`todo!()`), this is
        // the first unreachable statement, and rustc reports only the first one.
        #[allow(unreachable_code, unused_imports)]
        {
            use $crate::private::dispatch::{EscapeAll as _, EscapeNone as _, EscapeOk as _};
            (&&&$crate::private::dispatch::Escapee($value)).__gpuscope_escape($guard);
        }
    };
}
