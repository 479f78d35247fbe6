/* SPDX-License-Identifier: BSD-3-Clause */
/* A communicator's hosts and what NCCL may carry, at init: each rank's
 * host ids and NCCL setting (all-gathered by comm_rank.c), the grouping
 * (hosts.h) and the mode (nccl_use.h) every rank derives alike. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll/coll.h"
#include "core/check.h"
#include "core/log.h"
#include "core/param.h"
#include "nccl/nccl_dl.h"

p2pkit_status_t p2pk_host_info_mine(p2pk_host_info *m, char *why, size_t len) {
  memset(m, 0, sizeof *m);
  if (why && len) why[0] = '\0';
  P2PK_CHECK(p2pk_host_id(m->hostid, sizeof m->hostid));
  char host[256] = "";
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  P2PK_CHECK(p2pk_host_id_from(NULL, host, p2pk_param_str("P2PKIT_SYSFS_ROOT"), m->machine,
                               sizeof m->machine));
  m->nccl_setting = p2pk_nccl_setting(p2pk_param_str("P2PKIT_NCCL"));
  if (m->nccl_setting < 0) /* p2pk_param_check refused it first */
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "P2PKIT_NCCL='%s': expected auto, 0 or 1",
                     p2pk_param_str("P2PKIT_NCCL"));
  if (m->nccl_setting != P2PK_NCCL_OFF) {
    const p2pk_nccl_api *api = NULL;
    m->nccl_loaded = p2pk_nccl_shared(&api, why, len) == P2PKIT_SUCCESS;
    /* NCCL reads NCCL_HOSTID once, before its first communicator: a
     * simulated host (P2PKIT_HOSTID) is one to NCCL too. */
    const char *give = p2pk_hosts_nccl_hostid(p2pk_param_str("P2PKIT_HOSTID"), getenv("NCCL_HOSTID"));
    if (give) setenv("NCCL_HOSTID", give, 0);
  }
  const char *nh = getenv("NCCL_HOSTID");
  snprintf(m->nccl_host, sizeof m->nccl_host, "%s", nh && nh[0] ? nh : m->machine);
  return P2PKIT_SUCCESS;
}

/* The hosts and the plan for them, once per rank at INFO. */
static void log_hosts(const struct p2pkit_comm *c) {
  const p2pk_hosts *h = &c->hosts;
  if (h->nhosts < 2) return;
  char layout[96];
  p2pk_hosts_text(h, layout, sizeof layout);
  const char *plan = h->regular && h->local_max > 1
                         ? "all-reduce, reduce-scatter and all-gather hierarchical (p2pkit inside "
                           "each host, NCCL across), the rest through NCCL over every rank"
                     : h->regular ? "one rank per host: every call through NCCL over every rank"
                                  : "uneven hosts: every call through NCCL over every rank";
  P2PK_INFO(P2PK_LOG_COLL, "rank %d: the communicator spans %s; this rank is local rank %d of %d "
            "on host %d; %s", c->rank, layout, h->local_rank, h->local_size, h->host, plan);
}

p2pkit_status_t p2pk_comm_hosts(struct p2pkit_comm *c, const p2pk_host_info *const *infos,
                                const char *const *busids, const char *why) {
  const int n = c->nranks;
  const char *ids[P2PK_COLL_MAX_RANKS];
  p2pk_nccl_rank ranks[P2PK_COLL_MAX_RANKS];
  for (int r = 0; r < n; r++) {
    ids[r] = infos[r]->hostid;
    ranks[r] = (p2pk_nccl_rank){infos[r]->nccl_loaded, infos[r]->machine, busids[r],
                                infos[r]->nccl_host};
  }
  p2pk_hosts_free(&c->hosts);
  P2PK_CHECK(p2pk_hosts_group(ids, n, c->rank, &c->hosts));
  char info[512];
  P2PK_CHECK(p2pk_nccl_comm_mode(infos[c->rank]->nccl_setting, ranks, n, c->rank, &c->hosts, why,
                                 &c->nccl_mode, info, sizeof info));
  if (info[0]) P2PK_INFO(P2PK_LOG_COLL, "%s", info);
  log_hosts(c);
  return P2PKIT_SUCCESS;
}
