/* SPDX-License-Identifier: BSD-3-Clause */
#include "coll/select/nccl_use.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/check.h"

int p2pk_nccl_setting(const char *text) {
  if (!text || !text[0] || strcasecmp(text, "auto") == 0) return P2PK_NCCL_AUTO;
  if (strcmp(text, "0") == 0) return P2PK_NCCL_OFF;
  if (strcmp(text, "1") == 0) return P2PK_NCCL_ALL;
  return -1;
}

const char *p2pk_nccl_mode_name(int mode) {
  return mode == P2PK_NCCL_OFF ? "0" : mode == P2PK_NCCL_ALL ? "1" : "auto";
}

void p2pk_hosts_text(const p2pk_hosts *h, char *out, size_t len) {
  if (h->regular) {
    snprintf(out, len, "%d host%s of %d rank%s", h->nhosts, h->nhosts == 1 ? "" : "s",
             h->host_size[0], h->host_size[0] == 1 ? "" : "s");
    return;
  }
  size_t at = (size_t)snprintf(out, len, "%d hosts: ", h->nhosts);
  for (int k = 0; k < h->nhosts && at + 16 < len; k++)
    at += (size_t)snprintf(out + at, len - at, "%s%d", k ? "+" : "", h->host_size[k]);
  if (at + 8 < len) snprintf(out + at, len - at, " ranks");
}

int p2pk_nccl_duplicate(const p2pk_nccl_rank *ranks, int n, int *a, int *b) {
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (strcmp(ranks[i].machine, ranks[j].machine) == 0 &&
          strcasecmp(ranks[i].busid, ranks[j].busid) == 0 &&
          strcmp(ranks[i].nccl_host, ranks[j].nccl_host) == 0) {
        *a = i, *b = j;
        return 1;
      }
  return 0;
}

/* Why NCCL cannot serve these ranks, in `out` ("" when it can). */
static void nccl_missing(const p2pk_nccl_rank *ranks, int n, int rank, const char *why, char *out,
                         size_t len) {
  out[0] = '\0';
  int a = -1, b = -1;
  for (int r = 0; r < n && a < 0; r++)
    if (!ranks[r].loaded) a = r;
  if (a >= 0) {
    if (a == rank && why && why[0]) snprintf(out, len, "this rank cannot load NCCL: %s", why);
    else snprintf(out, len, "rank %d cannot load NCCL (its log says why)", a);
    return;
  }
  if (p2pk_nccl_duplicate(ranks, n, &a, &b))
    snprintf(out, len, "ranks %d and %d share GPU %s under one NCCL host id, which NCCL refuses "
             "(\"Duplicate GPU detected\"): give each a host id of its own (P2PKIT_HOSTID or "
             "NCCL_HOSTID)", a, b, ranks[a].busid);
}

p2pkit_status_t p2pk_nccl_comm_mode(int setting, const p2pk_nccl_rank *ranks, int n, int rank,
                                    const p2pk_hosts *h, const char *why, int *mode, char *info,
                                    size_t len) {
  info[0] = '\0';
  *mode = P2PK_NCCL_OFF;
  const int spans = h && h->nhosts > 1;
  char layout[96] = "";
  if (spans) p2pk_hosts_text(h, layout, sizeof layout);
  if (setting == P2PK_NCCL_OFF) {
    if (spans)
      return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "rank %d: the communicator spans %s; across hosts "
                       "p2pkit needs NCCL, and P2PKIT_NCCL=0 turns it off", rank, layout);
    return P2PKIT_SUCCESS;
  }
  char missing[320];
  nccl_missing(ranks, n, rank, why, missing, sizeof missing);
  if (!missing[0]) {
    *mode = setting;
    return P2PKIT_SUCCESS;
  }
  if (spans)
    return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "rank %d: the communicator spans %s; across hosts "
                     "p2pkit needs NCCL, but %s", rank, layout, missing);
  if (setting == P2PK_NCCL_ALL)
    return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "rank %d: P2PKIT_NCCL=1 puts every call through NCCL, "
                     "but %s", rank, missing);
  snprintf(info, len, "rank %d: P2PKIT_NCCL=auto: %s; p2pkit's own paths carry every call", rank,
           missing);
  return P2PKIT_SUCCESS;
}
