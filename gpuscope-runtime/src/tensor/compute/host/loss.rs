//! Host kernels of the negative log-likelihood: the targets read and checked, the loss,
//! its backward step.

use super::super::{DType, Tensor, TensorError};
use super::{Float, slice, slice_mut};
use crate::tensor::Element;

/// The class index of each row, checked against `cols`.
pub(crate) fn targets(
    op: &'static str,
    t: &Tensor,
    cols: usize,
) -> Result<Vec<usize>, TensorError> {
    let raw: Vec<i64> = match t.dtype() {
        // SAFETY: a host tensor of that type, only read.
        DType::I64 => unsafe { slice::<i64>(t) }.to_vec(),
        // SAFETY: as above.
        DType::I32 => unsafe { slice::<i32>(t) }
            .iter()
            .map(|&v| v as i64)
            .collect(),
        other => {
            return Err(TensorError::Unsupported(format!(
                "{op}: targets must be i64 or i32, not {other}"
            )));
        }
    };
    raw.into_iter()
        .enumerate()
        .map(|(i, v)| {
            if v < 0 || v as usize >= cols {
                Err(TensorError::InvalidArgument {
                    op,
                    reason: format!("target {v} of row {i} is not a class index in 0..{cols}"),
                })
            } else {
                Ok(v as usize)
            }
        })
        .collect()
}

/// `out = -mean_i logp[i, t_i]` (a scalar).
///
/// # Safety
/// See the module documentation.
pub(crate) unsafe fn nll(
    out: &Tensor,
    logp: &Tensor,
    targets: &[usize],
    cols: usize,
) -> Result<(), TensorError> {
    with_float!(out.dtype(), T => {
        // SAFETY: a fresh output and its input.
        let (o, lp) = unsafe { (slice_mut::<T>(out), slice::<T>(logp)) };
        let rows = targets.len();
        let s: f64 = targets.iter().enumerate().map(|(i, &t)| lp[i * cols + t].to_f64()).sum();
        o[0] = T::of(if rows == 0 { f64::NAN } else { -s / rows as f64 });
        Ok(())
    })
}

/// Backward of [`nll`]: `out[i, j] = -g / rows` where `j == t_i`, else 0.
///
/// # Safety
/// See the module documentation.
pub(crate) unsafe fn nll_backward(
    out: &Tensor,
    g: &Tensor,
    targets: &[usize],
    cols: usize,
) -> Result<(), TensorError> {
    with_float!(out.dtype(), T => {
        // SAFETY: a fresh output and the scalar gradient.
        let (o, g) = unsafe { (slice_mut::<T>(out), slice::<T>(g)) };
        o.fill(T::ZERO);
        let rows = targets.len();
        if rows == 0 {
            return Ok(());
        }
        let v = -g[0] / T::of(rows as f64);
        for (i, &t) in targets.iter().enumerate() {
            o[i * cols + t] = v;
        }
        Ok(())
    })
}
