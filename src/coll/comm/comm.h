/* SPDX-License-Identifier: BSD-3-Clause */
/* What the comm room's files share (comm.c makes each, comm_all.c and
 * comm_rank.c use them): private to src/coll/comm. */
#ifndef P2PK_COMM_COMM_H
#define P2PK_COMM_COMM_H

#include "coll/paths/path.h"
#include "topo/topo.h"

/* The settings a communicator is made with, read and checked once. */
typedef struct {
  size_t buffer;
  int timeout_s;
  int p2p_disable;
  int level; /* P2PKIT_P2P_LEVEL on xfer's scale (P2PK_PL_*; ANY when unset) */
  p2pk_algo_table table;
  p2pk_algo_force force;
  int max_blocks; /* P2PKIT_MAX_BLOCKS */
  const int *rank_timeout_s; /* one process: each rank's own (a split's), or NULL: timeout_s */
} coll_cfg;

/* The settings, every P2PKIT_* checked first (`timeout_s`: the options',
 * -1: P2PKIT_TIMEOUT). */
p2pkit_status_t p2pk_comm_read_cfg(coll_cfg *cfg, int timeout_s);
/* Whether to read the topology (P2PKIT_P2P_LEVEL, or the INFO log's labels). */
int p2pk_comm_wants_topology(const coll_cfg *cfg);
/* Whether `dev` (this process's ordinal) may use P2P with the GPU at
 * `peer_busid`, with the reason when not and the link's label. */
int p2pk_comm_pair_p2p(const coll_cfg *cfg, p2pkit_topo_t topo, int dev, const char *busid,
                       const char *peer_busid, char *label, size_t llen);
/* The kernels' error words; the scratch, the kernels preloaded, the error
 * words and the copy engines' state (c's GPU current). */
p2pkit_status_t p2pk_comm_alloc_err(struct p2pkit_comm *c);
p2pkit_status_t p2pk_comm_alloc(struct p2pkit_comm *c);
/* Every path's state, once the scratch, the peers' mappings and the kernel
 * template exist (c's GPU current). */
p2pkit_status_t p2pk_comm_paths_init(struct p2pkit_comm *c);
/* Frees what rank c owns (a group's shared region is the group's), and a
 * one-process group with every communicator of it. */
void p2pk_comm_free(struct p2pkit_comm *c);
void p2pk_group_free(p2pk_group *g);
/* The kernels' argument template (stage_dev: the staging region as the GPU
 * sees it, staged). */
void p2pk_comm_fill_tmpl(struct p2pkit_comm *c, char *stage_dev);
/* The communicator at INFO: each pair's transport, the table's rows. */
void p2pk_comm_log(const struct p2pkit_comm *c, char labels[][64], const int *devs);
/* LL128's occupancy per thread count, from CUDA (the GPU current). */
void p2pk_comm_ll128_occupancy(struct p2pkit_comm *c);
/* The GPUs this process sees, or why none; a GPU's multiprocessors. */
p2pkit_status_t p2pk_comm_device_count(int *n);
p2pkit_status_t p2pk_comm_sm_count(int dev, int *sms);

#endif
