//! Strided layouts: the copy between any two layouts of one shape (the *gather* that
//! makes a view contiguous, the *scatter* that writes a result back through a view), on
//! the host and on CUDA, and the helpers with which operations accept views.
//!
//! Kernels that walk memory in order (unary, scalar, reductions, softmax, losses, the
//! optimizers' updates) get contiguous operands: [`contiguous_raw`] gathers a view
//! into a new tensor first. In-place operations on a view compute into a contiguous
//! temporary and scatter it back ([`write_through`]), so they change the shared storage
//! as PyTorch's do, and count one write in its version.

use crate::backend::DeviceKind;

use super::broadcast::Broadcast;
use super::{Site, Tensor, TensorError, alloc_like, host};

/// A copy plan: the shape with the dimensions that both layouts walk alike merged
/// (outermost first, at least one), and each layout's element stride along them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CopyPlan {
    pub dims: Vec<usize>,
    pub dst: Vec<usize>,
    pub src: Vec<usize>,
}

impl CopyPlan {
    /// The plan for copying an element of `shape` at `src` strides to `dst` strides.
    pub fn new(shape: &[usize], dst: &[usize], src: &[usize]) -> CopyPlan {
        let merged = Broadcast::merged(shape, dst, src);
        CopyPlan {
            dims: merged.dims,
            dst: merged.sa,
            src: merged.sb,
        }
    }
}

/// Copies `src`'s elements into `dst`, element for element in logical (row-major)
/// order, whatever their strides, on `dst`'s stream. Both have one shape, dtype and
/// device, and do not overlap (unless they are the same elements).
pub(crate) fn strided_copy(dst: &Tensor, src: &Tensor) -> Result<(), TensorError> {
    if dst.shape() != src.shape() || dst.dtype() != src.dtype() {
        return Err(TensorError::ShapeMismatch {
            op: "strided copy",
            lhs: dst.shape().to_vec(),
            rhs: src.shape().to_vec(),
            reason: format!(
                "needs one shape and dtype ({} and {})",
                dst.dtype(),
                src.dtype()
            ),
        });
    }
    if dst.device() != src.device() {
        return Err(TensorError::DeviceMismatch(
            dst.device().description(),
            src.device().description(),
        ));
    }
    if dst.numel() == 0 || (dst.addr() == src.addr() && dst.strides() == src.strides()) {
        return Ok(());
    }
    if dst.is_contiguous() && src.is_contiguous() {
        // SAFETY: two distinct ranges of `nbytes` on one device (callers do not pass
        // overlapping tensors), ordered on `dst`'s stream.
        unsafe {
            dst.device().backend().copy_device_to_device(
                dst.addr(),
                src.addr(),
                dst.nbytes(),
                dst.stream(),
            )?
        };
        return Ok(());
    }
    let plan = CopyPlan::new(dst.shape(), dst.strides(), src.strides());
    match dst.device().kind() {
        // SAFETY: host tensors of one dtype and shape whose strides the plan follows.
        DeviceKind::Host => unsafe { host::strided_copy(dst, src, &plan) },
        #[cfg(feature = "cuda")]
        DeviceKind::Cuda => super::cuda::strided_copy(dst, src, &plan),
        kind => Err(TensorError::Unsupported(format!(
            "copying a non-contiguous view is not available on {kind} devices (tensor on {})",
            dst.device().description()
        ))),
    }
}

/// `t` itself when it is contiguous, else a contiguous copy of it (nothing recorded).
pub(crate) fn contiguous_raw(t: &Tensor, site: Site) -> Result<Tensor, TensorError> {
    if t.is_contiguous() {
        return Ok(t.clone());
    }
    let out = alloc_like(t.shape(), t.dtype(), t, site)?;
    strided_copy(&out, t)?;
    Ok(out)
}

/// Runs the in-place update `f` on `t`: directly when `t` is contiguous; else on a
/// contiguous copy that is then written back through the view (so the storage `t`
/// shares changes, as in PyTorch). Counts one write in the storage's version when it
/// succeeds (what autograd checks): every in-place operation goes through here once,
/// or counts its write itself.
pub(crate) fn write_through(
    t: &Tensor,
    site: Site,
    f: impl FnOnce(&Tensor) -> Result<(), TensorError>,
) -> Result<(), TensorError> {
    if t.is_contiguous() {
        f(t)?;
    } else {
        let dense = contiguous_raw(t, site)?;
        f(&dense)?;
        strided_copy(t, &dense)?;
    }
    t.increment_version();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Device;

    #[test]
    fn write_through_counts_one_write_when_it_succeeds() {
        let dev = Device::host().unwrap();
        let t = Tensor::zeros(&[2, 3], &dev).unwrap();
        let site = std::panic::Location::caller();
        // Contiguous: written directly.
        write_through(&t, site, |_| Ok(())).unwrap();
        assert_eq!(t.version(), 1);
        // A view: through a temporary and a scatter, still one write, of the base.
        let view = t.t().unwrap();
        write_through(&view, site, |dense| {
            assert!(!dense.same_storage(&t), "a contiguous temporary");
            Ok(())
        })
        .unwrap();
        assert_eq!((t.version(), view.version()), (2, 2));
        // A failed update counts nothing.
        let failed = write_through(&view, site, |_| Err(TensorError::Unsupported("no".into())));
        assert!(failed.is_err());
        assert_eq!(t.version(), 2);
    }

    #[test]
    fn plans_merge_what_both_layouts_walk_alike() {
        // Contiguous to contiguous: one dimension.
        let p = CopyPlan::new(&[2, 3, 4], &[12, 4, 1], &[12, 4, 1]);
        assert_eq!(p.dims, vec![24]);
        assert_eq!((p.dst[0], p.src[0]), (1, 1));
        // A transpose: nothing merges.
        let p = CopyPlan::new(&[3, 2], &[2, 1], &[1, 3]);
        assert_eq!(p.dims, vec![3, 2]);
        assert_eq!(p.src, vec![1, 3]);
        // [2, 3, 4] permuted (2, 0, 1): the two outer source dimensions stay apart.
        let p = CopyPlan::new(&[4, 2, 3], &[6, 3, 1], &[1, 12, 4]);
        assert_eq!(p.dims, vec![4, 6]);
        assert_eq!(p.src, vec![1, 4]);
        // Dimensions of size 1 vanish; a single element is one dimension of 1.
        let p = CopyPlan::new(&[1, 5, 1], &[5, 1, 1], &[1, 7, 3]);
        assert_eq!((p.dims, p.src), (vec![5], vec![7]));
        let p = CopyPlan::new(&[1, 1], &[1, 1], &[9, 9]);
        assert_eq!(p.dims, vec![1]);
    }
}
