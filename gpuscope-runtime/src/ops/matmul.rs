//! Matrix products with autograd: `matmul`, `matmul_t` (either operand transposed on
//! the fly), `bmm` (batched, through cuBLAS's strided-batched calls on CUDA) and
//! `linear` (`x @ wᵀ + b` over the last dimension).

use std::panic::Location;

use crate::autograd::{record_saving, should_record};
use crate::tensor::compute::Site;
use crate::tensor::compute::layout::reshape_raw;
use crate::tensor::compute::matmul::{bmm_raw, matmul_raw};
use crate::tensor::compute::nn::{bias_add_fresh, col_sum_raw, last_dim};
use crate::tensor::{Tensor, TensorError};

/// A matrix product `product(a, b, ta, tb, site)` of `op(a)` and `op(b)` (`op`
/// transposes when its flag is set), recorded as node `name`: its backward is two more
/// products of the same kind, of the gradient and the saved operands.
fn product_at<P>(
    name: &'static str,
    product: P,
    a: &Tensor,
    b: &Tensor,
    (ta, tb): (bool, bool),
    site: Site,
) -> Result<Tensor, TensorError>
where
    P: Fn(&Tensor, &Tensor, bool, bool, Site) -> Result<Tensor, TensorError> + Send + 'static,
{
    let out = product(a, b, ta, tb, site)?;
    if !should_record(&[a, b]) {
        return Ok(out);
    }
    let (sa, sb) = (a.detach(), b.detach());
    Ok(record_saving(
        out,
        name,
        &[a, b],
        [sa.clone(), sb.clone()],
        site,
        move |g, needs, site| {
            // C = op(A) op(B): dop(A) = G op(B)ᵀ, dop(B) = op(A)ᵀ G; transposed back
            // where the operand was stored transposed.
            let ga = if needs[0] {
                Some(if ta {
                    product(&sb, g, tb, true, site)?
                } else {
                    product(g, &sb, false, !tb, site)?
                })
            } else {
                None
            };
            let gb = if needs[1] {
                Some(if tb {
                    product(g, &sa, true, ta, site)?
                } else {
                    product(&sa, g, !ta, false, site)?
                })
            } else {
                None
            };
            Ok(vec![ga, gb])
        },
    ))
}

fn matmul_at(
    a: &Tensor,
    b: &Tensor,
    ta: bool,
    tb: bool,
    site: Site,
) -> Result<Tensor, TensorError> {
    product_at("matmul", matmul_raw, a, b, (ta, tb), site)
}

/// `alpha · op(a) @ op(b)` over batches of matrices, recorded.
pub(crate) fn bmm_at(
    a: &Tensor,
    b: &Tensor,
    ta: bool,
    tb: bool,
    alpha: f64,
    site: Site,
) -> Result<Tensor, TensorError> {
    // The gradients are matmul's, matrix by matrix, scaled by alpha.
    let product = move |a: &Tensor, b: &Tensor, ta, tb, site| bmm_raw(a, b, ta, tb, alpha, site);
    product_at("bmm", product, a, b, (ta, tb), site)
}

/// `x @ wᵀ (+ b)` over the last dimension of `x`, recorded as one node.
fn linear_at(
    x: &Tensor,
    w: &Tensor,
    b: Option<&Tensor>,
    site: Site,
) -> Result<Tensor, TensorError> {
    let fan_in = last_dim("linear", x)?;
    if w.ndim() != 2 || w.shape()[1] != fan_in {
        return Err(TensorError::ShapeMismatch {
            op: "linear",
            lhs: x.shape().to_vec(),
            rhs: w.shape().to_vec(),
            reason: format!("the weight must be [out_features, {fan_in}] (PyTorch's layout)"),
        });
    }
    let fan_out = w.shape()[0];
    let rows = x.numel() / fan_in.max(1);
    let x2 = reshape_raw(x, &[rows, fan_in], site)?;
    let y = matmul_raw(&x2, w, false, true, site)?;
    if let Some(b) = b {
        bias_add_fresh(&y, b, site)?;
    }
    let mut shape = x.shape().to_vec();
    *shape.last_mut().unwrap_or(&mut 0) = fan_out;
    let out = y.view_with(shape, None);
    let inputs: Vec<&Tensor> = [Some(x), Some(w), b].into_iter().flatten().collect();
    if !should_record(&inputs) {
        return Ok(out);
    }
    let (xs, ws) = (x2.detach(), w.detach());
    let x_shape = x.shape().to_vec();
    Ok(record_saving(
        out,
        "linear",
        &inputs,
        [xs.clone(), ws.clone()],
        site,
        move |g, needs, site| {
            let g2 = reshape_raw(g, &[rows, fan_out], site)?;
            let gx = needs[0]
                .then(|| -> Result<Tensor, TensorError> {
                    let gx = matmul_raw(&g2, &ws, false, false, site)?;
                    reshape_raw(&gx, &x_shape, site)
                })
                .transpose()?;
            let gw = needs[1]
                .then(|| matmul_raw(&g2, &xs, true, false, site))
                .transpose()?;
            let mut grads = vec![gx, gw];
            if needs.len() > 2 {
                grads.push(needs[2].then(|| col_sum_raw(&g2, site)).transpose()?);
            }
            Ok(grads)
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

impl Tensor {
    /// Batched matrix products: for `self` of shape `[.., m, k]` and `other` of shape
    /// `[.., k, n]` with the same leading dimensions, each matrix product, `[.., m, n]`.
    /// On CUDA one strided-batched cuBLAS call (`cublasSgemmStridedBatched`); views are
    /// gathered first.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let dev = Device::host().unwrap();
    /// let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 1, 2], &dev).unwrap();
    /// let b = Tensor::from_slice(&[1.0f32, 1.0, 10.0, 1.0], &[2, 2, 1], &dev).unwrap();
    /// let c = a.bmm(&b).unwrap(); // [1 2]·[1 1]ᵀ and [3 4]·[10 1]ᵀ
    /// assert_eq!(c.shape(), &[2, 1, 1]);
    /// assert_eq!(c.to_vec::<f32>().unwrap(), vec![3.0, 34.0]);
    /// ```
    #[track_caller]
    pub fn bmm(&self, other: &Tensor) -> Result<Tensor, TensorError> {
        bmm_at(self, other, false, false, 1.0, Location::caller())
    }

    /// [`bmm`](Tensor::bmm) with either operand's matrices transposed on the fly:
    /// `self` is `[.., k, m]` when `transpose_self`, `other` is `[.., n, k]` when
    /// `transpose_other` (attention's `q @ kᵀ`).
    #[track_caller]
    pub fn bmm_t(
        &self,
        other: &Tensor,
        transpose_self: bool,
        transpose_other: bool,
    ) -> Result<Tensor, TensorError> {
        bmm_at(
            self,
            other,
            transpose_self,
            transpose_other,
            1.0,
            Location::caller(),
        )
    }

    /// A linear layer over the last dimension: `self @ weightᵀ + bias` for `self` of
    /// shape `[.., in]`, `weight` `[out, in]` (PyTorch's layout) and `bias` `[out]`:
    /// `[.., out]`. One matrix product, the bias added in place; one autograd node that
    /// saves the input and the weight.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let dev = Device::host().unwrap();
    /// let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[1, 2, 3], &dev).unwrap();
    /// let w = Tensor::from_slice(&[1.0f32, 0.0, 0.0, 0.0, 1.0, 1.0], &[2, 3], &dev).unwrap();
    /// let b = Tensor::from_slice(&[10.0f32, 20.0], &[2], &dev).unwrap();
    /// let y = x.linear(&w, Some(&b)).unwrap();
    /// assert_eq!(y.shape(), &[1, 2, 2]);
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![11.0, 25.0, 14.0, 31.0]);
    /// ```
    #[track_caller]
    pub fn linear(&self, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor, TensorError> {
        linear_at(self, weight, bias, Location::caller())
    }
}
