/* SPDX-License-Identifier: BSD-3-Clause */
/* Kernels of the copy layer and their thin launchers (copy_kernels.cu). Each
 * launcher enqueues on `stream`, which must belong to the current device, and
 * returns the launch's CUDA status. */
#ifndef P2PK_XFER_KERNELS_H
#define P2PK_XFER_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "xfer/xfer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Copy `bytes` from src to dst (either may be a peer's memory, any
 * alignment) with an SM kernel shaped by `cfg`; `sm_count` of this device. */
cudaError_t p2pk_launch_sm_copy(void *dst, const void *src, size_t bytes, const p2pk_sm_config *cfg,
                                int sm_count, cudaStream_t stream);
/* Write the test pattern: byte i = p2pk_pattern_byte(seed, iter, i). */
cudaError_t p2pk_launch_fill(void *p, size_t bytes, uint64_t seed, uint32_t iter,
                             cudaStream_t stream);
/* Add to *count (device memory) the bytes that differ from the pattern. */
cudaError_t p2pk_launch_verify(const void *p, size_t bytes, uint64_t seed, uint32_t iter,
                               unsigned long long *count, cudaStream_t stream);
/* Add to *count the bytes that differ from `value` (guard regions). */
cudaError_t p2pk_launch_count_ne(const void *p, size_t bytes, unsigned char value,
                                 unsigned long long *count, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
