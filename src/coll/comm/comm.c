/* SPDX-License-Identifier: BSD-3-Clause */
/* What every communicator is made of and how it goes, whichever way it was
 * made (one process driving several GPUs: comm_all.c; a process per GPU:
 * comm_rank.c): the settings read and checked, whether a pair may use P2P,
 * one rank's memory (each rank owns one device scratch allocation: control
 * words, mailbox counters, LL slots, mailboxes, which every peer maps once;
 * the kernels' error words), the kernels' argument template, the selector
 * with its layout and geometry, the paths' states, the INFO log of it all;
 * then the teardown and the accessors. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include "coll/comm/comm.h"
#include "coll/kernels/plan.h"
#include "coll/call/trace.h"
#include "core/check.h"
#include "core/log.h"
#include "core/param.h"
#include "nccl/dtype.h"
#include "topo/topo.h"
#include "xfer/xfer.h"

/* ----------------------------------------------------------- config ---- */

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
p2pkit_status_t p2pk_comm_read_cfg(coll_cfg *cfg, int timeout_s) {
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

int p2pk_comm_wants_topology(const coll_cfg *cfg) {
  return cfg->level != P2PK_PL_ANY || p2pk_log_enabled(P2PK_LEVEL_INFO, P2PK_LOG_COLL);
}

/* Whether `dev` (this process's ordinal) may use P2P with the GPU at
 * `peer_busid`, with the reason when not and the link's label. */
int p2pk_comm_pair_p2p(const coll_cfg *cfg, p2pkit_topo_t topo, int dev, const char *busid,
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

/* -------------------------------------------------- one rank's memory ---- */

/* The kernels' error words (host memory the GPU writes). */
p2pkit_status_t p2pk_comm_alloc_err(struct p2pkit_comm *c) {
  P2PK_CUDA_CHECK(cudaHostAlloc((void **)&c->host_err, 64, cudaHostAllocMapped | cudaHostAllocPortable));
  memset(c->host_err, 0, 64);
  P2PK_CUDA_CHECK(cudaHostGetDevicePointer((void **)&c->tmpl.host_err, c->host_err, 0));
  return P2PKIT_SUCCESS;
}

/* Scratch and error words of one rank; the current device is its GPU. */
p2pkit_status_t p2pk_comm_alloc(struct p2pkit_comm *c) {
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
  P2PK_CHECK(p2pk_comm_alloc_err(c));
  return p2pk_ce_init(c);
}

/* Every path's state, once the scratch, the peers' mappings and the
 * kernel template exist (c's GPU current). */
p2pkit_status_t p2pk_comm_paths_init(struct p2pkit_comm *c) {
  for (int i = 0; i < P2PK_PATHS; i++)
    if (p2pk_paths[i]->init) P2PK_CHECK(p2pk_paths[i]->init(c));
  return P2PKIT_SUCCESS;
}

/* Frees what this rank owns (the group's shared region is the group's). */
void p2pk_comm_free(struct p2pkit_comm *c) {
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

void p2pk_comm_fill_tmpl(struct p2pkit_comm *c, char *stage_dev) {
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

void p2pk_comm_log(const struct p2pkit_comm *c, char labels[][64], const int *devs) {
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
void p2pk_comm_ll128_occupancy(struct p2pkit_comm *c) {
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
p2pkit_status_t p2pk_comm_device_count(int *n) {
  const p2pkit_status_t st = p2pk_gpu_count(n);
  if (st == P2PKIT_SUCCESS) return st;
  char why[256];
  snprintf(why, sizeof why, "%s", p2pkit_last_error());
  return p2pk_fail(st, "no usable GPU: %s", why);
}

p2pkit_status_t p2pk_comm_sm_count(int dev, int *sms) {
  P2PK_CUDA_CHECK(cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev));
  return P2PKIT_SUCCESS;
}

/* ------------------------------------------------------------ teardown ---- */

void p2pk_group_free(p2pk_group *g) {
  for (int i = 0; i < g->n; i++) {
    p2pk_comm_free(g->comms[i]);
    g->comms[i] = NULL;
  }
  if (g->stage) cudaFreeHost(g->stage);
  cudaGetLastError();
  pthread_mutex_destroy(&g->lock);
  free(g);
}


void p2pk_comm_release(struct p2pkit_comm *c) {
  if (!c->group) {
    p2pk_comm_free(c);
    return;
  }
  p2pk_group *g = c->group;
  pthread_mutex_lock(&g->lock);
  const int last = --g->live == 0;
  pthread_mutex_unlock(&g->lock);
  if (last) p2pk_group_free(g);
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
    if (last) p2pk_group_free(g);
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
    p2pk_comm_free(c);
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
  if (k >= 0) p2pk_sel_explain_calls(&c->sel, k, bytes, n, capture, f);
}

void p2pk_comm_choose(const struct p2pkit_comm *c, size_t bytes, p2pk_algo_choice *out) {
  p2pk_sel_choose(&c->sel, P2PK_COLL_ALL_REDUCE, bytes, p2pk_sel_cap(&c->sel, 0), out);
}

int p2pk_comm_half_grid(const struct p2pkit_comm *c) {
  const int h = (c->sel.geom.sm_count / 2) & ~7;
  return h < 8 ? 8 : h;
}

