//! Matrix products of 2-D tensors, recording nothing, either operand optionally transposed on the fly (no
//! copy): the host through `matrixmultiply`, CUDA through cuBLAS.
//!
//! Operands may be views: a transposed view (`w.t()`) or a narrowed one is read in
//! place through its strides, without a copy. The host reads any strides; cuBLAS
//! takes a matrix whose rows or columns are contiguous (its leading dimension is the
//! other stride), which every transposed or narrowed view of a contiguous matrix is;
//! an operand that is neither (a permutation of a larger tensor, say) is gathered
//! first.

use super::{Exec, Site, Tensor, TensorError, alloc_like, check_pair, exec_of, host};

/// `op(a) @ op(b)` with nothing recorded; returns `[m, n]`.
pub(crate) fn matmul_raw(
    a: &Tensor,
    b: &Tensor,
    ta: bool,
    tb: bool,
    site: Site,
) -> Result<Tensor, TensorError> {
    check_pair("matmul", a, b)?;
    if a.ndim() != 2 || b.ndim() != 2 {
        return Err(TensorError::ShapeMismatch {
            op: "matmul",
            lhs: a.shape().to_vec(),
            rhs: b.shape().to_vec(),
            reason: "matmul takes 2-D tensors (reshape batches to rows first)".into(),
        });
    }
    let (m, k) = if ta {
        (a.shape()[1], a.shape()[0])
    } else {
        (a.shape()[0], a.shape()[1])
    };
    let (k2, n) = if tb {
        (b.shape()[1], b.shape()[0])
    } else {
        (b.shape()[0], b.shape()[1])
    };
    if k != k2 {
        return Err(TensorError::ShapeMismatch {
            op: "matmul",
            lhs: a.shape().to_vec(),
            rhs: b.shape().to_vec(),
            reason: format!(
                "inner dimensions differ ({k} against {k2}{})",
                match (ta, tb) {
                    (false, false) => "",
                    (true, false) => ", first operand transposed",
                    (false, true) => ", second operand transposed",
                    (true, true) => ", both operands transposed",
                }
            ),
        });
    }
    let out = alloc_like(&[m, n], a.dtype(), a, site)?;
    if m == 0 || n == 0 {
        return Ok(out);
    }
    match exec_of("matmul", a)? {
        // SAFETY: host tensors whose shapes match m, k, n, read through their own
        // strides; `out` is fresh.
        Exec::Host => unsafe {
            host::matmul(
                &out,
                a,
                host_strides(a, ta),
                b,
                host_strides(b, tb),
                m,
                k,
                n,
            )?
        },
        #[cfg(feature = "cuda")]
        Exec::Cuda => {
            let (a, b) = (blas_operand(a, ta, site)?, blas_operand(b, tb, site)?);
            super::cuda::matmul(&out, &a, &b, m, k, n)?
        }
    }
    Ok(out)
}

/// The row and column strides of `op(t)` (`t` 2-D, transposed when `t_flag`).
fn host_strides(t: &Tensor, t_flag: bool) -> (usize, usize) {
    let (s0, s1) = (t.strides()[0], t.strides()[1]);
    if t_flag { (s1, s0) } else { (s0, s1) }
}

/// How a 2-D `[rows, cols]` layout with `strides` lies for BLAS: `Some((false, ld))`
/// row-major (element `(i, j)` at `i·ld + j`), `Some((true, ld))` column-major (at
/// `i + j·ld`), with `ld` at least the length of a row (a column); `None` when it is
/// neither. The stride of a dimension of size 1 never matters.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn blas_layout(shape: &[usize], strides: &[usize]) -> Option<(bool, usize)> {
    let (r, c, s0, s1) = (shape[0], shape[1], strides[0], strides[1]);
    if c <= 1 || s1 == 1 {
        let ld = if r <= 1 { c.max(1) } else { s0 };
        if ld >= c.max(1) {
            return Some((false, ld));
        }
    }
    if r <= 1 || s0 == 1 {
        let ld = if c <= 1 { r.max(1) } else { s1 };
        if ld >= r.max(1) {
            return Some((true, ld));
        }
    }
    None
}

/// A matmul operand as cuBLAS takes it: a row-major matrix at `tensor.addr()` with
/// leading dimension `ld`, used transposed when `transposed`.
#[cfg(feature = "cuda")]
pub(crate) struct BlasOperand {
    pub tensor: Tensor,
    pub transposed: bool,
    pub ld: usize,
}

/// `op(t)` (transposed when `t_flag`) as a cuBLAS operand: `t` itself when its layout
/// allows (a transposed view is the transposed flag flipped), else a contiguous copy.
#[cfg(feature = "cuda")]
fn blas_operand(t: &Tensor, t_flag: bool, site: Site) -> Result<BlasOperand, TensorError> {
    if let Some((column_major, ld)) = blas_layout(t.shape(), t.strides()) {
        return Ok(BlasOperand {
            tensor: t.clone(),
            transposed: t_flag ^ column_major,
            ld,
        });
    }
    let dense = super::strided::contiguous_raw(t, site)?;
    Ok(BlasOperand {
        ld: dense.shape()[1].max(1),
        tensor: dense,
        transposed: t_flag,
    })
}

/// The sizes `[batch, m, k, n]` of `op(a) @ op(b)` over the leading dimensions of 3-D
/// or higher tensors (equal leading dimensions, no broadcasting).
fn bmm_dims(a: &Tensor, b: &Tensor, ta: bool, tb: bool) -> Result<[usize; 4], TensorError> {
    let mismatch = |reason: String| TensorError::ShapeMismatch {
        op: "bmm",
        lhs: a.shape().to_vec(),
        rhs: b.shape().to_vec(),
        reason,
    };
    if a.ndim() < 3 || a.ndim() != b.ndim() {
        return Err(mismatch(
            "bmm takes two tensors of matrices [.., rows, cols] with the same leading \
             dimensions (at least 3-D; use matmul for 2-D)"
                .into(),
        ));
    }
    let nd = a.ndim();
    if a.shape()[..nd - 2] != b.shape()[..nd - 2] {
        return Err(mismatch("the leading (batch) dimensions differ".into()));
    }
    let batch: usize = a.shape()[..nd - 2].iter().product();
    let (ar, ac) = (a.shape()[nd - 2], a.shape()[nd - 1]);
    let (br, bc) = (b.shape()[nd - 2], b.shape()[nd - 1]);
    let (m, k) = if ta { (ac, ar) } else { (ar, ac) };
    let (k2, n) = if tb { (bc, br) } else { (br, bc) };
    if k != k2 {
        return Err(mismatch(format!(
            "inner dimensions differ ({k} against {k2})"
        )));
    }
    Ok([batch, m, k, n])
}

/// `alpha · op(a) @ op(b)` for each matrix of `a` and `b` (`[.., m, k]` or, when `ta`,
/// `[.., k, m]`; likewise `b`), nothing recorded: `[.., m, n]`. On CUDA one
/// strided-batched cuBLAS call; views are gathered first.
pub(crate) fn bmm_raw(
    a: &Tensor,
    b: &Tensor,
    ta: bool,
    tb: bool,
    alpha: f64,
    site: Site,
) -> Result<Tensor, TensorError> {
    check_pair("bmm", a, b)?;
    let dims = bmm_dims(a, b, ta, tb)?;
    let mut shape = a.shape()[..a.ndim() - 2].to_vec();
    shape.extend([dims[1], dims[3]]);
    let out = alloc_like(&shape, a.dtype(), a, site)?;
    bmm_into(&out, a, b, ta, tb, alpha, site)?;
    Ok(out)
}

/// [`bmm_raw`] into `out`, a contiguous tensor of the product's shape (a fresh tensor,
/// or a slice of one: its version is left alone).
pub(crate) fn bmm_into(
    out: &Tensor,
    a: &Tensor,
    b: &Tensor,
    ta: bool,
    tb: bool,
    alpha: f64,
    site: Site,
) -> Result<(), TensorError> {
    check_pair("bmm", a, b)?;
    check_pair("bmm", out, a)?;
    let dims = bmm_dims(a, b, ta, tb)?;
    let [batch, m, _, n] = dims;
    if out.numel() != batch * m * n || !out.is_contiguous() {
        return Err(TensorError::ShapeMismatch {
            op: "bmm",
            lhs: out.shape().to_vec(),
            rhs: vec![batch, m, n],
            reason: "the output must be a contiguous tensor of the product's shape".into(),
        });
    }
    let (a, b) = (
        super::strided::contiguous_raw(a, site)?,
        super::strided::contiguous_raw(b, site)?,
    );
    match exec_of("bmm", &a)? {
        // SAFETY: contiguous host tensors of `batch` matrices of the sizes checked above.
        Exec::Host => unsafe { host::nn::bmm(out, &a, &b, (ta, tb), dims, alpha) },
        #[cfg(feature = "cuda")]
        Exec::Cuda => super::cuda::bmm(out, &a, &b, (ta, tb), dims, alpha),
    }
}

#[cfg(test)]
mod tests {
    use super::blas_layout;

    #[test]
    fn blas_layouts_of_views() {
        // Contiguous [3, 4]; its transpose; a narrowed one (row stride 10).
        assert_eq!(blas_layout(&[3, 4], &[4, 1]), Some((false, 4)));
        assert_eq!(blas_layout(&[4, 3], &[1, 4]), Some((true, 4)));
        assert_eq!(blas_layout(&[3, 4], &[10, 1]), Some((false, 10)));
        assert_eq!(blas_layout(&[4, 3], &[1, 10]), Some((true, 10)));
        // Size-1 dimensions take any stride.
        assert_eq!(blas_layout(&[1, 4], &[1, 1]), Some((false, 4)));
        assert_eq!(blas_layout(&[4, 1], &[1, 1]), Some((false, 1)));
        assert_eq!(blas_layout(&[1, 1], &[7, 9]), Some((false, 1)));
        // Neither rows nor columns contiguous: a strided slice of a 3-D tensor.
        assert_eq!(blas_layout(&[3, 4], &[8, 2]), None);
        // Rows that would overlap.
        assert_eq!(blas_layout(&[3, 4], &[2, 1]), None);
    }
}
