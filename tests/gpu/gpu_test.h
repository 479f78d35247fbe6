/* GPU tests: skip (exit 77, CTest's skip code) with the reason printed when
 * the machine lacks the GPUs a test needs. */
#ifndef P2PK_GPU_TEST_H
#define P2PK_GPU_TEST_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#define T_REQUIRE_GPUS(n)                                                             \
  do {                                                                                \
    int c_ = 0;                                                                       \
    cudaError_t e_ = cudaGetDeviceCount(&c_);                                         \
    if (e_ != cudaSuccess || c_ < (n)) {                                              \
      printf("SKIP: needs %d GPU(s); %s\n", (int)(n),                                 \
             e_ != cudaSuccess ? cudaGetErrorString(e_) : "this machine has fewer"); \
      exit(77);                                                                       \
    }                                                                                 \
  } while (0)

#define T_CUDA(call)                                                                  \
  do {                                                                                \
    cudaError_t e_ = (call);                                                          \
    if (e_ != cudaSuccess) {                                                          \
      T_FAIL("%s: %s", #call, cudaGetErrorString(e_));                                \
    }                                                                                 \
  } while (0)

#endif
