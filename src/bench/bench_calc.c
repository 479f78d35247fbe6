/* SPDX-License-Identifier: BSD-3-Clause */
/* The bench's arithmetic: statistics, expected rates from the links,
 * verdicts (each size's memory is bench_args.c's, which checks it). No CUDA
 * here. */
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

void p2pk_stats_compute(double *v, int n, p2pk_stats *s) {
  memset(s, 0, sizeof *s);
  s->n = n;
  if (n <= 0) return;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  s->min = v[0];
  s->max = v[n - 1];
  s->median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  double sum = 0;
  for (int i = 0; i < n; i++) sum += v[i];
  s->mean = sum / n;
  if (n > 1 && s->mean > 0) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (v[i] - s->mean) * (v[i] - s->mean);
    s->cv = sqrt(ss / (n - 1)) / s->mean;
  }
}

static double gpu_pcie(const struct p2pkit_topo *t, int g) {
  p2pkit_gpu_t info;
  if (p2pkit_topo_gpu((p2pkit_topo_t)t, g, &info) != P2PKIT_SUCCESS) return 0;
  /* The maximum the link trains to: an idle GPU often reports a lower
   * current generation to save power. */
  int gen = info.pcie_max_gen ? info.pcie_max_gen : info.pcie_gen;
  int width = info.pcie_max_width ? info.pcie_max_width : info.pcie_width;
  return p2pk_pcie_gbps(gen, width);
}

double p2pk_bench_pair_pcie(const struct p2pkit_topo *t, int a, int b) {
  double x = gpu_pcie(t, a), y = gpu_pcie(t, b);
  if (x <= 0) return y;
  if (y <= 0) return x;
  return x < y ? x : y;
}

void p2pk_bench_expected(const p2pkit_pair_t *pair, double pcie, int method, double *line,
                         double *expected) {
  if (p2pk_bench_method_p2p(method)) {
    *line = pair->line_gbps;
    *expected = pair->expected_gbps;
    return;
  }
  /* Staged (by p2pkit or by the driver): out over one PCIe link, in over the
   * other; a pipeline overlaps the two, the serial baseline takes them in turn. */
  *line = pcie;
  *expected = pcie * P2PK_PCIE_EFFICIENCY;
  if (method == P2PK_BM_STAGED_SERIAL) *expected /= 2;
}

/* --- report storage -------------------------------------------------------- */

void p2pk_bench_report_init(p2pk_bench_report *r) { memset(r, 0, sizeof *r); }

void p2pk_bench_report_free(p2pk_bench_report *r) {
  free(r->rows);
  free(r->lats);
  free(r->sweeps);
  memset(r, 0, sizeof *r);
}

static void *grow(void *arr, int *n, int *cap, size_t elem) {
  if (*n == *cap) {
    int nc = *cap ? *cap * 2 : 32;
    void *na = realloc(arr, (size_t)nc * elem);
    if (!na) return NULL;
    arr = na;
    *cap = nc;
  }
  memset((char *)arr + (size_t)*n * elem, 0, elem);
  (*n)++;
  return arr;
}

p2pk_bench_row *p2pk_bench_add_row(p2pk_bench_report *r) {
  void *a = grow(r->rows, &r->nrows, &r->cap_rows, sizeof *r->rows);
  if (!a) return NULL;
  r->rows = a;
  return &r->rows[r->nrows - 1];
}

p2pk_bench_lat *p2pk_bench_add_lat(p2pk_bench_report *r) {
  void *a = grow(r->lats, &r->nlats, &r->cap_lats, sizeof *r->lats);
  if (!a) return NULL;
  r->lats = a;
  return &r->lats[r->nlats - 1];
}

p2pk_bench_sweep *p2pk_bench_add_sweep(p2pk_bench_report *r) {
  void *a = grow(r->sweeps, &r->nsweeps, &r->cap_sweeps, sizeof *r->sweeps);
  if (!a) return NULL;
  r->sweeps = a;
  return &r->sweeps[r->nsweeps - 1];
}

/* --- verdicts --------------------------------------------------------------- */

static const p2pk_bench_row *anchor_of(const p2pk_bench_report *r, const p2pk_bench_row *x) {
  for (int i = 0; i < r->nrows; i++) {
    const p2pk_bench_row *a = &r->rows[i];
    if (a->method == P2PK_BM_MEMCPY_PEER && a->status == P2PK_ROW_OK && a->bytes == x->bytes &&
        a->mode == x->mode && a->src == x->src && a->dst == x->dst && a->total == x->total)
      return a;
  }
  return NULL;
}

/* Median rate of the other rows like x (same size, mode, method, link class). */
static double peer_median(const p2pk_bench_report *r, const p2pk_bench_row *x, int *count) {
  double *v = malloc((size_t)(r->nrows > 0 ? r->nrows : 1) * sizeof *v);
  int n = 0;
  if (!v) {
    *count = 0;
    return 0;
  }
  for (int i = 0; i < r->nrows; i++) {
    const p2pk_bench_row *p = &r->rows[i];
    if (p == x || p->status != P2PK_ROW_OK || p->bytes != x->bytes || p->mode != x->mode ||
        p->method != x->method || p->total != x->total || p->link != x->link)
      continue;
    v[n++] = p->gbps;
  }
  p2pk_stats s;
  p2pk_stats_compute(v, n, &s);
  free(v);
  *count = n;
  return s.median;
}

/* Every pair at once: does x's source send, or its destination receive,
 * in another pair of the same run too? Then x's rate is its share of links
 * the pairs contend for, not a measure of its own link. */
static int shares_links(const p2pk_bench_report *r, const p2pk_bench_row *x) {
  for (int i = 0; i < r->nrows; i++) {
    const p2pk_bench_row *p = &r->rows[i];
    if (p == x || p->total || p->mode != x->mode || p->method != x->method || p->bytes != x->bytes)
      continue;
    if (p->src == x->src || p->dst == x->dst) return 1;
  }
  return 0;
}

void p2pk_bench_verdicts(p2pk_bench_report *r) {
  for (int i = 0; i < r->nrows; i++) {
    p2pk_bench_row *x = &r->rows[i];
    x->low = 0;
    x->frac_line = x->ratio_anchor = 0;
    if (x->status != P2PK_ROW_OK) {
      snprintf(x->verdict, sizeof x->verdict, "%s", x->status == P2PK_ROW_SKIPPED ? "skipped" : "FAILED");
      continue;
    }
    if (!x->verified) {
      snprintf(x->verdict, sizeof x->verdict, "WRONG DATA");
      continue;
    }
    /* Both ways: two directions' bytes over full-duplex links. */
    double scale = x->total && x->mode == P2PK_MODE_BOTH ? 2 : 1;
    if (x->line_gbps > 0) x->frac_line = x->gbps / (x->line_gbps * scale);
    const p2pk_bench_row *a = anchor_of(r, x);
    if (a && a->gbps > 0) x->ratio_anchor = x->gbps / a->gbps;
    snprintf(x->verdict, sizeof x->verdict, "ok");
    /* Every pair at once shares links: only peers judge those rows. */
    int ceiling = x->mode != P2PK_MODE_ALL && x->bytes >= P2PK_BENCH_CEILING_MIN_BYTES &&
                  x->expected_gbps > 0;
    if (ceiling && x->gbps < P2PK_BENCH_LOW_EXPECTED * x->expected_gbps * scale) {
      x->low = 1;
      snprintf(x->verdict, sizeof x->verdict, "LOW (%.2fx of expected %.0f GB/s)",
               x->gbps / (x->expected_gbps * scale), x->expected_gbps * scale);
      continue;
    }
    /* With every pair at once, a GPU's copies to its peers share its links
     * unevenly (4x H200: pairs with identical links got 78 - 194 GB/s by
     * cudaMemcpyPeer), so such a pair is "shared", never LOW. */
    if (x->mode == P2PK_MODE_ALL && !x->total && shares_links(r, x)) {
      snprintf(x->verdict, sizeof x->verdict, "shared");
      continue;
    }
    int n = 0;
    double m = x->total ? 0 : peer_median(r, x, &n);
    if (n > 0 && m > 0 && x->gbps < P2PK_BENCH_LOW_PEERS * m) {
      x->low = 1;
      snprintf(x->verdict, sizeof x->verdict, "LOW (%.2fx of its %d %s median)", x->gbps / m, n,
               n == 1 ? "peer's" : "peers'");
    }
  }
}

double p2pk_bench_median_gbps(const p2pk_bench_report *r, int mode, int method, size_t bytes) {
  double *v = malloc((size_t)(r->nrows > 0 ? r->nrows : 1) * sizeof *v);
  if (!v) return 0;
  int n = 0;
  for (int i = 0; i < r->nrows; i++) {
    const p2pk_bench_row *x = &r->rows[i];
    if (x->status == P2PK_ROW_OK && x->mode == mode && x->method == method &&
        x->bytes == bytes && x->total == (mode == P2PK_MODE_BOTH))
      v[n++] = x->gbps;
  }
  p2pk_stats s;
  p2pk_stats_compute(v, n, &s);
  free(v);
  return s.median;
}

const p2pk_bench_sweep *p2pk_bench_best_sweep(const p2pk_bench_report *r, int method) {
  const p2pk_bench_sweep *best = NULL;
  for (int i = 0; i < r->nsweeps; i++) {
    const p2pk_bench_sweep *s = &r->sweeps[i];
    if (s->method == method && s->status == P2PK_ROW_OK && s->verified &&
        (!best || s->gbps > best->gbps))
      best = s;
  }
  return best;
}

/* --- SM sweep configurations ------------------------------------------------ */

static int add_lsu(p2pk_sm_config *out, int n, int max, int kind, int hint, int bps, int threads,
                   int unroll) {
  if (n >= max) return n;
  p2pk_sm_config c;
  p2pk_sm_config_default(&c);
  c.kind = kind;
  c.hint = hint;
  c.blocks_per_sm = bps;
  c.threads = threads;
  c.unroll = unroll;
  if (out) out[n] = c;
  return n + 1;
}

static int add_bulk(p2pk_sm_config *out, int n, int max, int kind, int bps, int tile_kib,
                    int stages) {
  if (n >= max) return n;
  p2pk_sm_config c;
  p2pk_sm_config_default(&c);
  c.kind = kind;
  c.blocks_per_sm = bps;
  c.tile_kib = tile_kib;
  c.stages = stages;
  if (out) out[n] = c;
  return n + 1;
}

int p2pk_bench_sm_sweep_configs(int which, p2pk_sm_config *out, int max) {
  int n = 0;
  if (which == P2PK_SM_SWEEP_SHORT) {
    /* The fastest shapes of the first full sweep on the 2x H200 (push and
     * pull, within 0.5% of the best), the default, and the bulk-copy kind
     * across tile sizes, stage counts and blocks per SM (that sweep stopped
     * before it reached them). */
    static const int lsu[][5] = {
        {P2PK_SMK_CHUNK, P2PK_HINT_CS, 2, 512, 8},      /* the default */
        {P2PK_SMK_STRIDE, P2PK_HINT_PLAIN, 1, 1024, 8}, {P2PK_SMK_CHUNK, P2PK_HINT_CS, 1, 256, 8},
        {P2PK_SMK_CHUNK, P2PK_HINT_PLAIN, 1, 1024, 8},  {P2PK_SMK_STRIDE, P2PK_HINT_NC, 1, 1024, 8},
        {P2PK_SMK_STRIDE, P2PK_HINT_CS, 2, 1024, 4},    {P2PK_SMK_STRIDE, P2PK_HINT_CS, 2, 1024, 8},
        {P2PK_SMK_STRIDE, P2PK_HINT_PLAIN, 4, 512, 2},  {P2PK_SMK_CHUNK, P2PK_HINT_CS, 4, 512, 8},
        {P2PK_SMK_CHUNK, P2PK_HINT_CS, 2, 256, 4},      {P2PK_SMK_CHUNK, P2PK_HINT_PLAIN, 4, 256, 8},
    };
    static const int bulk[][3] = {
        {1, 8, 4},  {1, 8, 6},  {1, 16, 4}, {1, 16, 6}, {1, 32, 4},
        {1, 32, 6}, {2, 16, 4}, {2, 32, 3}, {4, 8, 4},  {4, 16, 3},
    };
    for (size_t i = 0; i < sizeof lsu / sizeof lsu[0]; i++)
      n = add_lsu(out, n, max, lsu[i][0], lsu[i][1], lsu[i][2], lsu[i][3], lsu[i][4]);
    for (size_t i = 0; i < sizeof bulk / sizeof bulk[0]; i++)
      n = add_bulk(out, n, max, P2PK_SMK_TMA, bulk[i][0], bulk[i][1], bulk[i][2]);
    return n;
  }
  static const int bps[] = {1, 2, 4}, thr[] = {256, 512, 1024}, unr[] = {2, 4, 8};
  for (int kind = P2PK_SMK_STRIDE; kind <= P2PK_SMK_CHUNK; kind++)
    for (int h = 0; h < P2PK_HINT_COUNT; h++)
      for (size_t a = 0; a < 3; a++)
        for (size_t t = 0; t < 3; t++)
          for (size_t u = 0; u < 3; u++)
            if (bps[a] * thr[t] <= 2048) /* resident at once */
              n = add_lsu(out, n, max, kind, h, bps[a], thr[t], unr[u]);
  static const int tbps[] = {1, 2, 3, 4}, tile[] = {8, 16, 32}, stages[] = {2, 3, 4, 6};
  for (size_t a = 0; a < 4; a++)
    for (size_t t = 0; t < 3; t++)
      for (size_t s = 0; s < 4; s++) {
        int smem = tile[t] * stages[s];
        if (smem > P2PK_SM_MAX_SMEM_KIB || smem * tbps[a] > 220) continue;
        n = add_bulk(out, n, max, P2PK_SMK_TMA, tbps[a], tile[t], stages[s]);
      }
  return n;
}

/* --- what fails a run ---------------------------------------------------------- */

int p2pk_bench_failures(const p2pk_bench_report *r, char *msg, size_t len) {
  int wrong = 0, failed = 0;
  for (int i = 0; i < r->nrows; i++) {
    wrong += r->rows[i].status == P2PK_ROW_OK && !r->rows[i].verified;
    failed += r->rows[i].status == P2PK_ROW_FAILED;
  }
  for (int i = 0; i < r->nlats; i++) {
    wrong += r->lats[i].status == P2PK_ROW_OK && !r->lats[i].verified;
    failed += r->lats[i].status == P2PK_ROW_FAILED;
  }
  /* A sweep explores: a configuration that fails is reported with its reason
   * and the sweep goes on; only a method none of whose configurations ran
   * fails the run. */
  int sw_ok[P2PK_BM_COUNT] = {0}, sw_failed[P2PK_BM_COUNT] = {0}, dead = 0;
  for (int i = 0; i < r->nsweeps; i++) {
    const p2pk_bench_sweep *s = &r->sweeps[i];
    wrong += s->status == P2PK_ROW_OK && !s->verified;
    if (s->method < 0 || s->method >= P2PK_BM_COUNT) continue;
    sw_ok[s->method] += s->status == P2PK_ROW_OK;
    sw_failed[s->method] += s->status == P2PK_ROW_FAILED;
  }
  for (int m = 0; m < P2PK_BM_COUNT; m++)
    if (sw_failed[m] && !sw_ok[m] && !dead) dead = m + 1;
  if (wrong) {
    snprintf(msg, len, "%d measurement%s moved wrong data (see the verified column)", wrong,
             wrong == 1 ? "" : "s");
    return -1;
  }
  if (failed) {
    snprintf(msg, len, "%d measurement%s failed (see the notes)", failed, failed == 1 ? "" : "s");
    return -1;
  }
  if (dead) {
    snprintf(msg, len, "every one of the %d %s sweep configurations failed (see the notes)",
             sw_failed[dead - 1], p2pk_bench_method_name(dead - 1));
    return -1;
  }
  return 0;
}

int p2pk_bench_sweep_failed(const p2pk_bench_report *r) {
  int n = 0;
  for (int i = 0; i < r->nsweeps; i++) n += r->sweeps[i].status == P2PK_ROW_FAILED;
  return n;
}
