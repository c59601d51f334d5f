//! CUDA launches of the transformer kernels (`kernels/nn.cu`). Callers pass contiguous
//! tensors of one float dtype and have checked the shapes; rows of fewer than 2^32
//! elements (the kernels index inside a row with 32 bits).

use cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};

use crate::backend::BackendError;

use super::super::optim::AdamWStep;
use super::{
    DType, Scalar, Tensor, TensorError, cuda_of, elementwise_cfg, ptr, target, vec4_target,
};

/// Warps of a row-per-warp kernel's block (`GS_WARPS`).
const WARPS: u32 = 8;
/// Rows one block of a column sum walks (`GS_COL_ROWS` threads down, each every 8th).
const COL_CHUNK_ROWS: u64 = 256;

fn u32_of(what: &str, v: usize) -> Result<u32, TensorError> {
    u32::try_from(v).map_err(|_| {
        TensorError::Unsupported(format!(
            "{what} of {v} elements: the CUDA kernels index rows with 32 bits"
        ))
    })
}

/// One warp per row, enough blocks for every row (up to the grid limit; the kernels
/// loop over the rest).
fn warp_rows_cfg(rows: u64) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (rows.div_ceil(WARPS as u64).clamp(1, 1 << 20) as u32, 1, 1),
        block_dim: (32 * WARPS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Blocks of 32 columns × 8 threads, one block row per chunk of rows.
fn col_cfg(cols: u32, chunks: u64) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (cols.div_ceil(32), chunks as u32, 1),
        block_dim: (32, 8, 1),
        shared_mem_bytes: 0,
    }
}

/// Chunks of [`COL_CHUNK_ROWS`] rows for a column sum over `rows` (at most 65535, the
/// grid's second dimension).
fn col_chunks(rows: u64) -> (u64, u64) {
    let chunk = COL_CHUNK_ROWS.max(rows.div_ceil(65_535));
    (rows.div_ceil(chunk).max(1), chunk)
}

pub(crate) fn layer_norm(
    y: &Tensor,
    mean: &Tensor,
    rstd: &Tensor,
    x: &Tensor,
    w: &Tensor,
    b: &Tensor,
    eps: f64,
) -> Result<(), TensorError> {
    let cols = u32_of("a layer norm row", w.numel())?;
    let rows = mean.numel() as u64;
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let t = target(y)?;
    let eps = Scalar::new(y.dtype(), eps);
    let (py, pm, pr, px, pw, pb) = (ptr(y), ptr(mean), ptr(rstd), ptr(x), ptr(w), ptr(b));
    launch!(t, "layer_norm", warp_rows_cfg(rows), |l| {
        l.arg(&rows)
            .arg(&cols)
            .arg(&py)
            .arg(&pm)
            .arg(&pr)
            .arg(&px)
            .arg(&pw)
            .arg(&pb);
        eps.push(l);
    })
}

/// `dx` (when given) and the partial sums of `dw`, `db` into `pw`, `pb` (`[chunks,
/// cols]`, when given), then `dw`, `db` from them.
#[allow(clippy::too_many_arguments)]
pub(crate) fn layer_norm_backward(
    dx: Option<&Tensor>,
    dwdb: Option<(&Tensor, &Tensor, &Tensor, &Tensor)>,
    g: &Tensor,
    x: &Tensor,
    mean: &Tensor,
    rstd: &Tensor,
    w: &Tensor,
) -> Result<(), TensorError> {
    let cols = u32_of("a layer norm row", w.numel())?;
    let rows = mean.numel() as u64;
    if cols == 0 {
        return Ok(());
    }
    let t = target(g)?;
    let (pg, px, pm, pr, pw) = (ptr(g), ptr(x), ptr(mean), ptr(rstd), ptr(w));
    if let Some(dx) = dx
        && rows > 0
    {
        let pd = ptr(dx);
        launch!(t, "layer_norm_dx", warp_rows_cfg(rows), |l| {
            l.arg(&rows)
                .arg(&cols)
                .arg(&pd)
                .arg(&pg)
                .arg(&px)
                .arg(&pm)
                .arg(&pr)
                .arg(&pw);
        })?;
    }
    if let Some((dw, db, part_w, part_b)) = dwdb {
        let (chunks, chunk) = col_chunks(rows);
        let (ppw, ppb) = (ptr(part_w), ptr(part_b));
        if rows > 0 {
            launch!(t, "layer_norm_dwdb", col_cfg(cols, chunks), |l| {
                l.arg(&rows).arg(&cols).arg(&chunk).arg(&ppw).arg(&ppb);
                l.arg(&pg).arg(&px).arg(&pm).arg(&pr);
            })?;
        }
        let chunks = if rows > 0 { chunks as u32 } else { 0 };
        col_sum_final(dw, part_w, chunks, cols)?;
        col_sum_final(db, part_b, chunks, cols)?;
    }
    Ok(())
}

/// The number of partial rows [`col_sum`] needs for `rows` rows.
pub(crate) fn col_sum_chunks(rows: usize) -> usize {
    col_chunks(rows as u64).0 as usize
}

/// `out[c] = Σ_r a[r, c]` through partial sums in `part` (`[col_sum_chunks(rows),
/// cols]`).
pub(crate) fn col_sum(out: &Tensor, a: &Tensor, part: &Tensor) -> Result<(), TensorError> {
    let cols = u32_of("a column sum", out.numel())?;
    if cols == 0 {
        return Ok(());
    }
    let rows = (a.numel() / cols as usize) as u64;
    let (chunks, chunk) = col_chunks(rows);
    let t = target(out)?;
    let (pp, pa) = (ptr(part), ptr(a));
    if rows > 0 {
        launch!(t, "col_sum_partial", col_cfg(cols, chunks), |l| {
            l.arg(&rows).arg(&cols).arg(&chunk).arg(&pp).arg(&pa);
        })?;
    }
    col_sum_final(out, part, if rows > 0 { chunks as u32 } else { 0 }, cols)
}

fn col_sum_final(out: &Tensor, part: &Tensor, chunks: u32, cols: u32) -> Result<(), TensorError> {
    let t = target(out)?;
    let (po, pp, accumulate) = (ptr(out), ptr(part), 0i32);
    launch!(t, "col_sum_final", elementwise_cfg(cols as u64), |l| {
        l.arg(&chunks).arg(&cols).arg(&po).arg(&pp).arg(&accumulate);
    })
}

/// `y += b` over the last dimension, in place.
pub(crate) fn bias_add(y: &Tensor, b: &Tensor) -> Result<(), TensorError> {
    let cols = u32_of("a bias", b.numel())?;
    let n = y.numel() as u64;
    if n == 0 || cols == 0 {
        return Ok(());
    }
    if let Some(t) = vec4_target(y, &[b], cols as usize)? {
        let (n4, c4, py, pb) = ((n / 4) as u32, cols / 4, ptr(y), ptr(b));
        return launch!(t, "bias_add4", elementwise_cfg(n4 as u64), |l| {
            l.arg(&n4).arg(&c4).arg(&py).arg(&pb);
        });
    }
    let t = target(y)?;
    let (py, pb) = (ptr(y), ptr(b));
    launch!(t, "bias_add", elementwise_cfg(n), |l| {
        l.arg(&n).arg(&cols).arg(&py).arg(&pb);
    })
}

/// `y = gelu(x + b)`, or with `g`: `y = g·gelu'(x + b)`.
pub(crate) fn bias_gelu(
    y: &Tensor,
    g: Option<&Tensor>,
    x: &Tensor,
    b: &Tensor,
) -> Result<(), TensorError> {
    let cols = u32_of("a bias", b.numel())?;
    let n = y.numel() as u64;
    if n == 0 || cols == 0 {
        return Ok(());
    }
    let mut inputs = vec![x, b];
    inputs.extend(g);
    if let Some(t) = vec4_target(y, &inputs, cols as usize)? {
        let (n4, c4, py, pg, px, pb) = (
            (n / 4) as u32,
            cols / 4,
            ptr(y),
            g.map_or(0, ptr),
            ptr(x),
            ptr(b),
        );
        return launch!(t, "bias_gelu4", elementwise_cfg(n4 as u64), |l| {
            l.arg(&n4).arg(&c4).arg(&py).arg(&pg).arg(&px).arg(&pb);
        });
    }
    let t = target(y)?;
    let (py, px, pb) = (ptr(y), ptr(x), ptr(b));
    match g {
        None => launch!(t, "bias_gelu", elementwise_cfg(n), |l| {
            l.arg(&n).arg(&cols).arg(&py).arg(&px).arg(&pb);
        }),
        Some(g) => {
            let pg = ptr(g);
            launch!(t, "bias_gelu_backward", elementwise_cfg(n), |l| {
                l.arg(&n).arg(&cols).arg(&py).arg(&pg).arg(&px).arg(&pb);
            })
        }
    }
}

/// The error record's code for an embedding index out of range (see
/// `check_device_side`).
pub(crate) const EMBEDDING_CODE: u32 = 3;

/// `out[i, :] = table[idx[i], :]`; an index out of range gives a NaN row and is
/// reported in the device's error record.
pub(crate) fn embedding(out: &Tensor, table: &Tensor, idx: &Tensor) -> Result<(), TensorError> {
    let cols = u32_of("an embedding row", table.shape()[1])?;
    let n = idx.numel() as u64;
    if n == 0 || cols == 0 {
        return Ok(());
    }
    let err = cuda_of(out)?.error_record_ptr()?;
    let t = target(out)?;
    let rows = table.shape()[0] as u64;
    let width = idx.dtype().size() as i32;
    let (po, pt, pi, code) = (ptr(out), ptr(table), ptr(idx), EMBEDDING_CODE);
    launch!(t, "embedding", elementwise_cfg(n * cols as u64), |l| {
        l.arg(&n)
            .arg(&cols)
            .arg(&rows)
            .arg(&po)
            .arg(&pt)
            .arg(&pi)
            .arg(&width);
        l.arg(&err).arg(&code);
    })
}

/// `dtable[idx[i], :] += g[i, :]` into a zeroed `dtable`.
pub(crate) fn embedding_backward(
    dtable: &Tensor,
    g: &Tensor,
    idx: &Tensor,
) -> Result<(), TensorError> {
    let cols = u32_of("an embedding row", dtable.shape()[1])?;
    let n = idx.numel() as u64;
    if n == 0 || cols == 0 {
        return Ok(());
    }
    let t = target(dtable)?;
    let rows = dtable.shape()[0] as u64;
    let width = idx.dtype().size() as i32;
    let (pd, pg, pi) = (ptr(dtable), ptr(g), ptr(idx));
    launch!(
        t,
        "embedding_backward",
        elementwise_cfg(n * cols as u64),
        |l| {
            l.arg(&n)
                .arg(&cols)
                .arg(&rows)
                .arg(&pd)
                .arg(&pg)
                .arg(&pi)
                .arg(&width);
        }
    )
}

/// The causal softmax (`g`: its backward step, `x_or_y` being then the output).
pub(crate) fn causal_softmax(
    out: &Tensor,
    x_or_y: &Tensor,
    g: Option<&Tensor>,
    queries: usize,
    cols: usize,
    scale: f64,
) -> Result<(), TensorError> {
    let (q, c) = (
        u32_of("a softmax row", queries)?,
        u32_of("a softmax row", cols)?,
    );
    if out.numel() == 0 || c == 0 {
        return Ok(());
    }
    let rows = (out.numel() / cols) as u64;
    let t = target(out)?;
    let scale = Scalar::new(out.dtype(), scale);
    let (po, px) = (ptr(out), ptr(x_or_y));
    match g {
        None => launch!(t, "causal_softmax", warp_rows_cfg(rows), |l| {
            l.arg(&rows).arg(&q).arg(&c).arg(&po).arg(&px);
            scale.push(l);
        }),
        Some(g) => {
            let pg = ptr(g);
            launch!(t, "causal_softmax_backward", warp_rows_cfg(rows), |l| {
                l.arg(&rows).arg(&q).arg(&c).arg(&po).arg(&pg).arg(&px);
                scale.push(l);
            })
        }
    }
}

/// Between packed `[B, T, S, H, D]` and head-major `[S, B, H, T, D]`.
pub(crate) fn heads(
    dst: &Tensor,
    src: &Tensor,
    [t_len, s_len, h_len, d_len]: [usize; 4],
    to_heads: bool,
) -> Result<(), TensorError> {
    let n = u32_of("an attention projection", dst.numel())?;
    if n == 0 {
        return Ok(());
    }
    if let Some(t) = vec4_target(dst, &[src], d_len)? {
        let n4 = n / 4;
        let dims = [t_len as u32, s_len as u32, h_len as u32, (d_len / 4) as u32];
        let (pd, ps, to) = (ptr(dst), ptr(src), to_heads as i32);
        return launch!(t, "heads4", elementwise_cfg(n4 as u64), |l| {
            l.arg(&n4)
                .arg(&dims[0])
                .arg(&dims[1])
                .arg(&dims[2])
                .arg(&dims[3]);
            l.arg(&pd).arg(&ps).arg(&to);
        });
    }
    let t = target(dst)?;
    let dims = [t_len as u32, s_len as u32, h_len as u32, d_len as u32];
    let (pd, ps, to) = (ptr(dst), ptr(src), to_heads as i32);
    launch!(t, "heads", elementwise_cfg(n as u64), |l| {
        l.arg(&n)
            .arg(&dims[0])
            .arg(&dims[1])
            .arg(&dims[2])
            .arg(&dims[3]);
        l.arg(&pd).arg(&ps).arg(&to);
    })
}

/// Tensors one `adamw_many` launch takes (`GS_ADAM_TENSORS`).
pub(crate) const ADAM_TENSORS: usize = 24;
/// Elements one block of `adamw_many` updates.
const ADAM_CHUNK: u64 = 8192;

/// The kernel's `gs_adam_list`, passed by value.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct AdamList {
    n: [u64; ADAM_TENSORS],
    p: [u64; ADAM_TENSORS],
    g: [u64; ADAM_TENSORS],
    m: [u64; ADAM_TENSORS],
    v: [u64; ADAM_TENSORS],
    first_block: [u32; ADAM_TENSORS + 1],
    count: u32,
    chunk: u32,
}

// SAFETY: `#[repr(C)]` of 64-bit and 32-bit integers in the kernel struct's order (the
// 64-bit arrays first, so no padding sits between fields; 4 bytes at the end round it to
// 8, as in C).
unsafe impl DeviceRepr for AdamList {}

/// One AdamW step of each `(p, g, m, v)` (contiguous, one float dtype and stream, at
/// most [`ADAM_TENSORS`]), in one launch.
pub(crate) fn adamw_many(group: &[[&Tensor; 4]], h: AdamWStep) -> Result<(), TensorError> {
    let Some(first) = group.first() else {
        return Ok(());
    };
    if group.len() > ADAM_TENSORS {
        return Err(TensorError::InvalidArgument {
            op: "adamw",
            reason: format!(
                "{} tensors in one launch (at most {ADAM_TENSORS})",
                group.len()
            ),
        });
    }
    let mut list = AdamList {
        n: [0; ADAM_TENSORS],
        p: [0; ADAM_TENSORS],
        g: [0; ADAM_TENSORS],
        m: [0; ADAM_TENSORS],
        v: [0; ADAM_TENSORS],
        first_block: [0; ADAM_TENSORS + 1],
        count: group.len() as u32,
        chunk: ADAM_CHUNK as u32,
    };
    let mut blocks = 0u64;
    for (k, [p, g, m, v]) in group.iter().enumerate() {
        let n = p.numel() as u64;
        list.n[k] = n;
        (list.p[k], list.g[k], list.m[k], list.v[k]) = (ptr(p), ptr(g), ptr(m), ptr(v));
        list.first_block[k] = blocks as u32;
        blocks += n.div_ceil(ADAM_CHUNK);
    }
    list.first_block[group.len()] = blocks as u32;
    if blocks == 0 {
        return Ok(());
    }
    if blocks > u32::MAX as u64 / 2 {
        return Err(
            BackendError::Unavailable("too many AdamW blocks for one launch".into()).into(),
        );
    }
    let t = target(first[0])?;
    let d = first[0].dtype();
    debug_assert!(matches!(d, DType::F32 | DType::F64));
    let args = [
        Scalar::new(d, 1.0 - h.lr * h.weight_decay),
        Scalar::new(d, h.lr / h.bias1),
        Scalar::new(d, h.beta1),
        Scalar::new(d, h.beta2),
        Scalar::new(d, h.bias2.sqrt()),
        Scalar::new(d, h.eps),
    ];
    let cfg = LaunchConfig {
        grid_dim: (blocks as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    launch!(t, "adamw_many", cfg, |l| {
        l.arg(&list);
        for a in &args {
            a.push(l);
        }
    })
}
