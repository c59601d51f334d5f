//! Activations and other unary functions with autograd: `neg`, `relu`, `gelu` (tanh
//! approximation), `gelu_erf` (exact), `exp`, `log`, `sqrt`, and `bias_gelu` (a bias
//! added and GELU applied in one pass).

use std::panic::Location;

use crate::autograd::{record_saving, should_record};
use crate::tensor::compute::elementwise::{
    binary_raw, launch_scalar, scalar_raw, unary_backward_raw, unary_raw,
};
use crate::tensor::compute::nn::{bias_gelu_backward_raw, bias_gelu_raw, col_sum_raw};
use crate::tensor::compute::{BinaryOp, Site, UnaryOp};
use crate::tensor::{Tensor, TensorError};

fn unary_at(op: UnaryOp, a: &Tensor, site: Site) -> Result<Tensor, TensorError> {
    let out = unary_raw(op, a, site)?;
    if !should_record(&[a]) {
        return Ok(out);
    }
    // exp and sqrt differentiate from their output; relu, gelu and log from their input.
    let saved = match op {
        UnaryOp::Neg => None,
        UnaryOp::Exp | UnaryOp::Sqrt => Some(out.detach()),
        _ => Some(a.detach()),
    };
    let listed = saved.clone();
    Ok(record_saving(
        out,
        op.name(),
        &[a],
        listed,
        site,
        move |g, _, site| {
            let grad = match (op, saved) {
                (UnaryOp::Exp, Some(y)) => binary_raw(BinaryOp::Mul, g, &y, site)?,
                (UnaryOp::Sqrt, Some(y)) => {
                    let t = binary_raw(BinaryOp::Div, g, &y, site)?;
                    launch_scalar(BinaryOp::Mul, &t, &t, 0.5)?;
                    t
                }
                (_, Some(x)) => unary_backward_raw(op, g, &x, site)?,
                (_, None) => scalar_raw(BinaryOp::Mul, g, -1.0, site)?,
            };
            Ok(vec![Some(grad)])
        },
    ))
}

fn bias_gelu_at(x: &Tensor, b: &Tensor, site: Site) -> Result<Tensor, TensorError> {
    let out = bias_gelu_raw(x, b, site)?;
    if !should_record(&[x, b]) {
        return Ok(out);
    }
    let (xs, bs) = (x.detach(), b.detach());
    Ok(record_saving(
        out,
        "bias_gelu",
        &[x, b],
        [xs.clone(), bs.clone()],
        site,
        move |g, needs, site| {
            let dz = bias_gelu_backward_raw(g, &xs, &bs, site)?;
            let db = needs[1].then(|| col_sum_raw(&dz, site)).transpose()?;
            Ok(vec![needs[0].then_some(dz), db])
        },
    ))
}

impl Tensor {
    /// `-self`.
    #[track_caller]
    pub fn neg(&self) -> Result<Tensor, TensorError> {
        unary_at(UnaryOp::Neg, self, Location::caller())
    }

    /// `max(self, 0)`.
    #[track_caller]
    pub fn relu(&self) -> Result<Tensor, TensorError> {
        unary_at(UnaryOp::Relu, self, Location::caller())
    }

    /// GELU, tanh approximation: `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let t = Tensor::from_slice(&[0.0f64, 1.0], &[2], &Device::host().unwrap()).unwrap();
    /// let y = t.gelu().unwrap().to_vec::<f64>().unwrap();
    /// assert_eq!(y[0], 0.0);
    /// assert!((y[1] - 0.841192).abs() < 1e-6);
    /// ```
    #[track_caller]
    pub fn gelu(&self) -> Result<Tensor, TensorError> {
        unary_at(UnaryOp::Gelu, self, Location::caller())
    }

    /// GELU, exact: `x·Φ(x) = 0.5·x·(1 + erf(x/√2))` (PyTorch's `F.gelu` default;
    /// [`gelu`](Tensor::gelu) is the tanh approximation).
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let t = Tensor::from_slice(&[0.0f64, 1.0, -1.0], &[3], &Device::host().unwrap()).unwrap();
    /// let y = t.gelu_erf().unwrap().to_vec::<f64>().unwrap();
    /// assert_eq!(y[0], 0.0);
    /// assert!((y[1] - 0.841_344_746).abs() < 1e-8 && (y[2] + 0.158_655_254).abs() < 1e-8);
    /// ```
    #[track_caller]
    pub fn gelu_erf(&self) -> Result<Tensor, TensorError> {
        unary_at(UnaryOp::GeluErf, self, Location::caller())
    }

    /// `gelu_erf(self + bias)`, the bias (a vector of the last dimension's size) added in
    /// the same pass: what a linear layer's output goes through in a transformer's MLP.
    /// Saves its input and the bias for the backward step (not the sum).
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let dev = Device::host().unwrap();
    /// let x = Tensor::from_slice(&[0.5f64, -1.0, 2.0, 0.0], &[2, 2], &dev).unwrap();
    /// let b = Tensor::from_slice(&[0.5f64, 1.0], &[2], &dev).unwrap();
    /// let fused = x.bias_gelu(&b).unwrap().to_vec::<f64>().unwrap();
    /// let plain = x.add(&b).unwrap().gelu_erf().unwrap().to_vec::<f64>().unwrap();
    /// assert_eq!(fused, plain);
    /// ```
    #[track_caller]
    pub fn bias_gelu(&self, bias: &Tensor) -> Result<Tensor, TensorError> {
        bias_gelu_at(self, bias, Location::caller())
    }

    /// `e^self`.
    #[track_caller]
    pub fn exp(&self) -> Result<Tensor, TensorError> {
        unary_at(UnaryOp::Exp, self, Location::caller())
    }

    /// Natural logarithm.
    #[track_caller]
    pub fn log(&self) -> Result<Tensor, TensorError> {
        unary_at(UnaryOp::Log, self, Location::caller())
    }

    /// Square root.
    #[track_caller]
    pub fn sqrt(&self) -> Result<Tensor, TensorError> {
        unary_at(UnaryOp::Sqrt, self, Location::caller())
    }
}
