/* Point to point: p2pkit_send / p2pkit_recv, and the groups that let a rank
 * send and receive at once. Operations wait in a per-thread queue until the
 * outermost p2pkit_group_end (or launch at once outside a group); each
 * communicator then gets one kernel running all its operations side by side
 * (p2p_kernel in allreduce_kernels.cu over P2P, staged_p2p_kernel in
 * staged_kernels.cu through host memory), so a rank that sends to and receives
 * from the same peer never waits on itself. Grid and chunk of an operation
 * depend only on its size, so the two ends agree without talking. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <string.h>

#include "coll/coll.h"
#include "core/check.h"
#include "core/log.h"

#define P2PK_P2P_QUEUE 64

typedef struct {
  struct p2pkit_comm *c;
  int send, peer;
  char *buf;
  size_t bytes, esize;
  p2pkit_stream_t stream;
} p2p_pending;

static _Thread_local int group_depth;
static _Thread_local int queued;
static _Thread_local p2p_pending queue[P2PK_P2P_QUEUE];

/* Staged (no P2P): an operation's grid and chunk from its size alone (and
 * P2PKIT_COLL_BLOCKS / P2PKIT_COLL_CHUNK, which peers must share), so both
 * ends agree: 64 KiB or more per block, at most half the pair's
 * mailboxes' worth of blocks (each cycles through two), pieces no larger
 * than a send/recv mailbox. */
static void staged_grid(const struct p2pkit_comm *c, size_t bytes, p2pk_algo_choice *ch) {
  memset(ch, 0, sizeof *ch);
  size_t g = c->force.blocks > 0 ? (size_t)c->force.blocks : (bytes + (64u << 10) - 1) / (64u << 10);
  if (g > P2PK_STAGE_P2P_BOXES / 2) g = P2PK_STAGE_P2P_BOXES / 2;
  if (g < 1) g = 1;
  size_t k = c->force.chunk > 0 ? c->force.chunk : (bytes + g - 1) / g;
  k = (k + 15) & ~(size_t)15;
  if (k > c->lay.stage_p2p_box) k = c->lay.stage_p2p_box;
  ch->algo = P2PK_ALGO_STAGED;
  ch->proto = P2PK_PROTO_SIMPLE;
  ch->blocks = (int)g;
  ch->threads = 512;
  ch->chunk = (uint32_t)k;
  ch->slots = 2;
}

/* The operations of one communicator: at most one send and one receive per
 * peer; a send to itself pairs with a receive from itself (a local copy). */
static p2pkit_status_t launch_comm(struct p2pkit_comm *c, const p2p_pending *ops, int nops) {
  static const char name[] = "send/recv";
  p2pk_p2p_args pa;
  memset(&pa, 0, sizeof pa);
  pa.a = c->tmpl;
  int seen[2][P2PK_COLL_MAX_RANKS] = {{0}};
  const p2p_pending *self[2] = {NULL, NULL};
  size_t esize = 8;
  int blocks = 0, threads = 64;
  /* A send's blocks wait for the peer's receive blocks: every block of both
   * kernels must be resident at once. With at most 2 (n - 1) operations of
   * `cap` blocks the grid never exceeds one block per multiprocessor. The cap
   * depends only on the communicator, so both ends of a pair agree. */
  int cap = c->geom.sm_count / (2 * (c->nranks - 1 > 0 ? c->nranks - 1 : 1));
  if (cap < 1) cap = 1;
  for (int i = 0; i < nops; i++) {
    const p2p_pending *o = &ops[i];
    if (o->stream != ops[0].stream)
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: the operations of one group on "
                       "one communicator must use one stream", name, c->rank);
    if (seen[o->send][o->peer]++)
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: more than one %s %s rank %d in "
                       "one group (p2pkit allows one each way per peer)", name, c->rank,
                       o->send ? "send" : "receive", o->send ? "to" : "from", o->peer);
    if (o->peer == c->rank) {
      self[o->send] = o;
      continue;
    }
    p2pk_algo_choice ch;
    if (c->staged) {
      staged_grid(c, o->bytes, &ch);
    } else {
      p2pk_algo_force f = c->force;
      f.algo = P2PK_ALGO_ONESHOT;
      f.proto = P2PK_PROTO_SIMPLE;
      p2pk_algo_choose(&c->table, &f, &c->geom, o->bytes, &ch);
    }
    if (ch.blocks > cap) ch.blocks = cap; /* the chunk still fits a mailbox */
    p2pk_p2p_op *po = &pa.op[pa.nops++];
    po->buf = o->buf;
    po->bytes = o->bytes;
    po->peer = o->peer;
    po->send = o->send;
    po->base = blocks;
    po->blocks = ch.blocks;
    po->chunk = ch.chunk;
    blocks += ch.blocks;
    if (ch.threads > threads) threads = ch.threads;
    if (o->esize < esize) esize = o->esize;
    /* Same-size elements on both ends: the element loop width only needs to
     * divide every operation's alignment. */
    while (esize > 1 && (((uintptr_t)o->buf | o->bytes) & (esize - 1))) esize /= 2;
  }
  if ((self[0] != NULL) != (self[1] != NULL))
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: a %s itself without the matching "
                     "%s in the same group", name, c->rank, self[1] ? "send to" : "receive from",
                     self[1] ? "receive" : "send");
  if (self[0] && self[0]->bytes != self[1]->bytes)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: sends %zu bytes to itself but "
                     "receives %zu", name, c->rank, self[1]->bytes, self[0]->bytes);
  int prev = -1;
  P2PK_CHECK(p2pk_coll_enter(c, name, &prev));
  cudaError_t e = cudaSuccess;
  cudaStream_t st = (cudaStream_t)ops[0].stream;
  if (self[0] && self[0]->buf != self[1]->buf)
    e = cudaMemcpyAsync(self[0]->buf, self[1]->buf, self[0]->bytes, cudaMemcpyDeviceToDevice, st);
  if (e == cudaSuccess && pa.nops) {
    P2PK_TRACE(P2PK_LOG_COLL, "rank %d send/recv: %d operations, grid %d x %d, element %zu B",
               c->rank, pa.nops, blocks, threads, esize);
    e = c->staged ? p2pk_launch_p2p_staged(&pa, (int)esize, blocks, threads, st)
                  : p2pk_launch_p2p(&pa, (int)esize, blocks, threads, st);
  }
  return p2pk_coll_leave(c, name, prev, e);
}

/* Launch everything queued, one kernel per communicator, in queue order. */
static p2pkit_status_t flush(void) {
  p2pkit_status_t st = P2PKIT_SUCCESS;
  int done[P2PK_P2P_QUEUE] = {0};
  for (int i = 0; i < queued; i++) {
    if (done[i]) continue;
    p2p_pending ops[P2PK_P2P_QUEUE];
    int n = 0;
    for (int j = i; j < queued; j++)
      if (!done[j] && queue[j].c == queue[i].c) ops[n++] = queue[j], done[j] = 1;
    p2pkit_status_t s = launch_comm(queue[i].c, ops, n);
    if (st == P2PKIT_SUCCESS) st = s;
  }
  queued = 0;
  return st;
}

p2pkit_status_t p2pkit_group_start(void) {
  group_depth++;
  return P2PKIT_SUCCESS;
}

/* Collectives launch at once (their launches never block on peers); queued
 * sends and receives launch here. */
p2pkit_status_t p2pkit_group_end(void) {
  if (group_depth <= 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "p2pkit_group_end without p2pkit_group_start");
  if (--group_depth > 0) return P2PKIT_SUCCESS;
  return flush();
}

static p2pkit_status_t post(int send, void *buf, size_t count, p2pkit_dtype_t dtype, int peer,
                            struct p2pkit_comm *c, p2pkit_stream_t stream) {
  const char *name = send ? "send" : "recv";
  size_t es = 0;
  P2PK_CHECK(p2pk_coll_check_args(c, name, dtype, 0, P2PKIT_SUM, count, &es));
  if (peer < 0 || peer >= c->nranks)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: peer %d is not a rank of %d", name,
                     c->rank, peer, c->nranks);
  if (count == 0) return P2PKIT_SUCCESS;
  if (!buf) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: buffer is NULL", name, c->rank);
  P2PK_CHECK(p2pk_comm_async_status(c));
  if ((uintptr_t)buf % es)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: buffer %p is not aligned to its "
                     "%zu-byte %s elements", name, c->rank, buf, es, p2pkit_dtype_name(dtype));
  int unused = 0;
  P2PK_CHECK(p2pk_coll_check_ptr(c, buf, send ? "sendbuf" : "recvbuf", &unused));
  if (queued == P2PK_P2P_QUEUE) {
    queued = 0;
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: more than %d sends and receives in one "
                     "group", name, P2PK_P2P_QUEUE);
  }
  p2p_pending *o = &queue[queued++];
  o->c = c;
  o->send = send;
  o->peer = peer;
  o->buf = buf;
  o->bytes = count * es;
  o->esize = es;
  o->stream = stream;
  return group_depth > 0 ? P2PKIT_SUCCESS : flush();
}

p2pkit_status_t p2pkit_send(const void *sendbuf, size_t count, p2pkit_dtype_t dtype, int peer,
                            p2pkit_comm_t comm, p2pkit_stream_t stream) {
  return post(1, (void *)(uintptr_t)sendbuf, count, dtype, peer, comm, stream);
}

p2pkit_status_t p2pkit_recv(void *recvbuf, size_t count, p2pkit_dtype_t dtype, int peer,
                            p2pkit_comm_t comm, p2pkit_stream_t stream) {
  return post(0, recvbuf, count, dtype, peer, comm, stream);
}
