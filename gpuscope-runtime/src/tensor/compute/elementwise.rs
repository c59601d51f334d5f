//! Element-wise kernels, recording nothing: binary with broadcasting, with a scalar,
//! unary activations and their backward steps, in-place updates, and `sum_to` (the
//! gradient of a broadcast).
//!
//! Binary kernels read views through their strides (no copy); unary and scalar ones
//! gather a non-contiguous input first. In-place updates of a view write through to the
//! storage it shares.

use std::panic::Location;

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

    pub(crate) fn name(self) -> &'static str {
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
    /// GELU, tanh approximation.
    Gelu,
    /// GELU, exact (`erf`): PyTorch's default.
    GeluErf,
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
            UnaryOp::GeluErf => 6,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Relu => "relu",
            UnaryOp::Gelu => "gelu",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::GeluErf => "gelu_erf",
        }
    }
}

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
pub(crate) fn launch_scalar(
    op: BinaryOp,
    out: &Tensor,
    a: &Tensor,
    s: f64,
) -> Result<(), TensorError> {
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

/// `a op= b`, `b` broadcast to `a`'s shape; nothing recorded, no checks of grad mode.
/// A view `a` is updated through a contiguous temporary written back into it.
pub(crate) fn binary_in_place(op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<(), TensorError> {
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
pub(crate) fn axpy_into(y: &Tensor, x: &Tensor, alpha: f64, site: Site) -> Result<(), TensorError> {
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
