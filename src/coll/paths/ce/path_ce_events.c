/* SPDX-License-Identifier: BSD-3-Clause */
/* Copy-engine collectives over P2P ordered by CUDA events: one process
 * driving every GPU, the ranks' calls inside one group (group.c collects
 * every rank's call of each), peer access between every pair. Broadcast
 * from P2PKIT_BCAST_CE_MIN, sends with their receives from
 * P2PKIT_SENDRECV_CE_MIN (both in the group), all-reduce from
 * P2PKIT_CE_ALLREDUCE_MIN, reduce-scatter from P2PKIT_CE_REDUCE_SCATTER_MIN
 * (bytes of a rank's share), all-gather from P2PKIT_CE_ALL_GATHER_MIN,
 * reduce from P2PKIT_CE_REDUCE_MIN, all-to-all (out of place) from
 * P2PKIT_CE_ALL_TO_ALL_MIN (bytes per peer).
 *
 * Why: SM stores over NVLink plateau at ~364 GB/s each way when both
 * directions run, the copy engines at ~388 (2x H200;
 * docs/decisions/sm-copy-plateau.md); the large all-reduce kernel sits at
 * ~360 busbw and the reduce-scatter kernel at ~303 (its mailbox
 * handshake). Here the SMs only reduce, locally; every byte crosses the
 * link on a copy engine: a 1 GiB all-reduce at 380 GB/s busbw, 1.15-1.17x
 * NCCL.
 *
 * All-reduce, rank t owning shard t of the message (ce_shard below), per
 * chunk k of a shard (slot s = q % D, q its number across calls, D =
 * P2PKIT_CE_DEPTH):
 *   rank r, side stream (ce->side):  in_r[shard t, k] -> land_t[r][s], every t != r   (peer copy)
 *   rank t, its own stream:          out_t[shard t, k] = in_0 op in_1 ... in rank order
 *                                    (its own input, the peers' from land_t)
 *   rank t, gather stream (ce->h2d): out_t[shard t, k] -> out_r[shard t, k], every r != t
 * Reduce-scatter is the first two lines (shard t is rank t's share, its
 * result in out_t), reduce the same with one shard, the whole message,
 * owned by the root; all-gather is one copy of each rank's share into every
 * peer's output, no chunks. land_t is device memory of rank t made on first
 * use ((n - 1) x D chunks). Every rank reduces every element in rank order
 * from the same bytes, as the kernels do: the same bits on every rank.
 *
 * Events (one set per rank, reused: every wait on a record is enqueued
 * before that event is recorded again):
 *   START   rank r's stream at the call; every gather stream waits for
 *           every rank's (it writes their outputs), every side stream for
 *           its own rank's (it reads that rank's input).
 *   CP[s]   rank r's copies of chunk q into its peers' land[r][s] done: the
 *           owners wait before they reduce.
 *   RED[s]  rank t's reduce of chunk q done: the peers' side streams wait
 *           before refilling land_t[*][s] (chunk q + D, maybe in the next
 *           call); t's gather stream waits before it copies the result out.
 *   SIDE    rank r's side stream done (its copies read in_r).
 *   GATHER  rank t's gather stream done (it wrote every peer's out and read
 *           out_t).
 *   LAST    rank t's last reduce of the call (the last read of land_t).
 * Chunks are numbered across calls (CEV(c)->q, the same on every rank of the
 * group): chunk k of a call is q0 + k and lands in slot q % D, so a
 * side stream, which reads only its rank's input and writes the owners'
 * landing slots, starts on its own rank's START alone, and each copy waits
 * for RED of its slot, set by the reduce of chunk q - D, of this call or
 * the last. The next call's first copies then run beside the last call's
 * last reduce, which with a single owner (reduce) was the tail of every
 * call (one process: reduce 256 MiB 790 us against 699 with a process per
 * GPU, 2x H200). When a call's chunk size or depth differs
 * from the last call's (layout), its slots overlap others, and the side
 * streams first wait for every owner's LAST.
 * Each rank's stream ends after its last reduce, its own SIDE and every
 * rank's GATHER; the next call's START then covers the outputs, LAST the
 * landing slots.
 * In place (in_r == out_r) is safe: out_r[shard t, k] is overwritten by t's
 * gather copy only after t's reduce of k, which waited for r's copy of
 * in_r[shard t, k]; rank t's own shard is read only by its own reduce. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll/paths/ce/ce_common.h"
#include "coll/kernels/plan.h"
#include "core/check.h"
#include "core/log.h"
#include "core/param.h"

/* This path's state: chunks so far (chunk q lands in slot q % depth), the
 * last call's chunk bytes x depth (its slots' layout), what was logged. */
typedef struct {
  uint64_t q;
  size_t layout;
  unsigned logged;
  int bcast_logged, sr_logged;
} ce_events;
#define CEV(c) ((ce_events *)(c)->path_state[P2PK_PATH_CE_EVENTS])

enum {
  E_START = P2PK_CE_EV_START,
  E_CP = 1,
  E_SIDE = 1 + P2PK_SCE_DEPTH_MAX,
  E_GATHER = 2 + P2PK_SCE_DEPTH_MAX,
  E_LAST = 3 + P2PK_SCE_DEPTH_MAX,
  E_RED = 1 + 2 * P2PK_SCE_DEPTH_MAX
};

static void log_once(struct p2pkit_comm *c, int kind, size_t bytes, size_t nch, size_t cb) {
  if (CEV(c)->logged & (1u << kind)) return;
  CEV(c)->logged |= 1u << kind;
  if (nch)
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): %s of %zu B uses the copy engines over P2P, "
              "%zu chunks of %zu B per shard, the SMs reduce locally (one process, in a group)",
              c->rank, c->device, p2pk_coll_name(kind), bytes, nch, cb);
  else
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): %s of %zu B uses the copy engines over P2P "
              "(one process, in a group)", c->rank, c->device, p2pk_coll_name(kind), bytes);
}

#define EV(r, i) (set[r]->c->ce->sev[i])
#define STREAM(r) ((cudaStream_t)set[r]->stream)
#define DEV(r) (set[r]->c->device)

/* One call of reduce_ce: its shards (soff, slen), chunks (K elements, CB
 * bytes, D in flight), and the rank a failure came from (bad). */
typedef struct {
  p2pk_call *const *set;
  int n, kind, gather, D, bad;
  size_t es, K, CB, nch;
  size_t soff[P2PK_COLL_MAX_RANKS], slen[P2PK_COLL_MAX_RANKS];
} rce_t;

#define LAND(t, r, s) p2pk_ce_land(set[t]->c, r, D, s, CB)
#define SIDE(r) (set[r]->c->ce->side)
#define GATHER(r) (set[r]->c->ce->h2d)

/* Shard t of the all-reduce's message; reduce-scatter: share t of the
 * input (count elements each), its result at out_t + 0; reduce: the root
 * owns the whole message, the others nothing. */
static void rce_plan(rce_t *x, p2pk_call *const *set, int n, int kind) {
  const p2pk_call *a0 = set[0];
  x->set = set;
  x->n = n;
  x->kind = kind;
  x->gather = kind == P2PK_COLL_ALL_REDUCE;
  x->es = p2pkit_dtype_size(a0->dtype);
  x->D = p2pk_ce_depth();
  x->bad = 0;
  size_t most = 0;
  for (int t = 0; t < n; t++) {
    p2pk_ce_owned(kind, a0->count, n, x->es, a0->root, t, &x->soff[t], &x->slen[t]);
    if (x->slen[t] > most) most = x->slen[t];
  }
  x->K = p2pk_sce_chunk_elems(p2pk_ce_chunk_bytes(most * x->es, n, x->D), x->es);
  x->CB = x->K * x->es;
  x->nch = (most + x->K - 1) / x->K;
}

/* Every rank's chunk k of each peer's shard into that peer's landing slot
 * s. One stream, so chunks land in order (2x H200: odd chunks on a second
 * stream landed two at a time, half speed each, and delayed the first
 * reduce: 256 MiB 817 us against 719). */
static cudaError_t rce_push(rce_t *x, size_t k, int s) {
  p2pk_call *const *set = x->set;
  const int n = x->n, D = x->D;
  const size_t es = x->es, K = x->K, CB = x->CB;
  cudaError_t e = cudaSuccess;
  for (int r = 0; r < n && e == cudaSuccess; r++) {
    x->bad = r;
    cudaStream_t side = SIDE(r);
    e = cudaSetDevice(DEV(r));
    for (int t = 0; t < n && e == cudaSuccess; t++) {
      const size_t lb = p2pk_ce_part(x->slen[t], k, K) * es;
      if (t == r || !lb) continue;
      e = cudaStreamWaitEvent(side, EV(t, E_RED + s), 0);
      if (e == cudaSuccess)
        e = cudaMemcpyPeerAsync(LAND(t, r, s), DEV(t),
                                (const char *)set[r]->send + (x->soff[t] + k * K) * es, DEV(r), lb,
                                side);
    }
    if (e == cudaSuccess) e = cudaEventRecord(EV(r, E_CP + s), side);
  }
  return e;
}

/* Every owner reduces its chunk k, then (all-reduce) copies the result
 * out to every peer. */
static cudaError_t rce_reduce(rce_t *x, size_t k, int s) {
  p2pk_call *const *set = x->set;
  const int n = x->n, D = x->D;
  const size_t es = x->es, K = x->K, CB = x->CB;
  cudaError_t e = cudaSuccess;
  for (int t = 0; t < n && e == cudaSuccess; t++) {
    const size_t lb = p2pk_ce_part(x->slen[t], k, K) * es;
    if (!lb) continue;
    x->bad = t;
    const size_t at = (x->gather ? x->soff[t] : 0) + k * K;
    e = cudaSetDevice(DEV(t));
    for (int r = 0; r < n && e == cudaSuccess; r++)
      if (r != t) e = cudaStreamWaitEvent(STREAM(t), EV(r, E_CP + s), 0);
    if (e == cudaSuccess) {
      const char *src[P2PK_COLL_MAX_RANKS];
      for (int r = 0; r < n; r++)
        src[r] = r == t ? (const char *)set[t]->send + (x->soff[t] + k * K) * es : LAND(t, r, s);
      e = p2pk_ce_reduce_chunk(set[t]->c, set[t]->dtype, set[t]->op, src,
                               (char *)set[t]->recv + at * es, lb, STREAM(t));
    }
    if (e == cudaSuccess) e = cudaEventRecord(EV(t, E_RED + s), STREAM(t));
    if (!x->gather || e != cudaSuccess) continue;
    cudaStream_t gs = GATHER(t);
    e = cudaStreamWaitEvent(gs, EV(t, E_RED + s), 0);
    for (int r = 0; r < n && e == cudaSuccess; r++)
      if (r != t)
        e = cudaMemcpyPeerAsync((char *)set[r]->recv + at * es, DEV(r),
                                (const char *)set[t]->recv + at * es, DEV(t), lb, gs);
  }
  return e;
}

/* The end: LAST where a rank reduced, SIDE and GATHER everywhere, then
 * every stream waits. */
static cudaError_t rce_end(rce_t *x) {
  p2pk_call *const *set = x->set;
  const int n = x->n, gather = x->gather;
  cudaError_t e = cudaSuccess;
  for (int r = 0; r < n && e == cudaSuccess; r++) {
    x->bad = r;
    e = cudaSetDevice(DEV(r));
    if (e == cudaSuccess && x->slen[r]) e = cudaEventRecord(EV(r, E_LAST), STREAM(r));
    if (e == cudaSuccess) e = cudaEventRecord(EV(r, E_SIDE), SIDE(r));
    if (e == cudaSuccess && gather) e = cudaEventRecord(EV(r, E_GATHER), GATHER(r));
  }
  for (int r = 0; r < n && e == cudaSuccess; r++) {
    x->bad = r;
    e = cudaSetDevice(DEV(r));
    if (e == cudaSuccess) e = cudaStreamWaitEvent(STREAM(r), EV(r, E_SIDE), 0);
    for (int t = 0; t < n && gather && e == cudaSuccess; t++)
      e = cudaStreamWaitEvent(STREAM(r), EV(t, E_GATHER), 0);
  }
  return e;
}

/* All-reduce (gather = 1), reduce-scatter or reduce (gather = 0) of set[*]. */
static p2pkit_status_t reduce_ce(p2pk_call *const *set, int n, int kind) {
  rce_t x;
  rce_plan(&x, set, n, kind);
  const size_t need = (size_t)(n - 1) * (size_t)x.D * x.CB;
  cudaError_t e = p2pk_ce_start(set, n, need, 1, &x.bad);
  /* Another layout: the landing slots are free once every owner's last
   * reduce ran (LAST; one never recorded is no wait). */
  const uint64_t q0 = CEV(set[0]->c)->q;
  const size_t layout = x.CB * (size_t)x.D;
  for (int r = 0; r < n && e == cudaSuccess; r++) {
    x.bad = r;
    e = cudaSetDevice(DEV(r));
    for (int t = 0; t < n && e == cudaSuccess; t++)
      if (t != r && CEV(set[t]->c)->layout != layout) e = cudaStreamWaitEvent(SIDE(r), EV(t, E_LAST), 0);
  }
  for (size_t k = 0; k < x.nch && e == cudaSuccess; k++) {
    const int s = (int)((q0 + k) % (uint64_t)x.D);
    e = rce_push(&x, k, s);
    if (e == cudaSuccess) e = rce_reduce(&x, k, s);
  }
  if (e == cudaSuccess) e = rce_end(&x);
  for (int r = 0; r < n; r++) {
    CEV(set[r]->c)->q += x.nch;
    CEV(set[r]->c)->layout = layout;
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    return p2pk_fail(P2PKIT_ERR_CUDA, "%s: rank %d (GPU %d): copy engines over P2P: %s",
                     p2pk_coll_name(kind), x.bad, DEV(x.bad), cudaGetErrorString(e));
  }
  for (int r = 0; r < n; r++) log_once(set[r]->c, kind, set[0]->bytes, x.nch, x.CB);
  return P2PKIT_SUCCESS;
}

#undef LAND

/* All-gather: rank r's share into every peer's output at r x share on its
 * side stream; its own copy (unless in place) on its own stream, beside
 * them (2x H200: on the side stream after the peer copy, out of
 * place took 1646 us at 1 GiB against in place's 1387). All-to-all (out of
 * place only: the selector sends in-place calls to the kernel) the
 * same with rank r's block t for rank t. */
static p2pkit_status_t gather_ce(p2pk_call *const *set, int n, int kind) {
  const size_t B = set[0]->bytes;
  const int a2a = kind == P2PK_COLL_ALL_TO_ALL;
  int bad = 0;
  cudaError_t e = p2pk_ce_start(set, n, 0, 0, &bad);
  for (int r = 0; r < n && e == cudaSuccess; r++) {
    bad = r;
    e = cudaSetDevice(DEV(r));
    for (int k = 1; k < n && e == cudaSuccess; k++) {
      int t = (r + k) % n;
      const char *src = (const char *)set[r]->send + (a2a ? (size_t)t * B : 0);
      e = cudaMemcpyPeerAsync((char *)set[t]->recv + (size_t)r * B, DEV(t), src, DEV(r), B, SIDE(r));
    }
    char *own = (char *)set[r]->recv + (size_t)r * B;
    const char *own_src = (const char *)set[r]->send + (a2a ? (size_t)r * B : 0);
    if (e == cudaSuccess && own != own_src)
      e = cudaMemcpyAsync(own, own_src, B, cudaMemcpyDeviceToDevice, STREAM(r));
    if (e == cudaSuccess) e = cudaEventRecord(EV(r, E_SIDE), SIDE(r));
  }
  for (int r = 0; r < n && e == cudaSuccess; r++) {
    bad = r;
    e = cudaSetDevice(DEV(r));
    for (int t = 0; t < n && e == cudaSuccess; t++)
      e = cudaStreamWaitEvent(STREAM(r), EV(t, E_SIDE), 0);
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    return p2pk_fail(P2PKIT_ERR_CUDA, "%s: rank %d (GPU %d): copy engines over P2P: %s",
                     p2pk_coll_name(kind), bad, DEV(bad), cudaGetErrorString(e));
  }
  for (int r = 0; r < n; r++) log_once(set[r]->c, kind, B, 0, 0);
  return P2PKIT_SUCCESS;
}

#undef SIDE
#undef GATHER
#undef EV
#undef STREAM
#undef DEV

/* set[r]: rank r's call of one broadcast (all checked alike). */
static p2pkit_status_t bcast_ce(p2pk_call *const *set, int n) {
  const p2pk_call *R = set[set[0]->root];
  struct p2pkit_comm *rc = R->c;
  cudaError_t e = cudaSuccess;
  int bad = R->c->rank;
  for (int r = 0; r < n && e == cudaSuccess; r++) {
    if (r == R->root) continue;
    struct p2pkit_comm *c = set[r]->c;
    e = cudaSetDevice(c->device);
    if (e == cudaSuccess) e = p2pk_lazy_event(&c->ce->ev[0]);
    if (e == cudaSuccess) e = cudaEventRecord(c->ce->ev[0], (cudaStream_t)set[r]->stream);
    if (e != cudaSuccess) bad = r;
  }
  if (e == cudaSuccess) e = cudaSetDevice(rc->device);
  if (e == cudaSuccess) e = p2pk_lazy_stream(&rc->ce->side);
  if (e == cudaSuccess) e = p2pk_lazy_event(&rc->ce->ev[1]);
  if (e == cudaSuccess) e = p2pk_lazy_event(&rc->ce->ev[2]);
  if (e == cudaSuccess) e = cudaEventRecord(rc->ce->ev[1], (cudaStream_t)R->stream);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(rc->ce->side, rc->ce->ev[1], 0);
  for (int r = 0; r < n && e == cudaSuccess; r++)
    if (r != R->root) e = cudaStreamWaitEvent(rc->ce->side, set[r]->c->ce->ev[0], 0);
  for (int r = 0; r < n && e == cudaSuccess; r++)
    if (r != R->root)
      e = cudaMemcpyPeerAsync(set[r]->recv, set[r]->c->device, R->send, rc->device, R->bytes,
                              rc->ce->side);
  if (e == cudaSuccess) e = cudaEventRecord(rc->ce->ev[2], rc->ce->side);
  if (e == cudaSuccess && R->send != R->recv)
    e = cudaMemcpyAsync(R->recv, R->send, R->bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)R->stream);
  if (e == cudaSuccess) e = cudaStreamWaitEvent((cudaStream_t)R->stream, rc->ce->ev[2], 0);
  for (int r = 0; r < n && e == cudaSuccess; r++) {
    if (r == R->root) continue;
    e = cudaSetDevice(set[r]->c->device);
    if (e == cudaSuccess) e = cudaStreamWaitEvent((cudaStream_t)set[r]->stream, rc->ce->ev[2], 0);
    if (e != cudaSuccess) bad = r;
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    return p2pk_fail(P2PKIT_ERR_CUDA, "broadcast: rank %d (root %d): copy engine: %s", bad,
                     R->root, cudaGetErrorString(e));
  }
  if (!CEV(rc)->bcast_logged) {
    CEV(rc)->bcast_logged = 1;
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): broadcast of %zu B as root uses the copy engine "
              "(every rank in this process, in one group; P2PKIT_BCAST_CE_MIN=%zu)", rc->rank,
              rc->device, R->bytes, p2pk_param_size("P2PKIT_BCAST_CE_MIN"));
  }
  return P2PKIT_SUCCESS;
}

/* The copy engine moves each matched send into its receive. Three passes:
 * every receiver's stream first records where it stands before the group
 * (`ready`); then each copy waits for its receiver's `ready` and records
 * `done`; then each receiver's stream waits for its `done`. Recording every
 * `ready` before any copy is queued keeps the copies of a pair of ranks that
 * send to each other concurrent (a later `ready` would sit behind the first
 * copy). Every wait reaches back only to work queued before the group, so no
 * cycle can form with the kernels of the group's other operations. */
static p2pkit_status_t ce_copies(const p2pk_call *const *snd, const p2pk_call *const *rcv,
                                 int np) {
  cudaEvent_t ready[P2PK_GROUP_OPS] = {0}, done[P2PK_GROUP_OPS] = {0};
  int prev = -1, bad = -1;
  cudaGetDevice(&prev);
  cudaError_t e = cudaSuccess;
  for (int k = 0; k < np && e == cudaSuccess; k++) {
    e = cudaSetDevice(rcv[k]->c->device);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&ready[k], cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(ready[k], (cudaStream_t)rcv[k]->stream);
    if (e != cudaSuccess) bad = k;
  }
  for (int k = 0; k < np && e == cudaSuccess; k++) {
    const p2pk_call *s = snd[k], *r = rcv[k];
    e = cudaSetDevice(s->c->device);
    if (e == cudaSuccess) e = cudaStreamWaitEvent((cudaStream_t)s->stream, ready[k], 0);
    if (e == cudaSuccess)
      e = cudaMemcpyPeerAsync(r->recv, r->c->device, s->send, s->c->device, s->bytes,
                              (cudaStream_t)s->stream);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&done[k], cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(done[k], (cudaStream_t)s->stream);
    if (e != cudaSuccess) bad = k;
  }
  for (int k = 0; k < np && e == cudaSuccess; k++) {
    e = cudaSetDevice(rcv[k]->c->device);
    if (e == cudaSuccess) e = cudaStreamWaitEvent((cudaStream_t)rcv[k]->stream, done[k], 0);
    if (e != cudaSuccess) bad = k;
  }
  /* Destroying a recorded event is fine: it is released once it completes. */
  for (int k = 0; k < np; k++) {
    if (ready[k]) cudaEventDestroy(ready[k]);
    if (done[k]) cudaEventDestroy(done[k]);
  }
  if (prev >= 0) cudaSetDevice(prev);
  if (e != cudaSuccess)
    return p2pk_fail(P2PKIT_ERR_CUDA, "%s: rank %d -> rank %d: copy engine: %s", "send/recv",
                     snd[bad]->c->rank, rcv[bad]->c->rank, cudaGetErrorString(e));
  for (int k = 0; k < np; k++) {
    struct p2pkit_comm *cs = snd[k]->c, *cr = rcv[k]->c;
    if (CEV(cs)->sr_logged) continue;
    CEV(cs)->sr_logged = 1;
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d) -> rank %d (GPU %d): send/recv of %zu B and more "
              "uses the copy engine (both ranks in this process)", cs->rank, cs->device, cr->rank,
              cr->device, cs->sel.from[P2PK_FROM_EVENTS][P2PK_SENDRECV]);
  }
  return P2PKIT_SUCCESS;
}

/* Every rank's call of one collective (one process, all checked alike). */
static p2pkit_status_t launch_group(p2pk_call *const *set, int n) {
  for (int r = 0; r < n; r++) set[r]->c->ce->cap = set[r]->grid_cap;
  const int kind = set[0]->kind;
  switch (kind) {
    case P2PK_COLL_BROADCAST: return bcast_ce(set, n);
    case P2PK_COLL_ALL_REDUCE:
    case P2PK_COLL_REDUCE_SCATTER:
    case P2PK_COLL_REDUCE: return reduce_ce(set, n, kind);
    case P2PK_COLL_ALL_GATHER:
    case P2PK_COLL_ALL_TO_ALL: return gather_ce(set, n, kind);
    default:
      return p2pk_fail(P2PKIT_ERR_INTERNAL, "%s has no copy-engine path", p2pk_coll_name(kind));
  }
}

static p2pkit_status_t init(struct p2pkit_comm *c) {
  ce_events *s = calloc(1, sizeof *s);
  if (!s) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "rank %d: out of memory", c->rank);
  c->path_state[P2PK_PATH_CE_EVENTS] = s;
  return P2PKIT_SUCCESS;
}

static void fini(struct p2pkit_comm *c) {
  free(c->path_state[P2PK_PATH_CE_EVENTS]);
  c->path_state[P2PK_PATH_CE_EVENTS] = NULL;
}

const p2pk_path p2pk_path_ce_events = {
    .id = P2PK_PATH_CE_EVENTS,
    .kinds = (1u << P2PK_KINDS) - 1,
    .modes = P2PK_MODE_ONE,
    .transports = P2PK_XPORT_P2P,
    .captures = P2PK_CAPTURE_EAGER,
    .init = init,
    .fini = fini,
    .launch_group = launch_group,
    .sendrecv_pairs = ce_copies,
};
