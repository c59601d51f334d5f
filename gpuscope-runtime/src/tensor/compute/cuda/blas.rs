//! cuBLAS calls: `sgemm`/`dgemm` for 2-D products and `sgemm_strided_batched` /
//! `dgemm_strided_batched` for batched ones, on the stream of the tensor they write;
//! `f32` products under a [`MatmulPrecision`] below `Highest` go through `cublasGemmEx`
//! / `cublasGemmStridedBatchedEx` with the matching fast compute type.

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

/// The cuBLAS compute type of an `f32` product under the process's matmul precision, or
/// `None` for full precision (plain `sgemm`).
fn fast_f32_compute() -> Option<cublasComputeType_t> {
    match float32_matmul_precision() {
        MatmulPrecision::Highest => None,
        // Medium as High, as PyTorch on CUDA: cuBLAS's bf16 products read bf16 matrices
        // (CUBLAS_COMPUTE_32F_FAST_16BF on f32 matrices gave products no less precise
        // than TF32's on the H100).
        MatmulPrecision::High | MatmulPrecision::Medium => {
            Some(cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32)
        }
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
        call: "cublasGemm",
        message: format!(
            "{e:?} (m={m}, k={k}, n={n}, transposed: {ta}, {tb}, ld: {}, {})",
            a.ld, b.ld
        ),
    };
    // SAFETY: the pointers are live tensors holding op(A) m×k, op(B) k×n (row-major with
    // their leading dimensions, every element inside the tensor) and C m×n of the dtype
    // matched below; the handle's stream is `c`'s.
    unsafe {
        match (c.dtype(), fast_f32_compute()) {
            (DType::F32, Some(compute)) => {
                let (alpha, beta) = (1.0f32, 0.0f32);
                cudarc::cublas::result::gemm_ex(
                    handle,
                    op(tb),
                    op(ta),
                    nn,
                    mm,
                    kk,
                    &alpha as *const f32 as *const c_void,
                    ptr(&b.tensor) as *const c_void,
                    cudaDataType::CUDA_R_32F,
                    ldb,
                    ptr(&a.tensor) as *const c_void,
                    cudaDataType::CUDA_R_32F,
                    lda,
                    &beta as *const f32 as *const c_void,
                    ptr(c) as *mut c_void,
                    cudaDataType::CUDA_R_32F,
                    nn,
                    compute,
                    cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                )
                .map_err(fail)?
            }
            (DType::F32, None) => {
                let (alpha, beta) = (1.0f32, 0.0f32);
                cudarc::cublas::result::sgemm(
                    handle,
                    op(tb),
                    op(ta),
                    nn,
                    mm,
                    kk,
                    &alpha,
                    ptr(&b.tensor) as *const f32,
                    ldb,
                    ptr(&a.tensor) as *const f32,
                    lda,
                    &beta,
                    ptr(c) as *mut f32,
                    nn,
                )
                .map_err(fail)?
            }
            (DType::F64, _) => {
                let (alpha, beta) = (1.0f64, 0.0f64);
                cudarc::cublas::result::dgemm(
                    handle,
                    op(tb),
                    op(ta),
                    nn,
                    mm,
                    kk,
                    &alpha,
                    ptr(&b.tensor) as *const f64,
                    ldb,
                    ptr(&a.tensor) as *const f64,
                    lda,
                    &beta,
                    ptr(c) as *mut f64,
                    nn,
                )
                .map_err(fail)?
            }
            (other, _) => {
                return Err(TensorError::Unsupported(format!(
                    "cuBLAS matmul takes f32 or f64, not {other}"
                )));
            }
        }
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
        call: "cublasGemmStridedBatched",
        message: format!("{e:?} (batch={batch}, m={m}, k={k}, n={n}, transposed: {ta}, {tb})"),
    };
    // SAFETY: each tensor holds `batch` contiguous matrices of the sizes above (checked
    // by the caller), of the dtype matched below; the handle's stream is `c`'s.
    unsafe {
        match (c.dtype(), fast_f32_compute()) {
            (DType::F32, Some(compute)) => {
                let (alpha, beta) = (alpha as f32, 0.0f32);
                cudarc::cublas::result::gemm_strided_batched_ex(
                    handle,
                    op(tb),
                    op(ta),
                    nn,
                    mm,
                    kk,
                    &alpha as *const f32 as *const c_void,
                    ptr(b) as *const c_void,
                    cudaDataType::CUDA_R_32F,
                    ldb,
                    sb,
                    ptr(a) as *const c_void,
                    cudaDataType::CUDA_R_32F,
                    lda,
                    sa,
                    &beta as *const f32 as *const c_void,
                    ptr(c) as *mut c_void,
                    cudaDataType::CUDA_R_32F,
                    nn,
                    sc,
                    count,
                    compute,
                    cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                )
                .map_err(fail)?
            }
            (DType::F32, None) => {
                let (alpha, beta) = (alpha as f32, 0.0f32);
                cudarc::cublas::result::sgemm_strided_batched(
                    handle,
                    op(tb),
                    op(ta),
                    nn,
                    mm,
                    kk,
                    &alpha,
                    ptr(b) as *const f32,
                    ldb,
                    sb,
                    ptr(a) as *const f32,
                    lda,
                    sa,
                    &beta,
                    ptr(c) as *mut f32,
                    nn,
                    sc,
                    count,
                )
                .map_err(fail)?
            }
            (DType::F64, _) => {
                let beta = 0.0f64;
                cudarc::cublas::result::dgemm_strided_batched(
                    handle,
                    op(tb),
                    op(ta),
                    nn,
                    mm,
                    kk,
                    &alpha,
                    ptr(b) as *const f64,
                    ldb,
                    sb,
                    ptr(a) as *const f64,
                    lda,
                    sa,
                    &beta,
                    ptr(c) as *mut f64,
                    nn,
                    sc,
                    count,
                )
                .map_err(fail)?
            }
            (other, _) => {
                return Err(TensorError::Unsupported(format!(
                    "cuBLAS batched matmul takes f32 or f64, not {other}"
                )));
            }
        }
    }
    Ok(())
}
