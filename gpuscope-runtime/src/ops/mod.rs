//! Operations on tensors, on the host and on CUDA, with the same results within float
//! tolerance.
//!
//! Every operation that makes a tensor allocates it from the device's caching
//! allocator with the caller's line as its creation site (all are `#[track_caller]`),
//! so scopes track the outputs and leak reports name your code. Work runs on the first
//! input's stream. When grad mode is on and an input requires grad, the operation
//! records its backward step ([`crate::autograd`]).
//!
//! Views (PyTorch's semantics): `transpose`/`t`, `transpose_dims`, `permute`, `narrow`,
//! `view` and (on contiguous tensors) `reshape` share storage and allocate nothing.
//! Every operation accepts non-contiguous views and gives the results it gives on
//! their [`contiguous`](crate::Tensor::contiguous) copies:
//! - read in place, through their strides: `matmul`/`matmul_t` (a transposed or
//!   narrowed view is a flag and a leading dimension for `matrixmultiply` or cuBLAS;
//!   on CUDA an operand whose rows and columns are both strided is gathered), the binary
//!   operations `add`/`sub`/`mul`/`div` with broadcasting (and the second operand of
//!   the in-place ones), the views themselves;
//! - gathered into a contiguous temporary first: unary operations and activations,
//!   scalar operations, reductions, `softmax`/`log_softmax`, the losses, the
//!   optimizers' updates (`add_scaled_`, AdamW);
//! - in place on a view (`add_`, `sub_`, `mul_`, `mul_scalar_`, `add_scalar_`,
//!   `add_scaled_`, `fill_`, `zero_`): computed into a contiguous temporary and
//!   scattered back, so the storage the view shares changes, as in PyTorch.
//!
//! Every in-place operation (those above, `copy_from`, the optimizers' updates,
//! autograd's accumulation into an existing `.grad`) adds one to the
//! [version](crate::Tensor::version) of the storage it writes, whichever view it writes
//! through; autograd refuses to run a backward step whose saved tensors have changed
//! since they were saved. Operations that make new tensors leave them at version 0.
//!
//! Where things live (each module adds its operations to [`Tensor`](crate::Tensor); the kernels they
//! run are in `tensor::compute`, which records nothing):
//! - `arithmetic`: `add`/`sub`/`mul`/`div` with broadcasting, `add_scalar`, `mul_scalar`.
//! - `activation`: `neg`, `relu`, `gelu` (tanh approximation), `gelu_erf` (exact, as
//!   PyTorch's default), `bias_gelu` (bias and exact GELU in one pass), `exp`, `log`,
//!   `sqrt`.
//! - `in_place`: `add_`, `sub_`, `mul_`, `mul_scalar_`, `add_scalar_`, `add_scaled_`
//!   (axpy), `zero_`, `fill_`.
//! - `reduce`: `sum`/`mean` of everything or along an axis, `softmax`/`log_softmax`
//!   over the last axis.
//! - `loss`: `cross_entropy` (logits `[n, c]`, `i64` or `i32` targets `[n]`),
//!   `nll_loss`, `mse_loss`. A target outside `0..c` is an
//!   [`InvalidArgument`](crate::TensorError::InvalidArgument) error: on the host from the call
//!   itself; on CUDA (where the targets are on the GPU, and checking at the call would
//!   wait for it) the kernel makes that row's loss NaN (its gradient zero), records the
//!   row, target and class count in the device's error record, and the next read-back
//!   from that device (`to_vec`, `item`, a copy to another device) returns the error
//!   and clears the record.
//! - `matmul`: 2-D matrix products with either operand transposed on the fly (a flag,
//!   or a transposed view), batched products `bmm` (cuBLAS strided-batched on CUDA), and
//!   `linear` (`x @ wᵀ + b`).
//! - `shape`: views (`transpose`/`t`, `transpose_dims`, `permute`, `narrow`, `view`),
//!   `reshape` (a view, or a copy of a non-contiguous tensor), `contiguous`, `detach`.
//! - `norm`: `layer_norm` over the last dimension (one kernel forward, one backward).
//! - `embedding`: `embedding` (rows of a table picked by indices; the backward step
//!   scatter-adds into the table's gradient, so a table also used elsewhere, a tied
//!   output head, gets both gradients summed).
//! - `attention`: `causal_softmax` (scaled, masked above the diagonal) and
//!   `causal_attention` (multi-head self-attention over packed `q, k, v` projections,
//!   one autograd node).
//!
//! Supported element types: `f32` and `f64` on both devices. Other dtypes give
//! [`TensorError::Unsupported`](crate::TensorError::Unsupported).
//!
//! ```
//! use gpuscope_runtime::{Device, Tensor};
//! let dev = Device::host().unwrap();
//! let x = Tensor::from_slice(&[1.0f32, -2.0, 3.0, -4.0], &[2, 2], &dev).unwrap();
//! let b = Tensor::from_slice(&[10.0f32, 20.0], &[2], &dev).unwrap();
//! let y = x.add(&b).unwrap().relu().unwrap(); // [2, 2] + [2]: a row-vector bias
//! assert_eq!(y.to_vec::<f32>().unwrap(), vec![11.0, 18.0, 13.0, 16.0]);
//! assert_eq!(y.sum().unwrap().item().unwrap(), 58.0);
//! ```

mod activation;
mod arithmetic;
mod attention;
mod embedding;
mod in_place;
mod loss;
mod matmul;
mod norm;
mod reduce;
mod shape;
