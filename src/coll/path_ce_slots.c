/* SPDX-License-Identifier: BSD-3-Clause */
/* Copy engines over P2P through landing slots, with one process per GPU:
 * all-reduce, reduce-scatter, reduce, broadcast, all-gather and all-to-all
 * from their P2PKIT_*_CE_MIN, and send/recv from P2PKIT_SENDRECV_CE_MIN
 * (with a process per GPU, a setting not given takes its own default:
 * select.c's thresholds). One process under graph
 * capture runs the same code with plain device pointers to the peers'
 * scratch (its events between per-GPU captures could not be replayed), and
 * when every rank's call is in one group, pushes all-reduce results,
 * broadcasts, all-to-all blocks and sends straight into the receivers'
 * buffers ("direct", path_ce_direct.c). With a process per GPU a receive
 * into a registered buffer may take its send straight in too ("straight
 * in", cep_straight.c), eagerly and under capture.
 *
 * Why: with a process per GPU the kernels move every byte with SM stores,
 * which top out at ~364 GB/s each way on the 2x H200; the copy engines
 * reach ~390 (cudaMemcpyPeerAsync 392-395 GB/s one way, 775 both;
 * docs/decisions/sm-copy-plateau.md). One process drives them through
 * CUDA events (path_ce_events.c); here a
 * peer's buffers are not mapped (only its scratch is, through CUDA IPC), so
 * every chunk lands in a slot of the receiver's scratch, and the ranks tell
 * each other about chunks through counters beside it, waited for by
 * one-thread kernels on the streams (p2pk_launch_cep_sync, with the
 * collective kernels' timeout and abort rules: a peer that dies makes the
 * others fail, not hang) and written by stream memory operations where a
 * post stands alone (p2pk_cep_run, ce_common.c: no multiprocessor needed, so a
 * collective kernel that fills the GPU cannot starve them).
 *
 * Landing slots: rank t's scratch holds, for each peer r, `depth` slots of
 * lay.cep_slot bytes (P2PKIT_CE_DEPTH, default 2 here; P2PKIT_CE_CHUNK, at most
 * and by default what keeps all of them within 192 MiB: 96 MiB on 2 GPUs).
 * Chunk k of a call on the pair r -> t uses slot (q + k) % depth, q the
 * pair's chunks so far (sent at r, recvd at t: both ends count
 * alike, eagerly and when capturing, so a replay repeats its slots); a
 * call's first chunk then lands beside the last call's last one instead
 * of waiting for it (restarting at slot 0 every call took a 16 MiB
 * broadcast from 48.7 to 75.7 us on 2x H200). Each half of a
 * slot has two flags (p2pk_dev_ctrl, coll_dev.h): busy[t][s] at r (the
 * sender claims the half: waits until it is 0, sets it to 1) and full[r][s]
 * at t (the sender sets it once its copy landed, with the call's header
 * beside it; the receiver waits for 1 and clears it, and clears the
 * sender's busy once it consumed the half); the second half has rbusy and
 * done the same way. A push that fills a whole slot claims both halves.
 * Every flag returns to 0, so a call leaves the flags as it found them and
 * a CUDA graph can replay it (counters of chunks numbered across calls
 * would be baked into the launches). Waits read this rank's own scratch; posts that
 * set a flag write a peer's, those that clear their own write this rank's.
 *
 * Reduce-scatter, rank t owning share t, per chunk k of a share (s its
 * slot):
 *   rank r, side stream:   claim busy[t][s], rbusy[t][s] (a whole slot);
 *                          in_r[share t, k] -> land_t[r][s]; set
 *                          full[r][s] at t                     (every t != r)
 *   rank t, its stream:    take full[r][s] (every r, checking the header);
 *                          out_t[k] = in_0 op in_1 ... in rank order (its
 *                          own input, the peers' from land_t); clear
 *                          busy[t][s], rbusy[t][s] at every r
 * Reduce is the same with the root owning the whole message; broadcast the
 * root pushing the message to every peer, which copies each chunk out of its
 * slot (a kernel) into its output; send/recv the sender pushing, the
 * receiver copying out, as the broadcast. All-reduce: rank t owns shard t
 * (p2pk_ce_shard), the peers' contributions to it land in the first half of
 * its slots and it reduces them as above (clearing busy only); then its
 * gather stream claims rbusy, pushes each reduced chunk into the second
 * half of every peer's slot for t and sets done; each peer takes done,
 * copies the result out into its output (a kernel) and clears rbusy.
 * Every rank reduces every element in rank order from the same bytes: the
 * same bits on every rank. Only pushes cross the link: pulling the results
 * back out of the owner's slots (this file's first version) ran at 317-352
 * GB/s busbw on 512 MiB - 1 GiB against 366 at 256 MiB (2x H200).
 *
 * The copy streams (side, gather) hold only copies and event waits; the
 * one-thread kernels that claim slots run ahead on their own streams and
 * end in events the copies wait for, and the posts run on others after
 * events the copies record (a kernel between two copies on one stream left
 * the copy engine idle ~14 us a chunk on 2x H200). On a rank's own stream a post
 * and the next chunk's waits go in one launch (cep_batch_t: launched when full,
 * so any number of steps keeps its order). START (the caller's stream at
 * the call) comes before the copy streams start (under capture before
 * every stream of the call); the caller's stream ends after SIDE (the
 * pushes read its input), and for the all-reduce after GATHER (its result
 * pushes read its output) and RECV (its copies-out write it). Under
 * capture the posts are kernels (memory operations captured in a graph
 * ran far slower: cep_batch() says by how much) and
 * every stream of the call joins the caller's before it ends. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll/cep.h"
#include "core/check.h"
#include "core/log.h"
#include "core/param.h"

/* One all-reduce through the slots (cep_allreduce): the call, its shards
 * and chunks, the streams' step lists (my stream; W2 and P2 around the
 * gather copies; R, the copies out). */
typedef struct {
  struct p2pkit_comm *c;
  const void *send;
  void *recv;
  p2pkit_dtype_t dtype;
  p2pkit_redop_t op;
  cudaStream_t stream, g, R;
  char *const *pout;
  int n, me;
  uint64_t D, hv;
  size_t es, half, K, mine, far;
  size_t soff[P2PK_COLL_MAX_RANKS], slen[P2PK_COLL_MAX_RANKS], span[P2PK_COLL_MAX_RANKS];
  cep_batch_t bs, bw, bp, br;
} car_t;

#define SLOT_IN(r) ((int)((CEP(c)->recvd[r] + k) % D))  /* chunk k from r */
#define SLOT_OUT(t) ((int)((CEP(c)->sent[t] + k) % D))  /* chunk k to t */

/* The shards, chunks, header, and the pushes of my contributions (pu). */
static int car_plan(car_t *x, size_t count, cep_push *pu) {
  struct p2pkit_comm *c = x->c;
  const int n = x->n, me = x->me;
  size_t most = 0;
  for (int t = 0; t < n; t++) {
    p2pk_ce_owned(P2PK_COLL_ALL_REDUCE, count, n, x->es, 0, t, &x->soff[t], &x->slen[t]);
    if (x->slen[t] > most) most = x->slen[t];
  }
  /* Direct: no results in the second halves, so a chunk may fill a whole
   * slot (claimed whole: a slot-path call may still hold a result there). */
  x->K = cep_chunk_elems(c, most * x->es, x->es, x->pout ? c->lay.cep_slot : x->half);
  x->hv = cep_header(P2PK_COLL_ALL_REDUCE, count, x->dtype, x->op, 0);
  x->mine = cep_nchunks(x->slen[me], x->K);
  int np = 0;
  x->far = x->mine;
  for (int t = 0; t < n; t++) {
    if (t == me) continue;
    if (x->slen[t]) pu[np++] = (cep_push){t, (const char *)x->send + x->soff[t] * x->es, x->slen[t]};
    /* Both ways of a pair turn through the slots by the longer of the two
     * shards (contributions to t's, results of mine), the same count at
     * both ends. */
    const size_t ch = cep_nchunks(x->slen[t], x->K);
    x->span[t] = ch > x->mine ? ch : x->mine;
    if (x->span[t] > x->far) x->far = x->span[t];
  }
  return np;
}

/* My shard's chunk k: every peer's contribution (first halves), then the
 * reduce, then the halves go back to the peers; then the result to every
 * peer, into the second half of its slot for me (direct: into its output,
 * once it said the output is free). */
static cudaError_t car_own(car_t *x, size_t k) {
  struct p2pkit_comm *c = x->c;
  const int n = x->n, me = x->me, ek = (int)(k % x->D);
  const uint64_t D = x->D;
  const size_t es = x->es, K = x->K;
  const char *src[P2PK_COLL_MAX_RANKS];
  src[me] = (const char *)x->send + (x->soff[me] + k * K) * es;
  for (int r = 0; r < n; r++) {
    if (r == me) continue;
    cep_take(&x->bs, &CTRL(me)->cep_full[r][SLOT_IN(r)], &CTRL(me)->cep_hdr[r][SLOT_IN(r)], x->hv, r);
    src[r] = cep_land(c, r, me, SLOT_IN(r));
  }
  cudaError_t e = cep_flush(&x->bs);
  cep_tr_mark(c, x->stream, "took", (long)k);
  const size_t lb = p2pk_ce_part(x->slen[me], k, K) * es;
  char *out = (char *)x->recv + (x->soff[me] + k * K) * es;
  if (e == cudaSuccess) e = p2pk_ce_reduce_chunk(c, x->dtype, x->op, src, out, lb, x->stream);
  cep_tr_mark(c, x->stream, "out", (long)k);
  if (e == cudaSuccess) e = cudaEventRecord(c->ce->step_ev[V_RED][ek], x->stream);
  for (int r = 0; r < n; r++)
    if (r != me && x->pout) cep_release(c, &x->bs, r, SLOT_IN(r));
    else if (r != me) cep_add(&x->bs, P2PK_CEP_POST, &CTRL(r)->cep_busy[me][SLOT_IN(r)], 0, NULL, 0, r);
  for (int t = 0; t < n; t++)
    if (t != me && !x->pout) cep_claim(&x->bw, &CTRL(me)->cep_rbusy[t][SLOT_OUT(t)], t);
    else if (t != me && k == 0) cep_take(&x->bw, &CTRL(me)->cep_rdy[t], NULL, 0, t);
  if (e == cudaSuccess) e = cep_flush(&x->bw);
  if (e == cudaSuccess) e = cudaEventRecord(c->ce->step_ev[V_GCR][ek], x->bw.s);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(x->g, c->ce->step_ev[V_GCR][ek], 0);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(x->g, c->ce->step_ev[V_RED][ek], 0);
  cep_tr_mark(c, x->g, "gpush", (long)k);
  for (int t = 0; t < n && e == cudaSuccess; t++)
    if (t != me && lb)
      e = cudaMemcpyAsync(x->pout ? x->pout[t] + (x->soff[me] + k * K) * es
                                  : cep_land(c, me, t, SLOT_OUT(t)) + x->half,
                          out, lb, cudaMemcpyDefault, x->g);
  cep_tr_mark(c, x->g, "gpushed", (long)k);
  /* The posts only after P2 waits for the copies. */
  if (e == cudaSuccess) e = cudaEventRecord(c->ce->step_ev[V_GCP][ek], x->g);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(x->bp.s, c->ce->step_ev[V_GCP][ek], 0);
  for (int t = 0; t < n; t++)
    if (t != me && !x->pout) cep_add(&x->bp, P2PK_CEP_POST, &CTRL(t)->cep_done[me][SLOT_OUT(t)], 1, NULL, 0, t);
    else if (t != me && k + 1 == x->mine) cep_add(&x->bp, P2PK_CEP_POST, &CTRL(t)->cep_fin[me], 1, NULL, 0, t);
  if (e == cudaSuccess) e = cep_flush(&x->bp);
  return e;
}

/* Each owner's result of chunk k, out of the slot's second half into my
 * output (on its own stream, so my reduces never wait for it). */
static cudaError_t car_results(car_t *x, size_t k) {
  struct p2pkit_comm *c = x->c;
  const int n = x->n, me = x->me;
  const uint64_t D = x->D;
  const size_t es = x->es, K = x->K;
  cudaError_t e = cudaSuccess;
  for (int t = 0; t < n && e == cudaSuccess && !x->pout; t++) {
    if (t == me || k >= cep_nchunks(x->slen[t], K)) continue;
    cep_take(&x->br, &CTRL(me)->cep_done[t][SLOT_IN(t)], NULL, 0, t);
    e = cep_flush(&x->br);
    if (e == cudaSuccess)
      e = cep_copy_out(c, x->dtype, cep_land(c, t, me, SLOT_IN(t)) + x->half,
                       (char *)x->recv + (x->soff[t] + k * K) * es, p2pk_ce_part(x->slen[t], k, K) * es,
                       x->R);
    cep_tr_mark(c, x->R, "rout", (long)k);
    cep_add(&x->br, P2PK_CEP_POST, &CTRL(t)->cep_rbusy[me][SLOT_IN(t)], 0, NULL, 0, t);
  }
  return e;
}

#undef SLOT_IN
#undef SLOT_OUT

/* The end: direct, every owner's results landed in my output; my stream
 * waits for the copies out, the gather copies and their posts (kernels:
 * cep_join_side says why), and the pushes. */
static cudaError_t car_end(car_t *x, int np, cudaError_t e) {
  struct p2pkit_comm *c = x->c;
  const int n = x->n, me = x->me;
  cudaStream_t stream = x->stream;
  for (int t = 0; t < n && x->pout; t++)
    if (t != me && x->slen[t]) cep_take(&x->bs, &CTRL(me)->cep_fin[t], NULL, 0, t);
  if (e == cudaSuccess) e = cep_flush(&x->bs);
  if (e == cudaSuccess) e = cep_flush(&x->br);
  if (e == cudaSuccess) e = cudaEventRecord(c->ce->sev[E_RECV], x->R);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(stream, c->ce->sev[E_RECV], 0);
  if (e == cudaSuccess && x->mine) e = cudaEventRecord(c->ce->sev[E_GATHER], x->g);
  if (e == cudaSuccess && x->mine) e = cudaStreamWaitEvent(stream, c->ce->sev[E_GATHER], 0);
  if (e == cudaSuccess && x->mine) e = cudaEventRecord(c->ce->sev[E_POST2], x->bp.s);
  if (e == cudaSuccess && x->mine) e = cudaStreamWaitEvent(stream, c->ce->sev[E_POST2], 0);
  if (e == cudaSuccess && np) e = cep_join_side(c, stream, 0);
  return e;
}

/* All-reduce (the file's head has the picture). pout: NULL, or every
 * rank's output (one process under capture): the results go straight into
 * the peers' outputs ("direct": rdy/fin flags, no second halves, no copies
 * out). */
cudaError_t cep_allreduce(struct p2pkit_comm *c, const void *send, void *recv, size_t count,
                          p2pkit_dtype_t dtype, p2pkit_redop_t op, cudaStream_t stream,
                          char *const *pout) {
  car_t x = {.c = c, .send = send, .recv = recv, .dtype = dtype, .op = op, .stream = stream,
             .pout = pout, .n = c->nranks, .me = c->rank, .D = c->lay.cep_depth,
             .es = p2pkit_dtype_size(dtype), .half = c->lay.cep_slot / 2};
  cep_push pu[P2PK_COLL_MAX_RANKS];
  const int np = car_plan(&x, count, pu);
  cudaError_t e = cep_start(c, stream, np > 0, pout != NULL, x.mine > 0);
  cep_batch(&x.bs, c, stream);
  /* Direct: my output is free from here on (my stream stands at the call):
   * every owner of a shard may write its results into it. */
  for (int t = 0; t < x.n && pout; t++)
    if (t != x.me && x.slen[t]) cep_add(&x.bs, P2PK_CEP_POST, &CTRL(t)->cep_rdy[x.me], 1, NULL, 0, t);
  /* The all-reduce's posts stay kernels (2x H200: with memory operations
   * 512 MiB took 1514-1544 us from one measurement to the next, with
   * kernels 1482-1485). */
  if (e == cudaSuccess && np) e = cep_pushes(c, pu, np, x.K, x.es, x.hv, pout != NULL, 0);
  x.g = c->ce->h2d;
  x.R = c->ce->step[S_RECV];
  /* The results' copies out write this rank's output. */
  if (e == cudaSuccess) e = cudaStreamWaitEvent(x.R, c->ce->sev[E_START], 0);
  cep_batch(&x.bw, c, c->ce->step[S_WAIT2]);
  cep_batch(&x.bp, c, c->ce->step[S_POST2]);
  cep_batch(&x.br, c, x.R);
  x.bs.memops = x.bp.memops = x.br.memops = 0; /* kernels (above) */
  for (size_t k = 0; k < x.far && e == cudaSuccess; k++) {
    if (k < x.mine) e = car_own(&x, k);
    if (e == cudaSuccess) e = car_results(&x, k);
  }
  e = car_end(&x, np, e);
  /* The pairs' slot turns, even on an error (the communicator is then
   * broken anyway). */
  for (int t = 0; t < x.n; t++)
    if (t != x.me) CEP(c)->sent[t] += x.span[t], CEP(c)->recvd[t] += x.span[t];
  if (e == cudaSuccess) cep_log_once(c, P2PK_COLL_ALL_REDUCE, "all_reduce", count * x.es, x.K * x.es, pout != NULL);
  return e;
}

/* Reduce-scatter, reduce and broadcast (the file's head has the picture). */
static cudaError_t cep_rooted(struct p2pkit_comm *c, int kind, const void *send, void *recv,
                                  size_t count, p2pkit_dtype_t dtype, p2pkit_redop_t op, int root,
                                  cudaStream_t stream) {
  const int n = c->nranks, me = c->rank;
  const uint64_t D = c->lay.cep_depth;
  const size_t es = p2pkit_dtype_size(dtype);
  const int bcast = kind == P2PK_COLL_BROADCAST;
  /* Shard t: what rank t receives (reduces, or copies out for a broadcast). */
  size_t soff[P2PK_COLL_MAX_RANKS], slen[P2PK_COLL_MAX_RANKS], most = 0;
  for (int t = 0; t < n; t++) {
    p2pk_ce_owned(kind, count, n, es, root, t, &soff[t], &slen[t]);
    if (slen[t] > most) most = slen[t];
  }
  /* Reduce-scatter: at most 32 MiB unless P2PKIT_CE_CHUNK says, so the
   * last chunk's reduce, the tail after the link goes quiet, stays short
   * (2x H200: 256 MiB 433.9 us in 32 MiB chunks against
   * 472.6 in 64 MiB ones, 1 GiB 1514 against 1526). */
  size_t cap = c->lay.cep_slot;
  if (kind == P2PK_COLL_REDUCE_SCATTER && !p2pk_param_size("P2PKIT_CE_CHUNK") && cap > ((size_t)32 << 20))
    cap = (size_t)32 << 20;
  const size_t K = cep_chunk_elems(c, most * es, es, cap), CB = K * es;
  const uint64_t hv = cep_header(kind, count, dtype, op, root);
  /* Who pushes to whom: everyone to every owner, or the root alone. */
  cep_push pu[P2PK_COLL_MAX_RANKS];
  int np = 0, nsrc = 0, srcs[P2PK_COLL_MAX_RANKS];
  for (int t = 0; t < n; t++) {
    if (t == me || !slen[t] || (bcast && me != root)) continue;
    pu[np++] = (cep_push){t, (const char *)send + soff[t] * es, slen[t]};
  }
  for (int r = 0; r < n && slen[me]; r++)
    if (r != me && (!bcast || r == root)) srcs[nsrc++] = r;
  cudaError_t e = cep_start(c, stream, np > 0, 1, 0);
  if (e == cudaSuccess && np) e = cep_pushes(c, pu, np, K, es, hv, 1, 1);
  /* The broadcast root's own copy, beside its pushes: a kernel, not a copy
   * engine, which would slow the pushes (1 GiB out of place 3365 us
   * against 2937 in place); own_copy says how wide. */
  if (e == cudaSuccess && bcast && me == root && send != recv)
    e = cep_own_copy(c, dtype, send, recv, count * es, stream);
  /* My shard: take every source's chunk, reduce (or copy it out), release. */
  const size_t mine = cep_nchunks(slen[me], K);
  cep_batch_t bs;
  cep_batch(&bs, c, stream);
  for (size_t k = 0; k < mine && e == cudaSuccess; k++) {
    int sl[P2PK_COLL_MAX_RANKS];
    for (int i = 0; i < nsrc; i++) {
      const int r = srcs[i];
      sl[r] = (int)((CEP(c)->recvd[r] + k) % D);
      cep_take(&bs, &CTRL(me)->cep_full[r][sl[r]], &CTRL(me)->cep_hdr[r][sl[r]], hv, r);
    }
    e = cep_flush(&bs);
    cep_tr_mark(c, stream, "took", (long)k);
    const size_t lb = p2pk_ce_part(slen[me], k, K) * es;
    if (bcast) {
      if (e == cudaSuccess)
        e = cep_copy_out(c, dtype, cep_land(c, root, me, sl[root]), (char *)recv + k * CB, lb, stream);
    } else {
      const char *src[P2PK_COLL_MAX_RANKS];
      for (int r = 0; r < n; r++)
        src[r] = r == me ? (const char *)send + (soff[me] + k * K) * es : cep_land(c, r, me, sl[r]);
      if (e == cudaSuccess && lb)
        e = p2pk_ce_reduce_chunk(c, dtype, op, src, (char *)recv + k * CB, lb, stream);
    }
    cep_tr_mark(c, stream, "out", (long)k);
    for (int i = 0; i < nsrc; i++) cep_release(c, &bs, srcs[i], sl[srcs[i]]);
  }
  if (e == cudaSuccess) e = cep_flush(&bs);
  for (int i = 0; i < nsrc; i++) CEP(c)->recvd[srcs[i]] += mine;
  for (int i = 0; i < np; i++) CEP(c)->sent[pu[i].peer] += cep_nchunks(pu[i].len, K);
  if (e == cudaSuccess && np) e = cep_join_side(c, stream, 1);
  if (e == cudaSuccess) cep_log_once(c, kind, p2pk_coll_name(kind), count * es, CB, 0);
  return e;
}

/* Send/recv's chunk for a message of `bytes`: P2PKIT_CE_CHUNK, else half
 * the message within 16 MiB and a whole slot (2x H200: 96 MiB chunks 1465.8 us at 512 MiB and 2869.1 at 1 GiB against
 * 64 MiB's 1479.2 and 2880.4; each chunk costs the link a few us). Both
 * ends compute it from the size alone. */
static size_t cep_p2p_chunk(const struct p2pkit_comm *c, size_t bytes) {
  const size_t slot = c->lay.cep_slot, lo = (size_t)16 << 20;
  if (p2pk_param_size("P2PKIT_CE_CHUNK")) return cep_chunk_elems(c, bytes, 1, slot);
  size_t b = bytes / 2;
  b = b < lo ? lo : b;
  return p2pk_sce_chunk_elems(b < slot ? b : slot, 1);
}

/* All-to-all with a process per GPU, chunk by chunk (K, send/recv's
 * chunk for a block of B bytes): chunk k of my block t pushed into rank
 * t's landing slots (cep_pushes(), one chunk per call), then chunk k of each
 * peer's block for me taken and copied out of my slots into my output,
 * then chunk k of my own block copied across (out of place). In place my
 * output's block t is my input's block t, which my pushes to t read: each
 * chunk's copies out wait for my pushes of that chunk (the event cep_pushes()
 * recorded after them), so no byte is overwritten before it left. Both
 * ranks take this path whatever their placement, so they always agree;
 * from 256 MiB per peer by default (select.c's thresholds).
 * My own block (out of place) is copied on the RECV stream beside it all,
 * by a quarter of the SMs (own_copy): copied on the caller's stream chunk
 * by chunk, between the copies out, with the full grid, it slowed the
 * pushes (512 MiB 851 us against the kernel's 811).
 * Out of place, a block whose receiver registered its output goes
 * straight in, as a send/recv does (the pair's calls are numbered and
 * decided with send/recv's, on both ends whatever their placement; in
 * place a rank describes "no" and sends through the slots, so its copies
 * out keep waiting for its own pushes).
 * All-gather (gather 1) is the same exchange with my one block (count
 * elements at send) pushed to every peer and landing at my place in theirs
 * (out + me x B). Nothing I push is ever overwritten here: in place my
 * block already sits at my place, which no peer writes, so the copies out
 * never wait for my pushes and registered outputs go straight in, in place
 * too. Its threshold: select.c's, process per GPU. */
/* Straight in: describe my output's blocks, decide my sends, hear my
 * receives (send/recv's order). sdst[t]: my block t straight into t's
 * output, or NULL; sin[r]: r's block straight into my output. */
static void a2a_agree(struct p2pkit_comm *c, char *out, size_t B, int overlap, int *sin,
                      char **sdst) {
  const int n = c->nranks, me = c->rank;
  dmb_op rv[P2PK_COLL_MAX_RANKS], sd[P2PK_COLL_MAX_RANKS];
  int rin[P2PK_COLL_MAX_RANKS], m = 0;
  char *dst[P2PK_COLL_MAX_RANKS];
  for (int p = 0; p < n; p++)
    if (p != me) {
      rv[m] = (dmb_op){p, out + (size_t)p * B, B};
      sd[m++] = (dmb_op){p, NULL, B};
    }
  dmb_agree(c, rv, m, sd, m, !overlap, rin, dst);
  m = 0;
  for (int p = 0; p < n; p++) {
    sin[p] = p != me ? rin[m] : 0;
    sdst[p] = p != me ? dst[m++] : NULL;
  }
}

/* Chunk k of the exchange: my blocks' chunk k pushed to the peers not
 * straight in, then each such peer's chunk k for me taken and copied out
 * (in place, after my pushes of it). */
static cudaError_t a2a_chunk(struct p2pkit_comm *c, cep_batch_t *bs, const char *in, char *out,
                             size_t B, size_t K, size_t k, int gather, int overlap,
                             const int *sin, char *const *sdst, uint64_t hv, cudaStream_t stream) {
  const int n = c->nranks, me = c->rank;
  const uint64_t D = c->lay.cep_depth;
  const size_t len = p2pk_ce_part(B, k, K), at = k * K;
  cep_push pu[P2PK_COLL_MAX_RANKS];
  int np = 0;
  for (int t = 0; t < n; t++)
    if (t != me && !sdst[t]) pu[np++] = (cep_push){t, in + (gather ? 0 : (size_t)t * B) + at, len};
  cudaError_t e = cudaSuccess;
  if (np) e = cep_pushes(c, pu, np, K, 1, hv, 1, 1);
  for (int i = 0; i < np; i++) CEP(c)->sent[pu[i].peer]++;
  if (e == cudaSuccess && overlap) e = cudaStreamWaitEvent(stream, c->ce->step_ev[V_CP][0], 0);
  for (int r = 0; r < n && e == cudaSuccess; r++) {
    if (r == me || sin[r]) continue;
    const int s = (int)(CEP(c)->recvd[r] % D);
    cep_take(bs, &CTRL(me)->cep_full[r][s], &CTRL(me)->cep_hdr[r][s], hv, r);
    e = cep_flush(bs);
    cep_tr_mark(c, stream, "took", (long)k);
    if (e == cudaSuccess)
      e = cep_copy_out(c, P2PKIT_UINT8, cep_land(c, r, me, s), out + (size_t)r * B + at, len, stream);
    cep_tr_mark(c, stream, "out", (long)k);
    cep_release(c, bs, r, s);
    CEP(c)->recvd[r]++;
  }
  return e;
}

static cudaError_t cep_a2a(struct p2pkit_comm *c, const void *send, void *recv, size_t count,
                          p2pkit_dtype_t dtype, cudaStream_t stream, int gather) {
  const int n = c->nranks, me = c->rank;
  const size_t B = count * p2pkit_dtype_size(dtype), K = cep_p2p_chunk(c, B), nch = cep_nchunks(B, K);
  const char *in = send;
  char *out = recv;
  /* My block for t (all-gather: the same for every t). */
#define BLOCK_FOR(t) (in + (gather ? 0 : (size_t)(t) * B))
  const int in_place = (const char *)BLOCK_FOR(me) == out + (size_t)me * B;
  /* All-to-all in place: my pushes read what my copies out overwrite. */
  const int overlap = !gather && in_place;
  const int kind = gather ? P2PK_COLL_ALL_GATHER : P2PK_COLL_ALL_TO_ALL;
  const uint64_t hv = cep_header(kind, count, dtype, 0, 0);
  char *sdst[P2PK_COLL_MAX_RANKS] = {0};
  int sin[P2PK_COLL_MAX_RANKS] = {0}, any = 0;
  a2a_agree(c, out, B, overlap, sin, sdst);
  cudaError_t e = cep_start(c, stream, 1, 1, 0);
  cudaStream_t R = c->ce->step[S_RECV];
  if (e == cudaSuccess && !in_place) e = cudaStreamWaitEvent(R, c->ce->sev[E_START], 0);
  if (e == cudaSuccess && !in_place)
    e = cep_own_copy(c, P2PKIT_UINT8, BLOCK_FOR(me), out + (size_t)me * B, B, R);
  if (e == cudaSuccess && !in_place) e = cudaEventRecord(c->ce->sev[E_RECV], R);
  cep_batch_t bs;
  cep_batch(&bs, c, stream);
  /* Blocks straight in: my output's block r is free from here on; my
   * blocks for such peers go first, whole. */
  for (int r = 0; r < n; r++)
    if (sin[r]) cep_add(&bs, P2PK_CEP_POST, &CTRL(r)->cep_rdy[me], 1, NULL, 0, r);
  if (e == cudaSuccess) e = cep_flush(&bs);
  for (int t = 0; t < n && e == cudaSuccess; t++)
    if (sdst[t]) {
      e = push_straight(c, t, BLOCK_FOR(t), sdst[t], B, hv);
      CEP(c)->sent[t] += nch;
      any = 1;
    }
  for (size_t k = 0; k < nch && e == cudaSuccess; k++)
    e = a2a_chunk(c, &bs, in, out, B, K, k, gather, overlap, sin, sdst, hv, stream);
  for (int r = 0; r < n && e == cudaSuccess; r++)
    if (sin[r]) e = take_straight(c, &bs, r, hv, nch), any = 1;
  if (e == cudaSuccess) e = cep_flush(&bs);
  if (e == cudaSuccess) e = cep_join_side(c, stream, 1);
  if (e == cudaSuccess && !in_place) e = cudaStreamWaitEvent(stream, c->ce->sev[E_RECV], 0);
  if (e == cudaSuccess) cep_log_once(c, kind, p2pk_coll_name(kind), B, K, any);
  return e;
#undef BLOCK_FOR
}

/* One communicator's sends and receives of a call, sorted: sends through
 * the slots (pu; straight[i]: its receiver's buffer when it goes straight
 * in), sends straight into the other end's buffer (dpu into dst: one
 * process under capture), receives straight in (sin[i] for ops[i]). */
typedef struct {
  cep_push pu[P2PK_P2P_MAX_OPS], dpu[P2PK_P2P_MAX_OPS];
  char *dst[P2PK_P2P_MAX_OPS], *straight[P2PK_P2P_MAX_OPS];
  int sin[P2PK_P2P_MAX_OPS];
  int np, nd, direct;
} p2p_sort_t;

/* Process per GPU: every receive describes itself first (never waiting
 * for that), then the sends decide, then the receives hear (a rank's
 * sends never wait for its own receives). */
static void p2p_sort(struct p2pkit_comm *c, const p2pk_cep_xfer *ops, int nops, p2p_sort_t *x) {
  dmb_op rv[P2PK_P2P_MAX_OPS], sd[P2PK_P2P_MAX_OPS];
  int at[P2PK_P2P_MAX_OPS], rin[P2PK_P2P_MAX_OPS], nr = 0;
  x->np = x->nd = x->direct = 0;
  for (int i = 0; i < nops; i++) {
    x->sin[i] = 0;
    if (ops[i].peer_buf) x->direct = 1;
    if (ops[i].peer_buf) {
      if (ops[i].send)
        x->dst[x->nd] = ops[i].peer_buf, x->dpu[x->nd++] = (cep_push){ops[i].peer, ops[i].buf, ops[i].bytes};
    } else if (ops[i].send) {
      sd[x->np] = (dmb_op){ops[i].peer, ops[i].buf, ops[i].bytes};
      x->pu[x->np++] = (cep_push){ops[i].peer, ops[i].buf, ops[i].bytes};
    } else {
      at[nr] = i;
      rv[nr++] = (dmb_op){ops[i].peer, ops[i].buf, ops[i].bytes};
    }
  }
  dmb_agree(c, rv, nr, sd, x->np, 1, rin, x->straight);
  for (int k = 0; k < nr; k++) x->sin[at[k]] = rin[k];
}

/* One receive: straight in, or through the slots chunk by chunk, each
 * copied out. Chunks of bytes (es 1, 16-byte multiples) from the size
 * alone, so both ends agree; the header carries the size. */
static cudaError_t p2p_receive(struct p2pkit_comm *c, cep_batch_t *bs, const p2pk_cep_xfer *o,
                               int straight, cudaStream_t stream) {
  const int me = c->rank, r = o->peer;
  const uint64_t D = c->lay.cep_depth;
  const size_t K = cep_p2p_chunk(c, o->bytes), nch = cep_nchunks(o->bytes, K);
  const uint64_t hv = cep_header(P2PK_SENDRECV, o->bytes, 0, 0, r);
  if (straight) {
    cudaError_t e = take_straight(c, bs, r, hv, nch);
    cep_tr_mark(c, stream, "took", 0);
    return e;
  }
  cudaError_t e = cudaSuccess;
  for (size_t k = 0; k < nch && e == cudaSuccess; k++) {
    const int s = (int)((CEP(c)->recvd[r] + k) % D);
    cep_take(bs, &CTRL(me)->cep_full[r][s], &CTRL(me)->cep_hdr[r][s], hv, r);
    e = cep_flush(bs);
    cep_tr_mark(c, stream, "took", (long)k);
    if (e == cudaSuccess)
      e = cep_copy_out(c, P2PKIT_UINT8, cep_land(c, r, me, s), o->buf + k * K,
                       p2pk_ce_part(o->bytes, k, K), stream);
    cep_tr_mark(c, stream, "out", (long)k);
    cep_release(c, bs, r, s);
  }
  if (e == cudaSuccess) e = cep_flush(bs);
  CEP(c)->recvd[r] += nch;
  return e;
}

/* The sends: straight in or through the slots, then those into the other
 * end's buffer. */
static cudaError_t p2p_send(struct p2pkit_comm *c, p2p_sort_t *x) {
  const int me = c->rank;
  cudaError_t e = cudaSuccess;
  for (int i = 0; i < x->np && e == cudaSuccess; i++) {
    const cep_push *p = &x->pu[i];
    const size_t K = cep_p2p_chunk(c, p->len);
    const uint64_t hv = cep_header(P2PK_SENDRECV, p->len, 0, 0, me);
    if (x->straight[i]) {
      e = push_straight(c, p->peer, p->src, x->straight[i], p->len, hv);
      x->direct = 1;
    } else {
      e = cep_pushes(c, p, 1, K, 1, hv, 1, 1);
    }
    CEP(c)->sent[p->peer] += cep_nchunks(p->len, K);
  }
  if (e == cudaSuccess && x->nd) e = cep_direct_pushes(c, x->dpu, x->dst, x->nd);
  return e;
}

cudaError_t p2pk_cep_p2p(struct p2pkit_comm *c, const p2pk_cep_xfer *ops, int nops,
                         cudaStream_t stream) {
  cudaError_t ce = cep_note_capture(c, stream);
  if (ce != cudaSuccess) return ce;
  const int me = c->rank;
  cep_tr_begin(c, stream, "send/recv");
  p2p_sort_t x;
  p2p_sort(c, ops, nops, &x);
  cudaError_t e = cep_start(c, stream, x.np + x.nd > 0, 1, 0);
  cep_batch_t bs;
  cep_batch(&bs, c, stream);
  /* Receives straight in: my buffer is free from here on. */
  for (int i = 0; i < nops; i++)
    if (!ops[i].send && (ops[i].peer_buf || x.sin[i]))
      cep_add(&bs, P2PK_CEP_POST, &CTRL(ops[i].peer)->cep_rdy[me], 1, NULL, 0, ops[i].peer);
  if (e == cudaSuccess) e = cep_flush(&bs);
  if (e == cudaSuccess) e = p2p_send(c, &x);
  for (int i = 0; i < nops && e == cudaSuccess; i++)
    if (!ops[i].send && !ops[i].peer_buf) e = p2p_receive(c, &bs, &ops[i], x.sin[i], stream);
  /* One process under capture, straight in: the sender's push landed. */
  for (int i = 0; i < nops; i++)
    if (!ops[i].send && ops[i].peer_buf) cep_take(&bs, &CTRL(me)->cep_fin[ops[i].peer], NULL, 0, ops[i].peer);
  if (e == cudaSuccess) e = cep_flush(&bs);
  if (e == cudaSuccess && x.np + x.nd) e = cep_join_side(c, stream, 1);
  cep_tr_end(c, stream);
  if (e == cudaSuccess) {
    size_t b = 0;
    for (int i = 0; i < nops; i++) b = ops[i].bytes > b ? ops[i].bytes : b;
    cep_log_once(c, P2PK_SENDRECV, "send/recv", b, cep_p2p_chunk(c, b), x.direct);
  }
  return e;
}

/* One rank's collective, its GPU current. */
static p2pkit_status_t launch(const p2pk_call *call) {
  struct p2pkit_comm *c = call->c;
  const int kind = call->kind, root = call->root;
  const void *send = call->send;
  void *recv = call->recv;
  const size_t count = call->count;
  const p2pkit_dtype_t dtype = call->dtype;
  const p2pkit_redop_t op = call->op;
  cudaStream_t stream = (cudaStream_t)call->stream;
  c->ce->cap = call->grid_cap;
  cudaError_t e = call->capture < 0 ? cep_note_capture(c, stream) : cudaSuccess;
  if (call->capture >= 0) CEP(c)->cap = call->capture != 0;
  if (e != cudaSuccess) return p2pk_cuda_status(c, p2pk_call_name(call), e);
  cep_tr_begin(c, stream, p2pk_coll_name(kind));
  e = kind == P2PK_COLL_ALL_REDUCE ? cep_allreduce(c, send, recv, count, dtype, op, stream, NULL)
      : kind == P2PK_COLL_ALL_TO_ALL || kind == P2PK_COLL_ALL_GATHER
          ? cep_a2a(c, send, recv, count, dtype, stream, kind == P2PK_COLL_ALL_GATHER)
          : cep_rooted(c, kind, send, recv, count, dtype, op, root, stream);
  cep_tr_end(c, stream);
  return p2pk_cuda_status(c, p2pk_call_name(call), e);
}

/* One communicator's sends and receives through the slots (process per
 * GPU) or straight into the other end's buffer (one process under
 * capture: path_ce_direct.c), its GPU current. */
p2pkit_status_t p2pk_cep_sendrecv(struct p2pkit_comm *c, const p2pk_call *ops, int n) {
  p2pk_cep_xfer xf[P2PK_P2P_MAX_OPS];
  int nx = 0;
  for (int i = 0; i < n && nx < P2PK_P2P_MAX_OPS; i++)
    xf[nx++] = (p2pk_cep_xfer){ops[i].is_send, ops[i].root,
                               ops[i].is_send ? (char *)ops[i].send : (char *)ops[i].recv,
                               ops[i].bytes, ops[i].peer_buf};
  c->ce->cap = 0;
  return p2pk_cuda_status(c, "send/recv", p2pk_cep_p2p(c, xf, nx, (cudaStream_t)ops[0].stream));
}

p2pk_straight *p2pk_cep_straight(struct p2pkit_comm *c) { return CEP(c) ? SI(c) : NULL; }

/* Over P2P the scratch ends with landing slots when any of their
 * thresholds is on (every rank the same settings). */
static void scratch(const struct p2pkit_comm *c, p2pk_layout *lay) {
  const int cep = p2pk_sel_wants_slots(&c->sel);
  const int depth = cep ? p2pk_cep_depth() : 0;
  p2pk_layout_add_cep(lay, c->nranks, depth, p2pk_cep_slot_bytes(c->nranks, depth, cep));
}

/* The state; the streams and events now when the slots exist (a call
 * being captured must not create them); the settings read once: a later
 * change of the forced settings keeps them (re-reading them there would
 * undo a wait a caller had set). */
static p2pkit_status_t init(struct p2pkit_comm *c) {
  p2pk_cep *s = calloc(1, sizeof *s);
  if (!s) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "rank %d: out of memory", c->rank);
  c->path_state[P2PK_PATH_CE_SLOTS] = s;
  const size_t sr_slots = c->sel.from[P2PK_FROM_SLOTS][P2PK_SENDRECV];
  s->trace = c->lay.cep_slot && c->multiproc && p2pk_param_int("P2PKIT_CEP_TRACE") > 0;
  s->st.on = c->multiproc && sr_slots && p2pk_param_int("P2PKIT_SENDRECV_DIRECT") != 0;
  s->st.map = s->st.on && p2pk_param_int("P2PKIT_SENDRECV_MAP") > 0;
  /* A host wait for a peer, so within the communicator's timeout too. */
  int64_t w = p2pk_param_int("P2PKIT_SENDRECV_DIRECT_WAIT_US");
  s->st.wait_ns = w > 0 ? (uint64_t)w * 1000u : 0;
  if (s->st.wait_ns > c->timeout_ns) s->st.wait_ns = c->timeout_ns;
  if (c->lay.cep_slot) P2PK_CUDA_CHECK(p2pk_ce_prepare_steps(c, (int)c->lay.cep_depth));
  return P2PKIT_SUCCESS;
}

/* What straight in did (logged at destroy), the last traced call's
 * timeline, the peers' allocations mapped on demand, the state. */
static void fini(struct p2pkit_comm *c) {
  p2pk_cep *s = CEP(c);
  if (!s) return;
  if (s->trace) p2pk_cep_trace_flush(c);
  const p2pk_straight *t = &s->st;
  if (t->direct || t->rhow[1] || t->missed)
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): send/recv over the copy engines: %llu sends "
              "straight in (%llu into buffers mapped on demand, %d peer allocations mapped), %llu "
              "through the slots; %llu receives into registered (or shared) buffers straight "
              "in, %llu through the slots; host waits for peers: %.3f ms in all, the longest "
              "%.3f ms, %llu in vain; sends through the slots as not asked %llu, late %llu, "
              "overwritten %llu, not registered %llu, sizes differ %llu, not mapped %llu, the "
              "receiver chose first %llu", c->rank, c->device, (unsigned long long)t->direct,
              (unsigned long long)t->mapped, p2pk_map_count(c), (unsigned long long)t->slots,
              (unsigned long long)t->rhow[1], (unsigned long long)t->rhow[0],
              t->wait_ns_sum / 1e6, t->wait_max_ns / 1e6, (unsigned long long)t->missed,
              (unsigned long long)t->why[0], (unsigned long long)t->why[1],
              (unsigned long long)t->why[2], (unsigned long long)t->why[3],
              (unsigned long long)t->why[4], (unsigned long long)t->why[5],
              (unsigned long long)t->why[6]);
  p2pk_map_free(c);
  for (int i = 0; i < P2PK_CEP_TRACE_MAX; i++)
    if (s->tr_ev[i]) cudaEventDestroy(s->tr_ev[i]);
  free(s);
  c->path_state[P2PK_PATH_CE_SLOTS] = NULL;
}

const p2pk_path p2pk_path_ce_slots = {
    .name = "ce-slots",
    .id = P2PK_PATH_CE_SLOTS,
    .kinds = (1u << P2PK_KINDS) - 1,
    .modes = P2PK_MODE_ONE | P2PK_MODE_PER_GPU,
    .transports = P2PK_XPORT_P2P,
    .scratch = scratch,
    .init = init,
    .fini = fini,
    .launch = launch,
    .sendrecv = p2pk_cep_sendrecv,
    .on_error = p2pk_cep_log_flags,
};
