//! CUDA launches: the kernels of [`crate::kernels`] and cuBLAS, each on the stream of
//! the tensor it writes, every result checked and returned as a [`TensorError`].
//!
//! Pointers go to kernels as 64-bit integers (the `CUdeviceptr` values, the storage
//! offset of a view included); sizes as 64-bit integers. Callers have checked shapes,
//! dtypes and devices, and pass contiguous tensors except where a launch takes strides
//! (`binary`'s operands, `matmul`'s, `strided_copy`).

use std::sync::Arc;

use cudarc::driver::{CudaStream, DeviceRepr, LaunchArgs, LaunchConfig, PushKernelArg};

use crate::backend::BackendError;
use crate::backend::cuda::CudaBackend;
use crate::kernels::{Kernels, kernels_for};

use super::broadcast::Broadcast;
use super::elementwise::{BinaryOp, UnaryOp};
use super::strided::CopyPlan;
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

/// The target for float kernels (`_f32`/`_f64`) writing `t`.
fn target(t: &Tensor) -> Result<Target, TensorError> {
    let suffix = match t.dtype() {
        DType::F32 => "f32",
        DType::F64 => "f64",
        other => {
            return Err(TensorError::Unsupported(format!(
                "CUDA kernels take f32 or f64, not {other}"
            )));
        }
    };
    target_with(t, suffix)
}

/// The target for the strided copy of `t`'s elements, any dtype: the kernel for words
/// of its element size (`_u8`, `_u16`, `_u32`, `_u64`).
fn copy_target(t: &Tensor) -> Result<Target, TensorError> {
    let suffix = match t.dtype().size() {
        1 => "u8",
        2 => "u16",
        4 => "u32",
        8 => "u64",
        other => {
            return Err(TensorError::Unsupported(format!(
                "strided copy of {other}-byte elements on CUDA"
            )));
        }
    };
    target_with(t, suffix)
}

/// The CUDA backend of `t`'s device.
fn cuda_of(t: &Tensor) -> Result<&CudaBackend, TensorError> {
    t.device()
        .backend()
        .as_any()
        .downcast_ref::<CudaBackend>()
        .ok_or_else(|| {
            TensorError::Unsupported(format!(
                "a CUDA kernel for a tensor on {}",
                t.device().description()
            ))
        })
}

fn target_with(t: &Tensor, suffix: &'static str) -> Result<Target, TensorError> {
    let cuda = cuda_of(t)?;
    Ok(Target {
        stream: cuda.cuda_stream(t.stream())?,
        kernels: kernels_for(cuda.context())?,
        suffix,
    })
}

/// The target for the float32 kernels of `vec4.cu` writing `t` (no suffix), when `t`
/// and `others` are f32, 16-byte aligned, `row` (the length a kernel takes the column
/// from) is a multiple of 4 and `t`'s element count a multiple of 4 that fits in 32 bits.
fn vec4_target(t: &Tensor, others: &[&Tensor], row: usize) -> Result<Option<Target>, TensorError> {
    let ok = t.dtype() == DType::F32
        && row % 4 == 0
        && t.numel() % 4 == 0
        && t.numel() / 4 <= u32::MAX as usize
        && std::iter::once(t)
            .chain(others.iter().copied())
            .all(|x| x.dtype() == DType::F32 && ptr(x) % 16 == 0);
    if !ok {
        return Ok(None);
    }
    target_with(t, "").map(Some)
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
        let full = if $target.suffix.is_empty() {
            $name.to_string()
        } else {
            format!("{}_{}", $name, $target.suffix)
        };
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
    if plan.is_elementwise()
        && let Some(t) = vec4_target(out, &[a, b], 4)?
    {
        let n4 = (n / 4) as u32;
        let (code, o, pa, pb) = (op.code(), ptr(out), ptr(a), ptr(b));
        return launch!(t, "binary_flat4", elementwise_cfg(n4 as u64), |l| {
            l.arg(&code).arg(&n4).arg(&o).arg(&pa).arg(&pb);
        });
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

/// The losses whose kernels check their targets on the device and report a bad one in
/// the device's error record (`CudaBackend::error_record_ptr`); the record's code is the
/// loss's number, plus [`BACKWARD`] when the backward step found it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum LossOp {
    CrossEntropy = 1,
    NllLoss = 2,
}

impl LossOp {
    pub(crate) fn of(op: &'static str) -> LossOp {
        if op == "cross_entropy" {
            LossOp::CrossEntropy
        } else {
            LossOp::NllLoss
        }
    }

    fn name(self) -> &'static str {
        match self {
            LossOp::CrossEntropy => "cross_entropy",
            LossOp::NllLoss => "nll_loss",
        }
    }
}

/// Added to a [`LossOp`]'s code by its backward kernel.
const BACKWARD: u32 = 0x100;

/// After a read-back from `cuda` has waited for it: the error a kernel recorded there
/// since the last check, as a [`TensorError::InvalidArgument`] (and cleared). One load of
/// host memory when there is none.
pub(crate) fn check_device_side(cuda: &CudaBackend, device: &str) -> Result<(), TensorError> {
    let Some(e) = cuda.take_device_side_error() else {
        return Ok(());
    };
    if e.code == nn::EMBEDDING_CODE {
        return Err(TensorError::InvalidArgument {
            op: "embedding",
            reason: format!(
                "index {} at position {} is out of range for a table of {} rows (found on \
                 {device} by the lookup kernel, which made that row NaN; reported at this \
                 read-back, the first from the device since; other positions may be out of \
                 range too) — indices must be in 0..{}: check the tokens against the \
                 vocabulary size",
                e.value, e.row, e.limit, e.limit
            ),
        });
    }
    let op = [LossOp::CrossEntropy, LossOp::NllLoss]
        .into_iter()
        .find(|op| *op as u32 == e.code & !BACKWARD);
    let Some(op) = op else {
        return Err(TensorError::InvalidArgument {
            op: "cuda kernel",
            reason: format!(
                "a kernel on {device} reported error code {:#x} (row {}, value {}, limit {}), \
                 which this version of gpuscope does not know",
                e.code, e.row, e.value, e.limit
            ),
        });
    };
    let (row, target, classes) = (e.row, e.value, e.limit);
    let found = if e.code & BACKWARD != 0 {
        format!("by the backward step, which gave row {row} a zero gradient")
    } else {
        format!("by the loss kernel: that loss is NaN, and row {row}'s gradient zero")
    };
    Err(TensorError::InvalidArgument {
        op: op.name(),
        reason: format!(
            "target {target} at row {row} is out of range for {classes} classes (found on \
             {device} {found}; reported at this read-back, the first from the device since; \
             other rows may be out of range too) — targets must be class indices in \
             0..{classes}: check the batch's labels and the number of classes"
        ),
    })
}

/// `out = -mean_i logp[i, t_i]`: per-row values into a temporary, then their mean
/// (both on `out`'s stream, so the temporary's memory is reused only after). A target
/// out of range makes its row NaN and is reported in the device's error record.
pub(crate) fn nll(
    op: LossOp,
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
    let err = cuda_of(out)?.error_record_ptr()?;
    let per_row = alloc_like(&[rows], logp.dtype(), logp, site)?;
    let t = target(out)?;
    let is64 = (targets.dtype() == DType::I64) as i32;
    let (r, c, pr, pl, pt, code) = (
        rows as u64,
        cols as u64,
        ptr(&per_row),
        ptr(logp),
        ptr(targets),
        op as u32,
    );
    launch!(t, "nll_rows", elementwise_cfg(r), |l| {
        l.arg(&r).arg(&c).arg(&pr).arg(&pl).arg(&pt).arg(&is64);
        l.arg(&err).arg(&code);
    })?;
    reduce(out, &per_row, 1, rows, 1, 1.0 / rows as f64)
}

/// Backward of [`nll`]: a row whose target is out of range gets zeros (and is reported
/// in the device's error record).
pub(crate) fn nll_backward(
    op: LossOp,
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
    let err = cuda_of(out)?.error_record_ptr()?;
    let t = target(out)?;
    let is64 = (targets.dtype() == DType::I64) as i32;
    let scale = Scalar::new(out.dtype(), 1.0 / rows as f64);
    let (r, c, o, pt, pg) = (rows as u64, cols as u64, ptr(out), ptr(targets), ptr(g));
    let code = op as u32 | BACKWARD;
    launch!(t, "nll_backward", elementwise_cfg(n), |l| {
        l.arg(&r).arg(&c).arg(&o).arg(&pt).arg(&is64).arg(&pg);
        scale.push(l);
        l.arg(&err).arg(&code);
    })
}

/// Most merged dimensions one launch of the strided copy kernel takes (`GS_COPY_DIMS`
/// in `kernels/copy.cu`).
const COPY_DIMS: usize = 8;

/// The merged dimensions of a copy and both layouts' strides, innermost first (the
/// kernel's `gs_copy_layout`, passed by value).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct CopyLayout {
    dims: [i64; COPY_DIMS],
    dst: [i64; COPY_DIMS],
    src: [i64; COPY_DIMS],
}

// SAFETY: `#[repr(C)]` of 64-bit integers, the same layout as the kernel's struct
// (three arrays of `long long`, no padding).
unsafe impl DeviceRepr for CopyLayout {}

/// `dst = src` element for element following `plan`, any dtype, on `dst`'s stream.
/// The innermost [`COPY_DIMS`] merged dimensions go to one launch; a plan with more
/// (a permutation of many dimensions) launches once per index of the outer ones.
pub(crate) fn strided_copy(dst: &Tensor, src: &Tensor, plan: &CopyPlan) -> Result<(), TensorError> {
    if dst.numel() == 0 {
        return Ok(());
    }
    let nd = plan.dims.len();
    let inner = nd.min(COPY_DIMS);
    let outer = nd - inner;
    let mut layout = CopyLayout {
        dims: [1; COPY_DIMS],
        dst: [0; COPY_DIMS],
        src: [0; COPY_DIMS],
    };
    for (k, i) in (outer..nd).rev().enumerate() {
        layout.dims[k] = plan.dims[i] as i64;
        layout.dst[k] = plan.dst[i] as i64;
        layout.src[k] = plan.src[i] as i64;
    }
    let n: u64 = plan.dims[outer..].iter().map(|&d| d as u64).product();
    let t = copy_target(dst)?;
    let size = dst.dtype().size() as u64;
    let ndim = inner as i32;
    // The outer dimensions, walked like an odometer (none: a single launch).
    let mut idx = vec![0usize; outer];
    loop {
        let od: usize = (0..outer).map(|d| idx[d] * plan.dst[d]).sum();
        let os: usize = (0..outer).map(|d| idx[d] * plan.src[d]).sum();
        let (pd, ps) = (ptr(dst) + od as u64 * size, ptr(src) + os as u64 * size);
        launch!(t, "strided_copy", elementwise_cfg(n), |l| {
            l.arg(&n).arg(&pd).arg(&ps).arg(&ndim).arg(&layout);
        })?;
        let mut d = outer;
        loop {
            if d == 0 {
                return Ok(());
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < plan.dims[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

pub(crate) fn adamw(
    p: &Tensor,
    g: &Tensor,
    m: &Tensor,
    v: &Tensor,
    h: super::optim::AdamWStep,
) -> Result<(), TensorError> {
    let super::optim::AdamWStep {
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

mod blas;
mod nn;

pub(crate) use blas::{bmm, matmul};
pub(crate) use nn::*;
