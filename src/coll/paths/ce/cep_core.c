/* SPDX-License-Identifier: BSD-3-Clause */
/* The landing slots' engine (cep.h; the design is at the head of
 * path_ce_slots.c): the slots' size and place, the one-thread step lists
 * (batches) and the flags' claims and takes, the pushes into the peers'
 * slots, the start and end of a call (which streams wait for which), the
 * local copies out, a traced call's timeline, the flags after a failure,
 * and the engine's state opened, begun per call and closed. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll/paths/ce/cep.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/param.h"

int p2pk_cep_depth(void) {
  /* Two (2x H200): with 96 MiB slots a 1 GiB
   * all-reduce took 2900 us (48 MiB chunks, a slot's halves) against 2945
   * with three 64 MiB slots, a broadcast 2759 against 2772, send/recv 2872
   * against 2875; four 48 MiB slots 2993. */
  return p2pk_param_is_set("P2PKIT_CE_DEPTH") ? p2pk_ce_depth() : 2;
}

size_t p2pk_cep_slot_bytes(int n, int depth, int any) {
  if (!any || n < 2 || depth <= 0) return 0;
  size_t slots = (size_t)(n - 1) * (size_t)depth;
  /* P2PKIT_CE_CHUNK, else as large as the slots' cap allows. */
  size_t b = p2pk_param_size("P2PKIT_CE_CHUNK");
  const size_t land = p2pk_ce_land_max();
  if (!b || b > land / slots) b = land / slots;
  if (b < 4096) b = 4096;
  return (b + 4095) & ~(size_t)4095;
}

/* Rank dst's landing slot s for chunks from src, as this process maps it. */
char *p2pk_cep_land(const struct p2pkit_comm *c, int src, int dst, int s) {
  const int n = c->nranks;
  return c->peer[dst] + c->lay.cep_off +
         ((uint64_t)((src - dst - 1 + n) % n) * c->lay.cep_depth + (uint64_t)s) * c->lay.cep_slot;
}

void p2pk_cep_batch(cep_batch_t *b, struct p2pkit_comm *c, cudaStream_t s) {
  b->st.n = 0;
  b->c = c;
  b->s = s;
  b->e = cudaSuccess;
  b->added = 0;
  /* No memory operations inside a capture: they can be captured, but such
   * graphs ran far slower (2x H200, process per GPU: 1 GiB broadcast
   * 3141 us against 2789 with one-thread kernels). */
  b->memops = !CEP(c)->cap;
}

/* Launch the steps gathered so far (none: nothing); the first error sticks. */
cudaError_t p2pk_cep_flush(cep_batch_t *b) {
  if (b->st.n && b->e == cudaSuccess) b->e = p2pk_cep_run(b->c, &b->st, b->memops, b->s);
  b->st.n = 0;
  return b->e;
}

void p2pk_cep_add(cep_batch_t *b, int kind, uint64_t *ctr, uint64_t v, uint64_t *hdr, uint64_t hv, int peer) {
  if (b->st.n == P2PK_CEP_STEPS) p2pk_cep_flush(b);
  b->st.s[b->st.n++] = (p2pk_cep_step){.ctr = ctr, .hdr = hdr, .v = v, .hv = hv, .kind = kind, .peer = peer};
  b->added++;
}

/* Were steps added since the last call? */
int p2pk_cep_taken(cep_batch_t *b) {
  int a = b->added;
  b->added = 0;
  return a;
}

/* P2PKIT_CEP_TRACE: a timing event on stream `s` marking `what` (a label
 * and a chunk number, or -1 for none), while a traced call is being
 * enqueued and events are left. */
void p2pk_cep_tr_mark(struct p2pkit_comm *c, cudaStream_t s, const char *what, long k) {
  if (!CEP(c)->tr_on || CEP(c)->tr_n >= P2PK_CEP_TRACE_MAX) return;
  cudaEvent_t *ev = &CEP(c)->tr_ev[CEP(c)->tr_n];
  if (!*ev && cudaEventCreate(ev) != cudaSuccess) {
    *ev = NULL;
    cudaGetLastError();
    return;
  }
  if (cudaEventRecord(*ev, s) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  if (k >= 0) snprintf(CEP(c)->tr_what[CEP(c)->tr_n], sizeof CEP(c)->tr_what[0], "%s%ld", what, k);
  else snprintf(CEP(c)->tr_what[CEP(c)->tr_n], sizeof CEP(c)->tr_what[0], "%s", what);
  CEP(c)->tr_n++;
}

void p2pk_cep_trace_flush(struct p2pkit_comm *c) {
  const int n = CEP(c)->tr_n;
  CEP(c)->tr_n = 0;
  if (n < 2) return;
  char line[2048];
  size_t at = 0;
  for (int i = 1; i < n && at < sizeof line - 32; i++) {
    float ms = -1;
    if (cudaEventSynchronize(CEP(c)->tr_ev[i]) != cudaSuccess ||
        cudaEventElapsedTime(&ms, CEP(c)->tr_ev[0], CEP(c)->tr_ev[i]) != cudaSuccess) {
      cudaGetLastError();
      ms = -1;
    }
    at += (size_t)snprintf(line + at, sizeof line - at, " %s %.1f", CEP(c)->tr_what[i], ms * 1e3);
  }
  P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): %s call %llu over the copy engines, us after its "
            "start (pushK / pushedK: chunk K's copy starts / has landed; tookK: the owner saw every "
            "peer's chunk K; outK: copied out or reduced; gpushK / gpushedK: the all-reduce's "
            "result K pushed; routK: a peer's result K copied out):%s", c->rank, c->device,
            CEP(c)->tr_name, (unsigned long long)CEP(c)->tr_calls, line);
}

/* After a wait gave up (p2pk_comm_async_status): the copy-engine flags
 * still set in this rank's scratch, as flag[peer][slot], and the pairs'
 * slot turns, in one WARN line, so every rank's log shows its side of a
 * deadlock (a wait's own report names one word). Read into pinned memory
 * through a stream of its own (the call's streams may still be draining),
 * given up after 2 s (or the communicator's timeout, when shorter). */
void p2pk_cep_log_flags(struct p2pkit_comm *c) {
  if (!c->lay.cep_slot || !c->peer[c->rank]) return;
  enum { NF = 5 };
  static const char *const name[NF] = {"full", "hdr", "busy", "done", "rbusy"};
  const size_t off = offsetof(p2pk_dev_ctrl, cep_full);
  const size_t len = offsetof(p2pk_dev_ctrl, cep_rdy) - off;
  _Static_assert(offsetof(p2pk_dev_ctrl, cep_rdy) - offsetof(p2pk_dev_ctrl, cep_full) ==
                     NF * sizeof(uint64_t) * P2PK_COLL_MAX_RANKS * P2PK_SCE_DEPTH_MAX,
                 "the copy-engine flags are five [rank][slot] arrays, cep_full first");
  int prev = -1, done = 0, issued = 0;
  cudaGetDevice(&prev);
  /* Legal even while a stream of this thread captures (a call after the
   * timeout may come under capture; it fails anyway). */
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  /* Pinned, so the copy is asynchronous and the wait below bounds it. */
  uint64_t *h = NULL;
  cudaStream_t s = NULL;
  if (cudaSetDevice(c->device) == cudaSuccess && cudaMallocHost((void **)&h, len) == cudaSuccess &&
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess &&
      cudaMemcpyAsync(h, c->peer[c->rank] + off, len, cudaMemcpyDeviceToHost, s) == cudaSuccess) {
    issued = 1;
    const uint64_t t0 = p2pk_now_ns();
    const uint64_t limit = c->timeout_ns < 2000000000ULL ? c->timeout_ns : 2000000000ULL;
    cudaError_t q;
    const struct timespec ms = {0, 1000000};
    while ((q = cudaStreamQuery(s)) == cudaErrorNotReady && p2pk_now_ns() - t0 < limit)
      nanosleep(&ms, NULL);
    done = q == cudaSuccess;
  }
  cudaGetLastError();
  char line[1536];
  size_t at = 0;
  const int n = c->nranks, D = (int)c->lay.cep_depth;
  for (int f = 0; f < NF && done; f++) {
    if (f == 1) continue; /* headers are values, not flags */
    for (int r = 0; r < n; r++)
      for (int q = 0; q < D; q++) {
        const uint64_t v = h[((size_t)f * P2PK_COLL_MAX_RANKS + (size_t)r) * P2PK_SCE_DEPTH_MAX + (size_t)q];
        if (v && at < sizeof line - 40)
          at += (size_t)snprintf(line + at, sizeof line - at, " %s[%d][%d]=%llu", name[f], r, q,
                                 (unsigned long long)v);
      }
  }
  for (int r = 0; r < n && done; r++)
    if (r != c->rank && at < sizeof line - 40)
      at += (size_t)snprintf(line + at, sizeof line - at, " turns[%d]=%llu/%llu", r,
                             (unsigned long long)CEP(c)->sent[r], (unsigned long long)CEP(c)->recvd[r]);
  if (done)
    P2PK_WARN("rank %d (GPU %d): copy-engine flags set in its scratch after the wait gave up "
              "(flag[peer][slot]; turns: chunks sent/received per pair):%s", c->rank, c->device,
              at ? line : " none");
  else
    P2PK_WARN("rank %d (GPU %d): could not read its copy-engine flags after the wait gave up",
              c->rank, c->device);
  if (s) cudaStreamDestroy(s);
  if (h && (done || !issued)) cudaFreeHost(h); /* else the copy may still land there: leave it */
  cudaGetLastError();
  cudaThreadExchangeStreamCaptureMode(&mode);
  if (prev >= 0) cudaSetDevice(prev);
}

/* A traced call's start (the last one's timeline logged first, which waits
 * for it) and end; not under capture. */
void p2pk_cep_tr_begin(struct p2pkit_comm *c, cudaStream_t stream, const char *name) {
  if (!CEP(c)->trace || CEP(c)->cap) return;
  p2pk_cep_trace_flush(c);
  CEP(c)->tr_on = 1;
  CEP(c)->tr_calls++;
  snprintf(CEP(c)->tr_name, sizeof CEP(c)->tr_name, "%s", name);
  p2pk_cep_tr_mark(c, stream, "start", -1);
}

void p2pk_cep_tr_end(struct p2pkit_comm *c, cudaStream_t stream) {
  p2pk_cep_tr_mark(c, stream, "end", -1);
  CEP(c)->tr_on = 0;
}

/* Claim a slot half this rank fills: wait until its flag (here) is clear,
 * then set it; the receiver clears it once it consumed the half. */
void p2pk_cep_claim(cep_batch_t *b, uint64_t *flag, int peer) {
  p2pk_cep_add(b, P2PK_CEP_WAIT_EQ, flag, 0, NULL, 0, peer);
  p2pk_cep_add(b, P2PK_CEP_SET, flag, 1, NULL, 0, peer); /* the post after the copy orders it */
}

/* Take a slot half from `peer`: wait until its flag (here) is set, with the
 * call's header when hdr is given, then clear it (the peer refills the half
 * only after its own claim flag is cleared, by p2pk_cep_release() below). */
void p2pk_cep_take(cep_batch_t *b, uint64_t *flag, uint64_t *hdr, uint64_t hv, int peer) {
  p2pk_cep_add(b, P2PK_CEP_WAIT_EQ, flag, 1, hdr, hv, peer);
  p2pk_cep_add(b, P2PK_CEP_SET, flag, 0, NULL, 0, peer); /* the release after consuming orders it */
}

/* Elements per chunk for a shard of `bytes` (p2pk_ce_chunk_bytes), at most
 * `cap` bytes: both ends of a pair compute it from the same numbers. */
size_t p2pk_cep_chunk_elems(const struct p2pkit_comm *c, size_t bytes, size_t es, size_t cap) {
  size_t cb = p2pk_ce_chunk_bytes(bytes, c->nranks, (int)c->lay.cep_depth);
  return p2pk_sce_chunk_elems(cb < cap ? cb : cap, es);
}

/* The side stream's pushes, chunk by chunk across the targets: on W the
 * waits until the slot's half (whole: both halves) is free and its claim,
 * the copies, on P the posts that it is full (memops: as memory operations
 * where they can be; join_side must be told the same). Chunk k to t uses
 * slot (cep_sent[t] + k) % depth; the caller advances cep_sent. */
cudaError_t p2pk_cep_pushes(struct p2pkit_comm *c, const cep_push *p, int np, size_t K, size_t es,
                          uint64_t hv, int whole, int memops) {
  const int me = c->rank;
  const uint64_t D = c->lay.cep_depth;
  cudaStream_t side = c->ce->side;
  size_t most = 0;
  for (int i = 0; i < np; i++)
    if (cep_nchunks(p[i].len, K) > most) most = cep_nchunks(p[i].len, K);
  cep_batch_t bw, bp;
  p2pk_cep_batch(&bw, c, c->ce->step[S_WAIT]);
  p2pk_cep_batch(&bp, c, c->ce->step[S_POST]);
  bp.memops = memops && !CEP(c)->cap;
  cudaError_t e = cudaSuccess;
  for (size_t k = 0; k < most && e == cudaSuccess; k++) {
    const int ek = (int)(k % D);
    for (int i = 0; i < np; i++) {
      const int t = p[i].peer, s = (int)((CEP(c)->sent[t] + k) % D);
      if (!p2pk_ce_part(p[i].len, k, K)) continue;
      p2pk_cep_claim(&bw, &CTRL(me)->cep_busy[t][s], t);
      /* A whole slot: its second half may still hold an all-reduce result. */
      if (whole) p2pk_cep_claim(&bw, &CTRL(me)->cep_rbusy[t][s], t);
    }
    if (p2pk_cep_taken(&bw)) {
      e = p2pk_cep_flush(&bw);
      if (e == cudaSuccess) e = cudaEventRecord(c->ce->step_ev[V_CR][ek], bw.s);
      if (e == cudaSuccess) e = cudaStreamWaitEvent(side, c->ce->step_ev[V_CR][ek], 0);
    }
    p2pk_cep_tr_mark(c, side, "push", (long)k);
    for (int i = 0; i < np && e == cudaSuccess; i++) {
      const size_t len = p2pk_ce_part(p[i].len, k, K);
      const int s = (int)((CEP(c)->sent[p[i].peer] + k) % D);
      if (len)
        e = cudaMemcpyAsync(p2pk_cep_land(c, me, p[i].peer, s), p[i].src + k * K * es, len * es,
                            cudaMemcpyDefault, side);
    }
    p2pk_cep_tr_mark(c, side, "pushed", (long)k);
    /* The posts only after P waits for the copies. */
    if (e == cudaSuccess) e = cudaEventRecord(c->ce->step_ev[V_CP][ek], side);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(bp.s, c->ce->step_ev[V_CP][ek], 0);
    for (int i = 0; i < np; i++) {
      const int t = p[i].peer, s = (int)((CEP(c)->sent[t] + k) % D);
      if (p2pk_ce_part(p[i].len, k, K))
        p2pk_cep_add(&bp, P2PK_CEP_POST, &CTRL(t)->cep_full[me][s], 1, &CTRL(t)->cep_hdr[me][s], hv, t);
    }
    if (e == cudaSuccess) e = p2pk_cep_flush(&bp);
  }
  if (e == cudaSuccess) e = cudaEventRecord(c->ce->sev[E_SIDE], side);
  if (e == cudaSuccess) e = cudaEventRecord(c->ce->sev[E_POST], bp.s);
  return e;
}

/* Whole pushes straight into the peers' buffers (dst[i] for p[i]; one
 * process under capture): on W each peer's rdy (its buffer is free: taken
 * and cleared), on the side stream the copies, on P each peer's fin. */
cudaError_t p2pk_cep_direct_pushes(struct p2pkit_comm *c, const cep_push *p, char *const *dst, int np) {
  const int me = c->rank;
  cudaStream_t side = c->ce->side;
  cep_batch_t bw, bp;
  p2pk_cep_batch(&bw, c, c->ce->step[S_WAIT]);
  p2pk_cep_batch(&bp, c, c->ce->step[S_POST]);
  for (int i = 0; i < np; i++) p2pk_cep_take(&bw, &CTRL(me)->cep_rdy[p[i].peer], NULL, 0, p[i].peer);
  cudaError_t e = p2pk_cep_flush(&bw);
  if (e == cudaSuccess) e = cudaEventRecord(c->ce->step_ev[V_CR][0], bw.s);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(side, c->ce->step_ev[V_CR][0], 0);
  for (int i = 0; i < np && e == cudaSuccess; i++)
    if (p[i].len) e = cudaMemcpyAsync(dst[i], p[i].src, p[i].len, cudaMemcpyDefault, side);
  if (e == cudaSuccess) e = cudaEventRecord(c->ce->step_ev[V_CP][0], side);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(bp.s, c->ce->step_ev[V_CP][0], 0);
  for (int i = 0; i < np; i++) p2pk_cep_add(&bp, P2PK_CEP_POST, &CTRL(p[i].peer)->cep_fin[me], 1, NULL, 0, p[i].peer);
  if (e == cudaSuccess) e = p2pk_cep_flush(&bp);
  if (e == cudaSuccess) e = cudaEventRecord(c->ce->sev[E_SIDE], side);
  if (e == cudaSuccess) e = cudaEventRecord(c->ce->sev[E_POST], bp.s);
  return e;
}

/* A stream's capture status and capture id. */
static cudaError_t cep_capture_info(cudaStream_t s, enum cudaStreamCaptureStatus *st,
                                unsigned long long *id) {
  /* Six arguments in CUDA 12, seven (edge data) from CUDA 13. */
#if CUDART_VERSION >= 13000
  return cudaStreamGetCaptureInfo(s, st, id, NULL, NULL, NULL, NULL);
#else
  return cudaStreamGetCaptureInfo(s, st, id, NULL, NULL, NULL);
#endif
}

/* Whether claim stream s already belongs to the capture `stream` is in
 * (an earlier call of the capture forked it, and its copies joined its
 * claims): then this call's claims need not wait for the call's start and
 * run ahead as they do eagerly (2x H200 under graphs: reduce-scatter
 * 256 MiB 424.0 us against 439.8 forked every call; nothing slower). */
static int cep_in_capture_of(cudaStream_t s, cudaStream_t stream) {
  enum cudaStreamCaptureStatus a = cudaStreamCaptureStatusNone, b = cudaStreamCaptureStatusNone;
  unsigned long long ia = 0, ib = 0;
  if (cep_capture_info(s, &a, &ia) != cudaSuccess || cep_capture_info(stream, &b, &ib) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return a == cudaStreamCaptureStatusActive && b == cudaStreamCaptureStatusActive && ia == ib;
}

static int cep_must_fork(const struct p2pkit_comm *c, cudaStream_t w, cudaStream_t stream) {
  return CEP(c)->cap && !cep_in_capture_of(w, stream);
}

/* Start: the side and gather streams wait for where `stream` stands.
 * side: this call pushes (whole: filling whole slots); gather: it pushes
 * all-reduce results (second halves, claimed on W2).
 * The claims run ahead of the call on their streams W and W2, but a second
 * half (rbusy) is claimed on both: by whole pushes on W, by all-reduce
 * results on W2. A claim running ahead on one of them could take the half
 * before an earlier call's claim on the other, which then waits for the
 * later call: a deadlock. So a claim stream starts at the call's START
 * (after every earlier call, whose claims it joined) when the other one
 * claimed second halves since it last did, and under capture when it is
 * not in the capture yet (a stream must be forked into it). */
cudaError_t p2pk_cep_start(struct p2pkit_comm *c, cudaStream_t stream, int side, int whole,
                         int gather) {
  /* The streams and events exist since init (p2pk_ce_prepare_steps, p2pk_cep_open),
   * as the landing slots do, without which no call comes here. */
  cudaError_t e = cudaEventRecord(c->ce->sev[E_START], stream);
  if (e == cudaSuccess && side) e = cudaStreamWaitEvent(c->ce->side, c->ce->sev[E_START], 0);
  if (e == cudaSuccess && gather) e = cudaStreamWaitEvent(c->ce->h2d, c->ce->sev[E_START], 0);
  /* Only the claim streams the call uses: under capture every stream that
   * joins the graph must be joined again. */
  if (e == cudaSuccess && side &&
      (cep_must_fork(c, c->ce->step[S_WAIT], stream) || (whole && CEP(c)->w2_rbusy))) {
    e = cudaStreamWaitEvent(c->ce->step[S_WAIT], c->ce->sev[E_START], 0);
    CEP(c)->w2_rbusy = 0;
  }
  if (e == cudaSuccess && gather && (cep_must_fork(c, c->ce->step[S_WAIT2], stream) || CEP(c)->w_rbusy)) {
    e = cudaStreamWaitEvent(c->ce->step[S_WAIT2], c->ce->sev[E_START], 0);
    CEP(c)->w_rbusy = 0;
  }
  if (side && whole) CEP(c)->w_rbusy = 1;
  if (gather) CEP(c)->w2_rbusy = 1;
  return e;
}

/* The caller's stream waits for the side stream's copies and, when the
 * posts after them are kernels, for those too (p2pk_cep_pushes() records both). A
 * collective kernel launched next on the caller's stream can fill every
 * multiprocessor while it waits for a peer that is itself still waiting for
 * one of those posts (seen under a CUDA graph after eager copy-engine
 * calls: broadcast and reduce with a process per GPU hung until the
 * timeout); posts as memory operations need no
 * multiprocessor. */
cudaError_t p2pk_cep_join_side(struct p2pkit_comm *c, cudaStream_t stream, int memops) {
  cudaError_t e = cudaStreamWaitEvent(stream, c->ce->sev[E_SIDE], 0);
  if (e == cudaSuccess && !(memops && !CEP(c)->cap && p2pk_cep_memops(c)))
    e = cudaStreamWaitEvent(stream, c->ce->sev[E_POST], 0);
  return e;
}

static const char *cep_mode_name(const struct p2pkit_comm *c) {
  return c->multiproc ? "process per GPU" : "one process, under capture";
}

void p2pk_cep_log_once(struct p2pkit_comm *c, int kind, const char *name, size_t bytes, size_t cb,
                     int direct) {
  /* The first call of each kind captured in a graph says so too, and the
   * first that pushed straight into the peers' outputs. */
  if (CEP(c)->cap && !(CEP(c)->logged & (1u << (16 + kind)))) {
    CEP(c)->logged |= 1u << (16 + kind);
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): %s of %zu B over the copy engines captured in a "
              "CUDA graph (%s)", c->rank, c->device, name, bytes, cep_mode_name(c));
  }
  if (direct && !(CEP(c)->logged & (1u << (8 + kind)))) {
    CEP(c)->logged |= 1u << (8 + kind);
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): %s of %zu B pushes straight into the peers' "
              "outputs over the copy engines (%s)", c->rank, c->device, name, bytes, cep_mode_name(c));
  }
  if (CEP(c)->logged & (1u << kind)) return;
  CEP(c)->logged |= 1u << kind;
  P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): %s of %zu B uses the copy engines over P2P, chunks "
            "of %zu B through landing slots in the peers' scratch (%s)", c->rank,
            c->device, name, bytes, cb, cep_mode_name(c));
}

/* A copy of lb bytes out of a landing slot (or anything local), on
 * `stream`: the local kernel, on at most `cap` blocks when cap > 0. */
cudaError_t p2pk_cep_copy_capped(const struct p2pkit_comm *c, p2pkit_dtype_t dtype, const char *src,
                               char *out, size_t lb, int cap, cudaStream_t stream) {
  p2pk_lr_args la;
  memset(&la, 0, sizeof la);
  la.n = 1;
  la.src[0] = src;
  la.out = out;
  la.bytes = lb;
  la.op = P2PKIT_SUM;
  return lb ? p2pk_ce_local_reduce(c, dtype, &la, cap, stream) : cudaSuccess;
}

cudaError_t p2pk_cep_copy_out(const struct p2pkit_comm *c, p2pkit_dtype_t dtype, const char *src,
                            char *out, size_t lb, cudaStream_t stream) {
  return p2pk_cep_copy_capped(c, dtype, src, out, lb, 0, stream);
}

/* A broadcast root's own copy beside its pushes: a kernel of a quarter of
 * the multiprocessors (rounded down to 8), which keeps pace with the link
 * without starving the copy engines' reads (2x H200, one process under a
 * graph, 1 GiB out of place: the full grid 3105 us, the copy engine 3125,
 * 32 blocks 2735, in place 2732). Capping the copies out of the slots and
 * the reduces the same way was slower (send/recv 1 GiB 3135 us on 32
 * blocks against 2873); copies out by the copy engine made no clear
 * difference. */
cudaError_t p2pk_cep_own_copy(const struct p2pkit_comm *c, p2pkit_dtype_t dtype, const void *send,
                            void *recv, size_t bytes, cudaStream_t stream) {
  const int blocks = (c->sel.geom.sm_count / 4) & ~7;
  return p2pk_cep_copy_capped(c, dtype, send, recv, bytes, blocks > 0 ? blocks : 1, stream);
}

/* Posts that the whole slot s of the pair r -> me was consumed (both halves free). */
void p2pk_cep_release(struct p2pkit_comm *c, cep_batch_t *b, int r, int s) {
  p2pk_cep_add(b, P2PK_CEP_POST, &CTRL(r)->cep_busy[c->rank][s], 0, NULL, 0, r);
  p2pk_cep_add(b, P2PK_CEP_POST, &CTRL(r)->cep_rbusy[c->rank][s], 0, NULL, 0, r);
}

/* Whether `stream` is capturing (CEP(c)->cap, for this call). */
cudaError_t p2pk_cep_note_capture(struct p2pkit_comm *c, cudaStream_t stream) {
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  cudaError_t e = cudaStreamIsCapturing(stream, &cs);
  CEP(c)->cap = cs != cudaStreamCaptureStatusNone;
  return e;
}

/* ------------------------------------------------ the engine's state -- */

/* The state; the streams and events now when the slots exist (a call
 * being captured must not create them); the settings read once: a later
 * change of the forced settings keeps them (re-reading them there would
 * undo a wait a caller had set). */
p2pkit_status_t p2pk_cep_open(struct p2pkit_comm *c) {
  if (CEP(c)) return P2PKIT_SUCCESS; /* the other path on the slots opened it */
  p2pk_cep *s = calloc(1, sizeof *s);
  if (!s) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "rank %d: out of memory", c->rank);
  c->ce->slots = s;
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
void p2pk_cep_close(struct p2pkit_comm *c) {
  p2pk_cep *s = c->ce ? CEP(c) : NULL;
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
  c->ce->slots = NULL;
}

void p2pk_cep_begin(struct p2pkit_comm *c, int capture, int grid_cap) {
  c->ce->cap = grid_cap;
  if (capture >= 0) CEP(c)->cap = capture != 0;
}
