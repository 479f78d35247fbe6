/* SPDX-License-Identifier: BSD-3-Clause */
/* Bench writers on a made-up report: the JSON parses, the CSV rows have the
 * header's column count, the table has the matrices and verdicts, the SVG is
 * well formed with one line per method and one cell per pair. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "test.h"

static char *capture(p2pkit_status_t (*fn)(const p2pk_bench_report *, FILE *),
                     const p2pk_bench_report *r) {
  FILE *f = tmpfile();
  if (!f) return NULL;
  CHECK_OK(fn(r, f));
  long n = ftell(f);
  rewind(f);
  char *buf = calloc((size_t)n + 1, 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) buf[0] = '\0';
  fclose(f);
  return buf;
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

/* --- a small JSON checker --------------------------------------------------- */

static const char *ws(const char *p) {
  while (*p && isspace((unsigned char)*p)) p++;
  return p;
}

static const char *json_value(const char *p, int depth);

static const char *json_string(const char *p) {
  if (*p != '"') return NULL;
  for (p++; *p && *p != '"'; p++) {
    if ((unsigned char)*p < 0x20) return NULL;
    if (*p == '\\') {
      p++;
      if (!strchr("\"\\/bfnrtu", *p)) return NULL;
    }
  }
  return *p == '"' ? p + 1 : NULL;
}

static const char *json_value(const char *p, int depth) {
  p = ws(p);
  if (depth > 64) return NULL;
  if (*p == '{' || *p == '[') {
    char close = *p == '{' ? '}' : ']';
    p = ws(p + 1);
    if (*p == close) return p + 1;
    for (;;) {
      if (close == '}') {
        p = json_string(ws(p));
        if (!p) return NULL;
        p = ws(p);
        if (*p++ != ':') return NULL;
      }
      p = json_value(p, depth + 1);
      if (!p) return NULL;
      p = ws(p);
      if (*p == ',') {
        p++;
        continue;
      }
      return *p == close ? p + 1 : NULL;
    }
  }
  if (*p == '"') return json_string(p);
  if (!strncmp(p, "true", 4)) return p + 4;
  if (!strncmp(p, "false", 5)) return p + 5;
  if (!strncmp(p, "null", 4)) return p + 4;
  char *end;
  strtod(p, &end);
  return end == p ? NULL : end;
}

static int json_ok(const char *text) {
  const char *p = json_value(text, 0);
  return p && *ws(p) == '\0';
}

/* --- a small XML checker: tags nest and close ----------------------------------- */

static int xml_ok(const char *s) {
  char stack[64][32];
  int depth = 0;
  for (const char *p = s; (p = strchr(p, '<'));) {
    if (p[1] == '?' || p[1] == '!') {
      p = strchr(p, '>');
      if (!p) return 0;
      continue;
    }
    int closing = p[1] == '/';
    const char *name = p + 1 + closing;
    size_t n = strcspn(name, " />\n");
    const char *end = strchr(p, '>');
    if (!end || n == 0 || n >= 32) return 0;
    if (closing) {
      if (depth == 0 || strncmp(stack[depth - 1], name, n) != 0 || stack[depth - 1][n]) return 0;
      depth--;
    } else if (end[-1] != '/') {
      if (depth == 64) return 0;
      memcpy(stack[depth], name, n);
      stack[depth++][n] = '\0';
    }
    p = end + 1;
  }
  return depth == 0;
}

/* --- the report ------------------------------------------------------------------ */

static void add(p2pk_bench_report *r, int method, int mode, int src, int dst, int total,
                size_t bytes, double gbps) {
  p2pk_bench_row *x = p2pk_bench_add_row(r);
  x->method = method;
  x->mode = mode;
  x->src = src;
  x->dst = dst;
  x->total = total;
  x->npairs = total ? 2 : 1;
  x->bytes = bytes;
  x->gbps = gbps;
  x->gbps_min = gbps * 0.98;
  x->gbps_max = gbps * 1.01;
  double us = (double)bytes / (gbps * 1e3);
  double v[3] = {us, us * 1.01, us * 0.99};
  p2pk_stats_compute(v, 3, &x->us);
  x->link = P2PKIT_LINK_NVLINK;
  snprintf(x->label, sizeof x->label, "NV18");
  x->line_gbps = 478.125;
  x->expected_gbps = 392;
  x->verified = 1;
  snprintf(x->path, sizeof x->path, "P2P/NVLink/CE");
}

static void make_report(p2pk_bench_report *r) {
  p2pk_bench_report_init(r);
  snprintf(r->date, sizeof r->date, "2026-11-29T12:00:00Z");
  snprintf(r->hostname, sizeof r->hostname, "h<ost>&\"1\"");
  snprintf(r->driver, sizeof r->driver, "580.159.04");
  r->cuda_driver = r->cuda_runtime = 13000;
  r->ngpus = 2;
  for (int g = 0; g < 2; g++) {
    snprintf(r->gpu[g].name, sizeof r->gpu[g].name, "NVIDIA H200");
    snprintf(r->gpu[g].busid, sizeof r->gpu[g].busid, "0000:00:0%d.0", 6 + g);
  }
  snprintf(r->p2p_level, sizeof r->p2p_level, "any");
  r->stage_chunk = 8u << 20;
  r->stage_depth = 4;
  snprintf(r->sm_config, sizeof r->sm_config, "kind=tma,hint=cs,bps=1,threads=512,unroll=4,tile=16K,stages=4");
  r->iters = 20;
  r->warmup = 5;
  r->gate = 1;
  static const size_t sizes[] = {8, 4096, 256u << 20};
  static const int methods[] = {P2PK_BM_MEMCPY_PEER, P2PK_BM_CE, P2PK_BM_SM_PUSH, P2PK_BM_STAGED,
                                P2PK_BM_DRIVER};
  for (size_t s = 0; s < 3; s++)
    for (size_t m = 0; m < 5; m++)
      for (int d = 0; d < 2; d++) {
        double g = (methods[m] == P2PK_BM_STAGED ? 52 : methods[m] == P2PK_BM_DRIVER ? 37.7 : 390) *
                   (s == 2 ? 1 : s == 1 ? 0.01 : 0.0001);
        add(r, methods[m], P2PK_MODE_ONEWAY, d, !d, 0, sizes[s], d ? g * 0.99 : g);
      }
  add(r, P2PK_BM_CE, P2PK_MODE_BOTH, 0, 1, 0, 256u << 20, 385);
  add(r, P2PK_BM_CE, P2PK_MODE_BOTH, 1, 0, 0, 256u << 20, 384);
  add(r, P2PK_BM_CE, P2PK_MODE_BOTH, 0, 1, 1, 256u << 20, 769);
  p2pk_bench_row *sk = p2pk_bench_add_row(r);
  sk->method = P2PK_BM_SM_PULL;
  sk->mode = P2PK_MODE_ONEWAY;
  sk->dst = 1;
  sk->bytes = 256u << 20;
  sk->status = P2PK_ROW_SKIPPED;
  snprintf(sk->note, sizeof sk->note, "P2P disabled, by \"P2PKIT_P2P_DISABLE\"");
  p2pk_bench_lat *l = p2pk_bench_add_lat(r);
  l->kind = P2PK_LAT_FLAG;
  l->dst = 1;
  l->bytes = 8;
  l->count = 1000;
  double lv[3] = {0.7, 0.72, 0.69};
  p2pk_stats_compute(lv, 3, &l->us);
  l->gt_us = 0.7;
  l->verified = 1;
  for (int i = 0; i < 2; i++) {
    p2pk_bench_sweep *w = p2pk_bench_add_sweep(r);
    w->method = P2PK_BM_SM_PUSH;
    w->dst = 1;
    w->bytes = 256u << 20;
    w->gbps = 370 + 10 * i;
    w->verified = 1;
    snprintf(w->config, sizeof w->config, "kind=chunk,hint=cs,bps=%d,threads=512,unroll=4,tile=16K,stages=4", i + 1);
  }
  p2pk_bench_verdicts(r);
}

TEST(json) {
  p2pk_bench_report r;
  make_report(&r);
  char *s = capture(p2pk_bench_write_json, &r);
  CHECK(s && json_ok(s));
  if (s) {
    CHECK(strstr(s, "\"schema_version\": 1") != NULL);
    CHECK(strstr(s, "\"hostname\": \"h<ost>&\\\"1\\\"\"") != NULL);
    CHECK(strstr(s, "\"driver\": \"580.159.04\"") != NULL);
    CHECK(strstr(s, "\"name\": \"NVIDIA H200\"") != NULL);
    CHECK_EQ(count(s, "\"method\": "), r.nrows + r.nlats + r.nsweeps);
    CHECK_EQ(count(s, "\"median_gbps\": "), r.nrows - 1 + r.nsweeps + 1); /* skipped row: none; best: one */
    CHECK_EQ(count(s, "\"verified\": true"), r.nrows - 1 + r.nlats + r.nsweeps);
    CHECK(strstr(s, "\"median_gbps\": 390,") != NULL);
    CHECK(strstr(s, "\"status\": \"skipped\"") != NULL);
    CHECK(strstr(s, "\"globaltimer_us\": 0.7") != NULL);
    CHECK(strstr(s, "\"p2p-sm-push\": {") != NULL); /* best of the sweep */
  }
  free(s);
  p2pk_bench_report_free(&r);
}

/* Fields of one CSV line, quotes honoured. */
static int csv_fields(const char *line, size_t len) {
  int n = 1, quoted = 0;
  for (size_t i = 0; i < len; i++) {
    if (line[i] == '"') quoted = !quoted;
    else if (line[i] == ',' && !quoted) n++;
  }
  return quoted ? -1 : n;
}

TEST(csv) {
  p2pk_bench_report r;
  make_report(&r);
  char *s = capture(p2pk_bench_write_csv, &r);
  CHECK(s != NULL);
  if (s) {
    int lines = 0, header = 0;
    for (char *p = s; *p;) {
      size_t n = strcspn(p, "\n");
      int f = csv_fields(p, n);
      if (lines == 0) header = f;
      else if (f != header) T_FAIL("CSV line %d has %d fields, the header %d: %.*s", lines + 1, f, header, (int)n, p);
      lines++;
      p += n + (p[n] == '\n');
    }
    CHECK_EQ(header, 25);
    CHECK_EQ(lines, 1 + r.nrows + r.nlats + r.nsweeps);
    CHECK(strncmp(s, "kind,method,mode,src,dst,", 25) == 0);
    CHECK(strstr(s, "\"P2P disabled, by \"\"P2PKIT_P2P_DISABLE\"\"\"") != NULL);
    CHECK(strstr(s, "copy,p2p-ce,oneway,0,1,0,1,268435456,390,") != NULL);
    CHECK(strstr(s, "\nlatency,sm-flag,oneway,0,1,0,1,8,,,,0.7,") != NULL);
    CHECK(strstr(s, "\"kind=chunk,hint=cs,bps=2,") != NULL);
  }
  free(s);
  p2pk_bench_report_free(&r);
}

TEST(table) {
  p2pk_bench_report r;
  make_report(&r);
  char *s = capture(p2pk_bench_write_table, &r);
  CHECK(s != NULL);
  int before = t_failed;
  if (s) {
    CHECK(strstr(s, "driver 580.159.04, CUDA driver 13.0, runtime 13.0") != NULL);
    CHECK(strstr(s, "== 256 MiB (268435456 bytes), oneway ==") != NULL);
    CHECK(strstr(s, "== 256 MiB (268435456 bytes), both ==") != NULL);
    CHECK(strstr(s, "p2p-ce, GB/s (rows: source GPU, columns: destination GPU)") != NULL);
    CHECK(strstr(s, "p2p-ce, GB/s, both ways at once (sum)") != NULL);
    CHECK(strstr(s, "   src\\dst        0        1\n") != NULL);
    CHECK(strstr(s, "         0        -   390.0 \n") != NULL);
    CHECK(strstr(s, "         1   386.1         -\n") != NULL);
    CHECK(strstr(s, "         0        -   769.0 \n") != NULL); /* both ways: the sum, symmetric */
    CHECK(strstr(s, "         1   769.0         -\n") != NULL);
    CHECK(strstr(s, "p2p-sm-pull   0->1") != NULL && strstr(s, "skipped: P2P disabled") != NULL);
    CHECK(strstr(s, "x memcpy-peer (median over pairs): ") != NULL);
    CHECK(strstr(s, "staged pipeline 51.7 GB/s: 1.38x driver fallback (37.5)") != NULL);
    CHECK(strstr(s, "sm-flag") != NULL);
    CHECK(strstr(s, "fastest: 380.0 GB/s with P2PKIT_SM_COPY_CONFIG=kind=chunk,hint=cs,bps=2,") != NULL);
    CHECK(strstr(s, "LOW") != NULL); /* the staged/driver rows are under their PCIe expectation */
    if (t_failed != before) fputs(s, stderr);
  }
  free(s);
  p2pk_bench_report_free(&r);
}

TEST(svg) {
  p2pk_bench_report r;
  make_report(&r);
  char *s = capture(p2pk_bench_write_svg, &r);
  CHECK(s != NULL);
  if (s) {
    CHECK(strncmp(s, "<?xml", 5) == 0);
    CHECK(strstr(s, "<svg xmlns=\"http://www.w3.org/2000/svg\"") != NULL);
    size_t n = strlen(s);
    CHECK(n > 7 && strcmp(s + n - 7, "</svg>\n") == 0);
    CHECK(xml_ok(s));
    CHECK(strstr(s, "h&lt;ost&gt;&amp;&quot;1&quot;") != NULL);
    /* one line per method with one-way rows (5; pull was skipped everywhere) */
    CHECK_EQ(count(s, "<polyline class=\"method\""), 5);
    CHECK_EQ(count(s, "<circle "), 5 * 3);
    /* heat maps at 256 MiB: 6 methods (pull's cells are the skip), 2x2 cells */
    CHECK_EQ(count(s, "<g class=\"heatmap\""), 6);
    CHECK_EQ(count(s, "<rect class=\"cell\""), 6 * 4);
  }
  free(s);
  p2pk_bench_report empty;
  p2pk_bench_report_init(&empty);
  s = capture(p2pk_bench_write_svg, &empty);
  CHECK(s && xml_ok(s) && strstr(s, "no one-way bandwidth measurements") != NULL);
  free(s);
  p2pk_bench_report_free(&r);
}

/* --plot-from: the plot drawn from the JSON a run saved is the plot the run
 * drew (json-c loaded at run time; the case skips, saying so, without it). */
TEST(svg_from_saved_json) {
  p2pk_bench_report r, back;
  make_report(&r);
  p2pk_bench_report_init(&back);
  char path[] = "/tmp/p2pk_bench_json_XXXXXX";
  int fd = mkstemp(path);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  CHECK(f != NULL);
  if (!f) return;
  CHECK_OK(p2pk_bench_write_json(&r, f));
  fclose(f);
  char err[512] = "";
  if (p2pk_bench_load_json(path, &back, err, sizeof err) != 0 && strstr(err, "needs json-c")) {
    printf("SKIP svg_from_saved_json: %s\n", err);
  } else {
    CHECK_STR(err, "");
    CHECK_EQ(back.nrows, r.nrows);
    char *want = capture(p2pk_bench_write_svg, &r), *got = capture(p2pk_bench_write_svg, &back);
    CHECK(want && got && strcmp(want, got) == 0);
    free(want);
    free(got);
  }
  /* Not bench's document, not JSON, no file: one line naming the file. */
  static const char *const bad[][2] = {{"{\"tool\": \"p2pkit perf\", \"results\": []}", "not a p2pkit bench JSON"},
                                       {"{\"tool\": \"p2pkit bench\", \"results\": [{\"method\": \"warp\"}]}", "result 0: a result lacks"},
                                       {"[1, 2", "--plot-from"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0] && !strstr(err, "needs json-c"); i++) {
    f = fopen(path, "w");
    fputs(bad[i][0], f);
    fclose(f);
    p2pk_bench_report x;
    p2pk_bench_report_init(&x);
    CHECK_EQ(p2pk_bench_load_json(path, &x, err, sizeof err), -1);
    CHECK(strstr(err, bad[i][1]) != NULL && strstr(err, path) != NULL && !strchr(err, '\n'));
    p2pk_bench_report_free(&x);
  }
  unlink(path);
  CHECK_EQ(p2pk_bench_load_json(path, &back, err, sizeof err), -1);
  CHECK(strstr(err, path) != NULL);
  p2pk_bench_report_free(&back);
  p2pk_bench_report_free(&r);
}

T_MAIN(T_CASE(json), T_CASE(csv), T_CASE(table), T_CASE(svg), T_CASE(svg_from_saved_json))
