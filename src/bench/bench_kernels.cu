/* SPDX-License-Identifier: BSD-3-Clause */
// Benchmark-only kernels: the timing gate and the flag ping-pong.
#include <cuda_runtime.h>
#include <stdint.h>

#include "bench/bench_kernels.h"
#include "xfer/pattern.h"

namespace {

__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void k_gate(const volatile uint32_t *flag, uint32_t want, uint32_t *timed_out,
                       unsigned long long timeout_ns) {
  const unsigned long long t0 = globaltimer();
  while (*flag < want) {
    if (globaltimer() - t0 > timeout_ns) {
      *(volatile uint32_t *)timed_out = 1;
      return;
    }
    __nanosleep(256);
  }
}

__device__ __forceinline__ void send(uint32_t *slot, uint32_t seq, uint64_t data) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(slot),
               "r"((uint32_t)data), "r"(seq), "r"((uint32_t)(data >> 32)), "r"(seq)
               : "memory");
}

// Spin until both halves carry `seq`; 0 on timeout.
__device__ __forceinline__ int recv(const uint32_t *slot, uint32_t seq, uint64_t *data,
                                    unsigned long long timeout_ns) {
  unsigned long long t0 = 0;
  for (unsigned polls = 0;; polls++) {
    uint32_t d0, f0, d1, f1;
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(d0), "=r"(f0), "=r"(d1), "=r"(f1)
                 : "l"(slot)
                 : "memory");
    if (f0 == seq && f1 == seq) {
      *data = (uint64_t)d0 | (uint64_t)d1 << 32;
      return 1;
    }
    if ((polls & 1023) == 0) {
      unsigned long long now = globaltimer();
      if (!t0) t0 = now;
      else if (now - t0 > timeout_ns) return 0;
    }
  }
}

__device__ __forceinline__ uint64_t payload(uint64_t seed, uint32_t who, uint32_t i) {
  return (uint64_t)p2pk_pattern_word(seed, who, 2 * (uint64_t)i) |
         (uint64_t)p2pk_pattern_word(seed, who, 2 * (uint64_t)i + 1) << 32;
}

__global__ void k_pingpong(uint32_t *remote, const uint32_t *local, int iters, int initiator,
                           uint64_t seed, unsigned long long *out, unsigned long long timeout_ns) {
  unsigned long long bad = 0, timeouts = 0, t_begin = 0;
  const uint32_t warm = (uint32_t)iters / 10;
  for (uint32_t i = 1; i <= (uint32_t)iters; i++) {
    uint64_t got = 0;
    if (initiator) {
      if (i == warm + 1) t_begin = globaltimer();
      send(remote, i, payload(seed, 1, i));
      if (!recv(local, i, &got, timeout_ns)) {
        timeouts++;
        break;
      }
      bad += got != payload(seed, 2, i);
    } else {
      if (!recv(local, i, &got, timeout_ns)) {
        timeouts++;
        break;
      }
      bad += got != payload(seed, 1, i);
      send(remote, i, payload(seed, 2, i));
    }
  }
  out[0] = bad;
  out[1] = timeouts;
  out[2] = t_begin;
  out[3] = globaltimer();
}

}  // namespace

extern "C" cudaError_t p2pk_launch_gate(const volatile uint32_t *flag, uint32_t want,
                                        uint32_t *timed_out, unsigned long long timeout_ns,
                                        cudaStream_t stream) {
  k_gate<<<1, 1, 0, stream>>>(flag, want, timed_out, timeout_ns);
  return cudaGetLastError();
}

extern "C" cudaError_t p2pk_launch_pingpong(void *remote, void *local, int iters, int initiator,
                                            uint64_t seed, unsigned long long *out,
                                            unsigned long long timeout_ns, cudaStream_t stream) {
  k_pingpong<<<1, 1, 0, stream>>>((uint32_t *)remote, (const uint32_t *)local, iters, initiator,
                                  seed, out, timeout_ns);
  return cudaGetLastError();
}
