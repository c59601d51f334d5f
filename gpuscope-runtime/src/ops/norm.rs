//! Layer norm with autograd.

use std::panic::Location;

use crate::autograd::{record_saving, should_record};
use crate::tensor::compute::Site;
use crate::tensor::compute::nn::{layer_norm_backward_raw, layer_norm_raw};
use crate::tensor::{Tensor, TensorError};

fn layer_norm_at(
    x: &Tensor,
    w: &Tensor,
    b: &Tensor,
    eps: f64,
    site: Site,
) -> Result<Tensor, TensorError> {
    let (y, stats) = layer_norm_raw(x, w, b, eps, site)?;
    if !should_record(&[x, w, b]) {
        return Ok(y);
    }
    let (xs, ws) = (x.detach(), w.detach());
    let listed = [
        xs.clone(),
        ws.clone(),
        stats.mean.clone(),
        stats.rstd.clone(),
    ];
    Ok(record_saving(
        y,
        "layer_norm",
        &[x, w, b],
        listed,
        site,
        move |g, needs, site| {
            let [dx, dw, db] =
                layer_norm_backward_raw(g, &xs, &stats, &ws, [needs[0], needs[1], needs[2]], site)?;
            Ok(vec![dx, dw, db])
        },
    ))
}

impl Tensor {
    /// Layer norm over the last dimension (PyTorch's `nn.LayerNorm`): each row is
    /// normalised to mean 0 and variance 1 (the biased variance, `eps` added under the
    /// root), then scaled by `weight` and shifted by `bias` (vectors of the last
    /// dimension's size). One kernel forward and one backward on CUDA (plus two small
    /// ones for the sums of `weight`'s and `bias`'s gradients); the backward step keeps
    /// the input, the weight and each row's mean and `1/σ`.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let dev = Device::host().unwrap();
    /// let x = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 10.0, 10.0, 10.0], &[2, 3], &dev).unwrap();
    /// let w = Tensor::from_slice(&[1.0f64; 3], &[3], &dev).unwrap();
    /// let b = Tensor::from_slice(&[0.0f64; 3], &[3], &dev).unwrap();
    /// let y = x.layer_norm(&w, &b, 1e-5).unwrap().to_vec::<f64>().unwrap();
    /// assert!((y[0] + 1.2247).abs() < 1e-4 && y[1].abs() < 1e-12 && (y[2] - 1.2247).abs() < 1e-4);
    /// assert_eq!(&y[3..], &[0.0, 0.0, 0.0]); // a constant row
    /// ```
    #[track_caller]
    pub fn layer_norm(
        &self,
        weight: &Tensor,
        bias: &Tensor,
        eps: f64,
    ) -> Result<Tensor, TensorError> {
        layer_norm_at(self, weight, bias, eps, Location::caller())
    }
}
