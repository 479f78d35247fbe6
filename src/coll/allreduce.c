/* p2pkit_all_reduce: argument checks and one kernel launch. The per-call host
 * work is a few comparisons, a table lookup and the launch: no allocation, no
 * synchronisation; pointers are checked with CUDA once and remembered. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <string.h>

#include "coll/coll.h"
#include "core/check.h"
#include "core/log.h"

static _Thread_local int group_depth;

/* Launches never block on peers, so a group only has to nest correctly. */
p2pkit_status_t p2pkit_group_start(void) {
  group_depth++;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pkit_group_end(void) {
  if (group_depth <= 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "p2pkit_group_end without p2pkit_group_start");
  group_depth--;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_comm_async_status(struct p2pkit_comm *c) {
  volatile int32_t *he = c->host_err;
  int32_t code = he[0];
  if (code == P2PK_DERR_NONE) return P2PKIT_SUCCESS;
  int32_t peer = he[1];
  unsigned secs = (unsigned)(c->timeout_ns / 1000000000ULL);
  switch (code) {
    case P2PK_DERR_TIMEOUT:
      return p2pk_fail(P2PKIT_ERR_TIMEOUT,
                       "rank %d (GPU %d): rank %d did not take part in an all-reduce within %u s "
                       "(it exited, hangs, or called something else); the communicator is unusable",
                       c->rank, c->device, peer, secs);
    case P2PK_DERR_MISMATCH:
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT,
                       "rank %d (GPU %d): rank %d called all-reduce with another count, type, "
                       "operation or algorithm; the communicator is unusable",
                       c->rank, c->device, peer);
    default:
      return p2pk_fail(P2PKIT_ERR_REMOTE,
                       "rank %d (GPU %d): rank %d gave up on an all-reduce; the communicator is "
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
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "rank %d: %s %p is host memory; all-reduce needs "
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
  for (const p2pk_reg *r = c->regs; r; r = r->next) {
    if (out < r->buf || out + bytes > r->buf + r->bytes) continue;
    uint64_t off = (uint64_t)(out - r->buf);
    if (off >> 40) return;
    a->out_token = ((uint64_t)(r->id + 1) << 40) | off;
    for (int p = 0; p < c->nranks; p++) a->peer_out[p] = r->peer[p] ? r->peer[p] + off : NULL;
    return;
  }
}

p2pkit_status_t p2pkit_all_reduce(const void *sendbuf, void *recvbuf, size_t count,
                                  p2pkit_dtype_t dtype, p2pkit_redop_t op, p2pkit_comm_t c,
                                  p2pkit_stream_t stream) {
  if (!c) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "all_reduce: communicator is NULL");
  size_t es = p2pkit_dtype_size(dtype);
  if (!es)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "all_reduce: rank %d: data type %d is not a "
                     "p2pkit_dtype_t", c->rank, (int)dtype);
  if ((int)op < 0 || op >= P2PKIT_REDOP_COUNT)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "all_reduce: rank %d: operation %d is not a "
                     "p2pkit_redop_t", c->rank, (int)op);
  if (count == 0) return P2PKIT_SUCCESS;
  if (!sendbuf || !recvbuf)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "all_reduce: rank %d: %s is NULL", c->rank,
                     sendbuf ? "recvbuf" : "sendbuf");
  if (count > (UINT64_C(1) << 40) || count > SIZE_MAX / es)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "all_reduce: rank %d: count %zu is too large",
                     c->rank, count);
  P2PK_CHECK(p2pk_comm_async_status(c));
  const size_t bytes = count * es;
  const char *s = sendbuf, *r = recvbuf;
  if ((uintptr_t)s % es || (uintptr_t)r % es)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "all_reduce: rank %d: buffers %p, %p are not "
                     "aligned to their %zu-byte %s elements", c->rank, sendbuf, recvbuf, es,
                     p2pkit_dtype_name(dtype));
  if (s != r && s < r + bytes && r < s + bytes)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "all_reduce: rank %d: sendbuf and recvbuf "
                     "overlap without being equal", c->rank);
  int direct_ok = 0, unused = 0;
  P2PK_CHECK(check_ptr(c, sendbuf, "sendbuf", &unused));
  P2PK_CHECK(check_ptr(c, recvbuf, "recvbuf", &direct_ok));

  int cur = -1;
  cudaGetDevice(&cur);
  if (cur != c->device && cudaSetDevice(c->device) != cudaSuccess) {
    cudaError_t e = cudaGetLastError();
    return p2pk_fail(P2PKIT_ERR_CUDA, "all_reduce: rank %d cannot use GPU %d: %s", c->rank,
                     c->device, cudaGetErrorString(e));
  }
  cudaError_t e = cudaSuccess;
  if (c->nranks == 1) {
    if (s != r) e = cudaMemcpyAsync(recvbuf, sendbuf, bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)stream);
  } else {
    p2pk_algo_choice ch;
    p2pk_algo_choose(&c->table, &c->force, &c->geom, bytes, &ch);
    p2pk_ar_args a = c->tmpl;
    a.in = sendbuf;
    a.out = recvbuf;
    a.count = count;
    a.dtype = dtype;
    a.op = op;
    a.algo = ch.algo;
    a.proto = ch.proto;
    a.slots = ch.slots;
    a.chunk = ch.chunk;
    a.hdr0 = (uint32_t)count;
    a.hdr1 = (uint32_t)(((count >> 32) & 0xff) << 24 | ((uint32_t)ch.blocks & 0x3ff) << 14 |
                        ((uint32_t)ch.algo & 3) << 12 | ((uint32_t)ch.proto & 1) << 11 |
                        ((uint32_t)dtype & 0xf) << 4 | ((uint32_t)op & 0xf));
    if (ch.algo == P2PK_ALGO_TWOSHOT) set_direct(c, &a, r, bytes, direct_ok);
    int combo = 1 << (ch.algo * P2PK_PROTO_COUNT + ch.proto);
    if (!(c->logged & combo)) {
      c->logged |= combo;
      P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): all-reduce of %zu B uses %s/%s, %d blocks x %d "
                "threads, chunk %u B%s", c->rank, c->device, bytes, p2pk_algo_name(ch.algo),
                p2pk_proto_name(ch.proto), ch.blocks, ch.threads, ch.chunk,
                a.out_token ? ", all-gather into peers' outputs" : "");
    }
    P2PK_TRACE(P2PK_LOG_COLL, "rank %d all_reduce %zu x %s %s: %s/%s grid %d x %d chunk %u",
               c->rank, count, p2pkit_dtype_name(dtype), p2pkit_redop_name(op),
               p2pk_algo_name(ch.algo), p2pk_proto_name(ch.proto), ch.blocks, ch.threads, ch.chunk);
    e = c->staged ? p2pk_launch_allreduce_staged(&a, ch.blocks, ch.threads, (cudaStream_t)stream)
                  : p2pk_launch_allreduce_p2p(&a, ch.blocks, ch.threads, (cudaStream_t)stream);
  }
  if (cur >= 0 && cur != c->device) cudaSetDevice(cur);
  if (e != cudaSuccess)
    return p2pk_fail(P2PKIT_ERR_CUDA, "all_reduce: rank %d: launching on GPU %d failed: %s",
                     c->rank, c->device, cudaGetErrorString(e));
  return P2PKIT_SUCCESS;
}
