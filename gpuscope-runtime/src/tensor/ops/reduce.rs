//! Reductions (`sum`, `mean`, over everything or one axis) and `softmax`/`log_softmax`
//! over the last axis. A non-contiguous input is gathered first.

use std::panic::Location;

use crate::autograd::{record, record_saving, should_record};

use super::elementwise::{BinaryOp, expand_raw};
use super::shape::reshape_raw;
use super::strided::contiguous_raw;
use super::{
    Exec, Site, Tensor, TensorError, alloc_like, axis_index, check_float, check_pair, exec_of, host,
};

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

fn reduce_into(
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
fn sum_all_raw(t: &Tensor, scale: f64, site: Site) -> Result<Tensor, TensorError> {
    check_float("sum", t)?;
    let t = &contiguous_raw(t, site)?;
    let out = alloc_like(&[], t.dtype(), t, site)?;
    reduce_into(&out, t, 1, t.numel(), 1, scale)?;
    Ok(out)
}

/// The backward of a (scaled) sum: the gradient spread back over the input's shape.
fn spread(
    g: &Tensor,
    keep_shape: &[usize],
    input_shape: &[usize],
    scale: f64,
    site: Site,
) -> Result<Tensor, TensorError> {
    let g = reshape_raw(g, keep_shape, site)?;
    let out = expand_raw(&g, input_shape, site)?;
    if scale != 1.0 {
        super::elementwise::scalar_into(BinaryOp::Mul, &out, scale)?;
    }
    Ok(out)
}

fn reduce_all_at(t: &Tensor, mean: bool, site: Site) -> Result<Tensor, TensorError> {
    let n = t.numel();
    let scale = if mean { 1.0 / n as f64 } else { 1.0 };
    let out = sum_all_raw(t, scale, site)?;
    if !should_record(&[t]) {
        return Ok(out);
    }
    let shape = t.shape().to_vec();
    let keep = vec![1; shape.len()];
    Ok(record(
        out,
        if mean { "mean" } else { "sum" },
        &[t],
        site,
        move |g, _, site| Ok(vec![Some(spread(g, &keep, &shape, scale, site)?)]),
    ))
}

pub(crate) fn mean_at(t: &Tensor, site: Site) -> Result<Tensor, TensorError> {
    reduce_all_at(t, true, site)
}

fn reduce_axis_at(
    t: &Tensor,
    axis: isize,
    keepdim: bool,
    mean: bool,
    site: Site,
) -> Result<Tensor, TensorError> {
    let name = if mean { "mean_axis" } else { "sum_axis" };
    let ax = axis_index(name, axis, t.ndim())?;
    let len = t.shape()[ax];
    let scale = if mean { 1.0 / len as f64 } else { 1.0 };
    let out = sum_axis_raw(t, ax, keepdim, scale, site)?;
    if !should_record(&[t]) {
        return Ok(out);
    }
    let shape = t.shape().to_vec();
    let mut keep = shape.clone();
    keep[ax] = 1;
    Ok(record(out, name, &[t], site, move |g, _, site| {
        Ok(vec![Some(spread(g, &keep, &shape, scale, site)?)])
    }))
}

fn softmax_raw(t: &Tensor, log: bool, site: Site) -> Result<Tensor, TensorError> {
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

pub(crate) fn softmax_at(t: &Tensor, log: bool, site: Site) -> Result<Tensor, TensorError> {
    let out = softmax_raw(t, log, site)?;
    if !should_record(&[t]) {
        return Ok(out);
    }
    let y = out.detach();
    Ok(record_saving(
        out,
        if log { "log_softmax" } else { "softmax" },
        &[t],
        [y.clone()],
        site,
        move |g, _, site| Ok(vec![Some(softmax_backward_raw(g, &y, log, site)?)]),
    ))
}

impl Tensor {
    /// The sum of all elements, shape `[]`.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], &Device::host().unwrap()).unwrap();
    /// assert_eq!(t.sum().unwrap().item().unwrap(), 10.0);
    /// assert_eq!(t.mean().unwrap().item().unwrap(), 2.5);
    /// ```
    #[track_caller]
    pub fn sum(&self) -> Result<Tensor, TensorError> {
        reduce_all_at(self, false, Location::caller())
    }

    /// The mean of all elements, shape `[]`.
    #[track_caller]
    pub fn mean(&self) -> Result<Tensor, TensorError> {
        reduce_all_at(self, true, Location::caller())
    }

    /// The sum along `axis` (negative counts from the end), which is removed unless
    /// `keepdim`.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], &Device::host().unwrap()).unwrap();
    /// assert_eq!(t.sum_axis(0, false).unwrap().to_vec::<f32>().unwrap(), vec![5.0, 7.0, 9.0]);
    /// let rows = t.sum_axis(-1, true).unwrap();
    /// assert_eq!(rows.shape(), &[2, 1]);
    /// assert_eq!(rows.to_vec::<f32>().unwrap(), vec![6.0, 15.0]);
    /// ```
    #[track_caller]
    pub fn sum_axis(&self, axis: isize, keepdim: bool) -> Result<Tensor, TensorError> {
        reduce_axis_at(self, axis, keepdim, false, Location::caller())
    }

    /// The mean along `axis`, which is removed unless `keepdim`.
    #[track_caller]
    pub fn mean_axis(&self, axis: isize, keepdim: bool) -> Result<Tensor, TensorError> {
        reduce_axis_at(self, axis, keepdim, true, Location::caller())
    }

    /// Softmax over the last axis (computed stably: the row's maximum is subtracted).
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let t = Tensor::from_slice(&[1.0f64, 1.0, 1000.0, 1000.0], &[2, 2], &Device::host().unwrap()).unwrap();
    /// assert_eq!(t.softmax().unwrap().to_vec::<f64>().unwrap(), vec![0.5; 4]);
    /// ```
    #[track_caller]
    pub fn softmax(&self) -> Result<Tensor, TensorError> {
        softmax_at(self, false, Location::caller())
    }

    /// Log-softmax over the last axis: `x - logsumexp(x)`.
    #[track_caller]
    pub fn log_softmax(&self) -> Result<Tensor, TensorError> {
        softmax_at(self, true, Location::caller())
    }
}
