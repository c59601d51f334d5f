// What CUDA's virtual memory calls cost on this GPU, by size: cuMemCreate, cuMemMap,
// cuMemSetAccess (one mapping, and one call over many mappings), cuMemUnmap,
// cuMemRelease, against cuMemAlloc/cuMemFree; and what the driver accepts (a mapping of
// part of a physical allocation, one allocation mapped at two addresses).
//
// Build and run on the GPU machine:
//   g++ -O2 -std=c++17 bench/vmm_cost.cpp -I$CUDA/include -L$CUDA/lib64 -lcuda -o /tmp/vmm_cost
//   /tmp/vmm_cost
// Each figure is the median of REPS calls, in microseconds.
#include <cuda.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

static double now_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}
#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s; cuGetErrorName(r_, &s); \
  printf("%s failed: %s (line %d)\n", #x, s, __LINE__); return 1; } } while (0)

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main() {
  const int REPS = 7;
  CK(cuInit(0));
  CUdevice dev; CK(cuDeviceGet(&dev, 0));
  CUcontext ctx; CK(cuDevicePrimaryCtxRetain(&ctx, dev)); CK(cuCtxSetCurrent(ctx));
  char name[256]; cuDeviceGetName(name, sizeof name, dev);
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t gran = 0;
  CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  size_t rec = 0;
  CK(cuMemGetAllocationGranularity(&rec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  printf("device %s, granularity %zu KiB (recommended %zu KiB)\n", name, gran >> 10, rec >> 10);
  CUmemAccessDesc acc = {};
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;

  // Warm the driver up once.
  { CUmemGenericAllocationHandle h; CK(cuMemCreate(&h, gran, &prop, 0)); CK(cuMemRelease(h)); }

  const size_t MB = 1 << 20;
  CUdeviceptr va;
  const size_t VA = 8ull << 30;
  CK(cuMemAddressReserve(&va, VA, gran, 0, 0));
  printf("%10s %10s %10s %12s %10s %10s | %12s %10s\n", "size MiB", "create", "map", "set_access",
         "unmap", "release", "cuMemAlloc", "cuMemFree");
  for (size_t mb : {2, 4, 8, 20, 32, 64, 128, 256, 512, 1024, 2048}) {
    size_t size = mb * MB;
    std::vector<double> tc, tm, ts, tu, tr, ta, tf;
    for (int i = 0; i < REPS; i++) {
      CUmemGenericAllocationHandle h;
      double t = now_us(); CK(cuMemCreate(&h, size, &prop, 0)); tc.push_back(now_us() - t);
      t = now_us(); CK(cuMemMap(va, size, 0, h, 0)); tm.push_back(now_us() - t);
      t = now_us(); CK(cuMemSetAccess(va, size, &acc, 1)); ts.push_back(now_us() - t);
      t = now_us(); CK(cuMemUnmap(va, size)); tu.push_back(now_us() - t);
      t = now_us(); CK(cuMemRelease(h)); tr.push_back(now_us() - t);
      CUdeviceptr p;
      t = now_us(); CK(cuMemAlloc(&p, size)); ta.push_back(now_us() - t);
      t = now_us(); CK(cuMemFree(p)); tf.push_back(now_us() - t);
    }
    printf("%10zu %10.2f %10.2f %12.2f %10.2f %10.2f | %12.2f %10.2f\n", mb, median(tc), median(tm),
           median(ts), median(tu), median(tr), median(ta), median(tf));
  }

  // One cuMemSetAccess over k mappings side by side, against k calls.
  for (int k : {2, 8, 32}) {
    size_t size = 20 * MB;
    std::vector<CUmemGenericAllocationHandle> hs(k);
    for (int i = 0; i < k; i++) { CK(cuMemCreate(&hs[i], size, &prop, 0)); CK(cuMemMap(va + i * size, size, 0, hs[i], 0)); }
    double t = now_us(); CK(cuMemSetAccess(va, k * size, &acc, 1)); double one = now_us() - t;
    t = now_us(); for (int i = 0; i < k; i++) CK(cuMemSetAccess(va + i * size, size, &acc, 1)); double each = now_us() - t;
    for (int i = 0; i < k; i++) { CK(cuMemUnmap(va + i * size, size)); CK(cuMemRelease(hs[i])); }
    printf("set_access over %d mappings of 20 MiB: one call %.2f us, %d calls %.2f us\n", k, one, k, each);
  }

  // What the driver accepts.
  {
    CUmemGenericAllocationHandle h; CK(cuMemCreate(&h, 20 * MB, &prop, 0));
    CUresult part = cuMemMap(va, 2 * MB, 0, h, 0);
    const char* s; cuGetErrorName(part, &s);
    printf("map the first 2 MiB of a 20 MiB allocation: %s\n", s);
    if (part == CUDA_SUCCESS) cuMemUnmap(va, 2 * MB);
    CUresult off = cuMemMap(va, 2 * MB, 2 * MB, h, 0);
    cuGetErrorName(off, &s);
    printf("map 2 MiB at offset 2 MiB of a 20 MiB allocation: %s\n", s);
    if (off == CUDA_SUCCESS) cuMemUnmap(va, 2 * MB);
    CUresult a = cuMemMap(va, 20 * MB, 0, h, 0);
    CUresult b = cuMemMap(va + 64 * MB, 20 * MB, 0, h, 0);
    cuGetErrorName(b, &s);
    printf("one allocation mapped at two addresses: %s\n", s);
    if (a == CUDA_SUCCESS) cuMemUnmap(va, 20 * MB);
    if (b == CUDA_SUCCESS) cuMemUnmap(va + 64 * MB, 20 * MB);
    CK(cuMemRelease(h));
  }

  // Events and streams.
  {
    CUstream st; CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CUevent ev; CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    std::vector<double> rec_t, q_t, sq_t, ss_t;
    for (int i = 0; i < 1000; i++) {
      double t = now_us(); CK(cuEventRecord(ev, st)); rec_t.push_back(now_us() - t);
      t = now_us(); cuEventQuery(ev); q_t.push_back(now_us() - t);
      t = now_us(); cuStreamQuery(st); sq_t.push_back(now_us() - t);
      t = now_us(); CK(cuStreamSynchronize(st)); ss_t.push_back(now_us() - t);
    }
    printf("cuEventRecord %.3f us, cuEventQuery %.3f us, cuStreamQuery %.3f us, cuStreamSynchronize (idle) %.3f us\n",
           median(rec_t), median(q_t), median(sq_t), median(ss_t));
  }
  CK(cuMemAddressFree(va, VA));
  return 0;
}
