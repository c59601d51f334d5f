//! What leaves a scope on purpose: [`ScopeValue`] finds the tensors inside a returned
//! value, so that they move to the parent scope instead of being reported;
//! [`ScopeGuard::escape`] marks them; [`keep`] adopts a tensor into the parent scope;
//! [`scoped`] runs a future in a scope whose output escapes.
//!
//! This module sits above both [`tensor`](crate::tensor) and [`scope`](crate::scope):
//! scopes track plain records (slots), and only this module knows that a tensor holds
//! one.

use std::future::Future;

use crate::scope::record::TrackState;
use crate::scope::{ScopeFuture, ScopeGuard, ScopeOptions, scope_future};
use crate::tensor::Tensor;

/// A value that may hold tensors. Returning it from a scope moves the tensors it holds
/// to the parent scope. Implemented for [`Tensor`], references, tuples, `Option`,
/// `Result`, `Vec`, slices, arrays, `Box`, `Rc`/`Arc`, and (holding no tensors) for
/// numbers, `bool`, `char`, `String`, `str` and `()`; derive it for your own types with
/// `#[derive(ScopeValue)]` (from `gpuscope`).
///
/// ```
/// use gpuscope_runtime::ScopeValue;
/// use gpuscope_runtime::{Device, Tensor};
/// let dev = Device::host().unwrap();
/// let pair = (Tensor::zeros(&[2], &dev).unwrap(), Some(vec![Tensor::ones(&[3], &dev).unwrap()]));
/// let mut n = 0;
/// pair.for_each_tensor(&mut |_| n += 1);
/// assert_eq!(n, 2);
/// ```
pub trait ScopeValue {
    /// Calls `f` on every tensor the value holds.
    fn for_each_tensor(&self, f: &mut dyn FnMut(&Tensor));
}

impl ScopeValue for Tensor {
    #[inline]
    fn for_each_tensor(&self, f: &mut dyn FnMut(&Tensor)) {
        f(self);
        if let Some(g) = self.grad() {
            f(&g);
        }
        // A tensor returned with its graph takes the graph's saved tensors along.
        self.for_each_graph_tensor(f);
    }
}

macro_rules! no_tensors {
    ($($t:ty),*) => {$(
        impl ScopeValue for $t {
            #[inline]
            fn for_each_tensor(&self, _: &mut dyn FnMut(&Tensor)) {}
        }
    )*};
}
no_tensors!(
    (),
    bool,
    char,
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    f32,
    f64,
    String,
    str
);
// Errors hold no tensors: `Result<Tensor, TensorError>` is a scope value.
no_tensors!(
    crate::tensor::TensorError,
    crate::alloc::AllocError,
    crate::device::DeviceError,
    crate::backend::BackendError,
    std::io::Error,
    dyn std::error::Error,
    dyn std::error::Error + Send + Sync
);

impl<T: ScopeValue + ?Sized> ScopeValue for &T {
    fn for_each_tensor(&self, f: &mut dyn FnMut(&Tensor)) {
        (**self).for_each_tensor(f)
    }
}
impl<T: ScopeValue + ?Sized> ScopeValue for &mut T {
    fn for_each_tensor(&self, f: &mut dyn FnMut(&Tensor)) {
        (**self).for_each_tensor(f)
    }
}
impl<T: ScopeValue + ?Sized> ScopeValue for Box<T> {
    fn for_each_tensor(&self, f: &mut dyn FnMut(&Tensor)) {
        (**self).for_each_tensor(f)
    }
}
impl<T: ScopeValue + ?Sized> ScopeValue for std::rc::Rc<T> {
    fn for_each_tensor(&self, f: &mut dyn FnMut(&Tensor)) {
        (**self).for_each_tensor(f)
    }
}
impl<T: ScopeValue + ?Sized> ScopeValue for std::sync::Arc<T> {
    fn for_each_tensor(&self, f: &mut dyn FnMut(&Tensor)) {
        (**self).for_each_tensor(f)
    }
}
impl<T: ScopeValue> ScopeValue for Option<T> {
    fn for_each_tensor(&self, f: &mut dyn FnMut(&Tensor)) {
        if let Some(v) = self {
            v.for_each_tensor(f)
        }
    }
}
impl<T: ScopeValue, E: ScopeValue> ScopeValue for Result<T, E> {
    fn for_each_tensor(&self, f: &mut dyn FnMut(&Tensor)) {
        match self {
            Ok(v) => v.for_each_tensor(f),
            Err(e) => e.for_each_tensor(f),
        }
    }
}
impl<T: ScopeValue> ScopeValue for [T] {
    fn for_each_tensor(&self, f: &mut dyn FnMut(&Tensor)) {
        for v in self {
            v.for_each_tensor(f)
        }
    }
}
impl<T: ScopeValue, const N: usize> ScopeValue for [T; N] {
    fn for_each_tensor(&self, f: &mut dyn FnMut(&Tensor)) {
        self.as_slice().for_each_tensor(f)
    }
}
impl<T: ScopeValue> ScopeValue for Vec<T> {
    fn for_each_tensor(&self, f: &mut dyn FnMut(&Tensor)) {
        self.as_slice().for_each_tensor(f)
    }
}
impl<K, V: ScopeValue, S> ScopeValue for std::collections::HashMap<K, V, S> {
    fn for_each_tensor(&self, f: &mut dyn FnMut(&Tensor)) {
        for v in self.values() {
            v.for_each_tensor(f)
        }
    }
}
impl<K, V: ScopeValue> ScopeValue for std::collections::BTreeMap<K, V> {
    fn for_each_tensor(&self, f: &mut dyn FnMut(&Tensor)) {
        for v in self.values() {
            v.for_each_tensor(f)
        }
    }
}

macro_rules! tuples {
    ($(($($n:tt $t:ident),+)),*) => {$(
        impl<$($t: ScopeValue),+> ScopeValue for ($($t,)+) {
            fn for_each_tensor(&self, f: &mut dyn FnMut(&Tensor)) {
                $(self.$n.for_each_tensor(f);)+
            }
        }
    )*};
}
tuples!((0 A), (0 A, 1 B), (0 A, 1 B, 2 C), (0 A, 1 B, 2 C, 3 D), (0 A, 1 B, 2 C, 3 D, 4 E), (0 A, 1 B, 2 C, 3 D, 4 E, 5 F));

/// Adopts `tensor` into the parent of the current scope on purpose (e.g. a model's new
/// parameter made inside a training step): it is not reported when the scope exits.
/// Outside any scope it does nothing.
///
/// ```
/// use gpuscope_runtime::keep;
/// use gpuscope_runtime::scope::{ScopeGuard, ScopeOptions, LeakPolicy, set_tracking};
/// use gpuscope_runtime::{Device, Tensor};
/// set_tracking(true);
/// let dev = Device::host().unwrap();
/// let mut params = Vec::new();
/// {
///     let _scope = ScopeGuard::enter(ScopeOptions::new("init").leaks(LeakPolicy::Deny));
///     let w = Tensor::randn(&[4, 4], &dev).unwrap();
///     keep(&w);
///     params.push(w); // stored in a captured Vec: fine, it was kept
/// }
/// assert_eq!(params.len(), 1);
/// ```
pub fn keep<T: ScopeValue + ?Sized>(value: &T) {
    value.for_each_tensor(&mut |t| {
        if let Some(r) = t.track_slot() {
            r.set_state(TrackState::Kept);
        }
    });
}

impl ScopeGuard {
    /// Marks every tensor in `value` as returned: it moves to the parent scope at exit.
    #[inline]
    pub fn escape<T: ScopeValue + ?Sized>(&self, value: &T) {
        if self.is_open() {
            value.for_each_tensor(&mut |t| {
                if let Some(r) = t.track_slot() {
                    r.set_state(TrackState::Escaping);
                }
            });
        }
    }
}

/// A future running inside a scope, whose output's tensors move to the scope of
/// whoever polls it. Made by [`scoped`].
pub type Scoped<F> = ScopeFuture<F, fn(&<F as Future>::Output, &ScopeGuard)>;

/// Runs `future` inside a scope described by `options`; the tensors in its output move
/// to the scope of whoever polls it.
///
/// ```
/// use gpuscope_runtime::escape::scoped;
/// use gpuscope_runtime::scope::{ScopeOptions, LeakPolicy, set_tracking};
/// use gpuscope_runtime::{Device, Tensor};
/// set_tracking(true);
/// let dev = Device::host().unwrap();
/// let fut = scoped(ScopeOptions::new("load").leaks(LeakPolicy::Deny), async move {
///     let t = Tensor::ones(&[8], &dev).unwrap();
///     t
/// });
/// let t = block_on(fut);
/// assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0; 8]);
/// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     use std::task::{Context, Poll, Waker};
/// #     let mut f = std::pin::pin!(f);
/// #     let mut cx = Context::from_waker(Waker::noop());
/// #     loop { if let Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
/// # }
/// ```
pub fn scoped<F: Future>(options: ScopeOptions, future: F) -> Scoped<F>
where
    F::Output: ScopeValue,
{
    fn escape<O: ScopeValue>(out: &O, guard: &ScopeGuard) {
        guard.escape(out);
    }
    scope_future(
        options,
        future,
        escape::<F::Output> as fn(&F::Output, &ScopeGuard),
    )
}
