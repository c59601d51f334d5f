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
