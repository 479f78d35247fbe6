/* SPDX-License-Identifier: BSD-3-Clause */
/* The kernel paths' shared launch code (kern_args.c). */
#ifndef P2PK_KERN_ARGS_H
#define P2PK_KERN_ARGS_H

#include "coll/path.h"

/* Each kernel path's state: what it logged once. */
typedef struct {
  uint64_t logged; /* (collective, algorithm, protocol) at INFO, a bit each */
  int self_logged; /* a broadcast root's own copy by copy engine */
} p2pk_kernel_state;

typedef cudaError_t (*p2pk_coll_launcher)(const p2pk_ar_args *a, int blocks, int threads,
                                          cudaStream_t stream);
typedef cudaError_t (*p2pk_p2p_launcher)(const p2pk_p2p_args *a, int esize, int blocks,
                                         int threads, cudaStream_t stream);

/* One rank's collective on path `id` through `launch` (its GPU current). */
p2pkit_status_t p2pk_kernel_coll(const p2pk_call *call, int id, p2pk_coll_launcher launch);
/* One communicator's sends and receives of a group in one kernel. */
p2pkit_status_t p2pk_kernel_sendrecv(struct p2pkit_comm *c, const p2pk_call *ops, int n,
                                     p2pk_p2p_launcher launch);
p2pkit_status_t p2pk_kernel_init(struct p2pkit_comm *c, int id);
void p2pk_kernel_fini(struct p2pkit_comm *c, int id);

#endif
