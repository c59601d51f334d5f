//! A callback at a point of the backward pass.

use std::panic::Location;

use crate::tensor::{Tensor, TensorError};

use super::{record, should_record};

/// `x` itself (a view of it) for the code that follows, with `f` called with its
/// gradient when `backward()` reaches it, before the gradient goes on unchanged
/// (PyTorch's `Tensor.register_hook`, as a new tensor). Where nothing records (grad mode
/// off, or `x` needs no gradient) `f` is never called and `x` comes back as it is.
///
/// What it is for: seeing the backward pass from outside, such as sampling the
/// allocator's memory at each layer's boundary to draw a memory timeline.
///
/// ```
/// use std::sync::{Arc, atomic::{AtomicUsize, Ordering}};
/// use gpuscope_runtime::{Device, Tensor, autograd::on_backward};
/// let dev = Device::host().unwrap();
/// let w = Tensor::from_slice(&[3.0f32], &[1], &dev).unwrap().set_requires_grad(true);
/// let seen = Arc::new(AtomicUsize::new(0));
/// let s = seen.clone();
/// let y = on_backward(&w.mul_scalar(2.0).unwrap(), move |g| {
///     s.store(g.item().unwrap() as usize, Ordering::SeqCst);
///     Ok(())
/// });
/// y.mul_scalar(5.0).unwrap().sum().unwrap().backward().unwrap();
/// assert_eq!(seen.load(Ordering::SeqCst), 5); // the gradient reaching y
/// assert_eq!(w.grad().unwrap().item().unwrap(), 10.0);
/// ```
#[track_caller]
pub fn on_backward<F>(x: &Tensor, f: F) -> Tensor
where
    F: FnOnce(&Tensor) -> Result<(), TensorError> + Send + 'static,
{
    if !should_record(&[x]) {
        return x.clone();
    }
    record(
        x.alias(None),
        "on_backward",
        &[x],
        Location::caller(),
        move |g, _, _| {
            f(g)?;
            Ok(vec![Some(g.clone())])
        },
    )
}
