//! Tensor computation that records nothing: the kernels of every operation on the host
//! and on CUDA, and what they share (where work runs, the checks of operands, fresh
//! outputs). The differentiable operations ([`crate::ops`]) call these and record their
//! backward steps with [`crate::autograd`]; autograd's engine calls them (gradient
//! accumulation) without recording; the tensor core calls them for copies. Nothing here
//! knows of autograd.
//!
//! Where things live:
//! - `broadcast`: NumPy broadcasting, and the merged-dimension plan kernels follow.
//! - `strided`: the strided copy between two layouts (gather, scatter), and
//!   `write_through` for in-place updates of views.
//! - `layout`: views and reshapes as plain layouts (`permuted`, `narrowed`,
//!   `reshape_raw`).
//! - `elementwise`: binary (broadcast), scalar and unary kernels, their backward
//!   kernels, in-place forms, `sum_to` (undoing a broadcast).
//! - `reduce`: sums along an axis or over everything, softmax and log-softmax.
//! - `loss`: the negative log-likelihood and its backward step.
//! - `matmul`: 2-D and batched matrix products (`matrixmultiply` on the host, cuBLAS
//!   `gemm` and `gemm_strided_batched` on CUDA).
//! - `nn`: the transformer kernels: layer norm, embedding lookup and its scatter-add,
//!   the causal softmax, the attention head split and merge, bias and GELU fused,
//!   column sums.
//! - `optim`: the fused AdamW update, over one tensor or many at once.
//! - `host`: the host kernels (plain loops); `cuda`: the CUDA launches of
//!   [`crate::kernels`] and cuBLAS.

mod broadcast;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;
pub(crate) mod elementwise;
pub(crate) mod host;
pub(crate) mod layout;
pub(crate) mod loss;
pub(crate) mod matmul;
pub(crate) mod nn;
pub(crate) mod optim;
pub(crate) mod reduce;
pub(crate) mod strided;

use std::panic::Location;

use crate::backend::DeviceKind;

use super::{DType, Tensor, TensorError};

pub(crate) use elementwise::{BinaryOp, UnaryOp, add_in_place_raw, add_raw, copy_at, full_like};
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
