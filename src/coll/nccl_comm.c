/* NCCL communicators over groups of a p2pkit communicator's ranks, made
 * with the ids passed over p2pkit's own rendezvous (no NCCL bootstrap
 * address of the caller's): the NCCL path's over every rank, the
 * hierarchical path's across hosts. */
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "core/check.h"
#include "core/log.h"
#include "nccl/nccl_dl.h"

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
    const p2pk_nccl_result r = api->CommInitRank(&comm, nsub, all[leader], subrank);
    if (r != P2PK_NCCL_SUCCESS)
      st = p2pk_fail(P2PKIT_ERR_REMOTE, "rank %d (GPU %d): ncclCommInitRank (rank %d of %d) "
                     "failed: %s (NCCL error %d)", c->rank, c->device, subrank, nsub,
                     api->GetErrorString(r), r);
  }
  free(all);
  if (st == P2PKIT_SUCCESS) *out = comm;
  return st;
}
