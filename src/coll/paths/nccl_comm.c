/* SPDX-License-Identifier: BSD-3-Clause */
/* NCCL communicators over groups of a p2pkit communicator's ranks, made
 * with the ids passed over p2pkit's own rendezvous (no NCCL bootstrap
 * address of the caller's): the NCCL path's over every rank, the
 * hierarchical path's across hosts. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "core/bounded.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/log.h"
#include "nccl/nccl_dl.h"

/* ncclCommInitRank returns once every member has joined: one that never
 * does (dead after the ids' all-gather, or unreachable across hosts) would
 * hold this rank for ever. So the init runs on a thread of its own, waited
 * for until the deadline; past it that thread is left to finish, and it
 * aborts what it made, nobody being left to use it. The waiter and the
 * thread settle who owns the job by one compare-and-swap of `state`: 0
 * running, 1 returned in time (the waiter's), 2 given up (the thread's). */
typedef struct {
  const p2pk_nccl_api *api;
  int device, nranks, rank, state;
  p2pk_nccl_id id;
  p2pk_nccl_comm_t comm;
  p2pk_nccl_result r;
} init_job;

static void init_call(init_job *j) {
  if (j->device >= 0 && cudaSetDevice(j->device) != cudaSuccess) cudaGetLastError();
  j->r = j->api->CommInitRank(&j->comm, j->nranks, j->id, j->rank);
}

static void init_thread(void *arg) {
  init_job *j = *(init_job **)arg;
  init_call(j);
  int running = 0;
  if (__atomic_compare_exchange_n(&j->state, &running, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return;
  if (j->r == P2PK_NCCL_SUCCESS && j->comm) p2pk_nccl_abort_now(j->api, j->comm);
  free(j);
}

p2pkit_status_t p2pk_nccl_init_rank_until(const p2pk_nccl_api *api, int device, int nranks,
                                          const p2pk_nccl_id *id, int rank, uint64_t until_ns,
                                          p2pk_nccl_comm_t *comm, p2pk_nccl_result *r) {
  init_job *j = calloc(1, sizeof *j);
  if (!j) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "ncclCommInitRank: out of memory");
  *j = (init_job){.api = api, .device = device, .nranks = nranks, .rank = rank, .id = *id};
  const int ran = p2pk_run_until(init_thread, &j, sizeof j, until_ns);
  if (ran < 0) init_call(j); /* no thread: here, however long it takes */
  int running = 0;
  if (ran >= 0 &&
      __atomic_compare_exchange_n(&j->state, &running, 2, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return P2PKIT_ERR_TIMEOUT; /* the thread's now */
  *comm = j->comm;
  *r = j->r;
  free(j);
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_nccl_comm_among(struct p2pkit_comm *c, unsigned tag, int leader, int nsub,
                                     int subrank, void **out) {
  const p2pk_nccl_api *api = NULL;
  P2PK_CHECK(p2pk_nccl_shared(&api, NULL, 0));
  p2pk_nccl_id id;
  memset(&id, 0, sizeof id);
  if (c->rank == leader) {
    const p2pk_nccl_result r = api->GetUniqueId(&id);
    if (r != P2PK_NCCL_SUCCESS) {
      /* the others still wait for the all-gather: send a zero id, fail after */
      memset(&id, 0, sizeof id);
      p2pk_nccl_check(api, r, "ncclGetUniqueId");
    }
  }
  p2pk_nccl_id *all = calloc((size_t)c->nranks, sizeof *all);
  if (!all) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "rank %d: out of memory", c->rank);
  p2pkit_status_t st = p2pk_boot_allgather(c->boot, tag, &id, all, sizeof id);
  static const p2pk_nccl_id zero;
  if (st == P2PKIT_SUCCESS && memcmp(&all[leader], &zero, sizeof zero) == 0)
    st = p2pk_fail(P2PKIT_ERR_REMOTE, "rank %d: rank %d could not make an NCCL unique id (its log "
                   "says why)", c->rank, leader);
  p2pk_nccl_comm_t comm = NULL;
  if (st == P2PKIT_SUCCESS) {
    p2pk_nccl_result r = P2PK_NCCL_SUCCESS;
    st = p2pk_nccl_init_rank_until(api, c->device, nsub, &all[leader], subrank,
                                   p2pk_now_ns() + c->timeout_ns, &comm, &r);
    if (st == P2PKIT_ERR_TIMEOUT)
      st = p2pk_fail(P2PKIT_ERR_TIMEOUT, "rank %d (GPU %d): ncclCommInitRank (rank %d of %d) did "
                     "not return within the timeout, %llu s: a member did not join (it exited, "
                     "hangs, or cannot reach this host); left to finish on a thread of its own",
                     c->rank, c->device, subrank, nsub,
                     (unsigned long long)(c->timeout_ns / 1000000000ULL));
    else if (st == P2PKIT_SUCCESS && r != P2PK_NCCL_SUCCESS)
      st = p2pk_fail(P2PKIT_ERR_REMOTE, "rank %d (GPU %d): ncclCommInitRank (rank %d of %d) "
                     "failed: %s (NCCL error %d)", c->rank, c->device, subrank, nsub,
                     api->GetErrorString(r), r);
  }
  free(all);
  if (st == P2PKIT_SUCCESS) *out = comm;
  return st;
}
