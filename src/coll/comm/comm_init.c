/* SPDX-License-Identifier: BSD-3-Clause */
/* Making communicators of one process per GPU, whole: from the options
 * (p2pkit_comm_init_rank), from a unique id (p2pkit_comm_init_rank_config),
 * from a parent (p2pkit_comm_split). comm_rank.c makes the communicator; one
 * spanning hosts then gets its host's communicator (a split by host over
 * its own rendezvous, p2pkit's paths only) and the states of the paths
 * that serve it (NCCL over every rank, the hierarchical path). */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll/rdv/init_id.h"
#include "coll/paths/path.h"
#include "core/check.h"
#include "core/log.h"

int p2pk_split_timeout_s(const struct p2pkit_comm *parent, const p2pkit_config_t *cfg) {
  return cfg && cfg->timeout_s > 0 ? cfg->timeout_s : (int)(parent->timeout_ns / 1000000000ULL);
}

/* The options of a child whose rendezvous `rdv` arranged, on the
 * parent's GPU, with cfg's timeout and grid cap or the parent's. */
static p2pkit_status_t child_opts(const struct p2pkit_comm *parent, const p2pk_split_rdv *rdv,
                                  const p2pkit_config_t *cfg, p2pk_uid *u, p2pkit_comm_opts_t *o) {
  P2PK_CHECK(p2pk_uid_decode(&rdv->id, u));
  p2pkit_config_t c = *cfg;
  c.device = parent->device;
  c.timeout_s = p2pk_split_timeout_s(parent, cfg);
  return p2pk_uid_comm_opts(u, rdv->nranks, rdv->rank, &c, o);
}

/* The communicator of this rank's host (spanning hosts, the hierarchical
 * layout): split by host, in rank order. */
static p2pkit_status_t make_intra(struct p2pkit_comm *c) {
  p2pk_split_rdv rdv;
  P2PK_CHECK(p2pk_split_rendezvous(c->boot, c->hosts.host, c->rank, c->same_machine, &rdv));
  const p2pkit_config_t defaults = P2PKIT_CONFIG_INIT;
  p2pk_uid u;
  p2pkit_comm_opts_t o;
  p2pkit_status_t st = child_opts(c, &rdv, &defaults, &u, &o);
  if (st == P2PKIT_SUCCESS)
    st = p2pk_comm_init_rank_fd(&o, rdv.listen_fd > 0 ? rdv.listen_fd : 0, P2PK_INIT_NESTED,
                                &c->intra);
  if (rdv.listen_fd >= 0) close(rdv.listen_fd);
  return st;
}

/* Spanning hosts: the host's communicator where the layout is
 * hierarchical (the same number of ranks, 2 or more, on every host; not
 * under P2PKIT_NCCL=1, where every call is NCCL's), then the states of the
 * paths that serve a spanning communicator (NCCL over every rank; the
 * hierarchical path, which composes the host's communicator's calls
 * through c->sub_launch). */
static p2pkit_status_t span_finish(struct p2pkit_comm *c) {
  const p2pk_hosts *h = &c->hosts;
  if (h->nhosts < 2) return P2PKIT_SUCCESS;
  int cur = -1;
  cudaGetDevice(&cur);
  cudaSetDevice(c->device);
  p2pkit_status_t st = P2PKIT_SUCCESS;
  if (c->sel.hier && !c->intra && c->nccl_mode != P2PK_NCCL_ALL) {
    st = make_intra(c);
    if (st == P2PKIT_SUCCESS) c->sub_launch = p2pk_sub_launch;
  }
  for (int i = 0; i < P2PK_PATHS && st == P2PKIT_SUCCESS; i++)
    if ((p2pk_paths[i]->modes & P2PK_MODE_SPAN) && p2pk_paths[i]->init) st = p2pk_paths[i]->init(c);
  if (cur >= 0) cudaSetDevice(cur);
  return st;
}

p2pkit_status_t p2pk_comm_create(const p2pkit_comm_opts_t *opts, int listen_fd,
                                 p2pkit_comm_t *comm_p) {
  p2pkit_comm_t c = NULL;
  P2PK_CHECK(p2pk_comm_init_rank_fd(opts, listen_fd, 0, &c));
  const p2pkit_status_t st = span_finish(c);
  if (st != P2PKIT_SUCCESS) {
    p2pkit_comm_abort(c); /* its peers may be gone: nothing here waits on them */
    return st;
  }
  *comm_p = c;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pkit_comm_init_rank(const p2pkit_comm_opts_t *opts, p2pkit_comm_t *comm_p) {
  if (!comm_p) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "init_rank: comm_p is NULL");
  if (opts) P2PK_CHECK(p2pk_comm_opts_check(opts)); /* before any field is read */
  return p2pk_comm_create(opts, 0, comm_p);
}

p2pkit_status_t p2pkit_comm_init_rank_config(p2pkit_comm_t *comm, int nranks,
                                             const p2pkit_unique_id_t *id, int rank,
                                             const p2pkit_config_t *config) {
  if (!comm || !id)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "init_rank_config: %s is NULL",
                     !comm ? "comm" : "id");
  p2pkit_config_t cfg;
  P2PK_CHECK(p2pk_config_check(config, &cfg));
  p2pk_uid u;
  P2PK_CHECK(p2pk_uid_decode(id, &u));
  p2pkit_comm_opts_t o;
  P2PK_CHECK(p2pk_uid_comm_opts(&u, nranks, rank, &cfg, &o));
  if (o.device < 0) {
    cudaError_t e = cudaGetDevice(&o.device);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return p2pk_fail(e == cudaErrorNoDevice ? P2PKIT_ERR_NO_DEVICE : P2PKIT_ERR_NO_DRIVER,
                       "init_rank_config: rank %d: no current CUDA device: %s", rank,
                       cudaGetErrorString(e));
    }
  }
  int lfd = rank == 0 ? p2pk_uid_take_listen_fd(&u) : -1;
  p2pkit_comm_t c = NULL;
  p2pkit_status_t st = p2pk_comm_create(&o, lfd > 0 ? lfd : 0, &c);
  if (lfd >= 0) close(lfd); /* the rendezvous is over: nobody else joins */
  if (st == P2PKIT_SUCCESS && cfg.max_blocks >= 0) {
    st = p2pkit_comm_set_max_blocks(c, cfg.max_blocks);
    if (st != P2PKIT_SUCCESS) p2pkit_comm_destroy(c);
  }
  if (st == P2PKIT_SUCCESS) *comm = c;
  return st;
}

/* ---------------------------------------------------------------- split -- */

static p2pkit_status_t split_check(p2pkit_comm_t comm, int color, const p2pkit_config_t *config,
                                   p2pkit_comm_t *newcomm, p2pkit_config_t *cfg) {
  if (!comm || !newcomm)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "comm_split: %s is NULL",
                     !comm ? "comm" : "newcomm");
  if (color < 0 && color != P2PKIT_SPLIT_NOCOLOR)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "comm_split: rank %d: color %d: expected 0 or "
                     "more, or P2PKIT_SPLIT_NOCOLOR (%d)", comm->rank, color, P2PKIT_SPLIT_NOCOLOR);
  if (comm->aborted)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "comm_split: rank %d: the communicator was "
                     "aborted", comm->rank);
  if (config && config->device >= 0 && config->device != comm->device)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "comm_split: rank %d: config.device %d: a split "
                     "stays on the parent's GPU (%d); leave it -1", comm->rank, config->device,
                     comm->device);
  return p2pk_config_check(config, cfg);
}

/* One process: one color's children over its members' GPUs, in key
 * order, each newcomm set (the callers' pointers, recorded). */
static p2pkit_status_t split_color(p2pk_group *g, const p2pk_split_in *in, int first) {
  int members[P2PK_COLL_MAX_RANKS], devs[P2PK_COLL_MAX_RANKS], secs[P2PK_COLL_MAX_RANKS];
  const int m = p2pk_split_members(in, g->n, first, members);
  p2pkit_comm_t kids[P2PK_COLL_MAX_RANKS] = {0};
  for (int j = 0; j < m; j++) {
    devs[j] = g->comms[members[j]]->device;
    secs[j] = g->split[members[j]].timeout_s;
  }
  P2PK_CHECK(p2pk_comm_init_all_timeouts(kids, m, devs, secs));
  for (int j = 0; j < m; j++) {
    const int mb = g->split[members[j]].max_blocks;
    if (mb > 0) p2pkit_comm_set_max_blocks(kids[j], mb);
    *g->split[members[j]].out = kids[j];
  }
  return P2PKIT_SUCCESS;
}

/* Every rank has called: each color's communicator, the records cleared. */
static p2pkit_status_t split_all(p2pk_group *g) {
  p2pk_split_in in[P2PK_COLL_MAX_RANKS] = {{0, 0}};
  p2pk_split_out out[P2PK_COLL_MAX_RANKS] = {{0, 0}};
  for (int r = 0; r < g->n; r++) in[r] = (p2pk_split_in){g->split[r].color, g->split[r].key};
  p2pkit_status_t st = p2pk_split_compute(in, g->n, out);
  int done[P2PK_COLL_MAX_RANKS] = {0};
  for (int r = 0; r < g->n && st == P2PKIT_SUCCESS; r++) {
    if (done[r] || out[r].rank < 0) continue;
    for (int q = r; q < g->n; q++) done[q] |= in[q].color == in[r].color;
    st = split_color(g, in, r);
  }
  memset(g->split, 0, sizeof g->split);
  g->split_n = 0;
  return st;
}

p2pkit_status_t p2pk_split_one_process(p2pkit_comm_t comm, int color, int key,
                                       const p2pkit_config_t *cfg, p2pkit_comm_t *newcomm) {
  p2pk_group *g = comm->group;
  pthread_mutex_lock(&g->lock);
  if (g->split[comm->rank].seen) {
    pthread_mutex_unlock(&g->lock);
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "comm_split: rank %d called again before every "
                     "rank of its one-process communicator called once", comm->rank);
  }
  g->split[comm->rank].seen = 1;
  g->split[comm->rank].color = color;
  g->split[comm->rank].key = key;
  g->split[comm->rank].max_blocks = cfg->max_blocks >= 0 ? cfg->max_blocks : comm->sel.max_blocks;
  g->split[comm->rank].timeout_s = p2pk_split_timeout_s(comm, cfg);
  g->split[comm->rank].out = newcomm;
  const p2pkit_status_t st = ++g->split_n == g->n ? split_all(g) : P2PKIT_SUCCESS;
  pthread_mutex_unlock(&g->lock);
  return st;
}

/* Process per GPU: the child's rendezvous over the parent's, then the child. */
static p2pkit_status_t split_rank(p2pkit_comm_t comm, int color, int key,
                                  const p2pkit_config_t *cfg, p2pkit_comm_t *newcomm) {
  p2pk_split_rdv rdv;
  P2PK_CHECK(p2pk_split_rendezvous(comm->boot, color, key, comm->same_machine, &rdv));
  if (rdv.rank < 0) return P2PKIT_SUCCESS; /* NOCOLOR: no communicator */
  p2pk_uid u;
  p2pkit_comm_opts_t o;
  p2pkit_status_t st = child_opts(comm, &rdv, cfg, &u, &o);
  p2pkit_comm_t c = NULL;
  int cur = -1;
  cudaGetDevice(&cur);
  if (st == P2PKIT_SUCCESS) st = p2pk_comm_create(&o, rdv.listen_fd > 0 ? rdv.listen_fd : 0, &c);
  if (cur >= 0) cudaSetDevice(cur);
  if (rdv.listen_fd >= 0) close(rdv.listen_fd);
  const int mb = cfg->max_blocks >= 0 ? cfg->max_blocks : comm->sel.max_blocks;
  if (st == P2PKIT_SUCCESS && mb > 0) st = p2pkit_comm_set_max_blocks(c, mb);
  if (st != P2PKIT_SUCCESS) {
    if (c) p2pkit_comm_destroy(c);
    return st;
  }
  P2PK_INFO(P2PK_LOG_COLL, "comm_split: rank %d (color %d, key %d) is rank %d of %d of its new "
            "communicator", comm->rank, color, key, rdv.rank, rdv.nranks);
  *newcomm = c;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pkit_comm_split(p2pkit_comm_t comm, int color, int key,
                                  const p2pkit_config_t *config, p2pkit_comm_t *newcomm) {
  p2pkit_config_t cfg;
  P2PK_CHECK(split_check(comm, color, config, newcomm, &cfg));
  *newcomm = NULL;
  if (comm->group) return p2pk_split_one_process(comm, color, key, &cfg, newcomm);
  return split_rank(comm, color, key, &cfg, newcomm);
}
