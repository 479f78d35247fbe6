/* Every collective but send/recv: argument checks and one kernel launch
 * (p2pk_coll_launch). The per-call host work is a few comparisons, a table
 * lookup and the launch: no allocation, no synchronisation; pointers are
 * checked with CUDA once and remembered. What moves where comes from plan.c. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/plan.h"
#include "core/check.h"
#include "core/log.h"

p2pkit_status_t p2pk_comm_async_status(struct p2pkit_comm *c) {
  volatile int32_t *he = c->host_err;
  int32_t code = he[0];
  if (code == P2PK_DERR_NONE) return P2PKIT_SUCCESS;
  int32_t peer = he[1];
  unsigned secs = (unsigned)(c->timeout_ns / 1000000000ULL);
  if (he[2]) {
    const uint32_t *u = (const uint32_t *)(he + 4);
    int region = he[2];
    P2PK_WARN("rank %d (GPU %d): block %d gave up waiting on the word at %s%d+0x%llx for %llu; it "
              "read %llu", c->rank, c->device, he[3], region == 1 ? "scratch" : region == 2 ? "stage"
              : "peer", region >= 3 ? region - 3 : c->rank,
              (unsigned long long)u[0] | (unsigned long long)u[1] << 32,
              (unsigned long long)u[2] | (unsigned long long)u[3] << 32,
              (unsigned long long)u[4] | (unsigned long long)u[5] << 32);
    he[2] = 0;
    p2pk_cep_log_flags(c);
  }
  switch (code) {
    case P2PK_DERR_TIMEOUT:
      return p2pk_fail(P2PKIT_ERR_TIMEOUT,
                       "rank %d (GPU %d): rank %d did not take part in a collective within %u s "
                       "(it exited, hangs, or called something else); the communicator is unusable",
                       c->rank, c->device, peer, secs);
    case P2PK_DERR_MISMATCH:
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT,
                       "rank %d (GPU %d): rank %d called another collective, or with another "
                       "count, type, operation, root or algorithm; the communicator is unusable",
                       c->rank, c->device, peer);
    default:
      return p2pk_fail(P2PKIT_ERR_REMOTE,
                       "rank %d (GPU %d): rank %d gave up on a collective; the communicator is "
                       "unusable", c->rank, c->device, peer);
  }
}

p2pkit_status_t p2pkit_comm_get_async_error(p2pkit_comm_t comm, p2pkit_status_t *status_p) {
  if (!comm || !status_p)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "get_async_error: communicator or status_p is NULL");
  *status_p = p2pk_comm_async_status(comm);
  return P2PKIT_SUCCESS;
}

/* Device memory of this rank's GPU (or managed memory). *direct_ok: plain
 * device memory, which peers may write into. */
p2pkit_status_t p2pk_coll_check_ptr(struct p2pkit_comm *c, const void *p, const char *what,
                                    int *direct_ok) {
  for (int i = 0; i < P2PK_PTR_CACHE; i++)
    if (c->ok_ptr[i] == p) {
      *direct_ok = 1;
      return P2PKIT_SUCCESS;
    }
  struct cudaPointerAttributes at;
  /* A pure query, but keep it legal inside a caller's stream capture too. */
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  cudaError_t e = cudaPointerGetAttributes(&at, p);
  cudaThreadExchangeStreamCaptureMode(&mode);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "rank %d: %s %p is not memory CUDA knows", c->rank,
                     what, p);
  }
  if (at.type == cudaMemoryTypeManaged) {
    *direct_ok = 0;
    return P2PKIT_SUCCESS;
  }
  if (at.type != cudaMemoryTypeDevice)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "rank %d: %s %p is host memory; collectives need "
                     "device memory of GPU %d", c->rank, what, p, c->device);
  if (at.device != c->device)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "rank %d: %s %p is on GPU %d, the communicator "
                     "on GPU %d", c->rank, what, p, at.device, c->device);
  c->ok_ptr[c->ok_next] = p;
  c->ok_next = (c->ok_next + 1) % P2PK_PTR_CACHE;
  *direct_ok = 1;
  return P2PKIT_SUCCESS;
}

/* Where peers may write this rank's all-gather share (two-shot). */
static void set_direct(const struct p2pkit_comm *c, p2pk_ar_args *a, const char *out, size_t bytes,
                       int direct_ok) {
  a->out_token = 0;
  if (!direct_ok || a->direct == 0) return;
  if (a->direct == 1) {
    a->out_token = (uint64_t)(uintptr_t)out;
    return;
  }
  const p2pk_reg *r = p2pk_reg_holding(c, out, bytes);
  if (!r) return;
  uint64_t off = (uint64_t)(out - r->buf);
  if (off >> 40) return;
  a->out_token = ((uint64_t)(r->id + 1) << 40) | off;
  for (int p = 0; p < c->nranks; p++) a->peer_out[p] = r->peer[p] ? r->peer[p] + off : NULL;
}

p2pkit_status_t p2pk_coll_check_args(struct p2pkit_comm *c, const char *name, p2pkit_dtype_t dtype,
                                     int has_op, p2pkit_redop_t op, size_t count, size_t *es_p) {
  if (!c) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: communicator is NULL", name);
  size_t es = p2pkit_dtype_size(dtype);
  if (!es)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: data type %d is not a "
                     "p2pkit_dtype_t", name, c->rank, (int)dtype);
  if (has_op && ((int)op < 0 || op >= P2PKIT_REDOP_COUNT))
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: operation %d is not a "
                     "p2pkit_redop_t", name, c->rank, (int)op);
  if (count > (UINT64_C(1) << 40) || count > SIZE_MAX / es / (size_t)c->nranks)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: count %zu is too large", name,
                     c->rank, count);
  *es_p = es;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_coll_enter(struct p2pkit_comm *c, const char *name, int *prev) {
  *prev = -1;
  cudaGetDevice(prev);
  if (*prev != c->device && cudaSetDevice(c->device) != cudaSuccess) {
    cudaError_t e = cudaGetLastError();
    return p2pk_fail(P2PKIT_ERR_CUDA, "%s: rank %d cannot use GPU %d: %s", name, c->rank,
                     c->device, cudaGetErrorString(e));
  }
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_coll_leave(struct p2pkit_comm *c, const char *name, int prev, cudaError_t e) {
  if (prev >= 0 && prev != c->device) cudaSetDevice(prev);
  if (e != cudaSuccess)
    return p2pk_fail(P2PKIT_ERR_CUDA, "%s: rank %d: launching on GPU %d failed: %s", name, c->rank,
                     c->device, cudaGetErrorString(e));
  return P2PKIT_SUCCESS;
}

/* What a collective of `block` bytes per rank runs: the all-reduce table for
 * all-reduce; the one-shot push (LL, LL128 or simple, by the table's rows)
 * for the others, but broadcast and reduce where p2pk_coll_rooted_twoshot
 * says (two-shot, simple protocol). */
int p2pk_coll_rooted_twoshot(const struct p2pkit_comm *c, int kind, size_t block) {
  if (!p2pk_coll_has_root(kind) || c->staged || c->nranks < 2) return 0;
  if (c->force.algo >= 0) return c->force.algo == P2PK_ALGO_TWOSHOT;
  return c->nranks > 2 && c->ts_rooted_min && block >= c->ts_rooted_min;
}

void p2pk_coll_choose(const struct p2pkit_comm *c, int kind, size_t block, p2pk_algo_choice *ch) {
  p2pk_algo_force f = c->force;
  if (kind != P2PK_COLL_ALL_REDUCE)
    f.algo = p2pk_coll_rooted_twoshot(c, kind, block) ? P2PK_ALGO_TWOSHOT : P2PK_ALGO_ONESHOT;
  /* Reduce: the simple protocol from 8 MiB (2x H200: 16 MiB 50.6 us
   * against LL128's 52.2, 64 MiB 187.6 against 200.2), where the
   * other collectives gain from LL128 (all-gather of 32 MiB shares 107.8 us
   * against 118.2, reduce-scatter 111.5 against 130.3). */
  if (kind == P2PK_COLL_REDUCE && f.proto < 0 && block > ((size_t)8 << 20)) f.proto = P2PK_PROTO_SIMPLE;
  /* The table's 96-thread LL128 row was measured for the all-reduce; the
   * other collectives keep 256 threads there (2x H200, process per GPU
   * eager, 96 against 256 threads: all-to-all 1 MiB 7.00
   * against 5.66 us, reduce 7.75 against 6.77, all-gather 6.70 against
   * 5.66). Chosen again only there; a grid cap below may still choose its
   * own. */
  const int threads_unset = f.threads <= 0;
  p2pk_algo_choose(&c->table, &f, &c->geom, block, ch);
  if (kind != P2PK_COLL_ALL_REDUCE && threads_unset && ch->proto == P2PK_PROTO_LL128 &&
      ch->threads < 256) {
    f.threads = 256;
    p2pk_algo_choose(&c->table, &f, &c->geom, block, ch);
  }
  /* Two blocks per multiprocessor (as many as the mailboxes allow) for the
   * chunked kernels over P2P from these sizes, unless a setting or the
   * table's row names a grid. On 2x H200: all-reduce 32-64 MiB 8-9%
   * faster, reduce-scatter, all-gather and all-to-all 8-17% faster from 16
   * MiB shares, reduce 1-10% from 16 MiB; but a 16 MiB all-reduce and 8 MiB
   * shares 15-20% slower, and the data-parallel example's ~25 MiB buckets
   * slower too, so smaller calls keep one block per SM. The broadcast
   * kernel gained nothing (one process uses the copy engine, p2p.c). LL and
   * LL128 grids follow their own rule (p2pk_algo_choose). */
  const size_t wide_min = kind == P2PK_COLL_ALL_REDUCE ? (size_t)32 << 20
                          : kind == P2PK_COLL_BROADCAST ? SIZE_MAX : (size_t)16 << 20;
  if (ch->proto == P2PK_PROTO_SIMPLE && !c->staged && f.blocks <= 0 && block >= wide_min) {
    const p2pk_algo_row *r =
        kind == P2PK_COLL_ALL_REDUCE ? p2pk_algo_lookup_fit(&c->table, &c->geom, block) : NULL;
    if (!r || r->blocks <= 0) {
      f.blocks = 2 * c->geom.sm_count;
      p2pk_algo_choose(&c->table, &f, &c->geom, block, ch);
    }
  }
  /* A grid cap (the call's or the communicator's) bounds whatever was
   * chosen; the chunk follows from the smaller grid. Both ends of every
   * pair must have the same cap: the header carries the grid. LL and LL128
   * move a line per thread (per 8 threads), so a grid of theirs capped
   * within one block per SM takes 512 threads a block, unless a setting
   * names them (2x H200, process per GPU, 66 blocks: 16 MiB 113 us at
   * LL128's 256 threads, 66.5 at 512, 58.6
   * uncapped; the chunked protocol 103). */
  const int cap = p2pk_comm_grid_cap(c);
  if (cap > 0 && ch->blocks > cap) {
    f.blocks = cap;
    if (ch->proto != P2PK_PROTO_SIMPLE && threads_unset && cap <= c->geom.sm_count) f.threads = 512;
    p2pk_algo_choose(&c->table, &f, &c->geom, block, ch);
  }
}

int p2pk_coll_ce_ok(const struct p2pkit_comm *c, int kind, size_t block, int capturing) {
  const size_t ce_from = c->multiproc ? c->ce_min[kind] : c->cep_min[kind];
  if (!ce_from || block < ce_from) return 0;
  /* Broadcast under capture: with a process per GPU from its threshold
   * there (cep_min; docs/decisions/copy-engine-thresholds.md), one
   * process only straight into the peers' outputs (p2p.c), as
   * all-to-all (whose landing-slot path is for a process per GPU). */
  const int cap_ok =
      !c->staged && c->cep_cap_ok && (kind == P2PK_COLL_ALL_TO_ALL || kind == P2PK_COLL_ALL_GATHER ? c->multiproc
                     : kind != P2PK_COLL_BROADCAST || (c->multiproc && block >= c->cep_min[kind]));
  const int eager_ok = c->multiproc;
  return capturing ? cap_ok : eager_ok;
}

void p2pk_coll_kernel_choice(const struct p2pkit_comm *c, int kind, size_t block,
                             const p2pk_coll_plan *pl, p2pk_algo_choice *ch) {
  /* Staged: the grid covers the whole chunk stream (reduce-scatter and
   * all-to-all carry n or n-1 shares through it, kern_staged.cu). */
  const int segs =
      c->staged ? p2pk_stage_segs(p2pk_stage_mode(pl->in_stride, pl->reduce), c->nranks) : 1;
  p2pk_coll_choose(c, kind, block * (size_t)segs, ch);
  if (c->staged && c->force.blocks <= 0) {
    /* At least one block per segment while chunks cover a whole share, so
     * a small reduce-scatter's segments do not queue behind one block. */
    int cap = p2pk_algo_staged_blocks_max(&c->geom);
    if (ch->chunk >= block && ch->blocks < segs) ch->blocks = segs < cap ? segs : cap;
  }
}

int p2pk_coll_self_ce(const struct p2pkit_comm *c, int kind, size_t block) {
  return kind == P2PK_COLL_BROADCAST && c->bcast_self_ce && block >= c->bcast_self_ce;
}

/* A deferred collective (launch_pool.c), with the grid cap of its call. */
static p2pkit_status_t coll_job(const p2pk_job *j) {
  const int cap = j->c->grid_cap;
  j->c->grid_cap = j->grid_cap;
  p2pkit_status_t st = p2pk_coll_launch(j->c, j->kind, j->send, j->recv, j->count, j->dtype, j->op,
                                        j->root, j->stream);
  j->c->grid_cap = cap;
  return st;
}

p2pkit_status_t p2pk_coll_launch(struct p2pkit_comm *c, int kind, const void *sendbuf,
                                 void *recvbuf, size_t count, p2pkit_dtype_t dtype,
                                 p2pkit_redop_t op, int root, p2pkit_stream_t stream) {
  const char *name = p2pk_coll_name(kind);
  const int has_op = p2pk_coll_has_op(kind);
  size_t es = 0;
  P2PK_CHECK(p2pk_coll_check_args(c, name, dtype, has_op, op, count, &es));
  if (!has_op) op = P2PKIT_SUM;
  if (!p2pk_coll_has_root(kind)) root = 0;
  else if (root < 0 || root >= c->nranks)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: root %d is not a rank of %d",
                     name, c->rank, root, c->nranks);
  if (count == 0) return P2PKIT_SUCCESS;
  const size_t block = count * es;
  p2pk_coll_plan pl;
  /* Addresses only: NULL checks come first, with the plan saying which
   * buffer this rank uses. */
  P2PK_CHECK(p2pk_coll_plan_make(kind, c->rank, c->nranks, root, block, (const void *)16,
                                 (const void *)((uintptr_t)1 << 62), &pl));
  const char *s = sendbuf, *r = recvbuf;
  if ((pl.in_bytes && !s) || (pl.out_bytes && !r))
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: %s is NULL", name, c->rank,
                     pl.in_bytes && !s ? "sendbuf" : "recvbuf");
  P2PK_CHECK(p2pk_comm_async_status(c));
  if ((pl.in_bytes && (uintptr_t)s % es) || (pl.out_bytes && (uintptr_t)r % es))
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: buffers %p, %p are not "
                     "aligned to their %zu-byte %s elements", name, c->rank, sendbuf, recvbuf, es,
                     p2pkit_dtype_name(dtype));
  P2PK_CHECK(p2pk_coll_plan_make(kind, c->rank, c->nranks, root, block, s, r, &pl));
  int direct_ok = 0, unused = 0;
  if (pl.in_bytes) P2PK_CHECK(p2pk_coll_check_ptr(c, sendbuf, "sendbuf", &unused));
  if (pl.out_bytes) P2PK_CHECK(p2pk_coll_check_ptr(c, recvbuf, "recvbuf", &direct_ok));

  if (p2pk_group_defer(c, kind, sendbuf, recvbuf, count, dtype, op, root, block, stream))
    return P2PKIT_SUCCESS;
  P2PK_CHECK(p2pk_group_collective());
  /* One process in a group: made when the group ends, by a thread per GPU
   * (launch_pool.c), which calls here again. */
  if (p2pk_group_job_ok(c, stream)) {
    p2pk_job j = {.c = c, .run = coll_job, .kind = kind, .root = root, .grid_cap = c->grid_cap,
                  .send = sendbuf, .recv = recvbuf, .count = count, .dtype = dtype, .op = op,
                  .stream = stream};
    return p2pk_job_defer(&j);
  }
  int prev = -1;
  P2PK_CHECK(p2pk_coll_enter(c, name, &prev));
  cudaError_t e = cudaSuccess;
  if (c->nranks == 1) {
    if (pl.in_bytes && pl.out_bytes && s != r)
      e = cudaMemcpyAsync(recvbuf, sendbuf, block, cudaMemcpyDeviceToDevice, (cudaStream_t)stream);
    return p2pk_coll_leave(c, name, prev, e);
  }
  const size_t ce_from = c->multiproc ? c->ce_min[kind] : c->cep_min[kind];
  if (ce_from && block >= ce_from && !p2pk_group_kernel_only()) {
    /* Process per GPU over the copy engines: through host memory without
     * P2P (ce_staged.c, all-reduce; the kernel under capture, where a graph
     * would replay chunk numbers that have moved on), through the landing
     * slots over P2P (ce_p2p_mp.c, whose handshakes a graph can replay).
     * One process: through the landing slots under capture only (eager
     * calls in a group took ce_p2p.c's events in p2p.c already; the others,
     * outside a group or with a rank's call missing, take the kernel). */
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    e = cudaStreamIsCapturing((cudaStream_t)stream, &cs);
    if (e == cudaSuccess && p2pk_coll_ce_ok(c, kind, block, cs != cudaStreamCaptureStatusNone)) {
      cudaStream_t cs_stream = (cudaStream_t)stream;
      e = c->staged ? p2pk_staged_ce_allreduce_mp(c, sendbuf, recvbuf, count, dtype, op, cs_stream)
                    : p2pk_cep_collective(c, kind, sendbuf, recvbuf, count, dtype, op, root, cs_stream,
                                          cs != cudaStreamCaptureStatusNone);
      return p2pk_coll_leave(c, name, prev, e);
    }
    if (e != cudaSuccess) return p2pk_coll_leave(c, name, prev, e);
  }
  p2pk_algo_choice ch;
  p2pk_coll_kernel_choice(c, kind, block, &pl, &ch);
  p2pk_ar_args a = c->tmpl;
  a.in = sendbuf;
  a.out = recvbuf;
  a.count = count;
  a.dtype = dtype;
  a.op = op;
  a.algo = ch.algo;
  a.proto = ch.proto;
  a.ll128_x2 = ch.ll128_x2;
  a.slots = ch.slots;
  a.chunk = ch.chunk;
  /* Broadcast and reduce in two-shot: the rooted form (coll_dev.h's
   * p2pk_ts_shard), whose masks replace the one-shot plan's. */
  const int rooted = ch.algo == P2PK_ALGO_TWOSHOT && kind != P2PK_COLL_ALL_REDUCE;
  if (rooted) {
    p2pk_coll_plan_twoshot(kind, c->rank, c->nranks, root, &pl);
    a.ts_root1 = root + 1;
  }
  a.send_mask = pl.send_mask;
  a.recv_mask = pl.recv_mask;
  a.send2_mask = pl.send2_mask;
  a.recv2_mask = pl.recv2_mask;
  a.in_stride = pl.in_stride;
  a.out_stride = pl.out_stride;
  a.reduce = pl.reduce;
  a.self_copy = pl.self_copy;
  p2pk_coll_header(kind, count, dtype, op, root, ch.algo, ch.proto, ch.blocks, &a.hdr0, &a.hdr1);
  /* Two-shot results straight into the peers' outputs: all-reduce's
   * owners send to everyone, a reduce's to the root (whose token counts);
   * a broadcast's owners forward to peers that sent them nothing, so no
   * token tells them where those outputs are. */
  if (ch.algo == P2PK_ALGO_TWOSHOT && kind != P2PK_COLL_BROADCAST) set_direct(c, &a, r, block, direct_ok);
  uint64_t combo = 1ULL << ((kind * P2PK_ALGO_COUNT + ch.algo) * P2PK_PROTO_COUNT + ch.proto);
  if (!(c->logged & combo)) {
    c->logged |= combo;
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): %s of %zu B uses %s/%s, %d blocks x %d "
              "threads, chunk %u B%s%s", c->rank, c->device, name, block, p2pk_algo_name(ch.algo),
              p2pk_proto_name(ch.proto), ch.blocks, ch.threads, ch.chunk,
              !rooted ? ""
              : kind == P2PK_COLL_BROADCAST ? ", rooted: the root scatters n - 1 shards, their owners forward them"
                                            : ", rooted: the owners of n - 1 shards reduce them for the root",
              a.out_token ? kind == P2PK_COLL_REDUCE ? ", into the root's output" : ", all-gather into peers' outputs" : "");
  }
  P2PK_TRACE(P2PK_LOG_COLL, "rank %d %s %zu x %s %s root %d: %s/%s grid %d x %d chunk %u",
             c->rank, name, count, p2pkit_dtype_name(dtype), p2pkit_redop_name(op), root,
             p2pk_algo_name(ch.algo), p2pk_proto_name(ch.proto), ch.blocks, ch.threads, ch.chunk);
  /* Under capture the broadcast root's own copy (out of place) goes by copy
   * engine on a side stream beside the kernel, which then only pushes: a
   * memcpy node in parallel with the kernel node. On 2x H200, both modes:
   * 64 MiB out of place under a graph 189.4-190.0 us against 200.5-200.9
   * with the kernel copying inline (1.01x -> 1.07-1.08x NCCL), 8-32 MiB
   * 2-3% faster, 4 MiB a tie; eagerly the extra calls cost more than they
   * save (1 MiB per GPU 12.6 against 5.9 us), so never there. */
  int own_ce = 0;
  if (a.self_copy && p2pk_coll_self_ce(c, kind, block)) {
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    e = cudaStreamIsCapturing((cudaStream_t)stream, &cs);
    if (e != cudaSuccess) return p2pk_coll_leave(c, name, prev, e);
    own_ce = cs == cudaStreamCaptureStatusActive;
  }
  if (own_ce) {
    e = p2pk_lazy_stream(&c->ce_side);
    if (e == cudaSuccess) e = p2pk_lazy_event(&c->ce_ev[1]);
    if (e == cudaSuccess) e = p2pk_lazy_event(&c->ce_ev[2]);
    if (e == cudaSuccess) e = cudaEventRecord(c->ce_ev[1], (cudaStream_t)stream);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(c->ce_side, c->ce_ev[1], 0);
    if (e == cudaSuccess)
      e = cudaMemcpyAsync((char *)recvbuf + (size_t)c->rank * pl.out_stride,
                          (const char *)sendbuf + (size_t)c->rank * pl.in_stride, block,
                          cudaMemcpyDeviceToDevice, c->ce_side);
    if (e == cudaSuccess) e = cudaEventRecord(c->ce_ev[2], c->ce_side);
    if (e != cudaSuccess) return p2pk_coll_leave(c, name, prev, e);
    a.self_copy = 0;
    if (!c->bcast_self_logged) {
      c->bcast_self_logged = 1;
      P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): broadcast root of %zu B under a CUDA graph: "
                "its own copy by copy engine beside the kernel (from %zu B, "
                "P2PKIT_BCAST_SELF_CE)", c->rank, c->device, block, c->bcast_self_ce);
    }
  }
  e = c->staged ? p2pk_launch_allreduce_staged(&a, ch.blocks, ch.threads, (cudaStream_t)stream)
                : p2pk_launch_allreduce_p2p(&a, ch.blocks, ch.threads, (cudaStream_t)stream);
  if (e == cudaSuccess && own_ce) e = cudaStreamWaitEvent((cudaStream_t)stream, c->ce_ev[2], 0);
  return p2pk_coll_leave(c, name, prev, e);
}

p2pkit_status_t p2pkit_all_reduce(const void *sendbuf, void *recvbuf, size_t count,
                                  p2pkit_dtype_t dtype, p2pkit_redop_t op, p2pkit_comm_t c,
                                  p2pkit_stream_t stream) {
  return p2pk_coll_launch(c, P2PK_COLL_ALL_REDUCE, sendbuf, recvbuf, count, dtype, op, 0, stream);
}

p2pkit_status_t p2pk_all_reduce_capped(const void *sendbuf, void *recvbuf, size_t count,
                                       p2pkit_dtype_t dtype, p2pkit_redop_t op, p2pkit_comm_t c,
                                       p2pkit_stream_t stream, int max_blocks) {
  if (!c) return p2pkit_all_reduce(sendbuf, recvbuf, count, dtype, op, c, stream);
  /* Over P2P only: p2pk_comm_grid_cap ignores it on the staged transport. */
  c->grid_cap = max_blocks > 0 ? max_blocks : 0;
  p2pkit_status_t st =
      p2pk_coll_launch(c, P2PK_COLL_ALL_REDUCE, sendbuf, recvbuf, count, dtype, op, 0, stream);
  c->grid_cap = 0;
  return st;
}

int p2pk_comm_half_grid(const struct p2pkit_comm *c) {
  const int h = (c->geom.sm_count / 2) & ~7;
  return h < 8 ? 8 : h;
}

p2pkit_status_t p2pkit_broadcast(const void *sendbuf, void *recvbuf, size_t count,
                                 p2pkit_dtype_t dtype, int root, p2pkit_comm_t c,
                                 p2pkit_stream_t stream) {
  return p2pk_coll_launch(c, P2PK_COLL_BROADCAST, sendbuf, recvbuf, count, dtype, P2PKIT_SUM, root,
                          stream);
}

p2pkit_status_t p2pkit_reduce(const void *sendbuf, void *recvbuf, size_t count,
                              p2pkit_dtype_t dtype, p2pkit_redop_t op, int root, p2pkit_comm_t c,
                              p2pkit_stream_t stream) {
  return p2pk_coll_launch(c, P2PK_COLL_REDUCE, sendbuf, recvbuf, count, dtype, op, root, stream);
}

p2pkit_status_t p2pkit_all_gather(const void *sendbuf, void *recvbuf, size_t count,
                                  p2pkit_dtype_t dtype, p2pkit_comm_t c, p2pkit_stream_t stream) {
  return p2pk_coll_launch(c, P2PK_COLL_ALL_GATHER, sendbuf, recvbuf, count, dtype, P2PKIT_SUM, 0,
                          stream);
}

p2pkit_status_t p2pkit_reduce_scatter(const void *sendbuf, void *recvbuf, size_t count,
                                      p2pkit_dtype_t dtype, p2pkit_redop_t op, p2pkit_comm_t c,
                                      p2pkit_stream_t stream) {
  return p2pk_coll_launch(c, P2PK_COLL_REDUCE_SCATTER, sendbuf, recvbuf, count, dtype, op, 0,
                          stream);
}

p2pkit_status_t p2pkit_all_to_all(const void *sendbuf, void *recvbuf, size_t count,
                                  p2pkit_dtype_t dtype, p2pkit_comm_t c, p2pkit_stream_t stream) {
  return p2pk_coll_launch(c, P2PK_COLL_ALL_TO_ALL, sendbuf, recvbuf, count, dtype, P2PKIT_SUM, 0,
                          stream);
}
