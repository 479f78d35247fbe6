/* SPDX-License-Identifier: BSD-3-Clause */
/* A communicator of one process per GPU (p2pkit_comm_init_rank and every
 * way to one: comm_init.c): its rank, count, GPU, address and secret from
 * the options or the launcher's environment; the rendezvous; what every
 * rank says of itself, all-gathered: the settings every rank must share
 * (refused in one line when one differs), its host and NCCL, its GPU;
 * then the transport every pair can take, the layout, the memory, the
 * scratch's IPC handles and the shared segments, the paths' states. A
 * communicator spanning hosts stops after its selector (comm_init.c makes
 * its host's communicator and its paths). */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "coll/call/trace.h"
#include "coll/comm/comm.h"
#include "coll/coll.h"
#include "coll/paths/ce/dmbox.h" /* the send/recv rings this file shares among the ranks */
#include "core/check.h"
#include "core/log.h"
#include "core/param.h"
#include "topo/topo.h"

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

/* The settings every rank must share, as rank_info's fields, in the order
 * a refusal names the first that differs. */
#define FIELD(f, what) {offsetof(rank_info, f), sizeof(((rank_info *)0)->f), what}
static const struct {
  size_t off, size;
  const char *what;
} shared[] = {
    FIELD(buffer, "P2PKIT_BUFFER_SIZE"),
    FIELD(table_hash, "the algorithm table (P2PKIT_ALGO_TABLE)"),
    FIELD(algo, "P2PKIT_ALGO"),
    FIELD(proto, "P2PKIT_PROTO"),
    FIELD(blocks, "P2PKIT_COLL_BLOCKS"),
    FIELD(threads, "P2PKIT_COLL_THREADS"),
    FIELD(max_blocks, "P2PKIT_MAX_BLOCKS"),
    FIELD(chunk, "P2PKIT_COLL_CHUNK"),
    FIELD(boxes, "P2PKIT_COLL_MAILBOXES"),
    FIELD(share_gpus, "P2PKIT_SHARE_GPUS"),
    FIELD(hi.nccl_setting, "P2PKIT_NCCL"),
    FIELD(queues, "CUDA_DEVICE_MAX_CONNECTIONS (the copy engines' paths depend on it)"),
    FIELD(ce_min, "P2PKIT_STAGED_CE_MIN"),
    FIELD(ce_slot, "P2PKIT_STAGED_CE_CHUNK"),
    FIELD(ce_depth, "P2PKIT_STAGED_CE_DEPTH"),
    FIELD(cep_slot, "P2PKIT_CE_CHUNK"),
    FIELD(cep_depth, "P2PKIT_CE_DEPTH"),
    FIELD(rooted_min, "P2PKIT_ROOTED_TWOSHOT_MIN"),
    FIELD(cep_mins, "the copy-engine thresholds (P2PKIT_CE_*_MIN, P2PKIT_BCAST_CE_MIN, "
                    "P2PKIT_SENDRECV_CE_MIN)"),
};
#undef FIELD

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
    const char *what = NULL;
    for (size_t i = 0; i < sizeof shared / sizeof shared[0] && !what; i++)
      if (memcmp((const char *)o + shared[i].off, (const char *)me + shared[i].off, shared[i].size))
        what = shared[i].what;
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
 * the selector, the error words. */
static p2pkit_status_t span_setup(struct p2pkit_comm *c, const coll_cfg *cfg, int sms) {
  P2PK_CHECK(p2pk_comm_derive(c, sms, cfg->buffer, &cfg->table, &cfg->force));
  c->sel.max_blocks = cfg->max_blocks;
  /* The hierarchical path divides an average once, in NCCL's
   * pre-multiplied sum (NCCL 2.11 and later): else NCCL over every rank. */
  const p2pk_nccl_api *api = NULL;
  c->sel.premul = c->nccl_mode != P2PK_NCCL_OFF && p2pk_nccl_shared(&api, NULL, 0) == P2PKIT_SUCCESS &&
                  api->RedOpCreatePreMulSum != NULL;
  P2PK_CHECK(p2pk_comm_alloc_err(c));
  return p2pk_ce_init(c); /* its paths' states: comm_init.c, once the host's communicator exists */
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
  P2PK_CHECK(p2pk_comm_sm_count(c->device, &mine->sm_count));
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
  if (p2pk_comm_wants_topology(cfg) && p2pkit_topo_discover(&topo) != P2PKIT_SUCCESS) topo = NULL;
  int32_t *row = &rows[(size_t)c->rank * n];
  for (int p = 0; p < n; p++)
    row[p] = p == c->rank ? 1
                          : p2pk_comm_pair_p2p(cfg, topo, c->device, all[c->rank].busid, all[p].busid,
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
  p2pk_comm_ll128_occupancy(c);
  P2PK_CHECK(p2pk_comm_alloc(c));
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
  p2pk_comm_fill_tmpl(c, stage_dev);
  P2PK_CHECK(p2pk_comm_paths_init(c));
  p2pk_comm_log(c, labels, devs);
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
  p2pkit_status_t st = p2pk_comm_read_cfg(cfg, r.timeout_s);
  int count = 0;
  if (st == P2PKIT_SUCCESS) st = p2pk_comm_device_count(&count);
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
    p2pk_comm_free(c);
    if (cur >= 0) cudaSetDevice(cur);
    return st;
  }
  if (cur >= 0) cudaSetDevice(cur);
  *comm_p = c;
  return P2PKIT_SUCCESS;
}

