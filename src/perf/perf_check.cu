/* SPDX-License-Identifier: BSD-3-Clause */
#include "perf/perf_kernels.h"

namespace {

constexpr int kThreads = 256;
constexpr uint64_t kMaxBlocks = 2048;

unsigned blocks_for(uint64_t n) {
  uint64_t b = (n + kThreads - 1) / kThreads;
  if (b > kMaxBlocks) b = kMaxBlocks;
  return b ? (unsigned)b : 1u;
}

__global__ void fill_kernel(void *buf, uint64_t n, perf_gen g, int rank) {
  uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    perf_store(buf, g.dtype, i, perf_input(&g, rank, i));
}

__global__ void check_kernel(const void *buf, uint64_t n, perf_gen g, int rank,
                             unsigned long long *wrong) {
  uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  unsigned long long bad = 0;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    double want = perf_expected(&g, rank, i);
    bad += (unsigned long long)perf_is_wrong(perf_load(buf, g.dtype, i), want,
                                             perf_tolerance(&g, want));
  }
  for (int off = 16; off > 0; off >>= 1) bad += __shfl_down_sync(0xffffffffu, bad, off);
  if ((threadIdx.x & 31) == 0 && bad) atomicAdd(wrong, bad);
}

__global__ void spin_kernel(uint64_t ns) {
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

}  // namespace

extern "C" cudaError_t p2pk_perf_spin(uint64_t ns, int blocks, cudaStream_t s) {
  spin_kernel<<<blocks > 0 ? blocks : 1, 128, 0, s>>>(ns);
  return cudaGetLastError();
}

extern "C" cudaError_t p2pk_perf_fill(void *buf, uint64_t n, const perf_gen *g, int rank,
                                      cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  fill_kernel<<<blocks_for(n), kThreads, 0, s>>>(buf, n, *g, rank);
  return cudaGetLastError();
}

extern "C" cudaError_t p2pk_perf_check(const void *buf, uint64_t n, const perf_gen *g, int rank,
                                       unsigned long long *wrong, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  check_kernel<<<blocks_for(n), kThreads, 0, s>>>(buf, n, *g, rank, wrong);
  return cudaGetLastError();
}
