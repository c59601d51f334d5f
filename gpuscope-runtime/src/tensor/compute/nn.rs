//! The transformer kernels, recording nothing, on the host and on CUDA: layer norm
//! (forward; `dx`, `dw`, `db`), column sums (bias gradients), a bias added in place,
//! bias + exact GELU and its backward step, embedding lookup and its scatter-add, the
//! causal softmax and its backward step, and the split and merge of attention heads.
//!
//! Inputs that a kernel reads in order are gathered when they are views; outputs are
//! fresh contiguous tensors on the first input's device and stream.

use super::strided::contiguous_raw;
use super::{Exec, Site, Tensor, TensorError, alloc_like, check_float, check_pair, exec_of, host};
use crate::tensor::DType;

/// Checks that `p` (a weight or bias) is one float vector of `cols` on `x`'s device.
fn check_vector(op: &'static str, x: &Tensor, p: &Tensor, cols: usize) -> Result<(), TensorError> {
    check_pair(op, x, p)?;
    if p.shape() != [cols] {
        return Err(TensorError::ShapeMismatch {
            op,
            lhs: x.shape().to_vec(),
            rhs: p.shape().to_vec(),
            reason: format!("expected a vector of {cols} (the last dimension)"),
        });
    }
    Ok(())
}

/// The size of `t`'s last dimension (an error for a tensor of no dimension).
pub(crate) fn last_dim(op: &'static str, t: &Tensor) -> Result<usize, TensorError> {
    t.shape()
        .last()
        .copied()
        .ok_or_else(|| TensorError::InvalidArgument {
            op,
            reason: "needs at least one dimension (it works over the last one)".into(),
        })
}

/// What layer norm's forward step keeps for its backward step: each row's mean and
/// `1/√(var + eps)`.
pub(crate) struct NormStats {
    pub mean: Tensor,
    pub rstd: Tensor,
}

/// Layer norm of `x` over its last dimension with weight `w` and bias `b`: the output and
/// the row statistics.
pub(crate) fn layer_norm_raw(
    x: &Tensor,
    w: &Tensor,
    b: &Tensor,
    eps: f64,
    site: Site,
) -> Result<(Tensor, NormStats), TensorError> {
    check_float("layer_norm", x)?;
    let cols = last_dim("layer_norm", x)?;
    check_vector("layer_norm", x, w, cols)?;
    check_vector("layer_norm", x, b, cols)?;
    if eps.is_nan() || eps < 0.0 {
        return Err(TensorError::InvalidArgument {
            op: "layer_norm",
            reason: format!("eps must be a number >= 0, not {eps}"),
        });
    }
    let (x, w, b) = (
        contiguous_raw(x, site)?,
        contiguous_raw(w, site)?,
        contiguous_raw(b, site)?,
    );
    let rows = x.numel() / cols.max(1);
    let y = alloc_like(x.shape(), x.dtype(), &x, site)?;
    let mean = alloc_like(&[rows], x.dtype(), &x, site)?;
    let rstd = alloc_like(&[rows], x.dtype(), &x, site)?;
    match exec_of("layer_norm", &x)? {
        // SAFETY: fresh outputs and contiguous host inputs of one float dtype.
        Exec::Host => unsafe { host::nn::layer_norm(&y, &mean, &rstd, &x, &w, &b, eps)? },
        #[cfg(feature = "cuda")]
        Exec::Cuda => super::cuda::layer_norm(&y, &mean, &rstd, &x, &w, &b, eps)?,
    }
    Ok((y, NormStats { mean, rstd }))
}

/// The gradients of layer norm: `(dx, dw, db)`, each computed when `needs` says so.
pub(crate) fn layer_norm_backward_raw(
    g: &Tensor,
    x: &Tensor,
    stats: &NormStats,
    w: &Tensor,
    needs: [bool; 3],
    site: Site,
) -> Result<[Option<Tensor>; 3], TensorError> {
    check_pair("layer_norm backward", x, g)?;
    let cols = w.numel();
    let (g, x, w) = (
        contiguous_raw(g, site)?,
        contiguous_raw(x, site)?,
        contiguous_raw(w, site)?,
    );
    let dx = needs[0]
        .then(|| alloc_like(x.shape(), x.dtype(), &x, site))
        .transpose()?;
    let dw = needs[1]
        .then(|| alloc_like(&[cols], x.dtype(), &x, site))
        .transpose()?;
    let db = needs[2]
        .then(|| alloc_like(&[cols], x.dtype(), &x, site))
        .transpose()?;
    match exec_of("layer_norm", &x)? {
        // SAFETY: fresh outputs and contiguous host inputs of one float dtype.
        Exec::Host => unsafe {
            host::nn::layer_norm_backward(
                dx.as_ref(),
                dw.as_ref(),
                db.as_ref(),
                &g,
                &x,
                &stats.mean,
                &stats.rstd,
                &w,
            )?
        },
        #[cfg(feature = "cuda")]
        Exec::Cuda => {
            // The partial sums' buffers; dw and db are needed together or not at all
            // (cheaper than two passes), any missing one into a temporary.
            let partial = if needs[1] || needs[2] {
                let chunks = super::cuda::col_sum_chunks(stats.mean.numel());
                let pw = alloc_like(&[chunks, cols], x.dtype(), &x, site)?;
                let pb = alloc_like(&[chunks, cols], x.dtype(), &x, site)?;
                let dw = match &dw {
                    Some(t) => t.clone(),
                    None => alloc_like(&[cols], x.dtype(), &x, site)?,
                };
                let db = match &db {
                    Some(t) => t.clone(),
                    None => alloc_like(&[cols], x.dtype(), &x, site)?,
                };
                Some((dw, db, pw, pb))
            } else {
                None
            };
            super::cuda::layer_norm_backward(
                dx.as_ref(),
                partial.as_ref().map(|(a, b, c, d)| (a, b, c, d)),
                &g,
                &x,
                &stats.mean,
                &stats.rstd,
                &w,
            )?
        }
    }
    Ok([dx, dw, db])
}

/// `Σ` of `a` over every dimension but the last: `[cols]` (a bias's gradient).
pub(crate) fn col_sum_raw(a: &Tensor, site: Site) -> Result<Tensor, TensorError> {
    check_float("sum", a)?;
    let cols = last_dim("sum", a)?;
    let a = contiguous_raw(a, site)?;
    let out = alloc_like(&[cols], a.dtype(), &a, site)?;
    match exec_of("sum", &a)? {
        // SAFETY: a fresh output and its contiguous host input.
        Exec::Host => unsafe { host::nn::col_sum(&out, &a)? },
        #[cfg(feature = "cuda")]
        Exec::Cuda => {
            let rows = a.numel() / cols.max(1);
            let part = alloc_like(
                &[super::cuda::col_sum_chunks(rows), cols],
                a.dtype(),
                &a,
                site,
            )?;
            super::cuda::col_sum(&out, &a, &part)?
        }
    }
    Ok(out)
}

/// `y += b` over the last dimension, in place, for a contiguous `y` that nothing else
/// holds yet (an operation's fresh output): its version is left alone.
pub(crate) fn bias_add_fresh(y: &Tensor, b: &Tensor, site: Site) -> Result<(), TensorError> {
    let cols = last_dim("linear", y)?;
    check_vector("linear", y, b, cols)?;
    debug_assert!(y.is_contiguous());
    let b = contiguous_raw(b, site)?;
    match exec_of("linear", y)? {
        // SAFETY: a contiguous host tensor written in place, its bias distinct from it.
        Exec::Host => unsafe { host::nn::bias_add(y, &b) },
        #[cfg(feature = "cuda")]
        Exec::Cuda => super::cuda::bias_add(y, &b),
    }
}

/// `gelu(x + b)` (exact GELU), `b` over the last dimension.
pub(crate) fn bias_gelu_raw(x: &Tensor, b: &Tensor, site: Site) -> Result<Tensor, TensorError> {
    check_float("bias_gelu", x)?;
    let cols = last_dim("bias_gelu", x)?;
    check_vector("bias_gelu", x, b, cols)?;
    let (x, b) = (contiguous_raw(x, site)?, contiguous_raw(b, site)?);
    let y = alloc_like(x.shape(), x.dtype(), &x, site)?;
    match exec_of("bias_gelu", &x)? {
        // SAFETY: a fresh output and contiguous host inputs.
        Exec::Host => unsafe { host::nn::bias_gelu(&y, None, &x, &b)? },
        #[cfg(feature = "cuda")]
        Exec::Cuda => super::cuda::bias_gelu(&y, None, &x, &b)?,
    }
    Ok(y)
}

/// `g · gelu'(x + b)`: the gradient of [`bias_gelu_raw`] at its input (and, summed over
/// rows, at its bias).
pub(crate) fn bias_gelu_backward_raw(
    g: &Tensor,
    x: &Tensor,
    b: &Tensor,
    site: Site,
) -> Result<Tensor, TensorError> {
    check_pair("bias_gelu backward", x, g)?;
    let (g, x, b) = (
        contiguous_raw(g, site)?,
        contiguous_raw(x, site)?,
        contiguous_raw(b, site)?,
    );
    let dz = alloc_like(x.shape(), x.dtype(), &x, site)?;
    match exec_of("bias_gelu", &x)? {
        // SAFETY: a fresh output and contiguous host inputs.
        Exec::Host => unsafe { host::nn::bias_gelu(&dz, Some(&g), &x, &b)? },
        #[cfg(feature = "cuda")]
        Exec::Cuda => super::cuda::bias_gelu(&dz, Some(&g), &x, &b)?,
    }
    Ok(dz)
}

/// The indices of an embedding lookup as its backward step reads them: checked host
/// rows (read once, at the lookup), or the index tensor on the device (checked by the
/// kernel, which reports an index out of range in the device's error record).
pub(crate) enum Lookup {
    Host(Vec<usize>),
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    Device(Tensor),
}

/// `table[idx]`: for `idx` of shape `s` (`i64` or `i32`), rows of the `[rows, cols]`
/// table, shape `s + [cols]`.
pub(crate) fn embedding_raw(
    table: &Tensor,
    idx: &Tensor,
    site: Site,
) -> Result<(Tensor, Lookup), TensorError> {
    check_float("embedding", table)?;
    if table.ndim() != 2 {
        return Err(TensorError::ShapeMismatch {
            op: "embedding",
            lhs: table.shape().to_vec(),
            rhs: idx.shape().to_vec(),
            reason: "the table must be 2-D [rows, embedding size]".into(),
        });
    }
    if table.device() != idx.device() {
        return Err(TensorError::DeviceMismatch(
            table.device().description(),
            idx.device().description(),
        ));
    }
    if !matches!(idx.dtype(), DType::I64 | DType::I32) {
        return Err(TensorError::Unsupported(format!(
            "embedding: indices must be i64 or i32, not {}",
            idx.dtype()
        )));
    }
    if idx.stream() != table.stream() {
        idx.record_stream(table.stream())?;
    }
    let (rows, cols) = (table.shape()[0], table.shape()[1]);
    let (table, idx) = (contiguous_raw(table, site)?, contiguous_raw(idx, site)?);
    let mut shape = idx.shape().to_vec();
    shape.push(cols);
    let out = alloc_like(&shape, table.dtype(), &table, site)?;
    let lookup = match exec_of("embedding", &table)? {
        Exec::Host => {
            let rows_of = host::nn::indices("embedding", &idx, rows)?;
            // SAFETY: a fresh output, a contiguous host table, checked rows.
            unsafe { host::nn::embedding(&out, &table, &rows_of)? };
            Lookup::Host(rows_of)
        }
        #[cfg(feature = "cuda")]
        Exec::Cuda => {
            super::cuda::embedding(&out, &table, &idx)?;
            Lookup::Device(idx)
        }
    };
    Ok((out, lookup))
}

/// The gradient of an embedding lookup at its `[rows, cols]` table: `g`'s rows
/// scatter-added into zeros at the rows they were looked up from.
pub(crate) fn embedding_backward_raw(
    g: &Tensor,
    lookup: &Lookup,
    table_shape: &[usize],
    site: Site,
) -> Result<Tensor, TensorError> {
    let g = contiguous_raw(g, site)?;
    let dtable = alloc_like(table_shape, g.dtype(), &g, site)?;
    super::elementwise::zero_raw(&dtable, site)?;
    match lookup {
        // SAFETY: a zeroed fresh output, the contiguous gradient, checked rows.
        Lookup::Host(rows) => unsafe { host::nn::embedding_backward(&dtable, &g, rows)? },
        #[cfg(feature = "cuda")]
        Lookup::Device(idx) => super::cuda::embedding_backward(&dtable, &g, idx)?,
        #[cfg(not(feature = "cuda"))]
        Lookup::Device(_) => {
            return Err(TensorError::Unsupported(
                "embedding backward of device indices without CUDA support".into(),
            ));
        }
    }
    Ok(dtable)
}

/// Checks a causal softmax's input: at least 2-D, `[.., queries, keys]` with `queries <=
/// keys`; returns `(queries, keys)`.
fn causal_dims(t: &Tensor) -> Result<(usize, usize), TensorError> {
    if t.ndim() < 2 {
        return Err(TensorError::InvalidArgument {
            op: "causal_softmax",
            reason: format!(
                "needs scores [.., queries, keys]; this tensor has shape {:?}",
                t.shape()
            ),
        });
    }
    let (q, k) = (t.shape()[t.ndim() - 2], t.shape()[t.ndim() - 1]);
    if q > k {
        return Err(TensorError::InvalidArgument {
            op: "causal_softmax",
            reason: format!(
                "{q} queries against {k} keys: the queries are the last positions of the \
                 keys' sequence, so there can be no more of them"
            ),
        });
    }
    Ok((q, k))
}

/// Softmax over the last dimension of `scale · x` with the keys after each query masked
/// (query `i` of `q` sees keys `0..=i + k - q`); zeros where masked.
pub(crate) fn causal_softmax_raw(
    x: &Tensor,
    scale: f64,
    site: Site,
) -> Result<Tensor, TensorError> {
    check_float("causal_softmax", x)?;
    let (q, k) = causal_dims(x)?;
    let x = contiguous_raw(x, site)?;
    let y = alloc_like(x.shape(), x.dtype(), &x, site)?;
    if q == 0 {
        return Ok(y);
    }
    match exec_of("causal_softmax", &x)? {
        // SAFETY: a fresh output and its contiguous host input.
        Exec::Host => unsafe { host::nn::causal_softmax(&y, &x, None, q, k, scale)? },
        #[cfg(feature = "cuda")]
        Exec::Cuda => super::cuda::causal_softmax(&y, &x, None, q, k, scale)?,
    }
    Ok(y)
}

/// The gradient of [`causal_softmax_raw`] at its input, given its output `y`.
pub(crate) fn causal_softmax_backward_raw(
    g: &Tensor,
    y: &Tensor,
    scale: f64,
    site: Site,
) -> Result<Tensor, TensorError> {
    check_pair("causal_softmax backward", y, g)?;
    let (q, k) = causal_dims(y)?;
    let (g, y) = (contiguous_raw(g, site)?, contiguous_raw(y, site)?);
    let dx = alloc_like(y.shape(), y.dtype(), &y, site)?;
    if q == 0 {
        return Ok(dx);
    }
    match exec_of("causal_softmax", &y)? {
        // SAFETY: a fresh output and contiguous host inputs.
        Exec::Host => unsafe { host::nn::causal_softmax(&dx, &y, Some(&g), q, k, scale)? },
        #[cfg(feature = "cuda")]
        Exec::Cuda => super::cuda::causal_softmax(&dx, &y, Some(&g), q, k, scale)?,
    }
    Ok(dx)
}

/// [`causal_softmax_backward_raw`] written over `g` itself (a fresh gradient nothing
/// else holds: attention's own `dP`), which becomes the input's gradient.
pub(crate) fn causal_softmax_backward_in_place(
    g: &Tensor,
    y: &Tensor,
    scale: f64,
) -> Result<(), TensorError> {
    check_pair("causal_softmax backward", y, g)?;
    let (q, k) = causal_dims(y)?;
    if g.shape() != y.shape() || !g.is_contiguous() || !y.is_contiguous() {
        return Err(TensorError::InvalidArgument {
            op: "causal_softmax backward",
            reason: "in place, the gradient and the output must be contiguous of one shape".into(),
        });
    }
    if q == 0 {
        return Ok(());
    }
    match exec_of("causal_softmax", y)? {
        // SAFETY: contiguous host tensors; the kernel reads each row of `g` before it
        // writes it.
        Exec::Host => unsafe { host::nn::causal_softmax(g, y, Some(g), q, k, scale) },
        #[cfg(feature = "cuda")]
        Exec::Cuda => super::cuda::causal_softmax(g, y, Some(g), q, k, scale),
    }
}

/// Packed projections `[B, T, S·H·D]` into head-major `[S, B, H, T, D]` (`to_heads`),
/// or a head-major tensor back into `[B, T, S·H·D]`. `dims` is `[B, T, S, H, D]`.
pub(crate) fn heads_raw(
    src: &Tensor,
    dims: [usize; 5],
    to_heads: bool,
    site: Site,
) -> Result<Tensor, TensorError> {
    check_float("attention heads", src)?;
    let [b, t, s, h, d] = dims;
    let shape = if to_heads {
        vec![s, b, h, t, d]
    } else {
        vec![b, t, s * h * d]
    };
    if src.numel() != b * t * s * h * d {
        return Err(TensorError::ShapeMismatch {
            op: "attention heads",
            lhs: src.shape().to_vec(),
            rhs: shape,
            reason: "the element counts differ".into(),
        });
    }
    let src = contiguous_raw(src, site)?;
    let dst = alloc_like(&shape, src.dtype(), &src, site)?;
    match exec_of("attention heads", &src)? {
        // SAFETY: a fresh output and its contiguous host input, as many elements.
        Exec::Host => unsafe { host::nn::heads(&dst, &src, [t, s, h, d], to_heads)? },
        #[cfg(feature = "cuda")]
        Exec::Cuda => super::cuda::heads(&dst, &src, [t, s, h, d], to_heads)?,
    }
    Ok(dst)
}
