/* SPDX-License-Identifier: BSD-3-Clause */
/* The error a kernel left behind (host-mapped error words), as a status
 * with what the paths can add (the flags they wait on). */
#include "coll/paths/path.h"
#include "coll/call/trace.h"
#include "core/check.h"
#include "core/log.h"

/* What a path's engine reports on its own (NCCL's asynchronous error),
 * and a spanning communicator's per-host one's errors. */
static p2pkit_status_t engines_status(struct p2pkit_comm *c) {
  for (int i = 0; i < P2PK_PATHS; i++)
    if (p2pk_paths[i]->async_status) P2PK_CHECK(p2pk_paths[i]->async_status(c));
  return c->intra ? p2pk_comm_async_status(c->intra) : P2PKIT_SUCCESS;
}

/* The error words' status (a sentence naming the rank when set). */
static p2pkit_status_t words_status(struct p2pkit_comm *c) {
  volatile int32_t *he = c->host_err;
  int32_t code = he[0];
  if (code == P2PK_DERR_NONE) return engines_status(c);
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
    for (int i = 0; i < P2PK_PATHS; i++)
      if (p2pk_paths[i]->on_error) p2pk_paths[i]->on_error(c);
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

/* The first time an error shows, every rank's desync report (trace.c). */
p2pkit_status_t p2pk_comm_async_status(struct p2pkit_comm *c) {
  const p2pkit_status_t st = words_status(c);
  if (st != P2PKIT_SUCCESS) p2pk_trace_on_error(c, st);
  return st;
}

p2pkit_status_t p2pkit_comm_get_async_error(p2pkit_comm_t comm, p2pkit_status_t *status_p) {
  if (!comm || !status_p)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "get_async_error: communicator or status_p is NULL");
  *status_p = p2pk_comm_async_status(comm);
  return P2PKIT_SUCCESS;
}
