/* SPDX-License-Identifier: BSD-3-Clause */
/* A child communicator's rendezvous, arranged over its parent's: every
 * parent rank gives its (color, key) in an all-gather over the parent's
 * authenticated bootstrap; each child's new rank 0 (its leader) makes a
 * unique id of its own (a fresh secret; a listening socket on a port its
 * kernel picks, on loopback when every member shares its machine, else on
 * its host name) and a second all-gather hands every member its leader's
 * id. Nothing binds the caller's address or port again and nothing comes
 * from the launcher's environment. No CUDA: the CPU tests run it with
 * processes. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll/coll.h"
#include "coll/rdv/init_id.h"
#include "core/check.h"

/* The leader's end: where it listens. */
static p2pkit_status_t leader_id(const int *members, int n, const unsigned char *same_machine,
                                 p2pkit_unique_id_t *id, int *fd) {
  int local = 1;
  for (int i = 0; i < n && same_machine; i++) local &= same_machine[members[i]] != 0;
  char host[256] = "127.0.0.1";
  if (!local && gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "127.0.0.1");
  return p2pk_uid_make(host, id, fd);
}

/* Every rank's (color, key) and the child of `rank` (members, new rank, size). */
static p2pkit_status_t exchange_colors(p2pk_boot *b, int color, int key, p2pk_split_in *in,
                                       int *members, p2pk_split_rdv *out) {
  const int n = p2pk_boot_nranks(b), rank = p2pk_boot_rank(b);
  p2pk_split_in mine = {color, key};
  P2PK_CHECK(p2pk_boot_allgather(b, P2PK_TAG_SPLIT, &mine, in, sizeof mine));
  p2pk_split_out *res = calloc((size_t)n, sizeof *res);
  if (!res) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "split: out of memory");
  const p2pkit_status_t st = p2pk_split_compute(in, n, res);
  if (st == P2PKIT_SUCCESS) {
    out->rank = res[rank].rank;
    out->nranks = res[rank].size;
    out->leader = -1;
    if (out->rank >= 0 && p2pk_split_members(in, n, rank, members) > 0) out->leader = members[0];
  }
  free(res);
  return st;
}

p2pkit_status_t p2pk_split_rendezvous(p2pk_boot *b, int color, int key,
                                      const unsigned char *same_machine, p2pk_split_rdv *out) {
  memset(out, 0, sizeof *out);
  out->rank = out->leader = out->listen_fd = -1;
  const int n = p2pk_boot_nranks(b), rank = p2pk_boot_rank(b);
  p2pk_split_in *in = calloc((size_t)n, sizeof *in);
  int *members = calloc((size_t)n, sizeof *members);
  p2pkit_unique_id_t *ids = calloc((size_t)n, sizeof *ids);
  p2pkit_status_t st = in && members && ids ? P2PKIT_SUCCESS
                                            : p2pk_fail(P2PKIT_ERR_NO_MEMORY, "split: out of memory");
  if (st == P2PKIT_SUCCESS) st = exchange_colors(b, color, key, in, members, out);
  /* The leader's id; a leader that cannot listen sends zeros, and its
   * members fail with it after the all-gather (nobody is left waiting). */
  p2pkit_unique_id_t mine;
  memset(&mine, 0, sizeof mine);
  p2pkit_status_t made = P2PKIT_SUCCESS;
  if (st == P2PKIT_SUCCESS && out->leader == rank)
    made = leader_id(members, out->nranks, same_machine, &mine, &out->listen_fd);
  if (st == P2PKIT_SUCCESS) st = p2pk_boot_allgather(b, P2PK_TAG_SPLIT_ID, &mine, ids, sizeof mine);
  if (st == P2PKIT_SUCCESS) st = made;
  if (st == P2PKIT_SUCCESS && out->leader >= 0) {
    out->id = ids[out->leader];
    p2pk_uid u;
    if (p2pk_uid_decode(&out->id, &u) != P2PKIT_SUCCESS)
      st = p2pk_fail(P2PKIT_ERR_REMOTE, "split: rank %d, the leader of this rank's new "
                     "communicator, could not open its rendezvous (its log says why)", out->leader);
  }
  free(in);
  free(members);
  free(ids);
  if (st != P2PKIT_SUCCESS && out->listen_fd >= 0) {
    close(out->listen_fd);
    out->listen_fd = -1;
  }
  return st;
}
