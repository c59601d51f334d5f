//! Losses: cross-entropy (log-softmax then negative log-likelihood, as PyTorch's
//! `cross_entropy`), `nll_loss` and mean squared error. All reduce with the mean.
//!
//! Class targets out of range (negative, or not below the number of classes) are an
//! [`InvalidArgument`](TensorError::InvalidArgument) error naming the row, the target
//! and the number of classes:
//! - on the host, from the loss call itself (the targets are read there);
//! - on CUDA, where reading the targets at the call would wait for the GPU (PyTorch's
//!   device-side assertion, done as an error you can recover from): the kernel gives
//!   that row a NaN loss (so the mean is NaN) and a zero gradient, reads nothing out of
//!   bounds, and records the first bad row in the device's error record (mapped pinned
//!   host memory). The next read-back from that device, which waits for it anyway
//!   (`to_vec`, `to_f64_vec`, `item`, a copy to another device), returns the error
//!   instead of its data and clears the record, so later correct losses read fine. No
//!   extra launch and no extra wait: one load of host memory per read-back.

use std::panic::Location;

use crate::autograd::{record_saving, should_record};
use crate::tensor::compute::Site;
use crate::tensor::compute::elementwise::BinaryOp;
use crate::tensor::compute::loss::{NllTargets, check_targets, nll_backward_raw, nll_raw};
use crate::tensor::{Tensor, TensorError};

/// Negative log-likelihood given log-probabilities, mean over rows; `op` is the public
/// operation (`cross_entropy` or `nll_loss`) that errors name.
fn nll_at(
    op: &'static str,
    logp: &Tensor,
    targets: &Tensor,
    site: Site,
) -> Result<Tensor, TensorError> {
    let (out, kept) = nll_raw(op, logp, targets, site)?;
    if !should_record(&[logp]) {
        return Ok(out);
    }
    let shape = logp.shape().to_vec();
    // On CUDA the targets stay on the device until the backward step.
    let listed = match &kept {
        NllTargets::Device(t) => Some(t.clone()),
        NllTargets::Host(_) => None,
    };
    Ok(record_saving(
        out,
        "nll_loss",
        &[logp],
        listed,
        site,
        move |g, _, site| Ok(vec![Some(nll_backward_raw(op, g, &shape, &kept, site)?)]),
    ))
}

impl Tensor {
    /// Cross-entropy of logits `[n, classes]` against class indices `[n]` (`i64` or
    /// `i32`), the mean over rows: `log_softmax` then [`nll_loss`](Tensor::nll_loss).
    ///
    /// A target outside `0..classes` is a [`TensorError::InvalidArgument`] naming the
    /// row, the target and the number of classes. On the host this call returns it. On
    /// CUDA (where checking here would wait for the GPU) the loss is NaN and that row's
    /// gradient zero, and the next read-back from the device (`item`, `to_vec`, a copy
    /// to another device) returns the error, once.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let dev = Device::host().unwrap();
    /// let logits = Tensor::from_slice(&[0.0f64, 0.0, 0.0, 0.0], &[2, 2], &dev).unwrap();
    /// let targets = Tensor::from_slice(&[0i64, 1], &[2], &dev).unwrap();
    /// let loss = logits.cross_entropy(&targets).unwrap().item().unwrap();
    /// assert!((loss - 2f64.ln()).abs() < 1e-12);
    /// ```
    #[track_caller]
    pub fn cross_entropy(&self, targets: &Tensor) -> Result<Tensor, TensorError> {
        let site = Location::caller();
        check_targets("cross_entropy", self, targets)?;
        let logp = super::reduce::softmax_at(self, true, site)?;
        nll_at("cross_entropy", &logp, targets, site)
    }

    /// Negative log-likelihood of log-probabilities `[n, classes]` against class
    /// indices `[n]`: `-mean_i self[i, targets[i]]`. Targets out of range are reported
    /// as for [`cross_entropy`](Tensor::cross_entropy): by this call on the host, by the
    /// next read-back on CUDA.
    #[track_caller]
    pub fn nll_loss(&self, targets: &Tensor) -> Result<Tensor, TensorError> {
        nll_at("nll_loss", self, targets, Location::caller())
    }

    /// Mean squared error against `target` (same shape): `mean((self - target)²)`.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let dev = Device::host().unwrap();
    /// let p = Tensor::from_slice(&[1.0f32, 2.0], &[2], &dev).unwrap();
    /// let t = Tensor::from_slice(&[0.0f32, 4.0], &[2], &dev).unwrap();
    /// assert_eq!(p.mse_loss(&t).unwrap().item().unwrap(), 2.5);
    /// ```
    #[track_caller]
    pub fn mse_loss(&self, target: &Tensor) -> Result<Tensor, TensorError> {
        let site = Location::caller();
        if self.shape() != target.shape() {
            return Err(TensorError::ShapeMismatch {
                op: "mse_loss",
                lhs: self.shape().to_vec(),
                rhs: target.shape().to_vec(),
                reason: "prediction and target must have one shape".into(),
            });
        }
        let d = super::arithmetic::binary_at(BinaryOp::Sub, self, target, site)?;
        let sq = super::arithmetic::binary_at(BinaryOp::Mul, &d, &d, site)?;
        drop(d);
        super::reduce::mean_at(&sq, site)
    }
}
