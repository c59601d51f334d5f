// gpuscope's element-wise and reduction kernels, compiled once per process by NVRTC.
//
// Written once with `$T` (the element type) and `$S` (its suffix); the Rust side
// instantiates the text for float (`f32`) and double (`f64`). Every kernel uses a
// grid-stride loop or one block per row, so any grid size is correct. Sizes are
// 64-bit. Reductions use blocks of exactly 256 threads.

#define GS_BLOCK 256

// The type's math functions (`gs_exp_$S`...) come from the prelude the Rust side
// writes before this text.

__device__ __forceinline__ $T gs_apply_$S(int op, $T x, $T y) {
    switch (op) {
        case 0: return x + y;
        case 1: return x - y;
        case 2: return x * y;
        case 3: return x / y;
        default: return y;
    }
}

// out = a op b with a broadcast plan of 4 merged dimensions (d0 outermost) and the
// operands' element strides along them (views are read through their own strides;
// `out` is contiguous). `out` may be `a` (in place, a contiguous). Op 4 (`expand`)
// never reads `a`: it may be the uninitialised output itself. A plan of one dimension
// (same shapes, or a scalar operand) skips the index arithmetic.
extern "C" __global__ void binary_$S(int op, unsigned long long n, $T* out, const $T* a, const $T* b,
        long long d1, long long d2, long long d3,
        long long sa0, long long sa1, long long sa2, long long sa3,
        long long sb0, long long sb1, long long sb2, long long sb3) {
    bool flat = (unsigned long long)d3 == n;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        long long oa, ob;
        if (flat) {
            oa = (long long)i * sa3;
            ob = (long long)i * sb3;
        } else {
            long long r = (long long)i;
            long long i3 = r % d3; r /= d3;
            long long i2 = r % d2; r /= d2;
            long long i1 = r % d1; r /= d1;
            long long i0 = r;
            oa = i0 * sa0 + i1 * sa1 + i2 * sa2 + i3 * sa3;
            ob = i0 * sb0 + i1 * sb1 + i2 * sb2 + i3 * sb3;
        }
        if (op == 4) {
            out[i] = b[ob];
        } else {
            out[i] = gs_apply_$S(op, a[oa], b[ob]);
        }
    }
}

// out = a op s (op 0: add, 2: mul, 4: fill with s, never reading `a`). `out` may be `a`.
extern "C" __global__ void scalar_$S(int op, unsigned long long n, $T* out, const $T* a, $T s) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        if (op == 4) {
            out[i] = s;
        } else {
            out[i] = gs_apply_$S(op, a[i], s);
        }
    }
}

// y += alpha * x
extern "C" __global__ void axpy_$S(unsigned long long n, $T* y, const $T* x, $T alpha) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        y[i] += alpha * x[i];
    }
}

__device__ __forceinline__ $T gs_gelu_inner_$S($T x) {
    return ($T)0.7978845608028654 * (x + ($T)0.044715 * x * x * x);
}

// out = op(a): 0 neg, 1 relu, 2 gelu (tanh), 3 exp, 4 log, 5 sqrt, 6 gelu (erf)
extern "C" __global__ void unary_$S(int op, unsigned long long n, $T* out, const $T* a) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        $T x = a[i];
        $T y;
        switch (op) {
            case 0: y = -x; break;
            case 1: y = x > ($T)0 ? x : ($T)0; break;
            case 2: y = ($T)0.5 * x * (($T)1 + gs_tanh_$S(gs_gelu_inner_$S(x))); break;
            case 3: y = gs_exp_$S(x); break;
            case 4: y = gs_log_$S(x); break;
            case 6: y = ($T)0.5 * x * (($T)1 + gs_erf_$S(x * ($T)0.70710678118654752440)); break;
            default: y = gs_sqrt_$S(x); break;
        }
        out[i] = y;
    }
}

// out = g * op'(x), x being the operation's input: 0 neg, 1 relu, 2 gelu, 3 exp, 4 log, 5 sqrt,
// 6 gelu (erf)
extern "C" __global__ void unary_backward_$S(int op, unsigned long long n, $T* out, const $T* g, const $T* xs) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        $T x = xs[i];
        $T d;
        switch (op) {
            case 0: d = ($T)-1; break;
            case 1: d = x > ($T)0 ? ($T)1 : ($T)0; break;
            case 2: {
                $T t = gs_tanh_$S(gs_gelu_inner_$S(x));
                $T dinner = ($T)0.7978845608028654 * (($T)1 + ($T)(3.0 * 0.044715) * x * x);
                d = ($T)0.5 * (($T)1 + t) + ($T)0.5 * x * (($T)1 - t * t) * dinner;
                break;
            }
            case 3: d = gs_exp_$S(x); break;
            case 4: d = ($T)1 / x; break;
            case 6: {
                $T cdf = ($T)0.5 * (($T)1 + gs_erf_$S(x * ($T)0.70710678118654752440));
                d = cdf + x * gs_exp_$S(($T)-0.5 * x * x) * ($T)0.39894228040143267794;
                break;
            }
            default: d = ($T)0.5 / gs_sqrt_$S(x); break;
        }
        out[i] = g[i] * d;
    }
}

// Sum of the values each thread of the block holds in `buf`; every thread gets it.
__device__ __forceinline__ $T gs_block_sum_$S($T* buf, $T v) {
    buf[threadIdx.x] = v;
    __syncthreads();
    for (unsigned int s = GS_BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    $T r = buf[0];
    __syncthreads();
    return r;
}

__device__ __forceinline__ $T gs_block_max_$S($T* buf, $T v) {
    buf[threadIdx.x] = v;
    __syncthreads();
    for (unsigned int s = GS_BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            $T o = buf[threadIdx.x + s];
            // NaN wins, as on the host.
            if (o > buf[threadIdx.x] || o != o) buf[threadIdx.x] = o;
        }
        __syncthreads();
    }
    $T r = buf[0];
    __syncthreads();
    return r;
}

// out[r] = scale * sum(a[r, :]) for a viewed as [rows, len]; one block per row.
extern "C" __global__ void reduce_rows_$S(unsigned long long rows, unsigned long long len, $T* out, const $T* a, $T scale) {
    __shared__ $T buf[GS_BLOCK];
    for (unsigned long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const $T* row = a + r * len;
        $T acc = ($T)0;
        for (unsigned long long j = threadIdx.x; j < len; j += GS_BLOCK) acc += row[j];
        $T s = gs_block_sum_$S(buf, acc);
        if (threadIdx.x == 0) out[r] = s * scale;
    }
}

// out[o, i] = scale * sum_l a[o, l, i]; one thread per output element.
extern "C" __global__ void reduce_cols_$S(unsigned long long outer, unsigned long long len, unsigned long long inner,
        $T* out, const $T* a, $T scale) {
    unsigned long long n = outer * inner;
    for (unsigned long long k = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; k < n;
         k += (unsigned long long)gridDim.x * blockDim.x) {
        unsigned long long o = k / inner, i = k % inner;
        const $T* p = a + o * len * inner + i;
        $T acc = ($T)0;
        for (unsigned long long l = 0; l < len; ++l) acc += p[l * inner];
        out[k] = acc * scale;
    }
}

// Row-wise softmax (log != 0: log-softmax) of a viewed as [rows, cols]; one block per row.
extern "C" __global__ void softmax_$S(unsigned long long rows, unsigned long long cols, $T* out, const $T* a, int log_) {
    __shared__ $T buf[GS_BLOCK];
    for (unsigned long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const $T* x = a + r * cols;
        $T* y = out + r * cols;
        $T m = x[0];
        for (unsigned long long j = threadIdx.x; j < cols; j += GS_BLOCK) {
            if (x[j] > m || x[j] != x[j]) m = x[j];
        }
        m = gs_block_max_$S(buf, m);
        $T acc = ($T)0;
        for (unsigned long long j = threadIdx.x; j < cols; j += GS_BLOCK) acc += gs_exp_$S(x[j] - m);
        $T sum = gs_block_sum_$S(buf, acc);
        if (log_) {
            $T lse = gs_log_$S(sum);
            for (unsigned long long j = threadIdx.x; j < cols; j += GS_BLOCK) y[j] = x[j] - m - lse;
        } else {
            for (unsigned long long j = threadIdx.x; j < cols; j += GS_BLOCK) y[j] = gs_exp_$S(x[j] - m) / sum;
        }
    }
}

// Backward of row-wise softmax given its output y: y * (g - sum(g y)); of
// log-softmax: g - exp(y) * sum(g). One block per row.
extern "C" __global__ void softmax_backward_$S(unsigned long long rows, unsigned long long cols, $T* out,
        const $T* g, const $T* y, int log_) {
    __shared__ $T buf[GS_BLOCK];
    for (unsigned long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const $T* gr = g + r * cols;
        const $T* yr = y + r * cols;
        $T* o = out + r * cols;
        $T acc = ($T)0;
        for (unsigned long long j = threadIdx.x; j < cols; j += GS_BLOCK) acc += log_ ? gr[j] : gr[j] * yr[j];
        $T s = gs_block_sum_$S(buf, acc);
        for (unsigned long long j = threadIdx.x; j < cols; j += GS_BLOCK) {
            o[j] = log_ ? gr[j] - gs_exp_$S(yr[j]) * s : yr[j] * (gr[j] - s);
        }
    }
}

#ifndef GS_ERROR_RECORD
#define GS_ERROR_RECORD
// The device's error record: mapped pinned host memory that the host reads after it
// waits for the device (`RawErrorRecord` in backend/cuda.rs). The first thread to report
// claims it (atomicCAS from 0) and fills it in; `code` is written last, after a
// system-wide fence, so the host sees a complete record once `code` is non-zero. Later
// reports are dropped until the host has read and cleared it.
struct gs_error_record {
    unsigned int code;
    unsigned int claim;
    long long row;
    long long value;
    long long limit;
};

__device__ __noinline__ void gs_report_error(gs_error_record* rec, unsigned int code, long long row,
        long long value, long long limit) {
    // A plain read first: many bad rows need not all contend for the claim.
    if (*(volatile unsigned int*)&rec->claim != 0u) return;
    if (atomicCAS(&rec->claim, 0u, 1u) != 0u) return;
    rec->row = row;
    rec->value = value;
    rec->limit = limit;
    __threadfence_system();
    *(volatile unsigned int*)&rec->code = code;
}
#endif

__device__ __forceinline__ long long gs_target_$S(const void* t, int is64, unsigned long long i) {
    return is64 ? ((const long long*)t)[i] : (long long)((const int*)t)[i];
}

// out[i] = -logp[i, t_i]. A target that is not a class index gives NaN for its row (and
// reads nothing) and is reported in `err` with `code`.
extern "C" __global__ void nll_rows_$S(unsigned long long rows, unsigned long long cols, $T* out,
        const $T* logp, const void* targets, int is64, gs_error_record* err, unsigned int code) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < rows;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        long long t = gs_target_$S(targets, is64, i);
        if (t < 0 || (unsigned long long)t >= cols) {
            gs_report_error(err, code, (long long)i, t, (long long)cols);
            out[i] = gs_nan_$S();
        } else {
            out[i] = -logp[i * cols + t];
        }
    }
}

// out[i, j] = -g[0] * scale where j == t_i, else 0: a row whose target is not a class
// index gets zeros (and is reported in `err` with `code`, once per row).
extern "C" __global__ void nll_backward_$S(unsigned long long rows, unsigned long long cols, $T* out,
        const void* targets, int is64, const $T* g, $T scale, gs_error_record* err, unsigned int code) {
    unsigned long long n = rows * cols;
    $T v = -g[0] * scale;
    for (unsigned long long k = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; k < n;
         k += (unsigned long long)gridDim.x * blockDim.x) {
        unsigned long long i = k / cols, j = k % cols;
        long long t = gs_target_$S(targets, is64, i);
        if (j == 0 && (t < 0 || (unsigned long long)t >= cols)) {
            gs_report_error(err, code, (long long)i, t, (long long)cols);
        }
        out[k] = (long long)j == t ? v : ($T)0;
    }
}

// One AdamW step in place (decoupled weight decay, bias-corrected moments).
extern "C" __global__ void adamw_$S(unsigned long long n, $T* p, const $T* g, $T* m, $T* v,
        $T decay, $T step, $T b1, $T b2, $T bias2_sqrt, $T eps) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        $T gi = g[i];
        $T mi = b1 * m[i] + (($T)1 - b1) * gi;
        $T vi = b2 * v[i] + (($T)1 - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * decay - step * mi / (gs_sqrt_$S(vi) / bias2_sqrt + eps);
    }
}
