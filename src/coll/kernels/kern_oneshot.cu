/* SPDX-License-Identifier: BSD-3-Clause */
// oneshot_kernel: every collective but send/recv over P2P, chunked push:
// block b copies its chunks of the input into every peer's mailbox (16-byte
// stores), raises the mailbox's ready counter, then reduces the peers'
// chunks from its own mailboxes in rank order (or copies them out) and
// hands the mailbox back (prim_simple.cuh).
#include "coll/kernels/prim_simple.cuh"

namespace p2pk {

template <class T>
__global__ void __launch_bounds__(512) oneshot_kernel(const __grid_constant__ p2pk_ar_args a) {
  __shared__ int s_ok;
  __shared__ const char *s_src[P2PK_COLL_MAX_RANKS];
  uint32_t seq;
  if (!prologue(a, &seq)) return;
  Waiter w(a);
  if (!start_call(a, seq, w)) return;
  const Plan P(a, a.chunk, sizeof(typename T::bits));
  os_run<T>(a, w, P, &s_ok, s_src);
}
}  // namespace p2pk

extern "C" cudaError_t p2pk_launch_oneshot(const p2pk_ar_args *a, int blocks, int threads,
                                           cudaStream_t stream) {
  cudaError_t e = cudaSuccess;
  P2PK_FOR_DTYPE(a->dtype, p2pk::oneshot_kernel, blocks, threads, stream, *a)
  return e;
}

extern "C" cudaError_t p2pk_preload_oneshot(void) {
  cudaError_t e = cudaSuccess;
  P2PK_PRELOAD_DTYPES(p2pk::oneshot_kernel, e);
  return e;
}
