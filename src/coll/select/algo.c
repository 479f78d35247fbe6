/* SPDX-License-Identifier: BSD-3-Clause */
/* The all-reduce algorithm table and choice rules (see algo.h). */
#include "coll/select/algo.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/check.h"
#include "core/param.h"

/* Built-in table, measured on 2x and 4x H200 (the rows and their figures:
 * docs/decisions/allreduce-algorithm-table.md). LL (each
 * 8-byte word carries its flag) wins while latency dominates; LL128 (each
 * 128-byte line carries 120 bytes and one flag) through the mid sizes;
 * above that the chunked protocol moves data once per link direction. Two GPUs: one-shot and two-shot cross the link with the same
 * bytes, and one-shot has fewer synchronisation steps; from 3 GPUs on,
 * two-shot sends 2(n-1)/n of the buffer per GPU instead of n-1. */
static const p2pk_algo_row builtin[] = {
    /* 2 GPUs. LL to 128 KiB; LL128 to 32 MiB (256 threads per block to
     * 16 MiB but 96 above 256 KiB to 512 KiB and 128 to 1 MiB, 512 beyond); two-shot simple
     * beyond. On 2x H200, float sum under a graph: LL128 against one-shot
     * simple 1 MiB 6.26 us vs 8.79, 16 MiB 56.5 vs 60.7; 64 MiB a tie with
     * two-shot. The thread counts per row: the decision record above. */
    {P2PK_TRANSPORT_P2P, 2, 2, 128 << 10, P2PK_ALGO_ONESHOT, P2PK_PROTO_LL, 0, 0, 0},
    {P2PK_TRANSPORT_P2P, 2, 2, 256 << 10, P2PK_ALGO_ONESHOT, P2PK_PROTO_LL128, 0, 256, 0},
    {P2PK_TRANSPORT_P2P, 2, 2, 512 << 10, P2PK_ALGO_ONESHOT, P2PK_PROTO_LL128, 0, 96, 0},
    {P2PK_TRANSPORT_P2P, 2, 2, 1 << 20, P2PK_ALGO_ONESHOT, P2PK_PROTO_LL128, 0, 128, 0},
    {P2PK_TRANSPORT_P2P, 2, 2, 16 << 20, P2PK_ALGO_ONESHOT, P2PK_PROTO_LL128, 0, 256, 0},
    {P2PK_TRANSPORT_P2P, 2, 2, 32 << 20, P2PK_ALGO_ONESHOT, P2PK_PROTO_LL128, 0, 512, 0},
    {P2PK_TRANSPORT_P2P, 2, 2, SIZE_MAX, P2PK_ALGO_TWOSHOT, P2PK_PROTO_SIMPLE, 0, 0, 0},
    /* 3 and 4 GPUs: LL to 64 KiB, LL128 to 2 MiB, two-shot beyond (4x
     * H200 NV18, float sum, eager: 2 MiB LL128 31.8 us against two-shot's
     * 42.5, 8 MiB two-shot 70.2 against LL128's 95.7; the 4-GPU rows of
     * docs/decisions/allreduce-algorithm-table.md). */
    {P2PK_TRANSPORT_P2P, 3, 4, 64 << 10, P2PK_ALGO_ONESHOT, P2PK_PROTO_LL, 0, 0, 0},
    {P2PK_TRANSPORT_P2P, 3, 4, 2 << 20, P2PK_ALGO_ONESHOT, P2PK_PROTO_LL128, 0, 0, 0},
    {P2PK_TRANSPORT_P2P, 3, 4, SIZE_MAX, P2PK_ALGO_TWOSHOT, P2PK_PROTO_SIMPLE, 0, 0, 0},
    /* 5 or more GPUs: not measured (no such machine yet). LL128 is left out
     * here until it is; P2PKIT_PROTO=ll128 tries it. */
    {P2PK_TRANSPORT_P2P, 5, P2PK_COLL_MAX_RANKS, 64 << 10, P2PK_ALGO_ONESHOT, P2PK_PROTO_LL, 0, 0, 0},
    {P2PK_TRANSPORT_P2P, 5, P2PK_COLL_MAX_RANKS, 512 << 10, P2PK_ALGO_ONESHOT, P2PK_PROTO_SIMPLE, 0, 0, 0},
    {P2PK_TRANSPORT_P2P, 5, P2PK_COLL_MAX_RANKS, SIZE_MAX, P2PK_ALGO_TWOSHOT, P2PK_PROTO_SIMPLE, 0, 0, 0},
    {P2PK_TRANSPORT_SHM, 2, P2PK_COLL_MAX_RANKS, SIZE_MAX, P2PK_ALGO_STAGED, P2PK_PROTO_SIMPLE, 0, 0, 0},
};

static const char *const algo_names[P2PK_ALGO_COUNT] = {"oneshot", "twoshot", "staged"};
static const char *const proto_names[P2PK_PROTO_COUNT] = {"ll", "simple", "ll128"};
static const char *const transport_names[] = {"p2p", "shm"};

const char *p2pk_algo_name(int a) { return a >= 0 && a < P2PK_ALGO_COUNT ? algo_names[a] : "?"; }
const char *p2pk_proto_name(int p) { return p >= 0 && p < P2PK_PROTO_COUNT ? proto_names[p] : "?"; }
const char *p2pk_transport_name(int t) { return t == 0 || t == 1 ? transport_names[t] : "?"; }

int p2pk_algo_from_name(const char *name) {
  for (int i = 0; name && i < P2PK_ALGO_COUNT; i++)
    if (strcasecmp(name, algo_names[i]) == 0) return i;
  return -1;
}

int p2pk_proto_from_name(const char *name) {
  for (int i = 0; name && i < P2PK_PROTO_COUNT; i++)
    if (strcasecmp(name, proto_names[i]) == 0) return i;
  return -1;
}

void p2pk_algo_table_default(p2pk_algo_table *t) {
  memset(t, 0, sizeof *t);
  t->nrows = (int)(sizeof builtin / sizeof builtin[0]);
  memcpy(t->rows, builtin, sizeof builtin);
  snprintf(t->source, sizeof t->source, "built-in");
}

/* --- parsing ---------------------------------------------------------------- */

static int parse_int(const char *s, int lo, int hi, int *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

static p2pkit_status_t parse_row(const char *name, int line, char **tok, int ntok,
                                 p2pk_algo_row *r) {
  if (ntok != 9)
    return p2pk_fail(P2PKIT_ERR_PARSE, "%s:%d: expected 9 fields (transport ranks_min ranks_max "
                     "max_bytes algo proto blocks threads chunk), found %d", name, line, ntok);
  memset(r, 0, sizeof *r);
  if (strcmp(tok[0], "p2p") == 0) r->transport = P2PK_TRANSPORT_P2P;
  else if (strcmp(tok[0], "shm") == 0) r->transport = P2PK_TRANSPORT_SHM;
  else return p2pk_fail(P2PKIT_ERR_PARSE, "%s:%d: transport '%s' is not p2p or shm", name, line, tok[0]);
  if (parse_int(tok[1], 1, P2PK_COLL_MAX_RANKS, &r->min_ranks) ||
      parse_int(tok[2], 1, P2PK_COLL_MAX_RANKS, &r->max_ranks) || r->min_ranks > r->max_ranks)
    return p2pk_fail(P2PKIT_ERR_PARSE, "%s:%d: rank range '%s %s' is not 1 <= min <= max <= %d",
                     name, line, tok[1], tok[2], P2PK_COLL_MAX_RANKS);
  if (strcasecmp(tok[3], "inf") == 0) r->max_bytes = SIZE_MAX;
  else if (p2pk_parse_size(tok[3], &r->max_bytes) != 0)
    return p2pk_fail(P2PKIT_ERR_PARSE, "%s:%d: max_bytes '%s' is not a size or inf", name, line, tok[3]);
  if ((r->algo = p2pk_algo_from_name(tok[4])) < 0)
    return p2pk_fail(P2PKIT_ERR_PARSE, "%s:%d: algorithm '%s' is not oneshot, twoshot or staged",
                     name, line, tok[4]);
  if ((r->proto = p2pk_proto_from_name(tok[5])) < 0)
    return p2pk_fail(P2PKIT_ERR_PARSE, "%s:%d: protocol '%s' is not ll, ll128 or simple", name, line, tok[5]);
  if ((r->transport == P2PK_TRANSPORT_SHM) != (r->algo == P2PK_ALGO_STAGED))
    return p2pk_fail(P2PKIT_ERR_PARSE, "%s:%d: algorithm staged goes with transport shm, and "
                     "only it", name, line);
  if (parse_int(tok[6], 0, P2PK_COLL_MAX_BLOCKS, &r->blocks) ||
      parse_int(tok[7], 0, 1024, &r->threads))
    return p2pk_fail(P2PKIT_ERR_PARSE, "%s:%d: blocks '%s' (0..%d) or threads '%s' (0..1024) out "
                     "of range", name, line, tok[6], P2PK_COLL_MAX_BLOCKS, tok[7]);
  if (p2pk_parse_size(tok[8], &r->chunk) != 0 || r->chunk > (1u << 30))
    return p2pk_fail(P2PKIT_ERR_PARSE, "%s:%d: chunk '%s' is not a size up to 1G", name, line, tok[8]);
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_algo_table_parse(const char *name, const char *text, p2pk_algo_table *out) {
  if (!text || !out) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "algorithm table: no text");
  p2pk_algo_table t;
  memset(&t, 0, sizeof t);
  snprintf(t.source, sizeof t.source, "%s", name ? name : "(text)");
  name = t.source;
  int line = 0, header = 0;
  const char *p = text;
  while (*p) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    char buf[512];
    line++;
    if (len >= sizeof buf) return p2pk_fail(P2PKIT_ERR_PARSE, "%s:%d: line too long", name, line);
    memcpy(buf, p, len);
    buf[len] = '\0';
    p += len + (nl ? 1 : 0);
    char *hash = strchr(buf, '#');
    if (hash) *hash = '\0';
    char *tok[12], *save = NULL;
    int ntok = 0;
    for (char *s = strtok_r(buf, " \t\r", &save); s; s = strtok_r(NULL, " \t\r", &save))
      if (ntok < 12) tok[ntok++] = s;
      else ntok++;
    if (ntok == 0) continue;
    if (!header) {
      if (ntok != 2 || strcmp(tok[0], "p2pkit-algo-table") != 0 || strcmp(tok[1], "1") != 0)
        return p2pk_fail(P2PKIT_ERR_PARSE, "%s:%d: expected the header 'p2pkit-algo-table 1'",
                         name, line);
      header = 1;
      continue;
    }
    if (t.nrows == P2PK_ALGO_MAX_ROWS)
      return p2pk_fail(P2PKIT_ERR_PARSE, "%s:%d: more than %d rows", name, line, P2PK_ALGO_MAX_ROWS);
    P2PK_CHECK(parse_row(name, line, tok, ntok > 12 ? 12 : ntok, &t.rows[t.nrows]));
    t.nrows++;
  }
  if (!header) return p2pk_fail(P2PKIT_ERR_PARSE, "%s: empty; expected 'p2pkit-algo-table 1'", name);
  if (t.nrows == 0) return p2pk_fail(P2PKIT_ERR_PARSE, "%s: no rows", name);
  *out = t;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_algo_table_load(const char *path, p2pk_algo_table *t) {
  FILE *f = fopen(path, "rb");
  if (!f) return p2pk_fail(P2PKIT_ERR_IO, "algorithm table %s: %s", path, strerror(errno));
  char *text = malloc(1 << 16);
  if (!text) {
    fclose(f);
    return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "algorithm table %s: out of memory", path);
  }
  size_t n = fread(text, 1, (1 << 16) - 1, f);
  int toolong = !feof(f);
  fclose(f);
  text[n] = '\0';
  p2pkit_status_t st = toolong ? p2pk_fail(P2PKIT_ERR_PARSE, "algorithm table %s: over 64 KiB", path)
                               : p2pk_algo_table_parse(path, text, t);
  free(text);
  return st;
}

p2pkit_status_t p2pk_algo_table_write(const p2pk_algo_table *t, FILE *out) {
  fprintf(out, "p2pkit-algo-table 1\n");
  fprintf(out, "# transport ranks_min ranks_max max_bytes algo proto blocks threads chunk\n");
  for (int i = 0; i < t->nrows; i++) {
    const p2pk_algo_row *r = &t->rows[i];
    char maxb[32];
    if (r->max_bytes == SIZE_MAX) snprintf(maxb, sizeof maxb, "inf");
    else snprintf(maxb, sizeof maxb, "%zu", r->max_bytes);
    fprintf(out, "%s %d %d %s %s %s %d %d %zu\n", p2pk_transport_name(r->transport), r->min_ranks,
            r->max_ranks, maxb, p2pk_algo_name(r->algo), p2pk_proto_name(r->proto), r->blocks,
            r->threads, r->chunk);
  }
  return ferror(out) ? p2pk_fail(P2PKIT_ERR_IO, "writing the algorithm table failed") : P2PKIT_SUCCESS;
}

static int row_matches(const p2pk_algo_row *r, int transport, int nranks, size_t bytes) {
  return r->transport == transport && nranks >= r->min_ranks && nranks <= r->max_ranks &&
         bytes <= r->max_bytes;
}

const p2pk_algo_row *p2pk_algo_lookup(const p2pk_algo_table *t, int transport, int nranks,
                                      size_t bytes) {
  for (int i = 0; i < t->nrows; i++)
    if (row_matches(&t->rows[i], transport, nranks, bytes)) return &t->rows[i];
  return NULL;
}

static uint64_t fnv(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; i++) {
    h ^= (v >> (8 * i)) & 0xff;
    h *= 1099511628211ULL;
  }
  return h;
}

uint64_t p2pk_algo_table_hash(const p2pk_algo_table *t) {
  uint64_t h = 1469598103934665603ULL;
  h = fnv(h, (uint64_t)t->nrows);
  for (int i = 0; i < t->nrows; i++) {
    const p2pk_algo_row *r = &t->rows[i];
    uint64_t f[] = {(uint64_t)r->transport, (uint64_t)r->min_ranks, (uint64_t)r->max_ranks,
                    (uint64_t)r->max_bytes, (uint64_t)r->algo, (uint64_t)r->proto,
                    (uint64_t)r->blocks, (uint64_t)r->threads, (uint64_t)r->chunk};
    for (size_t k = 0; k < sizeof f / sizeof f[0]; k++) h = fnv(h, f[k]);
  }
  return h;
}

/* --- overrides and the final choice --------------------------------------------- */

p2pkit_status_t p2pk_algo_force_from_env(p2pk_algo_force *f) {
  memset(f, 0, sizeof *f);
  f->algo = f->proto = -1;
  const char *a = p2pk_param_str("P2PKIT_ALGO");
  if (a[0] && (f->algo = p2pk_algo_from_name(a)) < 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT,
                     "P2PKIT_ALGO=%s: expected oneshot, twoshot or staged", a);
  const char *p = p2pk_param_str("P2PKIT_PROTO");
  if (p[0] && (f->proto = p2pk_proto_from_name(p)) < 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "P2PKIT_PROTO=%s: expected ll, ll128 or simple", p);
  /* Within their ranges (0..1024 blocks, 0 or 64..512 threads): the
   * registry refuses anything else. */
  f->blocks = (int)p2pk_param_int("P2PKIT_COLL_BLOCKS");
  f->threads = (int)p2pk_param_int("P2PKIT_COLL_THREADS");
  f->chunk = p2pk_param_size("P2PKIT_COLL_CHUNK");
  return P2PKIT_SUCCESS;
}

static size_t clampz(size_t v, size_t lo, size_t hi) { return v < lo ? lo : v > hi ? hi : v; }
static size_t ceil_div(size_t a, size_t b) { return a / b + (a % b != 0); }
static size_t round_up16(size_t v) { return (v + 15) & ~(size_t)15; }

int p2pk_algo_staged_blocks_max(const p2pk_algo_geom *g) {
  /* Writers and readers each take half the grid; a handful fill PCIe. */
  int half = g->sm_count / 2 > 0 ? g->sm_count / 2 : 1;
  return half < 16 ? half : 16;
}

/* Whether a row's protocol can carry `bytes` on this communicator (LL and
 * LL128 only what their areas hold). */
static int row_fits(const p2pk_algo_row *r, const p2pk_algo_geom *g, size_t bytes) {
  if (r->proto == P2PK_PROTO_LL) return bytes <= g->ll_cap;
  if (r->proto == P2PK_PROTO_LL128) return bytes <= g->ll128_cap;
  return 1;
}

const p2pk_algo_row *p2pk_algo_lookup_fit(const p2pk_algo_table *t, const p2pk_algo_geom *g,
                                          size_t bytes) {
  int transport = g->staged ? P2PK_TRANSPORT_SHM : P2PK_TRANSPORT_P2P;
  for (int i = 0; i < t->nrows; i++)
    if (row_matches(&t->rows[i], transport, g->nranks, bytes) && row_fits(&t->rows[i], g, bytes))
      return &t->rows[i];
  return NULL;
}

/* The row a call takes: the table's first that matches and fits, with the
 * settings on top and what the transport can do over both. */
static void effective_row(const p2pk_algo_table *t, const p2pk_algo_force *f,
                          const p2pk_algo_geom *g, size_t bytes, p2pk_algo_row *row) {
  /* The first row that matches and whose protocol fits: with a smaller LL128
   * area (P2PKIT_LL128_MAX) the rows after it take over, as the table
   * orders them (two-shot on 2 GPUs), not the same row without its protocol. */
  const p2pk_algo_row *r = p2pk_algo_lookup_fit(t, g, bytes);
  if (r) *row = *r;
  else {
    memset(row, 0, sizeof *row);
    row->algo = g->staged ? P2PK_ALGO_STAGED : g->nranks > 2 ? P2PK_ALGO_TWOSHOT : P2PK_ALGO_ONESHOT;
    row->proto = P2PK_PROTO_SIMPLE;
  }
  if (f && f->algo >= 0 && f->algo != row->algo) {
    /* A forced algorithm replaces the row, and with it the row's tuning. */
    row->algo = f->algo;
    row->proto = row->algo == P2PK_ALGO_ONESHOT && bytes <= g->ll_cap ? P2PK_PROTO_LL : P2PK_PROTO_SIMPLE;
    row->blocks = row->threads = 0;
    row->chunk = 0;
  }
  if (f && f->proto >= 0 && f->proto != row->proto) {
    row->proto = f->proto;
    row->blocks = row->threads = 0;
    row->chunk = 0;
  }
  /* What the transport can do wins over any request. */
  if (g->staged) row->algo = P2PK_ALGO_STAGED;
  else if (row->algo == P2PK_ALGO_STAGED) row->algo = P2PK_ALGO_ONESHOT;
  /* LL and LL128 are one-shot protocols for what fits their areas. */
  if (row->proto != P2PK_PROTO_SIMPLE && (row->algo != P2PK_ALGO_ONESHOT || !row_fits(row, g, bytes))) {
    row->blocks = row->threads = 0, row->chunk = 0;
    row->proto = P2PK_PROTO_SIMPLE;
  }
  if (f && f->blocks > 0) row->blocks = f->blocks;
  if (f && f->threads > 0) row->threads = f->threads;
  if (f && f->chunk > 0) row->chunk = f->chunk;
}

/* LL and LL128: one line per thread (LL) or per 8 threads (LL128), up to
 * four blocks per SM (LL): an LL or LL128 block only waits for the same
 * block index on its peers, never for another block of its own grid, so
 * the grid need not be resident all at once. */
static void ll_grid(const p2pk_algo_row *row, const p2pk_algo_geom *g, size_t bytes, int sms,
                    p2pk_algo_choice *c) {
  const int threads = c->threads;
  size_t lanes = row->proto == P2PK_PROTO_LL ? ceil_div(bytes, 8)
                                             : ceil_div(bytes, P2PK_LL128_DATA) * 8;
  /* LL128 grids stay resident (a warp's passes interleave pushing and
   * taking in; a second wave would only start when the first is done). */
  int per = row->proto == P2PK_PROTO_LL128 ? g->ll128_per_sm[threads / 32] : 0;
  size_t ll_max = (size_t)(per > 0 ? per : 4) * (size_t)sms;
  if (ll_max > P2PK_COLL_MAX_BLOCKS) ll_max = P2PK_COLL_MAX_BLOCKS;
  size_t gb = row->blocks > 0 ? (size_t)row->blocks : ceil_div(lanes, (size_t)threads);
  c->blocks = (int)clampz(gb, 1, row->blocks > 0 ? P2PK_COLL_MAX_BLOCKS : ll_max);
  c->chunk = 0;
  /* LL128 warps with more than one pass (a grid capped or set smaller
   * than the message) that fit one block per SM work two passes an
   * iteration, their loads together; a grid the GPU holds whole keeps
   * the one-pass loop, whose fewer registers let more blocks fit. */
  if (row->proto == P2PK_PROTO_LL128 && g->ll128_x2 && c->blocks <= sms)
    c->ll128_x2 = lanes > (size_t)c->blocks * (size_t)threads;
}

/* Chunked protocols: split the message over G blocks, each moving mailbox-
 * sized pieces; per piece n shards for two-shot. */
static void chunked_grid(const p2pk_algo_row *row, const p2pk_algo_geom *g, size_t bytes, int sms,
                         p2pk_algo_choice *c) {
  size_t maxg = (size_t)sms < P2PK_COLL_MAX_BLOCKS ? (size_t)sms : P2PK_COLL_MAX_BLOCKS;
  size_t per = row->algo == P2PK_ALGO_TWOSHOT ? (size_t)g->nranks : 1;
  size_t box = row->algo == P2PK_ALGO_STAGED ? g->stage_mailbox : g->mailbox;
  size_t boxes = row->algo == P2PK_ALGO_STAGED ? P2PK_STAGE_MAILBOXES
                 : g->mailboxes > 0 ? (size_t)g->mailboxes : P2PK_COLL_MAILBOXES;
  size_t gmax = boxes / P2PK_COLL_SLOTS;
  if (row->algo == P2PK_ALGO_STAGED) {
    size_t half = sms / 2 > 0 ? (size_t)sms / 2 : 1;
    if (gmax > half) gmax = half;
    size_t dflt = (size_t)p2pk_algo_staged_blocks_max(g);
    if (row->blocks <= 0 && gmax > dflt) gmax = dflt;
  } else if (row->blocks <= 0 && gmax > maxg) {
    gmax = maxg;
  }
  if (gmax > P2PK_COLL_MAX_BLOCKS / (row->algo == P2PK_ALGO_STAGED ? 2 : 1))
    gmax = P2PK_COLL_MAX_BLOCKS / (row->algo == P2PK_ALGO_STAGED ? 2 : 1);
  /* Staged: 64 KiB pieces, so mid sizes get several blocks each way (one
   * block's stores to host memory are far below PCIe's rate: at 256 KiB
   * pieces a 512 KiB broadcast took 31 us against NCCL's 29 on 2x H200). */
  size_t min_piece = row->algo == P2PK_ALGO_STAGED ? (64u << 10) : (32u << 10);
  size_t gb = row->blocks > 0 ? (size_t)row->blocks : ceil_div(bytes, per * min_piece);
  gb = clampz(gb, 1, gmax);
  size_t k = row->chunk > 0 ? row->chunk : round_up16(ceil_div(bytes, gb * per));
  /* Staged: a block moves its share in pieces of at most 128 KiB, so its
   * reader starts on one while its writer fills the next (2x H200, P2P
   * off: 8 MiB all-reduce 336 -> 294 us, broadcast 248 -> 187 us; 128 MiB
   * unchanged). */
  if (row->algo == P2PK_ALGO_STAGED && row->chunk <= 0 && k > (128u << 10)) k = 128u << 10;
  k = clampz(k, 16, box) & ~(size_t)15;
  c->blocks = (int)gb;
  c->chunk = (uint32_t)k;
}

void p2pk_algo_choose(const p2pk_algo_table *t, const p2pk_algo_force *f, const p2pk_algo_geom *g,
                      size_t bytes, p2pk_algo_choice *c) {
  p2pk_algo_row row;
  effective_row(t, f, g, bytes, &row);
  c->ll128_x2 = 0;
  c->algo = row.algo;
  c->proto = row.proto;
  c->slots = P2PK_COLL_SLOTS;
  int sms = g->sm_count > 0 ? g->sm_count : 1;
  int threads = row.threads > 0 ? row.threads : row.proto == P2PK_PROTO_LL ? 256 : 512;
  /* The kernels are built for at most 512 threads (__launch_bounds__). */
  c->threads = (int)clampz((size_t)(threads / 32 * 32), 64, 512);
  if (row.proto == P2PK_PROTO_LL || row.proto == P2PK_PROTO_LL128) ll_grid(&row, g, bytes, sms, c);
  else chunked_grid(&row, g, bytes, sms, c);
}
