/* SPDX-License-Identifier: BSD-3-Clause */
/* Kernels only the benchmark uses (bench_kernels.cu). */
#ifndef P2PK_BENCH_KERNELS_H
#define P2PK_BENCH_KERNELS_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Hold `stream` until the host stores a value >= want into *flag (mapped
 * pinned memory), so that the timed work behind it is all queued before it
 * starts. Gives up after timeout_ns and sets *timed_out = 1. */
cudaError_t p2pk_launch_gate(const volatile uint32_t *flag, uint32_t want, uint32_t *timed_out,
                             unsigned long long timeout_ns, cudaStream_t stream);

/* Ping-pong of 8 data bytes + a flag, one 16-byte store per message (two
 * 8-byte halves, each {4 data bytes, 4 flag bytes}, as NCCL's LL protocol).
 * `remote` is the peer's 16-byte slot, `local` this GPU's (zeroed before the
 * launch). The initiator sends first. out[4] (device memory):
 * [0] payload mismatches, [1] timeouts, [2] and [3] %globaltimer (ns) at the
 * start of the timed round trips (after the first tenth) and at the end. */
cudaError_t p2pk_launch_pingpong(void *remote, void *local, int iters, int initiator,
                                 uint64_t seed, unsigned long long *out,
                                 unsigned long long timeout_ns, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
