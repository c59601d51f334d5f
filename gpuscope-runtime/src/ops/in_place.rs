//! In-place updates: `add_`, `sub_`, `mul_`, `mul_scalar_`, `add_scalar_`,
//! `add_scaled_` (axpy), `zero_`, `fill_`. None is recorded: each refuses a tensor that
//! requires grad while grad mode is on, and counts one write in the storage's
//! [version](Tensor::version).

use std::panic::Location;

use crate::tensor::compute::elementwise::{axpy_into, binary_in_place, scalar_into, zero_raw};
use crate::tensor::compute::strided::write_through;
use crate::tensor::compute::{BinaryOp, check_float, check_pair};
use crate::tensor::{Tensor, TensorError};

/// Refuses in-place changes that autograd could not follow.
fn check_in_place(op: &'static str, t: &Tensor) -> Result<(), TensorError> {
    if crate::grad::is_grad_enabled() && t.requires_grad() {
        return Err(TensorError::Autograd(format!(
            "{op} changes in place a tensor that requires grad while grad mode is on; \
             do it under no_grad (as optimizers do), or on a detached tensor"
        )));
    }
    check_float(op, t)
}

impl Tensor {
    /// `self += other` in place (`other` broadcast to this shape). Not recorded: it is
    /// an error on a tensor that requires grad while grad mode is on. Like every
    /// in-place operation it adds one to the storage's [`version`](Tensor::version), so
    /// a graph that saved this tensor (or a view of its storage) refuses `backward()`.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let dev = Device::host().unwrap();
    /// let t = Tensor::zeros(&[2, 2], &dev).unwrap();
    /// t.add_(&Tensor::from_slice(&[1.0f32, 2.0], &[2], &dev).unwrap()).unwrap();
    /// assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 1.0, 2.0]);
    /// ```
    pub fn add_(&self, other: &Tensor) -> Result<(), TensorError> {
        check_in_place("add_", self)?;
        binary_in_place(BinaryOp::Add, self, other)
    }

    /// `self -= other` in place (see [`add_`](Tensor::add_)).
    pub fn sub_(&self, other: &Tensor) -> Result<(), TensorError> {
        check_in_place("sub_", self)?;
        binary_in_place(BinaryOp::Sub, self, other)
    }

    /// `self *= other` in place (see [`add_`](Tensor::add_)).
    pub fn mul_(&self, other: &Tensor) -> Result<(), TensorError> {
        check_in_place("mul_", self)?;
        binary_in_place(BinaryOp::Mul, self, other)
    }

    /// `self *= value` in place.
    pub fn mul_scalar_(&self, value: f64) -> Result<(), TensorError> {
        check_in_place("mul_scalar_", self)?;
        scalar_into(BinaryOp::Mul, self, value)
    }

    /// `self += value` in place.
    pub fn add_scalar_(&self, value: f64) -> Result<(), TensorError> {
        check_in_place("add_scalar_", self)?;
        scalar_into(BinaryOp::Add, self, value)
    }

    /// `self += alpha * other` in place (BLAS axpy); `other` has this shape.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let dev = Device::host().unwrap();
    /// let p = Tensor::ones(&[3], &dev).unwrap();
    /// let g = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3], &dev).unwrap();
    /// p.add_scaled_(&g, -0.5).unwrap();
    /// assert_eq!(p.to_vec::<f32>().unwrap(), vec![0.5, 0.0, -0.5]);
    /// ```
    pub fn add_scaled_(&self, other: &Tensor, alpha: f64) -> Result<(), TensorError> {
        check_in_place("add_scaled_", self)?;
        check_pair("add_scaled_", self, other)?;
        if self.shape() != other.shape() {
            return Err(TensorError::ShapeMismatch {
                op: "add_scaled_",
                lhs: self.shape().to_vec(),
                rhs: other.shape().to_vec(),
                reason: "axpy needs equal shapes".into(),
            });
        }
        let site = Location::caller();
        write_through(self, site, |y| axpy_into(y, other, alpha, site))
    }

    /// Sets every element to zero, in place (any dtype; through a view, only the
    /// view's elements).
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let t = Tensor::ones(&[2, 3], &Device::host().unwrap()).unwrap();
    /// t.narrow(1, 1, 1).unwrap().zero_().unwrap(); // the middle column
    /// assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 0.0, 1.0, 1.0, 0.0, 1.0]);
    /// ```
    pub fn zero_(&self) -> Result<(), TensorError> {
        if crate::grad::is_grad_enabled() && self.requires_grad() {
            return Err(TensorError::Autograd(
                "zero_ changes in place a tensor that requires grad while grad mode is on; do it under no_grad".into(),
            ));
        }
        zero_raw(self, Location::caller())?;
        self.increment_version();
        Ok(())
    }

    /// Sets every element to `value`, in place.
    pub fn fill_(&self, value: f64) -> Result<(), TensorError> {
        check_in_place("fill_", self)?;
        scalar_into(BinaryOp::Right, self, value)
    }
}
