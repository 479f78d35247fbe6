/* SPDX-License-Identifier: BSD-3-Clause */
/* GPU tests: skip (exit 77, CTest's skip code) with the reason printed when
 * the machine lacks the GPUs a test needs. */
#ifndef P2PK_GPU_TEST_H
#define P2PK_GPU_TEST_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "topo/topo.h"

/* The reason in the library's words (p2pk_gpu_count: "the CUDA driver
 * (libcuda.so.1) is not installed", ...). */
#define T_REQUIRE_GPUS(n)                                                                   \
  do {                                                                                      \
    int c_ = 0;                                                                             \
    if (p2pk_gpu_count(&c_) != P2PKIT_SUCCESS || c_ < (n)) {                                \
      printf("SKIP: needs %d GPU(s); %s\n", (int)(n),                                       \
             c_ ? "this machine has fewer" : p2pkit_last_error());                         \
      exit(77);                                                                             \
    }                                                                                       \
  } while (0)

#define T_CUDA(call)                                                                  \
  do {                                                                                \
    cudaError_t e_ = (call);                                                          \
    if (e_ != cudaSuccess) {                                                          \
      T_FAIL("%s: %s", #call, cudaGetErrorString(e_));                                \
    }                                                                                 \
  } while (0)

#endif
