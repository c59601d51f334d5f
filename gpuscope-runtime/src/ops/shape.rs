//! Shape operations and views, with PyTorch's semantics.
//!
//! Views share the storage of the tensor they are taken from (no allocation, and an
//! in-place change of either shows in the other); only their shape, strides and
//! storage offset differ:
//! - `transpose`/`t` (2-D), `transpose_dims` (any two dimensions), `permute`: views,
//!   generally not contiguous;
//! - `narrow`: a view of a range along one dimension (with a storage offset);
//! - `view`: another shape over a contiguous tensor (an error otherwise);
//! - `reshape`: a view when the tensor is contiguous, else a contiguous copy;
//! - `contiguous`: the tensor itself when it is contiguous, else a contiguous copy;
//! - `detach`: a view outside the autograd graph.
//!
//! Each records its backward step when it should: the gradient of a transpose or a
//! permutation is the inverse view of the incoming gradient (no copy); `narrow`
//! scatters it into zeros; `reshape`, `view` and `contiguous` pass it on reshaped.

use std::panic::Location;

use crate::autograd::{record, should_record};
use crate::tensor::compute::elementwise::zero_raw;
use crate::tensor::compute::layout::{check_numel, narrowed, permuted, reshape_raw};
use crate::tensor::compute::strided::{contiguous_raw, strided_copy};
use crate::tensor::compute::{Site, alloc_like, axis_index};
use crate::tensor::{Tensor, TensorError};

/// `reshape` (`copy_ok`) or `view`, recorded.
fn reshape_at(
    t: &Tensor,
    shape: &[usize],
    copy_ok: bool,
    site: Site,
) -> Result<Tensor, TensorError> {
    let name = if copy_ok { "reshape" } else { "view" };
    check_numel(name, t, shape)?;
    if !copy_ok && !t.is_contiguous() && t.shape() != shape {
        return Err(TensorError::InvalidArgument {
            op: "view",
            reason: format!(
                "the tensor {:?} is not contiguous (strides {:?}), so its elements cannot be \
                 seen under shape {shape:?} without a copy; call .contiguous() first, or \
                 .reshape() (which copies when it must)",
                t.shape(),
                t.strides()
            ),
        });
    }
    let out = reshape_raw(t, shape, site)?;
    if !should_record(&[t]) {
        return Ok(out);
    }
    let back = t.shape().to_vec();
    Ok(record(out, name, &[t], site, move |g, _, site| {
        Ok(vec![Some(reshape_raw(g, &back, site)?)])
    }))
}

/// A permutation view, recorded; its backward step is the inverse permutation's view.
fn permute_at(
    t: &Tensor,
    perm: Vec<usize>,
    name: &'static str,
    site: Site,
) -> Result<Tensor, TensorError> {
    let out = permuted(t, &perm);
    if !should_record(&[t]) {
        return Ok(out);
    }
    let mut inverse = vec![0; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inverse[p] = i;
    }
    Ok(record(out, name, &[t], site, move |g, _, _| {
        Ok(vec![Some(permuted(g, &inverse))])
    }))
}

impl Tensor {
    /// The same elements under another shape with as many elements (PyTorch's
    /// `reshape`): a view that shares the storage when the tensor is contiguous, else a
    /// contiguous copy (the elements in row-major order either way).
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], &Device::host().unwrap()).unwrap();
    /// let v = t.reshape(&[3, 2]).unwrap();
    /// assert!(v.same_storage(&t));
    /// assert!(t.reshape(&[4]).is_err());
    /// // A transposed view is not contiguous: reshaping it copies.
    /// let r = t.t().unwrap().reshape(&[6]).unwrap();
    /// assert!(!r.same_storage(&t));
    /// assert_eq!(r.to_vec::<f32>().unwrap(), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    /// ```
    #[track_caller]
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor, TensorError> {
        reshape_at(self, shape, true, Location::caller())
    }

    /// The same storage under another shape with as many elements (PyTorch's `view`):
    /// never copies. A tensor that is not contiguous (a transposed view, say) gives
    /// [`TensorError::InvalidArgument`]: call [`contiguous`](Tensor::contiguous) first,
    /// or use [`reshape`](Tensor::reshape).
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor, TensorError};
    /// let t = Tensor::zeros(&[2, 3], &Device::host().unwrap()).unwrap();
    /// assert!(t.view(&[6]).unwrap().same_storage(&t));
    /// let err = t.t().unwrap().view(&[6]).unwrap_err();
    /// assert!(matches!(err, TensorError::InvalidArgument { .. }));
    /// assert!(err.to_string().contains(".contiguous()"));
    /// ```
    #[track_caller]
    pub fn view(&self, shape: &[usize]) -> Result<Tensor, TensorError> {
        reshape_at(self, shape, false, Location::caller())
    }

    /// The transpose of a 2-D tensor: a view that shares the storage (no copy), with
    /// the strides swapped. [`matmul`](Tensor::matmul) reads it in place; most other
    /// operations read it through [`contiguous`](Tensor::contiguous). For more
    /// dimensions see [`transpose_dims`](Tensor::transpose_dims) and
    /// [`permute`](Tensor::permute).
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], &Device::host().unwrap()).unwrap();
    /// let tt = t.transpose().unwrap();
    /// assert_eq!(tt.shape(), &[3, 2]);
    /// assert!(tt.same_storage(&t) && !tt.is_contiguous());
    /// assert_eq!(tt.to_vec::<f32>().unwrap(), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    /// ```
    #[track_caller]
    pub fn transpose(&self) -> Result<Tensor, TensorError> {
        if self.ndim() != 2 {
            return Err(TensorError::InvalidArgument {
                op: "transpose",
                reason: format!(
                    "transpose (t) takes a 2-D tensor; this one has shape {:?} (use \
                     transpose_dims or permute for other ranks)",
                    self.shape()
                ),
            });
        }
        permute_at(self, vec![1, 0], "transpose", Location::caller())
    }

    /// [`transpose`](Tensor::transpose): the transpose of a 2-D tensor, as a view.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let dev = Device::host().unwrap();
    /// let x = Tensor::ones(&[4, 3], &dev).unwrap();
    /// let w = Tensor::ones(&[5, 3], &dev).unwrap();
    /// let y = x.matmul(&w.t().unwrap()).unwrap(); // x @ wᵀ, wᵀ read in place
    /// assert_eq!(y.shape(), &[4, 5]);
    /// ```
    #[track_caller]
    pub fn t(&self) -> Result<Tensor, TensorError> {
        self.transpose()
    }

    /// The tensor with dimensions `d0` and `d1` swapped (negative counts from the
    /// end): a view that shares the storage.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let t = Tensor::zeros(&[2, 3, 4], &Device::host().unwrap()).unwrap();
    /// let v = t.transpose_dims(0, -1).unwrap();
    /// assert_eq!(v.shape(), &[4, 3, 2]);
    /// assert_eq!(v.strides(), &[1, 4, 12]);
    /// assert!(v.same_storage(&t));
    /// ```
    #[track_caller]
    pub fn transpose_dims(&self, d0: isize, d1: isize) -> Result<Tensor, TensorError> {
        let a = axis_index("transpose_dims", d0, self.ndim())?;
        let b = axis_index("transpose_dims", d1, self.ndim())?;
        let mut perm: Vec<usize> = (0..self.ndim()).collect();
        perm.swap(a, b);
        permute_at(self, perm, "transpose", Location::caller())
    }

    /// The tensor with its dimensions reordered: dimension `i` of the result is
    /// dimension `dims[i]` of this one (`dims` lists each dimension once). A view that
    /// shares the storage.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let t = Tensor::from_slice(&[0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0], &[1, 2, 3], &Device::host().unwrap()).unwrap();
    /// let p = t.permute(&[2, 0, 1]).unwrap();
    /// assert_eq!(p.shape(), &[3, 1, 2]);
    /// assert_eq!(p.to_vec::<f32>().unwrap(), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    /// assert!(t.permute(&[0, 0, 1]).is_err());
    /// ```
    #[track_caller]
    pub fn permute(&self, dims: &[usize]) -> Result<Tensor, TensorError> {
        let n = self.ndim();
        let mut seen = vec![false; n];
        let valid = dims.len() == n
            && dims
                .iter()
                .all(|&d| d < n && !std::mem::replace(&mut seen[d], true));
        if !valid {
            return Err(TensorError::InvalidArgument {
                op: "permute",
                reason: format!(
                    "{dims:?} is not a permutation of the {n} dimension(s) of a tensor of shape {:?}",
                    self.shape()
                ),
            });
        }
        permute_at(self, dims.to_vec(), "permute", Location::caller())
    }

    /// The `len` elements from `start` along dimension `dim` (negative counts from the
    /// end): a view that shares the storage (its first element is
    /// [`storage_offset`](Tensor::storage_offset) elements in).
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2], &Device::host().unwrap()).unwrap();
    /// let rows = t.narrow(0, 1, 2).unwrap();
    /// assert_eq!(rows.to_vec::<f32>().unwrap(), vec![3.0, 4.0, 5.0, 6.0]);
    /// assert!(rows.is_contiguous() && rows.same_storage(&t));
    /// let col = t.narrow(-1, 1, 1).unwrap();
    /// assert_eq!(col.to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0]);
    /// assert!(t.narrow(0, 2, 2).is_err());
    /// ```
    #[track_caller]
    pub fn narrow(&self, dim: isize, start: usize, len: usize) -> Result<Tensor, TensorError> {
        let site = Location::caller();
        let d = axis_index("narrow", dim, self.ndim())?;
        let size = self.shape()[d];
        if start.checked_add(len).is_none_or(|end| end > size) {
            return Err(TensorError::InvalidArgument {
                op: "narrow",
                reason: format!(
                    "{len} element(s) from {start} do not fit in dimension {d} of size {size} \
                     (shape {:?})",
                    self.shape()
                ),
            });
        }
        let out = narrowed(self, d, start, len);
        if !should_record(&[self]) {
            return Ok(out);
        }
        let shape = self.shape().to_vec();
        Ok(record(out, "narrow", &[self], site, move |g, _, site| {
            // Zeros of the input's shape, the gradient written into the narrowed range.
            let full = alloc_like(&shape, g.dtype(), g, site)?;
            zero_raw(&full, site)?;
            strided_copy(&narrowed(&full, d, start, len), g)?;
            Ok(vec![Some(full)])
        }))
    }

    /// This tensor when it [`is_contiguous`](Tensor::is_contiguous) (a cheap clone of
    /// the handle), else a contiguous copy of its elements (recorded for autograd, whose
    /// gradient passes through unchanged).
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], &Device::host().unwrap()).unwrap();
    /// assert!(t.contiguous().unwrap().same_storage(&t));
    /// let c = t.t().unwrap().contiguous().unwrap();
    /// assert!(c.is_contiguous() && !c.same_storage(&t));
    /// assert_eq!(c.to_vec::<f32>().unwrap(), vec![1.0, 3.0, 2.0, 4.0]);
    /// ```
    #[track_caller]
    pub fn contiguous(&self) -> Result<Tensor, TensorError> {
        let site = Location::caller();
        if self.is_contiguous() {
            return Ok(self.clone());
        }
        let out = contiguous_raw(self, site)?;
        if !should_record(&[self]) {
            return Ok(out);
        }
        Ok(record(out, "contiguous", &[self], site, |g, _, _| {
            Ok(vec![Some(g.clone())])
        }))
    }

    /// A view of the same storage outside the autograd graph: a leaf that does not
    /// require grad. Keeps no graph alive.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let w = Tensor::ones(&[2], &Device::host().unwrap()).unwrap().set_requires_grad(true);
    /// let y = w.mul_scalar(2.0).unwrap();
    /// assert!(y.requires_grad());
    /// let d = y.detach();
    /// assert!(!d.requires_grad() && d.is_leaf() && d.same_storage(&y));
    /// ```
    pub fn detach(&self) -> Tensor {
        self.alias(None)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Device, Tensor};

    fn iota(shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        let v: Vec<f64> = (0..n).map(|i| i as f64).collect();
        Tensor::from_vec(v, shape, &Device::host().unwrap()).unwrap()
    }

    #[test]
    fn views_move_strides_not_data() {
        let t = iota(&[2, 3, 4]);
        let p = t.permute(&[1, 2, 0]).unwrap();
        assert_eq!(p.shape(), &[3, 4, 2]);
        assert_eq!(p.strides(), &[4, 1, 12]);
        assert_eq!(p.addr(), t.addr());
        // Element (i, j, k) of the permutation is element (k, i, j) of the original.
        let v = p.to_vec::<f64>().unwrap();
        for i in 0..3 {
            for j in 0..4 {
                for k in 0..2 {
                    assert_eq!(v[(i * 4 + j) * 2 + k], (k * 12 + i * 4 + j) as f64);
                }
            }
        }
        let n = t.narrow(1, 1, 2).unwrap();
        assert_eq!(n.storage_offset(), 4);
        assert_eq!(n.addr().0, t.addr().0 + 4 * 8);
        assert!(!n.is_contiguous());
        assert_eq!(
            n.to_vec::<f64>().unwrap(),
            vec![
                4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0,
                23.0
            ]
        );
    }

    #[test]
    fn reshape_copies_only_when_it_must() {
        let t = iota(&[2, 3]);
        assert!(t.reshape(&[3, 2]).unwrap().same_storage(&t));
        let tt = t.t().unwrap();
        // Same shape: a view even when not contiguous.
        assert!(tt.reshape(&[3, 2]).unwrap().same_storage(&t));
        let r = tt.reshape(&[2, 3]).unwrap();
        assert!(!r.same_storage(&t) && r.is_contiguous());
        assert_eq!(
            r.to_vec::<f64>().unwrap(),
            vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
        );
        assert!(tt.view(&[3, 2]).is_ok());
        assert!(tt.view(&[6]).is_err());
    }

    #[test]
    fn size_one_dimensions_do_not_break_contiguity() {
        let col = iota(&[3, 1]);
        let row = col.t().unwrap();
        assert_eq!(row.shape(), &[1, 3]);
        assert!(row.is_contiguous());
        assert!(row.view(&[3]).is_ok());
        assert!(iota(&[0, 3]).t().unwrap().is_contiguous());
    }
}
