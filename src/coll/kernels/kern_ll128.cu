/* SPDX-License-Identifier: BSD-3-Clause */
// ll128_kernel and ll128x2_kernel: every collective but send/recv over P2P
// at mid sizes, one-shot push with the LL128 protocol.
//
// Mid sizes. A 128-byte line carries 120 payload bytes and an 8-byte flag
// (the call's sequence number twice). Eight consecutive lanes of a warp own a
// line, 16 bytes each; the eighth holds 8 payload bytes and the flag. The
// line is written by one store instruction of the warp (the warp is
// reconverged first) and read by one load instruction, and the protocol
// rests on what NCCL's LL128 rests on: over NVLink such a 128-byte store
// reaches the reader's memory whole, so a reader whose flag lane sees this
// call's number sees the other 120 bytes of this call too. No fence and no
// separate flag: like LL, the data is polled itself, with 94% of each store
// payload instead of 50%. Two slots alternate by sequence number, as in LL,
// in an area of its own (an LL reader could mistake stale LL128 payload for
// its flags). P2PKIT_PROTO=ll or simple, or P2PKIT_LL128_MAX=0, avoid it.
#include "coll/kernels/prim_ll128.cuh"

namespace p2pk {

// Lines R[u] of rank r's slot (from), polled until they carry seq.
template <int U>
__device__ __forceinline__ void ll128_wait_rank(const p2pk_ar_args &a, Waiter &w, const char *from,
                                                const uint64_t (&R)[U], uint32_t seq, int r,
                                                const bool (&take)[U], bool flag_lane,
                                                unsigned gmask, uint4 (&x)[U]) {
  const char *src[U];
#pragma unroll
  for (int u = 0; u < U; u++) src[u] = from + R[u] * P2PK_LL128_LINE;
  ll128_wait_n<U>(a, w, src, seq, r, take, flag_lane, gmask, x);
}

// Passes j .. j + U - 1 of this warp's lines (L, push: which it has),
// pushed to every peer in send_mask, the sequence number in the flag lane.
template <class T, int U>
__device__ __forceinline__ void ll128_push(const char *in, uint64_t in_stride, uint32_t send_mask,
                                           int n, int me, char *const *s_peer, uint64_t off,
                                           uint64_t lbytes, uint32_t slot, unsigned part,
                                           const uint64_t (&L)[U], const bool (&push)[U],
                                           uint4 (&v)[U], uint64_t po, bool flag_lane,
                                           uint64_t nbytes, uint32_t seq) {
  for (int k = 1; k < n; k++) {
    const int p = me + k < n ? me + k : me + k - n;
    if (!has(send_mask, p)) continue;
    char *base = s_peer[p] + off + ((uint64_t)slot * (n - 1) + pslot(me, p, n)) * lbytes +
                 part * 16;
#pragma unroll
    for (int u = 0; u < U; u++) {
      if (push[u] && in_stride)
        v[u] = load_part<T>(in + p * in_stride, L[u] * P2PK_LL128_DATA + po, flag_lane, nbytes);
      if (flag_lane) v[u].z = v[u].w = seq;
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      // One store instruction per line: reconverge the warp first (the
      // loads above branch on alignment and on the end of the buffer).
      __syncwarp();
      if (push[u]) st_vol_v4(base + L[u] * P2PK_LL128_LINE, v[u]);
    }
  }
}

// The passes taken in (R, take), copied: each peer's lines in recv_mask to
// its output block, this rank's own (mv) to its own with self_copy.
template <class T, int U>
__device__ __forceinline__ void ll128_copy(const p2pk_ar_args &a, Waiter &w, const char *mine,
                                           char *out, uint64_t out_stride, uint32_t recv_mask,
                                           int self_copy, int n, int me, uint64_t lbytes,
                                           const uint64_t (&R)[U], const bool (&take)[U],
                                           const uint4 (&mv)[U], uint64_t po, bool flag_lane,
                                           unsigned gmask, uint64_t nbytes, uint32_t seq) {
  for (int r = 0; r < n; r++) {
    if (!has(recv_mask, r)) continue;
    uint4 x[U];
    ll128_wait_rank<U>(a, w, mine + (uint64_t)pslot(r, me, n) * lbytes, R, seq, r, take,
                       flag_lane, gmask, x);
#pragma unroll
    for (int u = 0; u < U; u++)
      if (take[u]) store_part<T>(out + r * out_stride, R[u] * P2PK_LL128_DATA + po, flag_lane, nbytes, x[u]);
  }
#pragma unroll
  for (int u = 0; u < U; u++)
    if (self_copy && take[u])
      store_part<T>(out + me * out_stride, R[u] * P2PK_LL128_DATA + po, flag_lane, nbytes, mv[u]);
}

// Rank r's lines x folded into acc (r == 0: acc = x), in rank order.
template <class T, int U>
__device__ __forceinline__ void ll128_accumulate(int op, int r, const uint4 (&x)[U],
                                                 typename T::acc (&acc)[U][2 * Pack8<T>::N]) {
  constexpr int N = Pack8<T>::N;
#pragma unroll
  for (int u = 0; u < U; u++) {
    Pack8<T> v0, v1;
    v0.u = make_uint2(x[u].x, x[u].y);
    v1.u = make_uint2(x[u].z, x[u].w);
#pragma unroll
    for (int e = 0; e < N; e++) {
      acc[u][e] = r == 0 ? T::ld(v0.e[e]) : apply<T>(op, acc[u][e], T::ld(v0.e[e]));
      acc[u][N + e] = r == 0 ? T::ld(v1.e[e]) : apply<T>(op, acc[u][N + e], T::ld(v1.e[e]));
    }
  }
}

// The reduced lines (acc over n ranks), finished and stored where taken.
template <class T, int U>
__device__ __forceinline__ void ll128_store_result(int op, int n,
                                                   typename T::acc (&acc)[U][2 * Pack8<T>::N],
                                                   const bool (&take)[U], char *out,
                                                   const uint64_t (&R)[U], uint64_t po,
                                                   bool flag_lane, uint64_t nbytes) {
  constexpr int N = Pack8<T>::N;
#pragma unroll
  for (int u = 0; u < U; u++) {
    Pack8<T> v0, v1;
#pragma unroll
    for (int e = 0; e < N; e++) {
      v0.e[e] = T::st(finish<T>(op, acc[u][e], n));
      v1.e[e] = T::st(finish<T>(op, acc[u][N + e], n));
    }
    if (take[u])
      store_part<T>(out, R[u] * P2PK_LL128_DATA + po, flag_lane, nbytes,
                    make_uint4(v0.u.x, v0.u.y, v1.u.x, v1.u.y));
  }
}

// Every collective but send/recv, as ll_kernel: push this rank's share to
// each peer in send_mask, then reduce in rank order or copy what arrives.
// A warp owns the same lines for both: 4 lines per pass (one per group of 8
// lanes), passes wstride lines apart. A warp works U passes an iteration:
// it pushes passes j .. j + U - 1 and takes in passes j - U .. j - 1, with
// every load of the iteration (inputs, own shares, polled lines) in flight
// together, so a warp with many passes (a capped grid) is not bound by one
// load latency per pass. Receiving overlaps its
// own and its neighbours' pushing instead of starting when all of them are
// done. Line L of block b only ever waits for block b of the peers, which
// pushes passes j .. j + U - 1 before it waits for j - U .. j - 1: no
// cycle.
template <class T, int U>
__device__ __forceinline__ void ll128_run(const p2pk_ar_args &a) {
  // Arguments into registers before the dependency wait (see ll_kernel).
  __shared__ char *s_peer[P2PK_COLL_MAX_RANKS];
  const int n = pin(a.nranks), me = pin(a.rank);
  if ((int)threadIdx.x < n) s_peer[threadIdx.x] = a.peer[threadIdx.x];
  const uint64_t nbytes = pin(a.count) * sizeof(typename T::bits);
  const uint64_t nlines = (nbytes + P2PK_LL128_DATA - 1) / P2PK_LL128_DATA;
  // Warps with lines: all but the last (the header's, as in ll_kernel).
  // Lane `part` of a group holds bytes 16 * part of its line.
  const unsigned lt = blockDim.x - 32, wpb = lt / 32;
  const unsigned lane = threadIdx.x & 31, part = lane & 7, sub = lane >> 3;
  const bool flag_lane = part == 7;
  const unsigned gmask = 0xffu << (sub * 8);
  const uint64_t wfirst = ((uint64_t)blockIdx.x * wpb + threadIdx.x / 32) * 4;
  const uint64_t wstride = (uint64_t)gridDim.x * wpb * 4;
  const bool has_lines = threadIdx.x < lt;
  const uint64_t passes = has_lines && wfirst < nlines ? (nlines - wfirst + wstride - 1) / wstride : 0;
  const uint64_t po = flag_lane ? 112 : part * 16; // payload offset in the line
  const auto [in, out, local, in_stride, out_stride, timeout_ns, send_mask, recv_mask, hdr0, hdr1,
              reduce, self_copy, op] = Pinned(a);
  const uint64_t off = pin(a.lay.ll128_off), lbytes = pin(a.lay.ll128_bytes);
  pdl_start();
  uint32_t seq;
  if (!prologue_at(a, local, &seq)) return; // its barrier also publishes s_peer
  Waiter w(timeout_ns);
  const uint32_t slot = seq & 1;
  const bool leader = blockIdx.x == 0 && threadIdx.x == lt;
  if (leader) {
    header_send_from(a, seq, s_peer, n, me, hdr0, hdr1, nullptr);
    // Every rank waits for every peer's header (see ll_kernel).
    header_check_at(a, seq, w, n, me, local, hdr0, hdr1, nullptr);
  }
  const char *mine = local + off + (uint64_t)slot * (n - 1) * lbytes + part * 16;
  const char *own = in + me * in_stride;
  // Reduce waits for every peer; copy for those in recv_mask (and itself).
  const bool recv_any = reduce ? recv_mask != 0 : (recv_mask || self_copy);
  for (uint64_t j = 0; j < passes + U; j += U) {
    // Loads first (these passes' inputs, the own shares of the passes taken
    // in), so they are in flight together; the stores and polls below are
    // volatile asm, which loads cannot pass.
    uint64_t L[U], R[U];
    bool push[U], take[U];
    uint4 v[U], mv[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      L[u] = wfirst + (j + u) * wstride + sub;
      R[u] = j >= U ? L[u] - U * wstride : nlines;
      push[u] = j + u < passes && L[u] < nlines && send_mask;
      take[u] = R[u] < nlines;
      v[u] = mv[u] = make_uint4(0, 0, 0, 0);
      if (push[u] && !in_stride)
        v[u] = load_part<T>(in, L[u] * P2PK_LL128_DATA + po, flag_lane, nbytes);
      if (take[u] && (reduce || self_copy))
        mv[u] = load_part<T>(own, R[u] * P2PK_LL128_DATA + po, flag_lane, nbytes);
    }
    if (j < passes && send_mask)
      ll128_push<T, U>(in, in_stride, send_mask, n, me, s_peer, off, lbytes, slot, part, L, push, v,
                       po, flag_lane, nbytes, seq);
    if (j == 0 || !recv_any) continue;
    if (!reduce) {
      ll128_copy<T, U>(a, w, mine, out, out_stride, recv_mask, self_copy, n, me, lbytes, R, take, mv,
                       po, flag_lane, gmask, nbytes, seq);
      continue;
    }
    typename T::acc acc[U][2 * Pack8<T>::N];
    for (int r = 0; r < n; r++) {
      uint4 x[U];
      if (r != me) {
        ll128_wait_rank<U>(a, w, mine + (uint64_t)pslot(r, me, n) * lbytes, R, seq, r, take,
                           flag_lane, gmask, x);
      } else {
#pragma unroll
        for (int u = 0; u < U; u++) x[u] = mv[u];
      }
      ll128_accumulate<T, U>(op, r, x, acc);
    }
    ll128_store_result<T, U>(op, n, acc, take, out, R, po, flag_lane, nbytes);
  }
}

// Two instances. One pass an iteration (56 registers, so more blocks fit an
// SM) for grids the GPU holds whole. Two passes, their loads together
// (84 - 96 registers), for grids under a cap (p2pk_sel_choose: within one
// block per SM), where each warp works many passes and one pass's load
// latency bounds it (2x H200, process per GPU:
// 16 blocks, 16 MiB 197 us against 255; 64 blocks 62.3 against 70.3;
// uncapped the two-pass loop was 4 - 16% slower at 1 - 16 MiB).
template <class T>
__global__ void __launch_bounds__(512 + 32) ll128_kernel(const __grid_constant__ p2pk_ar_args a) {
  ll128_run<T, 1>(a);
}
template <class T>
__global__ void __launch_bounds__(512 + 32) ll128x2_kernel(const __grid_constant__ p2pk_ar_args a) {
  ll128_run<T, 2>(a);
}
}  // namespace p2pk

extern "C" cudaError_t p2pk_launch_ll128(const p2pk_ar_args *a, int blocks, int threads,
                                         cudaStream_t stream) {
  cudaError_t e = cudaSuccess;
  if (a->ll128_x2) { // one more warp: the header's (as ll_kernel)
    P2PK_FOR_DTYPE(a->dtype, p2pk::ll128x2_kernel, blocks, threads + 32, stream, *a)
  } else {
    P2PK_FOR_DTYPE(a->dtype, p2pk::ll128_kernel, blocks, threads + 32, stream, *a)
  }
  return e;
}

// Blocks per SM, the least over data types but uint8 (below).
extern "C" int p2pk_ll128_per_sm(int threads) {
  int best = 1 << 30;
  const int bt = threads + 32; // with the header warp
#define P2PK_OCC_(T)                                                                   \
  do {                                                                                 \
    int nb = 0;                                                                        \
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, p2pk::ll128_kernel<T>, bt, 0) != \
        cudaSuccess) {                                                                 \
      cudaGetLastError();                                                              \
      return 0;                                                                        \
    }                                                                                  \
    if (nb < best) best = nb;                                                          \
  } while (0)
  P2PK_OCC_(p2pk::TF32);
  P2PK_OCC_(p2pk::TF16);
  P2PK_OCC_(p2pk::TBF16);
  P2PK_OCC_(p2pk::TF64);
  P2PK_OCC_(p2pk::TI32);
  P2PK_OCC_(p2pk::TI64);
  // Not uint8: its instance takes 92 registers where the others take 56,
  // which would halve every type's grid (bounding it to 60 instead made
  // float16 and bfloat16 spill). A uint8 grid may run in two waves.
#undef P2PK_OCC_
  return best;
}
extern "C" cudaError_t p2pk_preload_ll128(void) {
  cudaError_t e = cudaSuccess;
  P2PK_PRELOAD_DTYPES(p2pk::ll128_kernel, e);
  P2PK_PRELOAD_DTYPES(p2pk::ll128x2_kernel, e);
  return e;
}
