/* SPDX-License-Identifier: BSD-3-Clause */
// twoshot_kernel: reduce-scatter then all-gather over P2P, chunked: each
// chunk is cut in n shards; rank k reduces shard k and pushes the result to
// every peer (straight into the peer's output when it allows, else into an
// all-gather mailbox the peer copies out). Its rooted form runs broadcast
// (scatter, then each owner forwards its shard) and reduce (reduce-scatter,
// then each owner sends its shard to the root) on more than 2 ranks.
#include "coll/kernels/prim_simple.cuh"

namespace p2pk {

// What every step of one two-shot call shares, read from the kernel's
// arguments where it is used (constant memory: no registers held across the
// loop, which sits at the 128-register bound): how many shards a step has,
// who owns which (coll_dev.h's p2pk_ts_shard: rank k owns shard k for
// all-reduce; the rooted form's owners are the ranks but the root), and the
// second phase's peers (plan.h's p2pk_coll_plan_twoshot).
struct TwoShot {
  const p2pk_ar_args &a;
  __device__ explicit TwoShot(const p2pk_ar_args &args) : a(args) {}
  __device__ int R() const { return a.ts_root1 - 1; } // the root (-1: all-reduce)
  __device__ int nsh() const { return p2pk_ts_nshards(a.nranks, R()); }
  __device__ int shard(int r) const { return p2pk_ts_shard(a.nranks, R(), r); }
  __device__ int mine() const { return shard(a.rank); } // -1: the root, no shard
  __device__ uint32_t send2() const { return a.send2_mask; }
  __device__ uint32_t recv2() const { return a.recv2_mask; }
  // The owner's result also goes to its own output (a rooted reduce's is the root's alone).
  __device__ bool own_out() const { return !(a.ts_root1 > 0 && a.reduce); }
};

// Step j: nsh shards of at most K bytes each.
struct Shards {
  uint64_t off, L, s;
  __device__ Shards(const Plan &P, int nsh, uint64_t j) {
    off = P.step(j) * P.K * nsh;
    L = min(P.K * nsh, P.nbytes - off);
    s = p2pk_ts_shard_bytes(L, nsh); // <= K: K is a multiple of 16
  }
  __device__ uint64_t at(int k) const { return off + (uint64_t)k * s; }
  __device__ uint64_t len(int k) const {
    uint64_t b = (uint64_t)k * s;
    return b >= L ? 0 : min(s, L - b);
  }
};

// First phase: each peer in P.send gets its shard of step j (in its set-0
// mailbox), with where this rank's output is (agtok), so an owner that
// sends its result back may write it there directly.
template <class T>
__device__ bool ts_push(const p2pk_ar_args &a, Waiter &w, const Plan &P, const TwoShot &ts,
                        uint64_t j, int *s_ok) {
  if (!P.send) return true;
  const Shards sh(P, ts.nsh(), j);
  const int m = P.box(j);
  if (threadIdx.x == 0) *s_ok = wait_free(a, w, P, P.send, 0, m);
  __syncthreads();
  if (!*s_ok) return false;
  for (int k = 1; k < P.n; k++) {
    int p = peer_k(P.me, k, P.n);
    if (!has(P.send, p)) continue;
    const int q = ts.shard(p);
    copy_chunk<T>(mailbox(a, a.peer[p], 0, pslot(P.me, p, P.n), m), P.in + sh.at(q), sh.len(q));
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int k = 1; k < P.n; k++) {
      int p = peer_k(P.me, k, P.n);
      if (has(P.send, p)) st_vol_u64(agtok(a, a.peer[p], P.me, m), a.out_token);
    }
    push_done(a, P, P.send, 0, m, nullptr);
  }
  return true;
}

// Second phase, on the owner of a shard: reduce what arrived in rank order
// with this rank's own shard (or, broadcast, take the root's), into its own
// output and to every peer in send2: straight into a peer's output when that
// peer's first-phase push said where it is, else into its set-1 mailbox. The
// rooted form's root has no shard: it only copies its own buffer (broadcast
// out of place).
template <class T>
__device__ bool ts_reduce(const p2pk_ar_args &a, Waiter &w, const Plan &P, const TwoShot &ts,
                          uint64_t j, int *s_ok, const char **s_src, char **s_also, int *s_nalso,
                          int *s_direct) {
  const Shards sh(P, ts.nsh(), j);
  if (ts.mine() < 0) {
    if (P.self_copy) copy_chunk<T>(P.out + sh.off, P.in + sh.off, sh.L);
    return true;
  }
  const int q = ts.mine();
  const int m = P.box(j);
  if (threadIdx.x == 0) {
    bool ok = wait_ready(a, w, P, P.recv, 0, m, nullptr) && wait_free(a, w, P, ts.send2(), 1, m);
    int na = 0;
    for (int k = 1; k < P.n && ok; k++) {
      int p = peer_k(P.me, k, P.n);
      if (has(P.recv, p)) s_src[p] = mailbox(a, a.local, 0, pslot(p, P.me, P.n), m);
      if (!has(ts.send2(), p)) continue;
      char *dst = nullptr;
      if (has(P.recv, p)) { /* only a peer that pushed to me this step left a token */
        uint64_t tok = ld_vol_u64(agtok(a, a.local, p, m));
        if (a.direct == 1 && tok) dst = (char *)tok + sh.at(q);
        else if (a.direct == 2 && tok && tok == a.out_token && a.peer_out[p]) dst = a.peer_out[p] + sh.at(q);
      }
      s_direct[p] = dst != nullptr;
      s_also[na++] = dst ? dst : mailbox(a, a.peer[p], 1, pslot(P.me, p, P.n), m);
    }
    s_src[P.me] = P.in + sh.at(q);
    *s_nalso = na;
    *s_ok = ok;
  }
  __syncthreads();
  if (!*s_ok) return false;
  const uint64_t len = sh.len(q);
  if (!P.reduce)
    copy_multi<T>(P.out + sh.at(q), s_src[ts.R()], s_also, *s_nalso, len);
  else if (ts.own_out())
    reduce_chunk<T, false>(a.op, P.n, P.me, P.out + sh.at(q), s_src, s_also, *s_nalso, len);
  else if (*s_nalso > 0)
    reduce_chunk<T, false>(a.op, P.n, P.me, s_also[0], s_src, s_also + 1, *s_nalso - 1, len);
  __syncthreads();
  if (threadIdx.x == 0) {
    drain_done(a, P, P.recv, 0, m);
    push_done(a, P, ts.send2(), 1, m, s_direct);
  }
  return true;
}

// Third phase: the other owners' results of step j from my set-1 mailboxes
// (unless they wrote them into my output themselves).
template <class T>
__device__ bool ts_gather(const p2pk_ar_args &a, Waiter &w, const Plan &P, const TwoShot &ts,
                          uint64_t j, int *s_ok, int *s_direct) {
  if (!ts.recv2()) return true;
  const Shards sh(P, ts.nsh(), j);
  const int m = P.box(j);
  if (threadIdx.x == 0) *s_ok = wait_ready(a, w, P, ts.recv2(), 1, m, s_direct);
  __syncthreads();
  if (!*s_ok) return false;
  for (int k = 1; k < P.n; k++) {
    int p = peer_k(P.me, k, P.n);
    if (!has(ts.recv2(), p) || s_direct[p]) continue;
    const int q = ts.shard(p);
    copy_chunk<T>(P.out + sh.at(q), mailbox(a, a.local, 1, pslot(p, P.me, P.n), m), sh.len(q));
  }
  __syncthreads();
  if (threadIdx.x == 0) drain_done(a, P, ts.recv2(), 1, m);
  return true;
}

template <class T>
__global__ void __launch_bounds__(512) twoshot_kernel(const __grid_constant__ p2pk_ar_args a) {
  __shared__ int s_ok, s_nalso;
  __shared__ const char *s_src[P2PK_COLL_MAX_RANKS];
  __shared__ char *s_also[P2PK_COLL_MAX_RANKS];
  __shared__ int s_direct[P2PK_COLL_MAX_RANKS];
  __shared__ int s_gdirect[P2PK_COLL_MAX_RANKS];
  uint32_t seq;
  if (!prologue(a, &seq)) return;
  Waiter w(a);
  if (!start_call(a, seq, w)) return;
  const TwoShot ts(a);
  const Plan P(a, (uint64_t)a.chunk * ts.nsh(), sizeof(typename T::bits));
  if (P.J > 0 && !ts_push<T>(a, w, P, ts, 0, &s_ok)) return;
  for (uint64_t j = 0; j < P.J; j++) {
    if (j + 1 < P.J && !ts_push<T>(a, w, P, ts, j + 1, &s_ok)) return;
    if (!ts_reduce<T>(a, w, P, ts, j, &s_ok, s_src, s_also, &s_nalso, s_direct)) return;
    if (j > 0 && !ts_gather<T>(a, w, P, ts, j - 1, &s_ok, s_gdirect)) return;
  }
  if (P.J > 0) ts_gather<T>(a, w, P, ts, P.J - 1, &s_ok, s_gdirect);
}
}  // namespace p2pk

extern "C" cudaError_t p2pk_launch_twoshot(const p2pk_ar_args *a, int blocks, int threads,
                                           cudaStream_t stream) {
  cudaError_t e = cudaSuccess;
  P2PK_FOR_DTYPE(a->dtype, p2pk::twoshot_kernel, blocks, threads, stream, *a)
  return e;
}

extern "C" cudaError_t p2pk_preload_twoshot(void) {
  cudaError_t e = cudaSuccess;
  P2PK_PRELOAD_DTYPES(p2pk::twoshot_kernel, e);
  return e;
}
