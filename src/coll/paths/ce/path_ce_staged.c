/* SPDX-License-Identifier: BSD-3-Clause */
/* Copy-engine staged all-reduce of a communicator without P2P, from
 * P2PKIT_STAGED_CE_MIN bytes (16 MiB): one process driving every GPU, the
 * ranks' calls inside one group (first half of this file), or one process
 * per GPU (second half).
 *
 * Why: the staged kernels move data with SM stores and loads to mapped host
 * memory and reach ~36 GB/s each way on the 2x H200; copy engines reach ~47
 * each way at once (PCIe duplex 94.4 GB/s on one GPU): one process
 * 1.51-1.68x NCCL's SHM at 64-512 MiB against the kernel's 1.31-1.34x;
 * below 16 MiB the kernel was faster (docs/decisions/staged-copy-engine.md).
 *
 * Flow, per chunk k of the message (slot k % D, D = P2PKIT_STAGED_CE_DEPTH), one-shot:
 *   rank r, its side stream (ce_side):  in_r[k]      -> host_r[slot]        D2H
 *   rank t, its h2d stream (sce_h2d):   host_r[slot] -> buf_t[r][slot], r != t  H2D
 *   rank t, its own stream:             out_t[k] = in_t[k] op buf_t[r][slot] ... in rank order
 * host_r is rank r's part of the group's pinned staging region (its data
 * area, free whenever no staged kernel of an earlier call runs, which the
 * start events guarantee); buf_t is device memory made on first use. Every
 * rank reduces every element in rank order from the same bytes: the same bits
 * on every rank, as the kernels.
 *
 * Events (one set per rank, reused: every wait on a record is enqueued before
 * that event is recorded again):
 *   START     rank r's stream at the call; every side and h2d stream waits
 *             for every rank's, so no copy touches a buffer still in use.
 *   D2H[s]    host_r[s] filled: the peers' h2d streams wait for it before
 *             reading it, and r's own stream before the reduce writes out_r
 *             (in place, out_r[k] is in_r[k]).
 *   H2D[s]    buf_t[*][s] filled: t's stream waits before the reduce; every
 *             peer's side stream waits before refilling host_r[s] (chunk k+D).
 *   RED[s]    t's reduce of slot s done: t's h2d stream waits before refilling
 *             buf_t[*][s] (chunk k+D).
 * Each rank's stream ends after its last reduce (which waited for all of
 * that rank's own copies) and after every peer's last h2d copy (which read
 * this rank's host part, where its later staged kernels write); the next
 * call's START covers the host slots and device buffers. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll/paths/ce/ce_common.h"
#include "core/check.h"
#include "core/log.h"
#include "core/param.h"

enum { E_START = P2PK_CE_EV_START, E_D2H = 1, E_H2D = 1 + P2PK_SCE_DEPTH_MAX, E_RED = 1 + 2 * P2PK_SCE_DEPTH_MAX };

/* This path's state: logged once; process per GPU: chunks so far (the
 * same on every rank); chunks in flight (P2PKIT_STAGED_CE_DEPTH). */
typedef struct {
  int logged;
  uint64_t seq;
  int depth;
} staged_ce;
#define ST(c) ((staged_ce *)(c)->path_state[P2PK_PATH_CE_STAGED])

/* Elements per chunk: P2PKIT_STAGED_CE_CHUNK, at most `cap` bytes. */
static size_t chunk_within(size_t cap, size_t es) {
  size_t k = p2pk_sce_chunk_elems(p2pk_param_size("P2PKIT_STAGED_CE_CHUNK"), es);
  size_t kmax = p2pk_sce_chunk_elems(cap, es);
  return k < kmax ? k : kmax;
}

static void log_once(struct p2pkit_comm *c, size_t bytes, size_t nch, size_t cb, const char *how) {
  if (ST(c)->logged) return;
  ST(c)->logged = 1;
  P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): all_reduce of %zu B uses the copy engines through "
            "host memory, %zu chunks of %zu B (%s; P2PKIT_STAGED_CE_MIN=%zu)", c->rank, c->device,
            bytes, nch, cb, how, p2pk_param_size("P2PKIT_STAGED_CE_MIN"));
}

static p2pkit_status_t launch_group(p2pk_call *const *set, int n) {
  for (int r = 0; r < n; r++) set[r]->c->ce->cap = set[r]->grid_cap;
  const p2pk_call *a0 = set[0];
  const struct p2pkit_comm *c0 = a0->c;
  const size_t es = p2pkit_dtype_size(a0->dtype), count = a0->count;
  const size_t area = (size_t)c0->lay.stage_mailbox * P2PK_STAGE_MAILBOXES;
  const int D = ST(c0)->depth;
  const size_t K = chunk_within(area / (size_t)D, es);
  const size_t CB = K * es, nch = (count + K - 1) / K;
  const size_t need = (size_t)(n - 1) * (size_t)D * CB;
  int bad = 0;
  cudaError_t e = p2pk_ce_start(set, n, need, 0, &bad);
#define EV(r, i) (set[r]->c->ce->sev[i])
#define STREAM(r) ((cudaStream_t)set[r]->stream)
#define HOST(r, s) (c0->stage + (size_t)(r) * c0->lay.stage_stride + c0->lay.stage_data_off + (size_t)(s) * CB)
#define BUF(t, r, s) p2pk_ce_land(set[t]->c, r, D, s, CB)
  for (size_t k = 0; k < nch && e == cudaSuccess; k++) {
    const int s = (int)(k % (size_t)D);
    const size_t off = k * K, len = count - off < K ? count - off : K, lb = len * es;
    /* Every rank's chunk to its host slot. */
    for (int r = 0; r < n && e == cudaSuccess; r++) {
      bad = r;
      struct p2pkit_comm *c = set[r]->c;
      e = cudaSetDevice(c->device);
      for (int t = 0; k >= (size_t)D && t < n && e == cudaSuccess; t++)
        if (t != r) e = cudaStreamWaitEvent(c->ce->side, EV(t, E_H2D + s), 0);
      if (e == cudaSuccess)
        e = cudaMemcpyAsync(HOST(r, s), (const char *)set[r]->send + off * es, lb,
                            cudaMemcpyDeviceToHost, c->ce->side);
      if (e == cudaSuccess) e = cudaEventRecord(EV(r, E_D2H + s), c->ce->side);
    }
    /* Every rank takes its peers' chunks in and reduces. */
    for (int t = 0; t < n && e == cudaSuccess; t++) {
      bad = t;
      struct p2pkit_comm *c = set[t]->c;
      e = cudaSetDevice(c->device);
      if (e == cudaSuccess && k >= (size_t)D) e = cudaStreamWaitEvent(c->ce->h2d, EV(t, E_RED + s), 0);
      for (int r = 0; r < n && e == cudaSuccess; r++) {
        if (r == t) continue;
        e = cudaStreamWaitEvent(c->ce->h2d, EV(r, E_D2H + s), 0);
        if (e == cudaSuccess)
          e = cudaMemcpyAsync(BUF(t, r, s), HOST(r, s), lb, cudaMemcpyHostToDevice, c->ce->h2d);
      }
      if (e == cudaSuccess) e = cudaEventRecord(EV(t, E_H2D + s), c->ce->h2d);
      if (e == cudaSuccess) e = cudaStreamWaitEvent(STREAM(t), EV(t, E_H2D + s), 0);
      if (e == cudaSuccess) e = cudaStreamWaitEvent(STREAM(t), EV(t, E_D2H + s), 0);
      if (e == cudaSuccess) {
        const char *src[P2PK_COLL_MAX_RANKS];
        for (int r = 0; r < n; r++)
          src[r] = r == t ? (const char *)set[t]->send + off * es : BUF(t, r, s);
        e = p2pk_ce_reduce_chunk(c, set[t]->dtype, set[t]->op, src, (char *)set[t]->recv + off * es, lb,
                         STREAM(t));
      }
      if (e == cudaSuccess) e = cudaEventRecord(EV(t, E_RED + s), STREAM(t));
    }
  }
  /* A rank's later staged kernels write its host part, which the peers'
   * h2d streams read: every stream waits for every peer's last h2d copy
   * (each h2d stream runs in order, so its last event covers it all). */
  const int last = (int)((nch - 1) % (size_t)D);
  for (int r = 0; r < n && e == cudaSuccess; r++) {
    bad = r;
    e = cudaSetDevice(set[r]->c->device);
    for (int t = 0; t < n && e == cudaSuccess; t++)
      if (t != r) e = cudaStreamWaitEvent(STREAM(r), EV(t, E_H2D + last), 0);
  }
#undef EV
#undef STREAM
#undef HOST
#undef BUF
  if (e != cudaSuccess) {
    cudaGetLastError();
    return p2pk_fail(P2PKIT_ERR_CUDA, "all_reduce: rank %d (GPU %d): copy-engine staging: %s", bad,
                     set[bad]->c->device, cudaGetErrorString(e));
  }
  for (int r = 0; r < n; r++) log_once(set[r]->c, count * es, nch, CB, "one process, in a group");
  return P2PKIT_SUCCESS;
}

/* 2 .. P2PK_SCE_DEPTH_MAX: the registry refuses anything else. */
int p2pk_sce_depth(void) { return (int)p2pk_param_int("P2PKIT_STAGED_CE_DEPTH"); }

/* The chunk (4 KiB .. 64 MiB, the registry's range) rounded up to 4 KiB. */
size_t p2pk_sce_slot_bytes(void) {
  if (!p2pk_param_size("P2PKIT_STAGED_CE_MIN")) return 0;
  return (p2pk_param_size("P2PKIT_STAGED_CE_CHUNK") + 4095) & ~(size_t)4095;
}

/* ---- process per GPU --------------------------------------------------------
 * The same pipeline with each rank in its own process: the copies to and
 * from host memory go through this rank's own slots in its part of the
 * shared host region (stage_ce_off, apart from the staged kernels'
 * mailboxes), and what a peer did reaches this rank through the slot
 * counters in the host region, waited for by one-thread kernels with the
 * kernels' timeout and posted by stream memory operations (p2pk_cep_run of
 * path_ce_slots.c, which falls back to the kernels).
 * Chunks are numbered q = ST(c)->seq + k across calls, the same on every
 * rank; chunk q uses slot q % D. Per chunk:
 *   W stream:     wait until every peer read chunk q - D from my slot; record CR[s]
 *   side stream:  wait CR[s]; my chunk -> my slot (D2H); record D2H[s]
 *   P stream:     wait D2H[s]; post full = q + 1 (with the call's header)
 *   W2 stream:    wait until every peer's full >= q + 1; record FULL[s]
 *   h2d stream:   wait RED[s] (my reduce of chunk q - D: buf free) and
 *                 FULL[s]; their slots -> buf (H2D); record H2D[s]
 *   P2 stream:    wait H2D[s]; post read = q + 1 at every peer
 *   my stream:    wait H2D[s] and D2H[s]; reduce into out; record RED[s]
 * The copy streams hold only copies and event waits; the waits and posts
 * run beside them on their own streams (the step lists', ce_common.h), as
 * through the landing slots (cep_core.c): a kernel between two copies on one stream
 * leaves the copy engine idle for microseconds each time (~14 us a chunk
 * over P2P; here a process per GPU went from 1.19-1.29x NCCL at 128 MiB to
 * 1.51-1.62x on 2x H200). The
 * stream's last reduce waited for the last D2H and H2D, so once it ends the
 * input is no longer read; a later call's copies wait on the counters. */
enum { CE_WAIT_FULL, CE_WAIT_READ, CE_POST_FULL, CE_POST_READ };
enum { SS_POST = 0, SS_POST2 = 1, SS_WAIT = 2, SS_WAIT2 = 3 }; /* c->ce->step[] */
enum { SV_CR = 0, SV_FULL = 1, SV_POST = 2, SV_POST2 = 3 };       /* c->ce->step_ev[][slot] */

/* Rank r's part of the host region, as the GPU sees it. */
static p2pk_stage_ctrl *sctrl(const struct p2pkit_comm *c, int r) {
  return (p2pk_stage_ctrl *)(c->tmpl.stage + (size_t)r * c->lay.stage_stride);
}

/* One op on `stream` (p2pk_cep_run: a kernel, or memory operations for a
 * post): wait until every peer has filled its
 * slot (ce_full, comparing the header beside it) or has read mine
 * (ce_read[slot][p]), or post my ce_full (with the header) or my
 * ce_read[slot][me] at every peer. */
static cudaError_t ce_sync(struct p2pkit_comm *c, int kind, int slot, uint64_t v, uint64_t hdr,
                           cudaStream_t stream) {
  const int me = c->rank;
  p2pk_stage_ctrl *mine = sctrl(c, me);
  p2pk_cep_steps st;
  st.n = 0;
  if (kind == CE_POST_FULL) {
    st.s[st.n++] = (p2pk_cep_step){.ctr = &mine->ce_full[slot], .hdr = &mine->ce_hdr[slot],
                                   .v = v, .hv = hdr, .kind = P2PK_CEP_POST, .peer = me};
  } else {
    for (int p = 0; p < c->nranks; p++) {
      if (p == me) continue;
      p2pk_cep_step x = {.v = v, .peer = p};
      if (kind == CE_WAIT_FULL)
        x.kind = P2PK_CEP_WAIT, x.ctr = &sctrl(c, p)->ce_full[slot], x.hdr = &sctrl(c, p)->ce_hdr[slot], x.hv = hdr;
      else if (kind == CE_WAIT_READ)
        x.kind = P2PK_CEP_WAIT, x.ctr = &mine->ce_read[slot][p];
      else
        x.kind = P2PK_CEP_POST, x.ctr = &sctrl(c, p)->ce_read[slot][me];
      st.s[st.n++] = x;
    }
  }
  return p2pk_cep_run(c, &st, 1, stream);
}

/* A wait (ce_sync) in one launch on stream cep_stream[ws], ahead of the
 * copies: `copies` waits for the event it records. */
static cudaError_t ce_wait_ahead(struct p2pkit_comm *c, int kind, int slot, uint64_t v, uint64_t hdr,
                                 int ws, int ev, cudaStream_t copies) {
  cudaError_t e = ce_sync(c, kind, slot, v, hdr, c->ce->step[ws]);
  if (e == cudaSuccess) e = cudaEventRecord(c->ce->step_ev[ev][slot], c->ce->step[ws]);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(copies, c->ce->step_ev[ev][slot], 0);
  return e;
}

/* A post (ce_sync) in one launch on stream cep_stream[ps] once the copies
 * recorded `done`. */
static cudaError_t ce_post_after(struct p2pkit_comm *c, int kind, int slot, uint64_t v, uint64_t hdr,
                                 int ps, cudaEvent_t done) {
  cudaError_t e = cudaStreamWaitEvent(c->ce->step[ps], done, 0);
  if (e == cudaSuccess) e = ce_sync(c, kind, slot, v, hdr, c->ce->step[ps]);
  return e;
}

static cudaError_t allreduce_mp(struct p2pkit_comm *c, const void *send, void *recv,
                                size_t count, p2pkit_dtype_t dtype, p2pkit_redop_t op,
                                cudaStream_t stream) {
  const int n = c->nranks, me = c->rank;
  const size_t es = p2pkit_dtype_size(dtype);
  const size_t K = chunk_within(c->lay.stage_ce_slot, es);
  const size_t CB = K * es, nch = (count + K - 1) / K;
  const int D = ST(c)->depth;
  /* What the call is, for the peers to compare (a count, type or op that
   * differs fails the call as a mismatch instead of pairing wrong chunks). */
  const uint64_t hdr = ((uint64_t)count << 8) ^ ((uint64_t)dtype << 4) ^ (uint64_t)op ^ 0x5ce0000000000000ULL;
  cudaError_t e = p2pk_ce_prepare(c, (size_t)(n - 1) * (size_t)D * CB);
  for (int i = 0; i <= SS_WAIT2 && e == cudaSuccess; i++) e = p2pk_lazy_stream(&c->ce->step[i]);
  for (int s = 0; s < D && e == cudaSuccess; s++) {
    e = p2pk_lazy_event(&c->ce->step_ev[SV_CR][s]);
    if (e == cudaSuccess) e = p2pk_lazy_event(&c->ce->step_ev[SV_FULL][s]);
  }
  if (e == cudaSuccess) e = p2pk_lazy_event(&c->ce->step_ev[SV_POST][0]);
  if (e == cudaSuccess) e = p2pk_lazy_event(&c->ce->step_ev[SV_POST2][0]);
  if (e == cudaSuccess) e = cudaEventRecord(c->ce->sev[E_START], stream);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(c->ce->side, c->ce->sev[E_START], 0);
  /* This call's chunk size may differ from the last one's, so its slots of
   * buf overlap other slots of the last call: wait for all of its reduces. */
  if (e == cudaSuccess) e = cudaStreamWaitEvent(c->ce->h2d, c->ce->sev[E_START], 0);
#define HOST(r, s) (c->stage + (size_t)(r) * c->lay.stage_stride + c->lay.stage_ce_off + (size_t)(s) * c->lay.stage_ce_slot)
#define BUF(r, s) p2pk_ce_land(c, r, D, s, CB)
  const uint64_t q0 = ST(c)->seq;
  for (size_t k = 0; k < nch && e == cudaSuccess; k++) {
    const uint64_t q = q0 + k;
    const int s = (int)(q % (uint64_t)D);
    const size_t off = k * K, len = count - off < K ? count - off : K, lb = len * es;
    /* Mine to my slot once every peer read what it held; tell the peers. */
    if (q >= (uint64_t)D)
      e = ce_wait_ahead(c, CE_WAIT_READ, s, q - (uint64_t)D + 1, hdr, SS_WAIT, SV_CR, c->ce->side);
    if (e == cudaSuccess)
      e = cudaMemcpyAsync(HOST(me, s), (const char *)send + off * es, lb, cudaMemcpyDeviceToHost, c->ce->side);
    if (e == cudaSuccess) e = cudaEventRecord(c->ce->sev[E_D2H + s], c->ce->side);
    if (e == cudaSuccess) e = ce_post_after(c, CE_POST_FULL, s, q + 1, hdr, SS_POST, c->ce->sev[E_D2H + s]);
    /* The peers' slots to buf once they are full and my reduce of chunk
     * q - D (which read buf's slot s) is done; tell the peers. */
    if (e == cudaSuccess && q >= (uint64_t)D)
      e = cudaStreamWaitEvent(c->ce->h2d, c->ce->sev[E_RED + s], 0);
    if (e == cudaSuccess) e = ce_wait_ahead(c, CE_WAIT_FULL, s, q + 1, hdr, SS_WAIT2, SV_FULL, c->ce->h2d);
    for (int r = 0; r < n && e == cudaSuccess; r++)
      if (r != me) e = cudaMemcpyAsync(BUF(r, s), HOST(r, s), lb, cudaMemcpyHostToDevice, c->ce->h2d);
    if (e == cudaSuccess) e = cudaEventRecord(c->ce->sev[E_H2D + s], c->ce->h2d);
    if (e == cudaSuccess) e = ce_post_after(c, CE_POST_READ, s, q + 1, hdr, SS_POST2, c->ce->sev[E_H2D + s]);
    /* The reduce. */
    if (e == cudaSuccess) e = cudaStreamWaitEvent(stream, c->ce->sev[E_H2D + s], 0);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(stream, c->ce->sev[E_D2H + s], 0);
    if (e == cudaSuccess) {
      const char *src[P2PK_COLL_MAX_RANKS];
      for (int r = 0; r < n; r++) src[r] = r == me ? (const char *)send + off * es : BUF(r, s);
      e = p2pk_ce_reduce_chunk(c, dtype, op, src, (char *)recv + off * es, lb, stream);
    }
    if (e == cudaSuccess) e = cudaEventRecord(c->ce->sev[E_RED + s], stream);
  }
#undef HOST
#undef BUF
  /* The caller's stream ends after the posts too when they are kernels: a
   * kernel launched next on it could fill every multiprocessor while
   * waiting for a peer that still waits for one of them (path_ce_slots.c's
   * join_side). */
  for (int i = 0; i < 2 && e == cudaSuccess && !p2pk_cep_memops(c); i++) {
    e = cudaEventRecord(c->ce->step_ev[SV_POST + i][0], c->ce->step[i ? SS_POST2 : SS_POST]);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(stream, c->ce->step_ev[SV_POST + i][0], 0);
  }
  /* Numbered chunks were (partly) launched: keep the count in step with the
   * peers even on an error (the communicator is then broken anyway). */
  ST(c)->seq += nch;
  if (e == cudaSuccess) log_once(c, count * es, nch, CB, "process per GPU");
  return e;
}


/* Process per GPU: one rank's call, its GPU current (not under capture:
 * the selector sends those to the kernel, whose chunk numbers a graph can
 * replay). */
static p2pkit_status_t launch(const p2pk_call *call) {
  struct p2pkit_comm *c = call->c;
  c->ce->cap = call->grid_cap;
  cudaError_t e = allreduce_mp(c, call->send, call->recv, call->count, call->dtype, call->op,
                               (cudaStream_t)call->stream);
  return p2pk_cuda_status(c, p2pk_call_name(call), e);
}

/* Process per GPU: each rank's part of the host region ends with its
 * copy-engine slots, apart from the staged kernels' mailboxes. */
static void scratch(const struct p2pkit_comm *c, p2pk_layout *lay) {
  if (c->staged && c->multiproc) p2pk_layout_add_ce(lay, p2pk_sce_depth(), p2pk_sce_slot_bytes());
}

static p2pkit_status_t init(struct p2pkit_comm *c) {
  staged_ce *s = calloc(1, sizeof *s);
  if (!s) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "rank %d: out of memory", c->rank);
  s->depth = p2pk_sce_depth();
  c->path_state[P2PK_PATH_CE_STAGED] = s;
  return P2PKIT_SUCCESS;
}

static void fini(struct p2pkit_comm *c) {
  free(c->path_state[P2PK_PATH_CE_STAGED]);
  c->path_state[P2PK_PATH_CE_STAGED] = NULL;
}

const p2pk_path p2pk_path_ce_staged = {
    .id = P2PK_PATH_CE_STAGED,
    .kinds = 1u << P2PK_COLL_ALL_REDUCE,
    .modes = P2PK_MODE_ONE | P2PK_MODE_PER_GPU,
    .transports = P2PK_XPORT_SHM,
    .captures = P2PK_CAPTURE_EAGER,
    .scratch = scratch,
    .init = init,
    .fini = fini,
    .launch = launch,
    .launch_group = launch_group,
};
