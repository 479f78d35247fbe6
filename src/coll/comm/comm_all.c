/* SPDX-License-Identifier: BSD-3-Clause */
/* A communicator of one process driving several GPUs
 * (p2pkit_comm_init_all, and a one-process split's children): the
 * transport every pair can take (peer access enabled between every two
 * GPUs, else staged through one pinned region), the multiprocessors every
 * rank counts with, each rank's settings, layout, choices, memory and
 * paths, and the ring of every rank's last calls. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll/call/trace.h"
#include "coll/comm/comm.h"
#include "core/check.h"
#include "core/log.h"
#include "core/param.h"
#include "topo/topo.h"

static p2pkit_status_t enable_peer(int dev, int peer) {
  P2PK_CUDA_CHECK(cudaSetDevice(dev));
  cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();
    return P2PKIT_SUCCESS;
  }
  if (e != cudaSuccess)
    return p2pk_fail(P2PKIT_ERR_CUDA, "enabling peer access from GPU %d to GPU %d: %s", dev, peer,
                     cudaGetErrorString(e));
  return P2PKIT_SUCCESS;
}


/* One process: the transport every pair can take (staged when some pair
 * has no P2P), with each pair's label for the log; peer access between
 * every two GPUs (a GPU listed twice, P2PKIT_SHARE_GPUS: none needed). */
static p2pkit_status_t all_transport(int n, const int *devs, const coll_cfg *cfg,
                                     char labels[][P2PK_COLL_MAX_RANKS][64], int *staged) {
  p2pkit_topo_t topo = NULL;
  if (p2pk_comm_wants_topology(cfg) && p2pkit_topo_discover(&topo) != P2PKIT_SUCCESS) topo = NULL;
  char busid[P2PK_COLL_MAX_RANKS][32];
  for (int i = 0; i < n; i++)
    if (cudaDeviceGetPCIBusId(busid[i], sizeof busid[i], devs[i]) != cudaSuccess) {
      cudaGetLastError();
      snprintf(busid[i], sizeof busid[i], "?%d", devs[i]);
    }
  *staged = cfg->force.algo == P2PK_ALGO_STAGED;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      if (i != j && !p2pk_comm_pair_p2p(cfg, topo, devs[i], busid[i], busid[j], labels[i][j], 64)) *staged = 1;
  p2pkit_topo_destroy(topo);
  if (!*staged)
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++)
        if (devs[i] != devs[j]) P2PK_CHECK(enable_peer(devs[i], devs[j]));
  return P2PKIT_SUCCESS;
}

/* The multiprocessors every rank's choices count with: the fewest of any
 * GPU; with k ranks on one GPU (P2PKIT_SHARE_GPUS) a 2k-th of them, so the
 * kernels of every rank sharing it stay resident together (one process:
 * they run at once, and each waits for the others). */
static p2pkit_status_t all_sms(int n, const int *devs, int *sms) {
  *sms = 1 << 30;
  int most = 1;
  for (int i = 0; i < n; i++) {
    int s = 0, same = 0;
    P2PK_CHECK(p2pk_comm_sm_count(devs[i], &s));
    if (s < *sms) *sms = s;
    for (int j = 0; j < n; j++) same += devs[j] == devs[i];
    if (same > most) most = same;
  }
  if (most > 1) {
    *sms = *sms / (2 * most) > 0 ? *sms / (2 * most) : 1;
    P2PK_WARN("init_all: %d ranks share a GPU (P2PKIT_SHARE_GPUS=1): each rank's kernels take "
              "%d multiprocessors' grids, so results are checked but no time means anything",
              most, *sms);
  }
  return P2PKIT_SUCCESS;
}

/* One process, one host: every rank's host ids are this process's; NCCL's
 * mode from them and the GPUs (a GPU listed twice: no NCCL). */
static p2pkit_status_t all_hosts(struct p2pkit_comm *c, const int *devs) {
  static _Thread_local p2pk_host_info mine; /* large: not on the stack */
  char why[400], bus[P2PK_COLL_MAX_RANKS][32];
  const p2pk_host_info *hi[P2PK_COLL_MAX_RANKS];
  const char *bp[P2PK_COLL_MAX_RANKS];
  P2PK_CHECK(p2pk_host_info_mine(&mine, why, sizeof why));
  for (int r = 0; r < c->nranks; r++) {
    if (cudaDeviceGetPCIBusId(bus[r], sizeof bus[r], devs[r]) != cudaSuccess) {
      cudaGetLastError();
      snprintf(bus[r], sizeof bus[r], "?%d", devs[r]);
    }
    hi[r] = &mine, bp[r] = bus[r];
  }
  return p2pk_comm_hosts(c, hi, bp, why);
}

/* Rank i of a one-process communicator: its settings, layout, choices
 * and memory (its GPU current after). */
static p2pkit_status_t all_comm(p2pk_group *g, int i, const int *devs, const coll_cfg *cfg,
                                int staged, int sms) {
  struct p2pkit_comm *c = calloc(1, sizeof *c);
  if (!c) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory for communicator %d", i);
  g->comms[i] = c;
  c->rank = i;
  c->nranks = g->n;
  c->device = devs[i];
  c->staged = staged;
  c->group = g;
  const int secs = cfg->rank_timeout_s ? cfg->rank_timeout_s[i] : cfg->timeout_s;
  c->timeout_ns = (uint64_t)secs * 1000000000ULL;
  c->buffer_bytes = cfg->buffer;
  P2PK_CHECK(all_hosts(c, devs));
  P2PK_CHECK(p2pk_comm_derive(c, sms, cfg->buffer, &cfg->table, &cfg->force));
  c->sel.max_blocks = cfg->max_blocks;
  P2PK_CUDA_CHECK(cudaSetDevice(devs[i]));
  /* Every rank makes the same choices (the header checks the grid): one
   * geometry, the occupancy queries made once, on the first GPU. */
  if (i == 0) p2pk_comm_ll128_occupancy(c);
  else c->sel.geom = g->comms[0]->sel.geom;
  return p2pk_comm_alloc(c);
}

/* Staged: the group's pinned, mapped host region. */
static p2pkit_status_t all_stage(p2pk_group *g) {
  size_t bytes = g->comms[0]->lay.stage_stride * (size_t)g->n;
  cudaError_t e = cudaHostAlloc((void **)&g->stage, bytes, cudaHostAllocPortable | cudaHostAllocMapped);
  if (e != cudaSuccess) {
    cudaGetLastError();
    g->stage = NULL;
    return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "pinning %zu bytes of host memory for staging: %s",
                     bytes, cudaGetErrorString(e));
  }
  memset(g->stage, 0, bytes);
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t init_all_locked(p2pk_group *g, const int *devs, const coll_cfg *cfg) {
  const int n = g->n;
  char labels[P2PK_COLL_MAX_RANKS][P2PK_COLL_MAX_RANKS][64];
  int staged = 0, sms = 0;
  P2PK_CHECK(all_transport(n, devs, cfg, labels, &staged));
  P2PK_CHECK(all_sms(n, devs, &sms));
  for (int i = 0; i < n; i++) P2PK_CHECK(all_comm(g, i, devs, cfg, staged, sms));
  if (staged && n > 1) P2PK_CHECK(all_stage(g));
  for (int i = 0; i < n; i++) {
    struct p2pkit_comm *c = g->comms[i];
    for (int p = 0; p < n; p++) c->peer[p] = g->comms[p]->scratch;
    char *stage_dev = NULL;
    P2PK_CUDA_CHECK(cudaSetDevice(devs[i]));
    if (g->stage) {
      P2PK_CUDA_CHECK(cudaHostGetDevicePointer((void **)&stage_dev, g->stage, 0));
      c->stage = g->stage;
      c->stage_bytes = c->lay.stage_stride * (size_t)n;
    }
    p2pk_comm_fill_tmpl(c, stage_dev);
    P2PK_CHECK(p2pk_comm_paths_init(c));
  }
  for (int i = 0; i < n; i++) {
    P2PK_CUDA_CHECK(cudaSetDevice(devs[i]));
    P2PK_CUDA_CHECK(cudaDeviceSynchronize());
  }
  for (int i = 0; i < n; i++) p2pk_comm_log(g->comms[i], labels[i], devs);
  p2pk_trace_rank tr[P2PK_COLL_MAX_RANKS];
  for (int i = 0; i < n; i++) tr[i] = (p2pk_trace_rank){getpid(), p2pk_trace_pidns(), 1};
  const uint64_t id = p2pk_trace_new_id();
  for (int i = 0; i < n; i++) p2pk_trace_attach(g->comms[i], id, tr);
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pkit_comm_init_all(p2pkit_comm_t *comms, int ndev, const int *devs_in) {
  return p2pk_comm_init_all_timeouts(comms, ndev, devs_in, NULL);
}

p2pkit_status_t p2pk_comm_init_all_timeouts(p2pkit_comm_t *comms, int ndev, const int *devs_in,
                                            const int *timeout_s) {
  if (!comms) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "init_all: comms is NULL");
  if (ndev < 1 || ndev > P2PK_COLL_MAX_RANKS)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "init_all: %d GPUs; expected 1..%d", ndev,
                     P2PK_COLL_MAX_RANKS);
  P2PK_CHECK(p2pk_param_check()); /* before the first setting is read (P2PKIT_SHARE_GPUS) */
  int count = 0;
  P2PK_CHECK(p2pk_comm_device_count(&count));
  int devs[P2PK_COLL_MAX_RANKS] = {0};
  for (int i = 0; i < ndev; i++) {
    devs[i] = devs_in ? devs_in[i] : i;
    if (devs[i] < 0 || devs[i] >= count)
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "init_all: device %d does not exist (%d GPUs)",
                       devs[i], count);
    /* P2PKIT_SHARE_GPUS=1 (correctness tests): a GPU may be listed more
     * than once, so one GPU runs the one-process paths of several ranks. */
    for (int j = 0; j < i && !p2pk_param_int("P2PKIT_SHARE_GPUS"); j++)
      if (devs[j] == devs[i])
        return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "init_all: GPU %d is listed twice "
                         "(P2PKIT_SHARE_GPUS=1 allows it, for correctness tests only)", devs[i]);
  }
  coll_cfg *cfg = malloc(sizeof *cfg);
  p2pk_group *g = calloc(1, sizeof *g);
  if (!cfg || !g) {
    free(cfg);
    free(g);
    return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "init_all: out of memory");
  }
  pthread_mutex_init(&g->lock, NULL);
  g->n = g->live = ndev;
  int cur = -1;
  cudaGetDevice(&cur);
  int secs[P2PK_COLL_MAX_RANKS];
  p2pkit_status_t st = p2pk_comm_read_cfg(cfg, -1);
  for (int i = 0; timeout_s && i < ndev && st == P2PKIT_SUCCESS; i++)
    st = p2pk_comm_timeout_s(timeout_s[i], "config.timeout_s", &secs[i]);
  cfg->rank_timeout_s = timeout_s ? secs : NULL;
  if (st == P2PKIT_SUCCESS) st = init_all_locked(g, devs, cfg);
  free(cfg);
  if (cur >= 0) cudaSetDevice(cur);
  if (st != P2PKIT_SUCCESS) {
    p2pk_group_free(g);
    return st;
  }
  for (int i = 0; i < ndev; i++) comms[i] = g->comms[i];
  return P2PKIT_SUCCESS;
}

