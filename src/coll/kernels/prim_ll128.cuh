/* SPDX-License-Identifier: BSD-3-Clause */
// LL128 primitives: 128-byte lines of 120 payload bytes and an 8-byte flag
// (the layout is kern_ll128.cu's head).
#ifndef P2PK_PRIM_LL128_CUH
#define P2PK_PRIM_LL128_CUH

#include "coll/kernels/prim_ll.cuh"

namespace p2pk {

// Bytes [o, o + len) of a buffer of nbytes (len 16, or 8 for the flag lane),
// as two 8-byte halves; past the end reads as zero.
template <class T>
__device__ __forceinline__ uint4 load_part(const char *in, uint64_t o, bool flag_lane,
                                           uint64_t nbytes) {
  const uint2 lo = load_line<T>(in, o / 8, nbytes);
  const uint2 hi = flag_lane ? make_uint2(0, 0) : load_line<T>(in, o / 8 + 1, nbytes);
  return make_uint4(lo.x, lo.y, hi.x, hi.y);
}

template <class T>
__device__ __forceinline__ void store_part(char *out, uint64_t o, bool flag_lane, uint64_t nbytes,
                                           uint4 v) {
  store_line<T>(out, o / 8, nbytes, make_uint2(v.x, v.y));
  if (!flag_lane) store_line<T>(out, o / 8 + 1, nbytes, make_uint2(v.z, v.w));
}

// Warp-collective: every lane of the warp calls it with the same peer. Each
// group of 8 lanes reloads each of its U lines until its flag lane sees
// `seq`; every line's load is issued before any is checked, so one poll
// waits out one load latency, not U. A group with no line (act false) only
// takes part. If the wait gives up, the last data read (the kernel has
// failed; the host reports it).
template <int U>
__device__ __forceinline__ void ll128_wait_n(const p2pk_ar_args &a, Waiter &w,
                                             const char *const (&src)[U], uint32_t seq, int peer,
                                             const bool (&act)[U], bool flag_lane, unsigned gmask,
                                             uint4 (&x)[U]) {
  bool need[U];
#pragma unroll
  for (int u = 0; u < U; u++) need[u] = act[u], x[u] = make_uint4(0, 0, 0, 0);
  for (;;) {
#pragma unroll
    for (int u = 0; u < U; u++)
      if (need[u]) x[u] = ld_vol_v4(src[u]);
    unsigned any = 0;
#pragma unroll
    for (int u = 0; u < U; u++) {
      const bool bad = need[u] && flag_lane && (x[u].z != seq || x[u].w != seq);
      const unsigned m = __ballot_sync(0xffffffffu, bad);
      if (!(m & gmask)) need[u] = false;
      any |= m;
    }
    if (!any) break;
    int give = 0;
    if ((threadIdx.x & 31) == 0) give = w.poll(a, peer);
    if (__shfl_sync(0xffffffffu, give, 0)) break;
  }
}

}  // namespace p2pk

#endif
