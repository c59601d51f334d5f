//! Reductions with autograd: `sum`, `mean` (over everything or along an axis),
//! `softmax` and `log_softmax` over the last axis.

use std::panic::Location;

use crate::autograd::{record, record_saving, should_record};
use crate::tensor::compute::reduce::{
    softmax_backward_raw, softmax_raw, spread, sum_all_raw, sum_axis_raw,
};
use crate::tensor::compute::{Site, axis_index};
use crate::tensor::{Tensor, TensorError};

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
