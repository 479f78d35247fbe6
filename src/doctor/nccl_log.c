/* SPDX-License-Identifier: BSD-3-Clause */
/* Reading NCCL's INFO log. The lines that matter (NCCL 2.4 to 2.28):
 *   host:pid:tid [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
 *   ... NCCL INFO Channel 00 : 0[3000] -> 1[4000] via P2P/IPC
 *   ... NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct
 *   ... NCCL INFO Channel 00 : 1[89000] -> 0[3d000] via direct shared memory
 *   ... NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0
 *   ... NCCL INFO Channel 00/0 : 0[0] -> 2[2] via P2P/indirect/1[1]
 *   ... NCCL INFO NCCL_P2P_LEVEL set by environment to LOC
 *   ... NCCL INFO NCCL version 2.28.3+cuda13.0   (also "NCCL version 2.28.3+cuda13.0")
 *   ... NCCL WARN <text>
 * The number in brackets is the device (or, before 2.19, the bus id); the
 * number before it is the rank, which is what the doctor maps to a GPU. */
#include "doctor/nccl_log.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

unsigned p2pk_nccl_transport_kind(const char *t) {
  if (strncmp(t, "P2P", 3) == 0) return P2PK_NT_P2P;
  if (strncmp(t, "SHM", 3) == 0 || strncmp(t, "direct shared memory", 20) == 0) return P2PK_NT_SHM;
  if (strncmp(t, "NET", 3) == 0) return P2PK_NT_NET;
  return P2PK_NT_OTHER;
}

static const char *skip_sp(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\t')) p++;
  return p;
}

/* "<rank>[<anything>]": the rank, and p moved past ']'. -1 when malformed. */
static long rank_at(const char **pp, const char *end) {
  const char *p = *pp;
  if (p >= end || !isdigit((unsigned char)*p)) return -1;
  long r = 0;
  while (p < end && isdigit((unsigned char)*p)) {
    r = r * 10 + (*p - '0');
    if (r > 1000000) return -1;
    p++;
  }
  if (p >= end || *p != '[') return -1;
  while (p < end && *p != ']') p++;
  if (p >= end) return -1;
  *pp = p + 1;
  return r;
}

static const char *find_in(const char *p, const char *end, const char *needle) {
  size_t n = strlen(needle);
  for (; p + n <= end; p++)
    if (memcmp(p, needle, n) == 0) return p;
  return NULL;
}

static void parse_channel(const char *p, const char *end, p2pk_nccl_log *out) {
  /* p is just past "Channel ": "00/0 : 0[0] -> 1[1] ... via X" */
  while (p < end && (isdigit((unsigned char)*p) || *p == '/')) p++;
  p = skip_sp(p, end);
  if (p >= end || *p != ':') return;
  p = skip_sp(p + 1, end);
  long src = rank_at(&p, end);
  if (src < 0) return;
  p = skip_sp(p, end);
  if (end - p < 2 || p[0] != '-' || p[1] != '>') return;
  p = skip_sp(p + 2, end);
  long dst = rank_at(&p, end);
  if (dst < 0) return;
  const char *via = find_in(p, end, "via ");
  if (!via) return;
  via += 4;
  char t[40];
  size_t n;
  if (end - via >= 20 && memcmp(via, "direct shared memory", 20) == 0) {
    snprintf(t, sizeof t, "SHM/direct");
  } else {
    n = 0;
    while (via + n < end && !isspace((unsigned char)via[n])) n++;
    if (n == 0) return;
    snprintf(t, sizeof t, "%.*s", (int)n, via);
  }
  out->nconn++;
  if (src > out->max_rank) out->max_rank = src;
  if (dst > out->max_rank) out->max_rank = dst;
  if (src >= P2PK_NCCL_MAX_RANKS || dst >= P2PK_NCCL_MAX_RANKS) {
    out->nconn_far++;
    return;
  }
  if (src + 1 > out->nranks) out->nranks = (int)src + 1;
  if (dst + 1 > out->nranks) out->nranks = (int)dst + 1;
  out->kinds[src][dst] |= p2pk_nccl_transport_kind(t);
  if (out->count[src][dst]++ == 0) snprintf(out->first[src][dst], sizeof out->first[0][0], "%s", t);
}

static void parse_env(const char *line, const char *at, const char *end, p2pk_nccl_log *out) {
  /* "<NAME> set by environment to <value>" */
  const char *name_end = at;
  const char *name = name_end;
  while (name > line && !isspace((unsigned char)name[-1])) name--;
  if (name == name_end) return;
  const char *val = at + strlen(" set by environment to ");
  size_t vn = (size_t)(end - val);
  while (vn > 0 && (isspace((unsigned char)val[vn - 1]) || val[vn - 1] == '.')) vn--;
  char kv[96];
  snprintf(kv, sizeof kv, "%.*s=%.*s", (int)(name_end - name), name, (int)vn, val);
  for (int i = 0; i < out->nenv; i++)
    if (strcmp(out->env[i], kv) == 0) return;
  if (out->nenv < P2PK_NCCL_MAX_ENV) snprintf(out->env[out->nenv++], sizeof out->env[0], "%s", kv);
}

static void parse_line(const char *line, const char *end, p2pk_nccl_log *out) {
  const char *at;
  if ((at = find_in(line, end, "Channel ")) != NULL && find_in(at, end, " via ")) {
    parse_channel(at + 8, end, out);
  } else if ((at = find_in(line, end, " set by environment to ")) != NULL) {
    parse_env(line, at, end, out);
  } else if ((at = find_in(line, end, "NCCL version ")) != NULL && !out->version[0]) {
    const char *v = at + 13;
    size_t n = 0;
    while (v + n < end && !isspace((unsigned char)v[n])) n++;
    snprintf(out->version, sizeof out->version, "%.*s", (int)n, v);
  } else if ((at = find_in(line, end, "NCCL WARN ")) != NULL && out->nwarn < P2PK_NCCL_MAX_WARN) {
    const char *w = at + 10;
    snprintf(out->warn[out->nwarn++], sizeof out->warn[0], "%.*s", (int)(end - w), w);
  }
}

void p2pk_nccl_log_parse(const char *text, size_t len, p2pk_nccl_log *out) {
  memset(out, 0, sizeof *out);
  out->max_rank = -1;
  const char *p = text, *end = text + len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *e = nl ? nl : end;
    const char *le = e;
    while (le > p && (le[-1] == '\r' || le[-1] == ' ')) le--;
    parse_line(p, le, out);
    p = nl ? nl + 1 : end;
  }
}

const char *p2pk_nccl_log_env(const p2pk_nccl_log *log, const char *name) {
  size_t n = strlen(name);
  for (int i = 0; i < log->nenv; i++)
    if (strncmp(log->env[i], name, n) == 0 && log->env[i][n] == '=') return log->env[i] + n + 1;
  return NULL;
}

int p2pk_nccl_log_conns_beyond(const p2pk_nccl_log *log, int nranks) {
  int n = log->nconn_far;
  for (int a = 0; a < log->nranks; a++)
    for (int b = 0; b < log->nranks; b++)
      if (a >= nranks || b >= nranks) n += log->count[a][b];
  return n;
}
