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

#include "coll/coll.h"
#include "coll/ipc.h"
#include "coll/plan.h"
#include "core/check.h"
#include "core/log.h"
#include "core/param.h"
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
} coll_cfg;

static p2pkit_status_t read_cfg(coll_cfg *cfg, int timeout_s) {
  memset(cfg, 0, sizeof *cfg);
  /* Every P2PKIT_* value parses, or the communicator is refused: a typo in
   * P2PKIT_P2P_DISABLE must not quietly leave P2P on. */
  P2PK_CHECK(p2pk_param_check());
  p2pk_param_warn_unknown();
  cfg->buffer = p2pk_param_size("P2PKIT_BUFFER_SIZE");
  if (timeout_s <= 0) timeout_s = (int)p2pk_param_int("P2PKIT_TIMEOUT");
  if (timeout_s <= 0 || timeout_s > 86400)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "timeout %d s: expected 1..86400 (P2PKIT_TIMEOUT)",
                     timeout_s);
  cfg->timeout_s = timeout_s;
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
  P2PK_CUDA_CHECK(cudaHostAlloc((void **)&c->host_err, 64, cudaHostAllocMapped | cudaHostAllocPortable));
  memset(c->host_err, 0, 64);
  P2PK_CUDA_CHECK(cudaHostGetDevicePointer((void **)&c->tmpl.host_err, c->host_err, 0));
  /* The landing-slot path's streams and events now: a call being captured
   * must not create them. */
  if (c->lay.cep_slot) P2PK_CUDA_CHECK(p2pk_cep_prepare(c));
  return P2PKIT_SUCCESS;
}

/* Frees what this rank owns (the group's shared region is the group's). */
static void comm_free(struct p2pkit_comm *c) {
  if (!c) return;
  p2pk_worker_stop(c);
  int cur = -1;
  cudaGetDevice(&cur);
  cudaSetDevice(c->device);
  p2pk_reg_free_all(c);
  p2pk_map_free(c);
  for (int p = 0; p < c->nranks; p++)
    if (c->peer_ipc[p]) cudaIpcCloseMemHandle(c->peer_ipc[p]);
  if (c->scratch) cudaFree(c->scratch);
  if (c->host_err) cudaFreeHost(c->host_err);
  if (c->ce_side) cudaStreamDestroy(c->ce_side);
  for (int i = 0; i < 3; i++)
    if (c->ce_ev[i]) cudaEventDestroy(c->ce_ev[i]);
  if (c->sce_h2d) cudaStreamDestroy(c->sce_h2d);
  for (int i = 0; i < P2PK_SCE_EVENTS; i++)
    if (c->sce_ev[i]) cudaEventDestroy(c->sce_ev[i]);
  if (c->sce_buf) cudaFree(c->sce_buf);
  for (int i = 0; i < P2PK_CEP_STREAMS; i++)
    if (c->cep_stream[i]) cudaStreamDestroy(c->cep_stream[i]);
  for (int i = 0; i < P2PK_CEP_EVKINDS; i++)
    for (int s = 0; s < P2PK_SCE_DEPTH_MAX; s++)
      if (c->cep_ev[i][s]) cudaEventDestroy(c->cep_ev[i][s]);
  for (int i = 0; i < P2PK_CEP_TRACE_MAX; i++)
    if (c->cep_tr_ev[i]) cudaEventDestroy(c->cep_tr_ev[i]);
  if (c->stage_registered) cudaHostUnregister(c->stage);
  if (c->stage && c->multiproc) munmap(c->stage, c->stage_bytes);
  if (c->dmb) munmap(c->dmb, c->dmb_bytes);
  p2pk_boot_destroy(c->boot);
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
  /* All-reduce: every peer both ways, reduced (p2pk_coll_launch sets these
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
  c->logged = 0;
}

static void log_comm(const struct p2pkit_comm *c, char labels[][64], const int *devs) {
  if (!p2pk_log_enabled(P2PK_LEVEL_INFO, P2PK_LOG_COLL)) return;
  int tr = c->staged ? P2PK_TRANSPORT_SHM : P2PK_TRANSPORT_P2P;
  char plan[512] = "";
  size_t used = 0;
  for (int i = 0; i < c->table.nrows && used < sizeof plan - 64; i++) {
    const p2pk_algo_row *r = &c->table.rows[i];
    if (r->transport != tr || c->nranks < r->min_ranks || c->nranks > r->max_ranks) continue;
    char lim[32];
    if (r->max_bytes == SIZE_MAX) snprintf(lim, sizeof lim, "above");
    else snprintf(lim, sizeof lim, "<=%zu B", r->max_bytes);
    used += (size_t)snprintf(plan + used, sizeof plan - used, "%s%s %s/%s", used ? ", " : "", lim,
                             p2pk_algo_name(r->algo), p2pk_proto_name(r->proto));
  }
  const p2pk_algo_force *f = &c->force;
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
              tlabel, c->table.source, plan,
              f->algo >= 0 ? "; forced algorithm " : "", f->algo >= 0 ? p2pk_algo_name(f->algo) : "",
              f->proto >= 0 ? "; forced protocol " : "", f->proto >= 0 ? p2pk_proto_name(f->proto) : "",
              c->geom.ll_cap, (unsigned long long)(c->staged ? c->lay.stage_mailbox : c->lay.mailbox));
  }
}

static void set_geom(struct p2pkit_comm *c, int sm_count, size_t ll_cap) {
  c->geom.nranks = c->nranks;
  c->geom.staged = c->staged;
  c->geom.sm_count = sm_count;
  c->geom.ll_cap = ll_cap;
  c->geom.ll128_cap = c->lay.ll128_bytes / P2PK_LL128_LINE * P2PK_LL128_DATA;
  c->geom.ll128_x2 = p2pk_param_int("P2PKIT_LL128_X2") != 0;
  c->geom.mailbox = c->lay.mailbox;
  c->geom.mailboxes = (int)c->lay.nboxes;
  c->geom.stage_mailbox = c->lay.stage_mailbox;
}

/* LL128's occupancy per thread count, from CUDA (the GPU current). */
static void set_ll128_occupancy(struct p2pkit_comm *c) {
  if (c->geom.ll128_cap)
    for (int t = 2; t < P2PK_ALGO_THREAD_STEPS; t++) c->geom.ll128_per_sm[t] = p2pk_ll128_per_sm(32 * t);
}

p2pkit_status_t p2pk_comm_derive(struct p2pkit_comm *c, int sms, size_t buffer) {
  const int n = c->nranks;
  size_t ll_cap = 0;
  P2PK_CHECK(p2pk_layout_compute(n, buffer, c->staged, p2pk_mailboxes_for(sms), &c->lay, &ll_cap));
  c->sce_depth = p2pk_sce_depth();
  if (c->staged) {
    /* Process per GPU: each part of the host region ends with the
     * copy-engine slots (ce_staged.c), apart from the staged kernels'
     * mailboxes; one process keeps its own device buffers. */
    if (c->multiproc) p2pk_layout_add_ce(&c->lay, c->sce_depth, p2pk_sce_slot_bytes());
  } else {
    /* The scratch ends with landing slots (ce_p2p_mp.c) when any of their
     * thresholds is on: every rank the same settings, decided once. */
    const int cep = p2pk_cep_wanted(c);
    const int depth = cep ? p2pk_cep_depth() : 0;
    p2pk_layout_add_cep(&c->lay, n, depth, p2pk_cep_slot_bytes(n, depth, cep));
  }
  p2pk_ce_min_fill(c);
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

static p2pkit_status_t init_all_locked(p2pk_group *g, const int *devs, const coll_cfg *cfg) {
  const int n = g->n;
  p2pkit_topo_t topo = NULL;
  if (want_topology(cfg) && p2pkit_topo_discover(&topo) != P2PKIT_SUCCESS) topo = NULL;
  char busid[P2PK_COLL_MAX_RANKS][32];
  for (int i = 0; i < n; i++)
    if (cudaDeviceGetPCIBusId(busid[i], sizeof busid[i], devs[i]) != cudaSuccess) {
      cudaGetLastError();
      snprintf(busid[i], sizeof busid[i], "?%d", devs[i]);
    }
  char labels[P2PK_COLL_MAX_RANKS][P2PK_COLL_MAX_RANKS][64];
  int staged = cfg->force.algo == P2PK_ALGO_STAGED;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      if (i != j && !pair_p2p(cfg, topo, devs[i], busid[i], busid[j], labels[i][j], 64)) staged = 1;
  p2pkit_topo_destroy(topo);
  if (!staged)
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++)
        if (i != j) P2PK_CHECK(enable_peer(devs[i], devs[j]));
  int sms = 1 << 30;
  for (int i = 0; i < n; i++) {
    int s = 0;
    P2PK_CHECK(sm_count_of(devs[i], &s));
    if (s < sms) sms = s;
  }
  for (int i = 0; i < n; i++) {
    struct p2pkit_comm *c = calloc(1, sizeof *c);
    if (!c) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory for communicator %d", i);
    g->comms[i] = c;
    c->rank = i;
    c->nranks = n;
    c->device = devs[i];
    c->staged = staged;
    c->group = g;
    c->timeout_ns = (uint64_t)cfg->timeout_s * 1000000000ULL;
    c->buffer_bytes = cfg->buffer;
    c->table = cfg->table;
    c->force = cfg->force;
    c->max_blocks = cfg->max_blocks;
    c->launch_threads = p2pk_param_int("P2PKIT_LAUNCH_THREADS") != 0;
    /* Over P2P the scratch ends with landing slots for the calls captured
     * in graphs (ce_p2p_mp.c), when any of them is on. */
    P2PK_CHECK(p2pk_comm_derive(c, sms, cfg->buffer));
    p2pk_cep_settings(c);
    P2PK_CUDA_CHECK(cudaSetDevice(devs[i]));
    /* Every rank makes the same choices (the header checks the grid): one
     * geometry, the occupancy queries made once, on the first GPU. */
    if (i == 0) set_ll128_occupancy(c);
    else c->geom = g->comms[0]->geom;
    P2PK_CHECK(comm_alloc(c));
  }
  if (staged && n > 1) {
    size_t bytes = g->comms[0]->lay.stage_stride * (size_t)n;
    cudaError_t e = cudaHostAlloc((void **)&g->stage, bytes, cudaHostAllocPortable | cudaHostAllocMapped);
    if (e != cudaSuccess) {
      cudaGetLastError();
      g->stage = NULL;
      return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "pinning %zu bytes of host memory for staging: %s",
                       bytes, cudaGetErrorString(e));
    }
    memset(g->stage, 0, bytes);
  }
  for (int i = 0; i < n; i++) {
    struct p2pkit_comm *c = g->comms[i];
    for (int p = 0; p < n; p++) c->peer[p] = g->comms[p]->scratch;
    char *stage_dev = NULL;
    if (g->stage) {
      P2PK_CUDA_CHECK(cudaSetDevice(devs[i]));
      P2PK_CUDA_CHECK(cudaHostGetDevicePointer((void **)&stage_dev, g->stage, 0));
      c->stage = g->stage;
      c->stage_bytes = c->lay.stage_stride * (size_t)n;
    }
    fill_tmpl(c, stage_dev);
  }
  for (int i = 0; i < n; i++) {
    P2PK_CUDA_CHECK(cudaSetDevice(devs[i]));
    P2PK_CUDA_CHECK(cudaDeviceSynchronize());
  }
  for (int i = 0; i < n; i++) log_comm(g->comms[i], labels[i], devs);
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pkit_comm_init_all(p2pkit_comm_t *comms, int ndev, const int *devs_in) {
  if (!comms) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "init_all: comms is NULL");
  if (ndev < 1 || ndev > P2PK_COLL_MAX_RANKS)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "init_all: %d GPUs; expected 1..%d", ndev,
                     P2PK_COLL_MAX_RANKS);
  int count = 0;
  P2PK_CHECK(device_count(&count));
  int devs[P2PK_COLL_MAX_RANKS];
  for (int i = 0; i < ndev; i++) {
    devs[i] = devs_in ? devs_in[i] : i;
    if (devs[i] < 0 || devs[i] >= count)
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "init_all: device %d does not exist (%d GPUs)",
                       devs[i], count);
    for (int j = 0; j < i; j++)
      if (devs[j] == devs[i])
        return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "init_all: GPU %d is listed twice", devs[i]);
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
  p2pkit_status_t st = read_cfg(cfg, -1);
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

static int env_int(const char *name, int *out) {
  const char *v = getenv(name);
  if (!v || !*v) return 0;
  char *end = NULL;
  long x = strtol(v, &end, 10);
  if (*end || x < 0 || x > 1000000) return 0;
  *out = (int)x;
  return 1;
}

p2pkit_status_t p2pk_resolve_opts(const p2pkit_comm_opts_t *o, p2pk_rank_opts *r) {
  int v = -1;
  int env_size = -1, env_rank = -1;
  if (env_int("WORLD_SIZE", &v) || env_int("OMPI_COMM_WORLD_SIZE", &v)) env_size = v;
  if (env_int("RANK", &v) || env_int("OMPI_COMM_WORLD_RANK", &v)) env_rank = v;
  r->nranks = o->nranks >= 0 ? o->nranks : env_size;
  r->rank = o->rank >= 0 ? o->rank : env_rank;
  if (r->nranks < 0 || r->rank < 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT,
                     "rank and rank count unknown: set them in p2pkit_comm_opts_t or start under "
                     "a launcher (RANK/WORLD_SIZE or OMPI_COMM_WORLD_RANK/_SIZE)");
  if (o->nranks >= 0 && env_size >= 0 && o->nranks != env_size)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT,
                     "opts.nranks=%d but the launcher says the job has %d ranks", o->nranks, env_size);
  if (o->rank >= 0 && env_rank >= 0 && o->rank != env_rank)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "opts.rank=%d but the launcher says rank %d",
                     o->rank, env_rank);
  if (r->nranks < 1 || r->nranks > P2PK_COLL_MAX_RANKS || r->rank >= r->nranks)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "rank %d of %d: expected 0 <= rank < ranks <= %d",
                     r->rank, r->nranks, P2PK_COLL_MAX_RANKS);
  r->device = o->device;
  if (r->device < 0 && !env_int("LOCAL_RANK", &r->device) &&
      !env_int("OMPI_COMM_WORLD_LOCAL_RANK", &r->device))
    r->device = -1;
  const char *master = getenv("MASTER_ADDR");
  r->addr = o->addr ? o->addr : master && *master ? master : "127.0.0.1";
  r->port = o->port;
  if (r->port <= 0 && !env_int("MASTER_PORT", &r->port)) r->port = 29500;
  r->secret = o->secret;
  const char *from[] = {"TORCHELASTIC_RUN_ID", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"};
  if (!r->secret && p2pk_param_str("P2PKIT_JOB_SECRET")[0]) r->secret = p2pk_param_str("P2PKIT_JOB_SECRET");
  for (size_t i = 0; !r->secret && i < sizeof from / sizeof from[0]; i++) {
    const char *id = getenv(from[i]);
    if (id && *id) r->secret = id;
  }
  if (!r->secret) {
    r->secret = "";
    if (r->nranks > 1)
      P2PK_WARN("no job secret (P2PKIT_JOB_SECRET, TORCHELASTIC_RUN_ID): any process of this "
                "user (or of another host) that knows %s:%d can join this rendezvous", r->addr,
                r->port);
  }
  r->timeout_s = o->timeout_s;
  return P2PKIT_SUCCESS;
}

typedef struct {
  int32_t rank, device, sm_count, pid;
  char busid[32];
  char host[64];
  uint64_t buffer, table_hash, chunk, ce_min, ce_slot, ce_depth;
  uint64_t cep_slot, cep_depth, cep_mins; /* copy engines over P2P (ce_p2p_mp.c) */
  uint64_t rooted_min; /* P2PKIT_ROOTED_TWOSHOT_MIN: broadcast's and reduce's form by size */
  int32_t algo, proto, blocks, threads, boxes, max_blocks;
  int32_t share_gpus; /* P2PKIT_SHARE_GPUS: ranks may share a GPU (tests) */
  int32_t queues;     /* CUDA_DEVICE_MAX_CONNECTIONS as CUDA reads it (p2pk_ce_queues) */
} rank_info;

static p2pkit_status_t check_infos(const struct p2pkit_comm *c, const rank_info *all) {
  const rank_info *me = &all[c->rank];
  int shares = -1; /* the first rank on this rank's GPU (P2PKIT_SHARE_GPUS) */
  for (int r = 0; r < c->nranks; r++) {
    const rank_info *o = &all[r];
    if (strcmp(o->host, me->host) != 0)
      return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "rank %d runs on host %s and rank %d on %s: a "
                       "communicator spans one machine", r, o->host, c->rank, me->host);
    if (r != c->rank && strcasecmp(o->busid, me->busid) == 0) {
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

typedef struct {
  cudaIpcMemHandle_t scratch;
  char shm[P2PK_SHM_NAME];
} handles_t;

static p2pkit_status_t init_rank_body(struct p2pkit_comm *c, const coll_cfg *cfg, char *shm_name) {
  const int n = c->nranks;
  rank_info *all = calloc((size_t)n, sizeof *all);
  handles_t *hs = calloc((size_t)n, sizeof *hs);
  int32_t *rows = calloc((size_t)n * n, sizeof *rows);
  char (*labels)[64] = calloc((size_t)n, 64);
  int *devs = calloc((size_t)n, sizeof *devs);
  p2pkit_status_t st = P2PKIT_SUCCESS;
  p2pkit_topo_t topo = NULL;
  if (!all || !hs || !rows || !labels || !devs) {
    st = p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory");
    goto out;
  }
  rank_info mine;
  memset(&mine, 0, sizeof mine);
  mine.rank = c->rank;
  mine.device = c->device;
  mine.pid = (int32_t)getpid();
  P2PK_CHECK_GOTO(sm_count_of(c->device, &mine.sm_count), st, out);
  P2PK_CUDA_CHECK_GOTO(cudaDeviceGetPCIBusId(mine.busid, sizeof mine.busid, c->device), st, out);
  gethostname(mine.host, sizeof mine.host - 1);
  mine.buffer = cfg->buffer;
  mine.table_hash = p2pk_algo_table_hash(&cfg->table);
  mine.algo = cfg->force.algo;
  mine.proto = cfg->force.proto;
  mine.blocks = cfg->force.blocks;
  mine.threads = cfg->force.threads;
  mine.max_blocks = cfg->max_blocks;
  mine.chunk = cfg->force.chunk;
  mine.boxes = (int32_t)p2pk_param_int("P2PKIT_COLL_MAILBOXES");
  mine.share_gpus = p2pk_param_int("P2PKIT_SHARE_GPUS") != 0;
  mine.queues = p2pk_ce_queues();
  mine.ce_min = p2pk_param_size("P2PKIT_STAGED_CE_MIN");
  mine.ce_slot = p2pk_sce_slot_bytes();
  mine.ce_depth = (uint64_t)p2pk_sce_depth();
  /* Copy engines over P2P: decided with the settings as if P2P held
   * (c->staged is still 0); dropped below if it does not. */
  const int cep = p2pk_cep_wanted(c);
  mine.cep_depth = cep ? (uint64_t)p2pk_cep_depth() : 0;
  mine.cep_slot = p2pk_cep_slot_bytes(n, (int)mine.cep_depth, cep);
  mine.rooted_min = p2pk_param_size("P2PKIT_ROOTED_TWOSHOT_MIN");
  mine.cep_mins = p2pk_cep_p2p_min(c);
  for (int k = 0; k < P2PK_COLL_KINDS; k++)
    mine.cep_mins = mine.cep_mins * 1000003ULL + p2pk_ce_min_setting(c, k);
  P2PK_CHECK_GOTO(p2pk_boot_allgather(c->boot, P2PK_TAG_INFO, &mine, all, sizeof mine), st, out);
  P2PK_CHECK_GOTO(check_infos(c, all), st, out);
  int sms = 1 << 30;
  for (int r = 0; r < n; r++) {
    devs[r] = all[r].device;
    if (all[r].sm_count < sms) sms = all[r].sm_count;
  }
  /* Every rank judges its own pairs; P2P only if every pair has it. */
  if (want_topology(cfg) && p2pkit_topo_discover(&topo) != P2PKIT_SUCCESS) topo = NULL;
  int32_t *row = &rows[(size_t)c->rank * n];
  for (int p = 0; p < n; p++)
    row[p] = p == c->rank ? 1 : pair_p2p(cfg, topo, c->device, mine.busid, all[p].busid, labels[p], 64);
  P2PK_CHECK_GOTO(p2pk_boot_allgather(c->boot, P2PK_TAG_P2P, row, rows, (size_t)n * sizeof *rows), st, out);
  c->staged = cfg->force.algo == P2PK_ALGO_STAGED;
  for (int i = 0; i < n * n; i++)
    if (!rows[i]) c->staged = 1;
  /* The layout from the settings every rank shares (checked above). */
  P2PK_CHECK_GOTO(p2pk_comm_derive(c, sms, cfg->buffer), st, out);
  p2pk_cep_settings(c);
  set_ll128_occupancy(c);
  P2PK_CHECK_GOTO(comm_alloc(c), st, out);
  handles_t h;
  memset(&h, 0, sizeof h);
  if (!c->staged) P2PK_CUDA_CHECK_GOTO(cudaIpcGetMemHandle(&h.scratch, c->scratch), st, out);
  c->stage_bytes = c->staged ? c->lay.stage_stride * (size_t)n : 0;
  if (c->staged && c->rank == 0) {
    P2PK_CHECK_GOTO(p2pk_shm_create(c->stage_bytes, shm_name, (void **)&c->stage), st, out);
    snprintf(h.shm, sizeof h.shm, "%s", shm_name);
  }
  /* Over P2P: the receivers' descriptions for send/recv straight into
   * registered buffers (dmbox.h), in host memory shared the same way. */
  c->dmb_bytes = c->staged ? 0 : p2pk_dmb_bytes(n);
  if (c->dmb_bytes && c->rank == 0) {
    P2PK_CHECK_GOTO(p2pk_shm_create(c->dmb_bytes, shm_name, &c->dmb), st, out);
    memset(c->dmb, 0, c->dmb_bytes);
    snprintf(h.shm, sizeof h.shm, "%s", shm_name);
  }
  P2PK_CHECK_GOTO(p2pk_boot_allgather(c->boot, P2PK_TAG_HANDLES, &h, hs, sizeof h), st, out);
  if (c->dmb_bytes && c->rank != 0)
    P2PK_CHECK_GOTO(p2pk_shm_attach(hs[0].shm, c->dmb_bytes, &c->dmb), st, out);
  char *stage_dev = NULL;
  if (c->staged) {
    if (c->rank != 0)
      P2PK_CHECK_GOTO(p2pk_shm_attach(hs[0].shm, c->stage_bytes, (void **)&c->stage), st, out);
    P2PK_CUDA_CHECK_GOTO(cudaHostRegister(c->stage, c->stage_bytes,
                                          cudaHostRegisterMapped | cudaHostRegisterPortable), st, out);
    c->stage_registered = 1;
    P2PK_CUDA_CHECK_GOTO(cudaHostGetDevicePointer((void **)&stage_dev, c->stage, 0), st, out);
  } else {
    for (int p = 0; p < n; p++) {
      if (p == c->rank) {
        c->peer[p] = c->scratch;
        continue;
      }
      void *ptr = NULL;
      cudaError_t e = cudaIpcOpenMemHandle(&ptr, hs[p].scratch, cudaIpcMemLazyEnablePeerAccess);
      if (e != cudaSuccess) {
        cudaGetLastError();
        st = p2pk_fail(P2PKIT_ERR_CUDA, "rank %d (GPU %d) cannot map rank %d's memory (GPU %s) "
                       "through CUDA IPC: %s", c->rank, c->device, p, all[p].busid,
                       cudaGetErrorString(e));
        goto out;
      }
      c->peer_ipc[p] = ptr;
      c->peer[p] = ptr;
    }
  }
  P2PK_CUDA_CHECK_GOTO(cudaDeviceSynchronize(), st, out);
  /* Everyone has mapped everything: the shared-memory name can go. */
  P2PK_CHECK_GOTO(p2pk_boot_barrier(c->boot, P2PK_TAG_MAPPED), st, out);
  if (c->rank == 0 && shm_name[0]) {
    p2pk_shm_unlink(shm_name);
    shm_name[0] = '\0';
  }
  fill_tmpl(c, stage_dev);
  log_comm(c, labels, devs);
out:
  p2pkit_topo_destroy(topo);
  free(all);
  free(hs);
  free(rows);
  free(labels);
  free(devs);
  return st;
}

p2pkit_status_t p2pkit_comm_init_rank(const p2pkit_comm_opts_t *opts, p2pkit_comm_t *comm_p) {
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
  c->timeout_ns = (uint64_t)cfg->timeout_s * 1000000000ULL;
  c->buffer_bytes = cfg->buffer;
  c->table = cfg->table;
  c->force = cfg->force;
  c->max_blocks = cfg->max_blocks;
  int cur = -1;
  cudaGetDevice(&cur);
  char shm_name[P2PK_SHM_NAME] = "";
  st = cudaSetDevice(c->device) == cudaSuccess
           ? P2PKIT_SUCCESS
           : p2pk_fail(P2PKIT_ERR_CUDA, "rank %d: cannot use GPU %d", c->rank, c->device);
  if (st == P2PKIT_SUCCESS) {
    p2pk_boot_opts bo = {r.rank, r.nranks, r.addr, r.port, r.secret, cfg->timeout_s * 1000};
    st = p2pk_boot_init(&bo, &c->boot);
  }
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
  if (st == P2PKIT_SUCCESS && c->cep_trace) p2pk_cep_trace_flush(c);
  if (c->dmb_direct || c->dmb_rhow[1] || c->dmb_missed)
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): send/recv over the copy engines: %llu sends "
              "straight in (%llu into buffers mapped on demand, %d peer allocations mapped), %llu "
              "through the slots; %llu receives into registered (or shared) buffers straight "
              "in, %llu through the slots; host waits for peers: %.3f ms in all, the longest "
              "%.3f ms, %llu in vain; sends through the slots as not asked %llu, late %llu, "
              "overwritten %llu, not registered %llu, sizes differ %llu, not mapped %llu, the "
              "receiver chose first %llu", c->rank, c->device, (unsigned long long)c->dmb_direct,
              (unsigned long long)c->dmb_mapped, p2pk_map_count(c), (unsigned long long)c->dmb_slots,
              (unsigned long long)c->dmb_rhow[1], (unsigned long long)c->dmb_rhow[0],
              c->dmb_wait_ns_sum / 1e6, c->dmb_wait_max_ns / 1e6,
              (unsigned long long)c->dmb_missed, (unsigned long long)c->dmb_why[0],
              (unsigned long long)c->dmb_why[1], (unsigned long long)c->dmb_why[2],
              (unsigned long long)c->dmb_why[3], (unsigned long long)c->dmb_why[4],
              (unsigned long long)c->dmb_why[5], (unsigned long long)c->dmb_why[6]);
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
  c->max_blocks = max_blocks > P2PK_COLL_MAX_BLOCKS ? P2PK_COLL_MAX_BLOCKS : max_blocks;
  P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): collective kernels take at most %d blocks%s", c->rank,
            c->device, c->max_blocks, c->max_blocks ? "" : " (0: no cap)");
  return P2PKIT_SUCCESS;
}

int p2pkit_comm_max_blocks(p2pkit_comm_t c) { return c ? c->max_blocks : -1; }

void p2pk_comm_set_force(struct p2pkit_comm *c, const p2pk_algo_force *f) {
  if (c && f) {
    c->force = *f;
    p2pk_ce_min_fill(c);
  }
}

void p2pk_comm_choose(const struct p2pkit_comm *c, size_t bytes, p2pk_algo_choice *out) {
  p2pk_coll_choose(c, P2PK_COLL_ALL_REDUCE, bytes, out);
}

