/* SPDX-License-Identifier: BSD-3-Clause */
// ll_kernel: every collective but send/recv, one-shot push with the LL
// protocol: each 16-byte store carries 8 bytes of data and the call's
// sequence number twice, so the reader polls the data itself (no fence, no
// flag round trip). Two LL slots alternate by sequence number: a peer
// cannot be two calls ahead, because each call needs everyone's data. It
// runs the call's plan (peer masks, strides, reduce or copy: plan.h);
// all-reduce is the plan "every peer both ways, reduce".
#include "coll/kernels/prim_ll.cuh"

namespace p2pk {

// Phase timestamps of the LL kernel (P2PKIT_KTRACE builds only), per call
// parity; what bench_launch prints (p2pk_ktrace_read). KT_ENTRY .. KT_END:
// block 0, thread 0. KT_PUSH_ALL, KT_DATA_ALL, KT_END_ALL: the latest over
// the grid of a thread's last push, a thread's last line arriving and a
// block's end (atomicMax: calls of one parity follow each other, so the
// maximum is the last call's).
enum { KT_ENTRY, KT_DEP, KT_PROLOGUE, KT_PUSHED, KT_HEADER, KT_DATA, KT_END,
       KT_PUSH_ALL, KT_DATA_ALL, KT_END_ALL, KT_N };
#ifdef P2PK_KTRACE
__device__ unsigned long long ktrace[2][KT_N];
#define KT_MARK(t) ((t) = globaltimer())
#else
#define KT_MARK(t) ((void)0)
#endif

// This thread's lines, pushed to every peer in send_mask (each peer's share
// of the input when in_stride is set), with the call's sequence number.
template <class T>
__device__ __forceinline__ void ll_push(const char *in, uint64_t nbytes, uint64_t nlines,
                                        uint64_t first, uint64_t stride, bool pre, uint2 v_first,
                                        uint32_t send_mask, uint64_t in_stride, int n, int me,
                                        char *const *s_peer, uint64_t ll_off, uint64_t ll_bytes,
                                        uint32_t slot, uint32_t seq) {
  for (uint64_t i = first; send_mask && i < nlines; i += stride) {
    uint2 v = pre && i == first ? v_first : load_line<T>(in, i, nbytes);
    for (int k = 1; k < n; k++) {
      int p = me + k < n ? me + k : me + k - n;
      if (!has(send_mask, p)) continue;
      if (in_stride) v = load_line<T>(in + p * in_stride, i, nbytes);
      char *dst = s_peer[p] + ll_off + ((uint64_t)slot * (n - 1) + pslot(me, p, n)) * ll_bytes + i * 16;
      st_vol_v4(dst, make_uint4(v.x, seq, v.y, seq));
    }
  }
}

// This thread's lines of every peer in recv_mask: reduced in rank order
// with its own share (reduce), or copied to that peer's output block (and
// its own share to its own, self_copy).
template <class T>
__device__ __forceinline__ void ll_take(const p2pk_ar_args &a, Waiter &w, const char *mine,
                                        const char *own, char *out, uint64_t nbytes,
                                        uint64_t nlines, uint64_t first, uint64_t stride, bool pre,
                                        uint2 v_first, uint32_t recv_mask, uint64_t out_stride,
                                        int reduce, int self_copy, int op, int n, int me,
                                        uint64_t ll_bytes, uint32_t seq, unsigned long long *kt) {
  typedef typename T::acc A;
  (void)kt;
  for (uint64_t i = first; i < nlines; i += stride) {
    if (!reduce) {
      for (int r = 0; r < n; r++) {
        if (!has(recv_mask, r)) continue;
        uint4 x = ll_wait(a, w, mine + (uint64_t)pslot(r, me, n) * ll_bytes + i * 16, seq, r);
        store_line<T>(out + r * out_stride, i, nbytes, make_uint2(x.x, x.z));
      }
      if (self_copy) store_line<T>(out + me * out_stride, i, nbytes, load_line<T>(own, i, nbytes));
      continue;
    }
    if (!recv_mask) break;
    Pack8<T> v;
    A acc[Pack8<T>::N];
    for (int r = 0; r < n; r++) {
      if (r == me) {
        v.u = pre && i == first ? v_first : load_line<T>(own, i, nbytes);
      } else {
        uint4 x = ll_wait(a, w, mine + (uint64_t)pslot(r, me, n) * ll_bytes + i * 16, seq, r);
        v.u = make_uint2(x.x, x.z);
        if (i == first) KT_MARK(kt[KT_DATA]);
        KT_MARK(kt[KT_DATA_ALL]);
      }
#pragma unroll
      for (int e = 0; e < Pack8<T>::N; e++)
        acc[e] = r == 0 ? T::ld(v.e[e]) : apply<T>(op, acc[e], T::ld(v.e[e]));
    }
#pragma unroll
    for (int e = 0; e < Pack8<T>::N; e++) v.e[e] = T::st(finish<T>(op, acc[e], n));
    store_line<T>(out, i, nbytes, v.u);
  }
}

#ifdef P2PK_KTRACE
// The call's phase times into ktrace: thread 0 times the data; the header
// thread adds when it saw the header.
__device__ __forceinline__ void ll_ktrace_end(unsigned long long *kt, bool leader, uint32_t slot,
                                              unsigned long long *s_push,
                                              unsigned long long *s_data,
                                              unsigned long long *s_hdr) {
  KT_MARK(kt[KT_END]);
  if (leader) *s_hdr = kt[KT_HEADER];
  atomicMax(s_push, kt[KT_PUSHED]);
  atomicMax(s_data, kt[KT_DATA_ALL]);
  __syncthreads();
  if (threadIdx.x == 0) {
    atomicMax(&ktrace[slot][KT_PUSH_ALL], *s_push);
    atomicMax(&ktrace[slot][KT_DATA_ALL], *s_data);
    atomicMax(&ktrace[slot][KT_END_ALL], globaltimer());
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    kt[KT_HEADER] = *s_hdr;
    for (int k = 0; k < KT_PUSH_ALL; k++) ktrace[slot][k] = kt[k];
  }
}
#endif

// Every collective except send/recv: push this rank's share for each peer in
// send_mask, then either reduce everyone's lines in rank order (reduce) or
// copy each received line to that peer's output block.
template <class T>
__global__ void __launch_bounds__(512 + 32) ll_kernel(const __grid_constant__ p2pk_ar_args a) {
  unsigned long long kt[KT_N] = {0};
  (void)kt;
  KT_MARK(kt[KT_ENTRY]);
#ifdef P2PK_KTRACE
  __shared__ unsigned long long s_push, s_data;
  if (threadIdx.x == 0) s_push = s_data = 0; // published by the prologue's barrier
#endif
  // Every argument this kernel uses is read into registers (peers' scratch
  // into shared memory) before it waits for the stream's previous kernel, so
  // those loads overlap the wait (P2PKIT_PDL) instead of each costing a trip
  // to memory on the critical path (P2PKIT_KTRACE runs: ~1.3 us of a 3.4 us
  // 8-byte all-reduce went to loads between the prologue and the first
  // store). The LL kernel only runs over P2P (a.stage is null).
  __shared__ char *s_peer[P2PK_COLL_MAX_RANKS];
  const int n = pin(a.nranks), me = pin(a.rank);
  if ((int)threadIdx.x < n) s_peer[threadIdx.x] = a.peer[threadIdx.x];
  const uint64_t nbytes = pin(a.count) * sizeof(typename T::bits);
  const uint64_t nlines = (nbytes + 7) / 8;
  // Lines go to the first blockDim.x - 32 threads of each block; the extra
  // warp holds none, and its first thread in block 0 sends and checks the
  // header, so that wait runs beside the data waits, never before one (a
  // line on the header thread cost ~1 us in graph replay).
  const unsigned lt = blockDim.x - 32; // threads with lines
  const uint64_t first = threadIdx.x < lt ? (uint64_t)blockIdx.x * lt + threadIdx.x : nlines;
  const uint64_t stride = (uint64_t)gridDim.x * lt;
  const auto [in, out, local, in_stride, out_stride, timeout_ns, send_mask, recv_mask, hdr0, hdr1,
              reduce, self_copy, op] = Pinned(a);
  const uint64_t ll_off = pin(a.lay.ll_off), ll_bytes = pin(a.lay.ll_bytes);
  // This thread's first line of the input (the same for every peer when
  // there are no per-peer shares), loaded right after the wait so its
  // latency overlaps the prologue's; it is pushed and reduced from registers.
  pdl_start();
  KT_MARK(kt[KT_DEP]);
  const bool pre = first < nlines && !in_stride;
  const uint2 v_first = pre ? load_line<T>(in, first, nbytes) : make_uint2(0, 0);
  uint32_t seq;
  if (!prologue_at(a, local, &seq)) return; // its barrier also publishes s_peer
  KT_MARK(kt[KT_PROLOGUE]);
  Waiter w(timeout_ns);
  const uint32_t slot = seq & 1;
  // The header thread (see lt above). A mismatch raises abort, which every
  // other wait sees.
  const bool leader = blockIdx.x == 0 && threadIdx.x == lt;
  if (leader) header_send_from(a, seq, s_peer, n, me, hdr0, hdr1, nullptr);
  ll_push<T>(in, nbytes, nlines, first, stride, pre, v_first, send_mask, in_stride, n, me, s_peer,
             ll_off, ll_bytes, slot, seq);
  KT_MARK(kt[KT_PUSHED]);
  // Every rank waits for every peer's header, so no rank starts call s + 2
  // (and overwrites this call's slot) before everyone finished call s.
  if (leader) header_check_at(a, seq, w, n, me, local, hdr0, hdr1, nullptr);
  KT_MARK(kt[KT_HEADER]);
  const char *mine = local + ll_off + (uint64_t)slot * (n - 1) * ll_bytes;
  const char *own = in + me * in_stride;
  ll_take<T>(a, w, mine, own, out, nbytes, nlines, first, stride, pre, v_first, recv_mask,
             out_stride, reduce, self_copy, op, n, me, ll_bytes, seq, kt);
#ifdef P2PK_KTRACE
  __shared__ unsigned long long s_hdr;
  ll_ktrace_end(kt, leader, slot, &s_push, &s_data, &s_hdr);
#endif
}
}  // namespace p2pk

extern "C" cudaError_t p2pk_launch_ll(const p2pk_ar_args *a, int blocks, int threads,
                                      cudaStream_t stream) {
  cudaError_t e = cudaSuccess;
  // One more warp: the header's.
  P2PK_FOR_DTYPE(a->dtype, p2pk::ll_kernel, blocks, threads + 32, stream, *a)
  return e;
}

extern "C" int p2pk_ktrace_read(unsigned long long out[2][10]) {
#ifdef P2PK_KTRACE
  static_assert(p2pk::KT_N == 10, "p2pk_ktrace_read's shape");
  return cudaMemcpyFromSymbol(out, p2pk::ktrace, sizeof p2pk::ktrace) == cudaSuccess ? 0 : -1;
#else
  (void)out;
  return -1;
#endif
}
extern "C" cudaError_t p2pk_preload_ll(void) {
  cudaError_t e = cudaSuccess;
  P2PK_PRELOAD_DTYPES(p2pk::ll_kernel, e);
  return e;
}
