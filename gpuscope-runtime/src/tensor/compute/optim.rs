//! The optimizers' fused updates: AdamW over one parameter, or over many parameters in
//! one launch.

use std::panic::Location;

use super::strided::{self, contiguous_raw};
use super::{Exec, Tensor, TensorError, check_pair, copy_at, exec_of, host, overlaps};

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
        Exec::Cuda => super::cuda::adamw(p, &g, m, v, h),
    })?;
    // The kernel wrote the moments in place too.
    m.increment_version();
    v.increment_version();
    Ok(())
}

/// One AdamW update of every `[p, g, m, v]` in `group`, fused where it can be: on CUDA,
/// parameters that are contiguous, of one dtype and stream, with gradients that share
/// no memory with what the step writes, go [`ADAM_TENSORS`](super::cuda::ADAM_TENSORS)
/// at a time to one launch; anything else (the host, views, overlapping gradients) goes
/// through [`adamw_`] one by one. Counts one write in the version of each `p`, `m`, `v`.
pub(crate) fn adamw_all_(group: &[[&Tensor; 4]], h: AdamWStep) -> Result<(), TensorError> {
    let mut fused: Vec<[&Tensor; 4]> = Vec::new();
    for &[p, g, m, v] in group {
        let fusable = matches!(exec_of("adamw", p), Ok(e) if e != Exec::Host)
            && [g, m, v].iter().all(|t| {
                t.device() == p.device()
                    && t.dtype() == p.dtype()
                    && t.stream() == p.stream()
                    && t.shape() == p.shape()
                    && t.is_contiguous()
            })
            && p.is_contiguous()
            && !(overlaps(p, g) || overlaps(m, g) || overlaps(v, g))
            && fused.first().is_none_or(|f| {
                f[0].dtype() == p.dtype()
                    && f[0].stream() == p.stream()
                    && f[0].device() == p.device()
            });
        if fusable {
            fused.push([p, g, m, v]);
        } else {
            adamw_(p, g, m, v, h)?;
        }
    }
    #[cfg(feature = "cuda")]
    for chunk in fused.chunks(super::cuda::ADAM_TENSORS) {
        super::cuda::adamw_many(chunk, h)?;
        for [p, _, m, v] in chunk {
            p.increment_version();
            m.increment_version();
            v.increment_version();
        }
    }
    #[cfg(not(feature = "cuda"))]
    debug_assert!(fused.is_empty());
    Ok(())
}
