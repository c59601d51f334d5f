//! Attention with autograd: the causal softmax, and causal multi-head self-attention
//! over packed projections as one node.
//!
//! `causal_attention` runs, for `qkv` of shape `[B, T, 3·C]` (the query, key and value
//! projections side by side, each `H` heads of `D = C/H`):
//! 1. one kernel splits the heads: `[3, B, H, T, D]`, contiguous (the tensors the
//!    backward step keeps, as PyTorch keeps its contiguous `q`, `k`, `v`);
//! 2. `S = q @ kᵀ / √D`: one strided-batched GEMM over the `B·H` heads, the scale in
//!    its `alpha`;
//! 3. `P = causal_softmax(S)`: one kernel, the mask applied in it (the masked half is
//!    neither read nor kept as anything but zeros), `S` freed;
//! 4. `Y = P @ v`: one strided-batched GEMM;
//! 5. one kernel merges the heads back: `[B, T, C]`.
//!
//! The backward step mirrors it (`dP = dY @ vᵀ`, `dv = Pᵀ @ dY`, the softmax's backward
//! step, `dq = dS @ k / √D`, `dk = dSᵀ @ q / √D`, written into one `[3, B, H, T, D]`
//! buffer that one kernel merges into the gradient of `qkv`), and frees `P` as soon as
//! the softmax's backward step has read it.
//!
//! `causal_attention_recomputed` keeps only `q`, `k`, `v`: its backward step runs steps
//! 2 and 3 again (the same kernels on the same inputs, so the same `P`) before the
//! steps above. The attention matrices of all layers are then never held together
//! between forward and backward, as PyTorch's fused attention keeps none, for one more
//! product and softmax per layer in backward.

use std::panic::Location;

use crate::autograd::{record_saving, should_record};
use crate::tensor::compute::layout::narrowed;
use crate::tensor::compute::matmul::{bmm_into, bmm_raw};
use crate::tensor::compute::nn::{
    causal_softmax_backward_in_place, causal_softmax_backward_raw, causal_softmax_raw, heads_raw,
};
use crate::tensor::compute::{Site, alloc_like, check_float};
use crate::tensor::{Tensor, TensorError};

fn causal_softmax_at(x: &Tensor, scale: f64, site: Site) -> Result<Tensor, TensorError> {
    let y = causal_softmax_raw(x, scale, site)?;
    if !should_record(&[x]) {
        return Ok(y);
    }
    let ys = y.detach();
    Ok(record_saving(
        y,
        "causal_softmax",
        &[x],
        [ys.clone()],
        site,
        move |g, _, site| {
            Ok(vec![Some(causal_softmax_backward_raw(
                g, &ys, scale, site,
            )?)])
        },
    ))
}

/// The sizes `[B, T, 3, H, D]` of packed projections `[B, T, 3·H·D]`.
fn attention_dims(qkv: &Tensor, heads: usize) -> Result<[usize; 5], TensorError> {
    check_float("causal_attention", qkv)?;
    let bad = |reason: String| TensorError::InvalidArgument {
        op: "causal_attention",
        reason,
    };
    if qkv.ndim() != 3 {
        return Err(bad(format!(
            "expected the packed projections [batch, time, 3·channels]; got shape {:?}",
            qkv.shape()
        )));
    }
    let (b, t, c3) = (qkv.shape()[0], qkv.shape()[1], qkv.shape()[2]);
    if c3 % 3 != 0 {
        return Err(bad(format!(
            "the last dimension ({c3}) must hold q, k and v side by side: a multiple of 3"
        )));
    }
    let c = c3 / 3;
    if heads == 0 || c % heads != 0 {
        return Err(bad(format!(
            "{heads} heads do not divide the {c} channels: choose a number of heads that \
             divides the embedding width"
        )));
    }
    Ok([b, t, 3, heads, c / heads])
}

/// The `i`-th `[B, H, T, D]` block of a head-major `[3, B, H, T, D]` tensor (a
/// contiguous view).
fn part(heads: &Tensor, i: usize) -> Tensor {
    let inner = narrowed(heads, 0, i, 1);
    let shape = heads.shape()[1..].to_vec();
    inner.view_with(shape, None)
}

fn causal_attention_at(
    qkv: &Tensor,
    heads: usize,
    keep_probs: bool,
    site: Site,
) -> Result<Tensor, TensorError> {
    let dims = attention_dims(qkv, heads)?;
    let [b, t, _, h, d] = dims;
    let scale = 1.0 / (d as f64).sqrt();
    let qkvh = heads_raw(qkv, dims, true, site)?;
    let (q, k, v) = (part(&qkvh, 0), part(&qkvh, 1), part(&qkvh, 2));
    let probs = move |q: &Tensor, k: &Tensor, site: Site| -> Result<Tensor, TensorError> {
        let scores = bmm_raw(q, k, false, true, scale, site)?;
        causal_softmax_raw(&scores, 1.0, site)
    };
    let p = probs(&q, &k, site)?;
    let y = bmm_raw(&p, &v, false, false, 1.0, site)?;
    let out = heads_raw(&y, [b, t, 1, h, d], false, site)?;
    drop(y);
    if !should_record(&[qkv]) {
        return Ok(out);
    }
    let kept = keep_probs.then_some(p);
    let mut listed = vec![qkvh.clone()];
    listed.extend(kept.clone());
    Ok(record_saving(
        out,
        if keep_probs {
            "causal_attention"
        } else {
            "causal_attention_recomputed"
        },
        &[qkv],
        listed,
        site,
        move |g, _, site| {
            let (q, k, v) = (part(&qkvh, 0), part(&qkvh, 1), part(&qkvh, 2));
            let p = match &kept {
                Some(p) => p.clone(),
                None => probs(&q, &k, site)?,
            };
            let gy = heads_raw(g, [b, t, 1, h, d], true, site)?;
            let gy = part_one(&gy);
            let grads = alloc_like(qkvh.shape(), qkvh.dtype(), &qkvh, site)?;
            let dp = bmm_raw(&gy, &v, false, true, 1.0, site)?;
            bmm_into(&part(&grads, 2), &p, &gy, true, false, 1.0, site)?;
            drop(gy);
            // dS over dP, in place (one attention matrix less at the peak).
            causal_softmax_backward_in_place(&dp, &p, 1.0)?;
            drop(p);
            let ds = dp;
            bmm_into(&part(&grads, 0), &ds, &k, false, false, scale, site)?;
            bmm_into(&part(&grads, 1), &ds, &q, true, false, scale, site)?;
            drop((ds, q, k, v, qkvh));
            Ok(vec![Some(heads_raw(&grads, [b, t, 3, h, d], false, site)?)])
        },
    ))
}

/// A `[1, B, H, T, D]` head-major tensor as `[B, H, T, D]` (a view).
fn part_one(t: &Tensor) -> Tensor {
    part(t, 0)
}

impl Tensor {
    /// Softmax over the last dimension of `scale · self` with a causal mask: for scores
    /// `[.., q, k]`, query `i` sees keys `0..=i + k - q` (the queries are the last `q`
    /// positions of the keys' sequence; for `q == k`, key `j` is seen by queries `i >=
    /// j`), and the masked entries are 0 (PyTorch's `masked_fill(-inf).softmax(-1)`
    /// after scaling, in one kernel that never reads the masked half). The backward step
    /// keeps the output only.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let dev = Device::host().unwrap();
    /// let s = Tensor::from_slice(&[0.0f64, 5.0, 1.0, 1.0], &[2, 2], &dev).unwrap();
    /// let p = s.causal_softmax(1.0).unwrap().to_vec::<f64>().unwrap();
    /// assert_eq!(p, vec![1.0, 0.0, 0.5, 0.5]); // row 0 sees key 0 only
    /// ```
    #[track_caller]
    pub fn causal_softmax(&self, scale: f64) -> Result<Tensor, TensorError> {
        causal_softmax_at(self, scale, Location::caller())
    }

    /// Causal multi-head self-attention over packed projections: `self` is `[B, T, 3·C]`
    /// (queries, keys and values side by side, as one linear layer of `3·C` outputs
    /// makes them, PyTorch's `qkv` layout), `heads` divides `C`; the result is `[B, T,
    /// C]` (heads concatenated, ready for the output projection). Each head attends with
    /// `softmax(q kᵀ / √(C/heads))` masked above the diagonal. One autograd node: it
    /// keeps the heads' `q`, `k`, `v` (`3·B·T·C` elements) and the attention matrix
    /// (`B·heads·T²`); on CUDA the products are strided-batched cuBLAS calls (see the
    /// module documentation for the steps).
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let dev = Device::host().unwrap();
    /// // One sequence of 2 positions, 1 head of width 1: q = k = 0, so each position
    /// // averages the values it sees.
    /// let qkv = Tensor::from_slice(&[0.0f32, 0.0, 4.0, 0.0, 0.0, 8.0], &[1, 2, 3], &dev).unwrap();
    /// let y = qkv.causal_attention(1).unwrap();
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![4.0, 6.0]);
    /// assert!(qkv.causal_attention(2).unwrap_err().to_string().contains("divide"));
    /// ```
    #[track_caller]
    pub fn causal_attention(&self, heads: usize) -> Result<Tensor, TensorError> {
        causal_attention_at(self, heads, true, Location::caller())
    }

    /// [`causal_attention`](Tensor::causal_attention) that keeps only the heads' `q`, `k`,
    /// `v` for backward (`3·B·T·C` elements): the backward step computes the attention
    /// matrix again (one more strided-batched product and softmax, the same result), so a
    /// model's attention matrices (`B·heads·T²` each) are never all held between forward
    /// and backward, as PyTorch's fused attention (`scaled_dot_product_attention`) keeps
    /// none. The same values and gradients as `causal_attention`.
    ///
    /// ```
    /// use gpuscope_runtime::{Device, Tensor};
    /// let dev = Device::host().unwrap();
    /// let qkv = Tensor::randn(&[2, 5, 12], &dev).unwrap().set_requires_grad(true);
    /// let y = qkv.causal_attention_recomputed(2).unwrap();
    /// let mut kept = Vec::new();
    /// y.for_each_graph_tensor(&mut |t| kept.push(t.shape().to_vec()));
    /// assert_eq!(kept, vec![vec![3, 2, 2, 5, 2]]); // q, k, v only
    /// assert_eq!(y.to_vec::<f32>().unwrap(), qkv.causal_attention(2).unwrap().to_vec::<f32>().unwrap());
    /// ```
    #[track_caller]
    pub fn causal_attention_recomputed(&self, heads: usize) -> Result<Tensor, TensorError> {
        causal_attention_at(self, heads, false, Location::caller())
    }
}
