//! The host's strided copy between two layouts (any dtype, by element size).

use super::super::strided::CopyPlan;
use super::super::{Tensor, TensorError};

/// `dst = src` element for element following a copy plan (the strides of both), for
/// any dtype (elements are moved as 1-, 2-, 4- or 8-byte words).
///
/// # Safety
/// See the module documentation; `dst` and `src` do not overlap and the plan's strides
/// keep every element inside them.
pub(crate) unsafe fn strided_copy(
    dst: &Tensor,
    src: &Tensor,
    plan: &CopyPlan,
) -> Result<(), TensorError> {
    let (d, s) = (dst.addr().0, src.addr().0);
    // SAFETY: the caller's promise; host addresses of elements are aligned to their size.
    unsafe {
        match dst.dtype().size() {
            1 => copy_words::<u8>(d as *mut u8, s as *const u8, plan),
            2 => copy_words::<u16>(d as *mut u16, s as *const u16, plan),
            4 => copy_words::<u32>(d as *mut u32, s as *const u32, plan),
            8 => copy_words::<u64>(d as *mut u64, s as *const u64, plan),
            other => {
                return Err(TensorError::Unsupported(format!(
                    "strided copy of {other}-byte elements"
                )));
            }
        }
    }
    Ok(())
}

/// The loop of [`strided_copy`]: the innermost dimension in a loop, the outer ones
/// advanced like an odometer.
///
/// # Safety
/// As [`strided_copy`].
unsafe fn copy_words<E: Copy>(d: *mut E, s: *const E, plan: &CopyPlan) {
    let nd = plan.dims.len();
    let (inner, id, is) = (plan.dims[nd - 1], plan.dst[nd - 1], plan.src[nd - 1]);
    let outer: usize = plan.dims[..nd - 1].iter().product();
    let mut idx = vec![0usize; nd];
    let (mut od, mut os) = (0usize, 0usize);
    for _ in 0..outer {
        for j in 0..inner {
            // SAFETY: the plan keeps every offset inside its tensor.
            unsafe { *d.add(od + j * id) = *s.add(os + j * is) };
        }
        let mut k = nd - 1;
        while k > 0 {
            k -= 1;
            idx[k] += 1;
            od += plan.dst[k];
            os += plan.src[k];
            if idx[k] < plan.dims[k] {
                break;
            }
            od -= plan.dst[k] * plan.dims[k];
            os -= plan.src[k] * plan.dims[k];
            idx[k] = 0;
        }
    }
}
