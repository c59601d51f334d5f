//! Activation checkpointing: run a function without keeping what its backward pass
//! needs, and run it again during `backward()`.

use std::panic::Location;

use crate::grad::{GradModeGuard, is_grad_enabled};
use crate::tensor::{Tensor, TensorError};

use super::{record_saving, should_record};

/// Runs `f(x)` keeping only `x` for the backward pass (PyTorch's
/// `torch.utils.checkpoint`): the forward pass runs under `no_grad`, so none of `f`'s
/// intermediate tensors outlive it; when `backward()` reaches the result, `f(x)` runs
/// again with grad mode on, from a detached copy of `x`, and its own backward pass runs
/// right there, adding into the `.grad` of the parameters `f` uses and passing `x`'s
/// gradient on. Memory: one call's activations at a time instead of all of them, for
/// one more forward pass of `f`.
///
/// `f` must compute the same function both times (no randomness that differs between
/// the calls, no state it changes), and is kept until the backward pass (so it owns or
/// shares what it reads: parameters are cheap clones). When `x` does not require grad
/// (or grad mode is off) there is no graph through `x` to cut, and `f(x)` runs as a
/// plain call.
///
/// ```
/// use gpuscope_runtime::{Device, Tensor, autograd::checkpoint};
/// let dev = Device::host().unwrap();
/// let w = Tensor::from_slice(&[2.0f64, 3.0], &[2], &dev).unwrap().set_requires_grad(true);
/// let x = Tensor::from_slice(&[1.0f64, 4.0], &[2], &dev).unwrap().set_requires_grad(true);
/// let wf = w.clone();
/// let y = checkpoint(&x, move |x| x.mul(&wf)?.exp()).unwrap(); // exp's output is not kept
/// let mut kept = 0;
/// y.for_each_graph_tensor(&mut |_| kept += 1);
/// assert_eq!(kept, 1); // only x
/// y.sum().unwrap().backward().unwrap();
/// let (gx, gw) = (x.grad().unwrap().to_vec::<f64>().unwrap(), w.grad().unwrap().to_vec::<f64>().unwrap());
/// assert!((gx[0] - 2.0 * 2f64.exp()).abs() < 1e-9 && (gw[1] - 4.0 * 12f64.exp()).abs() < 1e-3);
/// ```
#[track_caller]
pub fn checkpoint<F>(x: &Tensor, f: F) -> Result<Tensor, TensorError>
where
    F: Fn(&Tensor) -> Result<Tensor, TensorError> + Send + 'static,
{
    let site = Location::caller();
    if !should_record(&[x]) || !is_grad_enabled() {
        return f(x);
    }
    let out = {
        let _off = GradModeGuard::no_grad();
        f(x)?
    };
    let saved = x.detach();
    Ok(record_saving(
        out,
        "checkpoint",
        &[x],
        [saved.clone()],
        site,
        move |g, _, _| {
            let _on = GradModeGuard::set(true);
            let input = saved.detach().set_requires_grad(true);
            drop(saved);
            let y = f(&input)?;
            y.backward_with(g)?;
            drop(y);
            Ok(vec![input.grad()])
        },
    ))
}
