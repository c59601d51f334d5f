//! Host kernels of the transformer operations (plain loops, `f32`/`f64`): layer norm,
//! column sums, bias and exact GELU, embedding lookup and scatter-add, the causal
//! softmax, the attention head split and merge, and batched matrix products.
//!
//! Callers guarantee what [`super`]'s accessors need: host tensors of the element type,
//! contiguous, outputs fresh (not overlapping an input) unless a kernel says otherwise.
//! Sums over rows accumulate in `f64`, in a fixed order.

use super::super::{DType, Tensor, TensorError};
use super::{Float, gelu_erf, gelu_erf_grad, slice, slice_mut};
use crate::tensor::Element;

/// `y = (x - mean)·rstd·w + b` per row of `cols`; writes each row's mean and rstd.
///
/// # Safety
/// See the module documentation.
pub(crate) unsafe fn layer_norm(
    y: &Tensor,
    mean: &Tensor,
    rstd: &Tensor,
    x: &Tensor,
    w: &Tensor,
    b: &Tensor,
    eps: f64,
) -> Result<(), TensorError> {
    let cols = w.numel();
    with_float!(y.dtype(), T => {
        // SAFETY: the caller's promise.
        let (y, mean, rstd, x, w, b) = unsafe {
            (slice_mut::<T>(y), slice_mut::<T>(mean), slice_mut::<T>(rstd), slice::<T>(x), slice::<T>(w), slice::<T>(b))
        };
        if cols == 0 {
            return Ok(());
        }
        for (r, (yr, xr)) in y.chunks_exact_mut(cols).zip(x.chunks_exact(cols)).enumerate() {
            let mu = xr.iter().map(|v| v.to_f64()).sum::<f64>() / cols as f64;
            let var = xr.iter().map(|v| (v.to_f64() - mu).powi(2)).sum::<f64>() / cols as f64;
            let rs = 1.0 / (var + eps).sqrt();
            let (mu_t, rs_t) = (T::of(mu), T::of(rs));
            for j in 0..cols {
                yr[j] = (xr[j] - mu_t) * rs_t * w[j] + b[j];
            }
            mean[r] = mu_t;
            rstd[r] = rs_t;
        }
        Ok(())
    })
}

/// `dx` of layer norm, and `dw`, `db` (written, not accumulated) when given.
///
/// # Safety
/// See the module documentation.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn layer_norm_backward(
    dx: Option<&Tensor>,
    dw: Option<&Tensor>,
    db: Option<&Tensor>,
    g: &Tensor,
    x: &Tensor,
    mean: &Tensor,
    rstd: &Tensor,
    w: &Tensor,
) -> Result<(), TensorError> {
    let cols = w.numel();
    with_float!(g.dtype(), T => {
        // SAFETY: the caller's promise.
        let (g, x, mean, rstd, w) = unsafe { (slice::<T>(g), slice::<T>(x), slice::<T>(mean), slice::<T>(rstd), slice::<T>(w)) };
        if cols == 0 {
            return Ok(());
        }
        let rows = g.len() / cols;
        if let Some(dx) = dx {
            // SAFETY: a fresh output.
            let dx = unsafe { slice_mut::<T>(dx) };
            for r in 0..rows {
                let (gr, xr) = (&g[r * cols..(r + 1) * cols], &x[r * cols..(r + 1) * cols]);
                let (mu, rs) = (mean[r], rstd[r]);
                let (mut s1, mut s2) = (0.0f64, 0.0f64);
                for j in 0..cols {
                    let wg = (gr[j] * w[j]).to_f64();
                    s1 += wg;
                    s2 += wg * ((xr[j] - mu) * rs).to_f64();
                }
                let (s1, s2) = (T::of(s1 / cols as f64), T::of(s2 / cols as f64));
                for j in 0..cols {
                    let xh = (xr[j] - mu) * rs;
                    dx[r * cols + j] = rs * (gr[j] * w[j] - s1 - xh * s2);
                }
            }
        }
        if dw.is_some() || db.is_some() {
            let (mut aw, mut ab) = (vec![0.0f64; cols], vec![0.0f64; cols]);
            for r in 0..rows {
                for j in 0..cols {
                    let gv = g[r * cols + j];
                    aw[j] += (gv * (x[r * cols + j] - mean[r]) * rstd[r]).to_f64();
                    ab[j] += gv.to_f64();
                }
            }
            for (t, acc) in [(dw, aw), (db, ab)] {
                if let Some(t) = t {
                    // SAFETY: a fresh output of `cols` elements.
                    let out = unsafe { slice_mut::<T>(t) };
                    for (o, a) in out.iter_mut().zip(acc) {
                        *o = T::of(a);
                    }
                }
            }
        }
        Ok(())
    })
}

/// `out[c] = Σ_r a[r, c]` for `a` viewed as `[rows, out.numel()]`.
///
/// # Safety
/// See the module documentation.
pub(crate) unsafe fn col_sum(out: &Tensor, a: &Tensor) -> Result<(), TensorError> {
    let cols = out.numel();
    with_float!(out.dtype(), T => {
        // SAFETY: the caller's promise.
        let (o, a) = unsafe { (slice_mut::<T>(out), slice::<T>(a)) };
        let mut acc = vec![0.0f64; cols];
        if cols > 0 {
            for row in a.chunks_exact(cols) {
                for (s, v) in acc.iter_mut().zip(row) {
                    *s += v.to_f64();
                }
            }
        }
        for (o, s) in o.iter_mut().zip(acc) {
            *o = T::of(s);
        }
        Ok(())
    })
}

/// `y[r, c] += b[c]`, in place.
///
/// # Safety
/// See the module documentation (`y` is written in place, `b` does not overlap it).
pub(crate) unsafe fn bias_add(y: &Tensor, b: &Tensor) -> Result<(), TensorError> {
    let cols = b.numel();
    with_float!(y.dtype(), T => {
        // SAFETY: the caller's promise.
        let (y, b) = unsafe { (slice_mut::<T>(y), slice::<T>(b)) };
        if cols > 0 {
            for row in y.chunks_exact_mut(cols) {
                for (v, bv) in row.iter_mut().zip(b) {
                    *v += *bv;
                }
            }
        }
        Ok(())
    })
}

/// `y = gelu(x + b)` (exact GELU) and, when `g` is given, `y = g·gelu'(x + b)` instead.
///
/// # Safety
/// See the module documentation.
pub(crate) unsafe fn bias_gelu(
    y: &Tensor,
    g: Option<&Tensor>,
    x: &Tensor,
    b: &Tensor,
) -> Result<(), TensorError> {
    let cols = b.numel();
    with_float!(y.dtype(), T => {
        // SAFETY: the caller's promise.
        let (y, x, b) = unsafe { (slice_mut::<T>(y), slice::<T>(x), slice::<T>(b)) };
        // SAFETY: as above.
        let g = g.map(|g| unsafe { slice::<T>(g) });
        for i in 0..y.len() {
            let z = x[i] + b[i % cols];
            y[i] = match g {
                Some(g) => g[i] * gelu_erf_grad(z),
                None => gelu_erf(z),
            };
        }
        Ok(())
    })
}

/// The row of the table that each index picks, checked: `idx` holds `i64` or `i32`
/// indices in `0..rows`.
pub(crate) fn indices(
    op: &'static str,
    idx: &Tensor,
    rows: usize,
) -> Result<Vec<usize>, TensorError> {
    let raw: Vec<i64> = match idx.dtype() {
        // SAFETY: a host tensor of that type, only read.
        DType::I64 => unsafe { slice::<i64>(idx) }.to_vec(),
        // SAFETY: as above.
        DType::I32 => unsafe { slice::<i32>(idx) }
            .iter()
            .map(|&v| v as i64)
            .collect(),
        other => {
            return Err(TensorError::Unsupported(format!(
                "{op}: indices must be i64 or i32, not {other}"
            )));
        }
    };
    raw.into_iter()
        .enumerate()
        .map(|(i, v)| {
            if v < 0 || v as usize >= rows {
                Err(TensorError::InvalidArgument {
                    op,
                    reason: format!(
                        "index {v} at position {i} is out of range for a table of {rows} rows \
                         (indices must be in 0..{rows}: check the tokens against the vocabulary \
                         size)"
                    ),
                })
            } else {
                Ok(v as usize)
            }
        })
        .collect()
}

/// `out[i, :] = table[idx[i], :]`.
///
/// # Safety
/// See the module documentation; the indices are rows of `table`.
pub(crate) unsafe fn embedding(
    out: &Tensor,
    table: &Tensor,
    idx: &[usize],
) -> Result<(), TensorError> {
    let cols = table.shape()[1];
    with_float!(out.dtype(), T => {
        // SAFETY: the caller's promise.
        let (o, t) = unsafe { (slice_mut::<T>(out), slice::<T>(table)) };
        for (i, &r) in idx.iter().enumerate() {
            o[i * cols..(i + 1) * cols].copy_from_slice(&t[r * cols..(r + 1) * cols]);
        }
        Ok(())
    })
}

/// `dtable[idx[i], :] += g[i, :]` for a zeroed `dtable`, in order.
///
/// # Safety
/// See the module documentation; the indices are rows of `dtable`.
pub(crate) unsafe fn embedding_backward(
    dtable: &Tensor,
    g: &Tensor,
    idx: &[usize],
) -> Result<(), TensorError> {
    let cols = dtable.shape()[1];
    with_float!(dtable.dtype(), T => {
        // SAFETY: the caller's promise.
        let (d, g) = unsafe { (slice_mut::<T>(dtable), slice::<T>(g)) };
        for (i, &r) in idx.iter().enumerate() {
            for (dv, gv) in d[r * cols..(r + 1) * cols].iter_mut().zip(&g[i * cols..(i + 1) * cols]) {
                *dv += *gv;
            }
        }
        Ok(())
    })
}

/// The causal softmax of rows of `cols` whose query index is `row % queries + cols -
/// queries`: softmax of `scale·x` over the columns up to it, zeros after. With `g`, its
/// backward step instead: `x_or_y` is then the forward output and the result
/// `scale·y·(g - Σ g·y)` below the diagonal; `out` may then be `g` itself (in place:
/// each row's sum is taken before the row is written).
///
/// # Safety
/// See the module documentation; `out` may be `g` (and nothing else).
pub(crate) unsafe fn causal_softmax(
    out: &Tensor,
    x_or_y: &Tensor,
    g: Option<&Tensor>,
    queries: usize,
    cols: usize,
    scale: f64,
) -> Result<(), TensorError> {
    with_float!(out.dtype(), T => {
        let n = out.numel();
        // Raw pointers: `out` and `g` may be one tensor.
        let o = out.addr().0 as *mut T;
        // SAFETY: the caller's promise; `x_or_y` is distinct from `out`.
        let x = unsafe { slice::<T>(x_or_y) };
        let gp = g.map(|g| g.addr().0 as *const T);
        if cols == 0 {
            return Ok(());
        }
        let sc = T::of(scale);
        for r in 0..n / cols {
            let valid = r % queries + cols - queries + 1;
            let base = r * cols;
            let xr = &x[base..base + cols];
            // SAFETY (every access below): offsets inside row r of tensors of `n`
            // elements; reads of `g` at a column happen before the write of `out` there.
            match gp {
                None => {
                    let mut m = T::of(f64::NEG_INFINITY);
                    for &v in &xr[..valid] {
                        let v = v * sc;
                        if v > m || v.is_nan() {
                            m = v;
                        }
                    }
                    let mut s = T::ZERO;
                    for (j, &v) in xr[..valid].iter().enumerate() {
                        let e = (v * sc - m).exp();
                        unsafe { *o.add(base + j) = e };
                        s += e;
                    }
                    for j in 0..valid {
                        unsafe { *o.add(base + j) = *o.add(base + j) / s };
                    }
                }
                Some(gp) => {
                    let mut s = T::ZERO;
                    for (j, &y) in xr[..valid].iter().enumerate() {
                        s += unsafe { *gp.add(base + j) } * y;
                    }
                    for (j, &y) in xr[..valid].iter().enumerate() {
                        unsafe { *o.add(base + j) = sc * y * (*gp.add(base + j) - s) };
                    }
                }
            }
            for j in valid..cols {
                unsafe { *o.add(base + j) = T::ZERO };
            }
        }
        Ok(())
    })
}

/// Between packed projections `[B, T, S, H, D]` and head-major `[S, B, H, T, D]`
/// (`to_heads`: packed into head-major; else back).
///
/// # Safety
/// See the module documentation; both hold `B·T·S·H·D` elements of one dtype.
pub(crate) unsafe fn heads(
    dst: &Tensor,
    src: &Tensor,
    [t_len, s_len, h_len, d_len]: [usize; 4],
    to_heads: bool,
) -> Result<(), TensorError> {
    with_float!(dst.dtype(), T => {
        // SAFETY: the caller's promise.
        let (d, s) = unsafe { (slice_mut::<T>(dst), slice::<T>(src)) };
        let b_len = d.len() / (t_len * s_len * h_len * d_len).max(1);
        let mut i = 0;
        for b in 0..b_len {
            for t in 0..t_len {
                for si in 0..s_len {
                    for h in 0..h_len {
                        let j = (((si * b_len + b) * h_len + h) * t_len + t) * d_len;
                        if to_heads {
                            d[j..j + d_len].copy_from_slice(&s[i..i + d_len]);
                        } else {
                            d[i..i + d_len].copy_from_slice(&s[j..j + d_len]);
                        }
                        i += d_len;
                    }
                }
            }
        }
        Ok(())
    })
}

/// `c[i] = alpha · op(a[i]) @ op(b[i])` for each of `batch` matrices: `op(a[i])` is
/// `m×k`, `op(b[i])` `k×n`, each stored row-major contiguous (`[m, k]`, or `[k, m]`
/// when `ta`), one after another.
///
/// # Safety
/// See the module documentation; the tensors hold `batch` such matrices.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn bmm(
    c: &Tensor,
    a: &Tensor,
    b: &Tensor,
    (ta, tb): (bool, bool),
    [batch, m, k, n]: [usize; 4],
    alpha: f64,
) -> Result<(), TensorError> {
    with_float!(c.dtype(), T => {
        let (pc, pa, pb) = (c.addr().0 as *mut T, a.addr().0 as *const T, b.addr().0 as *const T);
        // Row and column strides of op(A) and op(B).
        let (rsa, csa) = if ta { (1, m) } else { (k, 1) };
        let (rsb, csb) = if tb { (1, k) } else { (n, 1) };
        for i in 0..batch {
            // SAFETY: matrix i of each tensor, inside it by the caller's promise.
            unsafe {
                T::GEMM(
                    m,
                    k,
                    n,
                    T::of(alpha),
                    pa.add(i * m * k),
                    rsa as isize,
                    csa as isize,
                    pb.add(i * k * n),
                    rsb as isize,
                    csb as isize,
                    T::ZERO,
                    pc.add(i * m * n),
                    n as isize,
                    1,
                )
            };
        }
        Ok(())
    })
}
