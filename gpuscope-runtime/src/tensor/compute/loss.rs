//! The negative log-likelihood over class scores and its backward step, recording
//! nothing; the targets are checked where they are read (see [`crate::ops`]'s `loss`
//! for how a bad target is reported on each device).

use super::strided::contiguous_raw;
use super::{Exec, Site, Tensor, TensorError, alloc_like, check_float, exec_of, host};
use crate::tensor::DType;

/// Checks `[n, c]` scores against `[n]` integer targets; returns `(n, c)`.
pub(crate) fn check_targets(
    op: &'static str,
    scores: &Tensor,
    targets: &Tensor,
) -> Result<(usize, usize), TensorError> {
    check_float(op, scores)?;
    if scores.device() != targets.device() {
        return Err(TensorError::DeviceMismatch(
            scores.device().description(),
            targets.device().description(),
        ));
    }
    if !matches!(targets.dtype(), DType::I64 | DType::I32) {
        return Err(TensorError::Unsupported(format!(
            "{op}: targets must be i64 or i32 class indices, not {}",
            targets.dtype()
        )));
    }
    if scores.ndim() != 2 || targets.ndim() != 1 || targets.shape()[0] != scores.shape()[0] {
        return Err(TensorError::ShapeMismatch {
            op,
            lhs: scores.shape().to_vec(),
            rhs: targets.shape().to_vec(),
            reason: "expected scores [n, classes] and targets [n]".into(),
        });
    }
    if scores.stream() != targets.stream() {
        targets.record_stream(scores.stream())?;
    }
    Ok((scores.shape()[0], scores.shape()[1]))
}

/// The targets as the backward step reads them: checked host indices (read once, at the
/// forward call), or the contiguous target tensor on the device (checked by the kernels).
pub(crate) enum NllTargets {
    Host(Vec<usize>),
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    Device(Tensor),
}

/// `-mean_i logp[i, t_i]` as a new scalar; `op` is the public operation (`cross_entropy`
/// or `nll_loss`) that errors name. Returns the loss and the targets for the backward
/// step.
pub(crate) fn nll_raw(
    op: &'static str,
    logp: &Tensor,
    targets: &Tensor,
    site: Site,
) -> Result<(Tensor, NllTargets), TensorError> {
    let (rows, cols) = check_targets(op, logp, targets)?;
    // The kernels read both in order: views are gathered first.
    let (dense, targets) = (contiguous_raw(logp, site)?, contiguous_raw(targets, site)?);
    let out = alloc_like(&[], logp.dtype(), logp, site)?;
    let kept = match exec_of(op, logp)? {
        Exec::Host => {
            // Host: the targets are checked and read once, and kept for the backward step.
            let t = host::targets(op, &targets, cols)?;
            // SAFETY: a fresh scalar output and its contiguous host input.
            unsafe { host::nll(&out, &dense, &t, cols)? };
            NllTargets::Host(t)
        }
        #[cfg(feature = "cuda")]
        Exec::Cuda => {
            super::cuda::nll(
                super::cuda::LossOp::of(op),
                &out,
                &dense,
                &targets,
                rows,
                cols,
                site,
            )?;
            NllTargets::Device(targets)
        }
    };
    let _ = rows;
    Ok((out, kept))
}

/// The gradient of [`nll_raw`] with respect to `logp` (of `shape`), given the
/// incoming scalar gradient `g`: `-g / rows` at each row's target, zeros elsewhere.
pub(crate) fn nll_backward_raw(
    op: &'static str,
    g: &Tensor,
    shape: &[usize],
    targets: &NllTargets,
    site: Site,
) -> Result<Tensor, TensorError> {
    let (rows, cols) = (shape[0], shape[1]);
    let grad = alloc_like(shape, g.dtype(), g, site)?;
    match targets {
        // SAFETY: a fresh output and the scalar gradient, on the host.
        NllTargets::Host(t) => unsafe { host::nll_backward(&grad, g, t, cols)? },
        #[cfg(feature = "cuda")]
        NllTargets::Device(t) => {
            super::cuda::nll_backward(super::cuda::LossOp::of(op), &grad, g, t, rows, cols)?
        }
        #[cfg(not(feature = "cuda"))]
        NllTargets::Device(_) => {
            let _ = (op, rows);
            return Err(TensorError::Unsupported(
                "nll_loss backward of device targets without CUDA support".into(),
            ));
        }
    }
    Ok(grad)
}
