/* SPDX-License-Identifier: BSD-3-Clause */
/* The bench's arithmetic: statistics, expected rates from the links,
 * verdicts (LOW against the ceiling and against peers), memory planning. */
#include <stdint.h>
#include <string.h>

#include "bench/bench.h"
#include "test.h"

TEST(stats) {
  p2pk_stats s;
  double a[] = {3, 1, 2};
  p2pk_stats_compute(a, 3, &s);
  CHECK_NEAR(s.median, 2, 1e-12);
  CHECK_NEAR(s.min, 1, 1e-12);
  CHECK_NEAR(s.max, 3, 1e-12);
  CHECK_NEAR(s.mean, 2, 1e-12);
  CHECK_NEAR(s.cv, 0.5, 1e-12); /* sample sd 1 over mean 2 */
  CHECK_EQ(s.n, 3);
  double b[] = {4, 1, 3, 2};
  p2pk_stats_compute(b, 4, &s);
  CHECK_NEAR(s.median, 2.5, 1e-12);
  double c[] = {7};
  p2pk_stats_compute(c, 1, &s);
  CHECK_NEAR(s.median, 7, 1e-12);
  CHECK_NEAR(s.cv, 0, 1e-12);
  p2pk_stats_compute(NULL, 0, &s);
  CHECK_EQ(s.n, 0);
  CHECK_NEAR(s.median, 0, 0);
}

/* Two GPUs on PCIe gen `g0`/`g1` x16 (max link), optionally 18 NVLinks. */
static struct p2pkit_topo *two(int g0, int g1, int nvlink) {
  struct p2pkit_topo *t = p2pk_topo_new("test", "calc");
  t->known = P2PK_KNOW_PCI_TREE | P2PK_KNOW_HOSTBRIDGES | P2PK_KNOW_NVLINK | P2PK_KNOW_PCIE_LINK;
  int hb = p2pk_topo_add_pci(t, P2PK_PCI_HOSTBRIDGE, "0000:00", -1);
  const char *bus[2] = {"0000:00:06.0", "0000:00:07.0"};
  int gen[2] = {g0, g1};
  for (int g = 0; g < 2; g++) {
    int pci = p2pk_topo_add_pci(t, P2PK_PCI_GPU, bus[g], hb);
    /* Idle GPUs train down: current gen 1, max as given. */
    t->pci[pci].link_gen = 1;
    t->pci[pci].link_width = 16;
    t->pci[pci].max_gen = gen[g];
    t->pci[pci].max_width = 16;
    int gi = p2pk_topo_add_gpu(t, bus[g]);
    t->gpus[gi].pci = pci;
    if (nvlink) {
      t->gpus[gi].nvlink_gbps = 26.5625;
      t->gpus[gi].ngroups = 1;
      t->gpus[gi].groups[0].peer = P2PK_NVL_SWITCH;
      t->gpus[gi].groups[0].count = 18;
    }
  }
  for (int a = 0; a < 2; a++) t->p2p[a][!a].cuda_access = 1;
  return t;
}

TEST(expected_rates) {
  struct p2pkit_topo *t = two(5, 5, 1);
  p2pkit_pair_t pair;
  p2pk_pair_info(t, 0, 1, &pair);
  CHECK_EQ(pair.nvlinks, 18);
  double pcie = p2pk_bench_pair_pcie(t, 0, 1);
  CHECK_NEAR(pcie, 3.938 * 16, 1e-9); /* gen5 x16 from the max link, not the idle gen1 */
  double line, exp;
  for (int m = 0; m < P2PK_BM_COUNT; m++) {
    p2pk_bench_expected(&pair, pcie, m, &line, &exp);
    if (p2pk_bench_method_p2p(m)) {
      CHECK_NEAR(line, 18 * 26.5625, 1e-9);
      CHECK_NEAR(exp, pair.expected_gbps, 1e-9);
      CHECK(exp > 0.7 * line && exp < line);
    } else {
      CHECK_NEAR(line, pcie, 1e-9);
      CHECK_NEAR(exp, (m == P2PK_BM_STAGED_SERIAL ? 0.5 : 1) * 0.87 * pcie, 1e-9);
    }
  }
  p2pkit_topo_destroy(t);
  t = two(5, 4, 0); /* P2P over PCIe: the slower link bounds it */
  p2pk_pair_info(t, 0, 1, &pair);
  pcie = p2pk_bench_pair_pcie(t, 0, 1);
  CHECK_NEAR(pcie, 1.969 * 16, 1e-9);
  p2pk_bench_expected(&pair, pcie, P2PK_BM_CE, &line, &exp);
  CHECK_NEAR(line, pair.line_gbps, 1e-9);
  CHECK(line > 0);
  p2pkit_topo_destroy(t);
}

static p2pk_bench_row *row(p2pk_bench_report *r, int method, int mode, int src, int dst,
                           size_t bytes, double gbps, double expected) {
  p2pk_bench_row *x = p2pk_bench_add_row(r);
  x->method = method;
  x->mode = mode;
  x->src = src;
  x->dst = dst;
  x->bytes = bytes;
  x->gbps = gbps;
  x->expected_gbps = expected;
  x->line_gbps = expected / 0.82;
  x->link = P2PKIT_LINK_NVLINK;
  x->verified = 1;
  x->npairs = 1;
  return x;
}

TEST(verdicts) {
  p2pk_bench_report r;
  p2pk_bench_report_init(&r);
  size_t big = 256u << 20, small = 8u << 10;
  row(&r, P2PK_BM_MEMCPY_PEER, P2PK_MODE_ONEWAY, 0, 1, big, 400, 392);
  row(&r, P2PK_BM_CE, P2PK_MODE_ONEWAY, 0, 1, big, 390, 392);
  row(&r, P2PK_BM_CE, P2PK_MODE_ONEWAY, 1, 0, big, 250, 392); /* under 0.7 x 392 */
  row(&r, P2PK_BM_SM_PUSH, P2PK_MODE_ONEWAY, 0, 1, small, 5, 392); /* small: no ceiling */
  row(&r, P2PK_BM_SM_PUSH, P2PK_MODE_ONEWAY, 1, 0, small, 5.5, 392);
  for (int i = 0; i < 4; i++) /* unknown expected rate: peers judge */
    row(&r, P2PK_BM_STAGED, P2PK_MODE_ONEWAY, i, (i + 1) % 4, big, i == 3 ? 70 : 100, 0);
  p2pk_bench_row *w = row(&r, P2PK_BM_DRIVER, P2PK_MODE_ONEWAY, 0, 1, big, 30, 0);
  w->verified = 0;
  p2pk_bench_row *sk = row(&r, P2PK_BM_SM_PULL, P2PK_MODE_ONEWAY, 0, 1, big, 0, 392);
  sk->status = P2PK_ROW_SKIPPED;
  p2pk_bench_row *bt = row(&r, P2PK_BM_CE, P2PK_MODE_BOTH, 0, 1, big, 700, 392);
  bt->total = 1;
  p2pk_bench_row *bl = row(&r, P2PK_BM_CE, P2PK_MODE_BOTH, 0, 1, big, 500, 392);
  bl->src = 2; /* a second both-ways total, under 0.7 x 2 x 392 */
  bl->dst = 3;
  bl->total = 1;
  p2pk_bench_verdicts(&r);

  CHECK_EQ(r.rows[0].low, 0);
  CHECK_NEAR(r.rows[0].ratio_anchor, 1.0, 1e-12);
  CHECK_EQ(r.rows[1].low, 0);
  CHECK_NEAR(r.rows[1].ratio_anchor, 390.0 / 400, 1e-12);
  CHECK_NEAR(r.rows[1].frac_line, 390 / (392 / 0.82), 1e-9);
  CHECK_STR(r.rows[1].verdict, "ok");
  CHECK_EQ(r.rows[2].low, 1);
  CHECK_STR(r.rows[2].verdict, "LOW (0.64x of expected 392 GB/s)");
  CHECK_NEAR(r.rows[2].ratio_anchor, 0, 0); /* no anchor for 1 -> 0 */
  CHECK_EQ(r.rows[3].low, 0);
  CHECK_EQ(r.rows[4].low, 0);
  for (int i = 5; i < 8; i++) CHECK_EQ(r.rows[i].low, 0);
  CHECK_EQ(r.rows[8].low, 1);
  CHECK_STR(r.rows[8].verdict, "LOW (0.70x of its 3 peers' median)");
  CHECK_STR(r.rows[9].verdict, "WRONG DATA");
  CHECK_STR(r.rows[10].verdict, "skipped");
  CHECK_EQ(r.rows[11].low, 0);
  CHECK_NEAR(r.rows[11].frac_line, 700 / (2 * 392 / 0.82), 1e-9);
  CHECK_EQ(r.rows[12].low, 1);
  CHECK_STR(r.rows[12].verdict, "LOW (0.64x of expected 784 GB/s)");

  /* Every pair at once on 3 GPUs: each GPU sends to 2 peers, so a pair's
   * rate is its share of links the others use too: not judged ("shared"),
   * however low. On 2 GPUs (0->1 with 1->0) each pair has its links to
   * itself, and peers judge it. */
  p2pk_bench_report a;
  p2pk_bench_report_init(&a);
  for (int s = 0; s < 3; s++)
    for (int d = 0; d < 3; d++)
      if (s != d) row(&a, P2PK_BM_CE, P2PK_MODE_ALL, s, d, big, s == 0 && d == 1 ? 60 : 200, 392);
  row(&a, P2PK_BM_CE, P2PK_MODE_ALL, 0, 1, small, 100, 392);
  row(&a, P2PK_BM_CE, P2PK_MODE_ALL, 1, 0, small, 40, 392);
  p2pk_bench_verdicts(&a);
  for (int i = 0; i < 6; i++) {
    CHECK_EQ(a.rows[i].low, 0);
    CHECK_STR(a.rows[i].verdict, "shared");
  }
  CHECK_EQ(a.rows[6].low, 0);
  CHECK_STR(a.rows[6].verdict, "ok");
  CHECK_EQ(a.rows[7].low, 1);
  CHECK_STR(a.rows[7].verdict, "LOW (0.40x of its 1 peer's median)");
  p2pk_bench_report_free(&a);

  CHECK_NEAR(p2pk_bench_median_gbps(&r, P2PK_MODE_ONEWAY, P2PK_BM_CE, big), 320, 1e-9);
  CHECK_NEAR(p2pk_bench_median_gbps(&r, P2PK_MODE_BOTH, P2PK_BM_CE, big), 600, 1e-9);
  CHECK_NEAR(p2pk_bench_median_gbps(&r, P2PK_MODE_ONEWAY, P2PK_BM_SM_PULL, big), 0, 0);
  p2pk_bench_report_free(&r);
}

TEST(best_sweep) {
  p2pk_bench_report r;
  p2pk_bench_report_init(&r);
  double g[] = {370, 385, 390, 380};
  int verified[] = {1, 1, 0, 1};
  for (int i = 0; i < 4; i++) {
    p2pk_bench_sweep *s = p2pk_bench_add_sweep(&r);
    s->method = i < 3 ? P2PK_BM_SM_PUSH : P2PK_BM_SM_PULL;
    s->gbps = g[i];
    s->verified = verified[i];
    snprintf(s->config, sizeof s->config, "c%d", i);
  }
  const p2pk_bench_sweep *b = p2pk_bench_best_sweep(&r, P2PK_BM_SM_PUSH);
  CHECK(b != NULL);
  if (b) CHECK_STR(b->config, "c1"); /* the faster one moved wrong data */
  b = p2pk_bench_best_sweep(&r, P2PK_BM_SM_PULL);
  if (b) CHECK_STR(b->config, "c3");
  CHECK(p2pk_bench_best_sweep(&r, P2PK_BM_STAGED) == NULL);
  p2pk_bench_report_free(&r);
}

TEST(memory_plan) {
  p2pk_bench_opts o;
  p2pk_bench_opts_init(&o);
  char err[256];
  char *argv[] = {"bench", "--pairs", "0:1"};
  CHECK_EQ(p2pk_bench_parse(3, argv, &o, err, sizeof err), 0);
  size_t need[4];
  p2pk_bench_mem_need(&o, 256u << 20, 4, need);
  CHECK_EQ(need[0], 256u << 20);
  CHECK_EQ(need[1], 256u << 20);
  CHECK_EQ(need[2], 0);
  o.modes |= 1u << P2PK_MODE_BOTH; /* the reverse pair's buffers too */
  p2pk_bench_mem_need(&o, 256u << 20, 4, need);
  CHECK_EQ(need[0], 512u << 20);
  p2pk_bench_mem_need(&o, 3, 4, need); /* rounded to the 2 MiB granularity */
  CHECK_EQ(need[1], 4u << 20);
  /* Sizes near SIZE_MAX: the rounding and the sums saturate and say so,
   * instead of wrapping to a need that would seem to fit (2^63 both ways
   * once wrapped to 0). */
  CHECK_EQ(p2pk_bench_mem_need(&o, (size_t)1 << 62, 4, need), 0);
  CHECK(need[0] == (size_t)1 << 63);
  CHECK_EQ(p2pk_bench_mem_need(&o, (size_t)1 << 63, 4, need), -1);
  CHECK(need[0] == SIZE_MAX && need[1] == SIZE_MAX && need[2] == 0);
  CHECK_EQ(p2pk_bench_mem_need(&o, SIZE_MAX - 1, 4, need), -1); /* the rounding alone */
  CHECK(need[0] == SIZE_MAX);
  o.methods = 0;
  o.sm_sweep = 1;
  CHECK_EQ(p2pk_bench_mem_need(&o, SIZE_MAX, 4, need), 0); /* no bandwidth run at that size */
  CHECK_EQ(need[0], 256u << 20); /* the sweep runs at -b on the first pair */
  o.sizes[0] = SIZE_MAX;
  CHECK_EQ(p2pk_bench_mem_need(&o, SIZE_MAX, 4, need), -1);
  p2pk_bench_opts_free(&o);

  size_t n2[2] = {300u << 20, 10}, f2[2] = {200u << 20, 100};
  CHECK_EQ(p2pk_bench_mem_check(n2, f2, 2, 150u << 20, err, sizeof err), -1);
  CHECK_STR(err, "size 150 MiB does not fit: the run needs 300 MiB on GPU0, which has 200 MiB free");
  f2[0] = 300u << 20;
  CHECK_EQ(p2pk_bench_mem_check(n2, f2, 2, 150u << 20, err, sizeof err), 0);
}

static int same_config(const p2pk_sm_config *a, const p2pk_sm_config *b) {
  return a->kind == b->kind && a->hint == b->hint && a->blocks_per_sm == b->blocks_per_sm &&
         a->threads == b->threads && a->unroll == b->unroll && a->tile_kib == b->tile_kib &&
         a->stages == b->stages;
}

/* Every swept configuration is one the setting accepts (its text parses back
 * to it), the vector kinds keep every block resident, the bulk kind fits its
 * shared memory; the short list is ~20 of the full one, with every kind. */
TEST(sm_sweep_lists) {
  static p2pk_sm_config full[P2PK_BENCH_MAX_SM_CONFIGS], shrt[P2PK_BENCH_MAX_SM_CONFIGS];
  int nf = p2pk_bench_sm_sweep_configs(P2PK_SM_SWEEP_FULL, full, P2PK_BENCH_MAX_SM_CONFIGS);
  int ns = p2pk_bench_sm_sweep_configs(P2PK_SM_SWEEP_SHORT, shrt, P2PK_BENCH_MAX_SM_CONFIGS);
  CHECK_EQ(nf, p2pk_bench_sm_sweep_configs(P2PK_SM_SWEEP_FULL, NULL, P2PK_BENCH_MAX_SM_CONFIGS));
  CHECK_EQ(ns, p2pk_bench_sm_sweep_configs(P2PK_SM_SWEEP_SHORT, NULL, P2PK_BENCH_MAX_SM_CONFIGS));
  CHECK_EQ(nf, 144 + 36); /* 2 kinds x 3 hints x 8 resident shapes x 3 unrolls; 36 TMA */
  CHECK(nf < P2PK_BENCH_MAX_SM_CONFIGS);
  CHECK(ns >= 16 && ns <= 24);
  CHECK_EQ(p2pk_bench_sm_sweep_configs(P2PK_SM_SWEEP_FULL, full, 5), 5);
  p2pk_sm_config def;
  p2pk_sm_config_default(&def);
  for (int list = 0; list < 2; list++) {
    const p2pk_sm_config *c = list ? shrt : full;
    int n = list ? ns : nf;
    unsigned kinds = 0;
    int has_default = 0;
    for (int i = 0; i < n; i++) {
      char text[160], err[160];
      p2pk_sm_config back;
      p2pk_sm_config_format(&c[i], text, sizeof text);
      if (p2pk_sm_config_parse(text, &back, err, sizeof err) != 0) T_FAIL("%s: %s", text, err);
      else CHECK(same_config(&back, &c[i]));
      kinds |= 1u << c[i].kind;
      has_default |= same_config(&c[i], &def);
      if (c[i].kind == P2PK_SMK_TMA) {
        CHECK(c[i].tile_kib * c[i].stages <= P2PK_SM_MAX_SMEM_KIB);
        CHECK(c[i].tile_kib * c[i].stages * c[i].blocks_per_sm <= 220);
      } else {
        CHECK(c[i].blocks_per_sm * c[i].threads <= 2048);
      }
      for (int k = 0; k < i; k++)
        if (same_config(&c[k], &c[i])) T_FAIL("%s is listed twice", text);
      if (list) { /* the short list is part of the full one */
        int found = 0;
        for (int k = 0; k < nf && !found; k++) found = same_config(&full[k], &c[i]);
        if (!found) T_FAIL("short-list %s is not in the full sweep", text);
      }
    }
    CHECK_EQ(kinds, (1u << P2PK_SMK_COUNT) - 1);
    CHECK(has_default);
  }
}

/* A failed sweep configuration is reported, not fatal; a sweep none of whose
 * configurations ran, wrong data, or a failed measurement fail the run. */
TEST(failures) {
  p2pk_bench_report r;
  p2pk_bench_report_init(&r);
  char msg[256];
  CHECK_EQ(p2pk_bench_failures(&r, msg, sizeof msg), 0);
  for (int i = 0; i < 6; i++) {
    p2pk_bench_sweep *s = p2pk_bench_add_sweep(&r);
    if (!s) {
      T_FAIL("out of memory");
      return;
    }
    s->method = i < 3 ? P2PK_BM_SM_PUSH : P2PK_BM_SM_PULL;
    s->status = P2PK_ROW_OK;
    s->verified = 1;
  }
  r.sweeps[1].status = P2PK_ROW_FAILED;
  r.sweeps[1].verified = 0;
  CHECK_EQ(p2pk_bench_failures(&r, msg, sizeof msg), 0);
  CHECK_EQ(p2pk_bench_sweep_failed(&r), 1);
  for (int i = 3; i < 6; i++) r.sweeps[i].status = P2PK_ROW_FAILED;
  CHECK_EQ(p2pk_bench_failures(&r, msg, sizeof msg), -1);
  CHECK_STR(msg, "every one of the 3 p2p-sm-pull sweep configurations failed (see the notes)");
  r.sweeps[5].status = P2PK_ROW_SKIPPED; /* skipped is not ran: still none ran */
  CHECK_EQ(p2pk_bench_failures(&r, msg, sizeof msg), -1);
  r.sweeps[4].status = P2PK_ROW_OK;
  r.sweeps[4].verified = 1;
  CHECK_EQ(p2pk_bench_failures(&r, msg, sizeof msg), 0);
  r.sweeps[0].verified = 0; /* ran, wrong bytes */
  CHECK_EQ(p2pk_bench_failures(&r, msg, sizeof msg), -1);
  CHECK_STR(msg, "1 measurement moved wrong data (see the verified column)");
  r.sweeps[0].verified = 1;
  p2pk_bench_row *x = p2pk_bench_add_row(&r);
  p2pk_bench_lat *l = p2pk_bench_add_lat(&r);
  if (!x || !l) {
    T_FAIL("out of memory");
    p2pk_bench_report_free(&r);
    return;
  }
  x->status = P2PK_ROW_FAILED;
  l->status = P2PK_ROW_OK;
  l->verified = 1;
  CHECK_EQ(p2pk_bench_failures(&r, msg, sizeof msg), -1);
  CHECK_STR(msg, "1 measurement failed (see the notes)");
  x->status = P2PK_ROW_SKIPPED;
  CHECK_EQ(p2pk_bench_failures(&r, msg, sizeof msg), 0);
  l->verified = 0;
  CHECK_EQ(p2pk_bench_failures(&r, msg, sizeof msg), -1);
  p2pk_bench_report_free(&r);
}

T_MAIN(T_CASE(stats), T_CASE(expected_rates), T_CASE(verdicts), T_CASE(best_sweep),
       T_CASE(memory_plan), T_CASE(sm_sweep_lists), T_CASE(failures))
