//! Reductions (`Σ` along an axis or over everything, scaled), and `softmax` /
//! `log_softmax` over the last axis with their backward step, recording nothing. A
//! non-contiguous input is gathered first.

use super::elementwise::{BinaryOp, expand_raw, scalar_into};
use super::layout::reshape_raw;
use super::strided::contiguous_raw;
use super::{Exec, Site, Tensor, TensorError, alloc_like, check_float, check_pair, exec_of, host};

/// `scale · Σ` along `axis`, nothing recorded.
pub(crate) fn sum_axis_raw(
    t: &Tensor,
    axis: usize,
    keepdim: bool,
    scale: f64,
    site: Site,
) -> Result<Tensor, TensorError> {
    check_float("sum", t)?;
    let t = &contiguous_raw(t, site)?;
    let shape = t.shape();
    let outer: usize = shape[..axis].iter().product();
    let len = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let mut out_shape = shape.to_vec();
    if keepdim {
        out_shape[axis] = 1;
    } else {
        out_shape.remove(axis);
    }
    let out = alloc_like(&out_shape, t.dtype(), t, site)?;
    reduce_into(&out, t, outer, len, inner, scale)?;
    Ok(out)
}

pub(crate) fn reduce_into(
    out: &Tensor,
    t: &Tensor,
    outer: usize,
    len: usize,
    inner: usize,
    scale: f64,
) -> Result<(), TensorError> {
    match exec_of("sum", t)? {
        // SAFETY: a fresh output and its host input.
        Exec::Host => unsafe { host::reduce(out, t, outer, len, inner, scale) },
        #[cfg(feature = "cuda")]
        Exec::Cuda => super::cuda::reduce(out, t, outer, len, inner, scale),
    }
}

/// `scale · Σ` of every element, as a tensor of shape `[]`.
pub(crate) fn sum_all_raw(t: &Tensor, scale: f64, site: Site) -> Result<Tensor, TensorError> {
    check_float("sum", t)?;
    let t = &contiguous_raw(t, site)?;
    let out = alloc_like(&[], t.dtype(), t, site)?;
    reduce_into(&out, t, 1, t.numel(), 1, scale)?;
    Ok(out)
}

/// The backward of a (scaled) sum: the gradient spread back over the input's shape.
pub(crate) fn spread(
    g: &Tensor,
    keep_shape: &[usize],
    input_shape: &[usize],
    scale: f64,
    site: Site,
) -> Result<Tensor, TensorError> {
    let g = reshape_raw(g, keep_shape, site)?;
    let out = expand_raw(&g, input_shape, site)?;
    if scale != 1.0 {
        scalar_into(BinaryOp::Mul, &out, scale)?;
    }
    Ok(out)
}

pub(crate) fn softmax_raw(t: &Tensor, log: bool, site: Site) -> Result<Tensor, TensorError> {
    let name = if log { "log_softmax" } else { "softmax" };
    check_float(name, t)?;
    if t.ndim() == 0 {
        return Err(TensorError::InvalidArgument {
            op: name,
            reason: "needs at least one dimension (it works over the last one)".into(),
        });
    }
    let t = &contiguous_raw(t, site)?;
    let cols = t.shape()[t.ndim() - 1];
    let out = alloc_like(t.shape(), t.dtype(), t, site)?;
    match exec_of(name, t)? {
        // SAFETY: a fresh output and its host input.
        Exec::Host => unsafe { host::softmax(&out, t, cols, log)? },
        #[cfg(feature = "cuda")]
        Exec::Cuda => super::cuda::softmax(&out, t, cols, log)?,
    }
    Ok(out)
}

/// The backward of softmax (`log`: log-softmax) given its output `y`.
pub(crate) fn softmax_backward_raw(
    g: &Tensor,
    y: &Tensor,
    log: bool,
    site: Site,
) -> Result<Tensor, TensorError> {
    check_pair("softmax backward", g, y)?;
    let (g, y) = (&contiguous_raw(g, site)?, &contiguous_raw(y, site)?);
    let cols = y.shape()[y.ndim() - 1];
    let out = alloc_like(y.shape(), y.dtype(), y, site)?;
    match exec_of("softmax backward", y)? {
        // SAFETY: a fresh output and its host inputs.
        Exec::Host => unsafe { host::softmax_backward(&out, g, y, cols, log)? },
        #[cfg(feature = "cuda")]
        Exec::Cuda => super::cuda::softmax_backward(&out, g, y, cols, log)?,
    }
    Ok(out)
}
