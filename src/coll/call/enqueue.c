/* SPDX-License-Identifier: BSD-3-Clause */
/* The entry points of every collective and of send/recv: the checks of
 * each call (communicator, type, operation, count, root or peer, buffers
 * and their alignment, the error a kernel left behind), then its plan and
 * its place in the group (group.c), which launches it. No allocation, no
 * synchronisation; pointers are checked with CUDA once and remembered. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <string.h>

#include "coll/paths/path.h"
#include "core/check.h"
#include "nccl/dtype.h"

/* Device memory of this rank's GPU (or managed memory). *direct_ok: plain
 * device memory, which peers may write into. */
static p2pkit_status_t check_ptr(struct p2pkit_comm *c, const void *p, const char *what,
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

p2pkit_status_t p2pk_check_buffer(struct p2pkit_comm *c, const void *p, const char *what) {
  int unused = 0;
  return check_ptr(c, p, what, &unused);
}

p2pkit_status_t p2pk_check_args(struct p2pkit_comm *c, const char *name, p2pkit_dtype_t dtype,
                                int has_op, p2pkit_redop_t op, size_t count, size_t *es_p) {
  if (!c) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: communicator is NULL", name);
  size_t es = p2pkit_dtype_size(dtype);
  if (!es)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: data type %d is not a "
                     "p2pkit_dtype_t", name, c->rank, (int)dtype);
  /* The types only NCCL carries: through NCCL (its version and the GPU
   * allowing), refused in one line when P2PKIT_NCCL=0. */
  if (!p2pk_dtype_native(dtype)) P2PK_CHECK(p2pk_nccl_type_check(c, name, dtype, has_op, op));
  if (has_op && ((int)op < 0 || op >= P2PKIT_REDOP_COUNT))
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: operation %d is not a "
                     "p2pkit_redop_t", name, c->rank, (int)op);
  if (count > P2PK_MAX_COUNT || count > SIZE_MAX / es / (size_t)c->nranks)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: count %zu is too large", name,
                     c->rank, count);
  *es_p = es;
  return P2PKIT_SUCCESS;
}

/* A collective's buffers: NULL where its plan reads or writes, aligned to
 * their elements, not overlapping but in its in-place form, memory of this
 * rank's GPU; its plan into call->plan. */
static p2pkit_status_t check_buffers(p2pk_call *call, const char *name) {
  struct p2pkit_comm *c = call->c;
  p2pk_coll_plan *pl = &call->plan;
  const char *s = call->send, *r = call->recv;
  const size_t es = call->esize;
  /* Addresses only: NULL checks come first, with the plan saying which
   * buffer this rank uses. */
  P2PK_CHECK(p2pk_coll_plan_make(call->kind, c->rank, c->nranks, call->root, call->bytes,
                                 (const void *)16, (const void *)((uintptr_t)1 << 62), pl));
  if ((pl->in_bytes && !s) || (pl->out_bytes && !r))
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: %s is NULL", name, c->rank,
                     pl->in_bytes && !s ? "sendbuf" : "recvbuf");
  P2PK_CHECK(p2pk_comm_async_status(c));
  if ((pl->in_bytes && (uintptr_t)s % es) || (pl->out_bytes && (uintptr_t)r % es))
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: buffers %p, %p are not "
                     "aligned to their %zu-byte %s elements", name, c->rank, call->send, call->recv,
                     es, p2pkit_dtype_name(call->dtype));
  P2PK_CHECK(p2pk_coll_plan_make(call->kind, c->rank, c->nranks, call->root, call->bytes, s, r, pl));
  int unused = 0;
  if (pl->in_bytes) P2PK_CHECK(check_ptr(c, call->send, "sendbuf", &unused));
  if (pl->out_bytes) P2PK_CHECK(check_ptr(c, call->recv, "recvbuf", &call->direct_ok));
  return P2PKIT_SUCCESS;
}

/* One collective (P2PK_COLL_*): checks, plan, its group. */
static p2pkit_status_t coll(struct p2pkit_comm *c, int kind, const void *sendbuf, void *recvbuf,
                            size_t count, p2pkit_dtype_t dtype, p2pkit_redop_t op, int root,
                            p2pkit_stream_t stream, int grid_cap) {
  const char *name = p2pk_coll_name(kind);
  const int has_op = p2pk_coll_has_op(kind);
  size_t es = 0;
  P2PK_CHECK(p2pk_check_args(c, name, dtype, has_op, op, count, &es));
  if (!has_op) op = P2PKIT_SUM;
  if (!p2pk_coll_has_root(kind)) root = 0;
  else if (root < 0 || root >= c->nranks)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: root %d is not a rank of %d",
                     name, c->rank, root, c->nranks);
  if (count == 0) return P2PKIT_SUCCESS;
  p2pk_call call;
  memset(&call, 0, sizeof call);
  call.c = c;
  call.kind = kind;
  call.send = sendbuf;
  call.recv = recvbuf;
  call.count = count;
  call.bytes = count * es;
  call.esize = es;
  call.dtype = dtype;
  call.op = op;
  call.root = root;
  call.grid_cap = grid_cap;
  call.capture = -1;
  call.stream = stream;
  P2PK_CHECK(check_buffers(&call, name));
  return p2pk_group_add(&call);
}

p2pkit_status_t p2pkit_all_reduce(const void *sendbuf, void *recvbuf, size_t count,
                                  p2pkit_dtype_t dtype, p2pkit_redop_t op, p2pkit_comm_t c,
                                  p2pkit_stream_t stream) {
  return coll(c, P2PK_COLL_ALL_REDUCE, sendbuf, recvbuf, count, dtype, op, 0, stream, 0);
}

p2pkit_status_t p2pk_all_reduce_capped(const void *sendbuf, void *recvbuf, size_t count,
                                       p2pkit_dtype_t dtype, p2pkit_redop_t op, p2pkit_comm_t c,
                                       p2pkit_stream_t stream, int max_blocks) {
  /* Over P2P only: the selector's cap ignores it on the staged transport. */
  return coll(c, P2PK_COLL_ALL_REDUCE, sendbuf, recvbuf, count, dtype, op, 0, stream,
              max_blocks > 0 ? max_blocks : 0);
}

p2pkit_status_t p2pkit_broadcast(const void *sendbuf, void *recvbuf, size_t count,
                                 p2pkit_dtype_t dtype, int root, p2pkit_comm_t c,
                                 p2pkit_stream_t stream) {
  return coll(c, P2PK_COLL_BROADCAST, sendbuf, recvbuf, count, dtype, P2PKIT_SUM, root, stream, 0);
}

p2pkit_status_t p2pkit_reduce(const void *sendbuf, void *recvbuf, size_t count,
                              p2pkit_dtype_t dtype, p2pkit_redop_t op, int root, p2pkit_comm_t c,
                              p2pkit_stream_t stream) {
  return coll(c, P2PK_COLL_REDUCE, sendbuf, recvbuf, count, dtype, op, root, stream, 0);
}

p2pkit_status_t p2pkit_all_gather(const void *sendbuf, void *recvbuf, size_t count,
                                  p2pkit_dtype_t dtype, p2pkit_comm_t c, p2pkit_stream_t stream) {
  return coll(c, P2PK_COLL_ALL_GATHER, sendbuf, recvbuf, count, dtype, P2PKIT_SUM, 0, stream, 0);
}

p2pkit_status_t p2pkit_reduce_scatter(const void *sendbuf, void *recvbuf, size_t count,
                                      p2pkit_dtype_t dtype, p2pkit_redop_t op, p2pkit_comm_t c,
                                      p2pkit_stream_t stream) {
  return coll(c, P2PK_COLL_REDUCE_SCATTER, sendbuf, recvbuf, count, dtype, op, 0, stream, 0);
}

p2pkit_status_t p2pkit_all_to_all(const void *sendbuf, void *recvbuf, size_t count,
                                  p2pkit_dtype_t dtype, p2pkit_comm_t c, p2pkit_stream_t stream) {
  return coll(c, P2PK_COLL_ALL_TO_ALL, sendbuf, recvbuf, count, dtype, P2PKIT_SUM, 0, stream, 0);
}

/* One send or receive: checks, its group. */
static p2pkit_status_t post(int send, void *buf, size_t count, p2pkit_dtype_t dtype, int peer,
                            struct p2pkit_comm *c, p2pkit_stream_t stream) {
  const char *name = send ? "send" : "recv";
  size_t es = 0;
  P2PK_CHECK(p2pk_check_args(c, name, dtype, 0, P2PKIT_SUM, count, &es));
  if (peer < 0 || peer >= c->nranks)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: peer %d is not a rank of %d", name,
                     c->rank, peer, c->nranks);
  if (count == 0) return P2PKIT_SUCCESS;
  if (!buf) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: buffer is NULL", name, c->rank);
  P2PK_CHECK(p2pk_comm_async_status(c));
  if ((uintptr_t)buf % es)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: buffer %p is not aligned to its "
                     "%zu-byte %s elements", name, c->rank, buf, es, p2pkit_dtype_name(dtype));
  P2PK_CHECK(p2pk_check_buffer(c, buf, send ? "sendbuf" : "recvbuf"));
  return p2pk_post_checked(send, buf, count, dtype, es, peer, c, stream);
}

p2pkit_status_t p2pk_post_checked(int send, void *buf, size_t count, p2pkit_dtype_t dtype,
                                  size_t es, int peer, struct p2pkit_comm *c,
                                  p2pkit_stream_t stream) {
  p2pk_call call;
  memset(&call, 0, sizeof call);
  call.c = c;
  call.kind = P2PK_SENDRECV;
  call.is_send = send;
  call.root = peer;
  if (send) call.send = buf;
  else call.recv = buf;
  call.count = count;
  call.bytes = count * es;
  call.esize = es;
  call.dtype = dtype;
  call.capture = -1;
  call.stream = stream;
  return p2pk_group_add(&call);
}

p2pkit_status_t p2pkit_send(const void *sendbuf, size_t count, p2pkit_dtype_t dtype, int peer,
                            p2pkit_comm_t comm, p2pkit_stream_t stream) {
  return post(1, (void *)(uintptr_t)sendbuf, count, dtype, peer, comm, stream);
}

p2pkit_status_t p2pkit_recv(void *recvbuf, size_t count, p2pkit_dtype_t dtype, int peer,
                            p2pkit_comm_t comm, p2pkit_stream_t stream) {
  return post(0, recvbuf, count, dtype, peer, comm, stream);
}
