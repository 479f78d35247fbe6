/* SPDX-License-Identifier: BSD-3-Clause */
/* The landing slots' collectives (cep.h; the design is at the head of
 * path_ce_slots.c): the all-reduce, reduce-scatter, reduce and broadcast,
 * all-to-all and all-gather, a communicator's sends and receives, which the
 * two paths on the slots (ce-slots, ce-direct) run. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll/paths/ce/cep.h"
#include "core/check.h"
#include "core/log.h"
#include "core/param.h"

/* One all-reduce through the slots (p2pk_cep_allreduce): the call, its shards
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
  x->K = p2pk_cep_chunk_elems(c, most * x->es, x->es, x->pout ? c->lay.cep_slot : x->half);
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
    p2pk_cep_take(&x->bs, &CTRL(me)->cep_full[r][SLOT_IN(r)], &CTRL(me)->cep_hdr[r][SLOT_IN(r)], x->hv, r);
    src[r] = p2pk_cep_land(c, r, me, SLOT_IN(r));
  }
  cudaError_t e = p2pk_cep_flush(&x->bs);
  p2pk_cep_tr_mark(c, x->stream, "took", (long)k);
  const size_t lb = p2pk_ce_part(x->slen[me], k, K) * es;
  char *out = (char *)x->recv + (x->soff[me] + k * K) * es;
  if (e == cudaSuccess) e = p2pk_ce_reduce_chunk(c, x->dtype, x->op, src, out, lb, x->stream);
  p2pk_cep_tr_mark(c, x->stream, "out", (long)k);
  if (e == cudaSuccess) e = cudaEventRecord(c->ce->step_ev[V_RED][ek], x->stream);
  for (int r = 0; r < n; r++)
    if (r != me && x->pout) p2pk_cep_release(c, &x->bs, r, SLOT_IN(r));
    else if (r != me) p2pk_cep_add(&x->bs, P2PK_CEP_POST, &CTRL(r)->cep_busy[me][SLOT_IN(r)], 0, NULL, 0, r);
  for (int t = 0; t < n; t++)
    if (t != me && !x->pout) p2pk_cep_claim(&x->bw, &CTRL(me)->cep_rbusy[t][SLOT_OUT(t)], t);
    else if (t != me && k == 0) p2pk_cep_take(&x->bw, &CTRL(me)->cep_rdy[t], NULL, 0, t);
  if (e == cudaSuccess) e = p2pk_cep_flush(&x->bw);
  if (e == cudaSuccess) e = cudaEventRecord(c->ce->step_ev[V_GCR][ek], x->bw.s);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(x->g, c->ce->step_ev[V_GCR][ek], 0);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(x->g, c->ce->step_ev[V_RED][ek], 0);
  p2pk_cep_tr_mark(c, x->g, "gpush", (long)k);
  for (int t = 0; t < n && e == cudaSuccess; t++)
    if (t != me && lb)
      e = cudaMemcpyAsync(x->pout ? x->pout[t] + (x->soff[me] + k * K) * es
                                  : p2pk_cep_land(c, me, t, SLOT_OUT(t)) + x->half,
                          out, lb, cudaMemcpyDefault, x->g);
  p2pk_cep_tr_mark(c, x->g, "gpushed", (long)k);
  /* The posts only after P2 waits for the copies. */
  if (e == cudaSuccess) e = cudaEventRecord(c->ce->step_ev[V_GCP][ek], x->g);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(x->bp.s, c->ce->step_ev[V_GCP][ek], 0);
  for (int t = 0; t < n; t++)
    if (t != me && !x->pout) p2pk_cep_add(&x->bp, P2PK_CEP_POST, &CTRL(t)->cep_done[me][SLOT_OUT(t)], 1, NULL, 0, t);
    else if (t != me && k + 1 == x->mine) p2pk_cep_add(&x->bp, P2PK_CEP_POST, &CTRL(t)->cep_fin[me], 1, NULL, 0, t);
  if (e == cudaSuccess) e = p2pk_cep_flush(&x->bp);
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
    p2pk_cep_take(&x->br, &CTRL(me)->cep_done[t][SLOT_IN(t)], NULL, 0, t);
    e = p2pk_cep_flush(&x->br);
    if (e == cudaSuccess)
      e = p2pk_cep_copy_out(c, x->dtype, p2pk_cep_land(c, t, me, SLOT_IN(t)) + x->half,
                       (char *)x->recv + (x->soff[t] + k * K) * es, p2pk_ce_part(x->slen[t], k, K) * es,
                       x->R);
    p2pk_cep_tr_mark(c, x->R, "rout", (long)k);
    p2pk_cep_add(&x->br, P2PK_CEP_POST, &CTRL(t)->cep_rbusy[me][SLOT_IN(t)], 0, NULL, 0, t);
  }
  return e;
}

#undef SLOT_IN
#undef SLOT_OUT

/* The end: direct, every owner's results landed in my output; my stream
 * waits for the copies out, the gather copies and their posts (kernels:
 * p2pk_cep_join_side says why), and the pushes. */
static cudaError_t car_end(car_t *x, int np, cudaError_t e) {
  struct p2pkit_comm *c = x->c;
  const int n = x->n, me = x->me;
  cudaStream_t stream = x->stream;
  for (int t = 0; t < n && x->pout; t++)
    if (t != me && x->slen[t]) p2pk_cep_take(&x->bs, &CTRL(me)->cep_fin[t], NULL, 0, t);
  if (e == cudaSuccess) e = p2pk_cep_flush(&x->bs);
  if (e == cudaSuccess) e = p2pk_cep_flush(&x->br);
  if (e == cudaSuccess) e = cudaEventRecord(c->ce->sev[E_RECV], x->R);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(stream, c->ce->sev[E_RECV], 0);
  if (e == cudaSuccess && x->mine) e = cudaEventRecord(c->ce->sev[E_GATHER], x->g);
  if (e == cudaSuccess && x->mine) e = cudaStreamWaitEvent(stream, c->ce->sev[E_GATHER], 0);
  if (e == cudaSuccess && x->mine) e = cudaEventRecord(c->ce->sev[E_POST2], x->bp.s);
  if (e == cudaSuccess && x->mine) e = cudaStreamWaitEvent(stream, c->ce->sev[E_POST2], 0);
  if (e == cudaSuccess && np) e = p2pk_cep_join_side(c, stream, 0);
  return e;
}

/* All-reduce (the file's head has the picture). pout: NULL, or every
 * rank's output (one process under capture): the results go straight into
 * the peers' outputs ("direct": rdy/fin flags, no second halves, no copies
 * out). */
cudaError_t p2pk_cep_allreduce(struct p2pkit_comm *c, const void *send, void *recv, size_t count,
                          p2pkit_dtype_t dtype, p2pkit_redop_t op, cudaStream_t stream,
                          char *const *pout) {
  car_t x = {.c = c, .send = send, .recv = recv, .dtype = dtype, .op = op, .stream = stream,
             .pout = pout, .n = c->nranks, .me = c->rank, .D = c->lay.cep_depth,
             .es = p2pkit_dtype_size(dtype), .half = c->lay.cep_slot / 2};
  cep_push pu[P2PK_COLL_MAX_RANKS];
  const int np = car_plan(&x, count, pu);
  cudaError_t e = p2pk_cep_start(c, stream, np > 0, pout != NULL, x.mine > 0);
  p2pk_cep_batch(&x.bs, c, stream);
  /* Direct: my output is free from here on (my stream stands at the call):
   * every owner of a shard may write its results into it. */
  for (int t = 0; t < x.n && pout; t++)
    if (t != x.me && x.slen[t]) p2pk_cep_add(&x.bs, P2PK_CEP_POST, &CTRL(t)->cep_rdy[x.me], 1, NULL, 0, t);
  /* The all-reduce's posts stay kernels (2x H200: with memory operations
   * 512 MiB took 1514-1544 us from one measurement to the next, with
   * kernels 1482-1485). */
  if (e == cudaSuccess && np) e = p2pk_cep_pushes(c, pu, np, x.K, x.es, x.hv, pout != NULL, 0);
  x.g = c->ce->h2d;
  x.R = c->ce->step[S_RECV];
  /* The results' copies out write this rank's output. */
  if (e == cudaSuccess) e = cudaStreamWaitEvent(x.R, c->ce->sev[E_START], 0);
  p2pk_cep_batch(&x.bw, c, c->ce->step[S_WAIT2]);
  p2pk_cep_batch(&x.bp, c, c->ce->step[S_POST2]);
  p2pk_cep_batch(&x.br, c, x.R);
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
  if (e == cudaSuccess) p2pk_cep_log_once(c, P2PK_COLL_ALL_REDUCE, "all_reduce", count * x.es, x.K * x.es, pout != NULL);
  return e;
}

/* Reduce-scatter, reduce and broadcast (the file's head has the picture). */
cudaError_t p2pk_cep_rooted(struct p2pkit_comm *c, int kind, const void *send, void *recv,
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
  const size_t K = p2pk_cep_chunk_elems(c, most * es, es, cap), CB = K * es;
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
  cudaError_t e = p2pk_cep_start(c, stream, np > 0, 1, 0);
  if (e == cudaSuccess && np) e = p2pk_cep_pushes(c, pu, np, K, es, hv, 1, 1);
  /* The broadcast root's own copy, beside its pushes: a kernel, not a copy
   * engine, which would slow the pushes (1 GiB out of place 3365 us
   * against 2937 in place); own_copy says how wide. */
  if (e == cudaSuccess && bcast && me == root && send != recv)
    e = p2pk_cep_own_copy(c, dtype, send, recv, count * es, stream);
  /* My shard: take every source's chunk, reduce (or copy it out), release. */
  const size_t mine = cep_nchunks(slen[me], K);
  cep_batch_t bs;
  p2pk_cep_batch(&bs, c, stream);
  for (size_t k = 0; k < mine && e == cudaSuccess; k++) {
    int sl[P2PK_COLL_MAX_RANKS];
    for (int i = 0; i < nsrc; i++) {
      const int r = srcs[i];
      sl[r] = (int)((CEP(c)->recvd[r] + k) % D);
      p2pk_cep_take(&bs, &CTRL(me)->cep_full[r][sl[r]], &CTRL(me)->cep_hdr[r][sl[r]], hv, r);
    }
    e = p2pk_cep_flush(&bs);
    p2pk_cep_tr_mark(c, stream, "took", (long)k);
    const size_t lb = p2pk_ce_part(slen[me], k, K) * es;
    if (bcast) {
      if (e == cudaSuccess)
        e = p2pk_cep_copy_out(c, dtype, p2pk_cep_land(c, root, me, sl[root]), (char *)recv + k * CB, lb, stream);
    } else {
      const char *src[P2PK_COLL_MAX_RANKS];
      for (int r = 0; r < n; r++)
        src[r] = r == me ? (const char *)send + (soff[me] + k * K) * es : p2pk_cep_land(c, r, me, sl[r]);
      if (e == cudaSuccess && lb)
        e = p2pk_ce_reduce_chunk(c, dtype, op, src, (char *)recv + k * CB, lb, stream);
    }
    p2pk_cep_tr_mark(c, stream, "out", (long)k);
    for (int i = 0; i < nsrc; i++) p2pk_cep_release(c, &bs, srcs[i], sl[srcs[i]]);
  }
  if (e == cudaSuccess) e = p2pk_cep_flush(&bs);
  for (int i = 0; i < nsrc; i++) CEP(c)->recvd[srcs[i]] += mine;
  for (int i = 0; i < np; i++) CEP(c)->sent[pu[i].peer] += cep_nchunks(pu[i].len, K);
  if (e == cudaSuccess && np) e = p2pk_cep_join_side(c, stream, 1);
  if (e == cudaSuccess) p2pk_cep_log_once(c, kind, p2pk_coll_name(kind), count * es, CB, 0);
  return e;
}

/* Send/recv's chunk for a message of `bytes`: P2PKIT_CE_CHUNK, else half
 * the message within 16 MiB and a whole slot (2x H200: 96 MiB chunks 1465.8 us at 512 MiB and 2869.1 at 1 GiB against
 * 64 MiB's 1479.2 and 2880.4; each chunk costs the link a few us). Both
 * ends compute it from the size alone. */
static size_t cep_p2p_chunk(const struct p2pkit_comm *c, size_t bytes) {
  const size_t slot = c->lay.cep_slot, lo = (size_t)16 << 20;
  if (p2pk_param_size("P2PKIT_CE_CHUNK")) return p2pk_cep_chunk_elems(c, bytes, 1, slot);
  size_t b = bytes / 2;
  b = b < lo ? lo : b;
  return p2pk_sce_chunk_elems(b < slot ? b : slot, 1);
}

/* All-to-all with a process per GPU, chunk by chunk (K, send/recv's
 * chunk for a block of B bytes): chunk k of my block t pushed into rank
 * t's landing slots (p2pk_cep_pushes(), one chunk per call), then chunk k of each
 * peer's block for me taken and copied out of my slots into my output,
 * then chunk k of my own block copied across (out of place). In place my
 * output's block t is my input's block t, which my pushes to t read: each
 * chunk's copies out wait for my pushes of that chunk (the event p2pk_cep_pushes()
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
  p2pk_dmb_agree(c, rv, m, sd, m, !overlap, rin, dst);
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
  if (np) e = p2pk_cep_pushes(c, pu, np, K, 1, hv, 1, 1);
  for (int i = 0; i < np; i++) CEP(c)->sent[pu[i].peer]++;
  if (e == cudaSuccess && overlap) e = cudaStreamWaitEvent(stream, c->ce->step_ev[V_CP][0], 0);
  for (int r = 0; r < n && e == cudaSuccess; r++) {
    if (r == me || sin[r]) continue;
    const int s = (int)(CEP(c)->recvd[r] % D);
    p2pk_cep_take(bs, &CTRL(me)->cep_full[r][s], &CTRL(me)->cep_hdr[r][s], hv, r);
    e = p2pk_cep_flush(bs);
    p2pk_cep_tr_mark(c, stream, "took", (long)k);
    if (e == cudaSuccess)
      e = p2pk_cep_copy_out(c, P2PKIT_UINT8, p2pk_cep_land(c, r, me, s), out + (size_t)r * B + at, len, stream);
    p2pk_cep_tr_mark(c, stream, "out", (long)k);
    p2pk_cep_release(c, bs, r, s);
    CEP(c)->recvd[r]++;
  }
  return e;
}

cudaError_t p2pk_cep_a2a(struct p2pkit_comm *c, const void *send, void *recv, size_t count,
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
  cudaError_t e = p2pk_cep_start(c, stream, 1, 1, 0);
  cudaStream_t R = c->ce->step[S_RECV];
  if (e == cudaSuccess && !in_place) e = cudaStreamWaitEvent(R, c->ce->sev[E_START], 0);
  if (e == cudaSuccess && !in_place)
    e = p2pk_cep_own_copy(c, P2PKIT_UINT8, BLOCK_FOR(me), out + (size_t)me * B, B, R);
  if (e == cudaSuccess && !in_place) e = cudaEventRecord(c->ce->sev[E_RECV], R);
  cep_batch_t bs;
  p2pk_cep_batch(&bs, c, stream);
  /* Blocks straight in: my output's block r is free from here on; my
   * blocks for such peers go first, whole. */
  for (int r = 0; r < n; r++)
    if (sin[r]) p2pk_cep_add(&bs, P2PK_CEP_POST, &CTRL(r)->cep_rdy[me], 1, NULL, 0, r);
  if (e == cudaSuccess) e = p2pk_cep_flush(&bs);
  for (int t = 0; t < n && e == cudaSuccess; t++)
    if (sdst[t]) {
      e = p2pk_cep_push_straight(c, t, BLOCK_FOR(t), sdst[t], B, hv);
      CEP(c)->sent[t] += nch;
      any = 1;
    }
  for (size_t k = 0; k < nch && e == cudaSuccess; k++)
    e = a2a_chunk(c, &bs, in, out, B, K, k, gather, overlap, sin, sdst, hv, stream);
  for (int r = 0; r < n && e == cudaSuccess; r++)
    if (sin[r]) e = p2pk_cep_take_straight(c, &bs, r, hv, nch), any = 1;
  if (e == cudaSuccess) e = p2pk_cep_flush(&bs);
  if (e == cudaSuccess) e = p2pk_cep_join_side(c, stream, 1);
  if (e == cudaSuccess && !in_place) e = cudaStreamWaitEvent(stream, c->ce->sev[E_RECV], 0);
  if (e == cudaSuccess) p2pk_cep_log_once(c, kind, p2pk_coll_name(kind), B, K, any);
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
  p2pk_dmb_agree(c, rv, nr, sd, x->np, 1, rin, x->straight);
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
    cudaError_t e = p2pk_cep_take_straight(c, bs, r, hv, nch);
    p2pk_cep_tr_mark(c, stream, "took", 0);
    return e;
  }
  cudaError_t e = cudaSuccess;
  for (size_t k = 0; k < nch && e == cudaSuccess; k++) {
    const int s = (int)((CEP(c)->recvd[r] + k) % D);
    p2pk_cep_take(bs, &CTRL(me)->cep_full[r][s], &CTRL(me)->cep_hdr[r][s], hv, r);
    e = p2pk_cep_flush(bs);
    p2pk_cep_tr_mark(c, stream, "took", (long)k);
    if (e == cudaSuccess)
      e = p2pk_cep_copy_out(c, P2PKIT_UINT8, p2pk_cep_land(c, r, me, s), o->buf + k * K,
                       p2pk_ce_part(o->bytes, k, K), stream);
    p2pk_cep_tr_mark(c, stream, "out", (long)k);
    p2pk_cep_release(c, bs, r, s);
  }
  if (e == cudaSuccess) e = p2pk_cep_flush(bs);
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
      e = p2pk_cep_push_straight(c, p->peer, p->src, x->straight[i], p->len, hv);
      x->direct = 1;
    } else {
      e = p2pk_cep_pushes(c, p, 1, K, 1, hv, 1, 1);
    }
    CEP(c)->sent[p->peer] += cep_nchunks(p->len, K);
  }
  if (e == cudaSuccess && x->nd) e = p2pk_cep_direct_pushes(c, x->dpu, x->dst, x->nd);
  return e;
}

cudaError_t p2pk_cep_p2p(struct p2pkit_comm *c, const p2pk_cep_xfer *ops, int nops,
                         cudaStream_t stream) {
  cudaError_t ce = p2pk_cep_note_capture(c, stream);
  if (ce != cudaSuccess) return ce;
  const int me = c->rank;
  p2pk_cep_tr_begin(c, stream, "send/recv");
  p2p_sort_t x;
  p2p_sort(c, ops, nops, &x);
  cudaError_t e = p2pk_cep_start(c, stream, x.np + x.nd > 0, 1, 0);
  cep_batch_t bs;
  p2pk_cep_batch(&bs, c, stream);
  /* Receives straight in: my buffer is free from here on. */
  for (int i = 0; i < nops; i++)
    if (!ops[i].send && (ops[i].peer_buf || x.sin[i]))
      p2pk_cep_add(&bs, P2PK_CEP_POST, &CTRL(ops[i].peer)->cep_rdy[me], 1, NULL, 0, ops[i].peer);
  if (e == cudaSuccess) e = p2pk_cep_flush(&bs);
  if (e == cudaSuccess) e = p2p_send(c, &x);
  for (int i = 0; i < nops && e == cudaSuccess; i++)
    if (!ops[i].send && !ops[i].peer_buf) e = p2p_receive(c, &bs, &ops[i], x.sin[i], stream);
  /* One process under capture, straight in: the sender's push landed. */
  for (int i = 0; i < nops; i++)
    if (!ops[i].send && ops[i].peer_buf) p2pk_cep_take(&bs, &CTRL(me)->cep_fin[ops[i].peer], NULL, 0, ops[i].peer);
  if (e == cudaSuccess) e = p2pk_cep_flush(&bs);
  if (e == cudaSuccess && x.np + x.nd) e = p2pk_cep_join_side(c, stream, 1);
  p2pk_cep_tr_end(c, stream);
  if (e == cudaSuccess) {
    size_t b = 0;
    for (int i = 0; i < nops; i++) b = ops[i].bytes > b ? ops[i].bytes : b;
    p2pk_cep_log_once(c, P2PK_SENDRECV, "send/recv", b, cep_p2p_chunk(c, b), x.direct);
  }
  return e;
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
  p2pk_cep_begin(c, -1, 0); /* its capture status told by its stream */
  return p2pk_cuda_status(c, "send/recv", p2pk_cep_p2p(c, xf, nx, (cudaStream_t)ops[0].stream));
}

p2pk_straight *p2pk_cep_straight(struct p2pkit_comm *c) { return CEP(c) ? SI(c) : NULL; }

