//! Matrix products with autograd: `matmul`, `matmul_t` (either operand transposed on
//! the fly), `bmm` (batched, through cuBLAS's strided-batched calls on CUDA) and
//! `linear` (`x @ wᵀ + b` over the last dimension).

use std::panic::Location;

use crate::autograd::{record_saving, should_record};
use crate::tensor::compute::Site;
use crate::tensor::compute::matmul::matmul_raw;
use crate::tensor::{Tensor, TensorError};

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
        [sa.clone(), sb.clone()],
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
    /// The matrix product `self @ other` of `[m, k]` and `[k, n]`: `[m, n]`. Either
    /// operand may be a view: `x.matmul(&w.t()?)` reads `w` transposed in place and
    /// allocates only the result.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let dev = Device::host().unwrap();
    /// let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], &dev).unwrap();
    /// let b = Tensor::from_slice(&[5.0f32, 6.0, 7.0, 8.0], &[2, 2], &dev).unwrap();
    /// assert_eq!(a.matmul(&b).unwrap().to_vec::<f32>().unwrap(), vec![19.0, 22.0, 43.0, 50.0]);
    /// // a @ bᵀ without materialising bᵀ, through a view or the flag:
    /// assert_eq!(a.matmul(&b.t().unwrap()).unwrap().to_vec::<f32>().unwrap(), vec![17.0, 23.0, 39.0, 53.0]);
    /// assert_eq!(a.matmul_t(&b, false, true).unwrap().to_vec::<f32>().unwrap(), vec![17.0, 23.0, 39.0, 53.0]);
    /// ```
    #[track_caller]
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor, TensorError> {
        matmul_at(self, other, false, false, Location::caller())
    }

    /// `op(self) @ op(other)` where `op` transposes when its flag is set: `self` is
    /// `[k, m]` when `transpose_self`, `other` is `[n, k]` when `transpose_other`. What a
    /// linear layer's backward needs (`x @ Wᵀ`, `Gᵀ @ x`), without copies; the same as
    /// [`matmul`](Tensor::matmul) of [`t()`](Tensor::t) views.
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
