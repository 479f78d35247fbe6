/* SPDX-License-Identifier: BSD-3-Clause */
// Every collective through host shared memory, for GPUs without P2P (or with
// P2PKIT_P2P_DISABLE=1). One launch of 2G blocks: writer block b copies its
// chunks of this rank's input into this rank's outbox in host memory (the
// GPU-to-host direction of PCIe); reader block b reads the same chunks of
// the peers' outboxes (host-to-GPU) and reduces them with the local input in
// rank order, or copies them to their place in the output. Writers run ahead
// of readers, so both PCIe directions carry data at once. Counters and flags
// work like the P2P mailboxes (see prim_simple.cuh), with the shared
// ones in host memory.
//
// The handshake is the same for every collective and every chunk: each chunk
// of the call's chunk stream goes through one outbox mailbox of every rank,
// every reader waits for every peer's mailbox and hands it back. Only what is
// copied differs (p2pk_ar_args' masks and strides, plan.h), as the stream's
// segments of B = count x element bytes:
//   shared   (all-reduce, broadcast, reduce, all-gather; in_stride 0): one
//            segment; a rank's outbox holds its input, read by every peer
//            in recv_mask.
//   per-dest (reduce-scatter; in_stride, reduce): n segments; segment s holds
//            every rank's block s, which only rank s reads and reduces (a
//            writer skips its own segment).
//   pair     (all-to-all; in_stride, no reduce): n-1 segments; in segment t
//            rank q writes its block for rank (q + t + 1) % n, so each reader
//            takes one peer's data per segment.
// A mailbox use whose data nobody reads is skipped by the writer but still
// counted, so the counters stay the same on every rank.
#include "coll/kernels/kern_common.cuh"

namespace p2pk {

// Thread 0 of a writer: wait until every peer has read mailbox m's
// previous use (*usedp uses so far).
__device__ __forceinline__ bool stage_wait_freed(const p2pk_ar_args &a, Waiter &w,
                                                 int n, int me, p2pk_stage_ctrl *mine, int m,
                                                 const uint64_t *usedp) {
  bool ok = true;
  for (int q = 0; q < n && ok; q++)
    if (q != me) ok = wait_geq(a, w, &mine->freed[m][q], *usedp, q);
  return ok;
}

// Thread 0 of a reader: wait until every peer's mailbox m holds its next
// use; the mailboxes' addresses to src.
__device__ __forceinline__ bool stage_wait_ready(const p2pk_ar_args &a, Waiter &w, int n, int me,
                                                 int m, const char **src) {
  bool ok = true;
  for (int q = 0; q < n && ok; q++) {
    if (q == me) continue;
    uint64_t want = *counter(a.local, a.lay.recvd_off, 0, q, n, m) + 1;
    ok = wait_geq(a, w, &stage_ctrl(a, q)->ready[m], want, q);
    src[q] = outbox(a, q, m);
  }
  return ok;
}

// Thread 0 of a reader: every peer's mailbox m read, counted and freed.
__device__ __forceinline__ void stage_free(const p2pk_ar_args &a, int n, int me, int m) {
  for (int q = 0; q < n; q++) {
    if (q == me) continue;
    uint64_t *rc = counter(a.local, a.lay.recvd_off, 0, q, n, m);
    uint64_t r = *rc + 1;
    *rc = r;
    st_rel(&stage_ctrl(a, q)->freed[m][me], r);
  }
}

template <class T>
__global__ void __launch_bounds__(512) staged_kernel(const __grid_constant__ p2pk_ar_args a) {
  __shared__ int s_ok;
  __shared__ const char *s_src[P2PK_COLL_MAX_RANKS];
  uint32_t seq;
  if (!prologue(a, &seq)) return;
  Waiter w(a);
  const int G = gridDim.x / 2;
  const bool writer = (int)blockIdx.x < G;
  const int b = writer ? blockIdx.x : blockIdx.x - G;
  // The header's verdict in a word of its own: thread 0 writes s_ok again
  // at its first wait, with no barrier after the other threads read this.
  __shared__ int s_start;
  if (threadIdx.x == 0) {
    s_start = 1;
    if (blockIdx.x == 0) header_send(a, seq);
    if ((int)blockIdx.x == G) s_start = header_check(a, seq, w);
  }
  __syncthreads();
  if (!s_start) return;
  const int n = a.nranks, me = a.rank, S = a.slots;
  const uint64_t B = a.count * sizeof(typename T::bits), K = a.chunk;
  const int mode = p2pk_stage_mode(a.in_stride, a.reduce);
  const uint64_t cps = (B + K - 1) / K;  // chunks per segment
  const uint64_t chunks = cps * (uint64_t)p2pk_stage_segs(mode, n);
  const uint64_t J = chunks > (uint64_t)b ? (chunks - 1 - b) / G + 1 : 0;
  p2pk_dev_ctrl *c = ctrl_of(a.local);
  p2pk_stage_ctrl *mine = stage_ctrl(a, me);
  const bool inplace = a.in == a.out;
  const char *in = (const char *)a.in;
  char *out = (char *)a.out;
  for (uint64_t j = 0; j < J; j++) {
    const uint64_t ci = (uint64_t)b + j * G;
    const int t = (int)(ci / cps);                 // segment
    const uint64_t x = (ci - (uint64_t)t * cps) * K; // offset inside the segment
    const uint64_t len = min(K, B - x);
    const int m = b * S + (int)(j % S);
    const uint64_t progress = ((uint64_t)seq << 32) | (j + 1);
    if (writer) {
      const int blk = p2pk_stage_send_block(mode, n, me, a.send_mask, t);
      uint64_t *usedp = counter(a.local, a.lay.sent_off, 0, me, n, m);
      if (threadIdx.x == 0) s_ok = stage_wait_freed(a, w, n, me, mine, m, usedp);
      __syncthreads();
      if (!s_ok) return;
      if (blk >= 0) copy_chunk<T>(outbox(a, me, m), in + (uint64_t)blk * a.in_stride + x, len);
      __syncthreads();
      if (threadIdx.x == 0) {
        uint64_t u = *usedp + 1;
        *usedp = u;
        st_rel(&mine->ready[m], u);
        st_vol_u64(&c->wprog[b], progress);
      }
    } else {
      if (threadIdx.x == 0) {
        bool ok = stage_wait_ready(a, w, n, me, m, s_src);
        s_src[me] = in + (uint64_t)t * a.in_stride + x;  // reduce: t is 0 or me
        // In place: this rank's writer must have copied the chunk out before
        // the output overwrites it (all-to-all: the round robin swaps one
        // block with one partner per segment, so that is the same chunk).
        if (ok && inplace) ok = wait_geq(a, w, &c->wprog[b], progress, me);
        s_ok = ok;
      }
      __syncthreads();
      if (!s_ok) return;
      const uint32_t from = p2pk_stage_recv_from(mode, n, me, a.recv_mask, t);
      if (a.reduce) {
        if (from) reduce_chunk<T, true>(a.op, n, me, out + x, s_src, nullptr, 0, len);
      } else {
        for (int q = 0; q < n; q++)
          if ((from >> q) & 1u) copy_chunk<T, true>(out + (uint64_t)q * a.out_stride + x, s_src[q], len);
      }
      if (a.self_copy && t == 0)
        copy_chunk<T>(out + (uint64_t)me * a.out_stride + x, in + (uint64_t)me * a.in_stride + x, len);
      __syncthreads();
      if (threadIdx.x == 0) stage_free(a, n, me, m);
    }
  }
}

// Send/recv through host memory: one launch runs a group's operations side by
// side, each on its own blocks (as p2p_kernel does over P2P). Every (sender,
// receiver) pair has its own mailboxes in the sender's part of the host
// region, so only the two ends touch them: block bb of an operation cycles
// through mailboxes 2 bb and 2 bb + 1. The sender waits until the receiver
// has drained a mailbox's previous use, fills it and raises its ready count;
// the receiver waits for that count, copies out and raises freed. The local
// use counts sit in set 1 of the scratch counters (the staged collectives use
// set 0).
template <class T>
__global__ void __launch_bounds__(512) staged_p2p_kernel(const __grid_constant__ p2pk_p2p_args pa) {
  __shared__ int s_ok;
  const p2pk_ar_args &a = pa.a;
  const p2pk_p2p_op *op = p2p_op_of(pa, p2p_op_index(pa));
  if (!op) return;
  const p2pk_p2p_op &o = *op;
  Waiter w(a);
  const int n = a.nranks, me = a.rank, bb = blockIdx.x - o.base, G = o.blocks;
  const uint64_t K = o.chunk, chunks = (o.bytes + K - 1) / K;
  const int src = o.send ? me : o.peer, dst = o.send ? o.peer : me;
  p2pk_stage_ctrl *sc = stage_ctrl(a, src);
  uint64_t j = 0;
  for (uint64_t ci = bb; ci < chunks; ci += G, j++) {
    const uint64_t x = ci * K, len = min(K, o.bytes - x);
    const int m = 2 * bb + (int)(j & 1);
    char *box = p2p_outbox(a, src, dst, m);
    uint64_t *cnt = counter(a.local, o.send ? a.lay.sent_off : a.lay.recvd_off, 1, o.peer, n, m);
    if (threadIdx.x == 0)
      s_ok = o.send ? wait_geq(a, w, &sc->p2p_freed[dst][m], *cnt, o.peer)
                    : wait_geq(a, w, &sc->p2p_ready[dst][m], *cnt + 1, o.peer);
    __syncthreads();
    if (!s_ok) return;
    if (o.send) copy_chunk<T>(box, o.buf + x, len);
    else copy_chunk<T, true>(o.buf + x, box, len);
    __syncthreads();
    if (threadIdx.x == 0) {
      uint64_t u = *cnt + 1;
      *cnt = u;
      st_rel(o.send ? &sc->p2p_ready[dst][m] : &sc->p2p_freed[dst][m], u);
    }
  }
}

}  // namespace p2pk

extern "C" cudaError_t p2pk_launch_p2p_staged(const p2pk_p2p_args *pa, int esize, int blocks,
                                              int threads, cudaStream_t stream) {
  cudaError_t e = cudaSuccess;
  P2PK_FOR_ESIZE(esize, p2pk::staged_p2p_kernel, blocks, threads, stream, *pa)
  return e;
}

extern "C" cudaError_t p2pk_launch_allreduce_staged(const p2pk_ar_args *a, int blocks, int threads,
                                                    cudaStream_t stream) {
  cudaError_t e = cudaSuccess;
  P2PK_FOR_DTYPE(a->dtype, p2pk::staged_kernel, 2 * blocks, threads, stream, *a)
  return e;
}

extern "C" cudaError_t p2pk_preload_allreduce_staged(void) {
  cudaError_t e = cudaSuccess;
  P2PK_PRELOAD_DTYPES(p2pk::staged_kernel, e);
  P2PK_PRELOAD_ESIZES(p2pk::staged_p2p_kernel, e);
  return e;
}
