// gpuscope's float32 kernels that move four elements at a time (16-byte loads and
// stores): the element-wise binary operation on equal shapes, the bias kernels and the
// attention head split and merge. Included once (float only); the Rust side uses them
// when every pointer is 16-byte aligned, the row length is a multiple of 4 and the
// element count fits in 32 bits, and the general kernels otherwise. Index arithmetic is
// 32-bit, once per four elements.

__device__ __forceinline__ float gs_apply4(int op, float x, float y) {
    switch (op) {
        case 0: return x + y;
        case 1: return x - y;
        case 2: return x * y;
        case 3: return x / y;
        default: return y;
    }
}

// out = a op b, element for element (same shapes, contiguous). `n4` = elements / 4.
extern "C" __global__ void binary_flat4(int op, unsigned int n4, float4* out, const float4* a, const float4* b) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
        float4 y = b[i];
        float4 r;
        if (op == 4) {
            r = y;
        } else {
            float4 x = a[i];
            r = make_float4(gs_apply4(op, x.x, y.x), gs_apply4(op, x.y, y.y), gs_apply4(op, x.z, y.z),
                            gs_apply4(op, x.w, y.w));
        }
        out[i] = r;
    }
}

// y[r, c] += b[c] in place; `cols4` = row length / 4.
extern "C" __global__ void bias_add4(unsigned int n4, unsigned int cols4, float4* y, const float4* b) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
        float4 v = y[i];
        float4 c = b[i % cols4];
        y[i] = make_float4(v.x + c.x, v.y + c.y, v.z + c.z, v.w + c.w);
    }
}

__device__ __forceinline__ float gs_gelu4(float z) {
    return 0.5f * z * (1.0f + erff(z * 0.70710678118654752440f));
}

__device__ __forceinline__ float gs_gelu4_grad(float z) {
    float cdf = 0.5f * (1.0f + erff(z * 0.70710678118654752440f));
    return cdf + z * expf(-0.5f * z * z) * 0.39894228040143267794f;
}

// y = gelu(x + b) (exact), or with `g` != 0: y = g * gelu'(x + b).
extern "C" __global__ void bias_gelu4(unsigned int n4, unsigned int cols4, float4* y, const float4* g,
        const float4* x, const float4* b) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
        float4 v = x[i];
        float4 c = b[i % cols4];
        float4 z = make_float4(v.x + c.x, v.y + c.y, v.z + c.z, v.w + c.w);
        if (g) {
            float4 d = g[i];
            y[i] = make_float4(d.x * gs_gelu4_grad(z.x), d.y * gs_gelu4_grad(z.y), d.z * gs_gelu4_grad(z.z),
                               d.w * gs_gelu4_grad(z.w));
        } else {
            y[i] = make_float4(gs_gelu4(z.x), gs_gelu4(z.y), gs_gelu4(z.z), gs_gelu4(z.w));
        }
    }
}

// As the heads kernel of nn.cu, four elements at a time: `n4` = B·T·S·H·D / 4, `d4` = D / 4.
extern "C" __global__ void heads4(unsigned int n4, unsigned int t_len, unsigned int s_len, unsigned int h_len,
        unsigned int d4, float4* dst, const float4* src, int to_heads) {
    unsigned int b_len = n4 / (t_len * s_len * h_len * d4);
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
        unsigned int r = i;
        unsigned int d = r % d4; r /= d4;
        unsigned int h = r % h_len; r /= h_len;
        unsigned int s = r % s_len; r /= s_len;
        unsigned int t = r % t_len; r /= t_len;
        unsigned int b = r;
        unsigned int j = (((s * b_len + b) * h_len + h) * t_len + t) * d4 + d;
        if (to_heads) dst[j] = src[i]; else dst[i] = src[j];
    }
}
