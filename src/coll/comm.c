/* SPDX-License-Identifier: BSD-3-Clause */
/* Communicators: one process driving several GPUs (init_all: peer access and
 * plain pointers), or one process per GPU (init_rank: TCP rendezvous, CUDA
 * IPC, shared memory). Each rank owns one device scratch allocation (control
 * words, mailbox counters, LL slots, mailboxes) that every peer maps once. */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include "coll/ce_common.h"
#include "coll/cep.h"
#include "coll/ipc.h"
#include "coll/path.h"
#include "coll/plan.h"
#include "coll/trace.h"
#include "core/check.h"
#include "core/log.h"
#include "core/param.h"
#include "nccl/dtype.h"
#include "topo/topo.h"
#include "xfer/xfer.h"


/* ----------------------------------------------------------- config ---- */

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

p2pkit_status_t p2pk_comm_timeout_s(int asked, const char *what, int *out) {
  if (asked == -1) {
    /* The registry refuses a value outside 1..86400 (p2pk_param_check). */
    *out = (int)p2pk_param_int("P2PKIT_TIMEOUT");
    return P2PKIT_SUCCESS;
  }
  if (asked < 1 || asked > P2PK_TIMEOUT_MAX_S)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s %d: expected -1 (P2PKIT_TIMEOUT, else 600 s) "
                     "or 1..%d seconds", what, asked, P2PK_TIMEOUT_MAX_S);
  *out = asked;
  return P2PKIT_SUCCESS;
}

/* `timeout_s`: the options' (-1: P2PKIT_TIMEOUT). */
static p2pkit_status_t read_cfg(coll_cfg *cfg, int timeout_s) {
  memset(cfg, 0, sizeof *cfg);
  /* Every P2PKIT_* value parses, or the communicator is refused: a typo in
   * P2PKIT_P2P_DISABLE must not quietly leave P2P on. */
  P2PK_CHECK(p2pk_param_check());
  p2pk_param_warn_unknown();
  cfg->buffer = p2pk_param_size("P2PKIT_BUFFER_SIZE");
  P2PK_CHECK(p2pk_comm_timeout_s(timeout_s, "opts.timeout_s", &cfg->timeout_s));
  cfg->p2p_disable = p2pk_param_int("P2PKIT_P2P_DISABLE") != 0;
  /* The copy path's reader: one vocabulary (NCCL_P2P_LEVEL's, PHB covering
   * nvidia-smi's NODE) and one message for both. */
  P2PK_CHECK(p2pk_p2p_level_read(&cfg->level));
  const char *path = p2pk_param_str("P2PKIT_ALGO_TABLE");
  if (path[0]) P2PK_CHECK(p2pk_algo_table_load(path, &cfg->table));
  else p2pk_algo_table_default(&cfg->table);
  P2PK_CHECK(p2pk_algo_force_from_env(&cfg->force));
  const int64_t mb = p2pk_param_int("P2PKIT_MAX_BLOCKS");
  if (mb < 0 || mb > P2PK_COLL_MAX_BLOCKS)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "P2PKIT_MAX_BLOCKS=%lld: expected 0..%d",
                     (long long)mb, P2PK_COLL_MAX_BLOCKS);
  cfg->max_blocks = (int)mb;
  return P2PKIT_SUCCESS;
}

/* ------------------------------------------------------- peer access ---- */

static int want_topology(const coll_cfg *cfg) {
  return cfg->level != P2PK_PL_ANY || p2pk_log_enabled(P2PK_LEVEL_INFO, P2PK_LOG_COLL);
}

/* Whether `dev` (this process's ordinal) may use P2P with the GPU at
 * `peer_busid`, with the reason when not and the link's label. */
static int pair_p2p(const coll_cfg *cfg, p2pkit_topo_t topo, int dev, const char *busid,
                    const char *peer_busid, char *label, size_t llen) {
  snprintf(label, llen, "P2P");
  if (cfg->p2p_disable) {
    snprintf(label, llen, "off (P2PKIT_P2P_DISABLE=1)");
    return 0;
  }
  if (strcasecmp(busid, peer_busid) == 0) {
    snprintf(label, llen, "same GPU");
    return 1;
  }
  if (cfg->level == P2PK_PL_LOC) {
    snprintf(label, llen, "off (P2PKIT_P2P_LEVEL=LOC)");
    return 0;
  }
  int pdev = -1, can = 0;
  if (cudaDeviceGetByPCIBusId(&pdev, peer_busid) != cudaSuccess) {
    cudaGetLastError();
    snprintf(label, llen, "off (GPU %s not visible here)", peer_busid);
    return 0;
  }
  if (cudaDeviceCanAccessPeer(&can, dev, pdev) != cudaSuccess || !can) {
    cudaGetLastError();
    snprintf(label, llen, "off (the driver allows no peer access)");
    return 0;
  }
  if (topo) {
    int a = p2pk_topo_find_gpu(topo, busid), b = p2pk_topo_find_gpu(topo, peer_busid);
    if (a >= 0 && b >= 0) {
      p2pkit_pair_t pr;
      p2pk_pair_info(topo, a, b, &pr);
      snprintf(label, llen, "P2P %s", pr.label);
      char why[96];
      if (!p2pk_level_allows(&pr, cfg->level, why, sizeof why)) {
        snprintf(label, llen, "off (%s)", why);
        return 0;
      }
    }
  }
  return 1;
}

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

/* -------------------------------------------------- one rank's memory ---- */

/* The kernels' error words (host memory the GPU writes). */
static p2pkit_status_t comm_alloc_err(struct p2pkit_comm *c) {
  P2PK_CUDA_CHECK(cudaHostAlloc((void **)&c->host_err, 64, cudaHostAllocMapped | cudaHostAllocPortable));
  memset(c->host_err, 0, 64);
  P2PK_CUDA_CHECK(cudaHostGetDevicePointer((void **)&c->tmpl.host_err, c->host_err, 0));
  return P2PKIT_SUCCESS;
}

/* Scratch and error words of one rank; the current device is its GPU. */
static p2pkit_status_t comm_alloc(struct p2pkit_comm *c) {
  cudaError_t e = cudaMalloc((void **)&c->scratch, c->lay.total);
  if (e != cudaSuccess) {
    cudaGetLastError();
    c->scratch = NULL;
    return p2pk_fail(e == cudaErrorMemoryAllocation ? P2PKIT_ERR_NO_MEMORY : P2PKIT_ERR_CUDA,
                     "rank %d: allocating %llu bytes of scratch on GPU %d: %s", c->rank,
                     (unsigned long long)c->lay.total, c->device, cudaGetErrorString(e));
  }
  P2PK_CUDA_CHECK(cudaMemset(c->scratch, 0, c->lay.total));
  P2PK_CUDA_CHECK(p2pk_preload_allreduce_p2p());
  P2PK_CUDA_CHECK(p2pk_preload_allreduce_staged());
  P2PK_CHECK(comm_alloc_err(c));
  return p2pk_ce_init(c);
}

/* Every path's state, once the scratch, the peers' mappings and the
 * kernel template exist (c's GPU current). */
static p2pkit_status_t paths_init(struct p2pkit_comm *c) {
  for (int i = 0; i < P2PK_PATHS; i++)
    if (p2pk_paths[i]->init) P2PK_CHECK(p2pk_paths[i]->init(c));
  return P2PKIT_SUCCESS;
}

/* Frees what this rank owns (the group's shared region is the group's). */
static void comm_free(struct p2pkit_comm *c) {
  if (!c) return;
  p2pk_trace_detach(c); /* first: a signal's dump reads the error words */
  p2pk_worker_stop(c);
  int cur = -1;
  cudaGetDevice(&cur);
  cudaSetDevice(c->device);
  p2pk_reg_free_all(c);
  for (int i = 0; i < P2PK_PATHS; i++)
    if (p2pk_paths[i]->fini) p2pk_paths[i]->fini(c);
  for (int p = 0; p < c->nranks; p++)
    if (c->peer_ipc[p]) cudaIpcCloseMemHandle(c->peer_ipc[p]);
  if (c->scratch) cudaFree(c->scratch);
  if (c->host_err) cudaFreeHost(c->host_err);
  p2pk_ce_fini(c);
  if (c->stage_registered) cudaHostUnregister(c->stage);
  if (c->stage && c->multiproc) munmap(c->stage, c->stage_bytes);
  if (c->dmb) munmap(c->dmb, c->dmb_bytes);
  /* A spanning communicator's per-host one (every rank destroys it with
   * its parent, so its barrier meets every member). */
  if (c->intra) p2pkit_comm_destroy(c->intra);
  p2pk_boot_destroy(c->boot);
  p2pk_hosts_free(&c->hosts);
  cudaGetLastError();
  if (cur >= 0) cudaSetDevice(cur);
  free(c);
}

static void fill_tmpl(struct p2pkit_comm *c, char *stage_dev) {
  p2pk_ar_args *a = &c->tmpl;
  int32_t *he = a->host_err;
  memset(a, 0, sizeof *a);
  a->host_err = he;
  a->rank = c->rank;
  a->nranks = c->nranks;
  a->slots = P2PK_COLL_SLOTS;
  a->timeout_ns = c->timeout_ns;
  a->lay = c->lay;
  a->local = c->scratch;
  for (int p = 0; p < c->nranks; p++) a->peer[p] = c->staged ? NULL : c->peer[p];
  a->stage = c->staged ? stage_dev : NULL;
  a->direct = c->staged ? 0 : c->multiproc ? 2 : 1;
  /* All-reduce: every peer both ways, reduced (kern_args.c sets these
   * per call for the other collectives). */
  a->send_mask = a->recv_mask = p2pk_peer_mask(c->nranks, c->rank);
  a->send2_mask = a->recv2_mask = a->send_mask;
  a->reduce = 1;
  /* Programmatic dependent launch: Hopper and later (griddepcontrol), over
   * P2P only: the staged all-reduce ran ~3% slower with it (2x H200,
   * 128 MiB: 3751/3815 us against 3658/3696 without). */
  int major = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, c->device);
  a->pdl = !c->staged && major >= 9 && p2pk_param_int("P2PKIT_PDL") > 0;
}

/* The table rows this communicator's all-reduce reads, for the log. */
static void table_plan(const struct p2pkit_comm *c, char *plan, size_t len) {
  const p2pk_sel *s = &c->sel;
  int tr = c->staged ? P2PK_TRANSPORT_SHM : P2PK_TRANSPORT_P2P;
  size_t used = 0;
  plan[0] = '\0';
  for (int i = 0; i < s->table.nrows && used < len - 64; i++) {
    const p2pk_algo_row *r = &s->table.rows[i];
    if (r->transport != tr || c->nranks < r->min_ranks || c->nranks > r->max_ranks) continue;
    char lim[32];
    if (r->max_bytes == SIZE_MAX) snprintf(lim, sizeof lim, "above");
    else snprintf(lim, sizeof lim, "<=%zu B", r->max_bytes);
    used += (size_t)snprintf(plan + used, len - used, "%s%s %s/%s", used ? ", " : "", lim,
                             p2pk_algo_name(r->algo), p2pk_proto_name(r->proto));
  }
}

/* Say so when too few hardware queues keep the copy engines off, or under
 * capture more than 2 ranks. */
static void log_queues(const struct p2pkit_comm *c) {
  const p2pk_sel *s = &c->sel;
  const int q = s->queues, spins = c->multiproc || !c->staged;
  int any_ce = 0; /* a copy-engine path taken eagerly */
  for (int k = 0; k < P2PK_KINDS; k++)
    any_ce |= s->from[P2PK_FROM_EVENTS][k] != 0 || s->from[P2PK_FROM_SLOTS][k] != 0;
  if (c->nranks >= 2 && spins && q < P2PK_CE_QUEUES)
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): CUDA_DEVICE_MAX_CONNECTIONS=%d: the copy-engine "
              "paths%s wait on the peers on several streams at once and need %d hardware queues; "
              "the kernels carry every size", c->rank, c->device, q,
              c->multiproc ? "" : " under capture", P2PK_CE_QUEUES);
  else if (c->nranks > 2 && !c->staged && !p2pk_sel_waits_ok(s, 1) && any_ce)
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): under a CUDA graph the copy-engine paths of more "
              "than 2 ranks are off (a graph may queue their waits behind one another); there "
              "the kernels carry every size", c->rank, c->device);
}

static void log_comm(const struct p2pkit_comm *c, char labels[][64], const int *devs) {
  if (!p2pk_log_enabled(P2PK_LEVEL_INFO, P2PK_LOG_COLL)) return;
  log_queues(c);
  char plan[512];
  table_plan(c, plan, sizeof plan);
  const p2pk_algo_force *f = &c->sel.force;
  for (int p = 0; p < c->nranks; p++) {
    if (p == c->rank) continue;
    /* Staged says why: this pair's own verdict ("off (P2PKIT_P2P_LEVEL=LOC)"),
     * or "P2P ..." when another pair of the communicator had none. */
    char tlabel[128];
    if (c->staged)
      snprintf(tlabel, sizeof tlabel, "host shared memory (staged; this pair: %s)", labels[p]);
    else snprintf(tlabel, sizeof tlabel, "%s", labels[p]);
    P2PK_INFO(P2PK_LOG_COLL,
              "comm rank %d/%d on GPU %d -> rank %d (GPU %d): transport %s; all-reduce table %s: "
              "%s%s%s%s%s (LL up to %zu B, mailbox %llu B)",
              c->rank, c->nranks, c->device, p, devs ? devs[p] : -1,
              tlabel, c->sel.table.source, plan,
              f->algo >= 0 ? "; forced algorithm " : "", f->algo >= 0 ? p2pk_algo_name(f->algo) : "",
              f->proto >= 0 ? "; forced protocol " : "", f->proto >= 0 ? p2pk_proto_name(f->proto) : "",
              c->sel.geom.ll_cap, (unsigned long long)(c->staged ? c->lay.stage_mailbox : c->lay.mailbox));
  }
}

static void set_geom(struct p2pkit_comm *c, int sm_count, size_t ll_cap) {
  p2pk_algo_geom *g = &c->sel.geom;
  g->nranks = c->nranks;
  g->staged = c->staged;
  g->sm_count = sm_count;
  g->ll_cap = ll_cap;
  g->ll128_cap = c->lay.ll128_bytes / P2PK_LL128_LINE * P2PK_LL128_DATA;
  g->ll128_x2 = p2pk_param_int("P2PKIT_LL128_X2") != 0;
  g->mailbox = c->lay.mailbox;
  g->mailboxes = (int)c->lay.nboxes;
  g->stage_mailbox = c->lay.stage_mailbox;
  c->sel.stage_p2p_box = c->lay.stage_p2p_box;
}

/* LL128's occupancy per thread count, from CUDA (the GPU current). */
static void set_ll128_occupancy(struct p2pkit_comm *c) {
  p2pk_algo_geom *g = &c->sel.geom;
  if (g->ll128_cap)
    for (int t = 2; t < P2PK_ALGO_THREAD_STEPS; t++) g->ll128_per_sm[t] = p2pk_ll128_per_sm(32 * t);
}

p2pkit_status_t p2pk_comm_derive(struct p2pkit_comm *c, int sms, size_t buffer,
                                 const p2pk_algo_table *table, const p2pk_algo_force *force) {
  const int n = c->nranks;
  p2pk_algo_force env;
  if (!force) {
    P2PK_CHECK(p2pk_algo_force_from_env(&env));
    force = &env;
  }
  p2pk_sel_init(&c->sel, n, c->multiproc, c->staged, c->group ? c->group->n : 0, table, force);
  const p2pk_hosts *h = &c->hosts;
  p2pk_sel_set_hosts(&c->sel, c->nccl_mode, h->nhosts, h->regular && h->local_max > 1);
  size_t ll_cap = 0;
  P2PK_CHECK(p2pk_layout_compute(n, buffer, c->staged, p2pk_mailboxes_for(sms), &c->lay, &ll_cap));
  /* Each path's scratch (landing slots, copy-engine slots in the staging
   * parts), from the settings every rank shares. */
  for (int i = 0; i < P2PK_PATHS; i++)
    if (p2pk_paths[i]->scratch) p2pk_paths[i]->scratch(c, &c->lay);
  p2pk_sel_fill(&c->sel, c->lay.cep_slot != 0, c->lay.stage_ce_slot != 0);
  set_geom(c, sms, ll_cap);
  return P2PKIT_SUCCESS;
}

/* The GPUs this process sees, or why none (topo's words, as every entry point). */
static p2pkit_status_t device_count(int *n) {
  const p2pkit_status_t st = p2pk_gpu_count(n);
  if (st == P2PKIT_SUCCESS) return st;
  char why[256];
  snprintf(why, sizeof why, "%s", p2pkit_last_error());
  return p2pk_fail(st, "no usable GPU: %s", why);
}

static p2pkit_status_t sm_count_of(int dev, int *sms) {
  P2PK_CUDA_CHECK(cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev));
  return P2PKIT_SUCCESS;
}

/* --------------------------------------------------- one process, n GPUs ---- */

static void group_free(p2pk_group *g) {
  for (int i = 0; i < g->n; i++) {
    comm_free(g->comms[i]);
    g->comms[i] = NULL;
  }
  if (g->stage) cudaFreeHost(g->stage);
  cudaGetLastError();
  pthread_mutex_destroy(&g->lock);
  free(g);
}

/* One process: the transport every pair can take (staged when some pair
 * has no P2P), with each pair's label for the log; peer access between
 * every two GPUs (a GPU listed twice, P2PKIT_SHARE_GPUS: none needed). */
static p2pkit_status_t all_transport(int n, const int *devs, const coll_cfg *cfg,
                                     char labels[][P2PK_COLL_MAX_RANKS][64], int *staged) {
  p2pkit_topo_t topo = NULL;
  if (want_topology(cfg) && p2pkit_topo_discover(&topo) != P2PKIT_SUCCESS) topo = NULL;
  char busid[P2PK_COLL_MAX_RANKS][32];
  for (int i = 0; i < n; i++)
    if (cudaDeviceGetPCIBusId(busid[i], sizeof busid[i], devs[i]) != cudaSuccess) {
      cudaGetLastError();
      snprintf(busid[i], sizeof busid[i], "?%d", devs[i]);
    }
  *staged = cfg->force.algo == P2PK_ALGO_STAGED;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      if (i != j && !pair_p2p(cfg, topo, devs[i], busid[i], busid[j], labels[i][j], 64)) *staged = 1;
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
    P2PK_CHECK(sm_count_of(devs[i], &s));
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
  if (i == 0) set_ll128_occupancy(c);
  else c->sel.geom = g->comms[0]->sel.geom;
  return comm_alloc(c);
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
    fill_tmpl(c, stage_dev);
    P2PK_CHECK(paths_init(c));
  }
  for (int i = 0; i < n; i++) {
    P2PK_CUDA_CHECK(cudaSetDevice(devs[i]));
    P2PK_CUDA_CHECK(cudaDeviceSynchronize());
  }
  for (int i = 0; i < n; i++) log_comm(g->comms[i], labels[i], devs);
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
  P2PK_CHECK(device_count(&count));
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
  p2pkit_status_t st = read_cfg(cfg, -1);
  for (int i = 0; timeout_s && i < ndev && st == P2PKIT_SUCCESS; i++)
    st = p2pk_comm_timeout_s(timeout_s[i], "config.timeout_s", &secs[i]);
  cfg->rank_timeout_s = timeout_s ? secs : NULL;
  if (st == P2PKIT_SUCCESS) st = init_all_locked(g, devs, cfg);
  free(cfg);
  if (cur >= 0) cudaSetDevice(cur);
  if (st != P2PKIT_SUCCESS) {
    group_free(g);
    return st;
  }
  for (int i = 0; i < ndev; i++) comms[i] = g->comms[i];
  return P2PKIT_SUCCESS;
}

/* -------------------------------------------------- one process per GPU ---- */

/* A launcher's variable, a whole number in lo..hi: 1 when read, 0 when not
 * set, -1 (the error recorded, naming it) when it is something else. */
static int env_int(const char *name, long lo, long hi, int *out) {
  const char *v = getenv(name);
  if (!v || !*v) return 0;
  char *end = NULL;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (end == v || *end || errno || x < lo || x > hi) {
    p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s='%s' (from the launcher) must be a whole number "
              "from %ld to %ld", name, v, lo, hi);
    return -1;
  }
  *out = (int)x;
  return 1;
}

/* torchrun's variable, else mpirun's; as env_int. */
static int launcher_int(const char *torchrun, const char *mpirun, long lo, long hi, int *out) {
  const int rc = env_int(torchrun, lo, hi, out);
  return rc ? rc : env_int(mpirun, lo, hi, out);
}

p2pkit_status_t p2pk_resolve_opts(const p2pkit_comm_opts_t *o, p2pk_rank_opts *r) {
  int env_size = -1, env_rank = -1;
  if (launcher_int("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", 1, 1000000, &env_size) < 0 ||
      launcher_int("RANK", "OMPI_COMM_WORLD_RANK", 0, 999999, &env_rank) < 0)
    return P2PKIT_ERR_INVALID_ARGUMENT;
  /* What the caller sets wins; the launcher fills only what is unset (a
   * communicator of some of the job's ranks has its own rank and count).
   * The launcher's rank is a rank of its whole job: it fills an unset rank
   * only when the count is the launcher's too. */
  r->nranks = o->nranks >= 0 ? o->nranks : env_size;
  r->rank = o->rank >= 0 ? o->rank : r->nranks == env_size ? env_rank : -1;
  if (o->rank < 0 && o->nranks >= 0 && env_rank >= 0 && o->nranks != env_size)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT,
                     "opts.nranks=%d is not the launcher's %d ranks, so its RANK=%d is no rank of "
                     "this communicator: set opts.rank too", o->nranks, env_size, env_rank);
  if (r->nranks < 0 || r->rank < 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT,
                     "rank and rank count unknown: set them in p2pkit_comm_opts_t or start under "
                     "a launcher (RANK/WORLD_SIZE or OMPI_COMM_WORLD_RANK/_SIZE)");
  if (r->nranks < 1 || r->nranks > P2PK_COLL_MAX_RANKS || r->rank >= r->nranks)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "rank %d of %d: expected 0 <= rank < ranks <= %d",
                     r->rank, r->nranks, P2PK_COLL_MAX_RANKS);
  r->device = o->device;
  if (r->device < 0 &&
      launcher_int("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", 0, 999999, &r->device) < 0)
    return P2PKIT_ERR_INVALID_ARGUMENT;
  const char *master = getenv("MASTER_ADDR");
  r->addr = o->addr ? o->addr : master && *master ? master : "127.0.0.1";
  r->port = o->port;
  if (r->port <= 0) {
    const int rc = env_int("MASTER_PORT", 1, 65535, &r->port);
    if (rc < 0) return P2PKIT_ERR_INVALID_ARGUMENT;
    if (rc == 0) r->port = 29500;
  }
  /* The secret: the caller's, else P2PKIT_JOB_SECRET. A launcher's run id
   * (TORCHELASTIC_RUN_ID, PMIX_NAMESPACE, OMPI_MCA_ess_base_jobid) names the
   * job and is often guessable ("none", a small number): never a secret. */
  r->secret = o->secret ? o->secret : p2pk_param_str("P2PKIT_JOB_SECRET");
  if (!r->secret[0] && r->nranks > 1)
    P2PK_INFO(P2PK_LOG_BOOT, "no job secret (P2PKIT_JOB_SECRET): the rendezvous at %s:%d must "
              "be on loopback and admits only this user's processes", r->addr, r->port);
  r->timeout_s = o->timeout_s;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_rank_boot(const p2pk_rank_opts *r, int timeout_s, int listen_fd,
                               p2pk_boot **out) {
  p2pk_boot_opts bo = {r->rank, r->nranks, r->addr, r->port, r->secret, timeout_s * 1000, listen_fd};
  return p2pk_boot_init(&bo, out);
}

typedef struct {
  int32_t rank, device, sm_count, pid;
  char busid[32];
  p2pk_host_info hi; /* host ids and P2PKIT_NCCL (comm_hosts.c) */
  uint64_t buffer, table_hash, chunk, ce_min, ce_slot, ce_depth;
  uint64_t cep_slot, cep_depth, cep_mins; /* copy engines over P2P (path_ce_slots.c) */
  uint64_t rooted_min; /* P2PKIT_ROOTED_TWOSHOT_MIN: broadcast's and reduce's form by size */
  int32_t algo, proto, blocks, threads, boxes, max_blocks;
  int32_t share_gpus; /* P2PKIT_SHARE_GPUS: ranks may share a GPU (tests) */
  int32_t queues;     /* CUDA_DEVICE_MAX_CONNECTIONS as CUDA reads it (p2pk_ce_queues) */
  uint64_t trace_id, pidns; /* the ring's communicator id (rank 0's wins), pid namespace (trace.h) */
} rank_info;

static p2pkit_status_t check_infos(const struct p2pkit_comm *c, const rank_info *all) {
  const rank_info *me = &all[c->rank];
  int shares = -1; /* the first rank on this rank's GPU (P2PKIT_SHARE_GPUS) */
  for (int r = 0; r < c->nranks; r++) {
    const rank_info *o = &all[r];
    if (r != c->rank && strcmp(o->hi.machine, me->hi.machine) == 0 &&
        strcasecmp(o->busid, me->busid) == 0) {
      if (!(me->share_gpus && o->share_gpus))
        return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "ranks %d and %d both use GPU %s: one GPU "
                         "per rank (P2PKIT_SHARE_GPUS=1 allows sharing, for correctness tests only)",
                         r < c->rank ? r : c->rank, r < c->rank ? c->rank : r, me->busid);
      if (shares < 0) shares = r;
    }
    const char *what = o->buffer != me->buffer ? "P2PKIT_BUFFER_SIZE"
                       : o->table_hash != me->table_hash ? "the algorithm table (P2PKIT_ALGO_TABLE)"
                       : o->algo != me->algo ? "P2PKIT_ALGO"
                       : o->proto != me->proto ? "P2PKIT_PROTO"
                       : o->blocks != me->blocks ? "P2PKIT_COLL_BLOCKS"
                       : o->threads != me->threads ? "P2PKIT_COLL_THREADS"
                       : o->max_blocks != me->max_blocks ? "P2PKIT_MAX_BLOCKS"
                       : o->chunk != me->chunk ? "P2PKIT_COLL_CHUNK"
                       : o->boxes != me->boxes ? "P2PKIT_COLL_MAILBOXES"
                       : o->share_gpus != me->share_gpus ? "P2PKIT_SHARE_GPUS"
                       : o->hi.nccl_setting != me->hi.nccl_setting ? "P2PKIT_NCCL"
                       : o->queues != me->queues ? "CUDA_DEVICE_MAX_CONNECTIONS (the copy engines' "
                                                   "paths depend on it)"
                       : o->ce_min != me->ce_min ? "P2PKIT_STAGED_CE_MIN"
                       : o->ce_slot != me->ce_slot ? "P2PKIT_STAGED_CE_CHUNK"
                       : o->ce_depth != me->ce_depth ? "P2PKIT_STAGED_CE_DEPTH"
                       : o->cep_slot != me->cep_slot ? "P2PKIT_CE_CHUNK"
                       : o->cep_depth != me->cep_depth ? "P2PKIT_CE_DEPTH"
                       : o->rooted_min != me->rooted_min ? "P2PKIT_ROOTED_TWOSHOT_MIN"
                       : o->cep_mins != me->cep_mins ? "the copy-engine thresholds (P2PKIT_CE_*_MIN, "
                                                       "P2PKIT_BCAST_CE_MIN, P2PKIT_SENDRECV_CE_MIN)"
                                                     : NULL;
    if (what)
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "rank %d and rank %d use different %s; every "
                       "rank must choose algorithms alike", r, c->rank, what);
  }
  if (shares >= 0)
    P2PK_WARN("rank %d (GPU %d) shares GPU %s with rank %d (P2PKIT_SHARE_GPUS=1): their kernels "
              "take turns on it, so results are checked but no time means anything", c->rank,
              c->device, me->busid, shares);
  return P2PKIT_SUCCESS;
}

/* The hosts and NCCL's mode from every rank's info (comm_hosts.c). */
static p2pkit_status_t rank_hosts(struct p2pkit_comm *c, const rank_info *all, const char *why) {
  const p2pk_host_info *hi[P2PK_COLL_MAX_RANKS];
  const char *bus[P2PK_COLL_MAX_RANKS];
  p2pk_trace_rank tr[P2PK_COLL_MAX_RANKS];
  for (int r = 0; r < c->nranks; r++) {
    hi[r] = &all[r].hi, bus[r] = all[r].busid;
    c->same_machine[r] = strcmp(all[r].hi.machine, all[c->rank].hi.machine) == 0;
    tr[r] = (p2pk_trace_rank){all[r].pid, all[r].pidns, c->same_machine[r]};
  }
  p2pk_trace_attach(c, all[0].trace_id, tr);
  P2PK_CHECK(p2pk_comm_hosts(c, hi, bus, why));
  return P2PKIT_SUCCESS;
}

/* Spanning hosts: no p2pkit transport of its own (its calls go through
 * the paths that serve such a communicator: NCCL, the hierarchical one);
 * the selector, the error words, those paths. */
static p2pkit_status_t span_setup(struct p2pkit_comm *c, const coll_cfg *cfg, int sms) {
  P2PK_CHECK(p2pk_comm_derive(c, sms, cfg->buffer, &cfg->table, &cfg->force));
  c->sel.max_blocks = cfg->max_blocks;
  P2PK_CHECK(comm_alloc_err(c));
  P2PK_CHECK(p2pk_ce_init(c));
  for (int i = 0; i < P2PK_PATHS; i++)
    if ((p2pk_paths[i]->modes & P2PK_MODE_SPAN) && p2pk_paths[i]->init)
      P2PK_CHECK(p2pk_paths[i]->init(c));
  return P2PKIT_SUCCESS;
}

typedef struct {
  cudaIpcMemHandle_t scratch;
  char shm[P2PK_SHM_NAME];
} handles_t;

/* This rank's part of the settings every rank must share, and what it is
 * (`why`: the reason NCCL does not load here). */
static p2pkit_status_t rank_mine(struct p2pkit_comm *c, const coll_cfg *cfg, rank_info *mine,
                                 char *why, size_t wlen) {
  const int n = c->nranks;
  memset(mine, 0, sizeof *mine);
  P2PK_CHECK(p2pk_host_info_mine(&mine->hi, why, wlen));
  if (c->nested) mine->hi.nccl_setting = P2PK_NCCL_OFF; /* a host's part of a spanning one */
  mine->rank = c->rank;
  mine->device = c->device;
  mine->pid = (int32_t)getpid();
  mine->trace_id = p2pk_trace_new_id();
  mine->pidns = p2pk_trace_pidns();
  P2PK_CHECK(sm_count_of(c->device, &mine->sm_count));
  P2PK_CUDA_CHECK(cudaDeviceGetPCIBusId(mine->busid, sizeof mine->busid, c->device));
  mine->buffer = cfg->buffer;
  mine->table_hash = p2pk_algo_table_hash(&cfg->table);
  mine->algo = cfg->force.algo;
  mine->proto = cfg->force.proto;
  mine->blocks = cfg->force.blocks;
  mine->threads = cfg->force.threads;
  mine->max_blocks = cfg->max_blocks;
  mine->chunk = cfg->force.chunk;
  mine->boxes = (int32_t)p2pk_param_int("P2PKIT_COLL_MAILBOXES");
  mine->share_gpus = p2pk_param_int("P2PKIT_SHARE_GPUS") != 0;
  mine->queues = p2pk_ce_queues();
  mine->ce_min = p2pk_param_size("P2PKIT_STAGED_CE_MIN");
  mine->ce_slot = p2pk_sce_slot_bytes();
  mine->ce_depth = (uint64_t)p2pk_sce_depth();
  /* Copy engines over P2P: decided with the settings as if P2P held
   * (staged is not known yet); dropped later if it does not. */
  p2pk_sel s;
  p2pk_sel_init(&s, n, 1, 0, 0, &cfg->table, &cfg->force);
  const int cep = p2pk_sel_wants_slots(&s);
  mine->cep_depth = cep ? (uint64_t)p2pk_cep_depth() : 0;
  mine->cep_slot = p2pk_cep_slot_bytes(n, (int)mine->cep_depth, cep);
  mine->rooted_min = p2pk_param_size("P2PKIT_ROOTED_TWOSHOT_MIN");
  mine->cep_mins = p2pk_sel_setting(&s, P2PK_SENDRECV, P2PK_FROM_SLOTS);
  for (int k = 0; k < P2PK_COLL_KINDS; k++)
    mine->cep_mins = mine->cep_mins * 1000003ULL + p2pk_sel_setting(&s, k, P2PK_FROM_SLOTS);
  return P2PKIT_SUCCESS;
}

/* Every rank judges its own pairs; P2P only if every pair has it. */
static p2pkit_status_t rank_transport(struct p2pkit_comm *c, const coll_cfg *cfg,
                                      const rank_info *all, int32_t *rows, char (*labels)[64]) {
  const int n = c->nranks;
  p2pkit_topo_t topo = NULL;
  if (want_topology(cfg) && p2pkit_topo_discover(&topo) != P2PKIT_SUCCESS) topo = NULL;
  int32_t *row = &rows[(size_t)c->rank * n];
  for (int p = 0; p < n; p++)
    row[p] = p == c->rank ? 1
                          : pair_p2p(cfg, topo, c->device, all[c->rank].busid, all[p].busid,
                                     labels[p], 64);
  p2pkit_topo_destroy(topo);
  P2PK_CHECK(p2pk_boot_allgather(c->boot, P2PK_TAG_P2P, row, rows, (size_t)n * sizeof *rows));
  c->staged = cfg->force.algo == P2PK_ALGO_STAGED;
  for (int i = 0; i < n * n; i++)
    if (!rows[i]) c->staged = 1;
  return P2PKIT_SUCCESS;
}

/* Host memory rank 0 creates and every rank maps: the staging region
 * (staged), the send/recv descriptions (over P2P, dmbox.h); with the
 * scratch's IPC handle, exchanged into hs[]. */
static p2pkit_status_t rank_shared(struct p2pkit_comm *c, handles_t *hs, char *shm_name) {
  const int n = c->nranks;
  handles_t h;
  memset(&h, 0, sizeof h);
  if (!c->staged) P2PK_CUDA_CHECK(cudaIpcGetMemHandle(&h.scratch, c->scratch));
  c->stage_bytes = c->staged ? c->lay.stage_stride * (size_t)n : 0;
  if (c->staged && c->rank == 0) {
    P2PK_CHECK(p2pk_shm_create(c->stage_bytes, shm_name, (void **)&c->stage));
    snprintf(h.shm, sizeof h.shm, "%s", shm_name);
  }
  c->dmb_bytes = c->staged ? 0 : p2pk_dmb_bytes(n);
  if (c->dmb_bytes && c->rank == 0) {
    P2PK_CHECK(p2pk_shm_create(c->dmb_bytes, shm_name, &c->dmb));
    memset(c->dmb, 0, c->dmb_bytes);
    snprintf(h.shm, sizeof h.shm, "%s", shm_name);
  }
  P2PK_CHECK(p2pk_boot_allgather(c->boot, P2PK_TAG_HANDLES, &h, hs, sizeof h));
  if (c->dmb_bytes && c->rank != 0) P2PK_CHECK(p2pk_shm_attach(hs[0].shm, c->dmb_bytes, &c->dmb));
  return P2PKIT_SUCCESS;
}

/* The staging region registered with CUDA (*stage_dev as the GPU sees it),
 * or every peer's scratch mapped through CUDA IPC. */
static p2pkit_status_t rank_map(struct p2pkit_comm *c, const handles_t *hs, const rank_info *all,
                                char **stage_dev) {
  if (c->staged) {
    if (c->rank != 0) P2PK_CHECK(p2pk_shm_attach(hs[0].shm, c->stage_bytes, (void **)&c->stage));
    P2PK_CUDA_CHECK(cudaHostRegister(c->stage, c->stage_bytes,
                                     cudaHostRegisterMapped | cudaHostRegisterPortable));
    c->stage_registered = 1;
    P2PK_CUDA_CHECK(cudaHostGetDevicePointer((void **)stage_dev, c->stage, 0));
    return P2PKIT_SUCCESS;
  }
  for (int p = 0; p < c->nranks; p++) {
    if (p == c->rank) {
      c->peer[p] = c->scratch;
      continue;
    }
    void *ptr = NULL;
    cudaError_t e = cudaIpcOpenMemHandle(&ptr, hs[p].scratch, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return p2pk_fail(P2PKIT_ERR_CUDA, "rank %d (GPU %d) cannot map rank %d's memory (GPU %s) "
                       "through CUDA IPC: %s", c->rank, c->device, p, all[p].busid,
                       cudaGetErrorString(e));
    }
    c->peer_ipc[p] = ptr;
    c->peer[p] = ptr;
  }
  return P2PKIT_SUCCESS;
}

/* After the rendezvous: the settings compared, the transport, the layout
 * and choices, the memory, the mappings, the paths. */
static p2pkit_status_t rank_setup(struct p2pkit_comm *c, const coll_cfg *cfg, char *shm_name,
                                  rank_info *all, handles_t *hs, int32_t *rows,
                                  char (*labels)[64], int *devs) {
  const int n = c->nranks;
  rank_info mine;
  char why[400];
  P2PK_CHECK(rank_mine(c, cfg, &mine, why, sizeof why));
  P2PK_CHECK(p2pk_boot_allgather(c->boot, P2PK_TAG_INFO, &mine, all, sizeof mine));
  P2PK_CHECK(check_infos(c, all));
  P2PK_CHECK(rank_hosts(c, all, why));
  int sms = 1 << 30;
  for (int r = 0; r < n; r++) {
    devs[r] = all[r].device;
    if (all[r].sm_count < sms) sms = all[r].sm_count;
  }
  if (c->hosts.nhosts > 1) return span_setup(c, cfg, sms);
  P2PK_CHECK(rank_transport(c, cfg, all, rows, labels));
  /* The layout from the settings every rank shares (checked above). */
  P2PK_CHECK(p2pk_comm_derive(c, sms, cfg->buffer, &cfg->table, &cfg->force));
  c->sel.max_blocks = cfg->max_blocks;
  set_ll128_occupancy(c);
  P2PK_CHECK(comm_alloc(c));
  P2PK_CHECK(rank_shared(c, hs, shm_name));
  char *stage_dev = NULL;
  P2PK_CHECK(rank_map(c, hs, all, &stage_dev));
  P2PK_CUDA_CHECK(cudaDeviceSynchronize());
  /* Everyone has mapped everything: the shared-memory name can go. */
  P2PK_CHECK(p2pk_boot_barrier(c->boot, P2PK_TAG_MAPPED));
  if (c->rank == 0 && shm_name[0]) {
    p2pk_shm_unlink(shm_name);
    shm_name[0] = '\0';
  }
  fill_tmpl(c, stage_dev);
  P2PK_CHECK(paths_init(c));
  log_comm(c, labels, devs);
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t init_rank_body(struct p2pkit_comm *c, const coll_cfg *cfg, char *shm_name) {
  const int n = c->nranks;
  rank_info *all = calloc((size_t)n, sizeof *all);
  handles_t *hs = calloc((size_t)n, sizeof *hs);
  int32_t *rows = calloc((size_t)n * n, sizeof *rows);
  char (*labels)[64] = calloc((size_t)n, 64);
  int *devs = calloc((size_t)n, sizeof *devs);
  p2pkit_status_t st = all && hs && rows && labels && devs
                           ? rank_setup(c, cfg, shm_name, all, hs, rows, labels, devs)
                           : p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory");
  free(all);
  free(hs);
  free(rows);
  free(labels);
  free(devs);
  return st;
}

p2pkit_status_t p2pk_comm_init_rank_fd(const p2pkit_comm_opts_t *opts, int listen_fd,
                                       unsigned flags, p2pkit_comm_t *comm_p) {
  if (!comm_p) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "init_rank: comm_p is NULL");
  p2pkit_comm_opts_t o;
  if (opts) o = *opts;
  else p2pkit_comm_opts_init(&o);
  p2pk_rank_opts r;
  memset(&r, 0, sizeof r); /* gcc 13 cannot see p2pk_resolve_opts fills it */
  P2PK_CHECK(p2pk_resolve_opts(&o, &r));
  coll_cfg *cfg = malloc(sizeof *cfg);
  if (!cfg) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "init_rank: out of memory");
  p2pkit_status_t st = read_cfg(cfg, r.timeout_s);
  int count = 0;
  if (st == P2PKIT_SUCCESS) st = device_count(&count);
  if (st == P2PKIT_SUCCESS && r.device < 0) r.device = r.rank % count;
  if (st == P2PKIT_SUCCESS && r.device >= count)
    st = p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "rank %d: device %d does not exist (%d GPUs "
                   "visible)", r.rank, r.device, count);
  struct p2pkit_comm *c = st == P2PKIT_SUCCESS ? calloc(1, sizeof *c) : NULL;
  if (st == P2PKIT_SUCCESS && !c) st = p2pk_fail(P2PKIT_ERR_NO_MEMORY, "init_rank: out of memory");
  if (st != P2PKIT_SUCCESS) {
    free(cfg);
    return st;
  }
  c->rank = r.rank;
  c->nranks = r.nranks;
  c->device = r.device;
  c->multiproc = 1;
  c->nested = (flags & P2PK_INIT_NESTED) != 0;
  c->timeout_ns = (uint64_t)cfg->timeout_s * 1000000000ULL;
  c->buffer_bytes = cfg->buffer;
  int cur = -1;
  cudaGetDevice(&cur);
  char shm_name[P2PK_SHM_NAME] = "";
  st = cudaSetDevice(c->device) == cudaSuccess
           ? P2PKIT_SUCCESS
           : p2pk_fail(P2PKIT_ERR_CUDA, "rank %d: cannot use GPU %d", c->rank, c->device);
  if (st == P2PKIT_SUCCESS) st = p2pk_rank_boot(&r, cfg->timeout_s, listen_fd, &c->boot);
  if (st == P2PKIT_SUCCESS) st = init_rank_body(c, cfg, shm_name);
  free(cfg);
  if (shm_name[0]) p2pk_shm_unlink(shm_name);
  if (st != P2PKIT_SUCCESS) {
    comm_free(c);
    if (cur >= 0) cudaSetDevice(cur);
    return st;
  }
  if (cur >= 0) cudaSetDevice(cur);
  *comm_p = c;
  return P2PKIT_SUCCESS;
}

/* ------------------------------------------------------------ teardown ---- */

void p2pk_comm_release(struct p2pkit_comm *c) {
  if (!c->group) {
    comm_free(c);
    return;
  }
  p2pk_group *g = c->group;
  pthread_mutex_lock(&g->lock);
  const int last = --g->live == 0;
  pthread_mutex_unlock(&g->lock);
  if (last) group_free(g);
}

p2pkit_status_t p2pkit_comm_destroy(p2pkit_comm_t c) {
  if (!c) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "destroy: communicator is NULL");
  int cur = -1;
  cudaGetDevice(&cur);
  /* Our kernels end (at worst after the timeout) before memory goes. */
  p2pkit_status_t st = P2PKIT_SUCCESS;
  if (cudaSetDevice(c->device) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
    cudaError_t e = cudaGetLastError();
    st = p2pk_fail(P2PKIT_ERR_CUDA, "destroy: rank %d, GPU %d: %s", c->rank, c->device,
                   cudaGetErrorString(e));
  }
  if (c->group) {
    p2pk_group *g = c->group;
    pthread_mutex_lock(&g->lock);
    int last = --g->live == 0;
    pthread_mutex_unlock(&g->lock);
    /* Peers' kernels may still write here: the group frees all at once. */
    if (last) group_free(g);
  } else {
    /* Close my mappings of the peers' memory, then wait until every peer has
     * closed its mappings of mine before freeing it. A dead peer fails the
     * barrier at once (its socket is closed); everything is freed anyway. */
    p2pk_reg_free_all(c);
    for (int p = 0; p < c->nranks; p++)
      if (c->peer_ipc[p]) {
        cudaIpcCloseMemHandle(c->peer_ipc[p]);
        c->peer_ipc[p] = NULL;
      }
    p2pkit_status_t bs = p2pk_boot_barrier(c->boot, P2PK_TAG_DESTROY);
    if (st == P2PKIT_SUCCESS) st = bs;
    comm_free(c);
  }
  if (cur >= 0) cudaSetDevice(cur);
  return st;
}

int p2pkit_comm_rank(p2pkit_comm_t c) { return c ? c->rank : -1; }
int p2pkit_comm_size(p2pkit_comm_t c) { return c ? c->nranks : -1; }
int p2pkit_comm_device(p2pkit_comm_t c) { return c ? c->device : -1; }

p2pkit_status_t p2pkit_comm_set_max_blocks(p2pkit_comm_t c, int max_blocks) {
  if (!c) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "comm_set_max_blocks: communicator is NULL");
  if (max_blocks < 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "comm_set_max_blocks: rank %d: max_blocks %d is "
                     "negative (0: no cap)", c->rank, max_blocks);
  /* Calls deferred in an open group launch at its end, with the cap then. */
  if (p2pk_group_open())
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "comm_set_max_blocks: rank %d: called inside a "
                     "group; set it before p2pkit_group_start or after p2pkit_group_end", c->rank);
  c->sel.max_blocks = max_blocks > P2PK_COLL_MAX_BLOCKS ? P2PK_COLL_MAX_BLOCKS : max_blocks;
  P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): collective kernels take at most %d blocks%s", c->rank,
            c->device, c->sel.max_blocks, c->sel.max_blocks ? "" : " (0: no cap)");
  return P2PKIT_SUCCESS;
}

int p2pkit_comm_max_blocks(p2pkit_comm_t c) { return c ? c->sel.max_blocks : -1; }

void p2pk_comm_set_force(struct p2pkit_comm *c, const p2pk_algo_force *f) {
  if (c && f) {
    c->sel.force = *f;
    p2pk_sel_fill(&c->sel, c->lay.cep_slot != 0, c->lay.stage_ce_slot != 0);
  }
}

void p2pk_comm_explain(const struct p2pkit_comm *c, const char *kind, const size_t *bytes, int n,
                       int capture, FILE *f) {
  p2pk_sel_explain(&c->sel, f);
  const int k = kind ? p2pk_kind_parse(kind) : -1;
  if (k < 0) return;
  fprintf(f, "decisions for %s, %s (bytes: one rank's share):\n", p2pk_kind_name(k),
          capture ? "under capture" : "eager");
  fprintf(f, "  %12s  %-46s  %-46s  %-46s  %s\n", "bytes", "alone", "in a group", "alone, in place",
          "in a group, in place");
  for (int i = 0; i < n; i++) {
    fprintf(f, "  %12zu", bytes[i]);
    for (int j = 0; j < 4; j++) {
      p2pk_sel_key key = {.kind = k, .capture = capture, .grouped = j & 1,
                          .in_place = k != P2PK_SENDRECV && (j & 2), .bytes = bytes[i]};
      p2pk_decision d;
      char t[96];
      p2pk_select(&c->sel, &key, &d);
      p2pk_decision_text(&d, t, sizeof t);
      char cell[112];
      snprintf(cell, sizeof cell, "%s (%d)", t, d.rule + 1);
      fprintf(f, j < 3 ? "  %-46s" : "  %s\n", cell);
    }
  }
  fprintf(f, "(n): the rule that decided, numbered as above\n");
}

void p2pk_comm_choose(const struct p2pkit_comm *c, size_t bytes, p2pk_algo_choice *out) {
  p2pk_sel_choose(&c->sel, P2PK_COLL_ALL_REDUCE, bytes, p2pk_sel_cap(&c->sel, 0), out);
}

int p2pk_comm_half_grid(const struct p2pkit_comm *c) {
  const int h = (c->sel.geom.sm_count / 2) & ~7;
  return h < 8 ? 8 : h;
}

