/* SPDX-License-Identifier: BSD-3-Clause */
// The copy-engine paths' kernels: the local reduce (or copy) of what the
// copy engines landed, and the one-thread step kernel that waits for and
// posts the ranks' flags.
#include "coll/kernels/kern_common.cuh"

namespace p2pk {

// out = reduce of src[0..n) in rank order; block b takes the b-th 16-byte
// aligned slice, so every pointer keeps its alignment class.
template <class T>
__global__ void __launch_bounds__(512) local_reduce_kernel(const __grid_constant__ p2pk_lr_args a) {
  __shared__ const char *s_src[P2PK_COLL_MAX_RANKS];
  const uint64_t per = ((a.bytes + gridDim.x - 1) / gridDim.x + 15) & ~(uint64_t)15;
  const uint64_t lo = (uint64_t)blockIdx.x * per;
  if (lo >= a.bytes) return;
  const uint64_t len = min(per, a.bytes - lo);
  // One source: a plain copy (the copies out of the landing slots), 16
  // bytes a thread and access, no per-element work. Against the one-source
  // reduce it was (2x H200, process per GPU, same call):
  // all-reduce 1 GiB 2893 against 2929 us, all-to-all 2 GiB 2873 against
  // 2905, broadcast 1 GiB 2773 against 2782, send/recv 512 MiB 1450
  // against 1464 (1 GiB the same).
  if (a.n == 1) {
    copy_chunk<T>(a.out + lo, a.src[0] + lo, len);
    return;
  }
  if ((int)threadIdx.x < a.n) s_src[threadIdx.x] = a.src[threadIdx.x] + lo;
  __syncthreads();
  if (a.pair) reduce_chunk<T, false, true>(a.op, a.n, a.me, a.out + lo, s_src, nullptr, 0, len);
  else reduce_chunk<T, false>(a.op, a.n, a.me, a.out + lo, s_src, nullptr, 0, len);
}

// The copy engines over P2P with a process per GPU (path_ce_slots.c): the
// copies run on streams, and the ranks tell each other about them through
// counters in their scratch, written and waited for by one thread here
// (with the collective kernels' timeout and abort rules, so a peer that
// died makes this rank's error words say so and the streams go on).
__global__ void cep_sync_kernel(const __grid_constant__ p2pk_ar_args a,
                                const __grid_constant__ p2pk_cep_steps st) {
  if (threadIdx.x != 0) return;
  Waiter w(a);
  for (int i = 0; i < st.n; i++) {
    const p2pk_cep_step &s = st.s[i];
    if (s.kind == P2PK_CEP_POST) {
      if (s.hdr) st_vol_u64(s.hdr, s.hv);
      st_rel(s.ctr, s.v);
      continue;
    }
    if (s.kind == P2PK_CEP_SET) {
      st_vol_u64(s.ctr, s.v);
      continue;
    }
    if (s.kind == P2PK_CEP_WAIT_EQ) {
      if (!wait_eq(a, w, s.ctr, s.v, s.peer)) return;
    } else if (!wait_geq(a, w, s.ctr, s.v, s.peer)) {
      return;
    }
    if (s.hdr && ld_vol_u64(s.hdr) != s.hv) {
      fail(a, P2PK_DERR_MISMATCH, s.peer);
      return;
    }
  }
}

}  // namespace p2pk

extern "C" cudaError_t p2pk_launch_local_reduce(int dtype, const p2pk_lr_args *a, int blocks,
                                                cudaStream_t stream) {
  cudaError_t e = cudaSuccess;
  P2PK_FOR_DTYPE(dtype, p2pk::local_reduce_kernel, blocks, 512, stream, *a)
  return e;
}

static_assert(sizeof(p2pk_ar_args) + sizeof(p2pk_cep_steps) <= 4000, "cep_sync_kernel's parameters");

extern "C" cudaError_t p2pk_launch_cep_sync(const p2pk_ar_args *a, const p2pk_cep_steps *st,
                                            cudaStream_t stream) {
  p2pk::cep_sync_kernel<<<1, 32, 0, stream>>>(*a, *st);
  return cudaGetLastError();
}
extern "C" cudaError_t p2pk_preload_reduce(void) {
  cudaError_t e = cudaSuccess;
  P2PK_PRELOAD_DTYPES(p2pk::local_reduce_kernel, e);
  {
    cudaFuncAttributes fa;
    if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, p2pk::cep_sync_kernel);
  }
  return e;
}
