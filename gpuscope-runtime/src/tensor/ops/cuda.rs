//! CUDA launches: the kernels of [`crate::tensor::kernels`] and cuBLAS, each on the stream of
//! the tensor it writes, every result checked and returned as a [`TensorError`].
//!
//! Pointers go to kernels as 64-bit integers (the `CUdeviceptr` values); sizes as
//! 64-bit integers. Callers have checked shapes, dtypes and devices.

use std::os::raw::c_int;
use std::sync::Arc;

use cudarc::cublas::sys::cublasOperation_t;
use cudarc::driver::{CudaStream, LaunchArgs, LaunchConfig, PushKernelArg};

use crate::backend::BackendError;
use crate::backend::cuda::CudaBackend;
use crate::tensor::kernels::{Kernels, blas_for, kernels_for};

use super::broadcast::Broadcast;
use super::elementwise::{BinaryOp, UnaryOp};
use super::{DType, Site, Tensor, TensorError, alloc_like};

const BLOCK: u32 = 256;
/// Enough blocks to fill any current GPU; kernels loop over the rest.
const MAX_BLOCKS: u64 = 65_535;

/// The stream and the loaded kernels for work that writes `t`.
struct Target {
    stream: Arc<CudaStream>,
    kernels: Arc<Kernels>,
    suffix: &'static str,
}

fn target(t: &Tensor) -> Result<Target, TensorError> {
    let backend = t.device().backend();
    let cuda = backend
        .as_any()
        .downcast_ref::<CudaBackend>()
        .ok_or_else(|| {
            TensorError::Unsupported(format!(
                "a CUDA kernel for a tensor on {}",
                t.device().description()
            ))
        })?;
    let suffix = match t.dtype() {
        DType::F32 => "f32",
        DType::F64 => "f64",
        other => {
            return Err(TensorError::Unsupported(format!(
                "CUDA kernels take f32 or f64, not {other}"
            )));
        }
    };
    Ok(Target {
        stream: cuda.cuda_stream(t.stream())?,
        kernels: kernels_for(cuda.context())?,
        suffix,
    })
}

fn elementwise_cfg(n: u64) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(BLOCK as u64).clamp(1, MAX_BLOCKS) as u32, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn rows_cfg(rows: u64) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (rows.clamp(1, MAX_BLOCKS) as u32, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A float scalar argument in the kernel's element type.
enum Scalar {
    F32(f32),
    F64(f64),
}

impl Scalar {
    fn new(dtype: DType, v: f64) -> Scalar {
        if dtype == DType::F32 {
            Scalar::F32(v as f32)
        } else {
            Scalar::F64(v)
        }
    }

    fn push<'a>(&'a self, b: &mut LaunchArgs<'a>) {
        match self {
            Scalar::F32(v) => b.arg(v),
            Scalar::F64(v) => b.arg(v),
        };
    }
}

fn ptr(t: &Tensor) -> u64 {
    t.addr().0
}

/// Launches kernel `$name` of `$target`'s type with the arguments `$body` pushes onto
/// the launch builder `$l`. (A macro: the arguments are references to the caller's
/// locals, which outlive the builder.)
macro_rules! launch {
    ($target:expr, $name:expr, $cfg:expr, |$l:ident| $body:block) => {{
        let full = format!("{}_{}", $name, $target.suffix);
        let f = $target.kernels.function(&full)?;
        let mut builder = $target.stream.launch_builder(&f);
        {
            let $l = &mut builder;
            $body
        }
        // SAFETY: the arguments match the kernel's parameters (see kernels/ops.cu), the
        // pointers are live tensors of the right sizes, and the work is ordered on the
        // stream of the tensor it writes.
        unsafe { builder.launch($cfg) }.map_err(|e| BackendError::Driver {
            call: "cuLaunchKernel",
            message: format!("{full}: {e:?}"),
        })?;
        Ok::<(), TensorError>(())
    }};
}

pub(crate) fn binary(
    op: BinaryOp,
    plan: &Broadcast,
    out: &Tensor,
    a: &Tensor,
    b: &Tensor,
) -> Result<(), TensorError> {
    let n = out.numel() as u64;
    if n == 0 {
        return Ok(());
    }
    let (d, sa, sb) = plan.padded().ok_or_else(|| {
        TensorError::Unsupported(format!(
            "broadcasting {:?} with {:?} needs more than 4 merged dimensions on CUDA",
            a.shape(),
            b.shape()
        ))
    })?;
    let t = target(out)?;
    let (code, o, pa, pb) = (op.code(), ptr(out), ptr(a), ptr(b));
    launch!(t, "binary", elementwise_cfg(n), |l| {
        l.arg(&code).arg(&n).arg(&o).arg(&pa).arg(&pb);
        l.arg(&d[1]).arg(&d[2]).arg(&d[3]);
        l.arg(&sa[0]).arg(&sa[1]).arg(&sa[2]).arg(&sa[3]);
        l.arg(&sb[0]).arg(&sb[1]).arg(&sb[2]).arg(&sb[3]);
    })
}

pub(crate) fn scalar(op: BinaryOp, out: &Tensor, a: &Tensor, s: f64) -> Result<(), TensorError> {
    let n = out.numel() as u64;
    if n == 0 {
        return Ok(());
    }
    let t = target(out)?;
    let (code, o, pa, s) = (op.code(), ptr(out), ptr(a), Scalar::new(out.dtype(), s));
    launch!(t, "scalar", elementwise_cfg(n), |l| {
        l.arg(&code).arg(&n).arg(&o).arg(&pa);
        s.push(l);
    })
}

pub(crate) fn axpy(y: &Tensor, x: &Tensor, alpha: f64) -> Result<(), TensorError> {
    let n = y.numel() as u64;
    if n == 0 {
        return Ok(());
    }
    let t = target(y)?;
    let (py, px, alpha) = (ptr(y), ptr(x), Scalar::new(y.dtype(), alpha));
    launch!(t, "axpy", elementwise_cfg(n), |l| {
        l.arg(&n).arg(&py).arg(&px);
        alpha.push(l);
    })
}

pub(crate) fn unary(op: UnaryOp, out: &Tensor, a: &Tensor) -> Result<(), TensorError> {
    let n = out.numel() as u64;
    if n == 0 {
        return Ok(());
    }
    let t = target(out)?;
    let (code, o, pa) = (op.code(), ptr(out), ptr(a));
    launch!(t, "unary", elementwise_cfg(n), |l| {
        l.arg(&code).arg(&n).arg(&o).arg(&pa);
    })
}

pub(crate) fn unary_backward(
    op: UnaryOp,
    out: &Tensor,
    g: &Tensor,
    x: &Tensor,
) -> Result<(), TensorError> {
    let n = out.numel() as u64;
    if n == 0 {
        return Ok(());
    }
    let t = target(out)?;
    let (code, o, pg, px) = (op.code(), ptr(out), ptr(g), ptr(x));
    launch!(t, "unary_backward", elementwise_cfg(n), |l| {
        l.arg(&code).arg(&n).arg(&o).arg(&pg).arg(&px);
    })
}

pub(crate) fn reduce(
    out: &Tensor,
    a: &Tensor,
    outer: usize,
    len: usize,
    inner: usize,
    scale: f64,
) -> Result<(), TensorError> {
    let t = target(out)?;
    let (o, pa, scale) = (ptr(out), ptr(a), Scalar::new(out.dtype(), scale));
    let (outer, len, inner) = (outer as u64, len as u64, inner as u64);
    if outer * inner == 0 {
        return Ok(());
    }
    if inner == 1 {
        launch!(t, "reduce_rows", rows_cfg(outer), |l| {
            l.arg(&outer).arg(&len).arg(&o).arg(&pa);
            scale.push(l);
        })
    } else {
        launch!(t, "reduce_cols", elementwise_cfg(outer * inner), |l| {
            l.arg(&outer).arg(&len).arg(&inner).arg(&o).arg(&pa);
            scale.push(l);
        })
    }
}

pub(crate) fn softmax(out: &Tensor, a: &Tensor, cols: usize, log: bool) -> Result<(), TensorError> {
    if cols == 0 || out.numel() == 0 {
        return Ok(());
    }
    let t = target(out)?;
    let rows = (out.numel() / cols) as u64;
    let (cols, o, pa, log) = (cols as u64, ptr(out), ptr(a), log as i32);
    launch!(t, "softmax", rows_cfg(rows), |l| {
        l.arg(&rows).arg(&cols).arg(&o).arg(&pa).arg(&log);
    })
}

pub(crate) fn softmax_backward(
    out: &Tensor,
    g: &Tensor,
    y: &Tensor,
    cols: usize,
    log: bool,
) -> Result<(), TensorError> {
    if cols == 0 || out.numel() == 0 {
        return Ok(());
    }
    let t = target(out)?;
    let rows = (out.numel() / cols) as u64;
    let (cols, o, pg, py, log) = (cols as u64, ptr(out), ptr(g), ptr(y), log as i32);
    launch!(t, "softmax_backward", rows_cfg(rows), |l| {
        l.arg(&rows).arg(&cols).arg(&o).arg(&pg).arg(&py).arg(&log);
    })
}

/// `out = -mean_i logp[i, t_i]`: per-row values into a temporary, then their mean
/// (both on `out`'s stream, so the temporary's memory is reused only after).
pub(crate) fn nll(
    out: &Tensor,
    logp: &Tensor,
    targets: &Tensor,
    rows: usize,
    cols: usize,
    site: Site,
) -> Result<(), TensorError> {
    if rows == 0 {
        return scalar(BinaryOp::Right, out, out, f64::NAN);
    }
    let per_row = alloc_like(&[rows], logp.dtype(), logp, site)?;
    let t = target(out)?;
    let is64 = (targets.dtype() == DType::I64) as i32;
    let (r, c, pr, pl, pt) = (
        rows as u64,
        cols as u64,
        ptr(&per_row),
        ptr(logp),
        ptr(targets),
    );
    launch!(t, "nll_rows", elementwise_cfg(r), |l| {
        l.arg(&r).arg(&c).arg(&pr).arg(&pl).arg(&pt).arg(&is64);
    })?;
    reduce(out, &per_row, 1, rows, 1, 1.0 / rows as f64)
}

pub(crate) fn nll_backward(
    out: &Tensor,
    g: &Tensor,
    targets: &Tensor,
    rows: usize,
    cols: usize,
) -> Result<(), TensorError> {
    let n = (rows * cols) as u64;
    if n == 0 {
        return Ok(());
    }
    let t = target(out)?;
    let is64 = (targets.dtype() == DType::I64) as i32;
    let scale = Scalar::new(out.dtype(), 1.0 / rows as f64);
    let (r, c, o, pt, pg) = (rows as u64, cols as u64, ptr(out), ptr(targets), ptr(g));
    launch!(t, "nll_backward", elementwise_cfg(n), |l| {
        l.arg(&r).arg(&c).arg(&o).arg(&pt).arg(&is64).arg(&pg);
        scale.push(l);
    })
}

pub(crate) fn transpose(out: &Tensor, a: &Tensor, r: usize, c: usize) -> Result<(), TensorError> {
    let n = (r * c) as u64;
    if n == 0 {
        return Ok(());
    }
    let t = target(out)?;
    let (r, c, o, pa) = (r as u64, c as u64, ptr(out), ptr(a));
    launch!(t, "transpose", elementwise_cfg(n), |l| {
        l.arg(&r).arg(&c).arg(&o).arg(&pa);
    })
}

pub(crate) fn adamw(
    p: &Tensor,
    g: &Tensor,
    m: &Tensor,
    v: &Tensor,
    h: super::AdamWStep,
) -> Result<(), TensorError> {
    let super::AdamWStep {
        lr,
        beta1,
        beta2,
        eps,
        weight_decay,
        bias1,
        bias2,
    } = h;
    let n = p.numel() as u64;
    if n == 0 {
        return Ok(());
    }
    let t = target(p)?;
    let d = p.dtype();
    let args = [
        Scalar::new(d, 1.0 - lr * weight_decay),
        Scalar::new(d, lr / bias1),
        Scalar::new(d, beta1),
        Scalar::new(d, beta2),
        Scalar::new(d, bias2.sqrt()),
        Scalar::new(d, eps),
    ];
    let (pp, pg, pm, pv) = (ptr(p), ptr(g), ptr(m), ptr(v));
    launch!(t, "adamw", elementwise_cfg(n), |l| {
        l.arg(&n).arg(&pp).arg(&pg).arg(&pm).arg(&pv);
        for a in &args {
            a.push(l);
        }
    })
}

fn gemm_dim(v: usize) -> Result<c_int, TensorError> {
    c_int::try_from(v).map_err(|_| {
        TensorError::Unsupported(format!(
            "matmul dimension {v} exceeds cuBLAS's 32-bit sizes"
        ))
    })
}

/// `c = op(a) @ op(b)` through cuBLAS on `c`'s stream. cuBLAS is column-major: a
/// row-major `[r, c]` array is its `c×r` transpose, so `Cᵀ = op(B)ᵀ op(A)ᵀ` is computed
/// with the operands swapped.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul(
    c: &Tensor,
    a: &Tensor,
    b: &Tensor,
    m: usize,
    k: usize,
    n: usize,
    ta: bool,
    tb: bool,
) -> Result<(), TensorError> {
    if k == 0 {
        // An empty sum: zeros (cuBLAS would leave C untouched).
        // SAFETY: `c`'s own storage, on its stream.
        unsafe {
            c.device()
                .backend()
                .memset(c.addr(), 0, c.nbytes(), c.stream())?
        };
        return Ok(());
    }
    let backend = c.device().backend();
    let cuda = backend
        .as_any()
        .downcast_ref::<CudaBackend>()
        .ok_or_else(|| {
            TensorError::Unsupported("cuBLAS matmul of a tensor that is not on CUDA".into())
        })?;
    let stream = cuda.cuda_stream(c.stream())?;
    let blas = blas_for(&stream, c.stream().0)?;
    cuda.context()
        .bind_to_thread()
        .map_err(|e| BackendError::Driver {
            call: "cuCtxSetCurrent",
            message: format!("{e:?}"),
        })?;
    let op = |t: bool| {
        if t {
            cublasOperation_t::CUBLAS_OP_T
        } else {
            cublasOperation_t::CUBLAS_OP_N
        }
    };
    let (mm, nn, kk) = (gemm_dim(m)?, gemm_dim(n)?, gemm_dim(k)?);
    let ldb = if tb { kk } else { nn };
    let lda = if ta { mm } else { kk };
    let handle = *blas.handle();
    let fail = |e: cudarc::cublas::result::CublasError| BackendError::Driver {
        call: "cublasGemm",
        message: format!("{e:?} (m={m}, k={k}, n={n}, transposed: {ta}, {tb})"),
    };
    // SAFETY: the pointers are live tensors holding op(A) m×k, op(B) k×n and C m×n of
    // the dtype matched below; the handle's stream is `c`'s.
    unsafe {
        match c.dtype() {
            DType::F32 => {
                let (alpha, beta) = (1.0f32, 0.0f32);
                cudarc::cublas::result::sgemm(
                    handle,
                    op(tb),
                    op(ta),
                    nn,
                    mm,
                    kk,
                    &alpha,
                    ptr(b) as *const f32,
                    ldb,
                    ptr(a) as *const f32,
                    lda,
                    &beta,
                    ptr(c) as *mut f32,
                    nn,
                )
                .map_err(fail)?
            }
            DType::F64 => {
                let (alpha, beta) = (1.0f64, 0.0f64);
                cudarc::cublas::result::dgemm(
                    handle,
                    op(tb),
                    op(ta),
                    nn,
                    mm,
                    kk,
                    &alpha,
                    ptr(b) as *const f64,
                    ldb,
                    ptr(a) as *const f64,
                    lda,
                    &beta,
                    ptr(c) as *mut f64,
                    nn,
                )
                .map_err(fail)?
            }
            other => {
                return Err(TensorError::Unsupported(format!(
                    "cuBLAS matmul takes f32 or f64, not {other}"
                )));
            }
        }
    }
    Ok(())
}
