/* Copy-engine collectives over P2P: one process driving every GPU, the
 * ranks' calls inside one group (they queue in p2p.c like large
 * broadcasts), peer access between every pair. All-reduce from
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
 *   rank r, side stream (ce_side):   in_r[shard t, k] -> land_t[r][s], every t != r   (peer copy)
 *   rank t, its own stream:          out_t[shard t, k] = in_0 op in_1 ... in rank order
 *                                    (its own input, the peers' from land_t)
 *   rank t, gather stream (sce_h2d): out_t[shard t, k] -> out_r[shard t, k], every r != t
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
 * Chunks are numbered across calls (c->ce_q, the same on every rank of the
 * group): chunk k of a call is q = ce_q + k and lands in slot q % D, so a
 * side stream, which reads only its rank's input and writes the owners'
 * landing slots, starts on its own rank's START alone, and each copy waits
 * for RED of its slot, set by the reduce of chunk q - D, of this call or
 * the last. The next call's first copies then run beside the last call's
 * last reduce, which with a single owner (reduce) was the tail of every
 * call (one process: reduce 256 MiB 790 us against 699 with a process per
 * GPU, 2x H200). When a call's chunk size or depth differs
 * from the last call's (ce_layout), its slots overlap others, and the side
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

#include "coll/coll.h"
#include "coll/plan.h"
#include "core/check.h"
#include "core/log.h"
#include "core/param.h"

enum {
  E_START = P2PK_CE_EV_START,
  E_CP = 1,
  E_SIDE = 1 + P2PK_SCE_DEPTH_MAX,
  E_GATHER = 2 + P2PK_SCE_DEPTH_MAX,
  E_LAST = 3 + P2PK_SCE_DEPTH_MAX,
  E_RED = 1 + 2 * P2PK_SCE_DEPTH_MAX
};

/* The defaults (P2PKIT_CE_*_MIN) are where the copy engines overtook the
 * kernels on 2x H200 (every figure: docs/decisions/copy-engine-thresholds.md).
 * One process, eagerly: all-reduce, reduce-scatter, all-gather and reduce
 * from 64 MiB (all-reduce 64 MiB 203 us against the kernel's 210).
 * With a process per GPU (ce_p2p_mp.c) a setting that is not given takes
 * the process-per-GPU default below instead: all-reduce from 256 MiB (776
 * us against 788), reduce-scatter and reduce from 64 MiB, broadcast from
 * 16 MiB, all-gather and all-to-all from 256 MiB (all-gather 1 GiB 1493 us
 * against the kernel's 1625). */
static size_t mp_default(int kind) {
  switch (kind) {
    case P2PK_COLL_ALL_REDUCE: return (size_t)256 << 20;
    case P2PK_COLL_REDUCE_SCATTER: return (size_t)64 << 20;
    case P2PK_COLL_REDUCE: return (size_t)64 << 20;
    case P2PK_COLL_BROADCAST: return (size_t)16 << 20;
    case P2PK_COLL_ALL_TO_ALL: return (size_t)256 << 20;
    case P2PK_COLL_ALL_GATHER: return (size_t)256 << 20;
    default: return 0;
  }
}

/* One process under capture (2x H200, CUDA graphs, against the kernels
 * there; docs/decisions/copy-engine-thresholds.md): reduce-scatter and
 * reduce through the landing slots from 128 MiB, all-reduce with its
 * results straight into the peers' outputs from 512 MiB (1 GiB 2913 us
 * against 2986), broadcast straight in from 128 MiB (with a process per
 * GPU through the slots from the same size), all-to-all straight in from
 * 32 MiB blocks and all-gather from 64 MiB shares, as eagerly. */
static size_t cap_default(int kind) {
  switch (kind) {
    case P2PK_COLL_REDUCE_SCATTER:
    case P2PK_COLL_REDUCE: return (size_t)128 << 20;
    case P2PK_COLL_ALL_REDUCE: return (size_t)512 << 20;
    case P2PK_COLL_BROADCAST: return (size_t)128 << 20;
    case P2PK_COLL_ALL_TO_ALL: return (size_t)32 << 20;
    case P2PK_COLL_ALL_GATHER: return (size_t)64 << 20;
    default: return mp_default(kind);
  }
}

int p2pk_ce_queues(void) {
  /* Read by CUDA when it makes the context: a number from 1 to 32, else
   * its default, 8. */
  const char *v = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  char *end = NULL;
  long q = v && *v ? strtol(v, &end, 10) : 0;
  if (!v || !*v || *end || q < 1) return 8;
  return q > 32 ? 32 : (int)q;
}

/* The copy-engine paths that wait on flags other ranks set (a process per
 * GPU: the landing slots of ce_p2p_mp.c and ce_staged.c's second half; one
 * process under capture: the landing slots) keep such waits, one-thread
 * kernels, on several streams of one GPU at once (the claims, the takes,
 * the copies out, the caller's reduces), and each needs the others to make
 * progress. Streams share the GPU's hardware queues
 * (CUDA_DEVICE_MAX_CONNECTIONS of them), and a waiting kernel holds up
 * whatever sits behind it on its queue: with too few, a wait stands in
 * front of the work that would end it and the call hangs until the
 * timeout. A CUDA graph goes further: its launch may put independent
 * branches one after the other on a stream of its own choosing, which no
 * setting rules out. So these paths need 8 queues, and under capture at
 * most 2 ranks (with 2 queues a 2-rank all-reduce hung; with 8, 3 and 4
 * ranks hung under a graph: docs/decisions/copy-engine-queues.md); else
 * the kernels (one kernel a call, which waits on nothing of its own GPU)
 * carry every size. */
int p2pk_ce_waits_ok(const struct p2pkit_comm *c, int capture) {
  return p2pk_ce_queues() >= P2PK_CE_QUEUES && (!capture || c->nranks <= 2);
}

/* A kernel setting (P2PKIT_ALGO, _PROTO, P2PKIT_COLL_*) asks for the
 * kernels over P2P. */
static int kernel_forced(const p2pk_algo_force *f) {
  return f->algo >= 0 || f->proto >= 0 || f->blocks > 0 || f->threads > 0 || f->chunk > 0;
}

/* The threshold of `kind` from the settings alone, with the defaults of
 * the landing-slot path (ce_p2p_mp.c) when mp (1: process per GPU, 2: one
 * process under capture), else of the one-process event path (this
 * file). */
static size_t min_setting(const struct p2pkit_comm *c, int kind, int mp) {
  if (c->nranks < 2) return 0;
  /* Waits on flags on several streams (p2pk_ce_waits_ok). */
  if (mp && !p2pk_ce_waits_ok(c, mp == 2)) return 0;
  /* A kernel setting: the kernels (one process, eagerly: but for the
   * broadcast). */
  if (!c->staged && (kind != P2PK_COLL_BROADCAST || mp) && kernel_forced(&c->force)) return 0;
  const char *name = NULL;
  switch (kind) {
    case P2PK_COLL_BROADCAST: name = "P2PKIT_BCAST_CE_MIN"; break;
    case P2PK_COLL_ALL_REDUCE:
      if (c->staged) return p2pk_param_size("P2PKIT_STAGED_CE_MIN");
      name = "P2PKIT_CE_ALLREDUCE_MIN";
      break;
    case P2PK_COLL_REDUCE_SCATTER: name = "P2PKIT_CE_REDUCE_SCATTER_MIN"; break;
    case P2PK_COLL_REDUCE: name = "P2PKIT_CE_REDUCE_MIN"; break;
    case P2PK_COLL_ALL_GATHER:
      /* One process: eagerly by events (gather_ce), under capture straight
       * into the peers' outputs; a process per GPU through the landing
       * slots (ce_p2p_mp.c, a2a_mp with gather). */
      name = "P2PKIT_CE_ALL_GATHER_MIN";
      break;
    case P2PK_COLL_ALL_TO_ALL:
      /* One process: eagerly by events (gather_ce), under capture straight
       * into the peers' outputs; a process per GPU through the landing
       * slots (ce_p2p_mp.c, a2a_mp). */
      name = "P2PKIT_CE_ALL_TO_ALL_MIN";
      break;
    default: return 0;
  }
  if (c->staged) return 0;
  /* Over P2P the defaults were measured on 2 GPUs; with more ranks the
   * copy engines run only when the setting is given, but for one process
   * eagerly the all-gather and all-to-all from 64 MiB shares (blocks): on
   * 4x H200 an all-gather of 1 GiB took 2107 us against the kernel's 2630.
   * The landing slots (process per GPU), the copy-engine all-reduce and
   * reduce-scatter lost there, and so did the broadcast, whose root would
   * push the message n - 1 times through its links where the rooted
   * two-shot kernel carries it once (docs/decisions/copy-engine-thresholds.md,
   * docs/decisions/rooted-two-shot.md). */
  const int set = p2pk_param_is_set(name);
  if (c->nranks > 2 && !set)
    return !mp && (kind == P2PK_COLL_ALL_GATHER || kind == P2PK_COLL_ALL_TO_ALL) ? (size_t)64 << 20 : 0;
  if (mp && !set) return mp == 2 ? cap_default(kind) : mp_default(kind);
  return p2pk_param_size(name);
}

/* The threshold from the settings alone (process per GPU: whether or not
 * the landing slots exist). */
size_t p2pk_ce_min_setting(const struct p2pkit_comm *c, int kind) {
  return min_setting(c, kind, c->multiproc);
}

size_t p2pk_cep_min_setting(const struct p2pkit_comm *c, int kind) {
  if (c->staged) return 0;
  /* With a process per GPU the broadcast under capture from its own
   * threshold (cap_default's), the rest as eagerly. */
  if (c->multiproc) return min_setting(c, kind, kind == P2PK_COLL_BROADCAST ? 2 : 1);
  /* One process: under capture only (the broadcast only straight into the
   * peers' outputs: through the slots a process per GPU ran a graph's
   * broadcast at 0.91-0.94x NCCL on 2x H200). */
  return min_setting(c, kind, 2);
}

size_t p2pk_ce_min(const struct p2pkit_comm *c, int kind) {
  size_t m = p2pk_ce_min_setting(c, kind);
  /* Process per GPU: only with its slots, in the host region without P2P
   * (ce_staged.c), in the scratch over P2P (ce_p2p_mp.c; comm.c lays both
   * out). */
  if (c->multiproc && !(c->staged ? c->lay.stage_ce_slot : c->lay.cep_slot)) return 0;
  return m;
}

int p2pk_cep_wanted(const struct p2pkit_comm *c) {
  if (c->staged || c->nranks < 2) return 0;
  for (int k = 0; k < P2PK_COLL_KINDS; k++)
    if (p2pk_cep_min_setting(c, k)) return 1;
  return p2pk_cep_p2p_min(c) != 0;
}

size_t p2pk_cep_p2p_min(const struct p2pkit_comm *c) {
  if (c->staged || c->nranks < 2 || kernel_forced(&c->force)) return 0;
  /* The landing slots (one process: under capture only). */
  if (!p2pk_ce_waits_ok(c, !c->multiproc)) return 0;
  const char *name = "P2PKIT_SENDRECV_CE_MIN";
  const int set = p2pk_param_is_set(name);
  if (c->nranks > 2 && !set) return 0;
  /* Process per GPU: from 256 MiB (2x H200: 774.6 us against the
   * kernel's 778 at 256 MiB, 1474.8 against 1548 at 512 MiB; 128 MiB 425.6
   * against 394.4). One process uses it under capture only. */
  return set ? p2pk_param_size(name) : (size_t)256 << 20;
}

size_t p2pk_cep_direct_p2p_min(const struct p2pkit_comm *c) {
  const size_t m = p2pk_cep_p2p_min(c);
  if (c->multiproc || !m) return 0;
  /* One process under capture, both ends in one group (2x H200, CUDA
   * graphs: 64 MiB 190.1 us against the kernel's 201.6,
   * 128 MiB 364.5 against 390.7, 1 GiB 2760.6 against NCCL's 2974.4): the
   * setting when given (p2pk_cep_p2p_min returned it), else 64 MiB. */
  return p2pk_param_is_set("P2PKIT_SENDRECV_CE_MIN") ? m : (size_t)64 << 20;
}

void p2pk_ce_min_fill(struct p2pkit_comm *c) {
  for (int k = 0; k < P2PK_COLL_KINDS; k++) {
    c->ce_min[k] = p2pk_ce_min(c, k);
    c->cep_min[k] = c->lay.cep_slot ? p2pk_cep_min_setting(c, k) : 0;
  }
  c->cep_p2p_min = c->lay.cep_slot ? p2pk_cep_p2p_min(c) : 0;
  c->sendrecv_ce_min = p2pk_param_size("P2PKIT_SENDRECV_CE_MIN");
  c->bcast_self_ce = c->staged ? 0 : p2pk_param_size("P2PKIT_BCAST_SELF_CE");
  c->ts_rooted_min = c->staged ? 0 : p2pk_param_size("P2PKIT_ROOTED_TWOSHOT_MIN");
  c->cep_direct_p2p_min = c->lay.cep_slot ? p2pk_cep_direct_p2p_min(c) : 0;
  c->cep_cap_ok = p2pk_ce_waits_ok(c, 1);
}

void p2pk_cep_settings(struct p2pkit_comm *c) {
  /* Say so when too few hardware queues keep the copy engines off (at
   * init: this is called there once). */
  const int q = p2pk_ce_queues(), spins = c->multiproc || !c->staged;
  int any_ce = c->cep_p2p_min != 0; /* a copy-engine path taken eagerly */
  for (int k = 0; k < P2PK_COLL_KINDS; k++) any_ce |= c->ce_min[k] != 0;
  if (c->nranks >= 2 && spins && q < P2PK_CE_QUEUES)
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): CUDA_DEVICE_MAX_CONNECTIONS=%d: the copy-engine "
              "paths%s wait on the peers on several streams at once and need %d hardware queues; "
              "the kernels carry every size", c->rank, c->device, q,
              c->multiproc ? "" : " under capture", P2PK_CE_QUEUES);
  else if (c->nranks > 2 && !c->staged && !c->cep_cap_ok && any_ce)
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): under a CUDA graph the copy-engine paths of more "
              "than 2 ranks are off (a graph may queue their waits behind one another); there "
              "the kernels carry every size", c->rank, c->device);
  c->cep_trace = c->lay.cep_slot && c->multiproc && p2pk_param_int("P2PKIT_CEP_TRACE") > 0;
  c->dmb_on = c->multiproc && c->cep_p2p_min && p2pk_param_int("P2PKIT_SENDRECV_DIRECT") != 0;
  c->dmb_map = c->dmb_on && p2pk_param_int("P2PKIT_SENDRECV_MAP") > 0;
  int64_t w = p2pk_param_int("P2PKIT_SENDRECV_DIRECT_WAIT_US");
  c->dmb_wait_ns = w > 0 ? (uint64_t)w * 1000u : 0;
}

static void log_once(struct p2pkit_comm *c, int kind, size_t bytes, size_t nch, size_t cb) {
  if (c->ce_logged & (1u << kind)) return;
  c->ce_logged |= 1u << kind;
  if (nch)
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): %s of %zu B uses the copy engines over P2P, "
              "%zu chunks of %zu B per shard, the SMs reduce locally (one process, in a group)",
              c->rank, c->device, p2pk_coll_name(kind), bytes, nch, cb);
  else
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): %s of %zu B uses the copy engines over P2P "
              "(one process, in a group)", c->rank, c->device, p2pk_coll_name(kind), bytes);
}

#define EV(r, i) (set[r]->c->sce_ev[i])
#define STREAM(r) ((cudaStream_t)set[r]->stream)
#define DEV(r) (set[r]->c->device)

/* All-reduce (gather = 1), reduce-scatter or reduce (gather = 0) of set[*]. */
static p2pkit_status_t reduce_ce(p2pk_ce_pending *const *set, int n, int kind) {
  const int gather = kind == P2PK_COLL_ALL_REDUCE;
  const p2pk_ce_pending *a0 = set[0];
  const size_t es = p2pkit_dtype_size(a0->dtype);
  const int D = p2pk_ce_depth();
  /* Shard t of the all-reduce's message; reduce-scatter: share t of the
   * input (count elements each), its result at out_t + 0; reduce: the
   * root owns the whole message, the others nothing. */
  size_t soff[P2PK_COLL_MAX_RANKS], slen[P2PK_COLL_MAX_RANKS], most = 0;
  for (int t = 0; t < n; t++) {
    p2pk_ce_owned(kind, a0->count, n, es, a0->root, t, &soff[t], &slen[t]);
    if (slen[t] > most) most = slen[t];
  }
  const size_t K = p2pk_sce_chunk_elems(p2pk_ce_chunk_bytes(most * es, n, D), es), CB = K * es;
  const size_t nch = (most + K - 1) / K;
  const size_t need = (size_t)(n - 1) * (size_t)D * CB;
  int bad = 0;
  cudaError_t e = p2pk_ce_start(set, n, need, 1, &bad);
#define LAND(t, r, s) p2pk_ce_land(set[t]->c, r, D, s, CB)
#define SIDE(r) (set[r]->c->ce_side)
#define GATHER(r) (set[r]->c->sce_h2d)
  /* Another layout: the landing slots are free once every owner's last
   * reduce ran (LAST; one never recorded is no wait). */
  const uint64_t q0 = set[0]->c->ce_q;
  const size_t layout = CB * (size_t)D;
  for (int r = 0; r < n && e == cudaSuccess; r++) {
    bad = r;
    e = cudaSetDevice(DEV(r));
    for (int t = 0; t < n && e == cudaSuccess; t++)
      if (t != r && set[t]->c->ce_layout != layout) e = cudaStreamWaitEvent(SIDE(r), EV(t, E_LAST), 0);
  }
  for (size_t k = 0; k < nch && e == cudaSuccess; k++) {
    const int s = (int)((q0 + k) % (uint64_t)D);
    /* Every rank's chunk k of each peer's shard into that peer's landing
     * slot. One stream, so chunks land in order (2x H200: odd
     * chunks on a second stream landed two at a time, half speed each, and
     * delayed the first reduce: 256 MiB 817 us against 719). */
    for (int r = 0; r < n && e == cudaSuccess; r++) {
      bad = r;
      cudaStream_t side = SIDE(r);
      e = cudaSetDevice(DEV(r));
      for (int t = 0; t < n && e == cudaSuccess; t++) {
        const size_t lb = p2pk_ce_part(slen[t], k, K) * es;
        if (t == r || !lb) continue;
        e = cudaStreamWaitEvent(side, EV(t, E_RED + s), 0);
        if (e == cudaSuccess)
          e = cudaMemcpyPeerAsync(LAND(t, r, s), DEV(t),
                                  (const char *)set[r]->send + (soff[t] + k * K) * es, DEV(r), lb,
                                  side);
      }
      if (e == cudaSuccess) e = cudaEventRecord(EV(r, E_CP + s), side);
    }
    /* Every owner reduces its chunk k, then copies the result out. */
    for (int t = 0; t < n && e == cudaSuccess; t++) {
      const size_t lb = p2pk_ce_part(slen[t], k, K) * es;
      if (!lb) continue;
      bad = t;
      const size_t at = (gather ? soff[t] : 0) + k * K;
      e = cudaSetDevice(DEV(t));
      for (int r = 0; r < n && e == cudaSuccess; r++)
        if (r != t) e = cudaStreamWaitEvent(STREAM(t), EV(r, E_CP + s), 0);
      if (e == cudaSuccess) {
        const char *src[P2PK_COLL_MAX_RANKS];
        for (int r = 0; r < n; r++)
          src[r] = r == t ? (const char *)set[t]->send + (soff[t] + k * K) * es : LAND(t, r, s);
        e = p2pk_ce_reduce_chunk(set[t]->c, set[t]->dtype, set[t]->op, src,
                                 (char *)set[t]->recv + at * es, lb, STREAM(t));
      }
      if (e == cudaSuccess) e = cudaEventRecord(EV(t, E_RED + s), STREAM(t));
      if (!gather || e != cudaSuccess) continue;
      cudaStream_t gs = GATHER(t);
      e = cudaStreamWaitEvent(gs, EV(t, E_RED + s), 0);
      for (int r = 0; r < n && e == cudaSuccess; r++)
        if (r != t)
          e = cudaMemcpyPeerAsync((char *)set[r]->recv + at * es, DEV(r),
                                  (const char *)set[t]->recv + at * es, DEV(t), lb, gs);
    }
  }
#undef LAND
  /* The end: LAST where a rank reduced, SIDE and GATHER everywhere, then
   * every stream waits. */
  for (int r = 0; r < n && e == cudaSuccess; r++) {
    bad = r;
    e = cudaSetDevice(DEV(r));
    if (e == cudaSuccess && slen[r]) e = cudaEventRecord(EV(r, E_LAST), STREAM(r));
    if (e == cudaSuccess) e = cudaEventRecord(EV(r, E_SIDE), SIDE(r));
    if (e == cudaSuccess && gather) e = cudaEventRecord(EV(r, E_GATHER), GATHER(r));
  }
  for (int r = 0; r < n && e == cudaSuccess; r++) {
    bad = r;
    e = cudaSetDevice(DEV(r));
    if (e == cudaSuccess) e = cudaStreamWaitEvent(STREAM(r), EV(r, E_SIDE), 0);
    for (int t = 0; t < n && gather && e == cudaSuccess; t++)
      e = cudaStreamWaitEvent(STREAM(r), EV(t, E_GATHER), 0);
  }
  for (int r = 0; r < n; r++) {
    set[r]->c->ce_q += nch;
    set[r]->c->ce_layout = layout;
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    return p2pk_fail(P2PKIT_ERR_CUDA, "%s: rank %d (GPU %d): copy engines over P2P: %s",
                     p2pk_coll_name(kind), bad, DEV(bad), cudaGetErrorString(e));
  }
  for (int r = 0; r < n; r++) log_once(set[r]->c, kind, a0->bytes, nch, CB);
  return P2PKIT_SUCCESS;
}

/* All-gather: rank r's share into every peer's output at r x share on its
 * side stream; its own copy (unless in place) on its own stream, beside
 * them (2x H200: on the side stream after the peer copy, out of
 * place took 1646 us at 1 GiB against in place's 1387). All-to-all (out of
 * place only: ce_flush in p2p.c sends in-place calls to the kernel) the
 * same with rank r's block t for rank t. */
static p2pkit_status_t gather_ce(p2pk_ce_pending *const *set, int n, int kind) {
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

p2pkit_status_t p2pk_ce_collective(p2pk_ce_pending *const *set, int n, int kind) {
  switch (kind) {
    case P2PK_COLL_ALL_REDUCE:
      return set[0]->c->staged ? p2pk_staged_ce_allreduce(set, n) : reduce_ce(set, n, kind);
    case P2PK_COLL_REDUCE_SCATTER:
    case P2PK_COLL_REDUCE: return reduce_ce(set, n, kind);
    case P2PK_COLL_ALL_GATHER:
    case P2PK_COLL_ALL_TO_ALL: return gather_ce(set, n, kind);
    default:
      return p2pk_fail(P2PKIT_ERR_INTERNAL, "%s has no copy-engine path", p2pk_coll_name(kind));
  }
}

