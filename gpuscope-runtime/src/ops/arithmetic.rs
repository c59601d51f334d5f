//! Arithmetic with autograd: `add`/`sub`/`mul`/`div` with broadcasting, and the scalar
//! forms `add_scalar`/`mul_scalar`.

use std::panic::Location;

use crate::autograd::{record, record_saving, should_record};
use crate::tensor::compute::elementwise::{binary_raw, launch_scalar, scalar_raw, sum_to};
use crate::tensor::compute::{BinaryOp, Site};
use crate::tensor::{Tensor, TensorError};

pub(crate) fn binary_at(
    op: BinaryOp,
    a: &Tensor,
    b: &Tensor,
    site: Site,
) -> Result<Tensor, TensorError> {
    let out = binary_raw(op, a, b, site)?;
    if !should_record(&[a, b]) {
        return Ok(out);
    }
    let (sa, sb) = (a.shape().to_vec(), b.shape().to_vec());
    let saved = match op {
        BinaryOp::Mul | BinaryOp::Div => Some((a.detach(), b.detach())),
        _ => None,
    };
    let listed = saved
        .as_ref()
        .map(|(a, b)| [a.clone(), b.clone()])
        .into_iter()
        .flatten();
    Ok(record_saving(
        out,
        op.name(),
        &[a, b],
        listed,
        site,
        move |g, needs, site| {
            let (ga, gb) = match (op, saved) {
                (BinaryOp::Add, _) => (Some(g.clone()), Some(g.clone())),
                (BinaryOp::Sub, _) => (
                    Some(g.clone()),
                    needs[1]
                        .then(|| scalar_raw(BinaryOp::Mul, g, -1.0, site))
                        .transpose()?,
                ),
                (BinaryOp::Mul, Some((a, b))) => (
                    needs[0]
                        .then(|| binary_raw(BinaryOp::Mul, g, &b, site))
                        .transpose()?,
                    needs[1]
                        .then(|| binary_raw(BinaryOp::Mul, g, &a, site))
                        .transpose()?,
                ),
                (BinaryOp::Div, Some((a, b))) => {
                    let ga = needs[0]
                        .then(|| binary_raw(BinaryOp::Div, g, &b, site))
                        .transpose()?;
                    let gb = if needs[1] {
                        // -g·a/b²
                        let t = binary_raw(BinaryOp::Mul, g, &a, site)?;
                        let t = binary_raw(BinaryOp::Div, &t, &b, site)?;
                        let t = binary_raw(BinaryOp::Div, &t, &b, site)?;
                        launch_scalar(BinaryOp::Mul, &t, &t, -1.0)?;
                        Some(t)
                    } else {
                        None
                    };
                    (ga, gb)
                }
                _ => (None, None),
            };
            let ga = match ga.filter(|_| needs[0]) {
                Some(t) => Some(sum_to(&t, &sa, site)?),
                None => None,
            };
            let gb = match gb.filter(|_| needs[1]) {
                Some(t) => Some(sum_to(&t, &sb, site)?),
                None => None,
            };
            Ok(vec![ga, gb])
        },
    ))
}

fn scalar_at(op: BinaryOp, a: &Tensor, s: f64, site: Site) -> Result<Tensor, TensorError> {
    let out = scalar_raw(op, a, s, site)?;
    if !should_record(&[a]) {
        return Ok(out);
    }
    let name = if op == BinaryOp::Add {
        "add_scalar"
    } else {
        "mul_scalar"
    };
    Ok(record(out, name, &[a], site, move |g, _, site| {
        Ok(vec![Some(if op == BinaryOp::Mul {
            scalar_raw(BinaryOp::Mul, g, s, site)?
        } else {
            g.clone()
        })])
    }))
}

impl Tensor {
    /// `self + other`, broadcasting (NumPy rules: `[n, m] + [m]` adds a row to every
    /// row, `[n, m] + [n, 1]` a column, `[]` a scalar).
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let dev = Device::host().unwrap();
    /// let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], &dev).unwrap();
    /// let col = Tensor::from_slice(&[10.0f32, 20.0], &[2, 1], &dev).unwrap();
    /// assert_eq!(a.add(&col).unwrap().to_vec::<f32>().unwrap(), vec![11.0, 12.0, 23.0, 24.0]);
    /// ```
    #[track_caller]
    pub fn add(&self, other: &Tensor) -> Result<Tensor, TensorError> {
        binary_at(BinaryOp::Add, self, other, Location::caller())
    }

    /// `self - other`, broadcasting.
    #[track_caller]
    pub fn sub(&self, other: &Tensor) -> Result<Tensor, TensorError> {
        binary_at(BinaryOp::Sub, self, other, Location::caller())
    }

    /// `self * other` element by element, broadcasting.
    #[track_caller]
    pub fn mul(&self, other: &Tensor) -> Result<Tensor, TensorError> {
        binary_at(BinaryOp::Mul, self, other, Location::caller())
    }

    /// `self / other` element by element, broadcasting.
    #[track_caller]
    pub fn div(&self, other: &Tensor) -> Result<Tensor, TensorError> {
        binary_at(BinaryOp::Div, self, other, Location::caller())
    }

    /// `self + value` for every element.
    #[track_caller]
    pub fn add_scalar(&self, value: f64) -> Result<Tensor, TensorError> {
        scalar_at(BinaryOp::Add, self, value, Location::caller())
    }

    /// `self * value` for every element.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let t = Tensor::from_slice(&[1.0f32, -2.0], &[2], &Device::host().unwrap()).unwrap();
    /// assert_eq!(t.mul_scalar(3.0).unwrap().to_vec::<f32>().unwrap(), vec![3.0, -6.0]);
    /// ```
    #[track_caller]
    pub fn mul_scalar(&self, value: f64) -> Result<Tensor, TensorError> {
        scalar_at(BinaryOp::Mul, self, value, Location::caller())
    }
}
