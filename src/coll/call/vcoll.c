/* SPDX-License-Identifier: BSD-3-Clause */
/* The uneven all-to-all and the rooted gather and scatter. Each is one
 * rank's share of the call, checked whole before anything is queued, then
 * a group of sends and receives, as NCCL-based libraries compose them: a
 * message's two ends both know its size, so each pair of ranks takes the
 * path that one size selects and no rank's own sizes steer another's. A
 * rank's block to itself is a send to itself with its receive (a local
 * copy, none when in place). Counts and displacements are in elements. */
#include <stdint.h>

#include "coll/paths/path.h"
#include "core/check.h"

/* One block of this rank's call: `count` elements at `off` elements into
 * the send (send 1) or receive buffer, to or from `peer`. */
typedef struct {
  int send, peer;
  size_t off, count;
} vblock;

typedef struct {
  const char *name;
  struct p2pkit_comm *c;
  p2pkit_dtype_t dtype;
  size_t es;
  const char *sbuf; /* the send buffer, or NULL */
  char *rbuf;       /* the receive buffer, or NULL */
  int n;            /* blocks of nonzero count */
  vblock b[2 * P2PK_COLL_MAX_RANKS];
} vcall;

static void add(vcall *v, int send, int peer, size_t off, size_t count) {
  if (count) v->b[v->n++] = (vblock){send, peer, off, count};
}

/* Do a send block and a receive block share a byte? Both buffers are
 * compared as addresses: in-place forms are the caller's to allow. */
static int overlap(const vcall *v, const vblock *s, const vblock *r) {
  const uintptr_t a = (uintptr_t)v->sbuf + s->off * v->es, b = (uintptr_t)v->rbuf + r->off * v->es;
  return a < b + r->count * v->es && b < a + s->count * v->es;
}

/* Buffers present where blocks use them, aligned, of this GPU, and no send
 * block on a receive block but `allowed` (a pair the call may hold in
 * place: the same address, the same size); then the group's room and the
 * communicator's asynchronous error. */
static p2pkit_status_t check_blocks(vcall *v, const vblock *allowed) {
  struct p2pkit_comm *c = v->c;
  int sends = 0, recvs = 0;
  for (int i = 0; i < v->n; i++) *(v->b[i].send ? &sends : &recvs) += 1;
  if ((sends && !v->sbuf) || (recvs && !v->rbuf))
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: %s is NULL", v->name, c->rank,
                     sends && !v->sbuf ? "sendbuf" : "recvbuf");
  if ((sends && (uintptr_t)v->sbuf % v->es) || (recvs && (uintptr_t)v->rbuf % v->es))
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: buffers %p, %p are not aligned to "
                     "their %zu-byte %s elements", v->name, c->rank, (const void *)v->sbuf,
                     (void *)v->rbuf, v->es, p2pkit_dtype_name(v->dtype));
  for (int i = 0; i < v->n; i++)
    for (int j = 0; j < v->n; j++) {
      const vblock *s = &v->b[i], *r = &v->b[j];
      if (!s->send || r->send || !overlap(v, s, r)) continue;
      if (allowed && s == allowed && r == allowed + 1 && (uintptr_t)v->sbuf + s->off * v->es ==
          (uintptr_t)v->rbuf + r->off * v->es)
        continue;
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: the block sent to rank %d "
                       "overlaps the block received from rank %d", v->name, c->rank, s->peer,
                       r->peer);
    }
  if (v->n > p2pk_group_room())
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: %d sends and receives do not fit "
                     "in the caller's group (it holds %d more)", v->name, c->rank, v->n,
                     p2pk_group_room());
  P2PK_CHECK(p2pk_comm_async_status(c));
  if (sends) P2PK_CHECK(p2pk_check_buffer(c, v->sbuf, "sendbuf"));
  if (recvs) P2PK_CHECK(p2pk_check_buffer(c, v->rbuf, "recvbuf"));
  return P2PKIT_SUCCESS;
}

/* Every block, in one group. */
static p2pkit_status_t post_all(const vcall *v, p2pkit_stream_t stream) {
  if (!v->n) return P2PKIT_SUCCESS;
  P2PK_CHECK(p2pkit_group_start());
  p2pkit_status_t st = P2PKIT_SUCCESS;
  for (int i = 0; i < v->n && st == P2PKIT_SUCCESS; i++) {
    const vblock *b = &v->b[i];
    char *p = b->send ? (char *)(uintptr_t)v->sbuf : v->rbuf;
    st = p2pk_post_checked(b->send, p + b->off * v->es, b->count, v->dtype, v->es, b->peer, v->c,
                           stream);
  }
  const p2pkit_status_t e = p2pkit_group_end();
  return st != P2PKIT_SUCCESS ? st : e;
}

/* sendcounts/recvcounts/displacements: each block within P2PK_MAX_COUNT
 * elements of its buffer's start (an empty block's displacement is not
 * read), the block to itself one size both ways. */
static p2pkit_status_t plan_v(vcall *v, const size_t *sc, const size_t *sd, const size_t *rc,
                              const size_t *rd) {
  struct p2pkit_comm *c = v->c;
  const char *missing = !sc ? "sendcounts" : !sd ? "sdispls" : !rc ? "recvcounts" : !rd ? "rdispls"
                                                                                       : NULL;
  if (missing)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: %s is NULL", v->name, c->rank,
                     missing);
  for (int p = 0; p < c->nranks; p++) {
    const size_t cnt[2] = {rc[p], sc[p]}, dsp[2] = {rd[p], sd[p]};
    for (int send = 0; send < 2; send++)
      if (cnt[send] && (cnt[send] > P2PK_MAX_COUNT || dsp[send] > P2PK_MAX_COUNT - cnt[send]))
        return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: the block %s rank %d "
                         "(displacement %zu, count %zu) ends beyond %llu elements", v->name,
                         c->rank, send ? "sent to" : "received from", p, dsp[send], cnt[send],
                         (unsigned long long)P2PK_MAX_COUNT);
    add(v, 1, p, sd[p], sc[p]);
    add(v, 0, p, rd[p], rc[p]);
  }
  if (sc[c->rank] != rc[c->rank])
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: sends %zu elements to itself but "
                     "receives %zu", v->name, c->rank, sc[c->rank], rc[c->rank]);
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pkit_all_to_allv(const void *sendbuf, const size_t *sendcounts,
                                   const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                                   const size_t *rdispls, p2pkit_dtype_t dtype, p2pkit_comm_t comm,
                                   p2pkit_stream_t stream) {
  vcall v = {.name = "all_to_allv", .c = comm, .dtype = dtype, .sbuf = sendbuf, .rbuf = recvbuf};
  P2PK_CHECK(p2pk_check_args(comm, v.name, dtype, 0, P2PKIT_SUM, 0, &v.es));
  P2PK_CHECK(plan_v(&v, sendcounts, sdispls, recvcounts, rdispls));
  P2PK_CHECK(check_blocks(&v, NULL));
  return post_all(&v, stream);
}

/* gather (gather 1) or scatter: the root's blocks, its own first (a send
 * and a receive, which may be in place), or a non-root's one block. */
static p2pkit_status_t rooted(int gather, const void *sendbuf, void *recvbuf, size_t count,
                              p2pkit_dtype_t dtype, int root, p2pkit_comm_t comm,
                              p2pkit_stream_t stream) {
  vcall v = {.name = gather ? "gather" : "scatter", .c = comm, .dtype = dtype};
  P2PK_CHECK(p2pk_check_args(comm, v.name, dtype, 0, P2PKIT_SUM, count, &v.es));
  const int me = comm->rank;
  if (root < 0 || root >= comm->nranks)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: root %d is not a rank of %d",
                     v.name, me, root, comm->nranks);
  if (count == 0) return P2PKIT_SUCCESS;
  const int is_root = me == root;
  v.sbuf = gather || is_root ? sendbuf : NULL;
  v.rbuf = !gather || is_root ? recvbuf : NULL;
  if (!is_root) {
    add(&v, gather, root, 0, count);
  } else {
    add(&v, 1, me, gather ? 0 : (size_t)me * count, count);
    add(&v, 0, me, gather ? (size_t)me * count : 0, count);
    for (int r = 0; r < comm->nranks; r++)
      if (r != me) add(&v, !gather, r, (size_t)r * count, count);
  }
  P2PK_CHECK(check_blocks(&v, is_root ? &v.b[0] : NULL));
  return post_all(&v, stream);
}

p2pkit_status_t p2pkit_gather(const void *sendbuf, void *recvbuf, size_t count,
                              p2pkit_dtype_t dtype, int root, p2pkit_comm_t comm,
                              p2pkit_stream_t stream) {
  return rooted(1, sendbuf, recvbuf, count, dtype, root, comm, stream);
}

p2pkit_status_t p2pkit_scatter(const void *sendbuf, void *recvbuf, size_t count,
                               p2pkit_dtype_t dtype, int root, p2pkit_comm_t comm,
                               p2pkit_stream_t stream) {
  return rooted(0, sendbuf, recvbuf, count, dtype, root, comm, stream);
}
