/* SPDX-License-Identifier: BSD-3-Clause */
/* What the copy-engine paths share (ce_common.c): one set of streams and
 * events per rank, made on first use (the landing-slot paths' at init, so
 * no call under capture creates them), a device buffer chunks land in, the
 * local reduce, the shard and chunk arithmetic, and the one-thread step
 * lists that wait for and post the ranks' flags. Private to paths/ce: the
 * communicator holds c->ce opaque (coll.h declares what others call). */
#ifndef P2PK_CE_COMMON_H
#define P2PK_CE_COMMON_H

#include "coll/paths/path.h"

#define P2PK_SCE_EVENTS (1 + 3 * P2PK_SCE_DEPTH_MAX) /* start; d2h, h2d, reduce per slot */
#define P2PK_CEP_STREAMS 5 /* one-thread step kernels' streams (cep.h) */
#define P2PK_CEP_EVKINDS 5 /* kinds of event between them and the copy streams, per slot */

struct p2pk_ce {
  /* One process: a root's copies to the peers, beside its own copy (and
   * under capture on the kernel path, its own copy beside the kernel); the
   * copies to host memory (staged); the pushes to the landing slots. */
  cudaStream_t side;
  cudaEvent_t ev[3]; /* [0] receiver ready, [1] root start, [2] root done */
  cudaStream_t h2d;  /* the copies from host memory; the gather copies */
  cudaEvent_t sev[P2PK_SCE_EVENTS]; /* the paths' own uses; [P2PK_CE_EV_START] the call's start */
  char *buf;         /* device: peers' chunks, [peer slot][depth] */
  size_t buf_bytes;
  /* The step lists' streams and the events between them and the copy
   * streams ([kind][chunk % depth]). */
  cudaStream_t step[P2PK_CEP_STREAMS];
  cudaEvent_t step_ev[P2PK_CEP_EVKINDS][P2PK_SCE_DEPTH_MAX];
  int memops; /* posts as stream memory operations: 0 not decided yet, 1 yes, 2 no (kernels) */
  int cap;    /* the grid cap of the call a path is launching (p2pk_all_reduce_capped) */
  struct p2pk_cep *slots; /* the landing slots' engine (cep.h), which ce-slots and ce-direct share */
};


/* Streams and events made on first use (on the current GPU). */
static inline cudaError_t p2pk_lazy_event(cudaEvent_t *ev) {
  return *ev ? cudaSuccess : cudaEventCreateWithFlags(ev, cudaEventDisableTiming);
}
static inline cudaError_t p2pk_lazy_stream(cudaStream_t *s) {
  return *s ? cudaSuccess : cudaStreamCreateWithFlags(s, cudaStreamNonBlocking);
}

/* The side and h2d/gather streams, the events and the device buffer (at
 * least `need` bytes) of one rank, made on first use; makes its GPU
 * current. */
cudaError_t p2pk_ce_prepare(struct p2pkit_comm *c, size_t need);
/* The step lists' streams and events too (the landing-slot paths, at init). */
cudaError_t p2pk_ce_prepare_steps(struct p2pkit_comm *c, int depth);
/* sev[P2PK_CE_EV_START]: where a rank's stream stood at the call. */
#define P2PK_CE_EV_START 0
/* One process, set[r] rank r's call: p2pk_ce_prepare every rank, record its
 * START on its stream, and make every rank's h2d/gather stream wait for
 * every rank's START (no copy touches a buffer still in use), its side
 * stream too unless side_own (then only for its own: a side stream that
 * only reads its rank's input and writes landing slots, which the caller
 * guards, need not wait for the peers to finish their last call).
 * *bad: the rank a failure came from. */
cudaError_t p2pk_ce_start(p2pk_call *const *set, int n, size_t need, int side_own, int *bad);
/* Rank c's device buffer: slot s (of `depth`) of the chunks of cb bytes
 * that come from rank src != c->rank. */
static inline char *p2pk_ce_land(const struct p2pkit_comm *c, int src, int depth, int s, size_t cb) {
  const int n = c->nranks;
  return c->ce->buf + ((size_t)((src - c->rank - 1 + n) % n) * (size_t)depth + (size_t)s) * cb;
}
/* The local reduce kernel on `stream` with the copy-engine paths' grid (a
 * block per 64 KiB, at most one per multiprocessor and at most `cap` when
 * cap > 0). */
cudaError_t p2pk_ce_local_reduce(const struct p2pkit_comm *c, p2pkit_dtype_t dtype,
                                 const p2pk_lr_args *la, int cap, cudaStream_t stream);
/* out = src[0] op ... op src[n-1] (src[me] this rank's input), lb bytes,
 * on `stream` (a local kernel). */
cudaError_t p2pk_ce_reduce_chunk(const struct p2pkit_comm *c, p2pkit_dtype_t dtype,
                                 p2pkit_redop_t op, const char *const *src, char *out, size_t lb,
                                 cudaStream_t stream);
/* Where rank r's shard of an all-reduce of `count` elements of es bytes
 * over n ranks lies: shards of equal length (a multiple of 256 bytes) in
 * rank order, the last one shorter or empty (*off = count, *len = 0). */
void p2pk_ce_shard(size_t count, int n, size_t es, int r, size_t *off, size_t *len);
/* What rank t receives of a copy-engine collective `kind` of `count`
 * elements (es bytes) with `root`: all-reduce its shard (p2pk_ce_shard),
 * reduce-scatter its share (t x count, count elements), reduce the whole
 * message at the root, broadcast the whole message at every rank but the
 * root; nothing otherwise (*off = 0, *len = 0). */
void p2pk_ce_owned(int kind, size_t count, int n, size_t es, int root, int t, size_t *off,
                   size_t *len);
/* Elements of chunk k (K each) of len elements; 0 past its end. */
static inline size_t p2pk_ce_part(size_t len, size_t k, size_t K) {
  return len <= k * K ? 0 : len - k * K < K ? len - k * K : K;
}
/* The landing slots' total per rank: P2PKIT_CE_LAND (16 MiB - 4 GiB; the
 * registry refuses others), by default P2PK_CE_LAND_DEFAULT. 192 MiB: on 2
 * GPUs two 96 MiB slots. Twice that made send/recv with a process per GPU slower at 256 - 512 MiB and no
 * faster at 1 GiB, and only the one-process graph all-reduce at 1 GiB
 * gained (~1.4%, with 128 MiB chunks; docs/decisions/copy-engine-thresholds.md). */
#define P2PK_CE_LAND_DEFAULT ((size_t)192 << 20)
size_t p2pk_ce_land_max(void);
/* Chunk bytes of the copy-engine all-reduce and reduce-scatter over P2P
 * for a shard of this size on n ranks with `depth` chunks in flight:
 * P2PKIT_CE_CHUNK if set, else half the shard within 16..64 MiB; either
 * way the landing slots ((n - 1) x depth chunks a rank) stay within
 * p2pk_ce_land_max(). */
size_t p2pk_ce_chunk_bytes(size_t shard_bytes, int n, int depth);
/* Chunks in flight per peer of the copy-engine collectives over P2P:
 * P2PKIT_CE_DEPTH within 2..P2PK_SCE_DEPTH_MAX. */
int p2pk_ce_depth(void);
/* Elements per chunk: chunk_bytes rounded down to 16 bytes, whole
 * elements, at least one. */
size_t p2pk_sce_chunk_elems(size_t chunk_bytes, size_t es);

/* Run one list of steps on `stream`: a list of posts only, when `memops`
 * allows, as stream memory operations (cuStreamWriteValue64, resolved at
 * run time through the runtime; the GPU's front end writes them, no
 * multiprocessor is needed); anything else, or when those are unavailable
 * or P2PKIT_CEP_MEMOPS=0, as one launch of the one-thread step kernel. */
cudaError_t p2pk_cep_run(struct p2pkit_comm *c, const p2pk_cep_steps *st, int memops,
                         cudaStream_t stream);
/* Whether p2pk_cep_run writes posts as memory operations (decided on first use). */
int p2pk_cep_memops(struct p2pkit_comm *c);

#endif
