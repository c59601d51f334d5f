//! Activations and other unary functions with autograd: `neg`, `relu`, `gelu` (tanh
//! approximation), `gelu_erf` (exact), `exp`, `log`, `sqrt`, and `bias_gelu` (a bias
//! added and GELU applied in one pass).

use std::panic::Location;

use crate::autograd::{record_saving, should_record};
use crate::tensor::compute::elementwise::{
    binary_raw, launch_scalar, scalar_raw, unary_backward_raw, unary_raw,
};
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
