//! Matrix products of 2-D tensors, either operand optionally transposed on the fly (no
//! copy): the host through `matrixmultiply`, CUDA through cuBLAS.

use std::panic::Location;

use crate::autograd::{record_saving, should_record};

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
        // SAFETY: host tensors whose shapes match m, k, n; `out` is fresh.
        Exec::Host => unsafe { host::matmul(&out, a, b, m, k, n, ta, tb)? },
        #[cfg(feature = "cuda")]
        Exec::Cuda => super::cuda::matmul(&out, a, b, m, k, n, ta, tb)?,
    }
    Ok(out)
}

fn matmul_at(
    a: &Tensor,
    b: &Tensor,
    ta: bool,
    tb: bool,
    site: Site,
) -> Result<Tensor, TensorError> {
    let out = matmul_raw(a, b, ta, tb, site)?;
    if !should_record(&[a, b]) {
        return Ok(out);
    }
    let (sa, sb) = (a.detach(), b.detach());
    Ok(record_saving(
        out,
        "matmul",
        &[a, b],
        vec![sa.clone(), sb.clone()],
        site,
        move |g, needs, site| {
            // C = op(A) op(B): dop(A) = G op(B)ᵀ, dop(B) = op(A)ᵀ G; transposed back
            // where the operand was stored transposed.
            let ga = if needs[0] {
                Some(if ta {
                    matmul_raw(&sb, g, tb, true, site)?
                } else {
                    matmul_raw(g, &sb, false, !tb, site)?
                })
            } else {
                None
            };
            let gb = if needs[1] {
                Some(if tb {
                    matmul_raw(g, &sa, true, ta, site)?
                } else {
                    matmul_raw(&sa, g, !ta, false, site)?
                })
            } else {
                None
            };
            Ok(vec![ga, gb])
        },
    ))
}

impl Tensor {
    /// The matrix product `self @ other` of `[m, k]` and `[k, n]`: `[m, n]`.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let dev = Device::host().unwrap();
    /// let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], &dev).unwrap();
    /// let b = Tensor::from_slice(&[5.0f32, 6.0, 7.0, 8.0], &[2, 2], &dev).unwrap();
    /// assert_eq!(a.matmul(&b).unwrap().to_vec::<f32>().unwrap(), vec![19.0, 22.0, 43.0, 50.0]);
    /// // a @ bᵀ without materialising bᵀ:
    /// assert_eq!(a.matmul_t(&b, false, true).unwrap().to_vec::<f32>().unwrap(), vec![17.0, 23.0, 39.0, 53.0]);
    /// ```
    #[track_caller]
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor, TensorError> {
        matmul_at(self, other, false, false, Location::caller())
    }

    /// `op(self) @ op(other)` where `op` transposes when its flag is set: `self` is
    /// `[k, m]` when `transpose_self`, `other` is `[n, k]` when `transpose_other`. What a
    /// linear layer's backward needs (`x @ Wᵀ`, `Gᵀ @ x`), without copies.
    #[track_caller]
    pub fn matmul_t(
        &self,
        other: &Tensor,
        transpose_self: bool,
        transpose_other: bool,
    ) -> Result<Tensor, TensorError> {
        matmul_at(
            self,
            other,
            transpose_self,
            transpose_other,
            Location::caller(),
        )
    }
}
