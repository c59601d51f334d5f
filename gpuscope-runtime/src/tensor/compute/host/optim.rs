//! The host's AdamW update.

use super::super::{DType, Tensor, TensorError};
use super::{Float, slice, slice_mut};

/// One AdamW step in place (decoupled weight decay, bias-corrected moments).
///
/// # Safety
/// See the module documentation; the four tensors are distinct.
pub(crate) unsafe fn adamw(
    p: &Tensor,
    g: &Tensor,
    m: &Tensor,
    v: &Tensor,
    h: crate::tensor::compute::optim::AdamWStep,
) -> Result<(), TensorError> {
    let crate::tensor::compute::optim::AdamWStep {
        lr,
        beta1,
        beta2,
        eps,
        weight_decay,
        bias1,
        bias2,
    } = h;
    with_float!(p.dtype(), T => {
        // SAFETY: four distinct host tensors of one length and type.
        let (p, g, m, v) = unsafe { (slice_mut::<T>(p), slice::<T>(g), slice_mut::<T>(m), slice_mut::<T>(v)) };
        let (b1, b2) = (T::of(beta1), T::of(beta2));
        let decay = T::of(1.0 - lr * weight_decay);
        let step = T::of(lr / bias1);
        let bias2_sqrt = T::of(bias2.sqrt());
        let eps = T::of(eps);
        for i in 0..p.len() {
            let gi = g[i];
            m[i] = b1 * m[i] + (T::ONE - b1) * gi;
            v[i] = b2 * v[i] + (T::ONE - b2) * gi * gi;
            let denom = v[i].sqrt() / bias2_sqrt + eps;
            p[i] = p[i] * decay - step * m[i] / denom;
        }
        Ok(())
    })
}
