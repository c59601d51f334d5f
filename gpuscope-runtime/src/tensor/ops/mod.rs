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
//! their [`contiguous`](Tensor::contiguous) copies:
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
//! [version](Tensor::version) of the storage it writes, whichever view it writes
//! through; autograd refuses to run a backward step whose saved tensors have changed
//! since they were saved. Operations that make new tensors leave them at version 0.
//!
//! Where things live:
//! - `elementwise`: `add`/`sub`/`mul`/`div` with broadcasting, scalar forms, `neg`,
//!   `relu`, `gelu` (tanh approximation), `exp`, `log`, and the in-place `add_`, `sub_`,
//!   `mul_`, `mul_scalar_`, `add_scaled_` (axpy), `zero_`, `fill_`.
//! - `reduce`: `sum`/`mean` of everything or along an axis, `softmax`/`log_softmax`
//!   over the last axis.
//! - `loss`: `cross_entropy` (logits `[n, c]`, `i64` or `i32` targets `[n]`),
//!   `nll_loss`, `mse_loss`. A target outside `0..c` is an
//!   [`InvalidArgument`](TensorError::InvalidArgument) error: on the host from the call
//!   itself; on CUDA (where the targets are on the GPU, and checking at the call would
//!   wait for it) the kernel makes that row's loss NaN (its gradient zero), records the
//!   row, target and class count in the device's error record, and the next read-back
//!   from that device (`to_vec`, `item`, a copy to another device) returns the error
//!   and clears the record.
//! - `matmul`: 2-D matrix products, with either operand transposed on the fly (a flag,
//!   or a transposed view).
//! - `shape`: views (`transpose`/`t`, `transpose_dims`, `permute`, `narrow`, `view`),
//!   `reshape` (a view, or a copy of a non-contiguous tensor), `contiguous`, `detach`.
//! - `strided`: the strided copy between two layouts (gather and scatter) and the
//!   helpers that let operations take views.
//! - `host`: the host kernels (plain loops; `matrixmultiply` for matmul), `f32`/`f64`
//!   (the strided copy: any dtype).
//! - `cuda`: launches of the CUDA kernels of [`crate::tensor::kernels`] and cuBLAS, `f32`/`f64`
//!   (the strided copy: any dtype).
//!
//! Supported element types: `f32` and `f64` on both devices. Other dtypes give
//! [`TensorError::Unsupported`].
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

mod broadcast;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;
mod elementwise;
pub(crate) mod host;
mod loss;
mod matmul;
mod reduce;
mod shape;
mod strided;

use std::panic::Location;

use crate::backend::DeviceKind;

use super::{DType, Tensor, TensorError};

pub(crate) use elementwise::{BinaryOp, add_in_place_raw, add_raw, copy_at, full_like};
pub(crate) use strided::{contiguous_raw, strided_copy};

/// The line that called the public operation: the creation site of its outputs.
pub(crate) type Site = &'static Location<'static>;

/// Where an operation runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Exec {
    Host,
    #[cfg(feature = "cuda")]
    Cuda,
}

/// Where `t`'s operations run, or why they cannot.
pub(crate) fn exec_of(op: &'static str, t: &Tensor) -> Result<Exec, TensorError> {
    match t.device().kind() {
        DeviceKind::Host => Ok(Exec::Host),
        #[cfg(feature = "cuda")]
        DeviceKind::Cuda => Ok(Exec::Cuda),
        kind => Err(TensorError::Unsupported(format!(
            "{op} is not available on {kind} devices (tensor on {})",
            t.device().description()
        ))),
    }
}

/// After a read-back from `device` has waited for it: the error a kernel recorded there
/// since the last check (a loss target out of range on CUDA), cleared and returned as a
/// [`TensorError::InvalidArgument`]. Nothing to do on other devices; on CUDA one load of
/// host memory, no driver call.
#[inline]
pub(crate) fn check_device_side(device: &crate::Device) -> Result<(), TensorError> {
    #[cfg(feature = "cuda")]
    if let Some(c) = device
        .backend()
        .as_any()
        .downcast_ref::<crate::backend::cuda::CudaBackend>()
    {
        return cuda::check_device_side(c, device.label());
    }
    let _ = device;
    Ok(())
}

/// Checks that `t` holds `f32` or `f64`.
pub(crate) fn check_float(op: &'static str, t: &Tensor) -> Result<(), TensorError> {
    match t.dtype() {
        DType::F32 | DType::F64 => Ok(()),
        other => Err(TensorError::Unsupported(format!(
            "{op} needs f32 or f64 tensors; this one holds {other} (convert it first)"
        ))),
    }
}

/// Checks that `a` and `b` can meet in one operation: one device, one float dtype.
/// Orders `b`'s stream after `a`'s when they differ (the output and the work are on
/// `a`'s stream).
pub(crate) fn check_pair(op: &'static str, a: &Tensor, b: &Tensor) -> Result<Exec, TensorError> {
    if a.device() != b.device() {
        return Err(TensorError::DeviceMismatch(
            a.device().description(),
            b.device().description(),
        ));
    }
    check_float(op, a)?;
    if a.dtype() != b.dtype() {
        return Err(TensorError::DType {
            actual: b.dtype(),
            asked: a.dtype(),
        });
    }
    if a.stream() != b.stream() {
        b.record_stream(a.stream())?;
    }
    exec_of(op, a)
}

/// A new tensor on `like`'s device and stream.
pub(crate) fn alloc_like(
    shape: &[usize],
    dtype: DType,
    like: &Tensor,
    site: Site,
) -> Result<Tensor, TensorError> {
    Tensor::empty_at(shape, dtype, like.device(), like.stream(), site)
}

/// The bytes from a tensor's first element to the end of its last one (for a
/// non-contiguous view, a range with gaps).
fn byte_span(t: &Tensor) -> (u64, u64) {
    let start = t.addr().0;
    if t.numel() == 0 {
        return (start, start);
    }
    let last: usize = t
        .shape()
        .iter()
        .zip(t.strides())
        .map(|(&d, &s)| (d - 1) * s)
        .sum();
    (start, start + ((last + 1) * t.dtype().size()) as u64)
}

/// Whether the byte ranges of two tensors overlap (views of one storage may; two
/// interleaved views count as overlapping).
pub(crate) fn overlaps(a: &Tensor, b: &Tensor) -> bool {
    if a.device() != b.device() || a.nbytes() == 0 || b.nbytes() == 0 {
        return false;
    }
    let ((a0, a1), (b0, b1)) = (byte_span(a), byte_span(b));
    a0 < b1 && b0 < a1
}

/// Normalises a possibly negative axis.
pub(crate) fn axis_index(op: &'static str, axis: isize, ndim: usize) -> Result<usize, TensorError> {
    let a = if axis < 0 { axis + ndim as isize } else { axis };
    if a < 0 || a as usize >= ndim {
        return Err(TensorError::InvalidArgument {
            op,
            reason: format!("axis {axis} is out of range for a tensor of {ndim} dimension(s)"),
        });
    }
    Ok(a as usize)
}

/// AdamW's hyper-parameters for one step, bias corrections included.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AdamWStep {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    /// `1 - beta1^t`.
    pub bias1: f64,
    /// `1 - beta2^t`.
    pub bias2: f64,
}

/// One fused AdamW update of `p` (with gradient `g` and moments `m`, `v`) in place: one
/// write in the version of each of `p`, `m` and `v`.
pub(crate) fn adamw_(
    p: &Tensor,
    g: &Tensor,
    m: &Tensor,
    v: &Tensor,
    h: AdamWStep,
) -> Result<(), TensorError> {
    for t in [g, m, v] {
        check_pair("adamw", p, t)?;
        if t.shape() != p.shape() {
            return Err(TensorError::ShapeMismatch {
                op: "adamw",
                lhs: p.shape().to_vec(),
                rhs: t.shape().to_vec(),
                reason: "parameter, gradient and moments must have one shape".into(),
            });
        }
    }
    // The moments are the optimizer's own (contiguous, from `full_like`).
    if !m.is_contiguous() || !v.is_contiguous() {
        return Err(TensorError::InvalidArgument {
            op: "adamw",
            reason: "the moments must be contiguous tensors".into(),
        });
    }
    let site = Location::caller();
    // The gradient may share storage with nothing the step writes, and is read in
    // order.
    let g = if overlaps(p, g) || overlaps(m, g) || overlaps(v, g) {
        copy_at(g, site)?
    } else {
        contiguous_raw(g, site)?
    };
    // A parameter that is a view is updated through a contiguous temporary (which
    // counts the write in its version).
    strided::write_through(p, site, |p| match exec_of("adamw", p)? {
        // SAFETY: four distinct contiguous host tensors of one float dtype and shape.
        Exec::Host => unsafe { host::adamw(p, &g, m, v, h) },
        #[cfg(feature = "cuda")]
        Exec::Cuda => cuda::adamw(p, &g, m, v, h),
    })?;
    // The kernel wrote the moments in place too.
    m.increment_version();
    v.increment_version();
    Ok(())
}
