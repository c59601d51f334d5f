//! cuBLAS calls on the stream of the tensor they write: `cublasGemmEx` for 2-D products
//! and `cublasGemmStridedBatchedEx` for batched ones, `f32` or `f64`; `f32` products
//! compute as the process's [`MatmulPrecision`] allows (`CUBLAS_COMPUTE_32F`, what
//! `sgemm` computes, or the TF32 tensor-core type).

use std::ffi::c_void;
use std::os::raw::c_int;

use cudarc::cublas::sys::{cublasComputeType_t, cublasGemmAlgo_t, cublasOperation_t, cudaDataType};

use crate::backend::BackendError;
use crate::backend::cuda::CudaBackend;
use crate::kernels::blas_for;
use crate::precision::{MatmulPrecision, float32_matmul_precision};

use super::super::matmul::BlasOperand;
use super::{DType, Tensor, TensorError, ptr};

/// The cuBLAS handle of the stream `c` is on, its context bound to this thread.
fn blas_writing(c: &Tensor) -> Result<std::sync::Arc<cudarc::cublas::CudaBlas>, TensorError> {
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
    Ok(blas)
}

fn op(t: bool) -> cublasOperation_t {
    if t {
        cublasOperation_t::CUBLAS_OP_T
    } else {
        cublasOperation_t::CUBLAS_OP_N
    }
}

/// `c` as the product of an empty sum (`k == 0`): zeros, where cuBLAS would leave it
/// untouched.
fn zero_empty_sum(c: &Tensor) -> Result<(), TensorError> {
    // SAFETY: `c`'s own storage, on its stream.
    unsafe {
        c.device()
            .backend()
            .memset(c.addr(), 0, c.nbytes(), c.stream())?
    };
    Ok(())
}

/// `alpha` and `beta` (0) in the product's own scalar type, as cuBLAS reads them.
enum Scalars {
    F32([f32; 2]),
    F64([f64; 2]),
}

impl Scalars {
    fn alpha(&self) -> *const c_void {
        match self {
            Scalars::F32(s) => &s[0] as *const f32 as *const c_void,
            Scalars::F64(s) => &s[0] as *const f64 as *const c_void,
        }
    }

    fn beta(&self) -> *const c_void {
        match self {
            Scalars::F32(s) => &s[1] as *const f32 as *const c_void,
            Scalars::F64(s) => &s[1] as *const f64 as *const c_void,
        }
    }
}

/// The cuBLAS data type, compute type and scalars of a product writing `dtype`: `f64`
/// at full precision, `f32` as the process's matmul precision allows (medium as high,
/// as PyTorch on CUDA: cuBLAS's bf16 products read bf16 matrices, and
/// `CUBLAS_COMPUTE_32F_FAST_16BF` on `f32` matrices gave products no less precise than
/// TF32's on the H100).
fn gemm_types(
    dtype: DType,
    alpha: f64,
    what: &str,
) -> Result<(cudaDataType, cublasComputeType_t, Scalars), TensorError> {
    match dtype {
        DType::F32 => {
            let compute = match float32_matmul_precision() {
                MatmulPrecision::Highest => cublasComputeType_t::CUBLAS_COMPUTE_32F,
                MatmulPrecision::High | MatmulPrecision::Medium => {
                    cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32
                }
            };
            Ok((
                cudaDataType::CUDA_R_32F,
                compute,
                Scalars::F32([alpha as f32, 0.0]),
            ))
        }
        DType::F64 => Ok((
            cudaDataType::CUDA_R_64F,
            cublasComputeType_t::CUBLAS_COMPUTE_64F,
            Scalars::F64([alpha, 0.0]),
        )),
        other => Err(TensorError::Unsupported(format!(
            "{what} takes f32 or f64, not {other}"
        ))),
    }
}

fn gemm_dim(v: usize) -> Result<c_int, TensorError> {
    c_int::try_from(v).map_err(|_| {
        TensorError::Unsupported(format!(
            "matmul dimension {v} exceeds cuBLAS's 32-bit sizes"
        ))
    })
}

/// `c = op(A) @ op(B)` through cuBLAS on `c`'s stream, `op(A)` being `m×k` and `op(B)`
/// `k×n`; each operand is a row-major matrix with its leading dimension, transposed or
/// not (a transposed view arrives as its storage with the flag flipped). cuBLAS is
/// column-major: a row-major `[r, c]` array with leading dimension `ld` is its `c×r`
/// transpose with the same `ld`, so `Cᵀ = op(B)ᵀ op(A)ᵀ` is computed with the operands
/// swapped.
pub(crate) fn matmul(
    c: &Tensor,
    a: &BlasOperand,
    b: &BlasOperand,
    m: usize,
    k: usize,
    n: usize,
) -> Result<(), TensorError> {
    debug_assert!(c.is_contiguous());
    let (ta, tb) = (a.transposed, b.transposed);
    if k == 0 {
        return zero_empty_sum(c);
    }
    let blas = blas_writing(c)?;
    let (mm, nn, kk) = (gemm_dim(m)?, gemm_dim(n)?, gemm_dim(k)?);
    let (lda, ldb) = (gemm_dim(a.ld)?, gemm_dim(b.ld)?);
    let handle = *blas.handle();
    let fail = |e: cudarc::cublas::result::CublasError| BackendError::Driver {
        call: "cublasGemmEx",
        message: format!(
            "{e:?} (m={m}, k={k}, n={n}, transposed: {ta}, {tb}, ld: {}, {})",
            a.ld, b.ld
        ),
    };
    let (ty, compute, scalars) = gemm_types(c.dtype(), 1.0, "cuBLAS matmul")?;
    // SAFETY: the pointers are live tensors holding op(A) m×k, op(B) k×n (row-major with
    // their leading dimensions, every element inside the tensor) and C m×n, all of
    // `c`'s dtype (checked by the caller), which `ty` and `scalars` match; the handle's
    // stream is `c`'s.
    unsafe {
        cudarc::cublas::result::gemm_ex(
            handle,
            op(tb),
            op(ta),
            nn,
            mm,
            kk,
            scalars.alpha(),
            ptr(&b.tensor) as *const c_void,
            ty,
            ldb,
            ptr(&a.tensor) as *const c_void,
            ty,
            lda,
            scalars.beta(),
            ptr(c) as *mut c_void,
            ty,
            nn,
            compute,
            cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
        )
        .map_err(fail)?
    }
    Ok(())
}

/// `c[i] = alpha · op(a[i]) @ op(b[i])` for `batch` row-major matrices stored one after
/// another in each tensor (`op(a[i])` is `m×k`: `[m, k]`, or `[k, m]` stored when `ta`;
/// `op(b[i])` is `k×n`), through one strided-batched cuBLAS call on `c`'s stream. Row
/// major as cuBLAS's column major: `Cᵀ = op(B)ᵀ op(A)ᵀ`, operands swapped.
pub(crate) fn bmm(
    c: &Tensor,
    a: &Tensor,
    b: &Tensor,
    (ta, tb): (bool, bool),
    [batch, m, k, n]: [usize; 4],
    alpha: f64,
) -> Result<(), TensorError> {
    if batch == 0 || m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        return zero_empty_sum(c);
    }
    let blas = blas_writing(c)?;
    let (mm, nn, kk, count) = (gemm_dim(m)?, gemm_dim(n)?, gemm_dim(k)?, gemm_dim(batch)?);
    let lda = gemm_dim(if ta { m } else { k })?;
    let ldb = gemm_dim(if tb { k } else { n })?;
    let (sa, sb, sc) = ((m * k) as i64, (k * n) as i64, (m * n) as i64);
    let handle = *blas.handle();
    let fail = |e: cudarc::cublas::result::CublasError| BackendError::Driver {
        call: "cublasGemmStridedBatchedEx",
        message: format!("{e:?} (batch={batch}, m={m}, k={k}, n={n}, transposed: {ta}, {tb})"),
    };
    let (ty, compute, scalars) = gemm_types(c.dtype(), alpha, "cuBLAS batched matmul")?;
    // SAFETY: each tensor holds `batch` contiguous matrices of the sizes above, all of
    // `c`'s dtype (checked by the caller), which `ty` and `scalars` match; the handle's
    // stream is `c`'s.
    unsafe {
        cudarc::cublas::result::gemm_strided_batched_ex(
            handle,
            op(tb),
            op(ta),
            nn,
            mm,
            kk,
            scalars.alpha(),
            ptr(b) as *const c_void,
            ty,
            ldb,
            sb,
            ptr(a) as *const c_void,
            ty,
            lda,
            sa,
            scalars.beta(),
            ptr(c) as *mut c_void,
            ty,
            nn,
            sc,
            count,
            compute,
            cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
        )
        .map_err(fail)?
    }
    Ok(())
}
