//! Shape operations: `reshape` (a view of the same storage), `transpose` of a 2-D
//! tensor (a copy), `detach` (a view outside the graph).

use std::panic::Location;

use crate::autograd::{record, should_record};

use super::{Exec, Site, Tensor, TensorError, alloc_like, check_float, exec_of, host};

fn reshape_at(t: &Tensor, shape: &[usize], _site: Site) -> Result<Tensor, TensorError> {
    let n: usize = shape.iter().product();
    if n != t.numel() {
        return Err(TensorError::InvalidArgument {
            op: "reshape",
            reason: format!(
                "shape {shape:?} holds {n} elements; the tensor {:?} has {}",
                t.shape(),
                t.numel()
            ),
        });
    }
    let view = t.view_with(shape.to_vec(), None);
    if !should_record(&[t]) {
        return Ok(view);
    }
    let back = t.shape().to_vec();
    Ok(record(view, "reshape", &[t], _site, move |g, _, _| {
        Ok(vec![Some(g.view_with(back, None))])
    }))
}

fn transpose_raw(t: &Tensor, site: Site) -> Result<Tensor, TensorError> {
    check_float("transpose", t)?;
    if t.ndim() != 2 {
        return Err(TensorError::InvalidArgument {
            op: "transpose",
            reason: format!(
                "transpose takes a 2-D tensor; this one has shape {:?}",
                t.shape()
            ),
        });
    }
    let (r, c) = (t.shape()[0], t.shape()[1]);
    let out = alloc_like(&[c, r], t.dtype(), t, site)?;
    match exec_of("transpose", t)? {
        // SAFETY: a fresh output and its host input.
        Exec::Host => unsafe { host::transpose(&out, t, r, c)? },
        #[cfg(feature = "cuda")]
        Exec::Cuda => super::cuda::transpose(&out, t, r, c)?,
    }
    Ok(out)
}

impl Tensor {
    /// The same elements under another shape with as many elements: a view that shares
    /// the storage (row-major order is unchanged, so no copy is needed).
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], &Device::host().unwrap()).unwrap();
    /// let v = t.reshape(&[3, 2]).unwrap();
    /// assert!(v.same_storage(&t));
    /// assert!(t.reshape(&[4]).is_err());
    /// ```
    #[track_caller]
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor, TensorError> {
        reshape_at(self, shape, Location::caller())
    }

    /// The transpose of a 2-D tensor, as a new contiguous tensor.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], &Device::host().unwrap()).unwrap();
    /// let tt = t.transpose().unwrap();
    /// assert_eq!(tt.shape(), &[3, 2]);
    /// assert_eq!(tt.to_vec::<f32>().unwrap(), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    /// ```
    #[track_caller]
    pub fn transpose(&self) -> Result<Tensor, TensorError> {
        let site = Location::caller();
        let out = transpose_raw(self, site)?;
        if !should_record(&[self]) {
            return Ok(out);
        }
        Ok(record(
            out,
            "transpose",
            &[self],
            site,
            move |g, _, site| Ok(vec![Some(transpose_raw(g, site)?)]),
        ))
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
        self.view_with(self.shape().to_vec(), None)
    }
}
