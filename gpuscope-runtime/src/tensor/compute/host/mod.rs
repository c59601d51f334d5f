//! Host kernels: plain loops over the tensors' memory (on the host backend a device
//! address is a host pointer), generic over `f32` and `f64`; matmul through
//! `matrixmultiply`'s `sgemm`/`dgemm`.
//!
//! Callers guarantee what the `unsafe` accessors need: the tensors are on the host
//! backend, have the element type asked for, are contiguous (views are gathered first,
//! see `strided`) except where a kernel takes strides (`binary`'s operands, `matmul`,
//! `strided_copy`), and an output does not overlap an input (outputs are fresh
//! allocations; in-place operations copy an overlapping operand first).

use std::ops::{Add, AddAssign, Div, Mul, Neg, Sub};

use super::super::{DType, Element, Tensor, TensorError};
use super::broadcast::Broadcast;
use super::elementwise::{BinaryOp, UnaryOp};

/// The float element types the host kernels compute in.
pub(crate) trait Float:
    Element
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
{
    const ZERO: Self;
    const ONE: Self;
    fn of(v: f64) -> Self;
    fn tanh(self) -> Self;
    fn erf(self) -> Self;
    fn exp(self) -> Self;
    /// `matrixmultiply`'s general matrix product of this type.
    const GEMM: Gemm<Self>;
}

/// `matrixmultiply`'s `sgemm`/`dgemm`: `(m, k, n, alpha, a, rsa, csa, b, rsb, csb, beta,
/// c, rsc, csc)` computes `c = alpha·A@B + beta·c` for the `m×k` matrix `A` whose
/// element `(i, l)` is at `a + i·rsa + l·csa`, `B` (`k×n`) and `c` (`m×n`) likewise; with
/// `beta` zero, `c` is written without being read.
///
/// # Safety
/// The pointers and strides describe valid `m×k`, `k×n` and `m×n` matrices.
type Gemm<T> = unsafe fn(
    usize,
    usize,
    usize,
    T,
    *const T,
    isize,
    isize,
    *const T,
    isize,
    isize,
    T,
    *mut T,
    isize,
    isize,
);

macro_rules! float {
    ($t:ty, $gemm:path, $erf:path) => {
        impl Float for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            #[inline]
            fn of(v: f64) -> Self {
                v as $t
            }
            #[inline]
            fn tanh(self) -> Self {
                <$t>::tanh(self)
            }
            #[inline]
            fn erf(self) -> Self {
                $erf(self)
            }
            #[inline]
            fn exp(self) -> Self {
                <$t>::exp(self)
            }
            const GEMM: Gemm<Self> = $gemm;
        }
    };
}
float!(f32, matrixmultiply::sgemm, libm::erff);
float!(f64, matrixmultiply::dgemm, libm::erf);

/// The elements of a host tensor.
///
/// # Safety
/// `t` is on the host backend, holds `T`, and nothing writes it meanwhile.
pub(crate) unsafe fn slice<T: Element>(t: &Tensor) -> &[T] {
    debug_assert_eq!(t.dtype(), T::DTYPE);
    debug_assert!(
        t.is_contiguous(),
        "a host kernel read a non-contiguous tensor"
    );
    // SAFETY: the caller's promise; host addresses are pointers aligned to 256 bytes.
    unsafe { std::slice::from_raw_parts(t.addr().0 as *const T, t.numel()) }
}

/// The elements of a host tensor, writable.
///
/// # Safety
/// As [`slice()`], and nothing else reads or writes it meanwhile.
#[allow(clippy::mut_from_ref)]
pub(crate) unsafe fn slice_mut<T: Element>(t: &Tensor) -> &mut [T] {
    debug_assert_eq!(t.dtype(), T::DTYPE);
    debug_assert!(
        t.is_contiguous(),
        "a host kernel wrote a non-contiguous tensor"
    );
    // SAFETY: the caller's promise.
    unsafe { std::slice::from_raw_parts_mut(t.addr().0 as *mut T, t.numel()) }
}

/// Runs `$body` with `$T` bound to the Rust type of float dtype `$dtype`.
macro_rules! with_float {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            DType::F32 => {
                type $T = f32;
                $body
            }
            DType::F64 => {
                type $T = f64;
                $body
            }
            other => Err(TensorError::Unsupported(format!(
                "host kernels need f32 or f64, not {other}"
            ))),
        }
    };
}

#[inline]
fn apply<T: Float>(op: BinaryOp, x: T, y: T) -> T {
    match op {
        BinaryOp::Add => x + y,
        BinaryOp::Sub => x - y,
        BinaryOp::Mul => x * y,
        BinaryOp::Div => x / y,
        BinaryOp::Right => y,
    }
}

/// `out = a op b` following a broadcast plan (which holds the operands' strides: they
/// may be views). `out` is contiguous; it may be `a` itself (in place), in which case
/// `a` is contiguous too.
///
/// # Safety
/// See the module documentation; `out` may alias `a` only element for element.
pub(crate) unsafe fn binary(
    op: BinaryOp,
    plan: &Broadcast,
    out: &Tensor,
    a: &Tensor,
    b: &Tensor,
) -> Result<(), TensorError> {
    debug_assert!(out.is_contiguous());
    with_float!(out.dtype(), T => {
        let (o, pa, pb) = (out.addr().0 as *mut T, a.addr().0 as *const T, b.addr().0 as *const T);
        let total = out.numel();
        if total == 0 {
            return Ok(());
        }
        // `expand` (Right) never reads `a`: it may be the uninitialised output itself.
        let read_a = op != BinaryOp::Right;
        let at = |p: *const T, i: usize| if read_a {
            // SAFETY: the caller keeps every offset of the plan inside `a`.
            unsafe { *p.add(i) }
        } else {
            T::ZERO
        };
        if plan.is_elementwise() {
            for i in 0..total {
                // SAFETY: i < numel of all three (same shape).
                unsafe { *o.add(i) = apply::<T>(op, at(pa, i), *pb.add(i)) };
            }
            return Ok(());
        }
        let nd = plan.dims.len();
        let inner = plan.dims[nd - 1];
        let (ia, ib) = (plan.sa[nd - 1], plan.sb[nd - 1]);
        let mut idx = vec![0usize; nd];
        let (mut offa, mut offb) = (0usize, 0usize);
        let mut written = 0;
        while written < total {
            for j in 0..inner {
                // SAFETY: the plan keeps every offset inside its operand.
                unsafe { *o.add(written + j) = apply::<T>(op, at(pa, offa + j * ia), *pb.add(offb + j * ib)) };
            }
            written += inner;
            // Advance the outer dimensions like an odometer.
            let mut d = nd - 1;
            while d > 0 {
                d -= 1;
                idx[d] += 1;
                offa += plan.sa[d];
                offb += plan.sb[d];
                if idx[d] < plan.dims[d] {
                    break;
                }
                offa -= plan.sa[d] * plan.dims[d];
                offb -= plan.sb[d] * plan.dims[d];
                idx[d] = 0;
            }
        }
        Ok(())
    })
}

/// `out = a op s` (`op`: add or mul), or `out = s` for `Right`. `out` may be `a`.
///
/// # Safety
/// See the module documentation.
pub(crate) unsafe fn scalar(
    op: BinaryOp,
    out: &Tensor,
    a: &Tensor,
    s: f64,
) -> Result<(), TensorError> {
    debug_assert!(out.is_contiguous() && a.is_contiguous());
    with_float!(out.dtype(), T => {
        let (o, pa) = (out.addr().0 as *mut T, a.addr().0 as *const T);
        let s = T::of(s);
        for i in 0..out.numel() {
            // SAFETY: same length; element-for-element aliasing only. A fill never reads
            // `a` (it may be the uninitialised output).
            unsafe { *o.add(i) = if op == BinaryOp::Right { s } else { apply::<T>(op, *pa.add(i), s) } };
        }
        Ok(())
    })
}

/// `y += alpha * x`.
///
/// # Safety
/// See the module documentation; `x` does not overlap `y`.
pub(crate) unsafe fn axpy(y: &Tensor, x: &Tensor, alpha: f64) -> Result<(), TensorError> {
    with_float!(y.dtype(), T => {
        // SAFETY: distinct host tensors of the same length and type.
        let (y, x) = unsafe { (slice_mut::<T>(y), slice::<T>(x)) };
        let alpha = T::of(alpha);
        for (y, x) in y.iter_mut().zip(x) {
            *y += alpha * *x;
        }
        Ok(())
    })
}

const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
const GELU_C: f64 = 0.044_715;

#[inline]
fn gelu<T: Float>(x: T) -> T {
    let inner = T::of(SQRT_2_OVER_PI) * (x + T::of(GELU_C) * x * x * x);
    T::of(0.5) * x * (T::ONE + inner.tanh())
}

/// `1/√2` and `1/√(2π)`.
const FRAC_1_SQRT_2: f64 = std::f64::consts::FRAC_1_SQRT_2;
const FRAC_1_SQRT_2PI: f64 = 0.398_942_280_401_432_7;

/// Exact GELU: `x·Φ(x)`.
#[inline]
pub(crate) fn gelu_erf<T: Float>(x: T) -> T {
    T::of(0.5) * x * (T::ONE + (x * T::of(FRAC_1_SQRT_2)).erf())
}

/// `d/dx x·Φ(x) = Φ(x) + x·φ(x)`.
#[inline]
pub(crate) fn gelu_erf_grad<T: Float>(x: T) -> T {
    let cdf = T::of(0.5) * (T::ONE + (x * T::of(FRAC_1_SQRT_2)).erf());
    let pdf = (T::of(-0.5) * x * x).exp() * T::of(FRAC_1_SQRT_2PI);
    cdf + x * pdf
}

#[inline]
fn gelu_grad<T: Float>(x: T) -> T {
    let inner = T::of(SQRT_2_OVER_PI) * (x + T::of(GELU_C) * x * x * x);
    let t = inner.tanh();
    let dinner = T::of(SQRT_2_OVER_PI) * (T::ONE + T::of(3.0 * GELU_C) * x * x);
    T::of(0.5) * (T::ONE + t) + T::of(0.5) * x * (T::ONE - t * t) * dinner
}

/// `out = op(a)`.
///
/// # Safety
/// See the module documentation.
pub(crate) unsafe fn unary(op: UnaryOp, out: &Tensor, a: &Tensor) -> Result<(), TensorError> {
    with_float!(out.dtype(), T => {
        // SAFETY: a fresh output and its input.
        let (o, a) = unsafe { (slice_mut::<T>(out), slice::<T>(a)) };
        for (o, &x) in o.iter_mut().zip(a) {
            *o = match op {
                UnaryOp::Neg => -x,
                UnaryOp::Relu => if x > T::ZERO { x } else { T::ZERO },
                UnaryOp::Gelu => gelu(x),
                UnaryOp::GeluErf => gelu_erf(x),
                UnaryOp::Exp => x.exp(),
                UnaryOp::Log => x.ln(),
                UnaryOp::Sqrt => x.sqrt(),
            };
        }
        Ok(())
    })
}

/// `out = g * op'(x)`, `x` being the operation's input.
///
/// # Safety
/// See the module documentation.
pub(crate) unsafe fn unary_backward(
    op: UnaryOp,
    out: &Tensor,
    g: &Tensor,
    x: &Tensor,
) -> Result<(), TensorError> {
    with_float!(out.dtype(), T => {
        // SAFETY: a fresh output and its inputs.
        let (o, g, x) = unsafe { (slice_mut::<T>(out), slice::<T>(g), slice::<T>(x)) };
        for ((o, &g), &x) in o.iter_mut().zip(g).zip(x) {
            *o = match op {
                UnaryOp::Relu => if x > T::ZERO { g } else { T::ZERO },
                UnaryOp::Gelu => g * gelu_grad(x),
                UnaryOp::GeluErf => g * gelu_erf_grad(x),
                UnaryOp::Log => g / x,
                UnaryOp::Sqrt => g / (T::of(2.0) * x.sqrt()),
                UnaryOp::Neg => -g,
                UnaryOp::Exp => g * x.exp(),
            };
        }
        Ok(())
    })
}

/// `out[o, i] = scale * Σ_l a[o, l, i]` for `a` viewed as `[outer, len, inner]`.
///
/// # Safety
/// See the module documentation.
pub(crate) unsafe fn reduce(
    out: &Tensor,
    a: &Tensor,
    outer: usize,
    len: usize,
    inner: usize,
    scale: f64,
) -> Result<(), TensorError> {
    with_float!(out.dtype(), T => {
        // SAFETY: a fresh output and its input.
        let (o, a) = unsafe { (slice_mut::<T>(out), slice::<T>(a)) };
        if inner == 1 {
            for (r, o) in o.iter_mut().enumerate().take(outer) {
                // Accumulate rows in f64: sums of many f32 values stay accurate.
                let s: f64 = a[r * len..(r + 1) * len].iter().map(|v| v.to_f64()).sum();
                *o = T::of(s * scale);
            }
        } else {
            o.fill(T::ZERO);
            for r in 0..outer {
                let dst = &mut o[r * inner..(r + 1) * inner];
                for l in 0..len {
                    let src = &a[(r * len + l) * inner..(r * len + l + 1) * inner];
                    for (d, s) in dst.iter_mut().zip(src) {
                        *d += *s;
                    }
                }
                let sc = T::of(scale);
                for d in dst.iter_mut() {
                    *d *= sc;
                }
            }
        }
        Ok(())
    })
}

/// Row-wise softmax (or log-softmax) of `a` viewed as `[rows, cols]`.
///
/// # Safety
/// See the module documentation.
pub(crate) unsafe fn softmax(
    out: &Tensor,
    a: &Tensor,
    cols: usize,
    log: bool,
) -> Result<(), TensorError> {
    with_float!(out.dtype(), T => {
        // SAFETY: a fresh output and its input.
        let (o, a) = unsafe { (slice_mut::<T>(out), slice::<T>(a)) };
        if cols == 0 {
            return Ok(());
        }
        for (orow, arow) in o.chunks_exact_mut(cols).zip(a.chunks_exact(cols)) {
            let mut max = arow[0];
            for &x in arow {
                if x > max || x.is_nan() {
                    max = x;
                }
            }
            let mut sum = T::ZERO;
            for (o, &x) in orow.iter_mut().zip(arow) {
                let e = (x - max).exp();
                *o = e;
                sum += e;
            }
            if log {
                let lse = sum.ln();
                for (o, &x) in orow.iter_mut().zip(arow) {
                    *o = x - max - lse;
                }
            } else {
                for o in orow.iter_mut() {
                    *o /= sum;
                }
            }
        }
        Ok(())
    })
}

/// Backward of row-wise softmax given its output `y`: `y * (g - Σ g y)`; of
/// log-softmax: `g - exp(y) * Σ g`.
///
/// # Safety
/// See the module documentation.
pub(crate) unsafe fn softmax_backward(
    out: &Tensor,
    g: &Tensor,
    y: &Tensor,
    cols: usize,
    log: bool,
) -> Result<(), TensorError> {
    with_float!(out.dtype(), T => {
        // SAFETY: a fresh output and its inputs.
        let (o, g, y) = unsafe { (slice_mut::<T>(out), slice::<T>(g), slice::<T>(y)) };
        if cols == 0 {
            return Ok(());
        }
        for ((orow, grow), yrow) in o.chunks_exact_mut(cols).zip(g.chunks_exact(cols)).zip(y.chunks_exact(cols)) {
            if log {
                let mut s = T::ZERO;
                for &gv in grow {
                    s += gv;
                }
                for ((o, &gv), &yv) in orow.iter_mut().zip(grow).zip(yrow) {
                    *o = gv - yv.exp() * s;
                }
            } else {
                let mut s = T::ZERO;
                for (&gv, &yv) in grow.iter().zip(yrow) {
                    s += gv * yv;
                }
                for ((o, &gv), &yv) in orow.iter_mut().zip(grow).zip(yrow) {
                    *o = yv * (gv - s);
                }
            }
        }
        Ok(())
    })
}

/// `c = A @ B` for the `m×k` matrix `A` whose element `(i, l)` is at
/// `a.addr() + i·rsa + l·csa` elements, `B` (`k×n`) likewise, and `c` a fresh
/// contiguous `m×n` tensor. Any strides: views (transposed, narrowed) are read in place.
///
/// # Safety
/// See the module documentation; the strides keep every element inside its tensor.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn matmul(
    c: &Tensor,
    a: &Tensor,
    (rsa, csa): (usize, usize),
    b: &Tensor,
    (rsb, csb): (usize, usize),
    m: usize,
    k: usize,
    n: usize,
) -> Result<(), TensorError> {
    debug_assert!(c.is_contiguous());
    with_float!(c.dtype(), T => {
        // SAFETY: the shapes were checked against m, k, n and the strides are the
        // operands' own; c is a fresh m×n tensor.
        unsafe {
            T::GEMM(
                m,
                k,
                n,
                T::ONE,
                a.addr().0 as *const T,
                rsa as isize,
                csa as isize,
                b.addr().0 as *const T,
                rsb as isize,
                csb as isize,
                T::ZERO,
                c.addr().0 as *mut T,
                n as isize,
                1,
            )
        };
        Ok(())
    })
}

mod copy;
mod loss;
pub(crate) mod nn;
mod optim;

pub(crate) use copy::strided_copy;
pub(crate) use loss::{nll, nll_backward, targets};
pub(crate) use optim::adamw;
