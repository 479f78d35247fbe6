/* SPDX-License-Identifier: BSD-3-Clause */
#include "coll/rdv/hosts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/check.h"
#include "core/param.h"

/* The boot id (a UUID on one line) under `root`; "" when unreadable. */
static void read_boot_id(const char *root, char *out, size_t len) {
  char path[4096];
  snprintf(path, sizeof path, "%s/proc/sys/kernel/random/boot_id", root ? root : "");
  out[0] = '\0';
  FILE *f = fopen(path, "r");
  if (!f) return;
  if (!fgets(out, (int)len, f)) out[0] = '\0';
  fclose(f);
  out[strcspn(out, " \t\r\n")] = '\0';
}

p2pkit_status_t p2pk_host_id_from(const char *override, const char *hostname, const char *root,
                                  char *buf, size_t len) {
  if (len > P2PK_HOSTID_MAX) len = P2PK_HOSTID_MAX;
  if (override && override[0]) {
    if (strlen(override) >= len)
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "P2PKIT_HOSTID='%.40s...' is %zu bytes; a host "
                       "id has at most %zu", override, strlen(override), len - 1);
    snprintf(buf, len, "%s", override);
    return P2PKIT_SUCCESS;
  }
  char boot[64];
  read_boot_id(root, boot, sizeof boot);
  const char *host = hostname && hostname[0] ? hostname : "localhost";
  int room = (int)len - 2 - (int)strlen(boot); /* the hostname gives way, never the boot id */
  if (boot[0])
    snprintf(buf, len, "%.*s:%s", room > 0 ? room : 0, host, boot);
  else
    snprintf(buf, len, "%s", host);
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_host_id(char *buf, size_t len) {
  char host[256] = "";
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return p2pk_host_id_from(p2pk_param_str("P2PKIT_HOSTID"), host,
                           p2pk_param_str("P2PKIT_SYSFS_ROOT"), buf, len);
}

void p2pk_hosts_free(p2pk_hosts *h) {
  free(h->host_of);
  free(h->local_of);
  free(h->host_size);
  free(h->host_first);
  memset(h, 0, sizeof *h);
}

/* host_of / local_of / host_size / host_first from the ids. */
static void assign(const char *const *ids, p2pk_hosts *h) {
  for (int r = 0; r < h->nranks; r++) {
    int k = 0;
    while (k < h->nhosts && strcmp(ids[h->host_first[k]], ids[r]) != 0) k++;
    if (k == h->nhosts) h->host_first[h->nhosts++] = r;
    h->host_of[r] = k;
    h->local_of[r] = h->host_size[k]++;
  }
}

p2pkit_status_t p2pk_hosts_group(const char *const *ids, int nranks, int rank, p2pk_hosts *h) {
  memset(h, 0, sizeof *h);
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "host grouping: rank %d of %d ranks", rank,
                     nranks);
  for (int r = 0; r < nranks; r++)
    if (!ids || !ids[r] || !ids[r][0])
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "host grouping: rank %d sent no host id", r);
  size_t n = (size_t)nranks;
  h->host_of = calloc(n, sizeof(int));
  h->local_of = calloc(n, sizeof(int));
  h->host_size = calloc(n, sizeof(int));
  h->host_first = calloc(n, sizeof(int));
  if (!h->host_of || !h->local_of || !h->host_size || !h->host_first) {
    p2pk_hosts_free(h);
    return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "host grouping: no memory for %d ranks", nranks);
  }
  h->nranks = nranks;
  h->rank = rank;
  assign(ids, h);
  h->regular = 1;
  for (int k = 0; k < h->nhosts; k++) {
    if (h->host_size[k] > h->local_max) h->local_max = h->host_size[k];
    if (h->host_size[k] != h->host_size[0]) h->regular = 0;
  }
  h->host = h->host_of[rank];
  h->local_rank = h->local_of[rank];
  h->local_size = h->host_size[h->host];
  return P2PKIT_SUCCESS;
}

int p2pk_hosts_rank_at(const p2pk_hosts *h, int host, int local) {
  if (host < 0 || host >= h->nhosts || local < 0 || local >= h->host_size[host]) return -1;
  for (int r = h->host_first[host]; r < h->nranks; r++)
    if (h->host_of[r] == host && h->local_of[r] == local) return r;
  return -1;
}

int p2pk_hosts_local_ranks(const p2pk_hosts *h, int host, int *ranks) {
  int n = 0;
  if (host < 0 || host >= h->nhosts) return 0;
  for (int r = h->host_first[host]; r < h->nranks; r++)
    if (h->host_of[r] == host) ranks[n++] = r;
  return n;
}

int p2pk_hosts_cross_ranks(const p2pk_hosts *h, int local, int *ranks) {
  int n = 0;
  for (int k = 0; k < h->nhosts; k++) {
    int r = p2pk_hosts_rank_at(h, k, local);
    if (r >= 0) ranks[n++] = r;
  }
  return n;
}

p2pkit_status_t p2pk_hosts_check_regular(const p2pk_hosts *h, const char *who) {
  if (h->regular) return P2PKIT_SUCCESS;
  char spread[256] = "";
  size_t at = 0;
  for (int k = 0; k < h->nhosts && at < sizeof spread - 32; k++)
    at += (size_t)snprintf(spread + at, sizeof spread - at, "%s%d", k ? "+" : "", h->host_size[k]);
  if (at >= sizeof spread - 32) snprintf(spread + at, sizeof spread - at, "+...");
  return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "%s: the %d ranks sit unevenly on %d hosts (%s ranks, "
                   "hosts in the order of their first rank); the hierarchical collectives need the "
                   "same number of ranks on every host", who, h->nranks, h->nhosts, spread);
}

const char *p2pk_hosts_nccl_hostid(const char *p2pkit_hostid, const char *nccl_hostid_env) {
  if (!p2pkit_hostid || !p2pkit_hostid[0]) return NULL;
  if (nccl_hostid_env && nccl_hostid_env[0]) return NULL;
  return p2pkit_hostid;
}
