/* SPDX-License-Identifier: BSD-3-Clause */
// The simple protocol's primitives: a block's share of a call (Plan), the
// mailbox handshake (wait_free / push_done at the sender, wait_ready /
// drain_done at the receiver), the call's header check, and the one-shot
// pipeline (push chunk j + 1, then take chunk j in) that oneshot_kernel and
// the send/recv kernel run.
#ifndef P2PK_PRIM_SIMPLE_CUH
#define P2PK_PRIM_SIMPLE_CUH

#include "coll/kernels/prim_ll.cuh"

namespace p2pk {

// What one block knows about its share of the call: which bytes move where
// (from the call's arguments, or from one send/recv operation), and which
// steps are this block's.
struct Plan {
  int n, me, G, b, S;
  uint64_t nbytes, K;
  uint64_t steps; // chunks (one-shot) or chunk groups of n shards (two-shot)
  uint64_t J;     // steps of this block: b, b + G, b + 2G, ...
  const char *in;
  char *out;
  uint32_t send, recv; // peer masks
  uint64_t in_stride, out_stride;
  int reduce, self_copy;
  __device__ void set_steps(uint64_t step_bytes) {
    steps = (nbytes + step_bytes - 1) / step_bytes;
    J = steps > (uint64_t)b ? (steps - 1 - b) / G + 1 : 0;
  }
  __device__ Plan(const p2pk_ar_args &a, uint64_t step_bytes, uint64_t esize) {
    n = a.nranks;
    me = a.rank;
    G = gridDim.x;
    b = blockIdx.x;
    S = a.slots;
    nbytes = a.count * esize;
    K = a.chunk;
    in = (const char *)a.in;
    out = (char *)a.out;
    send = a.send_mask;
    recv = a.recv_mask;
    in_stride = a.in_stride;
    out_stride = a.out_stride;
    reduce = a.reduce;
    self_copy = a.self_copy;
    set_steps(step_bytes);
  }
  // One point-to-point operation on blocks [op.base, op.base + op.blocks).
  __device__ Plan(const p2pk_ar_args &a, const p2pk_p2p_op &op) {
    n = a.nranks;
    me = a.rank;
    G = op.blocks;
    b = (int)blockIdx.x - op.base;
    S = a.slots;
    nbytes = op.bytes;
    K = op.chunk;
    in = op.send ? op.buf : nullptr;
    out = op.send ? nullptr : op.buf;
    send = op.send ? 1u << op.peer : 0u;
    recv = op.send ? 0u : 1u << op.peer;
    in_stride = out_stride = 0;
    reduce = self_copy = 0;
    set_steps(K);
  }
  __device__ int box(uint64_t j) const { return b * S + (int)(j % S); }
  __device__ uint64_t step(uint64_t j) const { return (uint64_t)b + j * G; }
};

__device__ __forceinline__ int peer_k(int me, int k, int n) { return me + k < n ? me + k : me + k - n; }
__device__ __forceinline__ uint64_t *agtok(const p2pk_ar_args &a, char *base, int src, int m) {
  return (uint64_t *)(base + a.lay.agtok_off) + (uint64_t)src * P2PK_COLL_MAILBOXES + m;
}

// Thread 0: wait until every peer drained my previous use of its mailbox m
// of `set`. The block then fills the mailboxes; push_done() raises them.
__device__ inline bool wait_free(const p2pk_ar_args &a, Waiter &w, const Plan &P, uint32_t mask, int set,
                          int m) {
  for (int k = 1; k < P.n; k++) {
    int p = peer_k(P.me, k, P.n);
    if (!has(mask, p)) continue;
    uint64_t used = *counter(a.local, a.lay.sent_off, set, p, P.n, m);
    if (!wait_geq(a, w, counter(a.local, a.lay.freed_off, set, p, P.n, m), used, p)) return false;
  }
  return true;
}

// Thread 0, after a barrier that follows the block's stores: one more use of
// every peer's mailbox m of `set` is ready (release: covers the whole block's
// stores, ordered by the barrier).
__device__ inline void push_done(const p2pk_ar_args &a, const Plan &P, uint32_t mask, int set, int m,
                          const int *direct) {
  for (int k = 1; k < P.n; k++) {
    int p = peer_k(P.me, k, P.n);
    if (!has(mask, p)) continue;
    uint64_t *sc = counter(a.local, a.lay.sent_off, set, p, P.n, m);
    uint64_t s = *sc + 1;
    *sc = s;
    st_rel(counter(a.peer[p], a.lay.ready_off, set, P.me, P.n, m),
           s | (direct && direct[p] ? P2PK_READY_DIRECT : 0));
  }
}

// Thread 0: wait for the next use of my mailbox m of `set` from every peer.
// `direct` (optional) receives whether the peer wrote into my output itself.
__device__ inline bool wait_ready(const p2pk_ar_args &a, Waiter &w, const Plan &P, uint32_t mask, int set,
                           int m, int *direct) {
  for (int k = 1; k < P.n; k++) {
    int p = peer_k(P.me, k, P.n);
    if (!has(mask, p)) continue;
    uint64_t want = *counter(a.local, a.lay.recvd_off, set, p, P.n, m) + 1;
    const uint64_t *rf = counter(a.local, a.lay.ready_off, set, p, P.n, m);
    uint64_t v;
    while (((v = ld_acq(rf)) & ~P2PK_READY_DIRECT) < want)
      if (w.poll(a, p)) return false;
    if (direct) direct[p] = (v & P2PK_READY_DIRECT) != 0;
  }
  return true;
}

// Thread 0, after a barrier that follows the block's reads of mailbox m:
// hand it back to every peer.
__device__ inline void drain_done(const p2pk_ar_args &a, const Plan &P, uint32_t mask, int set, int m) {
  for (int k = 1; k < P.n; k++) {
    int p = peer_k(P.me, k, P.n);
    if (!has(mask, p)) continue;
    uint64_t *rc = counter(a.local, a.lay.recvd_off, set, p, P.n, m);
    uint64_t r = *rc + 1;
    *rc = r;
    st_rel(counter(a.peer[p], a.lay.freed_off, set, P.me, P.n, m), r);
  }
}

// Block 0 checks the header before anything else; other blocks start at once
// (a mismatch makes block 0 raise abort, which every wait sees). The verdict
// has a shared word of its own: the block's s_ok is written again by thread
// 0 at the first push, with no barrier between that write and the other
// threads' reads of this verdict (compute-sanitizer racecheck found that
// race on s_ok).
__device__ inline bool start_call(const p2pk_ar_args &a, uint32_t seq, Waiter &w) {
  __shared__ int s_start;
  if (threadIdx.x == 0) {
    s_start = 1;
    if (blockIdx.x == 0) {
      header_send(a, seq);
      s_start = header_check(a, seq, w);
    }
  }
  __syncthreads();
  return s_start != 0;
}

// ------------------------------------------------------------- one-shot ---

// Push this block's chunk j to every peer in P.send (each peer's share of
// the input when in_stride is set).
template <class T>
__device__ bool os_push(const p2pk_ar_args &a, Waiter &w, const Plan &P, uint64_t j, int *s_ok) {
  if (!P.send) return true;
  const uint64_t off = P.step(j) * P.K;
  const uint64_t len = min(P.K, P.nbytes - off);
  const int m = P.box(j);
  if (threadIdx.x == 0) *s_ok = wait_free(a, w, P, P.send, 0, m);
  __syncthreads();
  if (!*s_ok) return false;
  for (int k = 1; k < P.n; k++) {
    int p = peer_k(P.me, k, P.n);
    if (!has(P.send, p)) continue;
    copy_chunk<T>(mailbox(a, a.peer[p], 0, pslot(P.me, p, P.n), m),
                  P.in + p * P.in_stride + off, len);
  }
  __syncthreads();
  if (threadIdx.x == 0) push_done(a, P, P.send, 0, m, nullptr);
  return true;
}

// Chunk j of what arrives: reduced in rank order with this rank's share into
// out, or copied to each sender's output block (plus this rank's own block).
template <class T>
__device__ bool os_reduce(const p2pk_ar_args &a, Waiter &w, const Plan &P, uint64_t j, int *s_ok,
                          const char **s_src) {
  if (!P.recv && !P.self_copy) return true;
  const uint64_t off = P.step(j) * P.K;
  const uint64_t len = min(P.K, P.nbytes - off);
  const int m = P.box(j);
  const char *own = P.in + P.me * P.in_stride + off;
  if (threadIdx.x == 0) {
    *s_ok = wait_ready(a, w, P, P.recv, 0, m, nullptr);
    for (int r = 0; r < P.n; r++)
      s_src[r] = r == P.me ? own : mailbox(a, a.local, 0, pslot(r, P.me, P.n), m);
  }
  __syncthreads();
  if (!*s_ok) return false;
  if (P.reduce) {
    reduce_chunk<T, false>(a.op, P.n, P.me, P.out + off, s_src, nullptr, 0, len);
  } else {
    for (int r = 0; r < P.n; r++)
      if (has(P.recv, r) || (r == P.me && P.self_copy))
        copy_chunk<T>(P.out + r * P.out_stride + off, s_src[r], len);
  }
  __syncthreads();
  if (threadIdx.x == 0) drain_done(a, P, P.recv, 0, m);
  return true;
}

// The pipeline of one block: push chunk j + 1 before taking chunk j in, so
// the peer's data is in flight while this block works.
template <class T>
__device__ void os_run(const p2pk_ar_args &a, Waiter &w, const Plan &P, int *s_ok,
                       const char **s_src) {
  if (P.J > 0 && !os_push<T>(a, w, P, 0, s_ok)) return;
  for (uint64_t j = 0; j < P.J; j++) {
    if (j + 1 < P.J && !os_push<T>(a, w, P, j + 1, s_ok)) return;
    if (!os_reduce<T>(a, w, P, j, s_ok, s_src)) return;
  }
}

}  // namespace p2pk

#endif
