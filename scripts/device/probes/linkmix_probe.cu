// Nineteenth session probe: can the copy engines and an SM push kernel share
// one NVLink direction and move more together than either alone? The
// mid-size all-reduce (LL128, 1 - 32 MiB) crosses the link at ~320 GB/s of
// lines where a copy engine reaches ~392; if both together exceed what one
// reaches, part of a mid-size call could go by copy engine beside the kernel.
//
// Both GPUs send at once (0 -> 1 and 1 -> 0), as an all-reduce does. For a
// total of T MiB per direction, a fraction f goes by cudaMemcpyPeerAsync on
// one stream and the rest by a push kernel on another; the time is from the
// first start to the last end (events), median of 9 rounds after 3 warm-ups.
//
// Build: nvcc -O2 -arch=sm_90 -o linkmix_probe linkmix_probe.cu
// Usage: linkmix_probe [blocks (264)] [threads (512)]
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "probe.h"

__global__ void push(const int4 *__restrict__ src, int4 *__restrict__ dst, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    int4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

int main(int argc, char **argv) {
  int blocks = argc > 1 ? atoi(argv[1]) : 264;
  int threads = argc > 2 ? atoi(argv[2]) : 512;
  const size_t maxb = (size_t)256 << 20;
  void *src[2], *dst[2];
  cudaStream_t sce[2], ssm[2];
  cudaEvent_t e0[2], ece[2], esm[2];
  for (int g = 0; g < 2; g++) {
    CK(cudaSetDevice(g));
    CK(cudaDeviceEnablePeerAccess(1 - g, 0));
    CK(cudaMalloc(&src[g], maxb));
    CK(cudaMalloc(&dst[g], maxb));
    CK(cudaMemset(src[g], 0x3c + g, maxb));
    CK(cudaStreamCreateWithFlags(&sce[g], cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&ssm[g], cudaStreamNonBlocking));
    CK(cudaEventCreate(&e0[g]));
    CK(cudaEventCreate(&ece[g]));
    CK(cudaEventCreate(&esm[g]));
  }
  const size_t totals_mib[] = {4, 16, 64, 256};
  const int fracs[] = {0, 10, 20, 30, 50, 100};  // percent by copy engine
  enum { WARM = 3, ROUNDS = 9 };
  printf("push kernel %d x %d; GB/s per direction (total bytes / first start to last end), GPU 0 "
         "and GPU 1\n", blocks, threads);
  for (int ti = 0; ti < 4; ti++) {
    size_t total = totals_mib[ti] << 20;
    for (int fi = 0; fi < 6; fi++) {
      size_t ce = (total * fracs[fi] / 100) & ~(size_t)4095, sm = total - ce;
      float t[2][ROUNDS];
      for (int r = 0; r < WARM + ROUNDS; r++) {
        probe_sync_all(2);
        for (int g = 0; g < 2; g++) {
          CK(cudaSetDevice(g));
          CK(cudaEventRecord(e0[g], sce[g]));
          CK(cudaStreamWaitEvent(ssm[g], e0[g], 0));
          if (ce) CK(cudaMemcpyPeerAsync(dst[1 - g], 1 - g, src[g], g, ce, sce[g]));
          if (sm)
            push<<<blocks, threads, 0, ssm[g]>>>((const int4 *)((char *)src[g] + ce),
                                                (int4 *)((char *)dst[1 - g] + ce), sm / 16);
          CK(cudaEventRecord(ece[g], sce[g]));
          CK(cudaEventRecord(esm[g], ssm[g]));
        }
        probe_sync_all(2);
        if (r < WARM) continue;
        for (int g = 0; g < 2; g++) {
          float a, b;
          CK(cudaEventElapsedTime(&a, e0[g], ece[g]));
          CK(cudaEventElapsedTime(&b, e0[g], esm[g]));
          t[g][r - WARM] = a > b ? a : b;
        }
      }
      printf("%4zu MiB, %3d%% by copy engine:", totals_mib[ti], fracs[fi]);
      for (int g = 0; g < 2; g++) {
        probe_sort(t[g], ROUNDS);
        printf("  %6.1f GB/s (%7.1f us, spread %5.1f-%5.1f)", (double)total / (t[g][ROUNDS / 2] * 1e-3) / 1e9,
               t[g][ROUNDS / 2] * 1e3, t[g][0] * 1e3, t[g][ROUNDS - 1] * 1e3);
      }
      printf("\n");
      fflush(stdout);
    }
  }
  return 0;
}
