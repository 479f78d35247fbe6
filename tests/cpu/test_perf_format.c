/* SPDX-License-Identifier: BSD-3-Clause */
/* What `p2pkit perf` prints: bandwidth definitions per collective, element
 * counts, nccl-tests' columns (aligned under their headers), the footer, the
 * JSON document (parsed back with python3) and the algorithm table (parsed
 * back with src/coll's own reader). */
#include <unistd.h>

#include "coll/select/algo.h"
#include "perf/perf.h"
#include "test.h"

static perf_args args;
static perf_report rep;
static perf_pass pass;
static char buf[1 << 16];

static void setup(const char *coll, int vs, int nranks) {
  p2pk_perf_args_default(&args);
  args.coll = p2pk_perf_coll(coll);
  args.vs_nccl = vs;
  memset(&rep, 0, sizeof rep);
  memset(&pass, 0, sizeof pass);
  rep.args = &args;
  rep.nranks = nranks;
  rep.nprocs = 1;
  rep.gpus_per_proc = nranks;
  for (int i = 0; i < nranks; i++) {
    rep.ranks[i].rank = rep.ranks[i].device = i;
    rep.ranks[i].pid = 4242;
    snprintf(rep.ranks[i].name, sizeof rep.ranks[i].name, "NVIDIA H200");
    snprintf(rep.ranks[i].busid, sizeof rep.ranks[i].busid, "0000:00:0%d.0", 6 + i);
  }
  snprintf(rep.hostname, sizeof rep.hostname, "testhost");
  snprintf(rep.date, sizeof rep.date, "2026-11-29T12:00:00Z");
  snprintf(rep.driver, sizeof rep.driver, "580.159.04");
  rep.nccl_version = 22803;
  snprintf(rep.nccl_path, sizeof rep.nccl_path, "libnccl.so.2");
  rep.npasses = 1;
  rep.passes = &pass;
}

static perf_stat stat_of(double t, int64_t wrong) {
  perf_stat s = {1, t, t * 0.9, t * 1.2, t * 0.5, wrong};
  return s;
}

static perf_row *add_row(perf_pass *p, size_t bytes, double t_oop, double t_ip, double n_oop,
                         double n_ip, int64_t wrong) {
  perf_row *r = &p->rows[p->nrows++];
  memset(r, 0, sizeof *r);
  p2pk_perf_counts(args.coll, bytes, p2pkit_dtype_size(args.dtype), rep.nranks, &r->k);
  r->v.dtype = args.dtype;
  r->v.op = args.coll->uses_op ? args.op : P2PKIT_SUM;
  r->v.root = args.coll->uses_root ? args.root : -1;
  r->algo = r->proto = -1;
  if (t_oop > 0) r->st[PERF_LIB_P2PKIT][0] = stat_of(t_oop, wrong);
  if (t_ip > 0) r->st[PERF_LIB_P2PKIT][1] = stat_of(t_ip, 0);
  if (n_oop > 0) r->st[PERF_LIB_NCCL][0] = stat_of(n_oop, 0);
  if (n_ip > 0) r->st[PERF_LIB_NCCL][1] = stat_of(n_ip, 0);
  return r;
}

/* Right edges of whitespace-separated tokens (a leading "#" is skipped). */
static int token_ends(const char *line, int *ends, int max) {
  int n = 0;
  for (int i = 0; line[i] && line[i] != '\n'; i++) {
    if (line[i] != ' ' && (line[i + 1] == ' ' || line[i + 1] == '\n' || !line[i + 1])) {
      if (i == 0 && line[0] == '#') continue;
      if (n < max) ends[n] = i;
      n++;
    }
  }
  return n;
}

static int tokens(const char *line, char tok[][32], int max) {
  int n = 0;
  const char *p = line;
  while (*p && *p != '\n') {
    while (*p == ' ') p++;
    if (!*p || *p == '\n') break;
    int len = 0;
    while (p[len] && p[len] != ' ' && p[len] != '\n') len++;
    if (n < max) snprintf(tok[n], 32, "%.*s", len, p);
    n++;
    p += len;
  }
  return n;
}

static const char *line_with(const char *text, const char *needle) {
  const char *p = strstr(text, needle);
  if (!p) return NULL;
  while (p > text && p[-1] != '\n') p--;
  return p;
}

TEST(busbw_factors) {
  const perf_coll *ar = p2pk_perf_coll("all_reduce");
  CHECK_NEAR(ar->factor(2), 1.0, 1e-12);
  CHECK_NEAR(ar->factor(4), 1.5, 1e-12);
  CHECK_NEAR(ar->factor(8), 1.75, 1e-12);
  CHECK_NEAR(ar->factor(1), 0.0, 1e-12);
  static const char *nm1[] = {"all_gather", "reduce_scatter", "alltoall", "gather", "scatter"};
  for (int i = 0; i < 5; i++) {
    CHECK_NEAR(p2pk_perf_coll(nm1[i])->factor(4), 0.75, 1e-12);
    CHECK_NEAR(p2pk_perf_coll(nm1[i])->factor(2), 0.5, 1e-12);
  }
  static const char *one[] = {"broadcast", "reduce", "sendrecv"};
  for (int i = 0; i < 3; i++)
    for (int n = 1; n <= 8; n++) CHECK_NEAR(p2pk_perf_coll(one[i])->factor(n), 1.0, 1e-12);
  CHECK_NEAR(p2pk_perf_algbw(1000000000, 1e6), 1.0, 1e-12); /* 1 GB in 1 s */
  CHECK_NEAR(p2pk_perf_algbw(1 << 20, 10.0), 104.8576, 1e-9);
  CHECK_NEAR(p2pk_perf_busbw(ar, 1000000000, 1e6, 4), 1.5, 1e-12);
  CHECK(isnan(p2pk_perf_algbw(8, 0)));
  /* nccl-tests' GatherGetBw and ScatterGetBw: count (a rank's block) x
   * nranks x type size / time, x (n-1)/n; the size column is that whole. */
  for (int i = 0; i < 2; i++) {
    const perf_coll *c = p2pk_perf_coll(i ? "scatter" : "gather");
    perf_counts k;
    p2pk_perf_counts(c, 1 << 20, 4, 4, &k);
    const double sec = 100e-6, base = (double)k.param * 4 * 4 / 1.0e9 / sec;
    CHECK_EQ(k.bytes, (size_t)1 << 20);
    CHECK_NEAR(p2pk_perf_algbw(k.bytes, sec * 1e6), base, 1e-9);
    CHECK_NEAR(p2pk_perf_busbw(c, k.bytes, sec * 1e6, 4), base * 3 / 4, 1e-9);
  }
}

TEST(element_counts) {
  perf_counts k;
  p2pk_perf_counts(p2pk_perf_coll("all_reduce"), 1 << 20, 4, 4, &k);
  CHECK_EQ(k.count, 262144);
  CHECK_EQ(k.bytes, 1 << 20);
  CHECK(k.param == k.count && k.send_elems == k.count && k.recv_elems == k.count);
  CHECK(k.ip_send_step == 0 && k.ip_recv_step == 0);
  p2pk_perf_counts(p2pk_perf_coll("all_gather"), 1 << 20, 4, 3, &k);
  CHECK_EQ(k.param, 87381);
  CHECK_EQ(k.count, 262143);
  CHECK_EQ(k.bytes, 1048572);
  CHECK_EQ(k.send_elems, 87381);
  CHECK_EQ(k.recv_elems, 262143);
  CHECK_EQ(k.ip_send_step, 87381);
  p2pk_perf_counts(p2pk_perf_coll("reduce_scatter"), 1 << 20, 4, 3, &k);
  CHECK_EQ(k.send_elems, 262143);
  CHECK_EQ(k.recv_elems, 87381);
  CHECK_EQ(k.ip_recv_step, 87381);
  /* gather: all_gather's buffers, the whole on the root; scatter:
   * reduce_scatter's, the whole sent from the root (nccl-tests' counts and
   * in-place offsets) */
  p2pk_perf_counts(p2pk_perf_coll("gather"), 1 << 20, 4, 3, &k);
  CHECK(k.param == 87381 && k.count == 262143 && k.send_elems == 87381);
  CHECK(k.recv_elems == 262143 && k.ip_send_step == 87381 && k.ip_recv_step == 0);
  p2pk_perf_counts(p2pk_perf_coll("scatter"), 1 << 20, 4, 3, &k);
  CHECK(k.param == 87381 && k.count == 262143 && k.send_elems == 262143);
  CHECK(k.recv_elems == 87381 && k.ip_send_step == 0 && k.ip_recv_step == 87381);
  p2pk_perf_counts(p2pk_perf_coll("alltoall"), 1 << 20, 4, 3, &k);
  CHECK(k.send_elems == 262143 && k.recv_elems == 262143);
  /* Smaller than one element (per rank): one element. */
  p2pk_perf_counts(p2pk_perf_coll("all_reduce"), 2, 4, 2, &k);
  CHECK(k.count == 1 && k.bytes == 4);
  p2pk_perf_counts(p2pk_perf_coll("all_gather"), 8, 4, 4, &k);
  CHECK(k.param == 1 && k.count == 4 && k.bytes == 16);
}

TEST(time_format) {
  char t[32];
  p2pk_perf_fmt_time(t, sizeof t, 5.126);
  CHECK_STR(t, "5.13");
  p2pk_perf_fmt_time(t, sizeof t, 123.3);
  CHECK_STR(t, "123.3");
  p2pk_perf_fmt_time(t, sizeof t, 12345.6);
  CHECK_STR(t, "12346");
  p2pk_perf_fmt_time(t, sizeof t, NAN);
  CHECK_STR(t, "N/A");
}

TEST(table_columns) {
  setup("all_reduce", 0, 2);
  add_row(&pass, 1 << 20, 10.0, 20.0, 0, 0, 0);
  FILE *f = fmemopen(buf, sizeof buf - 1, "w");
  p2pk_perf_print_header(f, &rep, &pass);
  p2pk_perf_print_row(f, &rep, &pass.rows[0]);
  p2pk_perf_print_footer(f, &rep, &pass);
  fclose(f);
  CHECK(strstr(buf, "# Using devices") != NULL);
  CHECK(strstr(buf, "#  Rank  1 Group  0 Pid   4242 on   testhost device  1 [0000:00:07.0] NVIDIA H200") != NULL);
  CHECK(strstr(buf, "out-of-place") && strstr(buf, "in-place"));
  const char *hdr = line_with(buf, "#       size");
  const char *row = line_with(buf, "     1048576 ");
  CHECK(hdr && row);
  if (!hdr || !row) return;
  char tok[32][32];
  int n = tokens(row, tok, 32);
  CHECK_EQ(n, 13);
  CHECK_STR(tok[0], "1048576");
  CHECK_STR(tok[1], "262144");
  CHECK_STR(tok[2], "float");
  CHECK_STR(tok[3], "sum");
  CHECK_STR(tok[4], "-1");
  CHECK_STR(tok[5], "10.00");
  CHECK_STR(tok[6], "104.86"); /* 1048576 B / 10 us */
  CHECK_STR(tok[7], "104.86"); /* x 2(n-1)/n = 1 for two ranks */
  CHECK_STR(tok[8], "0");
  CHECK_STR(tok[9], "20.00");
  CHECK_STR(tok[10], "52.43");
  CHECK_STR(tok[12], "0");
  /* every column ends under its header */
  int he[32], re[32];
  int nh = token_ends(hdr, he, 32), nr = token_ends(row, re, 32);
  CHECK_EQ(nh, nr);
  for (int i = 0; i < nh && i < nr; i++)
    if (he[i] != re[i]) T_FAIL("column %d ends at %d, its header at %d", i, re[i], he[i]);
  const char *units = line_with(buf, "#        (B)");
  CHECK(units != NULL);
  CHECK(strstr(buf, "# Out of bounds values : 0 OK") != NULL);
  char avg[64];
  snprintf(avg, sizeof avg, "# Avg bus bandwidth    : %g ", (104.8576 + 52.4288) / 2);
  CHECK(strstr(buf, avg) != NULL);
}

/* --max-blocks: the header says what each library was capped at; no cap,
 * no line. */
TEST(header_grid_cap) {
  setup("all_reduce", 1, 2);
  FILE *f = fmemopen(buf, sizeof buf - 1, "w");
  p2pk_perf_print_header(f, &rep, &pass);
  fclose(f);
  CHECK(strstr(buf, "# grid cap") == NULL);
  args.max_blocks = 32;
  setenv("NCCL_MAX_CTAS", "32", 1);
  f = fmemopen(buf, sizeof buf - 1, "w");
  p2pk_perf_print_header(f, &rep, &pass);
  fclose(f);
  CHECK(strstr(buf, "# grid cap: p2pkit 32 blocks (P2PKIT_MAX_BLOCKS), NCCL_MAX_CTAS=32\n") != NULL);
  unsetenv("NCCL_MAX_CTAS");
  args.vs_nccl = 0; /* p2pkit alone: NCCL's cap is not shown */
  f = fmemopen(buf, sizeof buf - 1, "w");
  p2pk_perf_print_header(f, &rep, &pass);
  fclose(f);
  CHECK(strstr(buf, "# grid cap: p2pkit 32 blocks (P2PKIT_MAX_BLOCKS)\n") != NULL);
}

TEST(table_vs_nccl) {
  setup("all_reduce", 1, 2);
  add_row(&pass, 1 << 20, 10.0, 20.0, 25.0, 30.0, 0);
  add_row(&pass, 2 << 20, 20.0, 0, 20.0, 0, 3); /* in-place missing, 3 wrong */
  FILE *f = fmemopen(buf, sizeof buf - 1, "w");
  p2pk_perf_print_header(f, &rep, &pass);
  for (int i = 0; i < pass.nrows; i++) p2pk_perf_print_row(f, &rep, &pass.rows[i]);
  p2pk_perf_print_footer(f, &rep, &pass);
  fclose(f);
  CHECK(strstr(buf, "baseline NCCL 2.28.3 (libnccl.so.2)") != NULL);
  const char *hdr = line_with(buf, "#       size");
  const char *row = line_with(buf, "     1048576 ");
  const char *row2 = line_with(buf, "     2097152 ");
  CHECK(hdr && row && row2);
  if (!hdr || !row || !row2) return;
  char tok[32][32];
  CHECK_EQ(tokens(hdr, tok, 32), 1 + 19);
  CHECK_STR(tok[10], "nccl");
  CHECK_STR(tok[12], "speedup");
  CHECK_EQ(tokens(row, tok, 32), 19);
  CHECK_STR(tok[9], "25.00");  /* NCCL's time */
  CHECK_STR(tok[10], "0");     /* NCCL's #wrong */
  CHECK_STR(tok[11], "2.50");  /* 25 / 10 */
  CHECK_STR(tok[18], "1.50");  /* 30 / 20 */
  int he[32], re[32];
  int nh = token_ends(hdr, he, 32), nr = token_ends(row, re, 32);
  CHECK_EQ(nh, nr);
  for (int i = 0; i < nh && i < nr; i++)
    if (he[i] != re[i]) T_FAIL("column %d ends at %d, its header at %d", i, re[i], he[i]);
  CHECK_EQ(tokens(row2, tok, 32), 19);
  CHECK_STR(tok[8], "3");
  CHECK_STR(tok[11], "1.00");
  CHECK_STR(tok[12], "N/A"); /* in-place not measured */
  CHECK_STR(tok[18], "N/A");
  CHECK(strstr(buf, "# Out of bounds values : 3 FAILED") != NULL);
  CHECK_EQ(p2pk_perf_pass_wrong(&pass), 3);
  char line[128];
  snprintf(line, sizeof line, "# Avg bus bandwidth (NCCL) : %g ",
           (41.94304 + 34.952533333333335 + 104.8576) / 3);
  CHECK(strstr(buf, line) != NULL);
  snprintf(line, sizeof line, "geometric mean : %.3f", cbrt(2.5 * 1.5 * 1.0));
  CHECK(strstr(buf, line) != NULL);
}

TEST(table_without_inplace) {
  setup("sendrecv", 0, 2);
  args.nccl_only = 1;
  add_row(&pass, 4096, 0, 0, 8.0, 0, 0);
  FILE *f = fmemopen(buf, sizeof buf - 1, "w");
  p2pk_perf_print_header(f, &rep, &pass);
  p2pk_perf_print_row(f, &rep, &pass.rows[0]);
  fclose(f);
  CHECK(strstr(buf, "in-place") == NULL);
  CHECK(strstr(buf, "# p2pkit perf sendrecv: NCCL 2.28.3") != NULL);
  char tok[32][32];
  const char *row = line_with(buf, "        4096 ");
  CHECK(row && tokens(row, tok, 32) == 9);
  if (row) {
    CHECK_STR(tok[3], "none");
    CHECK_STR(tok[5], "8.00");
    CHECK_STR(tok[6], "0.51");
  }
}

TEST(json_document) {
  setup("all_reduce", 1, 2);
  /* Settings beyond the fixed list are recorded; a secret never is. */
  setenv("P2PKIT_SENDRECV_MAP", "1", 1);
  setenv("P2PKIT_JOB_SECRET", "hush-4242", 1);
  add_row(&pass, 1 << 20, 10.0, 20.0, 20.0, 30.0, 0);
  add_row(&pass, 2 << 20, 20.0, 0, 0, 0, 0);
  snprintf(pass.algo, sizeof pass.algo, "oneshot/\"ll\"\n"); /* quoting */
  char path[] = "/tmp/p2pkit_perf_json_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd < 0) return;
  FILE *f = fdopen(fd, "w");
  pass.rows[0].algo = P2PK_ALGO_TWOSHOT;
  pass.rows[0].proto = P2PK_PROTO_SIMPLE;
  p2pk_perf_write_json(f, &rep);
  fclose(f);
  if (system("python3 -c 'import json' 2>/dev/null") != 0) {
    printf("note: python3 missing; JSON checked only for balance\n");
  } else {
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json,sys\n"
             "d=json.load(open(sys.argv[1]))\n"
             "assert d[\"schema_version\"]==1 and d[\"collective\"]==\"all_reduce\"\n"
             "assert d[\"nccl_version\"]==\"2.28.3\" and d[\"driver_version\"]==\"580.159.04\"\n"
             "assert d[\"mode\"][\"launch\"]==\"eager\" and d[\"mode\"][\"nranks\"]==2\n"
             "assert len(d[\"gpus\"])==2 and d[\"gpus\"][1][\"busid\"]==\"0000:00:07.0\"\n"
             "assert \"NCCL_NVLS_ENABLE\" in d[\"env\"] and \"P2PKIT_P2P_DISABLE\" in d[\"env\"]\n"
             "p=d[\"passes\"][0]; r=p[\"results\"]\n"
             "assert p[\"algo\"]==\"oneshot/\\\"ll\\\"\\n\"\n"
             "assert r[0][\"size\"]==1048576 and r[0][\"count\"]==262144\n"
             "assert r[0][\"p2pkit_algo\"]==\"twoshot/simple\" and r[1][\"p2pkit_algo\"] is None\n"
             "o=r[0][\"out_of_place\"]\n"
             "assert o[\"p2pkit\"][\"time_us\"]==10 and o[\"nccl\"][\"time_us\"]==20 and o[\"speedup\"]==2\n"
             "assert abs(o[\"p2pkit\"][\"busbw_gbps\"]-104.858)<1e-3 and o[\"p2pkit\"][\"wrong\"]==0\n"
             "assert o[\"p2pkit\"][\"time_us_min\"]==9 and o[\"p2pkit\"][\"time_us_max\"]==12\n"
             "assert r[1][\"in_place\"][\"p2pkit\"] is None and r[1][\"out_of_place\"][\"speedup\"] is None\n"
             "assert d[\"wrong_total\"]==0\n"
             "assert d[\"env\"][\"P2PKIT_SENDRECV_MAP\"]==\"1\"\n"
             "assert \"P2PKIT_JOB_SECRET\" not in d[\"env\"]\n"
             "assert \"hush-4242\" not in open(sys.argv[1]).read()\n"
             "' %s",
             path);
    CHECK_EQ(system(cmd), 0);
  }
  unsetenv("P2PKIT_SENDRECV_MAP");
  unsetenv("P2PKIT_JOB_SECRET");
  unlink(path);
}

TEST(algorithm_table) {
  setup("all_reduce", 0, 2);
  perf_pass passes[3];
  memset(passes, 0, sizeof passes);
  rep.passes = passes;
  rep.npasses = 3;
  static const char *names[] = {"oneshot/ll", "oneshot/simple", "twoshot/simple"};
  size_t sizes[] = {8 << 10, 64 << 10, 1 << 20, 16 << 20};
  /* ll wins small, simple large; twoshot would win at 1M but its result was wrong. */
  double t[3][4] = {{3, 5, 40, 400}, {6, 7, 20, 100}, {9, 9, 10, 200}};
  for (int p = 0; p < 3; p++) {
    snprintf(passes[p].algo, sizeof passes[p].algo, "%s", names[p]);
    for (int i = 0; i < 4; i++) add_row(&passes[p], sizes[i], t[p][i], t[p][i], 0, 0, p == 2 && i == 2 ? 1 : 0);
  }
  FILE *f = fmemopen(buf, sizeof buf - 1, "w");
  CHECK_OK(p2pk_perf_write_algo_table(f, &rep));
  fclose(f);
  p2pk_algo_table tab;
  CHECK_OK(p2pk_algo_table_parse("written", buf, &tab));
  CHECK(tab.nrows >= 2);
  if (tab.nrows < 2) return;
  CHECK_EQ(tab.rows[0].transport, P2PK_TRANSPORT_P2P);
  CHECK(tab.rows[0].min_ranks == 2 && tab.rows[0].max_ranks == 2);
  CHECK_EQ(tab.rows[0].max_bytes, 64 << 10);
  CHECK_STR(p2pk_algo_name(tab.rows[0].algo), "oneshot");
  CHECK_STR(p2pk_proto_name(tab.rows[0].proto), "ll");
  CHECK_EQ(tab.rows[1].max_bytes, SIZE_MAX);
  CHECK_STR(p2pk_proto_name(tab.rows[1].proto), "simple");
  CHECK_STR(p2pk_algo_name(tab.rows[1].algo), "oneshot");
  p2pk_algo_table def;
  p2pk_algo_table_default(&def);
  CHECK_EQ(tab.nrows, 2 + def.nrows); /* then the built-in rows, for other rank counts */
  CHECK_STR(p2pk_algo_name(p2pk_algo_lookup(&tab, P2PK_TRANSPORT_P2P, 2, 1000)->algo), "oneshot");
  /* the summary names each size's winner */
  f = fmemopen(buf, sizeof buf - 1, "w");
  p2pk_perf_print_winners(f, &rep);
  fclose(f);
  const char *w = line_with(buf, "     1048576 ");
  CHECK(w && strstr(w, "oneshot/simple") != NULL);

  /* What the communicator reports it ran wins over the pass's name: forced
   * oneshot/ll above the LL limit runs oneshot/simple. */
  passes[0].rows[3].st[PERF_LIB_P2PKIT][0].t_med = 50; /* now the fastest at 16M */
  passes[0].rows[3].algo = P2PK_ALGO_ONESHOT;
  passes[0].rows[3].proto = P2PK_PROTO_SIMPLE;
  f = fmemopen(buf, sizeof buf - 1, "w");
  CHECK_OK(p2pk_perf_write_algo_table(f, &rep));
  fclose(f);
  CHECK_OK(p2pk_algo_table_parse("written", buf, &tab));
  CHECK_EQ(tab.rows[1].max_bytes, SIZE_MAX);
  CHECK_STR(p2pk_proto_name(tab.rows[1].proto), "simple");
  CHECK_EQ(tab.nrows, 2 + def.nrows);

  /* Host staging: only staged can stand; none ran -> no table, an error. */
  rep.staged = 1;
  f = fmemopen(buf, sizeof buf - 1, "w");
  CHECK(p2pk_perf_write_algo_table(f, &rep) == P2PKIT_ERR_UNSUPPORTED);
  fclose(f);
}

T_MAIN(T_CASE(busbw_factors), T_CASE(element_counts), T_CASE(time_format), T_CASE(table_columns),
       T_CASE(header_grid_cap), T_CASE(table_vs_nccl), T_CASE(table_without_inplace), T_CASE(json_document),
       T_CASE(algorithm_table))
