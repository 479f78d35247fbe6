/* Copy engines over P2P with one process per GPU: all-reduce,
 * reduce-scatter, reduce, broadcast and all-to-all from their
 * P2PKIT_*_CE_MIN (with a process per GPU, a setting not given takes the
 * default in ce_p2p.c's mp_default), and send/recv from
 * P2PKIT_SENDRECV_CE_MIN (default 256 MiB here). One process under graph
 * capture runs the same code with plain device pointers to the peers'
 * scratch (its events between per-GPU captures could not be replayed), and
 * when every rank's call is in one group, pushes all-reduce results,
 * broadcasts, all-to-all blocks and sends straight into the receivers'
 * buffers ("direct", at the end of this file). With a process per GPU a
 * receive into a registered buffer may take its send straight in too
 * ("straight in", before p2pk_cep_p2p), eagerly and under capture.
 *
 * Why: with a process per GPU the kernels move every byte with SM stores,
 * which top out at ~364 GB/s each way on the 2x H200; the copy engines
 * reach ~390 (cudaMemcpyPeerAsync 392-395 GB/s one way, 775 both;
 * docs/decisions/sm-copy-plateau.md). One process drives them through CUDA events (ce_p2p.c); here a
 * peer's buffers are not mapped (only its scratch is, through CUDA IPC), so
 * every chunk lands in a slot of the receiver's scratch, and the ranks tell
 * each other about chunks through counters beside it, waited for by
 * one-thread kernels on the streams (p2pk_launch_cep_sync, with the
 * collective kernels' timeout and abort rules: a peer that dies makes the
 * others fail, not hang) and written by stream memory operations where a
 * post stands alone (p2pk_cep_run below: no multiprocessor needed, so a
 * collective kernel that fills the GPU cannot starve them).
 *
 * Landing slots: rank t's scratch holds, for each peer r, `depth` slots of
 * cep_slot bytes (P2PKIT_CE_DEPTH, default 2 here; P2PKIT_CE_CHUNK, at most
 * and by default what keeps all of them within 192 MiB: 96 MiB on 2 GPUs).
 * Chunk k of a call on the pair r -> t uses slot (q + k) % depth, q the
 * pair's chunks so far (cep_sent at r, cep_recvd at t: both ends count
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
 * and the next chunk's waits go in one launch (batch_t: launched when full,
 * so any number of steps keeps its order). START (the caller's stream at
 * the call) comes before the copy streams start (under capture before
 * every stream of the call); the caller's stream ends after SIDE (the
 * pushes read its input), and for the all-reduce after GATHER (its result
 * pushes read its output) and RECV (its copies-out write it). Under
 * capture the posts are kernels (memory operations captured in a graph
 * ran far slower: batch() says by how much) and
 * every stream of the call joins the caller's before it ends. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/plan.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/param.h"

/* c->sce_ev[]: the call's start; the side, gather and RECV streams done;
 * the posts after the side and gather copies done. */
enum { E_START = P2PK_CE_EV_START, E_SIDE = 1, E_GATHER = 2, E_RECV = 3, E_POST = 4, E_POST2 = 5 };
/* c->cep_stream[]: posts after the side stream's copies, posts after the
 * gather stream's, waits for free slots before each, and the all-reduce's
 * copies of results out of the slots (RECV). c->cep_ev[]: side
 * copies done, side slots free, gather copies done, gather slots free, the
 * owner's reduce done. */
enum { S_POST = 0, S_POST2 = 1, S_WAIT = 2, S_WAIT2 = 3, S_RECV = 4 };
enum { V_CP = 0, V_CR = 1, V_GCP = 2, V_GCR = 3, V_RED = 4 };
_Static_assert(S_RECV + 1 == P2PK_CEP_STREAMS && V_RED + 1 == P2PK_CEP_EVKINDS,
               "ce_p2p_mp.c's streams and event kinds fill c->cep_stream and c->cep_ev");

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
static char *land(const struct p2pkit_comm *c, int src, int dst, int s) {
  const int n = c->nranks;
  return c->peer[dst] + c->lay.cep_off +
         ((uint64_t)((src - dst - 1 + n) % n) * c->lay.cep_depth + (uint64_t)s) * c->lay.cep_slot;
}
#define CTRL(p) ((p2pk_dev_ctrl *)c->peer[p])

/* The steps for one stream's next one-thread launch. A list that fills up
 * is launched and started again, so any number of steps keeps its order. */
typedef struct {
  p2pk_cep_steps st;
  struct p2pkit_comm *c;
  cudaStream_t s;
  cudaError_t e;
  int added;  /* steps added since the caller last asked (taken()) */
  int memops; /* posts alone may be memory operations (p2pk_cep_run) */
} batch_t;

static void batch(batch_t *b, struct p2pkit_comm *c, cudaStream_t s) {
  b->st.n = 0;
  b->c = c;
  b->s = s;
  b->e = cudaSuccess;
  b->added = 0;
  /* No memory operations inside a capture: they can be captured, but such
   * graphs ran far slower (2x H200, process per GPU: 1 GiB broadcast
   * 3141 us against 2789 with one-thread kernels). */
  b->memops = !c->cep_cap;
}

/* Launch the steps gathered so far (none: nothing); the first error sticks. */
static cudaError_t flush(batch_t *b) {
  if (b->st.n && b->e == cudaSuccess) b->e = p2pk_cep_run(b->c, &b->st, b->memops, b->s);
  b->st.n = 0;
  return b->e;
}

static void add(batch_t *b, int kind, uint64_t *ctr, uint64_t v, uint64_t *hdr, uint64_t hv, int peer) {
  if (b->st.n == P2PK_CEP_STEPS) flush(b);
  b->st.s[b->st.n++] = (p2pk_cep_step){.ctr = ctr, .hdr = hdr, .v = v, .hv = hv, .kind = kind, .peer = peer};
  b->added++;
}

/* Were steps added since the last call? */
static int taken(batch_t *b) {
  int a = b->added;
  b->added = 0;
  return a;
}

static size_t nchunks(size_t len, size_t K) { return (len + K - 1) / K; }

/* P2PKIT_CEP_TRACE: a timing event on stream `s` marking `what` (a label
 * and a chunk number, or -1 for none), while a traced call is being
 * enqueued and events are left. */
static void tr_mark(struct p2pkit_comm *c, cudaStream_t s, const char *what, long k) {
  if (!c->cep_tr_on || c->cep_tr_n >= P2PK_CEP_TRACE_MAX) return;
  cudaEvent_t *ev = &c->cep_tr_ev[c->cep_tr_n];
  if (!*ev && cudaEventCreate(ev) != cudaSuccess) {
    *ev = NULL;
    cudaGetLastError();
    return;
  }
  if (cudaEventRecord(*ev, s) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  if (k >= 0) snprintf(c->cep_tr_what[c->cep_tr_n], sizeof c->cep_tr_what[0], "%s%ld", what, k);
  else snprintf(c->cep_tr_what[c->cep_tr_n], sizeof c->cep_tr_what[0], "%s", what);
  c->cep_tr_n++;
}

void p2pk_cep_trace_flush(struct p2pkit_comm *c) {
  const int n = c->cep_tr_n;
  c->cep_tr_n = 0;
  if (n < 2) return;
  char line[2048];
  size_t at = 0;
  for (int i = 1; i < n && at < sizeof line - 32; i++) {
    float ms = -1;
    if (cudaEventSynchronize(c->cep_tr_ev[i]) != cudaSuccess ||
        cudaEventElapsedTime(&ms, c->cep_tr_ev[0], c->cep_tr_ev[i]) != cudaSuccess) {
      cudaGetLastError();
      ms = -1;
    }
    at += (size_t)snprintf(line + at, sizeof line - at, " %s %.1f", c->cep_tr_what[i], ms * 1e3);
  }
  P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): %s call %llu over the copy engines, us after its "
            "start (pushK / pushedK: chunk K's copy starts / has landed; tookK: the owner saw every "
            "peer's chunk K; outK: copied out or reduced; gpushK / gpushedK: the all-reduce's "
            "result K pushed; routK: a peer's result K copied out):%s", c->rank, c->device,
            c->cep_tr_name, (unsigned long long)c->cep_tr_calls, line);
}

/* After a wait gave up (p2pk_comm_async_status): the copy-engine flags
 * still set in this rank's scratch, as flag[peer][slot], and the pairs'
 * slot turns, in one WARN line, so every rank's log shows its side of a
 * deadlock (a wait's own report names one word). Read into pinned memory
 * through a stream of its own (the call's streams may still be draining),
 * given up after 2 s. */
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
    cudaError_t q;
    const struct timespec ms = {0, 1000000};
    while ((q = cudaStreamQuery(s)) == cudaErrorNotReady && p2pk_now_ns() - t0 < 2000000000ULL)
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
                             (unsigned long long)c->cep_sent[r], (unsigned long long)c->cep_recvd[r]);
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
static void tr_begin(struct p2pkit_comm *c, cudaStream_t stream, const char *name) {
  if (!c->cep_trace || c->cep_cap) return;
  p2pk_cep_trace_flush(c);
  c->cep_tr_on = 1;
  c->cep_tr_calls++;
  snprintf(c->cep_tr_name, sizeof c->cep_tr_name, "%s", name);
  tr_mark(c, stream, "start", -1);
}
static void tr_end(struct p2pkit_comm *c, cudaStream_t stream) {
  tr_mark(c, stream, "end", -1);
  c->cep_tr_on = 0;
}

/* Claim a slot half this rank fills: wait until its flag (here) is clear,
 * then set it; the receiver clears it once it consumed the half. */
static void claim(batch_t *b, uint64_t *flag, int peer) {
  add(b, P2PK_CEP_WAIT_EQ, flag, 0, NULL, 0, peer);
  add(b, P2PK_CEP_SET, flag, 1, NULL, 0, peer); /* the post after the copy orders it */
}

/* Take a slot half from `peer`: wait until its flag (here) is set, with the
 * call's header when hdr is given, then clear it (the peer refills the half
 * only after its own claim flag is cleared, by release() below). */
static void take(batch_t *b, uint64_t *flag, uint64_t *hdr, uint64_t hv, int peer) {
  add(b, P2PK_CEP_WAIT_EQ, flag, 1, hdr, hv, peer);
  add(b, P2PK_CEP_SET, flag, 0, NULL, 0, peer); /* the release after consuming orders it */
}

/* Elements per chunk for a shard of `bytes` (p2pk_ce_chunk_bytes), at most
 * `cap` bytes: both ends of a pair compute it from the same numbers. */
static size_t chunk_elems(const struct p2pkit_comm *c, size_t bytes, size_t es, size_t cap) {
  size_t cb = p2pk_ce_chunk_bytes(bytes, c->nranks, (int)c->lay.cep_depth);
  return p2pk_sce_chunk_elems(cb < cap ? cb : cap, es);
}

/* What a call is, for the receivers to compare with their own (kind
 * SENDRECV for send/recv, the sender as root). */
enum { SENDRECV = P2PK_COLL_KINDS };
static uint64_t header(int kind, size_t count, int dtype, int op, int root) {
  return 0xce9000000000000ULL ^ ((uint64_t)count << 16) ^ ((uint64_t)kind << 12) ^
         ((uint64_t)dtype << 8) ^ ((uint64_t)op << 4) ^ (uint64_t)root;
}

/* One push: chunk k (K elements of es bytes) of `len` elements at src to
 * rank `peer`'s landing slots. */
typedef struct {
  int peer;
  const char *src;
  size_t len;
} push_t;

/* The side stream's pushes, chunk by chunk across the targets: on W the
 * waits until the slot's half (whole: both halves) is free and its claim,
 * the copies, on P the posts that it is full (memops: as memory operations
 * where they can be; join_side must be told the same). Chunk k to t uses
 * slot (cep_sent[t] + k) % depth; the caller advances cep_sent. */
static cudaError_t pushes(struct p2pkit_comm *c, const push_t *p, int np, size_t K, size_t es,
                          uint64_t hv, int whole, int memops) {
  const int me = c->rank;
  const uint64_t D = c->lay.cep_depth;
  cudaStream_t side = c->ce_side;
  size_t most = 0;
  for (int i = 0; i < np; i++)
    if (nchunks(p[i].len, K) > most) most = nchunks(p[i].len, K);
  batch_t bw, bp;
  batch(&bw, c, c->cep_stream[S_WAIT]);
  batch(&bp, c, c->cep_stream[S_POST]);
  bp.memops = memops && !c->cep_cap;
  cudaError_t e = cudaSuccess;
  for (size_t k = 0; k < most && e == cudaSuccess; k++) {
    const int ek = (int)(k % D);
    for (int i = 0; i < np; i++) {
      const int t = p[i].peer, s = (int)((c->cep_sent[t] + k) % D);
      if (!p2pk_ce_part(p[i].len, k, K)) continue;
      claim(&bw, &CTRL(me)->cep_busy[t][s], t);
      /* A whole slot: its second half may still hold an all-reduce result. */
      if (whole) claim(&bw, &CTRL(me)->cep_rbusy[t][s], t);
    }
    if (taken(&bw)) {
      e = flush(&bw);
      if (e == cudaSuccess) e = cudaEventRecord(c->cep_ev[V_CR][ek], bw.s);
      if (e == cudaSuccess) e = cudaStreamWaitEvent(side, c->cep_ev[V_CR][ek], 0);
    }
    tr_mark(c, side, "push", (long)k);
    for (int i = 0; i < np && e == cudaSuccess; i++) {
      const size_t len = p2pk_ce_part(p[i].len, k, K);
      const int s = (int)((c->cep_sent[p[i].peer] + k) % D);
      if (len)
        e = cudaMemcpyAsync(land(c, me, p[i].peer, s), p[i].src + k * K * es, len * es,
                            cudaMemcpyDefault, side);
    }
    tr_mark(c, side, "pushed", (long)k);
    /* The posts only after P waits for the copies. */
    if (e == cudaSuccess) e = cudaEventRecord(c->cep_ev[V_CP][ek], side);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(bp.s, c->cep_ev[V_CP][ek], 0);
    for (int i = 0; i < np; i++) {
      const int t = p[i].peer, s = (int)((c->cep_sent[t] + k) % D);
      if (p2pk_ce_part(p[i].len, k, K))
        add(&bp, P2PK_CEP_POST, &CTRL(t)->cep_full[me][s], 1, &CTRL(t)->cep_hdr[me][s], hv, t);
    }
    if (e == cudaSuccess) e = flush(&bp);
  }
  if (e == cudaSuccess) e = cudaEventRecord(c->sce_ev[E_SIDE], side);
  if (e == cudaSuccess) e = cudaEventRecord(c->sce_ev[E_POST], bp.s);
  return e;
}

/* Whole pushes straight into the peers' buffers (dst[i] for p[i]; one
 * process under capture): on W each peer's rdy (its buffer is free: taken
 * and cleared), on the side stream the copies, on P each peer's fin. */
static cudaError_t direct_pushes(struct p2pkit_comm *c, const push_t *p, char *const *dst, int np) {
  const int me = c->rank;
  cudaStream_t side = c->ce_side;
  batch_t bw, bp;
  batch(&bw, c, c->cep_stream[S_WAIT]);
  batch(&bp, c, c->cep_stream[S_POST]);
  for (int i = 0; i < np; i++) take(&bw, &CTRL(me)->cep_rdy[p[i].peer], NULL, 0, p[i].peer);
  cudaError_t e = flush(&bw);
  if (e == cudaSuccess) e = cudaEventRecord(c->cep_ev[V_CR][0], bw.s);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(side, c->cep_ev[V_CR][0], 0);
  for (int i = 0; i < np && e == cudaSuccess; i++)
    if (p[i].len) e = cudaMemcpyAsync(dst[i], p[i].src, p[i].len, cudaMemcpyDefault, side);
  if (e == cudaSuccess) e = cudaEventRecord(c->cep_ev[V_CP][0], side);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(bp.s, c->cep_ev[V_CP][0], 0);
  for (int i = 0; i < np; i++) add(&bp, P2PK_CEP_POST, &CTRL(p[i].peer)->cep_fin[me], 1, NULL, 0, p[i].peer);
  if (e == cudaSuccess) e = flush(&bp);
  if (e == cudaSuccess) e = cudaEventRecord(c->sce_ev[E_SIDE], side);
  if (e == cudaSuccess) e = cudaEventRecord(c->sce_ev[E_POST], bp.s);
  return e;
}

cudaError_t p2pk_cep_prepare(struct p2pkit_comm *c) {
  cudaError_t e = p2pk_ce_prepare(c, 0);
  for (int i = 0; i < P2PK_CEP_STREAMS && e == cudaSuccess; i++) e = p2pk_lazy_stream(&c->cep_stream[i]);
  for (int i = 0; i < P2PK_CEP_EVKINDS && e == cudaSuccess; i++)
    for (uint64_t s = 0; s < c->lay.cep_depth && e == cudaSuccess; s++) e = p2pk_lazy_event(&c->cep_ev[i][s]);
  return e;
}

/* A stream's capture status and capture id. */
static cudaError_t capture_info(cudaStream_t s, enum cudaStreamCaptureStatus *st,
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
static int in_capture_of(cudaStream_t s, cudaStream_t stream) {
  enum cudaStreamCaptureStatus a = cudaStreamCaptureStatusNone, b = cudaStreamCaptureStatusNone;
  unsigned long long ia = 0, ib = 0;
  if (capture_info(s, &a, &ia) != cudaSuccess || capture_info(stream, &b, &ib) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return a == cudaStreamCaptureStatusActive && b == cudaStreamCaptureStatusActive && ia == ib;
}

static int must_fork(const struct p2pkit_comm *c, cudaStream_t w, cudaStream_t stream) {
  return c->cep_cap && !in_capture_of(w, stream);
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
static cudaError_t start(struct p2pkit_comm *c, cudaStream_t stream, int side, int whole,
                         int gather) {
  /* The streams and events exist since init (p2pk_cep_prepare, comm.c),
   * as the landing slots do, without which no call comes here. */
  cudaError_t e = cudaEventRecord(c->sce_ev[E_START], stream);
  if (e == cudaSuccess && side) e = cudaStreamWaitEvent(c->ce_side, c->sce_ev[E_START], 0);
  if (e == cudaSuccess && gather) e = cudaStreamWaitEvent(c->sce_h2d, c->sce_ev[E_START], 0);
  /* Only the claim streams the call uses: under capture every stream that
   * joins the graph must be joined again. */
  if (e == cudaSuccess && side &&
      (must_fork(c, c->cep_stream[S_WAIT], stream) || (whole && c->cep_w2_rbusy))) {
    e = cudaStreamWaitEvent(c->cep_stream[S_WAIT], c->sce_ev[E_START], 0);
    c->cep_w2_rbusy = 0;
  }
  if (e == cudaSuccess && gather && (must_fork(c, c->cep_stream[S_WAIT2], stream) || c->cep_w_rbusy)) {
    e = cudaStreamWaitEvent(c->cep_stream[S_WAIT2], c->sce_ev[E_START], 0);
    c->cep_w_rbusy = 0;
  }
  if (side && whole) c->cep_w_rbusy = 1;
  if (gather) c->cep_w2_rbusy = 1;
  return e;
}

/* The caller's stream waits for the side stream's copies and, when the
 * posts after them are kernels, for those too (pushes() records both). A
 * collective kernel launched next on the caller's stream can fill every
 * multiprocessor while it waits for a peer that is itself still waiting for
 * one of those posts (seen under a CUDA graph after eager copy-engine
 * calls: broadcast and reduce with a process per GPU hung until the
 * timeout); posts as memory operations need no
 * multiprocessor. */
static cudaError_t join_side(struct p2pkit_comm *c, cudaStream_t stream, int memops) {
  cudaError_t e = cudaStreamWaitEvent(stream, c->sce_ev[E_SIDE], 0);
  if (e == cudaSuccess && !(memops && !c->cep_cap && p2pk_cep_memops(c)))
    e = cudaStreamWaitEvent(stream, c->sce_ev[E_POST], 0);
  return e;
}

static const char *mode_name(const struct p2pkit_comm *c) {
  return c->multiproc ? "process per GPU" : "one process, under capture";
}

static void log_once(struct p2pkit_comm *c, int kind, const char *name, size_t bytes, size_t cb,
                     int direct) {
  /* The first call of each kind captured in a graph says so too, and the
   * first that pushed straight into the peers' outputs. */
  if (c->cep_cap && !(c->cep_logged & (1u << (16 + kind)))) {
    c->cep_logged |= 1u << (16 + kind);
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): %s of %zu B over the copy engines captured in a "
              "CUDA graph (%s)", c->rank, c->device, name, bytes, mode_name(c));
  }
  if (direct && !(c->cep_logged & (1u << (8 + kind)))) {
    c->cep_logged |= 1u << (8 + kind);
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): %s of %zu B pushes straight into the peers' "
              "outputs over the copy engines (%s)", c->rank, c->device, name, bytes, mode_name(c));
  }
  if (c->cep_logged & (1u << kind)) return;
  c->cep_logged |= 1u << kind;
  P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): %s of %zu B uses the copy engines over P2P, chunks "
            "of %zu B through landing slots in the peers' scratch (%s)", c->rank,
            c->device, name, bytes, cb, mode_name(c));
}

/* A copy of lb bytes out of a landing slot (or anything local), on
 * `stream`: the local kernel, on at most `cap` blocks when cap > 0. */
static cudaError_t copy_capped(const struct p2pkit_comm *c, p2pkit_dtype_t dtype, const char *src,
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

static cudaError_t copy_out(const struct p2pkit_comm *c, p2pkit_dtype_t dtype, const char *src,
                            char *out, size_t lb, cudaStream_t stream) {
  return copy_capped(c, dtype, src, out, lb, 0, stream);
}

/* A broadcast root's own copy beside its pushes: a kernel of a quarter of
 * the multiprocessors (rounded down to 8), which keeps pace with the link
 * without starving the copy engines' reads (2x H200, one process under a
 * graph, 1 GiB out of place: the full grid 3105 us, the copy engine 3125,
 * 32 blocks 2735, in place 2732). Capping the copies out of the slots and
 * the reduces the same way was slower (send/recv 1 GiB 3135 us on 32
 * blocks against 2873); copies out by the copy engine made no clear
 * difference. */
static cudaError_t own_copy(const struct p2pkit_comm *c, p2pkit_dtype_t dtype, const void *send,
                            void *recv, size_t bytes, cudaStream_t stream) {
  const int blocks = (c->geom.sm_count / 4) & ~7;
  return copy_capped(c, dtype, send, recv, bytes, blocks > 0 ? blocks : 1, stream);
}

/* Posts that the whole slot s of the pair r -> me was consumed (both halves free). */
static void release(struct p2pkit_comm *c, batch_t *b, int r, int s) {
  add(b, P2PK_CEP_POST, &CTRL(r)->cep_busy[c->rank][s], 0, NULL, 0, r);
  add(b, P2PK_CEP_POST, &CTRL(r)->cep_rbusy[c->rank][s], 0, NULL, 0, r);
}

/* All-reduce (the file's head has the picture). pout: NULL, or every
 * rank's output (one process under capture): the results go straight into
 * the peers' outputs ("direct": rdy/fin flags, no second halves, no copies
 * out). */
static cudaError_t allreduce_mp(struct p2pkit_comm *c, const void *send, void *recv, size_t count,
                                p2pkit_dtype_t dtype, p2pkit_redop_t op, cudaStream_t stream,
                                char *const *pout) {
  const int n = c->nranks, me = c->rank;
  const uint64_t D = c->lay.cep_depth;
  const size_t es = p2pkit_dtype_size(dtype), half = c->lay.cep_slot / 2;
  size_t soff[P2PK_COLL_MAX_RANKS], slen[P2PK_COLL_MAX_RANKS], most = 0;
  for (int t = 0; t < n; t++) {
    p2pk_ce_owned(P2PK_COLL_ALL_REDUCE, count, n, es, 0, t, &soff[t], &slen[t]);
    if (slen[t] > most) most = slen[t];
  }
  /* Direct: no results in the second halves, so a chunk may fill a whole
   * slot (claimed whole: a slot-path call may still hold a result there). */
  const size_t K = chunk_elems(c, most * es, es, pout ? c->lay.cep_slot : half);
  const uint64_t hv = header(P2PK_COLL_ALL_REDUCE, count, dtype, op, 0);
  const size_t mine = nchunks(slen[me], K);
  push_t pu[P2PK_COLL_MAX_RANKS];
  int np = 0;
  size_t far = mine, span[P2PK_COLL_MAX_RANKS];
  for (int t = 0; t < n; t++) {
    if (t == me) continue;
    if (slen[t]) pu[np++] = (push_t){t, (const char *)send + soff[t] * es, slen[t]};
    /* Both ways of a pair turn through the slots by the longer of the two
     * shards (contributions to t's, results of mine), the same count at
     * both ends. */
    span[t] = nchunks(slen[t], K) > mine ? nchunks(slen[t], K) : mine;
    if (span[t] > far) far = span[t];
  }
  const uint64_t *sent0 = c->cep_sent, *recvd0 = c->cep_recvd;
  cudaError_t e = start(c, stream, np > 0, pout != NULL, mine > 0);
  batch_t bs, bw, bp, br; /* my stream; W2, P2 around the gather copies; R */
  batch(&bs, c, stream);
  /* Direct: my output is free from here on (my stream stands at the call):
   * every owner of a shard may write its results into it. */
  for (int t = 0; t < n && pout; t++)
    if (t != me && slen[t]) add(&bs, P2PK_CEP_POST, &CTRL(t)->cep_rdy[me], 1, NULL, 0, t);
  /* The all-reduce's posts stay kernels (2x H200: with memory operations
   * 512 MiB took 1514-1544 us from one measurement to the next, with
   * kernels 1482-1485). */
  if (e == cudaSuccess && np) e = pushes(c, pu, np, K, es, hv, pout != NULL, 0);
  cudaStream_t g = c->sce_h2d, R = c->cep_stream[S_RECV];
  /* The results' copies out write this rank's output. */
  if (e == cudaSuccess) e = cudaStreamWaitEvent(R, c->sce_ev[E_START], 0);
  batch(&bw, c, c->cep_stream[S_WAIT2]);
  batch(&bp, c, c->cep_stream[S_POST2]);
  batch(&br, c, R);
  bs.memops = bp.memops = br.memops = 0; /* kernels (pushes() above says why) */
  for (size_t k = 0; k < far && e == cudaSuccess; k++) {
    const int ek = (int)(k % D);
#define SLOT_IN(r) ((int)((recvd0[r] + k) % D))  /* chunk k from r */
#define SLOT_OUT(t) ((int)((sent0[t] + k) % D))  /* chunk k to t */
    if (k < mine) {
      /* My shard's chunk k: every peer's contribution (first halves), then
       * the reduce, then the halves go back to the peers. */
      const char *src[P2PK_COLL_MAX_RANKS];
      src[me] = (const char *)send + (soff[me] + k * K) * es;
      for (int r = 0; r < n; r++) {
        if (r == me) continue;
        take(&bs, &CTRL(me)->cep_full[r][SLOT_IN(r)], &CTRL(me)->cep_hdr[r][SLOT_IN(r)], hv, r);
        src[r] = land(c, r, me, SLOT_IN(r));
      }
      e = flush(&bs);
      tr_mark(c, stream, "took", (long)k);
      const size_t lb = p2pk_ce_part(slen[me], k, K) * es;
      char *out = (char *)recv + (soff[me] + k * K) * es;
      if (e == cudaSuccess) e = p2pk_ce_reduce_chunk(c, dtype, op, src, out, lb, stream);
      tr_mark(c, stream, "out", (long)k);
      if (e == cudaSuccess) e = cudaEventRecord(c->cep_ev[V_RED][ek], stream);
      for (int r = 0; r < n; r++)
        if (r != me && pout) release(c, &bs, r, SLOT_IN(r));
        else if (r != me) add(&bs, P2PK_CEP_POST, &CTRL(r)->cep_busy[me][SLOT_IN(r)], 0, NULL, 0, r);
      /* The result to every peer, into the second half of its slot for me
       * (direct: into its output, once it said the output is free). */
      for (int t = 0; t < n; t++)
        if (t != me && !pout) claim(&bw, &CTRL(me)->cep_rbusy[t][SLOT_OUT(t)], t);
        else if (t != me && k == 0) take(&bw, &CTRL(me)->cep_rdy[t], NULL, 0, t);
      if (e == cudaSuccess) e = flush(&bw);
      if (e == cudaSuccess) e = cudaEventRecord(c->cep_ev[V_GCR][ek], bw.s);
      if (e == cudaSuccess) e = cudaStreamWaitEvent(g, c->cep_ev[V_GCR][ek], 0);
      if (e == cudaSuccess) e = cudaStreamWaitEvent(g, c->cep_ev[V_RED][ek], 0);
      tr_mark(c, g, "gpush", (long)k);
      for (int t = 0; t < n && e == cudaSuccess; t++)
        if (t != me && lb)
          e = cudaMemcpyAsync(pout ? pout[t] + (soff[me] + k * K) * es : land(c, me, t, SLOT_OUT(t)) + half,
                              out, lb, cudaMemcpyDefault, g);
      tr_mark(c, g, "gpushed", (long)k);
      /* The posts only after P2 waits for the copies. */
      if (e == cudaSuccess) e = cudaEventRecord(c->cep_ev[V_GCP][ek], g);
      if (e == cudaSuccess) e = cudaStreamWaitEvent(bp.s, c->cep_ev[V_GCP][ek], 0);
      for (int t = 0; t < n; t++)
        if (t != me && !pout) add(&bp, P2PK_CEP_POST, &CTRL(t)->cep_done[me][SLOT_OUT(t)], 1, NULL, 0, t);
        else if (t != me && k + 1 == mine) add(&bp, P2PK_CEP_POST, &CTRL(t)->cep_fin[me], 1, NULL, 0, t);
      if (e == cudaSuccess) e = flush(&bp);
    }
    /* Each owner's result of chunk k, out of the slot's second half into my
     * output (on its own stream, so my reduces never wait for it). */
    for (int t = 0; t < n && e == cudaSuccess && !pout; t++) {
      if (t == me || k >= nchunks(slen[t], K)) continue;
      take(&br, &CTRL(me)->cep_done[t][SLOT_IN(t)], NULL, 0, t);
      e = flush(&br);
      if (e == cudaSuccess)
        e = copy_out(c, dtype, land(c, t, me, SLOT_IN(t)) + half, (char *)recv + (soff[t] + k * K) * es,
                     p2pk_ce_part(slen[t], k, K) * es, R);
      tr_mark(c, R, "rout", (long)k);
      add(&br, P2PK_CEP_POST, &CTRL(t)->cep_rbusy[me][SLOT_IN(t)], 0, NULL, 0, t);
    }
#undef SLOT_IN
#undef SLOT_OUT
  }
  /* Direct: every owner's results landed in my output. */
  for (int t = 0; t < n && pout; t++)
    if (t != me && slen[t]) take(&bs, &CTRL(me)->cep_fin[t], NULL, 0, t);
  if (e == cudaSuccess) e = flush(&bs);
  if (e == cudaSuccess) e = flush(&br);
  if (e == cudaSuccess) e = cudaEventRecord(c->sce_ev[E_RECV], R);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(stream, c->sce_ev[E_RECV], 0);
  if (e == cudaSuccess && mine) e = cudaEventRecord(c->sce_ev[E_GATHER], g);
  if (e == cudaSuccess && mine) e = cudaStreamWaitEvent(stream, c->sce_ev[E_GATHER], 0);
  /* The result posts too (kernels: join_side says why). */
  if (e == cudaSuccess && mine) e = cudaEventRecord(c->sce_ev[E_POST2], bp.s);
  if (e == cudaSuccess && mine) e = cudaStreamWaitEvent(stream, c->sce_ev[E_POST2], 0);
  if (e == cudaSuccess && np) e = join_side(c, stream, 0);
  /* The pairs' slot turns, even on an error (the communicator is then
   * broken anyway). */
  for (int t = 0; t < n; t++)
    if (t != me) c->cep_sent[t] += span[t], c->cep_recvd[t] += span[t];
  if (e == cudaSuccess) log_once(c, P2PK_COLL_ALL_REDUCE, "all_reduce", count * es, K * es, pout != NULL);
  return e;
}

/* Whether `stream` is capturing (c->cep_cap, for this call). */
static cudaError_t note_capture(struct p2pkit_comm *c, cudaStream_t stream) {
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  cudaError_t e = cudaStreamIsCapturing(stream, &cs);
  c->cep_cap = cs != cudaStreamCaptureStatusNone;
  return e;
}

static cudaError_t a2a_mp(struct p2pkit_comm *c, const void *send, void *recv, size_t count,
                          p2pkit_dtype_t dtype, cudaStream_t stream, int gather);

static cudaError_t cep_collective(struct p2pkit_comm *c, int kind, const void *send, void *recv,
                                  size_t count, p2pkit_dtype_t dtype, p2pkit_redop_t op, int root,
                                  cudaStream_t stream);

cudaError_t p2pk_cep_collective(struct p2pkit_comm *c, int kind, const void *send, void *recv,
                                size_t count, p2pkit_dtype_t dtype, p2pkit_redop_t op, int root,
                                cudaStream_t stream, int capturing) {
  c->cep_cap = capturing != 0;
  tr_begin(c, stream, p2pk_coll_name(kind));
  cudaError_t e = kind == P2PK_COLL_ALL_REDUCE ? allreduce_mp(c, send, recv, count, dtype, op, stream, NULL)
                  : kind == P2PK_COLL_ALL_TO_ALL || kind == P2PK_COLL_ALL_GATHER
                      ? a2a_mp(c, send, recv, count, dtype, stream, kind == P2PK_COLL_ALL_GATHER)
                  : cep_collective(c, kind, send, recv, count, dtype, op, root, stream);
  tr_end(c, stream);
  return e;
}

/* Reduce-scatter, reduce and broadcast (the file's head has the picture). */
static cudaError_t cep_collective(struct p2pkit_comm *c, int kind, const void *send, void *recv,
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
  const size_t K = chunk_elems(c, most * es, es, cap), CB = K * es;
  const uint64_t hv = header(kind, count, dtype, op, root);
  /* Who pushes to whom: everyone to every owner, or the root alone. */
  push_t pu[P2PK_COLL_MAX_RANKS];
  int np = 0, nsrc = 0, srcs[P2PK_COLL_MAX_RANKS];
  for (int t = 0; t < n; t++) {
    if (t == me || !slen[t] || (bcast && me != root)) continue;
    pu[np++] = (push_t){t, (const char *)send + soff[t] * es, slen[t]};
  }
  for (int r = 0; r < n && slen[me]; r++)
    if (r != me && (!bcast || r == root)) srcs[nsrc++] = r;
  cudaError_t e = start(c, stream, np > 0, 1, 0);
  if (e == cudaSuccess && np) e = pushes(c, pu, np, K, es, hv, 1, 1);
  /* The broadcast root's own copy, beside its pushes: a kernel, not a copy
   * engine, which would slow the pushes (1 GiB out of place 3365 us
   * against 2937 in place); own_copy says how wide. */
  if (e == cudaSuccess && bcast && me == root && send != recv)
    e = own_copy(c, dtype, send, recv, count * es, stream);
  /* My shard: take every source's chunk, reduce (or copy it out), release. */
  const size_t mine = nchunks(slen[me], K);
  batch_t bs;
  batch(&bs, c, stream);
  for (size_t k = 0; k < mine && e == cudaSuccess; k++) {
    int sl[P2PK_COLL_MAX_RANKS];
    for (int i = 0; i < nsrc; i++) {
      const int r = srcs[i];
      sl[r] = (int)((c->cep_recvd[r] + k) % D);
      take(&bs, &CTRL(me)->cep_full[r][sl[r]], &CTRL(me)->cep_hdr[r][sl[r]], hv, r);
    }
    e = flush(&bs);
    tr_mark(c, stream, "took", (long)k);
    const size_t lb = p2pk_ce_part(slen[me], k, K) * es;
    if (bcast) {
      if (e == cudaSuccess)
        e = copy_out(c, dtype, land(c, root, me, sl[root]), (char *)recv + k * CB, lb, stream);
    } else {
      const char *src[P2PK_COLL_MAX_RANKS];
      for (int r = 0; r < n; r++)
        src[r] = r == me ? (const char *)send + (soff[me] + k * K) * es : land(c, r, me, sl[r]);
      if (e == cudaSuccess && lb)
        e = p2pk_ce_reduce_chunk(c, dtype, op, src, (char *)recv + k * CB, lb, stream);
    }
    tr_mark(c, stream, "out", (long)k);
    for (int i = 0; i < nsrc; i++) release(c, &bs, srcs[i], sl[srcs[i]]);
  }
  if (e == cudaSuccess) e = flush(&bs);
  for (int i = 0; i < nsrc; i++) c->cep_recvd[srcs[i]] += mine;
  for (int i = 0; i < np; i++) c->cep_sent[pu[i].peer] += nchunks(pu[i].len, K);
  if (e == cudaSuccess && np) e = join_side(c, stream, 1);
  if (e == cudaSuccess) log_once(c, kind, p2pk_coll_name(kind), count * es, CB, 0);
  return e;
}

/* Send/recv's chunk for a message of `bytes`: P2PKIT_CE_CHUNK, else half
 * the message within 16 MiB and a whole slot (2x H200: 96 MiB chunks 1465.8 us at 512 MiB and 2869.1 at 1 GiB against
 * 64 MiB's 1479.2 and 2880.4; each chunk costs the link a few us). Both
 * ends compute it from the size alone. */
static size_t p2p_chunk(const struct p2pkit_comm *c, size_t bytes) {
  const size_t slot = c->lay.cep_slot, lo = (size_t)16 << 20;
  if (p2pk_param_size("P2PKIT_CE_CHUNK")) return chunk_elems(c, bytes, 1, slot);
  size_t b = bytes / 2;
  b = b < lo ? lo : b;
  return p2pk_sce_chunk_elems(b < slot ? b : slot, 1);
}

/* Send/recv with a process per GPU straight into a registered receive
 * buffer ("straight in"; dmbox.h has the host side). For each call over
 * the copy engines (number q of the pair, both ends counting alike):
 * - the receiver's host describes its buffer (registration and offset;
 *   with P2PKIT_SENDRECV_MAP its allocation; or "no") and never waits for
 *   that;
 * - the sender's host waits for the description up to its patience
 *   (P2PKIT_SENDRECV_DIRECT_WAIT_US) and decides: straight in when the
 *   description names a registration it maps (or an allocation it maps on
 *   demand) and the sizes agree;
 * - the receiver's host waits for the decision up to its patience, then
 *   decides the slots itself: one decision per call, whoever comes first;
 * - straight in: the receiver's stream posts rdy at the sender (its buffer
 *   is free), takes the first chunk's full flag with the header marked
 *   P2PK_CEP_HDR_DIRECT and releases that slot; the sender claims the
 *   first chunk's slot whole, as a push would, takes rdy, copies the whole
 *   message once into the IPC-mapped buffer and sets the flag, marked;
 * - the slots: as ever.
 * Every flag returns to 0, so a CUDA graph replays either way; both ends
 * advance their slot turns by the call's chunks either way.
 *
 * Why: through the slots a call pays ~3.5 us a chunk boundary and the last
 * 96 MiB chunk's copy out (~95 us) after the link goes quiet. Straight in,
 * decided once per call, 1 GiB took 2763 us against 2863 through the
 * slots on 2x H200 (1.08x NCCL registered alike; under a graph 2756).
 * By default registered buffers only: mapping another
 * buffer on the fly leaves a peer mapping memory its owner may free
 * (undefined for CUDA IPC); P2PKIT_SENDRECV_MAP is the opt-in for callers
 * who promise not to (recvmap.c). */

/* How long to wait on the host for peer p this call: the full patience,
 * or none for the next 16 calls after one that waited in vain. */
#define DMB_REST 16
static uint64_t patience(struct p2pkit_comm *c, uint32_t *rest) {
  if (*rest) {
    (*rest)--;
    return 0;
  }
  return c->dmb_wait_ns;
}

/* A host wait for a peer that began at t0 (0: none) is over. */
static void waited(struct p2pkit_comm *c, uint64_t t0) {
  if (!t0) return;
  const uint64_t w = p2pk_now_ns() - t0;
  c->dmb_wait_ns_sum += w;
  if (w > c->dmb_wait_max_ns) c->dmb_wait_max_ns = w;
}

static void missed(struct p2pkit_comm *c, uint32_t *rest, int p, uint64_t q, const char *what) {
  if (!c->dmb_wait_ns || *rest) return;
  *rest = DMB_REST;
  if (c->dmb_missed++ < 4)
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): call %llu with rank %d: %s within %llu us; through "
              "the landing slots (the pair's next %d calls wait no more)", c->rank, c->device,
              (unsigned long long)q, p, what, (unsigned long long)(c->dmb_wait_ns / 1000), DMB_REST);
}

/* The receiver, call q from r: describe its buffer (straight in only into
 * a registration, or with P2PKIT_SENDRECV_MAP into any allocation it can
 * share, and only if `may`; "no" otherwise); 1 if it described one. Never
 * waits. */
static int dmb_describe(struct p2pkit_comm *c, int r, const char *buf, size_t bytes, uint64_t q,
                        int may) {
  p2pk_dmb_desc d;
  memset(&d, 0, sizeof d);
  d.bytes = bytes;
  const p2pk_reg *g = c->dmb_on && may ? p2pk_reg_holding(c, buf, bytes) : NULL;
  if (g) d.off = (uint64_t)(buf - g->buf), d.reg = (uint64_t)g->id + 1;
  const int any = g || (c->dmb_on && may && p2pk_map_describe(c, buf, bytes, &d));
  p2pk_dmb_post(p2pk_dmb_at(c->dmb, c->nranks, r, c->rank, q), q, &d);
  return any;
}

/* The receiver, call q from r, after its sends decided: hear the way
 * (waiting for it only when it described a buffer), or choose the slots:
 * 1 straight in, 0 the slots (counted in dmb_rhow when described). */
static int dmb_hear(struct p2pkit_comm *c, int r, uint64_t q, int described) {
  int chose = 0;
  const uint64_t w = described ? patience(c, &c->dmb_rrest[r]) : 0;
  const uint64_t t0 = w ? p2pk_now_ns() : 0;
  const int how = p2pk_dmb_decision(p2pk_dmb_at(c->dmb, c->nranks, r, c->rank, q), q, w, &chose);
  waited(c, t0);
  if (w && chose) missed(c, &c->dmb_rrest[r], r, q, "its sender did not decide");
  if (described) c->dmb_rhow[how]++;
  return how;
}

/* The sender, call q to t: where it lands straight in (t's buffer as this
 * process maps it), or NULL: the slots (always unless `may`); counted in
 * dmb_direct / dmb_slots and, for the slots, dmb_why. */
static char *dmb_send(struct p2pkit_comm *c, int t, size_t bytes, uint64_t q, int may) {
  p2pk_dmb_entry *e = p2pk_dmb_at(c->dmb, c->nranks, c->rank, t, q);
  p2pk_dmb_desc d;
  const int ask = c->dmb_on && may;
  const uint64_t w = ask ? patience(c, &c->dmb_rest[t]) : 0;
  const uint64_t t0 = w ? p2pk_now_ns() : 0;
  const int got = ask ? p2pk_dmb_take(e, q, w, &d) : -1;
  waited(c, t0);
  if (got == 0) missed(c, &c->dmb_rest[t], t, q, "its receiver's description did not come");
  const p2pk_reg *g = got == 1 && d.reg && d.bytes == bytes ? p2pk_reg_numbered(c, d.reg - 1) : NULL;
  if (g && (!g->peer[t] || d.off > g->bytes || bytes > g->bytes - d.off)) g = NULL;
  /* Not registered but described whole (P2PKIT_SENDRECV_MAP): mapped here. */
  char *dst = g ? g->peer[t] + d.off : got == 1 ? p2pk_map_peer(c, t, &d, bytes) : NULL;
  const int straight = p2pk_dmb_decide(e, q, dst != NULL) && dst;
  /* Why not straight in (P2PK_DMB_WHY_*), counted for the destroy line. */
  const int why = straight ? -1
                  : !ask ? P2PK_DMB_WHY_NOT_ASKED
                  : got == 0 ? P2PK_DMB_WHY_LATE
                  : got < 0 ? P2PK_DMB_WHY_GONE
                  : !d.reg && !d.bufid ? P2PK_DMB_WHY_NOT_REGISTERED
                  : d.bytes != bytes ? P2PK_DMB_WHY_SIZE
                  : !dst ? P2PK_DMB_WHY_NOT_MAPPED
                  : P2PK_DMB_WHY_RECEIVER_CHOSE;
  if (why >= 0) c->dmb_why[why]++;
  if (straight) c->dmb_direct++, c->dmb_mapped += !g;
  else c->dmb_slots++;
  return straight ? dst : NULL;
}

/* One call's agreement on its straight-in transfers, in the order that
 * never waits on itself: every receive describes its buffer first (never
 * waiting for that), then every send decides (waiting for its receiver's
 * description), then every receive hears its way (waiting for its
 * sender's decision). rv[i] / sd[j]: the call's receives and sends with a
 * peer over the copy engines (buf, bytes); `may` 0: none straight in
 * (each is still numbered, both ends counting alike). rin[i]: receive i
 * straight in; sdst[j]: where send j lands straight in, or NULL. Without
 * the rings (c->dmb NULL) nothing is numbered and all go through the
 * slots. */
typedef struct {
  int peer;
  const char *buf;
  size_t bytes;
} dmb_op;

static void dmb_agree(struct p2pkit_comm *c, const dmb_op *rv, int nr, const dmb_op *sd, int ns,
                      int may, int *rin, char **sdst) {
  uint64_t q[P2PK_P2P_MAX_OPS];
  for (int i = 0; i < nr; i++) rin[i] = 0;
  for (int j = 0; j < ns; j++) sdst[j] = NULL;
  if (!c->dmb) return;
  for (int i = 0; i < nr; i++) {
    q[i] = c->dmb_recvd[rv[i].peer]++;
    rin[i] = dmb_describe(c, rv[i].peer, rv[i].buf, rv[i].bytes, q[i], may);
  }
  for (int j = 0; j < ns; j++) sdst[j] = dmb_send(c, sd[j].peer, sd[j].bytes, c->dmb_sent[sd[j].peer]++, may);
  for (int i = 0; i < nr; i++) rin[i] = dmb_hear(c, rv[i].peer, q[i], rin[i]);
}

/* A send straight in (to t, header hv): on W the first chunk's slot
 * claimed whole, as a push would, and t's rdy taken; the copy on the side
 * stream; on P the first chunk's full flag with the marked header. */
static cudaError_t push_straight(struct p2pkit_comm *c, int t, const char *src, char *dst,
                                 size_t bytes, uint64_t hv) {
  const int me = c->rank, s = (int)(c->cep_sent[t] % c->lay.cep_depth);
  cudaStream_t side = c->ce_side;
  batch_t bw, bp;
  batch(&bw, c, c->cep_stream[S_WAIT]);
  batch(&bp, c, c->cep_stream[S_POST]);
  claim(&bw, &CTRL(me)->cep_busy[t][s], t);
  claim(&bw, &CTRL(me)->cep_rbusy[t][s], t);
  take(&bw, &CTRL(me)->cep_rdy[t], NULL, 0, t);
  cudaError_t e = flush(&bw);
  if (e == cudaSuccess) e = cudaEventRecord(c->cep_ev[V_CR][0], bw.s);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(side, c->cep_ev[V_CR][0], 0);
  tr_mark(c, side, "push", 0);
  if (e == cudaSuccess) e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, side);
  tr_mark(c, side, "pushed", 0);
  if (e == cudaSuccess) e = cudaEventRecord(c->cep_ev[V_CP][0], side);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(bp.s, c->cep_ev[V_CP][0], 0);
  add(&bp, P2PK_CEP_POST, &CTRL(t)->cep_full[me][s], 1, &CTRL(t)->cep_hdr[me][s],
      hv ^ P2PK_CEP_HDR_DIRECT, t);
  if (e == cudaSuccess) e = flush(&bp);
  if (e == cudaSuccess) e = cudaEventRecord(c->sce_ev[E_SIDE], side);
  if (e == cudaSuccess) e = cudaEventRecord(c->sce_ev[E_POST], bp.s);
  return e;
}

/* A receive straight in (from r, header hv, nch chunks' slot turns), on
 * bs's stream: the first chunk's full flag with the marked header, then
 * its slot released (nothing landed in it). */
static cudaError_t take_straight(struct p2pkit_comm *c, batch_t *bs, int r, uint64_t hv, size_t nch) {
  const int me = c->rank, s = (int)(c->cep_recvd[r] % c->lay.cep_depth);
  take(bs, &CTRL(me)->cep_full[r][s], &CTRL(me)->cep_hdr[r][s], hv ^ P2PK_CEP_HDR_DIRECT, r);
  release(c, bs, r, s);
  c->cep_recvd[r] += nch;
  return flush(bs);
}

/* All-to-all with a process per GPU, chunk by chunk (K, send/recv's
 * chunk for a block of B bytes): chunk k of my block t pushed into rank
 * t's landing slots (pushes(), one chunk per call), then chunk k of each
 * peer's block for me taken and copied out of my slots into my output,
 * then chunk k of my own block copied across (out of place). In place my
 * output's block t is my input's block t, which my pushes to t read: each
 * chunk's copies out wait for my pushes of that chunk (the event pushes()
 * recorded after them), so no byte is overwritten before it left. Both
 * ranks take this path whatever their placement, so they always agree;
 * from 256 MiB per peer by default (ce_p2p.c, mp_default).
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
 * too. Its threshold: ce_p2p.c's mp_default. */
static cudaError_t a2a_mp(struct p2pkit_comm *c, const void *send, void *recv, size_t count,
                          p2pkit_dtype_t dtype, cudaStream_t stream, int gather) {
  const int n = c->nranks, me = c->rank;
  const uint64_t D = c->lay.cep_depth;
  const size_t B = count * p2pkit_dtype_size(dtype), K = p2p_chunk(c, B), nch = nchunks(B, K);
  const char *in = send;
  char *out = recv;
  /* My block for t (all-gather: the same for every t). */
#define BLOCK_FOR(t) (in + (gather ? 0 : (size_t)(t) * B))
  const int in_place = (const char *)BLOCK_FOR(me) == out + (size_t)me * B;
  /* All-to-all in place: my pushes read what my copies out overwrite. */
  const int overlap = !gather && in_place;
  const int kind = gather ? P2PK_COLL_ALL_GATHER : P2PK_COLL_ALL_TO_ALL;
  const uint64_t hv = header(kind, count, dtype, 0, 0);
  /* Straight in: describe my output's blocks, decide my sends, hear my
   * receives (send/recv's order). */
  char *sdst[P2PK_COLL_MAX_RANKS]; /* my block t straight into t's output, or NULL */
  int sin[P2PK_COLL_MAX_RANKS];    /* r's block straight into my output */
  int any = 0;
  {
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
  cudaError_t e = start(c, stream, 1, 1, 0);
  cudaStream_t R = c->cep_stream[S_RECV];
  if (e == cudaSuccess && !in_place) e = cudaStreamWaitEvent(R, c->sce_ev[E_START], 0);
  if (e == cudaSuccess && !in_place)
    e = own_copy(c, P2PKIT_UINT8, BLOCK_FOR(me), out + (size_t)me * B, B, R);
  if (e == cudaSuccess && !in_place) e = cudaEventRecord(c->sce_ev[E_RECV], R);
  batch_t bs;
  batch(&bs, c, stream);
  /* Blocks straight in: my output's block r is free from here on; my
   * blocks for such peers go first, whole. */
  for (int r = 0; r < n; r++)
    if (sin[r]) add(&bs, P2PK_CEP_POST, &CTRL(r)->cep_rdy[me], 1, NULL, 0, r);
  if (e == cudaSuccess) e = flush(&bs);
  for (int t = 0; t < n && e == cudaSuccess; t++)
    if (sdst[t]) {
      e = push_straight(c, t, BLOCK_FOR(t), sdst[t], B, hv);
      c->cep_sent[t] += nch;
      any = 1;
    }
  for (size_t k = 0; k < nch && e == cudaSuccess; k++) {
    const size_t len = p2pk_ce_part(B, k, K), at = k * K;
    push_t pu[P2PK_COLL_MAX_RANKS];
    int np = 0;
    for (int t = 0; t < n; t++)
      if (t != me && !sdst[t]) pu[np++] = (push_t){t, BLOCK_FOR(t) + at, len};
    if (np) e = pushes(c, pu, np, K, 1, hv, 1, 1);
    for (int i = 0; i < np; i++) c->cep_sent[pu[i].peer]++;
    if (e == cudaSuccess && overlap) e = cudaStreamWaitEvent(stream, c->cep_ev[V_CP][0], 0);
    for (int r = 0; r < n && e == cudaSuccess; r++) {
      if (r == me || sin[r]) continue;
      const int s = (int)(c->cep_recvd[r] % D);
      take(&bs, &CTRL(me)->cep_full[r][s], &CTRL(me)->cep_hdr[r][s], hv, r);
      e = flush(&bs);
      tr_mark(c, stream, "took", (long)k);
      if (e == cudaSuccess)
        e = copy_out(c, P2PKIT_UINT8, land(c, r, me, s), out + (size_t)r * B + at, len, stream);
      tr_mark(c, stream, "out", (long)k);
      release(c, &bs, r, s);
      c->cep_recvd[r]++;
    }
  }
  for (int r = 0; r < n && e == cudaSuccess; r++)
    if (sin[r]) e = take_straight(c, &bs, r, hv, nch), any = 1;
  if (e == cudaSuccess) e = flush(&bs);
  if (e == cudaSuccess) e = join_side(c, stream, 1);
  if (e == cudaSuccess && !in_place) e = cudaStreamWaitEvent(stream, c->sce_ev[E_RECV], 0);
  if (e == cudaSuccess) log_once(c, kind, p2pk_coll_name(kind), B, K, any);
  return e;
#undef BLOCK_FOR
}

cudaError_t p2pk_cep_p2p(struct p2pkit_comm *c, const p2pk_cep_xfer *ops, int nops,
                         cudaStream_t stream) {
  cudaError_t ce = note_capture(c, stream);
  if (ce != cudaSuccess) return ce;
  const int me = c->rank;
  const uint64_t D = c->lay.cep_depth;
  tr_begin(c, stream, "send/recv");
  push_t pu[P2PK_P2P_MAX_OPS], dpu[P2PK_P2P_MAX_OPS];
  char *dst[P2PK_P2P_MAX_OPS];
  int np = 0, nd = 0, direct = 0;
  /* Process per GPU: every receive describes itself first (never waiting
   * for that), then the sends decide, then the receives hear (a rank's
   * sends never wait for its own receives). */
  char *straight[P2PK_P2P_MAX_OPS]; /* pu[i]'s receiver's buffer, or NULL */
  int sin[P2PK_P2P_MAX_OPS];        /* ops[i]: a receive straight in */
  dmb_op rv[P2PK_P2P_MAX_OPS], sd[P2PK_P2P_MAX_OPS];
  int at[P2PK_P2P_MAX_OPS], rin[P2PK_P2P_MAX_OPS], nr = 0;
  for (int i = 0; i < nops; i++) {
    sin[i] = 0;
    if (ops[i].peer_buf) direct = 1;
    if (ops[i].peer_buf) {
      if (ops[i].send) dst[nd] = ops[i].peer_buf, dpu[nd++] = (push_t){ops[i].peer, ops[i].buf, ops[i].bytes};
    } else if (ops[i].send) {
      sd[np] = (dmb_op){ops[i].peer, ops[i].buf, ops[i].bytes};
      pu[np++] = (push_t){ops[i].peer, ops[i].buf, ops[i].bytes};
    } else {
      at[nr] = i;
      rv[nr++] = (dmb_op){ops[i].peer, ops[i].buf, ops[i].bytes};
    }
  }
  dmb_agree(c, rv, nr, sd, np, 1, rin, straight);
  for (int k = 0; k < nr; k++) sin[at[k]] = rin[k];
  /* Chunks of bytes (es 1, 16-byte multiples) from the size alone, so both
   * ends agree; the header carries the size. */
  cudaError_t e = start(c, stream, np + nd > 0, 1, 0);
  batch_t bs;
  batch(&bs, c, stream);
  /* Receives straight in: my buffer is free from here on. */
  for (int i = 0; i < nops; i++)
    if (!ops[i].send && (ops[i].peer_buf || sin[i]))
      add(&bs, P2PK_CEP_POST, &CTRL(ops[i].peer)->cep_rdy[me], 1, NULL, 0, ops[i].peer);
  if (e == cudaSuccess) e = flush(&bs);
  for (int i = 0; i < np && e == cudaSuccess; i++) {
    const size_t K = p2p_chunk(c, pu[i].len);
    const uint64_t hv = header(SENDRECV, pu[i].len, 0, 0, me);
    if (straight[i]) {
      e = push_straight(c, pu[i].peer, pu[i].src, straight[i], pu[i].len, hv);
      direct = 1;
    } else {
      e = pushes(c, &pu[i], 1, K, 1, hv, 1, 1);
    }
    c->cep_sent[pu[i].peer] += nchunks(pu[i].len, K);
  }
  if (e == cudaSuccess && nd) e = direct_pushes(c, dpu, dst, nd);
  for (int i = 0; i < nops && e == cudaSuccess; i++) {
    if (ops[i].send || ops[i].peer_buf) continue;
    const int r = ops[i].peer;
    const size_t K = p2p_chunk(c, ops[i].bytes), nch = nchunks(ops[i].bytes, K);
    const uint64_t hv = header(SENDRECV, ops[i].bytes, 0, 0, r);
    if (sin[i]) {
      e = take_straight(c, &bs, r, hv, nch);
      tr_mark(c, stream, "took", 0);
      continue;
    }
    for (size_t k = 0; k < nch && e == cudaSuccess; k++) {
      const int s = (int)((c->cep_recvd[r] + k) % D);
      take(&bs, &CTRL(me)->cep_full[r][s], &CTRL(me)->cep_hdr[r][s], hv, r);
      e = flush(&bs);
      tr_mark(c, stream, "took", (long)k);
      if (e == cudaSuccess)
        e = copy_out(c, P2PKIT_UINT8, land(c, r, me, s), ops[i].buf + k * K, p2pk_ce_part(ops[i].bytes, k, K),
                     stream);
      tr_mark(c, stream, "out", (long)k);
      release(c, &bs, r, s);
    }
    if (e == cudaSuccess) e = flush(&bs);
    c->cep_recvd[r] += nch;
  }
  /* One process under capture, straight in: the sender's push landed. */
  for (int i = 0; i < nops; i++)
    if (!ops[i].send && ops[i].peer_buf) take(&bs, &CTRL(me)->cep_fin[ops[i].peer], NULL, 0, ops[i].peer);
  if (e == cudaSuccess) e = flush(&bs);
  if (e == cudaSuccess && np + nd) e = join_side(c, stream, 1);
  tr_end(c, stream);
  if (e == cudaSuccess) {
    size_t b = 0;
    for (int i = 0; i < nops; i++) b = ops[i].bytes > b ? ops[i].bytes : b;
    log_once(c, SENDRECV, "send/recv", b, p2p_chunk(c, b), direct);
  }
  return e;
}

/* One rank's part of a call straight into the receivers' outputs (one
 * process under capture, every rank's call in one group: p2p.c's
 * ce_flush): tell every rank in `from` that my output is free (rdy), push
 * pu[i] into dst[i] once its receiver said so, copy my own part beside the
 * pushes (own_copy; none when own_src is own_dst), and wait until every
 * rank in `from` has pushed into mine (fin). */
static cudaError_t direct_call(struct p2pkit_comm *c, cudaStream_t stream, uint32_t from,
                               const push_t *pu, char *const *dst, int np, p2pkit_dtype_t dtype,
                               const void *own_src, void *own_dst, size_t own_bytes) {
  const int n = c->nranks, me = c->rank;
  cudaError_t e = start(c, stream, np > 0, 0, 0);
  batch_t bs;
  batch(&bs, c, stream);
  for (int t = 0; t < n; t++)
    if ((from >> t) & 1u) add(&bs, P2PK_CEP_POST, &CTRL(t)->cep_rdy[me], 1, NULL, 0, t);
  if (np) {
    if (e == cudaSuccess) e = flush(&bs);
    if (e == cudaSuccess) e = direct_pushes(c, pu, dst, np);
    if (e == cudaSuccess && own_src != own_dst)
      e = own_copy(c, dtype, own_src, own_dst, own_bytes, stream);
  }
  for (int t = 0; t < n; t++)
    if ((from >> t) & 1u) take(&bs, &CTRL(me)->cep_fin[t], NULL, 0, t);
  if (e == cudaSuccess) e = flush(&bs);
  if (e == cudaSuccess && np) e = join_side(c, stream, 0);
  return e;
}

/* Broadcast straight into every peer's output (pout; the file's head): the
 * root pushes to every peer and copies its own output beside; the others
 * hear only from the root. */
static cudaError_t bcast_direct(struct p2pkit_comm *c, const void *send, void *recv, size_t bytes,
                                p2pkit_dtype_t dtype, int root, cudaStream_t stream,
                                char *const *pout) {
  const int n = c->nranks, me = c->rank;
  push_t pu[P2PK_COLL_MAX_RANKS];
  char *dst[P2PK_COLL_MAX_RANKS];
  int np = 0;
  for (int t = 0; t < n && me == root; t++)
    if (t != me) dst[np] = pout[t], pu[np++] = (push_t){t, (const char *)send, bytes};
  cudaError_t e = direct_call(c, stream, me == root ? 0 : 1u << root, pu, dst, np, dtype, send,
                              recv, bytes);
  if (e == cudaSuccess) log_once(c, P2PK_COLL_BROADCAST, "broadcast", bytes, bytes, 1);
  return e;
}

/* All-to-all straight into every peer's output (out of place: p2p.c's
 * ce_flush sends in-place calls to the kernel): every rank is root and
 * receiver of a broadcast at once, its block t going into rank t's output
 * at its own place. All-gather (gather 1): the same with my one block for
 * every peer, in place too (my block at my place, which no peer writes). */
static cudaError_t a2a_direct(struct p2pkit_comm *c, const void *send, void *recv, size_t bytes,
                              p2pkit_dtype_t dtype, cudaStream_t stream, char *const *pout,
                              int gather) {
  const int n = c->nranks, me = c->rank;
  push_t pu[P2PK_COLL_MAX_RANKS];
  char *dst[P2PK_COLL_MAX_RANKS];
  int np = 0;
  for (int t = 0; t < n; t++)
    if (t != me) {
      dst[np] = pout[t] + (size_t)me * bytes;
      pu[np++] = (push_t){t, (const char *)send + (gather ? 0 : (size_t)t * bytes), bytes};
    }
  const uint32_t peers = p2pk_peer_mask(n, me);
  cudaError_t e = direct_call(c, stream, peers, pu, dst, np, dtype,
                              (const char *)send + (gather ? 0 : (size_t)me * bytes),
                              (char *)recv + (size_t)me * bytes, bytes);
  const int kind = gather ? P2PK_COLL_ALL_GATHER : P2PK_COLL_ALL_TO_ALL;
  if (e == cudaSuccess) log_once(c, kind, p2pk_coll_name(kind), bytes, bytes, 1);
  return e;
}

p2pkit_status_t p2pk_cep_direct(p2pk_ce_pending *const *set, int n, int kind) {
  char *pout[P2PK_COLL_MAX_RANKS];
  for (int r = 0; r < n; r++) pout[r] = set[r]->recv;
  cudaError_t e = cudaSuccess;
  int bad = 0;
  for (int r = 0; r < n && e == cudaSuccess; r++) {
    const p2pk_ce_pending *a = set[r];
    struct p2pkit_comm *c = a->c;
    bad = r;
    c->cep_cap = 1;
    e = cudaSetDevice(c->device);
    if (e != cudaSuccess) break;
    cudaStream_t st = (cudaStream_t)a->stream;
    e = kind == P2PK_COLL_ALL_REDUCE
            ? allreduce_mp(c, a->send, a->recv, a->count, a->dtype, a->op, st, pout)
        : kind == P2PK_COLL_ALL_TO_ALL || kind == P2PK_COLL_ALL_GATHER
            ? a2a_direct(c, a->send, a->recv, a->bytes, a->dtype, st, pout,
                         kind == P2PK_COLL_ALL_GATHER)
            : bcast_direct(c, a->send, a->recv, a->bytes, a->dtype, a->root, st, pout);
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    return p2pk_fail(P2PKIT_ERR_CUDA, "%s: rank %d (GPU %d): copy engines into the peers' outputs: %s",
                     p2pk_coll_name(kind), bad, set[bad]->c->device, cudaGetErrorString(e));
  }
  return P2PKIT_SUCCESS;
}

