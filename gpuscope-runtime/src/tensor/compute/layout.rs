//! Views and reshapes as plain layouts, recording nothing: the same storage under
//! other shapes, strides and offsets.

use super::strided::contiguous_raw;
use super::{Site, Tensor, TensorError};

/// Checks that `shape` holds as many elements as `t`.
pub(crate) fn check_numel(
    op: &'static str,
    t: &Tensor,
    shape: &[usize],
) -> Result<(), TensorError> {
    let n: usize = shape.iter().product();
    if n != t.numel() {
        return Err(TensorError::InvalidArgument {
            op,
            reason: format!(
                "shape {shape:?} holds {n} elements; the tensor {:?} has {}",
                t.shape(),
                t.numel()
            ),
        });
    }
    Ok(())
}

/// `t` under `shape` (as many elements), nothing recorded: a view when `t` is
/// contiguous, else a contiguous copy under `shape`.
pub(crate) fn reshape_raw(t: &Tensor, shape: &[usize], site: Site) -> Result<Tensor, TensorError> {
    check_numel("reshape", t, shape)?;
    if t.shape() == shape {
        return Ok(t.alias(None));
    }
    let dense = contiguous_raw(t, site)?;
    Ok(dense.view_with(shape.to_vec(), None))
}

/// `t` with its dimensions reordered (`perm[i]` is the dimension of `t` that becomes
/// dimension `i`): a view, nothing recorded.
pub(crate) fn permuted(t: &Tensor, perm: &[usize]) -> Tensor {
    let shape = perm.iter().map(|&p| t.shape()[p]).collect();
    let strides = perm.iter().map(|&p| t.strides()[p]).collect();
    t.as_strided(shape, strides, t.storage_offset(), None)
}

/// `t` narrowed to `len` elements from `start` along `dim`: a view, nothing recorded.
pub(crate) fn narrowed(t: &Tensor, dim: usize, start: usize, len: usize) -> Tensor {
    let mut shape = t.shape().to_vec();
    shape[dim] = len;
    let offset = t.storage_offset() + start * t.strides()[dim];
    t.as_strided(shape, t.strides().to_vec(), offset, None)
}
