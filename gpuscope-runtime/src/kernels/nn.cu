// gpuscope's transformer kernels: layer norm, embedding lookup and its scatter-add,
// bias and exact GELU, the causal softmax, the attention head split and merge, column
// sums, and AdamW over many tensors at once.
//
// Written once with `$T` (the element type) and `$S` (its suffix), like ops.cu, and
// instantiated for float and double. Rows are walked one warp per row (`GS_WARPS` warps
// a block) where a row is reduced; element-wise kernels use grid-stride loops. Offsets
// of rows are 64-bit; indices inside a row are 32-bit (the Rust side checks that a row
// holds fewer than 2^31 elements).

#ifndef GS_NN_COMMON
#define GS_NN_COMMON
#define GS_WARPS 8
#define GS_FULL_MASK 0xffffffffu
// Column sums: a block of 32 columns x GS_COL_ROWS threads walks a chunk of rows.
#define GS_COL_ROWS 8
#endif

__device__ __forceinline__ $T gs_warp_sum_$S($T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(GS_FULL_MASK, v, o);
    return v;
}

__device__ __forceinline__ $T gs_warp_max_$S($T v) {
    for (int o = 16; o > 0; o >>= 1) {
        $T u = __shfl_xor_sync(GS_FULL_MASK, v, o);
        if (u > v || u != u) v = u;
    }
    return v;
}

// ---- Layer norm over the last dimension ---------------------------------------------

// y = (x - mean) * rstd * w + b per row of `cols`; mean and rstd (1/sqrt(var + eps), the
// biased variance) are written for the backward step. One warp per row.
extern "C" __global__ void layer_norm_$S(unsigned long long rows, unsigned int cols, $T* y, $T* mean_out,
        $T* rstd_out, const $T* x, const $T* w, const $T* b, $T eps) {
    unsigned int lane = threadIdx.x & 31;
    unsigned long long warp = (blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x) >> 5;
    unsigned long long warps = (gridDim.x * (unsigned long long)blockDim.x) >> 5;
    for (unsigned long long r = warp; r < rows; r += warps) {
        const $T* xr = x + r * cols;
        $T s = ($T)0;
        for (unsigned int j = lane; j < cols; j += 32) s += xr[j];
        $T mean = gs_warp_sum_$S(s) / ($T)cols;
        $T q = ($T)0;
        for (unsigned int j = lane; j < cols; j += 32) {
            $T d = xr[j] - mean;
            q += d * d;
        }
        $T rstd = ($T)1 / gs_sqrt_$S(gs_warp_sum_$S(q) / ($T)cols + eps);
        $T* yr = y + r * cols;
        for (unsigned int j = lane; j < cols; j += 32) yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
        if (lane == 0) {
            mean_out[r] = mean;
            rstd_out[r] = rstd;
        }
    }
}

// dx of layer norm: with xh = (x - mean) * rstd and wg = g * w,
// dx = rstd * (wg - mean(wg) - xh * mean(wg * xh)). One warp per row.
extern "C" __global__ void layer_norm_dx_$S(unsigned long long rows, unsigned int cols, $T* dx, const $T* g,
        const $T* x, const $T* mean, const $T* rstd, const $T* w) {
    unsigned int lane = threadIdx.x & 31;
    unsigned long long warp = (blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x) >> 5;
    unsigned long long warps = (gridDim.x * (unsigned long long)blockDim.x) >> 5;
    for (unsigned long long r = warp; r < rows; r += warps) {
        const $T* xr = x + r * cols;
        const $T* gr = g + r * cols;
        $T mu = mean[r], rs = rstd[r];
        $T s1 = ($T)0, s2 = ($T)0;
        // g·w rounded on its own (no FMA contraction), the same value in both loops: a
        // row whose xh is 0 (one column, or constant) gets a gradient of exactly 0.
        for (unsigned int j = lane; j < cols; j += 32) {
            $T wg = gs_mul_rn_$S(gr[j], w[j]);
            s1 += wg;
            s2 += wg * (xr[j] - mu) * rs;
        }
        s1 = gs_warp_sum_$S(s1) / ($T)cols;
        s2 = gs_warp_sum_$S(s2) / ($T)cols;
        $T* dr = dx + r * cols;
        for (unsigned int j = lane; j < cols; j += 32) {
            $T xh = (xr[j] - mu) * rs;
            dr[j] = rs * (gs_mul_rn_$S(gr[j], w[j]) - s1 - xh * s2);
        }
    }
}

// Partial column sums for layer norm's dw = sum_rows g * xh and db = sum_rows g: chunk
// `blockIdx.y` of `chunk_rows` rows writes row `blockIdx.y` of `pw` and `pb`
// ([chunks, cols]). Blocks of 32 x GS_COL_ROWS threads.
extern "C" __global__ void layer_norm_dwdb_$S(unsigned long long rows, unsigned int cols,
        unsigned long long chunk_rows, $T* pw, $T* pb, const $T* g, const $T* x, const $T* mean,
        const $T* rstd) {
    __shared__ $T sw[GS_COL_ROWS][33];
    __shared__ $T sb[GS_COL_ROWS][33];
    unsigned int c = blockIdx.x * 32 + threadIdx.x;
    unsigned long long r0 = blockIdx.y * chunk_rows;
    unsigned long long r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
    $T aw = ($T)0, ab = ($T)0;
    if (c < cols) {
        for (unsigned long long r = r0 + threadIdx.y; r < r1; r += GS_COL_ROWS) {
            $T gv = g[r * cols + c];
            aw += gv * (x[r * cols + c] - mean[r]) * rstd[r];
            ab += gv;
        }
    }
    sw[threadIdx.y][threadIdx.x] = aw;
    sb[threadIdx.y][threadIdx.x] = ab;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        for (int k = 1; k < GS_COL_ROWS; ++k) {
            aw += sw[k][threadIdx.x];
            ab += sb[k][threadIdx.x];
        }
        pw[blockIdx.y * (unsigned long long)cols + c] = aw;
        pb[blockIdx.y * (unsigned long long)cols + c] = ab;
    }
}

// Partial column sums of a [rows, cols] matrix: chunk `blockIdx.y` writes row
// `blockIdx.y` of `part` ([chunks, cols]).
extern "C" __global__ void col_sum_partial_$S(unsigned long long rows, unsigned int cols,
        unsigned long long chunk_rows, $T* part, const $T* a) {
    __shared__ $T s[GS_COL_ROWS][33];
    unsigned int c = blockIdx.x * 32 + threadIdx.x;
    unsigned long long r0 = blockIdx.y * chunk_rows;
    unsigned long long r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
    $T acc = ($T)0;
    if (c < cols) {
        for (unsigned long long r = r0 + threadIdx.y; r < r1; r += GS_COL_ROWS) acc += a[r * cols + c];
    }
    s[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        for (int k = 1; k < GS_COL_ROWS; ++k) acc += s[k][threadIdx.x];
        part[blockIdx.y * (unsigned long long)cols + c] = acc;
    }
}

// out[c] = sum_k part[k, c] (+ out[c] when `accumulate`): the second stage of the
// column sums, in a fixed order (deterministic).
extern "C" __global__ void col_sum_final_$S(unsigned int chunks, unsigned int cols, $T* out, const $T* part,
        int accumulate) {
    for (unsigned int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x) {
        $T acc = accumulate ? out[c] : ($T)0;
        for (unsigned int k = 0; k < chunks; ++k) acc += part[(unsigned long long)k * cols + c];
        out[c] = acc;
    }
}

// ---- Bias and GELU -------------------------------------------------------------------

__device__ __forceinline__ $T gs_gelu_erf_$S($T x) {
    return ($T)0.5 * x * (($T)1 + gs_erf_$S(x * ($T)0.70710678118654752440));
}

__device__ __forceinline__ $T gs_gelu_erf_grad_$S($T x) {
    $T cdf = ($T)0.5 * (($T)1 + gs_erf_$S(x * ($T)0.70710678118654752440));
    $T pdf = gs_exp_$S(($T)-0.5 * x * x) * ($T)0.39894228040143267794;
    return cdf + x * pdf;
}

// y[i] += b[i % cols] (a bias over the last dimension, in place).
extern "C" __global__ void bias_add_$S(unsigned long long n, unsigned int cols, $T* y, const $T* b) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        y[i] += b[(unsigned int)(i % cols)];
    }
}

// y = gelu(x + b[col]) (exact GELU: 0.5 z (1 + erf(z / sqrt 2))).
extern "C" __global__ void bias_gelu_$S(unsigned long long n, unsigned int cols, $T* y, const $T* x,
        const $T* b) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        y[i] = gs_gelu_erf_$S(x[i] + b[(unsigned int)(i % cols)]);
    }
}

// dz = g * gelu'(x + b[col]).
extern "C" __global__ void bias_gelu_backward_$S(unsigned long long n, unsigned int cols, $T* dz,
        const $T* g, const $T* x, const $T* b) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        dz[i] = g[i] * gs_gelu_erf_grad_$S(x[i] + b[(unsigned int)(i % cols)]);
    }
}

// ---- Embedding -----------------------------------------------------------------------

__device__ __forceinline__ long long gs_index_$S(const void* idx, int width, unsigned long long i) {
    if (width == 8) return ((const long long*)idx)[i];
    if (width == 4) return (long long)((const int*)idx)[i];
    return (long long)((const unsigned short*)idx)[i];
}

// out[i, :] = table[idx[i], :]. An index outside the table gives a row of NaN (and reads
// nothing) and is reported in `err` with `code`.
extern "C" __global__ void embedding_$S(unsigned long long n, unsigned int cols, unsigned long long table_rows,
        $T* out, const $T* table, const void* idx, int width, gs_error_record* err, unsigned int code) {
    unsigned long long total = n * cols;
    for (unsigned long long e = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; e < total;
         e += (unsigned long long)gridDim.x * blockDim.x) {
        unsigned long long i = e / cols;
        unsigned int c = (unsigned int)(e - i * cols);
        long long t = gs_index_$S(idx, width, i);
        if (t < 0 || (unsigned long long)t >= table_rows) {
            if (c == 0) gs_report_error(err, code, (long long)i, t, (long long)table_rows);
            out[e] = gs_nan_$S();
        } else {
            out[e] = table[(unsigned long long)t * cols + c];
        }
    }
}

// dtable[idx[i], :] += g[i, :] (dtable zeroed before): the scatter-add of the lookup's
// backward step. Atomic adds: rows that pick one index sum in no fixed order. Indices
// out of range add nothing (the forward step reported them).
extern "C" __global__ void embedding_backward_$S(unsigned long long n, unsigned int cols,
        unsigned long long table_rows, $T* dtable, const $T* g, const void* idx, int width) {
    unsigned long long total = n * cols;
    for (unsigned long long e = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; e < total;
         e += (unsigned long long)gridDim.x * blockDim.x) {
        unsigned long long i = e / cols;
        unsigned int c = (unsigned int)(e - i * cols);
        long long t = gs_index_$S(idx, width, i);
        if (t >= 0 && (unsigned long long)t < table_rows) atomicAdd(&dtable[(unsigned long long)t * cols + c], g[e]);
    }
}

// ---- Causal softmax ------------------------------------------------------------------

// Rows of length `cols` whose query index is `row % queries + cols - queries` (the last
// `queries` positions of a sequence of `cols`): y[j] = softmax_j(scale * x[j]) over the
// columns j <= query index, 0 above it. One warp per row; the masked half is not read.
extern "C" __global__ void causal_softmax_$S(unsigned long long rows, unsigned int queries, unsigned int cols,
        $T* y, const $T* x, $T scale) {
    unsigned int lane = threadIdx.x & 31;
    unsigned long long warp = (blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x) >> 5;
    unsigned long long warps = (gridDim.x * (unsigned long long)blockDim.x) >> 5;
    for (unsigned long long r = warp; r < rows; r += warps) {
        unsigned int valid = (unsigned int)(r % queries) + cols - queries + 1;
        const $T* xr = x + r * cols;
        $T* yr = y + r * cols;
        $T m = -gs_inf_$S();
        for (unsigned int j = lane; j < valid; j += 32) {
            $T v = xr[j] * scale;
            if (v > m || v != v) m = v;
        }
        m = gs_warp_max_$S(m);
        $T s = ($T)0;
        for (unsigned int j = lane; j < valid; j += 32) s += gs_exp_$S(xr[j] * scale - m);
        $T inv = ($T)1 / gs_warp_sum_$S(s);
        for (unsigned int j = lane; j < cols; j += 32) yr[j] = j < valid ? gs_exp_$S(xr[j] * scale - m) * inv : ($T)0;
    }
}

// dx[j] = scale * y[j] * (g[j] - sum_k g[k] y[k]) below the diagonal, 0 above. One warp
// per row; the masked half is not read.
extern "C" __global__ void causal_softmax_backward_$S(unsigned long long rows, unsigned int queries,
        unsigned int cols, $T* dx, const $T* g, const $T* y, $T scale) {
    unsigned int lane = threadIdx.x & 31;
    unsigned long long warp = (blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x) >> 5;
    unsigned long long warps = (gridDim.x * (unsigned long long)blockDim.x) >> 5;
    for (unsigned long long r = warp; r < rows; r += warps) {
        unsigned int valid = (unsigned int)(r % queries) + cols - queries + 1;
        const $T* gr = g + r * cols;
        const $T* yr = y + r * cols;
        $T* dr = dx + r * cols;
        $T s = ($T)0;
        for (unsigned int j = lane; j < valid; j += 32) s += gr[j] * yr[j];
        s = gs_warp_sum_$S(s);
        for (unsigned int j = lane; j < cols; j += 32) dr[j] = j < valid ? scale * yr[j] * (gr[j] - s) : ($T)0;
    }
}

// ---- Attention heads -----------------------------------------------------------------

// Between the packed projections [B, T, S, H, D] (S = 3: q, k, v side by side; S = 1:
// one tensor of H heads) and head-major [S, B, H, T, D]: `to_heads` != 0 copies packed
// into head-major, else back. `n` = B·T·S·H·D elements, sizes 32-bit.
extern "C" __global__ void heads_$S(unsigned int n, unsigned int t_len, unsigned int s_len, unsigned int h_len,
        unsigned int d_len, $T* dst, const $T* src, int to_heads) {
    unsigned int b_len = n / (t_len * s_len * h_len * d_len);
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        // i walks the packed layout [B, T, S, H, D].
        unsigned int r = i;
        unsigned int d = r % d_len; r /= d_len;
        unsigned int h = r % h_len; r /= h_len;
        unsigned int s = r % s_len; r /= s_len;
        unsigned int t = r % t_len; r /= t_len;
        unsigned int b = r;
        unsigned int j = (((s * b_len + b) * h_len + h) * t_len + t) * d_len + d;
        if (to_heads) dst[j] = src[i]; else dst[i] = src[j];
    }
}

// ---- AdamW over many tensors ---------------------------------------------------------

#ifndef GS_ADAM_LIST
#define GS_ADAM_LIST
#define GS_ADAM_TENSORS 24
// Up to GS_ADAM_TENSORS tensors of one step, passed by value (the same layout as
// `AdamList` in tensor/compute/cuda/nn.rs). Tensor k is walked by the blocks
// `first_block[k]` .. `first_block[k + 1]`, each taking `chunk` elements. Only
// compile-time indices reach the arrays (unrolled loops), so the list stays in the
// parameter bank.
struct gs_adam_list {
    unsigned long long n[GS_ADAM_TENSORS];
    unsigned long long p[GS_ADAM_TENSORS];
    unsigned long long g[GS_ADAM_TENSORS];
    unsigned long long m[GS_ADAM_TENSORS];
    unsigned long long v[GS_ADAM_TENSORS];
    unsigned int first_block[GS_ADAM_TENSORS + 1];
    unsigned int count;
    unsigned int chunk;
};
#endif

// One AdamW step of every tensor in `l` (as adamw_$S does for one). One block per chunk.
extern "C" __global__ void adamw_many_$S(gs_adam_list l, $T decay, $T step, $T b1, $T b2, $T bias2_sqrt,
        $T eps) {
    unsigned int k = 0;
#pragma unroll
    for (int j = 1; j < GS_ADAM_TENSORS; ++j) {
        if ((unsigned int)j < l.count && blockIdx.x >= l.first_block[j]) k = j;
    }
    unsigned long long n = 0, pp = 0, gp = 0, mp = 0, vp = 0;
    unsigned int first = 0;
#pragma unroll
    for (int j = 0; j < GS_ADAM_TENSORS; ++j) {
        if ((unsigned int)j == k) {
            n = l.n[j]; pp = l.p[j]; gp = l.g[j]; mp = l.m[j]; vp = l.v[j];
            first = l.first_block[j];
        }
    }
    $T* p = ($T*)pp;
    const $T* g = (const $T*)gp;
    $T* m = ($T*)mp;
    $T* v = ($T*)vp;
    unsigned long long lo = (unsigned long long)(blockIdx.x - first) * l.chunk;
    unsigned long long hi = lo + l.chunk < n ? lo + l.chunk : n;
    for (unsigned long long i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        $T gi = g[i];
        $T mi = b1 * m[i] + (($T)1 - b1) * gi;
        $T vi = b2 * v[i] + (($T)1 - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * decay - step * mi / (gs_sqrt_$S(vi) / bias2_sqrt + eps);
    }
}
