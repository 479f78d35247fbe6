/* SPDX-License-Identifier: BSD-3-Clause */
/* The arithmetic of p2pkit_comm_split(comm, color, key, config, &newcomm),
 * NCCL's semantics (ncclCommSplit): the ranks that give the same color form
 * one new communicator, ordered by key, equal keys by their old rank; a
 * rank giving P2PKIT_SPLIT_NOCOLOR joins none (its newcomm is NULL). Pure:
 * every rank computes it from every rank's (color, key), as all-gathered. */
#ifndef P2PK_COLL_SPLIT_H
#define P2PK_COLL_SPLIT_H

#include "coll/hosts.h"
#include "p2pkit.h"

/* NCCL_SPLIT_NOCOLOR's value (moves to p2pkit.h with p2pkit_comm_split). */
#ifndef P2PKIT_SPLIT_NOCOLOR
#define P2PKIT_SPLIT_NOCOLOR (-1)
#endif

typedef struct {
  int color; /* >= 0, or P2PKIT_SPLIT_NOCOLOR */
  int key;
} p2pk_split_in;

typedef struct {
  int rank; /* in the new communicator; -1 for P2PKIT_SPLIT_NOCOLOR */
  int size; /* of the new communicator; 0 for P2PKIT_SPLIT_NOCOLOR */
} p2pk_split_out;

/* out[r] for every old rank r of `nranks`. P2PKIT_ERR_INVALID_ARGUMENT
 * naming the first rank whose color is negative but not NOCOLOR. */
p2pkit_status_t p2pk_split_compute(const p2pk_split_in *in, int nranks, p2pk_split_out *out);
/* The old ranks of `old_rank`'s new communicator, in new-rank order, into
 * `members` (room for nranks); returns how many (0 for NOCOLOR). */
int p2pk_split_members(const p2pk_split_in *in, int nranks, int old_rank, int *members);
/* How many hosts the `n` old ranks in `members` sit on (`h`: the parent's
 * grouping): 1 means p2pkit's own paths can carry the new communicator,
 * more means it spans hosts (hierarchical, or NCCL). */
int p2pk_split_host_count(const p2pk_hosts *h, const int *members, int n);

#endif
