/* SPDX-License-Identifier: BSD-3-Clause */
/* Gradient sync: the bucket plan (plan.c) plus streams, events, the bucket
 * arena and the all-reduces (docs/ARCHITECTURE.md, ddp). */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "core/check.h"
#include "core/param.h"
#include "ddp/plan.h"
#include "p2pkit.h"

struct p2pkit_grad_sync {
  p2pkit_comm_t comm;
  int device, rank;
  p2pk_ddp_plan plan;
  cudaStream_t comm_stream;
  int own_stream;
  cudaEvent_t ev_compute, ev_comm;
  char *arena;
  void *reg;
  cudaStream_t last_stream; /* stream of the previous mark_ready this step */
  int have_last;
  p2pkit_status_t err;      /* first failure of a launch: every later call returns it */
  int max_blocks;           /* the bucket all-reduces' grid cap (0: none) */
};

/* The allocation's process-wide id (p2pk_alloc_id), so a gradient buffer
 * freed (and maybe reallocated at the same address) since registration is
 * noticed. */
static p2pkit_status_t alloc_id(const void *buf, unsigned long long *id_p) {
  const int r = p2pk_alloc_id(buf, id_p);
  if (r < 0)
    return p2pk_fail(P2PKIT_ERR_CUDA, "grad_sync: cuPointerGetAttribute is not available from the "
                     "driver");
  return r == 0 ? P2PKIT_SUCCESS : P2PKIT_ERR_INVALID_ARGUMENT; /* callers word the error */
}

/* Run the body on the communicator's GPU, restoring the caller's. */
static int enter(const struct p2pkit_grad_sync *gs) {
  int cur = -1;
  cudaGetDevice(&cur);
  if (cur != gs->device) cudaSetDevice(gs->device);
  return cur;
}
static void leave(const struct p2pkit_grad_sync *gs, int cur) {
  if (cur >= 0 && cur != gs->device) cudaSetDevice(cur);
}

void p2pkit_grad_sync_opts_init(p2pkit_grad_sync_opts_t *opts) {
  const p2pkit_grad_sync_opts_t defaults = P2PKIT_GRAD_SYNC_OPTS_INIT;
  if (opts) *opts = defaults;
}

/* The caller's options as this library knows them (version 1: one size). */
static p2pkit_status_t opts_check(const p2pkit_grad_sync_opts_t *o) {
  if (o->size == 0 || o->version == 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "p2pkit_grad_sync_opts_t: size %zu, version %u: "
                     "fill it with p2pkit_grad_sync_opts_init or P2PKIT_GRAD_SYNC_OPTS_INIT",
                     o->size, o->version);
  if (o->version > P2PKIT_GRAD_SYNC_OPTS_VERSION)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "p2pkit_grad_sync_opts_t version %u is newer than "
                     "this library's (%d): the caller was built against a newer p2pkit.h",
                     o->version, P2PKIT_GRAD_SYNC_OPTS_VERSION);
  if (o->size != sizeof *o)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "p2pkit_grad_sync_opts_t.size is %zu, but a "
                     "version %u one has %zu bytes: fill it with p2pkit_grad_sync_opts_init or "
                     "P2PKIT_GRAD_SYNC_OPTS_INIT", o->size, o->version, sizeof *o);
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pkit_grad_sync_create(p2pkit_comm_t comm, const p2pkit_grad_sync_opts_t *opts,
                                        p2pkit_grad_sync_t *gs_p) {
  if (!comm || !gs_p)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync_create: communicator or gs_p is NULL");
  P2PK_CHECK(p2pk_param_check()); /* P2PKIT_BUCKET_SIZE, _FIRST_BUCKET_SIZE, _GRAD_SYNC_BLOCKS */
  if (opts) P2PK_CHECK(opts_check(opts));
  p2pkit_grad_sync_opts_t o;
  p2pkit_grad_sync_opts_init(&o);
  if (opts) o = *opts;
  if (o.max_blocks < -1 || o.max_blocks > P2PK_COLL_MAX_BLOCKS)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync_create: max_blocks %d: expected -1 "
                     "(no cap), 0 (the default) or 1..%d", o.max_blocks, P2PK_COLL_MAX_BLOCKS);
  if (!o.bucket_bytes) o.bucket_bytes = p2pk_param_size("P2PKIT_BUCKET_SIZE");
  if (!o.first_bucket_bytes) o.first_bucket_bytes = p2pk_param_size("P2PKIT_FIRST_BUCKET_SIZE");
  if (!o.bucket_bytes || !o.first_bucket_bytes)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync_create: bucket sizes must be positive "
                     "(P2PKIT_BUCKET_SIZE, P2PKIT_FIRST_BUCKET_SIZE)");
  struct p2pkit_grad_sync *gs = calloc(1, sizeof *gs);
  if (!gs) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "grad_sync_create: out of memory");
  gs->comm = comm;
  gs->device = p2pkit_comm_device(comm);
  gs->rank = p2pkit_comm_rank(comm);
  /* The buckets' all-reduces run beside the backward pass, so they take
   * half the SMs by default: on 2x H200 a full grid slowed the example's
   * compute from 1.82 to 2.07 ms a step (a 1.095x step against NCCL's),
   * half the 132 SMs gave 1.03x, 32 blocks 1.20x
   * (docs/decisions/gradient-sync-grid-cap.md); max_blocks tunes it. */
  int mb = o.max_blocks ? o.max_blocks : (int)p2pk_param_int("P2PKIT_GRAD_SYNC_BLOCKS");
  gs->max_blocks = mb < 0 ? 0 : mb > 0 ? mb : p2pk_comm_half_grid(comm);
  p2pk_ddp_plan_init(&gs->plan, o.bucket_bytes, o.first_bucket_bytes);
  int cur = enter(gs);
  p2pkit_status_t st = P2PKIT_SUCCESS;
  if (o.comm_stream) {
    gs->comm_stream = (cudaStream_t)o.comm_stream;
  } else {
    P2PK_CUDA_CHECK_GOTO(cudaStreamCreateWithFlags(&gs->comm_stream, cudaStreamNonBlocking), st, fail);
    gs->own_stream = 1;
  }
  P2PK_CUDA_CHECK_GOTO(cudaEventCreateWithFlags(&gs->ev_compute, cudaEventDisableTiming), st, fail);
  P2PK_CUDA_CHECK_GOTO(cudaEventCreateWithFlags(&gs->ev_comm, cudaEventDisableTiming), st, fail);
  leave(gs, cur);
  P2PK_INFO(P2PK_LOG_COLL, "grad_sync: rank %d, buckets of %zu bytes, first %zu, all-reduce "
            "kernels of at most %d blocks (0: no cap)", gs->rank, o.bucket_bytes,
            o.first_bucket_bytes, gs->max_blocks);
  *gs_p = gs;
  return P2PKIT_SUCCESS;
fail:
  if (gs->ev_compute) cudaEventDestroy(gs->ev_compute);
  if (gs->own_stream && gs->comm_stream) cudaStreamDestroy(gs->comm_stream);
  leave(gs, cur);
  p2pk_ddp_plan_free(&gs->plan);
  free(gs);
  return st;
}

p2pkit_status_t p2pkit_grad_sync_register(p2pkit_grad_sync_t gs, void *buf, size_t count,
                                          p2pkit_dtype_t dtype) {
  if (!gs) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync_register: gs is NULL");
  unsigned long long id = 0;
  if (buf) {
    struct cudaPointerAttributes at;
    if (cudaPointerGetAttributes(&at, buf) != cudaSuccess) {
      cudaGetLastError();
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync_register: gradient %zu at %p is not "
                       "memory CUDA knows", gs->plan.ngrads, buf);
    }
    if (at.type != cudaMemoryTypeDevice || at.device != gs->device)
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync_register: gradient %zu at %p is not "
                       "device memory of GPU %d (rank %d's)", gs->plan.ngrads, buf, gs->device,
                       gs->rank);
    if (alloc_id(buf, &id) != P2PKIT_SUCCESS)
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync_register: gradient %zu at %p: the "
                       "driver does not know its allocation", gs->plan.ngrads, buf);
  }
  P2PK_CHECK(p2pk_ddp_plan_add(&gs->plan, buf, count, dtype));
  gs->plan.grads[gs->plan.ngrads - 1].alloc_id = id;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pkit_grad_sync_build(p2pkit_grad_sync_t gs) {
  if (!gs) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync_build: gs is NULL");
  /* Every rank reaches the collective registration below, even after a local
   * failure, so the others fail with it instead of waiting for the timeout. */
  p2pkit_status_t st = p2pk_ddp_plan_layout(&gs->plan);
  int cur = enter(gs);
  if (st == P2PKIT_SUCCESS) {
    cudaError_t e = cudaMalloc((void **)&gs->arena, gs->plan.arena_bytes);
    if (e == cudaSuccess) e = cudaMemset(gs->arena, 0, gs->plan.arena_bytes);
    if (e != cudaSuccess) {
      cudaGetLastError();
      st = p2pk_fail(P2PKIT_ERR_NO_MEMORY, "grad_sync_build: rank %d: %zu bytes of buckets on GPU "
                     "%d: %s", gs->rank, gs->plan.arena_bytes, gs->device, cudaGetErrorString(e));
    }
  }
  p2pkit_status_t rs = p2pkit_comm_register(gs->comm, st == P2PKIT_SUCCESS ? gs->arena : NULL,
                                            st == P2PKIT_SUCCESS ? gs->plan.arena_bytes : 0,
                                            &gs->reg);
  if (st == P2PKIT_SUCCESS) st = rs;
  if (rs != P2PKIT_SUCCESS) gs->reg = NULL;
  if (st == P2PKIT_SUCCESS) st = p2pk_ddp_plan_bind(&gs->plan, (uintptr_t)gs->arena);
  leave(gs, cur);
  if (st == P2PKIT_SUCCESS)
    P2PK_INFO(P2PK_LOG_COLL, "grad_sync: rank %d: %zu gradients in %zu buckets, %zu bytes", gs->rank,
              gs->plan.ngrads, gs->plan.nbuckets, gs->plan.arena_bytes);
  return st;
}

p2pkit_status_t p2pkit_grad_sync_grad(p2pkit_grad_sync_t gs, size_t index, void **ptr_p) {
  if (!gs || !ptr_p) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync_grad: gs or ptr_p is NULL");
  if (!gs->plan.bound) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync_grad: before build");
  if (index >= gs->plan.ngrads)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync_grad: gradient %zu of %zu", index,
                     gs->plan.ngrads);
  *ptr_p = (void *)gs->plan.grads[index].addr;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pkit_grad_sync_bucket_count(p2pkit_grad_sync_t gs, size_t *n_p) {
  if (!gs || !n_p) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync_bucket_count: NULL argument");
  if (!gs->plan.bound) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync_bucket_count: before build");
  *n_p = gs->plan.nbuckets;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pkit_grad_sync_bucket_info(p2pkit_grad_sync_t gs, size_t bucket, size_t *bytes_p,
                                             size_t *ngrads_p) {
  if (!gs) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync_bucket_info: gs is NULL");
  if (!gs->plan.bound || bucket >= gs->plan.nbuckets)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync_bucket_info: bucket %zu of %zu", bucket,
                     gs->plan.nbuckets);
  if (bytes_p) *bytes_p = gs->plan.buckets[bucket].bytes;
  if (ngrads_p) *ngrads_p = gs->plan.buckets[bucket].n;
  return P2PKIT_SUCCESS;
}

/* Bucket b on the communication stream: copy the caller's gradients in,
 * average in place, copy them back. */
static p2pkit_status_t launch_bucket(struct p2pkit_grad_sync *gs, size_t b) {
  const p2pk_ddp_bucket *bk = &gs->plan.buckets[b];
  char *base = gs->arena + bk->offset;
  for (size_t k = bk->first; k < bk->first + bk->n; k++) {
    const p2pk_ddp_grad *g = &gs->plan.grads[gs->plan.members[k]];
    if (g->user)
      P2PK_CUDA_CHECK(cudaMemcpyAsync(base + g->offset, g->user, g->bytes, cudaMemcpyDeviceToDevice,
                                      gs->comm_stream));
  }
  P2PK_CHECK(p2pk_all_reduce_capped(base, base, bk->count, bk->dtype, P2PKIT_AVG, gs->comm,
                                    (p2pkit_stream_t)gs->comm_stream, gs->max_blocks));
  for (size_t k = bk->first; k < bk->first + bk->n; k++) {
    const p2pk_ddp_grad *g = &gs->plan.grads[gs->plan.members[k]];
    if (g->user)
      P2PK_CUDA_CHECK(cudaMemcpyAsync((void *)g->user, base + g->offset, g->bytes,
                                      cudaMemcpyDeviceToDevice, gs->comm_stream));
  }
  return P2PKIT_SUCCESS;
}

/* The communication stream waits for `stream`'s work so far. */
static p2pkit_status_t comm_waits_for(struct p2pkit_grad_sync *gs, cudaStream_t stream) {
  P2PK_CUDA_CHECK(cudaEventRecord(gs->ev_compute, stream));
  P2PK_CUDA_CHECK(cudaStreamWaitEvent(gs->comm_stream, gs->ev_compute, 0));
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pkit_grad_sync_mark_ready(p2pkit_grad_sync_t gs, const void *buf,
                                            p2pkit_stream_t stream) {
  if (!gs) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync_mark_ready: gs is NULL");
  if (gs->err != P2PKIT_SUCCESS)
    return p2pk_fail(gs->err, "grad_sync_mark_ready: rank %d: an earlier bucket failed (%s)",
                     gs->rank, p2pkit_strerror(gs->err));
  size_t i = 0;
  P2PK_CHECK(p2pk_ddp_plan_find(&gs->plan, buf, &i));
  const p2pk_ddp_grad *g = &gs->plan.grads[i];
  if (g->user) {
    unsigned long long id = 0;
    if (alloc_id(g->user, &id) != P2PKIT_SUCCESS || id != g->alloc_id)
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync_mark_ready: rank %d: gradient %zu's "
                       "buffer %p was freed (or reallocated) since it was registered", gs->rank, i,
                       g->user);
  }
  int cur = enter(gs);
  p2pkit_status_t st = P2PKIT_SUCCESS;
  cudaStream_t s = (cudaStream_t)stream;
  size_t from = 0, to = 0;
  if (gs->have_last && gs->last_stream != s) P2PK_CHECK_GOTO(comm_waits_for(gs, gs->last_stream), st, out);
  P2PK_CHECK_GOTO(p2pk_ddp_plan_mark(&gs->plan, i, &from, &to), st, out);
  gs->last_stream = s;
  gs->have_last = 1;
  if (from < to) {
    P2PK_CHECK_GOTO(comm_waits_for(gs, s), st, out);
    for (size_t b = from; b < to; b++) {
      st = launch_bucket(gs, b);
      if (st != P2PKIT_SUCCESS) {
        gs->err = st;
        break;
      }
    }
  }
out:
  leave(gs, cur);
  return st;
}

p2pkit_status_t p2pkit_grad_sync_wait(p2pkit_grad_sync_t gs, p2pkit_stream_t stream) {
  if (!gs) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync_wait: gs is NULL");
  int cur = enter(gs);
  p2pkit_status_t st = p2pk_ddp_plan_finish(&gs->plan);
  gs->have_last = 0;
  cudaError_t e = cudaEventRecord(gs->ev_comm, gs->comm_stream);
  if (e == cudaSuccess) e = cudaStreamWaitEvent((cudaStream_t)stream, gs->ev_comm, 0);
  if (e != cudaSuccess && st == P2PKIT_SUCCESS)
    st = p2pk_fail(P2PKIT_ERR_CUDA, "grad_sync_wait: rank %d: %s", gs->rank, cudaGetErrorString(e));
  leave(gs, cur);
  if (st == P2PKIT_SUCCESS && gs->err != P2PKIT_SUCCESS)
    st = p2pk_fail(gs->err, "grad_sync_wait: rank %d: a bucket failed to launch (%s)", gs->rank,
                   p2pkit_strerror(gs->err));
  p2pkit_status_t as = P2PKIT_SUCCESS;
  if (st == P2PKIT_SUCCESS && p2pkit_comm_get_async_error(gs->comm, &as) == P2PKIT_SUCCESS &&
      as != P2PKIT_SUCCESS)
    st = p2pk_fail(as, "grad_sync_wait: rank %d: the communicator reports %s", gs->rank,
                   p2pkit_strerror(as));
  return st;
}

p2pkit_status_t p2pkit_grad_sync_destroy(p2pkit_grad_sync_t gs) {
  if (!gs) return P2PKIT_SUCCESS;
  int cur = enter(gs);
  p2pkit_status_t st = P2PKIT_SUCCESS;
  if (gs->comm_stream) cudaStreamSynchronize(gs->comm_stream);
  if (gs->reg) st = p2pkit_comm_deregister(gs->comm, gs->reg);
  if (gs->arena) cudaFree(gs->arena);
  if (gs->ev_compute) cudaEventDestroy(gs->ev_compute);
  if (gs->ev_comm) cudaEventDestroy(gs->ev_comm);
  if (gs->own_stream) cudaStreamDestroy(gs->comm_stream);
  cudaGetLastError();
  leave(gs, cur);
  p2pk_ddp_plan_free(&gs->plan);
  free(gs);
  return st;
}
