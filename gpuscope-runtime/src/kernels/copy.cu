// gpuscope's strided copy: any layout of a shape into any other (the gather that makes
// a view contiguous, the scatter that writes through a view), for elements of 1, 2, 4
// or 8 bytes (every dtype: elements are moved as words of their size).
//
// Included once (not per element type). The shape comes merged (dimensions both
// layouts walk alike are one) and innermost first; `ndim` of the `GS_COPY_DIMS`
// entries are used. Strides are in elements; sizes 64-bit; a grid-stride loop, so any
// grid size is correct.

#define GS_COPY_DIMS 8

// Passed by value; the same layout as `CopyLayout` in tensor/ops/cuda.rs.
struct gs_copy_layout {
    long long dims[GS_COPY_DIMS];
    long long dst[GS_COPY_DIMS];
    long long src[GS_COPY_DIMS];
};

template <typename W>
__device__ __forceinline__ void gs_strided_copy(unsigned long long n, W* dst, const W* src, int ndim,
        const gs_copy_layout& l) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        unsigned long long r = i;
        long long od = 0, os = 0;
        for (int d = 0; d < ndim; ++d) {
            unsigned long long size = (unsigned long long)l.dims[d];
            long long k = (long long)(r % size);
            r /= size;
            od += k * l.dst[d];
            os += k * l.src[d];
        }
        dst[od] = src[os];
    }
}

extern "C" __global__ void strided_copy_u8(unsigned long long n, unsigned char* dst, const unsigned char* src,
        int ndim, gs_copy_layout l) {
    gs_strided_copy(n, dst, src, ndim, l);
}

extern "C" __global__ void strided_copy_u16(unsigned long long n, unsigned short* dst, const unsigned short* src,
        int ndim, gs_copy_layout l) {
    gs_strided_copy(n, dst, src, ndim, l);
}

extern "C" __global__ void strided_copy_u32(unsigned long long n, unsigned int* dst, const unsigned int* src,
        int ndim, gs_copy_layout l) {
    gs_strided_copy(n, dst, src, ndim, l);
}

extern "C" __global__ void strided_copy_u64(unsigned long long n, unsigned long long* dst,
        const unsigned long long* src, int ndim, gs_copy_layout l) {
    gs_strided_copy(n, dst, src, ndim, l);
}
