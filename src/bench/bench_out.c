/* SPDX-License-Identifier: BSD-3-Clause */
/* Bench output: the table (matrices like p2pBandwidthLatencyTest / nvbandwidth,
 * then one line per measurement), JSON and CSV. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "core/check.h"
#include "core/json.h"

static int has_rows(const p2pk_bench_report *r, size_t bytes, int mode, int method) {
  for (int i = 0; i < r->nrows; i++)
    if (r->rows[i].bytes == bytes && r->rows[i].mode == mode &&
        (method < 0 || r->rows[i].method == method))
      return 1;
  return 0;
}

/* Sizes in the order they first appear. */
static int sizes_of(const p2pk_bench_report *r, size_t *out, int max) {
  int n = 0;
  for (int i = 0; i < r->nrows; i++) {
    int seen = 0;
    for (int k = 0; k < n; k++) seen |= out[k] == r->rows[i].bytes;
    if (!seen && n < max) out[n++] = r->rows[i].bytes;
  }
  return n;
}

static const p2pk_bench_row *find_row(const p2pk_bench_report *r, size_t bytes, int mode,
                                      int method, int src, int dst, int total) {
  for (int i = 0; i < r->nrows; i++) {
    const p2pk_bench_row *x = &r->rows[i];
    if (x->bytes == bytes && x->mode == mode && x->method == method && x->total == total &&
        x->src == src && x->dst == dst)
      return x;
  }
  return NULL;
}

static void cell(FILE *out, const p2pk_bench_row *x) {
  if (!x) fprintf(out, " %8s", "");
  else if (x->status == P2PK_ROW_SKIPPED) fprintf(out, " %8s", "n/a");
  else if (x->status != P2PK_ROW_OK) fprintf(out, " %8s", "FAIL");
  else if (!x->verified) fprintf(out, " %8s", "WRONG");
  else fprintf(out, " %7.1f%s", x->gbps, x->low ? "!" : " ");
}

static void matrix(const p2pk_bench_report *r, FILE *out, size_t bytes, int mode, int method) {
  int gpus[P2PK_MAX_GPUS], n = 0;
  for (int i = 0; i < r->nrows; i++) {
    const p2pk_bench_row *x = &r->rows[i];
    if (x->bytes != bytes || x->mode != mode || x->method != method || x->src < 0) continue;
    int e[2] = {x->src, x->dst};
    for (int k = 0; k < 2; k++) {
      int seen = 0;
      for (int j = 0; j < n; j++) seen |= gpus[j] == e[k];
      if (!seen && n < P2PK_MAX_GPUS) gpus[n++] = e[k];
    }
  }
  for (int i = 1; i < n; i++) /* ascending */
    for (int j = i; j > 0 && gpus[j - 1] > gpus[j]; j--) {
      int t = gpus[j];
      gpus[j] = gpus[j - 1];
      gpus[j - 1] = t;
    }
  fprintf(out, "\n  %s, GB/s%s (rows: source GPU, columns: destination GPU)\n",
          p2pk_bench_method_name(method),
          mode == P2PK_MODE_BOTH ? ", both ways at once (sum)"
          : mode == P2PK_MODE_ALL ? ", every pair at once (each pair)" : "");
  fprintf(out, "  %8s", "src\\dst");
  for (int j = 0; j < n; j++) fprintf(out, " %8d", gpus[j]);
  fputc('\n', out);
  for (int i = 0; i < n; i++) {
    fprintf(out, "  %8d", gpus[i]);
    for (int j = 0; j < n; j++) {
      if (i == j) {
        fprintf(out, " %8s", "-");
        continue;
      }
      const p2pk_bench_row *x;
      if (mode == P2PK_MODE_BOTH) {
        int a = gpus[i] < gpus[j] ? gpus[i] : gpus[j], b = gpus[i] < gpus[j] ? gpus[j] : gpus[i];
        x = find_row(r, bytes, mode, method, a, b, 1);
      } else {
        x = find_row(r, bytes, mode, method, gpus[i], gpus[j], 0);
      }
      cell(out, x);
    }
    fputc('\n', out);
  }
  if (mode == P2PK_MODE_ALL) {
    const p2pk_bench_row *t = find_row(r, bytes, mode, method, -1, -1, 1);
    if (t && t->status == P2PK_ROW_OK)
      fprintf(out, "  all %d pairs together: %.1f GB/s%s\n", t->npairs, t->gbps,
              t->verified ? "" : " (WRONG DATA)");
  }
}

static void pair_name(const p2pk_bench_row *x, char *buf, size_t len) {
  if (x->src < 0) snprintf(buf, len, "all");
  else if (x->total) snprintf(buf, len, "%d<->%d", x->src, x->dst);
  else snprintf(buf, len, "%d->%d", x->src, x->dst);
}

static void details(const p2pk_bench_report *r, FILE *out, size_t bytes, int mode) {
  fprintf(out, "\n  %-13s %-7s %5s %8s %8s %8s %6s %8s %7s %7s  %-5s %s\n", "method", "pair", "link",
          "median", "min", "max", "cv%", "expect", "of-line", "x-peer", "data", "verdict");
  for (int i = 0; i < r->nrows; i++) {
    const p2pk_bench_row *x = &r->rows[i];
    if (x->bytes != bytes || x->mode != mode) continue;
    char pn[24];
    pair_name(x, pn, sizeof pn);
    fprintf(out, "  %-13s %-7s %5s", p2pk_bench_method_name(x->method), pn, x->label);
    if (x->status != P2PK_ROW_OK) {
      fprintf(out, "  %s: %s\n", x->status == P2PK_ROW_SKIPPED ? "skipped" : "FAILED", x->note);
      continue;
    }
    double scale = x->total && x->mode == P2PK_MODE_BOTH ? 2 : 1;
    fprintf(out, " %8.1f %8.1f %8.1f %6.2f", x->gbps, x->gbps_min, x->gbps_max, 100 * x->us.cv);
    if (x->expected_gbps > 0) fprintf(out, " %8.0f", x->expected_gbps * scale);
    else fprintf(out, " %8s", "?");
    if (x->frac_line > 0) fprintf(out, " %7.2f", x->frac_line);
    else fprintf(out, " %7s", "?");
    if (x->ratio_anchor > 0) fprintf(out, " %7.3f", x->ratio_anchor);
    else fprintf(out, " %7s", "-");
    fprintf(out, "  %-5s %s\n", x->verified ? "ok" : "WRONG", x->verdict);
  }
}

static void ratios(const p2pk_bench_report *r, FILE *out, size_t bytes, int mode) {
  double anchor = p2pk_bench_median_gbps(r, mode, P2PK_BM_MEMCPY_PEER, bytes);
  double st = p2pk_bench_median_gbps(r, mode, P2PK_BM_STAGED, bytes);
  double drv = p2pk_bench_median_gbps(r, mode, P2PK_BM_DRIVER, bytes);
  double ser = p2pk_bench_median_gbps(r, mode, P2PK_BM_STAGED_SERIAL, bytes);
  int any = 0;
  if (anchor > 0)
    for (int m = 0; m < P2PK_BM_COUNT; m++) {
      double g = p2pk_bench_median_gbps(r, mode, m, bytes);
      if (m == P2PK_BM_MEMCPY_PEER || g <= 0) continue;
      fprintf(out, "%s%s %.3fx", any++ ? ", " : "\n  same run, x memcpy-peer (median over pairs): ",
              p2pk_bench_method_name(m), g / anchor);
    }
  if (any) fputc('\n', out);
  if (st > 0 && (drv > 0 || ser > 0)) {
    fprintf(out, "  staged pipeline %.1f GB/s:", st);
    if (drv > 0) fprintf(out, " %.2fx driver fallback (%.1f)", st / drv, drv);
    if (ser > 0) fprintf(out, "%s %.2fx staged-serial (%.1f)", drv > 0 ? "," : "", st / ser, ser);
    fputc('\n', out);
  }
}

static void header(const p2pk_bench_report *r, FILE *out) {
  fprintf(out, "p2pkit bench on %s, %s: %d GPU%s, driver %s, CUDA driver %d.%d, runtime %d.%d\n",
          r->hostname[0] ? r->hostname : "?", r->date, r->ngpus, r->ngpus == 1 ? "" : "s",
          r->driver[0] ? r->driver : "?", r->cuda_driver / 1000, r->cuda_driver % 1000 / 10,
          r->cuda_runtime / 1000, r->cuda_runtime % 1000 / 10);
  for (int g = 0; g < r->ngpus; g++)
    fprintf(out, "  GPU%d %s (%s)\n", g, r->gpu[g].name, r->gpu[g].busid);
  fprintf(out,
          "settings: P2P %s, P2PKIT_P2P_LEVEL %s; staging %zu KiB x %d; SM kernel %s\n"
          "%d timed runs after %d warm-up, seed %llu, %s\n"
          "GB/s = 10^9 bytes/s from the median time; every measurement verifies the bytes that "
          "arrived; ! = LOW; shared = every pair at once, this pair's GPUs in other pairs too "
          "(its share, not judged)\n",
          r->p2p_disable ? "disabled (P2PKIT_P2P_DISABLE=1)" : "enabled",
          r->p2p_level[0] ? r->p2p_level : "any", r->stage_chunk >> 10, r->stage_depth,
          r->sm_config, r->iters, r->warmup, (unsigned long long)r->seed,
          r->gate ? "stream held until all work is queued" : "no gate");
}

static void latency_table(const p2pk_bench_report *r, FILE *out) {
  if (!r->nlats) return;
  fprintf(out, "\n== latency ==\n  back-to-back copies: time per copy; sm-flag: one-way latency of "
          "an SM write of data + flag (ping-pong / 2)\n");
  fprintf(out, "  %-12s %-6s %8s %8s %8s %8s %6s %9s  %-5s %s\n", "method", "pair", "bytes",
          "median", "min", "max", "cv%", "gtimer", "data", "note");
  for (int i = 0; i < r->nlats; i++) {
    const p2pk_bench_lat *l = &r->lats[i];
    char pn[24];
    snprintf(pn, sizeof pn, "%d->%d", l->src, l->dst);
    fprintf(out, "  %-12s %-6s %8zu", p2pk_bench_lat_name(l->kind), pn, l->bytes);
    if (l->status != P2PK_ROW_OK) {
      fprintf(out, "  %s: %s\n", l->status == P2PK_ROW_SKIPPED ? "skipped" : "FAILED", l->note);
      continue;
    }
    fprintf(out, " %6.2fus %6.2fus %6.2fus %6.2f", l->us.median, l->us.min, l->us.max,
            100 * l->us.cv);
    if (l->gt_us > 0) fprintf(out, " %7.2fus", l->gt_us);
    else fprintf(out, " %9s", "-");
    fprintf(out, "  %-5s %s\n", l->verified ? "ok" : "WRONG", l->note);
  }
}

static int cmp_sweep(const void *a, const void *b) {
  const p2pk_bench_sweep *x = a, *y = b;
  return x->gbps < y->gbps ? 1 : x->gbps > y->gbps ? -1 : 0;
}

static void sweep_table(const p2pk_bench_report *r, FILE *out, int method) {
  int n = 0;
  for (int i = 0; i < r->nsweeps; i++) n += r->sweeps[i].method == method;
  if (!n) return;
  p2pk_bench_sweep *s = malloc((size_t)n * sizeof *s);
  if (!s) return;
  n = 0;
  for (int i = 0; i < r->nsweeps; i++)
    if (r->sweeps[i].method == method) s[n++] = r->sweeps[i];
  qsort(s, (size_t)n, sizeof *s, cmp_sweep);
  char sz[32];
  p2pk_bench_fmt_size(s[0].bytes, sz, sizeof sz);
  fprintf(out, "\n== %s sweep, GPU%d -> GPU%d, %s: %d configurations, fastest first ==\n",
          p2pk_bench_method_name(method), s[0].src, s[0].dst, sz, n);
  int shown = 0;
  for (int i = 0; i < n; i++) {
    if (s[i].status == P2PK_ROW_OK && shown >= 12) continue;
    if (s[i].status == P2PK_ROW_OK) {
      shown++;
      fprintf(out, "  %8.1f GB/s  cv %5.2f%%  %-5s %s\n", s[i].gbps, 100 * s[i].cv,
              s[i].verified ? "ok" : "WRONG", s[i].config);
    } else {
      fprintf(out, "  %8s       %s: %s (%s)\n", "", "FAILED", s[i].note, s[i].config);
    }
  }
  const p2pk_bench_sweep *b = p2pk_bench_best_sweep(r, method);
  if (b && method == P2PK_BM_STAGED)
    fprintf(out, "  fastest: %s at %.1f GB/s (P2PKIT_STAGE_CHUNK / P2PKIT_STAGE_DEPTH)\n",
            b->config, b->gbps);
  else if (b)
    fprintf(out, "  fastest: %.1f GB/s with P2PKIT_SM_COPY_CONFIG=%s\n", b->gbps, b->config);
  free(s);
}

p2pkit_status_t p2pk_bench_write_table(const p2pk_bench_report *r, FILE *out) {
  header(r, out);
  size_t sizes[P2PK_BENCH_MAX_SIZES];
  int ns = sizes_of(r, sizes, P2PK_BENCH_MAX_SIZES);
  for (int s = 0; s < ns; s++)
    for (int mode = 0; mode < P2PK_MODE_COUNT; mode++) {
      if (!has_rows(r, sizes[s], mode, -1)) continue;
      char sz[32];
      p2pk_bench_fmt_size(sizes[s], sz, sizeof sz);
      fprintf(out, "\n== %s (%zu bytes), %s ==\n", sz, sizes[s], p2pk_bench_mode_name(mode));
      for (int m = 0; m < P2PK_BM_COUNT; m++)
        if (has_rows(r, sizes[s], mode, m)) matrix(r, out, sizes[s], mode, m);
      details(r, out, sizes[s], mode);
      ratios(r, out, sizes[s], mode);
    }
  latency_table(r, out);
  sweep_table(r, out, P2PK_BM_SM_PUSH);
  sweep_table(r, out, P2PK_BM_SM_PULL);
  sweep_table(r, out, P2PK_BM_STAGED);
  if (ferror(out)) return p2pk_fail(P2PKIT_ERR_IO, "writing the bench table failed");
  return P2PKIT_SUCCESS;
}

/* --- JSON -------------------------------------------------------------------- */

static void json_stats(p2pk_json *j, const p2pk_stats *s) {
  p2pk_json_num(j, "median_us", s->median);
  p2pk_json_num(j, "min_us", s->min);
  p2pk_json_num(j, "max_us", s->max);
  p2pk_json_num(j, "cv", s->cv);
  p2pk_json_int(j, "runs", s->n);
}

static const char *status_name(int st) {
  return st == P2PK_ROW_OK ? "ok" : st == P2PK_ROW_SKIPPED ? "skipped" : "failed";
}

p2pkit_status_t p2pk_bench_write_json(const p2pk_bench_report *r, FILE *out) {
  p2pk_json j;
  p2pk_json_init(&j, out);
  p2pk_json_obj(&j, NULL);
  p2pk_json_int(&j, "schema_version", 1);
  p2pk_json_str(&j, "tool", "p2pkit bench");
  char v[32];
  snprintf(v, sizeof v, "%d.%d.%d", P2PKIT_VERSION_MAJOR, P2PKIT_VERSION_MINOR, P2PKIT_VERSION_PATCH);
  p2pk_json_str(&j, "version", v);
  p2pk_json_str(&j, "date", r->date);
  p2pk_json_str(&j, "hostname", r->hostname);
  p2pk_json_str(&j, "driver", r->driver);
  p2pk_json_int(&j, "cuda_driver", r->cuda_driver);
  p2pk_json_int(&j, "cuda_runtime", r->cuda_runtime);
  p2pk_json_arr(&j, "gpus");
  for (int g = 0; g < r->ngpus; g++) {
    p2pk_json_obj(&j, NULL);
    p2pk_json_int(&j, "index", g);
    p2pk_json_str(&j, "name", r->gpu[g].name);
    p2pk_json_str(&j, "busid", r->gpu[g].busid);
    p2pk_json_obj_end(&j);
  }
  p2pk_json_arr_end(&j);
  p2pk_json_obj(&j, "settings");
  p2pk_json_bool(&j, "p2p_disable", r->p2p_disable);
  p2pk_json_str(&j, "p2p_level", r->p2p_level);
  p2pk_json_int(&j, "stage_chunk", (int64_t)r->stage_chunk);
  p2pk_json_int(&j, "stage_depth", r->stage_depth);
  p2pk_json_str(&j, "sm_config", r->sm_config);
  p2pk_json_int(&j, "iters", r->iters);
  p2pk_json_int(&j, "warmup", r->warmup);
  p2pk_json_int(&j, "seed", (int64_t)r->seed);
  p2pk_json_bool(&j, "gate", r->gate);
  p2pk_json_str(&j, "gbps_unit", "1e9 bytes/s");
  p2pk_json_obj_end(&j);
  p2pk_json_arr(&j, "results");
  for (int i = 0; i < r->nrows; i++) {
    const p2pk_bench_row *x = &r->rows[i];
    p2pk_json_obj(&j, NULL);
    p2pk_json_str(&j, "method", p2pk_bench_method_name(x->method));
    p2pk_json_str(&j, "mode", p2pk_bench_mode_name(x->mode));
    p2pk_json_int(&j, "src", x->src);
    p2pk_json_int(&j, "dst", x->dst);
    p2pk_json_bool(&j, "total", x->total);
    p2pk_json_int(&j, "pairs", x->npairs);
    p2pk_json_int(&j, "bytes", (int64_t)x->bytes);
    p2pk_json_str(&j, "link", x->label);
    p2pk_json_str(&j, "path", x->path);
    p2pk_json_str(&j, "status", status_name(x->status));
    if (x->status == P2PK_ROW_OK) {
      p2pk_json_num(&j, "median_gbps", x->gbps);
      p2pk_json_num(&j, "min_gbps", x->gbps_min);
      p2pk_json_num(&j, "max_gbps", x->gbps_max);
      json_stats(&j, &x->us);
      p2pk_json_num(&j, "line_gbps", x->line_gbps > 0 ? x->line_gbps : NAN);
      p2pk_json_num(&j, "expected_gbps", x->expected_gbps > 0 ? x->expected_gbps : NAN);
      p2pk_json_num(&j, "fraction_of_line", x->frac_line > 0 ? x->frac_line : NAN);
      p2pk_json_num(&j, "ratio_to_memcpy_peer", x->ratio_anchor > 0 ? x->ratio_anchor : NAN);
      p2pk_json_bool(&j, "low", x->low);
      p2pk_json_str(&j, "verdict", x->verdict);
      p2pk_json_bool(&j, "verified", x->verified);
      p2pk_json_int(&j, "mismatches", (int64_t)x->mismatches);
    }
    if (x->note[0]) p2pk_json_str(&j, "note", x->note);
    p2pk_json_obj_end(&j);
  }
  p2pk_json_arr_end(&j);
  p2pk_json_arr(&j, "latency");
  for (int i = 0; i < r->nlats; i++) {
    const p2pk_bench_lat *l = &r->lats[i];
    p2pk_json_obj(&j, NULL);
    p2pk_json_str(&j, "method", p2pk_bench_lat_name(l->kind));
    p2pk_json_str(&j, "measure", l->kind == P2PK_LAT_FLAG ? "one-way latency" : "time per back-to-back copy");
    p2pk_json_int(&j, "src", l->src);
    p2pk_json_int(&j, "dst", l->dst);
    p2pk_json_int(&j, "bytes", (int64_t)l->bytes);
    p2pk_json_int(&j, "count", l->count);
    p2pk_json_str(&j, "status", status_name(l->status));
    if (l->status == P2PK_ROW_OK) {
      json_stats(&j, &l->us);
      p2pk_json_num(&j, "globaltimer_us", l->gt_us > 0 ? l->gt_us : NAN);
      p2pk_json_bool(&j, "verified", l->verified);
      p2pk_json_int(&j, "mismatches", (int64_t)l->mismatches);
    }
    if (l->note[0]) p2pk_json_str(&j, "note", l->note);
    p2pk_json_obj_end(&j);
  }
  p2pk_json_arr_end(&j);
  p2pk_json_arr(&j, "sweeps");
  for (int i = 0; i < r->nsweeps; i++) {
    const p2pk_bench_sweep *s = &r->sweeps[i];
    p2pk_json_obj(&j, NULL);
    p2pk_json_str(&j, "method", p2pk_bench_method_name(s->method));
    p2pk_json_int(&j, "src", s->src);
    p2pk_json_int(&j, "dst", s->dst);
    p2pk_json_int(&j, "bytes", (int64_t)s->bytes);
    p2pk_json_str(&j, "config", s->config);
    p2pk_json_str(&j, "status", status_name(s->status));
    if (s->status == P2PK_ROW_OK) {
      p2pk_json_num(&j, "median_gbps", s->gbps);
      p2pk_json_num(&j, "cv", s->cv);
      p2pk_json_bool(&j, "verified", s->verified);
    }
    if (s->note[0]) p2pk_json_str(&j, "note", s->note);
    p2pk_json_obj_end(&j);
  }
  p2pk_json_arr_end(&j);
  p2pk_json_obj(&j, "best");
  static const int best_of[] = {P2PK_BM_SM_PUSH, P2PK_BM_SM_PULL, P2PK_BM_STAGED};
  for (size_t k = 0; k < sizeof best_of / sizeof best_of[0]; k++) {
    const p2pk_bench_sweep *b = p2pk_bench_best_sweep(r, best_of[k]);
    if (!b) continue;
    p2pk_json_obj(&j, p2pk_bench_method_name(best_of[k]));
    p2pk_json_str(&j, "config", b->config);
    p2pk_json_num(&j, "median_gbps", b->gbps);
    p2pk_json_obj_end(&j);
  }
  p2pk_json_obj_end(&j);
  p2pk_json_obj_end(&j);
  p2pk_json_finish(&j);
  if (ferror(out)) return p2pk_fail(P2PKIT_ERR_IO, "writing the bench JSON failed");
  return P2PKIT_SUCCESS;
}

/* --- CSV --------------------------------------------------------------------- */

static void csv_str(FILE *out, const char *s) {
  if (!strpbrk(s, ",\"\n\r")) {
    fputs(s, out);
    return;
  }
  fputc('"', out);
  for (; *s; s++) {
    if (*s == '"') fputc('"', out);
    fputc(*s, out);
  }
  fputc('"', out);
}

static void csv_num(FILE *out, double v) {
  fputc(',', out);
  if (v > 0 && isfinite(v)) fprintf(out, "%.6g", v);
}

p2pkit_status_t p2pk_bench_write_csv(const p2pk_bench_report *r, FILE *out) {
  fputs("kind,method,mode,src,dst,total,pairs,bytes,median_gbps,min_gbps,max_gbps,median_us,"
        "min_us,max_us,cv,line_gbps,expected_gbps,fraction_of_line,ratio_to_memcpy_peer,verdict,"
        "verified,mismatches,status,config,note\n",
        out);
  for (int i = 0; i < r->nrows; i++) {
    const p2pk_bench_row *x = &r->rows[i];
    int ok = x->status == P2PK_ROW_OK;
    fprintf(out, "copy,%s,%s,%d,%d,%d,%d,%zu", p2pk_bench_method_name(x->method),
            p2pk_bench_mode_name(x->mode), x->src, x->dst, x->total, x->npairs, x->bytes);
    csv_num(out, ok ? x->gbps : 0);
    csv_num(out, ok ? x->gbps_min : 0);
    csv_num(out, ok ? x->gbps_max : 0);
    csv_num(out, ok ? x->us.median : 0);
    csv_num(out, ok ? x->us.min : 0);
    csv_num(out, ok ? x->us.max : 0);
    fputc(',', out);
    if (ok) fprintf(out, "%.6g", x->us.cv);
    csv_num(out, x->line_gbps);
    csv_num(out, x->expected_gbps);
    csv_num(out, ok ? x->frac_line : 0);
    csv_num(out, ok ? x->ratio_anchor : 0);
    fputc(',', out);
    csv_str(out, x->verdict);
    fprintf(out, ",%d,%llu,%s,,", ok ? x->verified : 0, (unsigned long long)x->mismatches,
            status_name(x->status));
    csv_str(out, x->note);
    fputc('\n', out);
  }
  for (int i = 0; i < r->nlats; i++) {
    const p2pk_bench_lat *l = &r->lats[i];
    int ok = l->status == P2PK_ROW_OK;
    fprintf(out, "latency,%s,oneway,%d,%d,0,1,%zu,,,", p2pk_bench_lat_name(l->kind), l->src,
            l->dst, l->bytes);
    csv_num(out, ok ? l->us.median : 0);
    csv_num(out, ok ? l->us.min : 0);
    csv_num(out, ok ? l->us.max : 0);
    fputc(',', out);
    if (ok) fprintf(out, "%.6g", l->us.cv);
    fprintf(out, ",,,,,,%d,%llu,%s,,", ok ? l->verified : 0, (unsigned long long)l->mismatches,
            status_name(l->status));
    csv_str(out, l->note);
    fputc('\n', out);
  }
  for (int i = 0; i < r->nsweeps; i++) {
    const p2pk_bench_sweep *s = &r->sweeps[i];
    int ok = s->status == P2PK_ROW_OK;
    fprintf(out, "sweep,%s,oneway,%d,%d,0,1,%zu", p2pk_bench_method_name(s->method), s->src, s->dst,
            s->bytes);
    csv_num(out, ok ? s->gbps : 0);
    fputs(",,,,,", out);
    fputc(',', out);
    if (ok) fprintf(out, "%.6g", s->cv);
    fprintf(out, ",,,,,,%d,0,%s,", ok ? s->verified : 0, status_name(s->status));
    csv_str(out, s->config);
    fputc(',', out);
    csv_str(out, s->note);
    fputc('\n', out);
  }
  if (ferror(out)) return p2pk_fail(P2PKIT_ERR_IO, "writing the bench CSV failed");
  return P2PKIT_SUCCESS;
}
