/* SPDX-License-Identifier: BSD-3-Clause */
/* What `p2pkit perf` prints: nccl-tests' table (a # header block, one line
 * per size, the average bus bandwidth), the JSON document, and the sweep's
 * algorithm table. Pure functions of the results, tested without a GPU. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll/select/algo.h"
#include "core/json.h"
#include "core/check.h"
#include "nccl/nccl_dl.h"
#include "perf/perf.h"

/* Column widths: the row and header formats below must agree. */
#define W_BASE "%12s  %12s  %8s  %6s  %6s"
#define W_PLACE "  %7s  %6s  %6s  %6s"
#define W_VS "  %8s  %6s  %7s"
#define BASE_WIDTH 52  /* 12+2+12+2+8+2+6+2+6 */
#define PLACE_WIDTH 33 /* 2+7+2+6+2+6+2+6 */
#define VS_WIDTH 27    /* 2+8+2+6+2+7 */
/* -S: nccl-tests' timestamp column, "%Y-%m-%d %H:%M:%S" (local time). */
#define TS_WIDTH 21
#define TS_FORMAT_LABEL "(Y-m-d H:M:S)"

perf_lib p2pk_perf_primary(const perf_args *a) {
  return a->nccl_only ? PERF_LIB_NCCL : PERF_LIB_P2PKIT;
}

static int show_vs(const perf_args *a) { return a->vs_nccl && !a->nccl_only; }

void p2pk_perf_fmt_time(char *buf, size_t len, double us) {
  if (!(us >= 0) || isinf(us)) snprintf(buf, len, "N/A");
  else if (us >= 10000.0) snprintf(buf, len, "%.0f", us);
  else if (us >= 100.0) snprintf(buf, len, "%.1f", us);
  else snprintf(buf, len, "%.2f", us);
}

static void fmt_bw(char *buf, size_t len, double gbps) {
  if (isnan(gbps)) snprintf(buf, len, "N/A");
  else snprintf(buf, len, "%.2f", gbps);
}

static void fmt_wrong(char *buf, size_t len, const perf_stat *s) {
  if (!s->measured || s->wrong < 0) snprintf(buf, len, "N/A");
  else snprintf(buf, len, "%lld", (long long)s->wrong);
}

static void centered(FILE *out, const char *text, int width) {
  int len = (int)strlen(text);
  int left = width > len ? (width - len) / 2 : 0;
  fprintf(out, "%*s%s%*s", left, "", text, width > len + left ? width - len - left : 0, "");
}

void p2pk_perf_print_header(FILE *out, const perf_report *r, const perf_pass *p) {
  const perf_args *a = r->args;
  char nccl[320] = "", v[24];
  if (r->nccl_version) {
    p2pk_nccl_version_str(r->nccl_version, v, sizeof v);
    snprintf(nccl, sizeof nccl, "NCCL %s (%s)", v, r->nccl_path);
  }
  int pv = p2pkit_version();
  fprintf(out, "# p2pkit perf %s: ", a->coll->name);
  if (a->nccl_only) {
    fprintf(out, "%s\n", nccl);
  } else {
    fprintf(out, "p2pkit %d.%d.%d", pv / 10000, pv / 100 % 100, pv % 100);
    if (p->algo[0]) fprintf(out, " (algo %s)", p->algo);
    if (show_vs(a)) fprintf(out, ", baseline %s", nccl);
    fputc('\n', out);
  }
  fprintf(out, "# nProcs %d nGpus %d minBytes %zu maxBytes %zu step: ", r->nprocs,
          r->gpus_per_proc, a->min_bytes, a->max_bytes);
  if (a->step_bytes) fprintf(out, "%zu(bytes)", a->step_bytes);
  else fprintf(out, "%ld(factor)", a->step_factor);
  fprintf(out, " warmup iters: %d iters: %d agg iters: %d repeats: %d validation: %d graph: %d "
          "register: %d unalign: %d\n", a->warmup, a->iters, a->agg, a->repeats, a->check, a->graph,
          a->reg, a->unalign);
  if (a->blocking || a->stream_null || a->average != 3 || a->cycles != 1)
    fprintf(out, "# blocking: %d stream_null: %d average: %d run cycles: %d\n", a->blocking,
            a->stream_null, a->average, a->cycles);
  if (a->max_blocks > 0) {
    const char *nc = getenv("NCCL_MAX_CTAS");
    fprintf(out, "# grid cap: p2pkit %d blocks (P2PKIT_MAX_BLOCKS)", a->max_blocks);
    if (show_vs(a) || a->nccl_only) fprintf(out, ", NCCL_MAX_CTAS=%s", nc ? nc : "(unset)");
    fputc('\n', out);
  }
  fprintf(out, "#\n# Using devices\n");
  for (int i = 0; i < r->nranks; i++) {
    const perf_rank_info *k = &r->ranks[i];
    fprintf(out, "#  Rank %2d Group  0 Pid %6d on %10s device %2d [%s] %s\n", k->rank, k->pid,
            r->hostname, k->device, k->busid, k->name);
  }
  int vs = show_vs(a);
  int gw = PLACE_WIDTH + (vs ? VS_WIDTH : 0);
  fprintf(out, "#\n#%*s", BASE_WIDTH - 1, "");
  centered(out, "out-of-place", gw);
  if (a->coll->has_inplace) centered(out, "in-place", gw);
  fputc('\n', out);
  int places = a->coll->has_inplace ? 2 : 1;
  const char *tlabel = a->cputime ? "cputime" : "time";
  fprintf(out, "# %10s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
  for (int ip = 0; ip < places; ip++) {
    fprintf(out, W_PLACE, tlabel, "algbw", "busbw", "#wrong");
    if (vs) fprintf(out, W_VS, a->cputime ? "ncputime" : "nccl", "#wrong", "speedup");
  }
  if (a->timestamps) fprintf(out, " %*s", TS_WIDTH, "timestamp");
  fprintf(out, "\n# %10s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
  for (int ip = 0; ip < places; ip++) {
    fprintf(out, W_PLACE, "(us)", "(GB/s)", "(GB/s)", "");
    if (vs) fprintf(out, W_VS, "(us)", "(nccl)", "(x)");
  }
  if (a->timestamps) fprintf(out, " %*s", TS_WIDTH, TS_FORMAT_LABEL);
  fputc('\n', out);
}

static double speedup(const perf_row *row, int ip) {
  const perf_stat *mine = &row->st[PERF_LIB_P2PKIT][ip], *base = &row->st[PERF_LIB_NCCL][ip];
  if (!mine->measured || !base->measured || !(mine->t_med > 0)) return NAN;
  return base->t_med / mine->t_med;
}

/* The time column: the GPU's per call, or with -C the host's to issue one. */
static double shown_time(const perf_args *a, const perf_stat *s) {
  if (!s->measured) return NAN;
  return a->cputime ? s->t_cpu : s->t_med;
}

static void print_timestamp(FILE *out, long long when) {
  char buf[32] = "";
  time_t t = (time_t)when;
  struct tm tm;
  if (localtime_r(&t, &tm)) strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  fprintf(out, " %*s", TS_WIDTH, buf);
}

void p2pk_perf_print_variant_note(FILE *out, const perf_report *r, const perf_variant *v,
                                  const char *why) {
  const perf_args *a = r->args;
  char what[64];
  int n = snprintf(what, sizeof what, "%s", p2pk_perf_dtype_name(v->dtype));
  if (a->coll->uses_op) snprintf(what + n, sizeof what - (size_t)n, " %s", p2pk_perf_op_name(v->op));
  if (why && why[0]) fprintf(out, "# %s: %s\n", what, why);
  else if (!a->nccl_only && p2pk_perf_via_nccl(v))
    fprintf(out, "# %s: p2pkit has no kernels for %s; its calls in the rows below run on NCCL "
            "(its P2PKIT_NCCL path)\n", what, p2pk_perf_dtype_name(v->dtype));
  else if (!a->nccl_only && !p2pk_perf_p2pkit_runs(v))
    fprintf(out, "# %s: p2pkit has no %s (NCCL's pre-multiplied sum): its columns are N/A\n", what,
            p2pk_perf_op_name(v->op));
}

void p2pk_perf_print_row(FILE *out, const perf_report *r, const perf_row *row) {
  const perf_args *a = r->args;
  perf_lib lib = p2pk_perf_primary(a);
  int vs = show_vs(a);
  char root[16];
  snprintf(root, sizeof root, "%d", row->v.root);
  fprintf(out, "%12zu  %12zu  %8s  %6s  %6s", row->k.bytes, row->k.count,
          p2pk_perf_dtype_name(row->v.dtype), a->coll->uses_op ? p2pk_perf_op_name(row->v.op) : "none",
          root);
  int places = a->coll->has_inplace ? 2 : 1;
  for (int ip = 0; ip < places; ip++) {
    const perf_stat *s = &row->st[lib][ip];
    char t[24], alg[24], bus[24], w[24];
    double us = s->measured ? s->t_med : NAN;
    p2pk_perf_fmt_time(t, sizeof t, shown_time(a, s));
    fmt_bw(alg, sizeof alg, p2pk_perf_algbw(row->k.bytes, us));
    fmt_bw(bus, sizeof bus, p2pk_perf_busbw(a->coll, row->k.bytes, us, r->nranks));
    fmt_wrong(w, sizeof w, s);
    fprintf(out, W_PLACE, t, alg, bus, w);
    if (vs) {
      const perf_stat *n = &row->st[PERF_LIB_NCCL][ip];
      char nt[24], nw[24], sp[24];
      p2pk_perf_fmt_time(nt, sizeof nt, shown_time(a, n));
      fmt_wrong(nw, sizeof nw, n);
      double x = speedup(row, ip);
      if (isnan(x)) snprintf(sp, sizeof sp, "N/A");
      else snprintf(sp, sizeof sp, "%.2f", x);
      fprintf(out, W_VS, nt, nw, sp);
    }
  }
  if (a->timestamps) print_timestamp(out, row->when);
  fputc('\n', out);
}

int64_t p2pk_perf_pass_wrong(const perf_pass *p) {
  int64_t sum = 0;
  for (int i = 0; i < p->nrows; i++)
    for (int l = 0; l < PERF_LIB_COUNT; l++)
      for (int ip = 0; ip < 2; ip++) {
        const perf_stat *s = &p->rows[i].st[l][ip];
        if (s->measured && s->wrong > 0) sum += s->wrong;
      }
  return sum;
}

double p2pk_perf_avg_busbw(const perf_report *r, const perf_pass *p, perf_lib lib) {
  double sum = 0;
  int n = 0;
  for (int i = 0; i < p->nrows; i++)
    for (int ip = 0; ip < 2; ip++) {
      const perf_stat *s = &p->rows[i].st[lib][ip];
      if (!s->measured) continue;
      double bw = p2pk_perf_busbw(r->args->coll, p->rows[i].k.bytes, s->t_med, r->nranks);
      if (isnan(bw)) continue;
      sum += bw;
      n++;
    }
  return n ? sum / n : NAN;
}

/* Geometric mean of NCCL time / p2pkit time over every measured point. */
static double geomean_speedup(const perf_pass *p) {
  double logsum = 0;
  int n = 0;
  for (int i = 0; i < p->nrows; i++)
    for (int ip = 0; ip < 2; ip++) {
      double x = speedup(&p->rows[i], ip);
      if (isnan(x) || !(x > 0)) continue;
      logsum += log(x);
      n++;
    }
  return n ? exp(logsum / n) : NAN;
}

void p2pk_perf_print_footer(FILE *out, const perf_report *r, const perf_pass *p) {
  int64_t wrong = p2pk_perf_pass_wrong(p);
  fprintf(out, "# Out of bounds values : %lld %s\n", (long long)wrong,
          r->args->check ? (wrong ? "FAILED" : "OK") : "(not checked)");
  fprintf(out, "# Avg bus bandwidth    : %g \n",
          p2pk_perf_avg_busbw(r, p, p2pk_perf_primary(r->args)));
  if (show_vs(r->args)) {
    fprintf(out, "# Avg bus bandwidth (NCCL) : %g \n", p2pk_perf_avg_busbw(r, p, PERF_LIB_NCCL));
    fprintf(out, "# Speedup over NCCL (NCCL time / p2pkit time), geometric mean : %.3f\n",
            geomean_speedup(p));
  }
  fprintf(out, "#\n");
}

/* ---- JSON --------------------------------------------------------------- */

static void json_stat(p2pk_json *j, const char *key, const perf_report *r, const perf_row *row,
                      const perf_stat *s) {
  if (!s->measured) {
    p2pk_json_null(j, key);
    return;
  }
  p2pk_json_obj(j, key);
  p2pk_json_num(j, "time_us", s->t_med);
  p2pk_json_num(j, "time_us_min", s->t_min);
  p2pk_json_num(j, "time_us_max", s->t_max);
  p2pk_json_num(j, "cpu_time_us", s->t_cpu);
  p2pk_json_num(j, "algbw_gbps", p2pk_perf_algbw(row->k.bytes, s->t_med));
  p2pk_json_num(j, "busbw_gbps", p2pk_perf_busbw(r->args->coll, row->k.bytes, s->t_med, r->nranks));
  if (s->wrong < 0) p2pk_json_null(j, "wrong");
  else p2pk_json_int(j, "wrong", s->wrong);
  p2pk_json_obj_end(j);
}

static void json_env(p2pk_json *j) {
  static const char *const names[] = {
      "NCCL_P2P_DISABLE", "P2PKIT_P2P_DISABLE", "NCCL_NVLS_ENABLE", "P2PKIT_ALGO",
      "NCCL_SHM_DISABLE", "NCCL_ALGO",          "NCCL_PROTO",       "P2PKIT_P2P_LEVEL",
      "NCCL_P2P_LEVEL",   "P2PKIT_BUFFER_SIZE", "CUDA_VISIBLE_DEVICES", "P2PKIT_NCCL_LIB",
      "P2PKIT_PROTO",     "P2PKIT_ALGO_TABLE",  "P2PKIT_COLL_BLOCKS", "P2PKIT_COLL_THREADS",
      "P2PKIT_COLL_CHUNK", "P2PKIT_MAX_BLOCKS", "NCCL_MAX_CTAS",
  };
  const size_t nn = sizeof names / sizeof names[0];
  p2pk_json_obj(j, "env");
  for (size_t i = 0; i < nn; i++) p2pk_json_str(j, names[i], getenv(names[i]));
  /* Every other P2PKIT_* and NCCL_* setting in force, so a result says how
   * it was made (P2PKIT_SENDRECV_MAP, thresholds, ...); never a secret
   * (P2PKIT_JOB_SECRET). */
  for (char **e = environ; e && *e; e++) {
    const char *eq = strchr(*e, '=');
    char name[128];
    const size_t len = eq ? (size_t)(eq - *e) : 0;
    if (!len || len >= sizeof name) continue;
    memcpy(name, *e, len);
    name[len] = '\0';
    if (strncmp(name, "P2PKIT_", 7) != 0 && strncmp(name, "NCCL_", 5) != 0) continue;
    if (strstr(name, "SECRET")) continue;
    int listed = 0;
    for (size_t i = 0; i < nn && !listed; i++) listed = strcmp(names[i], name) == 0;
    if (!listed) p2pk_json_str(j, name, eq + 1);
  }
  p2pk_json_obj_end(j);
}

static void json_settings(p2pk_json *j, const perf_report *r) {
  const perf_args *a = r->args;
  p2pk_json_obj(j, "settings");
  /* "dtype" and "op": the one asked for, or "all" (the lists follow). */
  p2pk_json_str(j, "dtype", a->ndtypes > 1 ? "all" : p2pk_perf_dtype_name(a->dtype));
  p2pk_json_str(j, "op", !a->coll->uses_op ? NULL : a->nops > 1 ? "all" : p2pk_perf_op_name(a->op));
  p2pk_json_arr(j, "dtypes");
  for (int i = 0; i < a->ndtypes; i++) p2pk_json_str(j, NULL, p2pk_perf_dtype_name(a->dtypes[i]));
  p2pk_json_arr_end(j);
  p2pk_json_arr(j, "ops");
  for (int i = 0; i < a->nops && a->coll->uses_op; i++) p2pk_json_str(j, NULL, p2pk_perf_op_name(a->ops[i]));
  p2pk_json_arr_end(j);
  if (a->coll->uses_root && a->root < 0) p2pk_json_str(j, "root", "all");
  else p2pk_json_int(j, "root", a->coll->uses_root ? a->root : -1);
  p2pk_json_int(j, "min_bytes", (int64_t)a->min_bytes);
  p2pk_json_int(j, "max_bytes", (int64_t)a->max_bytes);
  if (a->step_bytes) p2pk_json_int(j, "step_bytes", (int64_t)a->step_bytes);
  else p2pk_json_int(j, "step_factor", a->step_factor);
  p2pk_json_int(j, "iters", a->iters);
  p2pk_json_int(j, "warmup_iters", a->warmup);
  p2pk_json_int(j, "agg_iters", a->agg);
  p2pk_json_int(j, "run_cycles", a->cycles);
  p2pk_json_int(j, "repeats", a->repeats);
  p2pk_json_int(j, "check", a->check);
  p2pk_json_bool(j, "register", a->reg);
  p2pk_json_int(j, "unalign", a->unalign);
  p2pk_json_str(j, "time", a->cputime ? "cpu" : "gpu");
  p2pk_json_str(j, "p2pkit_transport", a->nccl_only ? NULL : r->staged ? "shm" : "p2p");
  p2pk_json_obj_end(j);
}

void p2pk_perf_write_json(FILE *out, const perf_report *r) {
  const perf_args *a = r->args;
  p2pk_json j;
  char v[32];
  p2pk_json_init(&j, out);
  p2pk_json_obj(&j, NULL);
  p2pk_json_int(&j, "schema_version", 1);
  p2pk_json_str(&j, "tool", "p2pkit perf");
  p2pk_json_str(&j, "collective", a->coll->name);
  p2pk_json_str(&j, "date", r->date);
  p2pk_json_str(&j, "hostname", r->hostname);
  int pv = p2pkit_version();
  snprintf(v, sizeof v, "%d.%d.%d", pv / 10000, pv / 100 % 100, pv % 100);
  p2pk_json_str(&j, "p2pkit_version", v);
  if (r->nccl_version) {
    p2pk_nccl_version_str(r->nccl_version, v, sizeof v);
    p2pk_json_str(&j, "nccl_version", v);
    p2pk_json_str(&j, "nccl_library", r->nccl_path);
  } else {
    p2pk_json_null(&j, "nccl_version");
    p2pk_json_null(&j, "nccl_library");
  }
  p2pk_json_str(&j, "driver_version", r->driver[0] ? r->driver : NULL);
  p2pk_json_int(&j, "cuda_driver_version", r->cuda_driver);
  p2pk_json_int(&j, "cuda_runtime_version", r->cuda_runtime);
  p2pk_json_arr(&j, "gpus");
  for (int i = 0; i < r->nranks; i++) {
    p2pk_json_obj(&j, NULL);
    p2pk_json_int(&j, "rank", r->ranks[i].rank);
    p2pk_json_int(&j, "device", r->ranks[i].device);
    p2pk_json_int(&j, "pid", r->ranks[i].pid);
    p2pk_json_str(&j, "name", r->ranks[i].name);
    p2pk_json_str(&j, "busid", r->ranks[i].busid);
    p2pk_json_obj_end(&j);
  }
  p2pk_json_arr_end(&j);
  p2pk_json_obj(&j, "mode");
  p2pk_json_str(&j, "launch", a->graph ? "graph" : "eager");
  p2pk_json_int(&j, "graph_launches", a->graph);
  p2pk_json_int(&j, "processes", r->nprocs);
  p2pk_json_int(&j, "gpus_per_process", r->gpus_per_proc);
  p2pk_json_int(&j, "nranks", r->nranks);
  p2pk_json_str(&j, "libraries", a->nccl_only ? "nccl" : a->vs_nccl ? "p2pkit+nccl" : "p2pkit");
  p2pk_json_int(&j, "blocking", a->blocking);
  p2pk_json_bool(&j, "stream_null", a->stream_null);
  p2pk_json_int(&j, "average", a->average);
  p2pk_json_obj_end(&j);
  json_settings(&j, r);
  json_env(&j);
  int64_t wrong = 0;
  p2pk_json_arr(&j, "passes");
  for (int pi = 0; pi < r->npasses; pi++) {
    const perf_pass *p = &r->passes[pi];
    wrong += p2pk_perf_pass_wrong(p);
    p2pk_json_obj(&j, NULL);
    p2pk_json_str(&j, "algo", p->algo[0] ? p->algo : NULL);
    p2pk_json_arr(&j, "results");
    for (int i = 0; i < p->nrows; i++) {
      const perf_row *row = &p->rows[i];
      p2pk_json_obj(&j, NULL);
      p2pk_json_int(&j, "size", (int64_t)row->k.bytes);
      p2pk_json_int(&j, "count", (int64_t)row->k.count);
      p2pk_json_str(&j, "type", p2pk_perf_dtype_name(row->v.dtype));
      p2pk_json_str(&j, "redop", a->coll->uses_op ? p2pk_perf_op_name(row->v.op) : "none");
      p2pk_json_int(&j, "root", row->v.root);
      p2pk_json_int(&j, "cycle", row->cycle);
      p2pk_json_int(&j, "timestamp", row->when);
      p2pk_json_bool(&j, "p2pkit_via_nccl", !a->nccl_only && p2pk_perf_via_nccl(&row->v));
      if (row->algo >= 0) {
        char ran[48];
        snprintf(ran, sizeof ran, "%s/%s", p2pk_algo_name(row->algo), p2pk_proto_name(row->proto));
        p2pk_json_str(&j, "p2pkit_algo", ran);
      } else {
        p2pk_json_null(&j, "p2pkit_algo");
      }
      for (int ip = 0; ip < 2; ip++) {
        p2pk_json_obj(&j, ip ? "in_place" : "out_of_place");
        json_stat(&j, "p2pkit", r, row, &row->st[PERF_LIB_P2PKIT][ip]);
        json_stat(&j, "nccl", r, row, &row->st[PERF_LIB_NCCL][ip]);
        p2pk_json_num(&j, "speedup", speedup(row, ip));
        p2pk_json_obj_end(&j);
      }
      p2pk_json_obj_end(&j);
    }
    p2pk_json_arr_end(&j);
    p2pk_json_num(&j, "avg_busbw_gbps_p2pkit", p2pk_perf_avg_busbw(r, p, PERF_LIB_P2PKIT));
    p2pk_json_num(&j, "avg_busbw_gbps_nccl", p2pk_perf_avg_busbw(r, p, PERF_LIB_NCCL));
    p2pk_json_num(&j, "speedup_geomean", geomean_speedup(p));
    p2pk_json_obj_end(&j);
  }
  p2pk_json_arr_end(&j);
  p2pk_json_int(&j, "wrong_total", wrong);
  p2pk_json_obj_end(&j);
  p2pk_json_finish(&j);
}

/* ---- the sweep ---------------------------------------------------------- */

/* What pass `pi` ran at row i: the communicator's own choice when known,
 * else the algorithm the pass forced. 0 when that cannot stand in a table for
 * this transport (staged is host staging's only algorithm, and only its). */
static int ran(const perf_report *r, int pi, int i, int *algo, int *proto) {
  const perf_row *row = &r->passes[pi].rows[i];
  if (row->algo >= 0 && row->proto >= 0) {
    *algo = row->algo;
    *proto = row->proto;
  } else if (p2pk_perf_algo_split(r->passes[pi].algo, algo, proto) != 0 || *proto < 0) {
    return 0;
  }
  return (*algo == P2PK_ALGO_STAGED) == (r->staged != 0);
}

/* The pass with the lowest out-of-place median at row i among those whose
 * results were right (and, for the table, whose algorithm is known); -1 if none. */
static int winner(const perf_report *r, int i, int for_table) {
  int best = -1;
  for (int pi = 0; pi < r->npasses; pi++) {
    const perf_pass *p = &r->passes[pi];
    int algo, proto;
    if (i >= p->nrows || (for_table && !ran(r, pi, i, &algo, &proto))) continue;
    const perf_stat *s = &p->rows[i].st[PERF_LIB_P2PKIT][0];
    if (!s->measured || s->wrong > 0 || !(s->t_med > 0)) continue;
    if (best < 0 || s->t_med < r->passes[best].rows[i].st[PERF_LIB_P2PKIT][0].t_med) best = pi;
  }
  return best;
}

void p2pk_perf_print_winners(FILE *out, const perf_report *r) {
  if (r->npasses < 1) return;
  fprintf(out, "# Fastest algorithm per size (out-of-place median, results checked):\n");
  fprintf(out, "# %10s  %14s", "size", "winner");
  for (int pi = 0; pi < r->npasses; pi++) fprintf(out, "  %14.14s", r->passes[pi].algo);
  fprintf(out, "\n# %10s  %14s", "(B)", "");
  for (int pi = 0; pi < r->npasses; pi++) fprintf(out, "  %14s", "(us)");
  fputc('\n', out);
  for (int i = 0; i < r->passes[0].nrows; i++) {
    int w = winner(r, i, 0);
    fprintf(out, "%12zu  %14.14s", r->passes[0].rows[i].k.bytes, w >= 0 ? r->passes[w].algo : "none");
    for (int pi = 0; pi < r->npasses; pi++) {
      char t[24] = "N/A";
      const perf_pass *p = &r->passes[pi];
      if (i < p->nrows && p->rows[i].st[PERF_LIB_P2PKIT][0].measured)
        p2pk_perf_fmt_time(t, sizeof t, p->rows[i].st[PERF_LIB_P2PKIT][0].t_med);
      fprintf(out, "  %14s", t);
    }
    fputc('\n', out);
  }
  fprintf(out, "#\n");
}

p2pkit_status_t p2pk_perf_write_algo_table(FILE *out, const perf_report *r) {
  const perf_args *a = r->args;
  p2pk_algo_table t, builtin;
  memset(&t, 0, sizeof t);
  p2pk_algo_table_default(&builtin);
  /* One row per run of sizes with the same winner, up to its last size; the
   * last run extends to any size. */
  int nrows = r->npasses ? r->passes[0].nrows : 0;
  for (int i = 0; i < nrows; i++) {
    int w = winner(r, i, 1), algo, proto;
    if (w < 0 || !ran(r, w, i, &algo, &proto)) continue;
    p2pk_algo_row *last = t.nrows ? &t.rows[t.nrows - 1] : NULL;
    size_t bytes = r->passes[0].rows[i].k.bytes;
    if (last && last->algo == algo && last->proto == proto) {
      last->max_bytes = bytes;
      continue;
    }
    if (t.nrows == P2PK_ALGO_MAX_ROWS)
      return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "the sweep's winners need more than %d rows",
                       P2PK_ALGO_MAX_ROWS);
    p2pk_algo_row *row = &t.rows[t.nrows++];
    memset(row, 0, sizeof *row);
    row->transport = r->staged ? P2PK_TRANSPORT_SHM : P2PK_TRANSPORT_P2P;
    row->min_ranks = row->max_ranks = r->nranks;
    row->max_bytes = bytes;
    row->algo = algo;
    row->proto = proto;
  }
  if (t.nrows == 0)
    return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "no pass of the sweep gave right results with a known "
                     "algorithm on the %s transport; no table written", r->staged ? "shm" : "p2p");
  t.rows[t.nrows - 1].max_bytes = SIZE_MAX;
  for (int i = 0; i < builtin.nrows && t.nrows < P2PK_ALGO_MAX_ROWS; i++) t.rows[t.nrows++] = builtin.rows[i];
  fprintf(out, "# written by p2pkit perf %s --sweep-algos on %s, %s: %d rank(s) (%d process(es) x %d "
          "GPU(s), %s), %s, %s transport, %s calls; the fastest per size (out-of-place median of %d "
          "repeats), then the built-in rows\n", a->coll->name, r->hostname, r->date, r->nranks,
          r->nprocs, r->gpus_per_proc, r->nranks ? r->ranks[0].name : "?",
          p2pk_perf_dtype_name(r->passes[0].nrows ? r->passes[0].rows[0].v.dtype : a->dtype),
          r->staged ? "shm" : "p2p", a->graph ? "graph" : "eager",
          a->repeats);
  return p2pk_algo_table_write(&t, out);
}
