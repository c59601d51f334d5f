//! Broadcasting as NumPy and PyTorch do it: shapes are aligned on the right; a
//! dimension of size 1 (or a missing one) stretches to the other operand's size.
//!
//! A [`Broadcast`] is the plan the kernels follow: the output's dimensions with runs
//! that both operands walk alike merged, and each operand's stride per merged
//! dimension (0 where it is broadcast). The strides are the operands' own, so views
//! (a transposed operand, say) are read in place, without a copy.

use super::TensorError;

/// At most this many merged dimensions reach a kernel.
pub(crate) const MAX_DIMS: usize = 4;

/// The shape two shapes broadcast to.
pub(crate) fn broadcast_shape(
    op: &'static str,
    a: &[usize],
    b: &[usize],
) -> Result<Vec<usize>, TensorError> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i < n - a.len() {
            1
        } else {
            a[i - (n - a.len())]
        };
        let db = if i < n - b.len() {
            1
        } else {
            b[i - (n - b.len())]
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(TensorError::ShapeMismatch {
                op,
                lhs: a.to_vec(),
                rhs: b.to_vec(),
                reason: format!("dimension {i} is {da} against {db}; sizes must match or one be 1"),
            });
        };
    }
    Ok(out)
}

/// A broadcast plan: merged output dimensions (outermost first) and each operand's
/// element stride along them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Broadcast {
    pub dims: Vec<usize>,
    pub sa: Vec<usize>,
    pub sb: Vec<usize>,
}

impl Broadcast {
    /// The plan for reading contiguous `a` and `b` into an `out`-shaped result.
    #[cfg(test)]
    pub fn new(out: &[usize], a: &[usize], b: &[usize]) -> Broadcast {
        let (ca, cb) = (
            crate::tensor::contiguous_strides(a),
            crate::tensor::contiguous_strides(b),
        );
        Broadcast::strided(out, (a, &ca), (b, &cb))
    }

    /// The plan for reading `a` and `b`, each a shape and its element strides, into an
    /// `out`-shaped result (`out` is what [`broadcast_shape`] gave, or `a`'s shape when
    /// `b` broadcasts into `a`).
    pub fn strided(out: &[usize], a: (&[usize], &[usize]), b: (&[usize], &[usize])) -> Broadcast {
        let sa = strides_into(out, a.0, a.1);
        let sb = strides_into(out, b.0, b.1);
        Broadcast::merged(out, &sa, &sb)
    }

    /// The plan for walking `shape` with element strides `sa` and `sb` (one per
    /// dimension of `shape`): dimensions of size 1 dropped, and each run of dimensions
    /// that both stride lists walk as one merged into one (outermost first; at least one
    /// dimension).
    pub fn merged(shape: &[usize], sa: &[usize], sb: &[usize]) -> Broadcast {
        let mut dims: Vec<usize> = Vec::new();
        let mut ra: Vec<usize> = Vec::new();
        let mut rb: Vec<usize> = Vec::new();
        for i in 0..shape.len() {
            if shape[i] == 1 {
                continue;
            }
            if let (Some(&d), Some(&pa), Some(&pb)) = (dims.last(), ra.last(), rb.last()) {
                // The previous (outer) dimension continues this one for both operands.
                if pa == sa[i] * shape[i] && pb == sb[i] * shape[i] {
                    let last = dims.len() - 1;
                    dims[last] = d * shape[i];
                    ra[last] = sa[i];
                    rb[last] = sb[i];
                    continue;
                }
            }
            dims.push(shape[i]);
            ra.push(sa[i]);
            rb.push(sb[i]);
        }
        if dims.is_empty() {
            dims.push(1);
            ra.push(0);
            rb.push(0);
        }
        Broadcast {
            dims,
            sa: ra,
            sb: rb,
        }
    }

    /// Whether both operands are read in order, element for element (no broadcast).
    pub fn is_elementwise(&self) -> bool {
        self.dims.len() == 1 && self.sa[0] == 1 && self.sb[0] == 1
    }

    /// The plan padded on the outside to exactly [`MAX_DIMS`] dimensions, for the CUDA
    /// kernel; `None` when more dimensions remain after merging.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub fn padded(&self) -> Option<([i64; MAX_DIMS], [i64; MAX_DIMS], [i64; MAX_DIMS])> {
        let n = self.dims.len();
        if n > MAX_DIMS {
            return None;
        }
        let mut d = [1i64; MAX_DIMS];
        let mut a = [0i64; MAX_DIMS];
        let mut b = [0i64; MAX_DIMS];
        for i in 0..n {
            d[MAX_DIMS - n + i] = self.dims[i] as i64;
            a[MAX_DIMS - n + i] = self.sa[i] as i64;
            b[MAX_DIMS - n + i] = self.sb[i] as i64;
        }
        Some((d, a, b))
    }
}

/// The strides of an operand of `shape` with `strides` read as if it had `out`'s shape
/// (0 on broadcast dimensions).
fn strides_into(out: &[usize], shape: &[usize], strides: &[usize]) -> Vec<usize> {
    let off = out.len() - shape.len();
    let mut into = vec![0; out.len()];
    for i in 0..shape.len() {
        into[off + i] = if shape[i] == 1 { 0 } else { strides[i] };
    }
    into
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        assert_eq!(broadcast_shape("t", &[4, 3], &[3]).unwrap(), vec![4, 3]);
        assert_eq!(broadcast_shape("t", &[4, 1], &[1, 5]).unwrap(), vec![4, 5]);
        assert_eq!(broadcast_shape("t", &[], &[2]).unwrap(), vec![2]);
        assert!(broadcast_shape("t", &[4, 3], &[4]).is_err());
    }

    #[test]
    fn plans_merge() {
        let p = Broadcast::new(&[4, 3], &[4, 3], &[4, 3]);
        assert!(p.is_elementwise());
        let p = Broadcast::new(&[4, 3], &[4, 3], &[3]);
        assert_eq!(
            p,
            Broadcast {
                dims: vec![4, 3],
                sa: vec![3, 1],
                sb: vec![0, 1]
            }
        );
        let p = Broadcast::new(&[2, 3, 4], &[2, 3, 4], &[]);
        assert_eq!(
            p,
            Broadcast {
                dims: vec![24],
                sa: vec![1],
                sb: vec![0]
            }
        );
        let p = Broadcast::new(&[4, 3], &[4, 3], &[4, 1]);
        assert_eq!(
            p,
            Broadcast {
                dims: vec![4, 3],
                sa: vec![3, 1],
                sb: vec![1, 0]
            }
        );
    }

    #[test]
    fn plans_follow_the_operands_strides() {
        // A transposed [3, 4] (strides [1, 3]) plus a contiguous [3, 4]: nothing merges.
        let p = Broadcast::strided(&[4, 3], (&[4, 3], &[1, 4]), (&[4, 3], &[3, 1]));
        assert_eq!(p.dims, vec![4, 3]);
        assert_eq!((p.sa.clone(), p.sb.clone()), (vec![1, 4], vec![3, 1]));
        assert!(!p.is_elementwise());
        // A contiguous [2, 3, 4] and one permuted from [4, 2, 3]: the last two
        // dimensions of the first merge only where the second walks them alike.
        let p = Broadcast::strided(
            &[2, 3, 4],
            (&[2, 3, 4], &[12, 4, 1]),
            (&[2, 3, 4], &[3, 1, 6]),
        );
        assert_eq!(p.dims, vec![6, 4]);
        assert_eq!((p.sa.clone(), p.sb.clone()), (vec![4, 1], vec![1, 6]));
        // A row of a narrowed matrix (row stride 10) with a broadcast row vector.
        let p = Broadcast::strided(&[2, 3], (&[2, 3], &[10, 1]), (&[3], &[1]));
        assert_eq!((p.dims, p.sa, p.sb), (vec![2, 3], vec![10, 1], vec![0, 1]));
    }
}
