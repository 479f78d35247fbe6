// What the device probes share: the CUDA check that ends the probe with the
// call and its error, and sorting a run of timings for its median and spread.
#ifndef P2PK_PROBE_H
#define P2PK_PROBE_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                            \
  do {                                                                                   \
    cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) {                                                             \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

static int probe_cmp_f(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

// Sorts t[0..n) in place (t[0] the least, t[n / 2] the median, t[n - 1] the most).
static inline void probe_sort(float *t, int n) { qsort(t, (size_t)n, sizeof *t, probe_cmp_f); }

// Waits for everything queued on GPUs 0..n-1.
static inline void probe_sync_all(int n) {
  for (int g = 0; g < n; g++) {
    CK(cudaSetDevice(g));
    CK(cudaDeviceSynchronize());
  }
}

#endif
