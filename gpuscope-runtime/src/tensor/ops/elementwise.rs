//! Element-wise operations: binary with broadcasting, with a scalar, unary
//! activations, and in-place updates.
//!
//! Binary operations read views through their strides (no copy); unary and scalar ones
//! gather a non-contiguous input first. In-place updates of a view write through to
//! the storage it shares. Each in-place update counts one write in the storage's
//! [version](Tensor::version).

use std::panic::Location;

use crate::autograd::{record, record_saving, should_record};

use super::broadcast::{Broadcast, MAX_DIMS, broadcast_shape};
use super::strided::{contiguous_raw, strided_copy, write_through};
use super::{
    Exec, Site, Tensor, TensorError, alloc_like, check_float, check_pair, exec_of, host, overlaps,
};

/// A binary element-wise operation.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    /// The second operand (broadcast): `expand`, `fill`.
    Right,
}

impl BinaryOp {
    /// The code the CUDA kernels use.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn code(self) -> i32 {
        match self {
            BinaryOp::Add => 0,
            BinaryOp::Sub => 1,
            BinaryOp::Mul => 2,
            BinaryOp::Div => 3,
            BinaryOp::Right => 4,
        }
    }

    fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Right => "expand",
        }
    }
}

/// A unary element-wise operation.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum UnaryOp {
    Neg,
    Relu,
    Gelu,
    Exp,
    Log,
    Sqrt,
}

impl UnaryOp {
    /// The code the CUDA kernels use.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn code(self) -> i32 {
        match self {
            UnaryOp::Neg => 0,
            UnaryOp::Relu => 1,
            UnaryOp::Gelu => 2,
            UnaryOp::Exp => 3,
            UnaryOp::Log => 4,
            UnaryOp::Sqrt => 5,
        }
    }

    fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Relu => "relu",
            UnaryOp::Gelu => "gelu",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
        }
    }
}

// ---------------------------------------------------------------------------------
// Raw kernels: compute, record nothing.

/// Runs the binary kernel: `out = a op b` with `plan`.
fn launch_binary(
    op: BinaryOp,
    plan: &Broadcast,
    out: &Tensor,
    a: &Tensor,
    b: &Tensor,
) -> Result<(), TensorError> {
    match exec_of(op.name(), out)? {
        // SAFETY: host tensors of one float dtype; `out` is fresh or `a` itself.
        Exec::Host => unsafe { host::binary(op, plan, out, a, b) },
        #[cfg(feature = "cuda")]
        Exec::Cuda => super::cuda::binary(op, plan, out, a, b),
    }
}

/// The broadcast plan for `a op b` into an `out`-shaped result, and the operands to
/// launch it with: `a` and `b` themselves (views are read through their strides), or
/// contiguous copies of them when the plan keeps more merged dimensions than the CUDA
/// kernel takes.
fn plan_for(
    out: &[usize],
    a: &Tensor,
    b: &Tensor,
    site: Site,
) -> Result<(Broadcast, Tensor, Tensor), TensorError> {
    let plan = Broadcast::strided(out, (a.shape(), a.strides()), (b.shape(), b.strides()));
    if plan.dims.len() <= MAX_DIMS || (a.is_contiguous() && b.is_contiguous()) {
        return Ok((plan, a.clone(), b.clone()));
    }
    let (a, b) = (contiguous_raw(a, site)?, contiguous_raw(b, site)?);
    let plan = Broadcast::strided(out, (a.shape(), a.strides()), (b.shape(), b.strides()));
    Ok((plan, a, b))
}

/// `a op b` broadcast, into a new tensor.
pub(crate) fn binary_raw(
    op: BinaryOp,
    a: &Tensor,
    b: &Tensor,
    site: Site,
) -> Result<Tensor, TensorError> {
    check_pair(op.name(), a, b)?;
    let shape = broadcast_shape(op.name(), a.shape(), b.shape())?;
    let out = alloc_like(&shape, a.dtype(), a, site)?;
    let (plan, a, b) = plan_for(&shape, a, b, site)?;
    launch_binary(op, &plan, &out, &a, &b)?;
    Ok(out)
}

/// `a + b` with nothing recorded (autograd's accumulation).
pub(crate) fn add_raw(a: &Tensor, b: &Tensor, site: Site) -> Result<Tensor, TensorError> {
    binary_raw(BinaryOp::Add, a, b, site)
}

/// `t` broadcast to `shape`, into a new tensor.
pub(crate) fn expand_raw(t: &Tensor, shape: &[usize], site: Site) -> Result<Tensor, TensorError> {
    let full = broadcast_shape("expand", shape, t.shape())?;
    if full != shape {
        return Err(TensorError::ShapeMismatch {
            op: "expand",
            lhs: t.shape().to_vec(),
            rhs: shape.to_vec(),
            reason: "the tensor does not broadcast to that shape".into(),
        });
    }
    let out = alloc_like(shape, t.dtype(), t, site)?;
    // `out` stands in for the unread left operand.
    let (plan, _, t) = plan_for(shape, &out, t, site)?;
    launch_binary(BinaryOp::Right, &plan, &out, &out, &t)?;
    Ok(out)
}

/// `out = a op s` (or `s` for `Right`); `out` and `a` are contiguous.
fn launch_scalar(op: BinaryOp, out: &Tensor, a: &Tensor, s: f64) -> Result<(), TensorError> {
    match exec_of("scalar op", out)? {
        // SAFETY: host tensors of one float dtype, element for element.
        Exec::Host => unsafe { host::scalar(op, out, a, s) },
        #[cfg(feature = "cuda")]
        Exec::Cuda => super::cuda::scalar(op, out, a, s),
    }
}

/// `t = t op s` in place (through a view too), nothing recorded.
pub(crate) fn scalar_into(op: BinaryOp, t: &Tensor, s: f64) -> Result<(), TensorError> {
    write_through(t, Location::caller(), |t| launch_scalar(op, t, t, s))
}

pub(crate) fn scalar_raw(
    op: BinaryOp,
    a: &Tensor,
    s: f64,
    site: Site,
) -> Result<Tensor, TensorError> {
    check_float(op.name(), a)?;
    let a = contiguous_raw(a, site)?;
    let out = alloc_like(a.shape(), a.dtype(), &a, site)?;
    launch_scalar(op, &out, &a, s)?;
    Ok(out)
}

/// A tensor like `t` filled with `value`.
pub(crate) fn full_like(t: &Tensor, value: f64, site: Site) -> Result<Tensor, TensorError> {
    check_float("full_like", t)?;
    let out = alloc_like(t.shape(), t.dtype(), t, site)?;
    launch_scalar(BinaryOp::Right, &out, &out, value)?;
    Ok(out)
}

/// A contiguous copy of `t` in new storage on its device and stream.
pub(crate) fn copy_at(t: &Tensor, site: Site) -> Result<Tensor, TensorError> {
    let out = alloc_like(t.shape(), t.dtype(), t, site)?;
    // A new tensor: its version stays 0.
    out.copy_from_raw(t)?;
    Ok(out)
}

pub(crate) fn unary_raw(op: UnaryOp, a: &Tensor, site: Site) -> Result<Tensor, TensorError> {
    check_float(op.name(), a)?;
    let a = contiguous_raw(a, site)?;
    let out = alloc_like(a.shape(), a.dtype(), &a, site)?;
    match exec_of(op.name(), &a)? {
        // SAFETY: a fresh output and its contiguous host input.
        Exec::Host => unsafe { host::unary(op, &out, &a)? },
        #[cfg(feature = "cuda")]
        Exec::Cuda => super::cuda::unary(op, &out, &a)?,
    }
    Ok(out)
}

/// `g * op'(x)`.
pub(crate) fn unary_backward_raw(
    op: UnaryOp,
    g: &Tensor,
    x: &Tensor,
    site: Site,
) -> Result<Tensor, TensorError> {
    check_pair(op.name(), g, x)?;
    let (g, x) = (contiguous_raw(g, site)?, contiguous_raw(x, site)?);
    let out = alloc_like(x.shape(), x.dtype(), &x, site)?;
    match exec_of(op.name(), &x)? {
        // SAFETY: a fresh output and its contiguous host inputs.
        Exec::Host => unsafe { host::unary_backward(op, &out, &g, &x)? },
        #[cfg(feature = "cuda")]
        Exec::Cuda => super::cuda::unary_backward(op, &out, &g, &x)?,
    }
    Ok(out)
}

/// Sums `g` down to `shape` (undoing a broadcast): over leading dimensions `shape` lacks
/// and over dimensions where `shape` has 1.
pub(crate) fn sum_to(g: &Tensor, shape: &[usize], site: Site) -> Result<Tensor, TensorError> {
    if g.shape() == shape {
        return Ok(g.clone());
    }
    let mut t = g.clone();
    while t.ndim() > shape.len() {
        t = super::reduce::sum_axis_raw(&t, 0, false, 1.0, site)?;
    }
    for (i, &d) in shape.iter().enumerate() {
        if d == 1 && t.shape()[i] != 1 {
            t = super::reduce::sum_axis_raw(&t, i, true, 1.0, site)?;
        }
    }
    Ok(t)
}

// ---------------------------------------------------------------------------------
// In place.

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

/// `a op= b`, `b` broadcast to `a`'s shape; nothing recorded, no checks of grad mode.
/// A view `a` is updated through a contiguous temporary written back into it.
fn binary_in_place(op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<(), TensorError> {
    check_pair(op.name(), a, b)?;
    let shape = broadcast_shape(op.name(), a.shape(), b.shape())?;
    if shape != a.shape() {
        return Err(TensorError::ShapeMismatch {
            op: op.name(),
            lhs: a.shape().to_vec(),
            rhs: b.shape().to_vec(),
            reason: "in place, the second operand must broadcast to the first one's shape".into(),
        });
    }
    let site = Location::caller();
    write_through(a, site, |a| {
        let (plan, _, b) = plan_for(&shape, a, b, site)?;
        // Reading `b` as `a` is written is safe only element for element.
        let same = a.addr() == b.addr() && plan.is_elementwise();
        if overlaps(a, &b) && !same {
            let b = copy_at(&b, site)?;
            let (plan, _, b) = plan_for(&shape, a, &b, site)?;
            return launch_binary(op, &plan, a, a, &b);
        }
        launch_binary(op, &plan, a, a, &b)
    })
}

/// `a += b` with nothing recorded (autograd's accumulation into `.grad`).
pub(crate) fn add_in_place_raw(a: &Tensor, b: &Tensor) -> Result<(), TensorError> {
    binary_in_place(BinaryOp::Add, a, b)
}

/// `y += alpha * x` for a contiguous `y` (nothing recorded).
fn axpy_into(y: &Tensor, x: &Tensor, alpha: f64, site: Site) -> Result<(), TensorError> {
    if overlaps(y, x) {
        if y.addr() == x.addr() && x.is_contiguous() {
            // The same elements: y·(1 + alpha).
            return launch_scalar(BinaryOp::Mul, y, y, 1.0 + alpha);
        }
        let x = copy_at(x, site)?;
        return axpy_into(y, &x, alpha, site);
    }
    let x = contiguous_raw(x, site)?;
    match exec_of("add_scaled_", y)? {
        // SAFETY: distinct contiguous host tensors of one float dtype and shape.
        Exec::Host => unsafe { host::axpy(y, &x, alpha) },
        #[cfg(feature = "cuda")]
        Exec::Cuda => super::cuda::axpy(y, &x, alpha),
    }
}

/// Sets `t`'s elements to zero (through a view too); nothing recorded, no checks of
/// grad mode, its version left alone (for tensors an operation has just made).
pub(crate) fn zero_raw(t: &Tensor, site: Site) -> Result<(), TensorError> {
    if t.nbytes() == 0 {
        return Ok(());
    }
    let zeros = if t.is_contiguous() {
        t.clone()
    } else {
        alloc_like(t.shape(), t.dtype(), t, site)?
    };
    // SAFETY: the contiguous range of `zeros` (`t` itself or a fresh tensor), on `t`'s
    // stream.
    unsafe {
        t.device()
            .backend()
            .memset(zeros.addr(), 0, zeros.nbytes(), t.stream())?
    };
    if !t.is_contiguous() {
        strided_copy(t, &zeros)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------
// Recorded operations.

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
