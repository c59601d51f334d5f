//! Optimizers that update parameters in place, and finding the largest batch that fits.
//!
//! Where things live:
//! - [`Optimizer`]: `step`, `zero_grad` (set-to-none), the parameters.
//! - `sgd`: [`Sgd`], with momentum, dampening, Nesterov and weight decay (PyTorch's).
//! - `adamw`: [`AdamW`], decoupled weight decay; on CUDA one fused kernel updates up to
//!   24 parameters (and their moments) at a time.
//! - `fit`: [`fit_batch_size`], the largest batch whose step fits in device memory (or
//!   under the allocator's cap), found by catching the allocator's out-of-memory error.
//!
//! Memory: updates run under `no_grad` and in place. State (momentum buffers, Adam's
//! moments) is allocated at the first `step()` that sees each parameter's gradient, at
//! the line that called `step()`, and adopted by the enclosing scope like
//! [`keep`](crate::keep) does; every later step allocates nothing.
//!
//! In-place updates count as writes ([`Tensor::version`]): a step adds one to the
//! version of each parameter it updates (and of its state), so a graph recorded before
//! the step that saved a parameter (a matmul's weight) refuses `backward()` instead of
//! computing gradients from the new values. Call `step()` after `backward()`.
//!
//! Gradient accumulation over `k` micro-batches needs nothing special: `backward()`
//! adds into existing gradients in place, so run `k` forward/backward passes (scaling
//! each loss by `1/k`), then one `step()` and `zero_grad()`.
//!
//! ```
//! use gpuscope_runtime::{Device, Tensor, optim::{Optimizer, Sgd}};
//! let dev = Device::host().unwrap();
//! let w = Tensor::from_slice(&[1.0f32, -1.0], &[2], &dev).unwrap().set_requires_grad(true);
//! let mut opt = Sgd::new(vec![w.clone()], 0.1).momentum(0.9);
//! for _ in 0..2 {
//!     let loss = w.mul(&w).unwrap().sum().unwrap(); // |w|², gradient 2w
//!     loss.backward().unwrap();
//!     opt.step().unwrap();
//!     opt.zero_grad();
//! }
//! let w_now = w.to_vec::<f32>().unwrap();
//! assert!(w_now[0] < 1.0 && w_now[1] > -1.0);
//! assert!(w.grad().is_none());
//! ```

mod adamw;
mod fit;
mod sgd;

pub use adamw::AdamW;
pub use fit::{BatchFit, FitTry, fit_batch_size};
pub use sgd::Sgd;

use crate::tensor::{Tensor, TensorError};

/// An optimizer over a list of parameters (leaves that require grad).
pub trait Optimizer {
    /// Updates every parameter that has a gradient, in place, under `no_grad`.
    /// Parameters without a gradient are left as they are.
    #[track_caller]
    fn step(&mut self) -> Result<(), TensorError>;

    /// The parameters.
    fn params(&self) -> &[Tensor];

    /// Sets every parameter's gradient to `None` (PyTorch's `set_to_none=True`): the
    /// memory goes back to the allocator's cache and the next `backward()` writes fresh
    /// gradients instead of adding to old ones.
    fn zero_grad(&mut self) {
        for p in self.params() {
            p.set_grad(None);
        }
    }

    /// The learning rate.
    fn lr(&self) -> f64;

    /// Sets the learning rate (schedules).
    fn set_lr(&mut self, lr: f64);
}
