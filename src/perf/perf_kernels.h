/* SPDX-License-Identifier: BSD-3-Clause */
/* Fill and check kernels of `p2pkit perf` (perf_check.cu): thin launchers. */
#ifndef P2PK_PERF_KERNELS_H
#define P2PK_PERF_KERNELS_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "perf/perf_data.h"

#ifdef __cplusplus
extern "C" {
#endif

/* buf[i] = perf_input(g, rank, i) for i < n, in g->dtype. */
cudaError_t p2pk_perf_fill(void *buf, uint64_t n, const perf_gen *g, int rank, cudaStream_t s);
/* *wrong += elements i < n where buf[i] is not perf_expected(g, rank, i)
 * within perf_tolerance. `wrong` is device memory the caller zeroes. */
cudaError_t p2pk_perf_check(const void *buf, uint64_t n, const perf_gen *g, int rank,
                            unsigned long long *wrong, cudaStream_t s);

/* Keep the GPU busy for about `ns` nanoseconds (one block per
 * multiprocessor), so its clocks are up before the first timing. */
cudaError_t p2pk_perf_spin(uint64_t ns, int blocks, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
