/* SPDX-License-Identifier: BSD-3-Clause */
/* `p2pkit bench` arguments: parsed and checked without a GPU; the ids and
 * each GPU's memory need are checked against the machine afterwards
 * (p2pk_bench_validate, p2pk_bench_mem_need). */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "core/opts.h"
#include "core/param.h"

static const char *const method_names[P2PK_BM_COUNT] = {
    "memcpy-peer", "staged-serial", "staged", "driver", "p2p-ce", "p2p-sm-push", "p2p-sm-pull"};
static const char *const mode_names[P2PK_MODE_COUNT] = {"oneway", "both", "all"};
static const char *const lat_names[P2PK_LAT_COUNT] = {"memcpy-peer", "p2p-ce", "p2p-sm-push",
                                                      "staged", "sm-flag"};

const char *p2pk_bench_method_name(int m) {
  return m >= 0 && m < P2PK_BM_COUNT ? method_names[m] : "?";
}
const char *p2pk_bench_mode_name(int m) { return m >= 0 && m < P2PK_MODE_COUNT ? mode_names[m] : "?"; }
const char *p2pk_bench_lat_name(int k) { return k >= 0 && k < P2PK_LAT_COUNT ? lat_names[k] : "?"; }

int p2pk_bench_method_parse(const char *s, size_t len) {
  static const struct {
    const char *name;
    int m;
  } alias[] = {
      {"memcpy-peer", P2PK_BM_MEMCPY_PEER}, {"anchor", P2PK_BM_MEMCPY_PEER},
      {"staged-serial", P2PK_BM_STAGED_SERIAL}, {"serial", P2PK_BM_STAGED_SERIAL},
      {"staged", P2PK_BM_STAGED}, {"staged-pipelined", P2PK_BM_STAGED},
      {"pipelined", P2PK_BM_STAGED}, {"driver", P2PK_BM_DRIVER}, {"fallback", P2PK_BM_DRIVER},
      {"p2p-ce", P2PK_BM_CE}, {"ce", P2PK_BM_CE}, {"p2p-sm-push", P2PK_BM_SM_PUSH},
      {"sm-push", P2PK_BM_SM_PUSH}, {"push", P2PK_BM_SM_PUSH}, {"p2p-sm-pull", P2PK_BM_SM_PULL},
      {"sm-pull", P2PK_BM_SM_PULL}, {"pull", P2PK_BM_SM_PULL},
  };
  for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
    if (strlen(alias[i].name) == len && strncmp(alias[i].name, s, len) == 0) return alias[i].m;
  return -1;
}

p2pkit_path_t p2pk_bench_method_path(int m) {
  switch (m) {
    case P2PK_BM_STAGED_SERIAL: return P2PKIT_PATH_STAGED_SERIAL;
    case P2PK_BM_STAGED: return P2PKIT_PATH_STAGED;
    case P2PK_BM_DRIVER: return P2PKIT_PATH_DRIVER;
    case P2PK_BM_CE: return P2PKIT_PATH_P2P_CE;
    case P2PK_BM_SM_PUSH: return P2PKIT_PATH_P2P_SM_PUSH;
    case P2PK_BM_SM_PULL: return P2PKIT_PATH_P2P_SM_PULL;
    default: return P2PKIT_PATH_AUTO;
  }
}

int p2pk_bench_method_p2p(int m) {
  return m == P2PK_BM_MEMCPY_PEER || m == P2PK_BM_CE || m == P2PK_BM_SM_PUSH ||
         m == P2PK_BM_SM_PULL;
}

void p2pk_bench_fmt_size(size_t b, char *out, size_t len) {
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = (double)b;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  if (v == (double)(long long)v) snprintf(out, len, "%lld %s", (long long)v, unit[u]);
  else snprintf(out, len, "%.1f %s", v, unit[u]);
}

void p2pk_bench_usage(FILE *out) {
  fprintf(out,
          "usage: p2pkit bench [options]\n\n"
          "Measure copies between GPUs: every method, every pair, verified, with the\n"
          "cudaMemcpyPeerAsync anchor measured in the same run.\n\n"
          "  --methods LIST      memcpy-peer, staged-serial, staged, driver, p2p-ce,\n"
          "                      p2p-sm-push, p2p-sm-pull (also: serial, ce, push, pull) or all\n"
          "                      (default: all; --latency or a sweep alone runs none, unless\n"
          "                      --mode, -e, -f, -i, or -b without a sweep, is also given)\n"
          "  --mode LIST         oneway, both (each pair both ways at once), all (every pair at\n"
          "                      once); default oneway\n"
          "  --gpus LIST         GPUs to use, e.g. 0,1,3 (default: all)\n"
          "  --pairs LIST        ordered pairs SRC:DST, e.g. 0:1,1:0 (default: every ordered\n"
          "                      pair of --gpus)\n"
          "  -b, --minbytes SIZE first size (K, M, G, T suffixes; default 256M)\n"
          "  -e, --maxbytes SIZE last size (default: -b)\n"
          "  -f, --stepfactor N  multiply the size by N (default 2 when -e > -b)\n"
          "  -i, --stepbytes SIZE  add SIZE instead\n"
          "  -n, --iters N       timed runs per measurement (default 20)\n"
          "  -w, --warmup N      untimed runs first (default 5)\n"
          "      --seed N        data pattern seed\n"
          "      --latency       small-transfer latency: back-to-back copies (cudaMemcpyPeerAsync,\n"
          "                      p2pkit CE, SM, staged) and an SM write of data + flag (ping-pong)\n"
          "      --lat-bytes SIZE  latency transfer size (default 8)\n"
          "      --lat-iters N   round trips per ping-pong, copies per back-to-back sample\n"
          "                      (default 1000)\n"
          "      --sm-config TEXT  SM kernel for p2p-sm-push/pull (as P2PKIT_SM_COPY_CONFIG)\n"
          "      --sm-sweep[=short|full]  time SM kernel configurations (push and pull) at -b:\n"
          "                      every one (full, the default) or the ~20 most promising\n"
          "      --stage-sweep   time the staged pipeline's chunk, depth and ramp at -b\n"
          "      --no-anchor     skip the cudaMemcpyPeerAsync anchor\n"
          "      --no-gate       start timing without holding the stream until all is queued\n"
          "      --json[=FILE]   JSON (to stdout, or to FILE besides the table)\n"
          "      --csv[=FILE]    CSV  (to stdout, or to FILE besides the table)\n"
          "      --plot FILE.svg bandwidth against size per method, and pair heat maps\n"
          "      --plot-from F.json  with --plot: draw it from a run saved with --json=F.json\n"
          "                      instead of measuring (no GPU)\n"
          "      --from FILE     plan against a recorded machine (with --dry-run)\n"
          "      --dry-run       print the plan (pairs, links, expected rates, paths) only\n"
          "  -q, --quiet         no table\n"
          "  -h, --help          this text\n\n"
          "GB/s = 10^9 bytes/s; time per run from CUDA events; median of -n runs with\n"
          "min, max and coefficient of variation. Settings: P2PKIT_P2P_DISABLE,\n"
          "P2PKIT_P2P_LEVEL, P2PKIT_STAGE_CHUNK, P2PKIT_STAGE_DEPTH, P2PKIT_SM_COPY_CONFIG.\n"
          "Exit codes: 0 done and every copy verified; 1 a copy failed or its data was wrong,\n"
          "or an output could not be written; 2 a bad command line, setting or --from file,\n"
          "or fewer than two GPUs (docs/cli.md).\n");
}

void p2pk_bench_opts_init(p2pk_bench_opts *o) {
  memset(o, 0, sizeof *o);
  o->modes = 1u << P2PK_MODE_ONEWAY;
  o->min_bytes = 256u << 20;
  o->iters = 20;
  o->warmup = 5;
  o->seed = 0x5eed;
  o->lat_bytes = 8;
  o->lat_iters = 1000;
  o->anchor = 1;
  o->gate = 1;
  p2pk_sm_config_default(&o->sm);
}

void p2pk_bench_opts_free(p2pk_bench_opts *o) {
  free(o->pairs);
  o->pairs = NULL;
  o->npairs = 0;
}

static int fail(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, len, fmt, ap);
  va_end(ap);
  return -1;
}

static int parse_size(const char *opt, const char *v, size_t *out, char *err, size_t len) {
  if (v[0] == '-')
    return fail(err, len, "%s %s: a size cannot be negative", opt, v);
  if (p2pk_parse_size(v, out) != 0)
    return fail(err, len, "%s '%s' is not a size (a number of bytes, optionally with K, M, G or T)",
                opt, v);
  if (*out == 0) return fail(err, len, "%s 0: a size must be at least 1 byte", opt);
  return 0;
}

static int parse_long(const char *opt, const char *v, long lo, long hi, long *out, char *err,
                      size_t len) {
  char *end = NULL;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (!v[0] || *end || errno) return fail(err, len, "%s '%s' is not a whole number", opt, v);
  if (x < lo || x > hi) return fail(err, len, "%s %ld is out of range (%ld to %ld)", opt, x, lo, hi);
  *out = x;
  return 0;
}

static int parse_methods(const char *v, unsigned *out, char *err, size_t len) {
  unsigned m = 0;
  const char *p = v;
  if (!*p) return fail(err, len, "--methods: empty list");
  while (*p) {
    size_t n = strcspn(p, ",");
    if (n == 3 && strncmp(p, "all", 3) == 0) {
      m |= (1u << P2PK_BM_COUNT) - 1;
    } else {
      int x = p2pk_bench_method_parse(p, n);
      if (x < 0)
        return fail(err, len,
                    "unknown method '%.*s' (expected memcpy-peer, staged-serial, staged, driver, "
                    "p2p-ce, p2p-sm-push, p2p-sm-pull or all)",
                    (int)n, p);
      if (m & (1u << x)) return fail(err, len, "method '%.*s' is listed twice", (int)n, p);
      m |= 1u << x;
    }
    p += n;
    if (*p == ',') p++;
  }
  *out = m;
  return 0;
}

static int parse_modes(const char *v, unsigned *out, char *err, size_t len) {
  unsigned m = 0;
  const char *p = v;
  if (!*p) return fail(err, len, "--mode: empty list");
  while (*p) {
    size_t n = strcspn(p, ",");
    int x = -1;
    for (int i = 0; i < P2PK_MODE_COUNT; i++)
      if (strlen(mode_names[i]) == n && strncmp(mode_names[i], p, n) == 0) x = i;
    if (n == 7 && strncmp(p, "one-way", 7) == 0) x = P2PK_MODE_ONEWAY;
    if (n == 4 && strncmp(p, "bidi", 4) == 0) x = P2PK_MODE_BOTH;
    if (x < 0) return fail(err, len, "unknown mode '%.*s' (expected oneway, both or all)", (int)n, p);
    m |= 1u << x;
    p += n;
    if (*p == ',') p++;
  }
  *out = m;
  return 0;
}

static int isdigit_c(char c) { return c >= '0' && c <= '9'; }

static int parse_id(const char **p, long *out) {
  char *end;
  errno = 0;
  if (!isdigit_c(**p)) return -1;
  long v = strtol(*p, &end, 10);
  if (errno || v < 0 || v >= P2PK_MAX_GPUS * 1000L) return -1;
  *out = v;
  *p = end;
  return 0;
}

static int parse_gpus(const char *v, p2pk_bench_opts *o, char *err, size_t len) {
  const char *p = v;
  o->ngpus = 0;
  if (!*p) return fail(err, len, "--gpus: empty list");
  while (*p) {
    long id;
    const char *start = p;
    if (parse_id(&p, &id) != 0 || (*p && *p != ','))
      return fail(err, len, "--gpus '%s': '%.*s' is not a GPU index", v, (int)strcspn(start, ","),
                  start);
    for (int i = 0; i < o->ngpus; i++)
      if (o->gpus[i] == id) return fail(err, len, "GPU %ld is listed twice in '%s'", id, v);
    if (o->ngpus >= P2PK_MAX_GPUS) return fail(err, len, "--gpus: more than %d GPUs", P2PK_MAX_GPUS);
    o->gpus[o->ngpus++] = (int)id;
    if (*p == ',') p++;
  }
  return 0;
}

static int parse_pairs(const char *v, p2pk_bench_opts *o, char *err, size_t len) {
  const char *p = v;
  if (!*p) return fail(err, len, "--pairs: empty list");
  free(o->pairs);
  o->pairs = NULL;
  o->npairs = 0;
  int cap = 0;
  while (*p) {
    const char *start = p;
    long a, b;
    if (parse_id(&p, &a) != 0 || *p != ':' || (p++, parse_id(&p, &b) != 0) || (*p && *p != ','))
      return fail(err, len, "--pairs: '%.*s' is not SRC:DST (e.g. 0:1)", (int)strcspn(start, ","),
                  start);
    if (a == b) return fail(err, len, "--pairs: %ld:%ld copies a GPU to itself", a, b);
    for (int i = 0; i < o->npairs; i++)
      if (o->pairs[i][0] == a && o->pairs[i][1] == b)
        return fail(err, len, "pair %ld:%ld is given twice", a, b);
    if (o->npairs >= P2PK_BENCH_MAX_PAIRS)
      return fail(err, len, "--pairs: more than %d pairs", P2PK_BENCH_MAX_PAIRS);
    if (o->npairs == cap) {
      cap = cap ? cap * 2 : 16;
      int(*np)[2] = realloc(o->pairs, (size_t)cap * sizeof *np);
      if (!np) return fail(err, len, "out of memory");
      o->pairs = np;
    }
    o->pairs[o->npairs][0] = (int)a;
    o->pairs[o->npairs][1] = (int)b;
    o->npairs++;
    if (*p == ',') p++;
  }
  return 0;
}

/* --json / --json=FILE (stdout, or a file besides the table). */
static int output_opt(const char *name, const char *v, int *mode, char *path, size_t pathlen,
                      char *err, size_t len) {
  if (!v) {
    *mode = 1;
    return 0;
  }
  if (!v[0]) return fail(err, len, "%s= needs a file name", name);
  if (strlen(v) >= pathlen) return fail(err, len, "%s: file name too long", name);
  snprintf(path, pathlen, "%s", v);
  *mode = 2;
  return 0;
}

static int make_sizes(p2pk_bench_opts *o, int have_e, int have_f, int have_i, char *err,
                      size_t len) {
  if (!have_e) o->max_bytes = o->min_bytes;
  if (o->max_bytes < o->min_bytes)
    return fail(err, len, "-e %zu is smaller than -b %zu", o->max_bytes, o->min_bytes);
  if (have_f && have_i) return fail(err, len, "-f and -i cannot both be given");
  if (!have_f && !have_i) o->factor = 2;
  o->nsizes = 0;
  for (size_t s = o->min_bytes; s <= o->max_bytes;) {
    if (o->nsizes >= P2PK_BENCH_MAX_SIZES)
      return fail(err, len, "more than %d sizes from -b %zu to -e %zu; use a larger step",
                  P2PK_BENCH_MAX_SIZES, o->min_bytes, o->max_bytes);
    o->sizes[o->nsizes++] = s;
    /* The step past SIZE_MAX ends the list (a wrapped product can land above
     * s, so test before multiplying, not after). */
    if (have_i ? o->step_bytes > SIZE_MAX - s : s > SIZE_MAX / (size_t)o->factor) break;
    s = have_i ? s + o->step_bytes : s * (size_t)o->factor;
  }
  return 0;
}

enum { OPT_METHODS = 256, OPT_MODE, OPT_GPUS, OPT_PAIRS, OPT_SEED, OPT_LATENCY, OPT_LAT_BYTES,
       OPT_LAT_ITERS, OPT_SM_CONFIG, OPT_SM_SWEEP, OPT_STAGE_SWEEP, OPT_NO_ANCHOR, OPT_NO_GATE,
       OPT_JSON, OPT_CSV, OPT_PLOT, OPT_FROM, OPT_DRY_RUN, OPT_PLOT_FROM };
static const char short_opts[] = ":b:e:f:i:n:w:qh";
static const struct option long_opts[] = {
    {"methods", required_argument, NULL, OPT_METHODS}, {"mode", required_argument, NULL, OPT_MODE},
    {"gpus", required_argument, NULL, OPT_GPUS},       {"pairs", required_argument, NULL, OPT_PAIRS},
    {"minbytes", required_argument, NULL, 'b'},        {"maxbytes", required_argument, NULL, 'e'},
    {"stepfactor", required_argument, NULL, 'f'},      {"stepbytes", required_argument, NULL, 'i'},
    {"iters", required_argument, NULL, 'n'},           {"warmup", required_argument, NULL, 'w'},
    {"seed", required_argument, NULL, OPT_SEED},       {"latency", no_argument, NULL, OPT_LATENCY},
    {"lat-bytes", required_argument, NULL, OPT_LAT_BYTES},
    {"lat-iters", required_argument, NULL, OPT_LAT_ITERS},
    {"sm-config", required_argument, NULL, OPT_SM_CONFIG},
    {"sm-sweep", optional_argument, NULL, OPT_SM_SWEEP},
    {"stage-sweep", no_argument, NULL, OPT_STAGE_SWEEP},
    {"no-anchor", no_argument, NULL, OPT_NO_ANCHOR},   {"no-gate", no_argument, NULL, OPT_NO_GATE},
    {"json", optional_argument, NULL, OPT_JSON},       {"csv", optional_argument, NULL, OPT_CSV},
    {"plot", required_argument, NULL, OPT_PLOT},       {"from", required_argument, NULL, OPT_FROM},
    {"dry-run", no_argument, NULL, OPT_DRY_RUN},       {"quiet", no_argument, NULL, 'q'},
    {"plot-from", required_argument, NULL, OPT_PLOT_FROM},
    {"help", no_argument, NULL, 'h'},                  {NULL, 0, NULL, 0},
};

/* Which options were given: the defaults depend on them. */
typedef struct {
  int b, e, f, i, mode;
} given_t;

/* How errors name option `c`: "-b" where it has a letter, else "--seed". */
static void flag_name(int c, char *out, size_t len) {
  snprintf(out, len, "-%c", c);
  for (const struct option *x = long_opts; c >= 256 && x->name; x++)
    if (x->val == c) snprintf(out, len, "--%s", x->name);
}

static int path_opt(const char *flag, const char *v, char *dst, char *err, size_t len) {
  if (!v[0]) return fail(err, len, "%s needs a file name", flag);
  if (strlen(v) >= P2PK_BENCH_PATH) return fail(err, len, "%s: file name too long", flag);
  snprintf(dst, P2PK_BENCH_PATH, "%s", v);
  return 0;
}

static int sweep_opt(const char *v, p2pk_bench_opts *o, char *err, size_t len) {
  if (!v || strcmp(v, "full") == 0) o->sm_sweep = P2PK_SM_SWEEP_FULL;
  else if (strcmp(v, "short") == 0) o->sm_sweep = P2PK_SM_SWEEP_SHORT;
  else return fail(err, len, "--sm-sweep=%s: expected --sm-sweep, --sm-sweep=short or --sm-sweep=full", v);
  return 0;
}

/* Sizes and counts: -b, -e, -f, -i, -n, -w and the latency ones. */
static int number_opt(int c, const char *flag, const char *v, p2pk_bench_opts *o, given_t *g,
                      char *err, size_t len) {
  long x = 0;
  switch (c) {
    case 'b': g->b = 1; return parse_size(flag, v, &o->min_bytes, err, len);
    case 'e': g->e = 1; return parse_size(flag, v, &o->max_bytes, err, len);
    case 'i': g->i = 1; return parse_size(flag, v, &o->step_bytes, err, len);
    case 'f':
      g->f = 1;
      if (parse_long(flag, v, 2, 1 << 20, &x, err, len)) return -1;
      o->factor = x;
      return 0;
    case 'n': if (parse_long(flag, v, 1, 100000, &x, err, len)) return -1; o->iters = (int)x; return 0;
    case 'w': if (parse_long(flag, v, 0, 10000, &x, err, len)) return -1; o->warmup = (int)x; return 0;
    case OPT_SEED:
      if (parse_long(flag, v, 0, 0x7fffffffL, &x, err, len)) return -1;
      o->seed = (uint64_t)x;
      return 0;
    case OPT_LAT_BYTES:
      if (parse_size(flag, v, &o->lat_bytes, err, len)) return -1;
      return o->lat_bytes > (1u << 20) ? fail(err, len, "--lat-bytes %s: at most 1M", v) : 0;
    default: /* OPT_LAT_ITERS */
      if (parse_long(flag, v, 1, 1000000, &x, err, len)) return -1;
      o->lat_iters = (int)x;
      return 0;
  }
}

static int apply(int c, const char *v, p2pk_bench_opts *o, given_t *g, char *err, size_t len) {
  char flag[32], why[160];
  flag_name(c, flag, sizeof flag);
  switch (c) {
    case OPT_METHODS: o->methods_given = 1; return parse_methods(v, &o->methods, err, len);
    case OPT_MODE: g->mode = 1; return parse_modes(v, &o->modes, err, len);
    case OPT_GPUS: return parse_gpus(v, o, err, len);
    case OPT_PAIRS: return parse_pairs(v, o, err, len);
    case OPT_LATENCY: o->latency = 1; return 0;
    case OPT_SM_CONFIG:
      if (p2pk_sm_config_parse(v, &o->sm, why, sizeof why) != 0)
        return fail(err, len, "--sm-config '%s': %s", v, why);
      o->have_sm_config = 1;
      return 0;
    case OPT_SM_SWEEP: return sweep_opt(v, o, err, len);
    case OPT_STAGE_SWEEP: o->stage_sweep = 1; return 0;
    case OPT_NO_ANCHOR: o->anchor = 0; return 0;
    case OPT_NO_GATE: o->gate = 0; return 0;
    case OPT_JSON: return output_opt("--json", v, &o->json, o->json_path, sizeof o->json_path, err, len);
    case OPT_CSV: return output_opt("--csv", v, &o->csv, o->csv_path, sizeof o->csv_path, err, len);
    case OPT_PLOT: return path_opt(flag, v, o->plot_path, err, len);
    case OPT_FROM: return path_opt(flag, v, o->from, err, len);
    case OPT_PLOT_FROM: return path_opt(flag, v, o->plot_from, err, len);
    case OPT_DRY_RUN: o->dry_run = 1; return 0;
    case 'q': o->quiet = 1; return 0;
    default: return number_opt(c, flag, v, o, g, err, len);
  }
}

/* What the options given together mean, or why they cannot go together. */
static int settle(p2pk_bench_opts *o, const given_t *g, char *err, size_t len) {
  if (o->ngpus && o->npairs) return fail(err, len, "give --gpus or --pairs, not both");
  if (o->json == 1 && o->csv == 1) return fail(err, len, "only one of --json and --csv can go to stdout");
  if (!o->methods_given) {
    /* --latency and the sweeps alone run only themselves; an option that only
     * bandwidth runs use (--mode, -e, -f, -i, or -b when no sweep takes it as
     * its size) asks for those too, with every method. */
    int sweep = o->sm_sweep || o->stage_sweep;
    int bandwidth = g->mode || g->e || g->f || g->i || (g->b && !sweep);
    o->methods = (o->latency || sweep) && !bandwidth ? 0 : (1u << P2PK_BM_COUNT) - 1;
  }
  if (o->anchor && o->methods) o->methods |= 1u << P2PK_BM_MEMCPY_PEER;
  /* The plan is text only; an output that asks for results would be left
   * unwritten, so say so rather than exit 0 without it. */
  if (o->dry_run && (o->json || o->csv || o->plot_path[0]))
    return fail(err, len, "--dry-run prints the plan as text; %s needs a run",
                o->json ? "--json" : o->csv ? "--csv" : "--plot");
  if (o->plot_from[0] && (!o->plot_path[0] || o->json || o->csv || o->dry_run || o->from[0]))
    return fail(err, len, "--plot-from redraws a saved run's plot: give --plot FILE.svg with it, and no "
                "--json, --csv, --dry-run or --from");
  if (o->from[0] && !o->dry_run)
    return fail(err, len, "--from plans against a recorded machine: add --dry-run (a run needs the GPUs here)");
  return make_sizes(o, g->e, g->f, g->i, err, len);
}

int p2pk_bench_parse(int argc, char **argv, p2pk_bench_opts *o, char *err, size_t len) {
  given_t g = {0, 0, 0, 0, 0};
  p2pk_opts_begin();
  for (int c; (c = getopt_long(argc, argv, short_opts, long_opts, NULL)) != -1;) {
    if (c == 'h') return 1;
    if (c == ':' || c == '?') {
      p2pk_opts_error(c, argv, err, len);
      return c == '?' ? -2 : -1; /* the caller prints the usage after an unknown option */
    }
    if (apply(c, optarg, o, &g, err, len)) return -1;
  }
  if (optind < argc) {
    fail(err, len, "unexpected argument '%s' (bench takes only options)", argv[optind]);
    return -2;
  }
  return settle(o, &g, err, len);
}

/* --- memory ------------------------------------------------------------------ */

/* Saturating: a size near SIZE_MAX must not wrap to a small need that fits. */
static size_t sat_add(size_t a, size_t b, int *over) {
  if (b > SIZE_MAX - a) {
    *over = 1;
    return SIZE_MAX;
  }
  return a + b;
}

static size_t round_gran(size_t bytes, int *over) {
  const size_t gran = 2u << 20;
  if (bytes > SIZE_MAX - (gran - 1)) {
    *over = 1;
    return SIZE_MAX;
  }
  return (bytes + gran - 1) / gran * gran;
}

int p2pk_bench_mem_need(const p2pk_bench_opts *o, size_t bytes, int ngpus, size_t *need) {
  /* Per pair a source buffer on src and a destination buffer on dst, rounded
   * up to the allocation granularity; both ways also needs the reverse pair. */
  int over = 0;
  memset(need, 0, (size_t)ngpus * sizeof *need);
  if (!o->methods) {
    /* Only sweeps (on the first pair, at the first size) and latency. */
    if ((o->sm_sweep || o->stage_sweep) && o->npairs && o->pairs[0][0] < ngpus &&
        o->pairs[0][1] < ngpus) {
      size_t first = round_gran(o->sizes[0], &over);
      need[o->pairs[0][0]] = sat_add(need[o->pairs[0][0]], first, &over);
      need[o->pairs[0][1]] = sat_add(need[o->pairs[0][1]], first, &over);
    }
    return over ? -1 : 0;
  }
  size_t each = round_gran(bytes, &over);
  int both = (o->modes >> P2PK_MODE_BOTH) & 1;
  for (int i = 0; i < o->npairs; i++) {
    int a = o->pairs[i][0], b = o->pairs[i][1];
    if (a >= ngpus || b >= ngpus) continue;
    int n = 1;
    if (both) {
      int have_reverse = 0;
      for (int k = 0; k < o->npairs; k++)
        if (o->pairs[k][0] == b && o->pairs[k][1] == a) have_reverse = 1;
      n += !have_reverse;
    }
    for (int k = 0; k < n; k++) {
      need[a] = sat_add(need[a], each, &over);
      need[b] = sat_add(need[b], each, &over);
    }
  }
  return over ? -1 : 0;
}

int p2pk_bench_mem_check(const size_t *need, const size_t *free_bytes, int ngpus, size_t bytes,
                         char *err, size_t errlen) {
  for (int g = 0; g < ngpus; g++) {
    if (need[g] <= free_bytes[g]) continue;
    char s[32], n[32], f[32];
    p2pk_bench_fmt_size(bytes, s, sizeof s);
    p2pk_bench_fmt_size(need[g], n, sizeof n);
    p2pk_bench_fmt_size(free_bytes[g], f, sizeof f);
    snprintf(err, errlen, "size %s does not fit: the run needs %s on GPU%d, which has %s free", s, n,
             g, f);
    return -1;
  }
  return 0;
}

/* Sizes are parsed up to SIZE_MAX: one whose buffers (every pair's, on one
 * GPU) add up past that cannot be planned or checked against free memory. */
static int check_need(const p2pk_bench_opts *o, int ngpus, char *err, size_t len) {
  size_t *need = calloc((size_t)ngpus, sizeof *need);
  if (!need) return fail(err, len, "out of memory");
  size_t biggest = o->sizes[o->nsizes - 1];
  int rc = 0;
  if (p2pk_bench_mem_need(o, biggest, ngpus, need) != 0) {
    int g = 0;
    while (g < ngpus - 1 && need[g] != SIZE_MAX) g++;
    rc = fail(err, len, "size %zu is larger than any GPU (GPU%d would need 2^64 bytes or more "
              "for its buffers)", o->methods ? biggest : o->sizes[0], g);
  }
  free(need);
  return rc;
}

int p2pk_bench_validate(p2pk_bench_opts *o, int ngpus, char *err, size_t len) {
  for (int i = 0; i < o->ngpus; i++)
    if (o->gpus[i] >= ngpus)
      return fail(err, len, "GPU %d does not exist (this machine has %d: 0..%d)", o->gpus[i], ngpus,
                  ngpus - 1);
  for (int i = 0; i < o->npairs; i++)
    for (int k = 0; k < 2; k++)
      if (o->pairs[i][k] >= ngpus)
        return fail(err, len, "pair %d:%d: GPU %d does not exist (this machine has %d: 0..%d)",
                    o->pairs[i][0], o->pairs[i][1], o->pairs[i][k], ngpus, ngpus - 1);
  if (o->npairs) return check_need(o, ngpus, err, len);
  int sel[P2PK_MAX_GPUS], n = o->ngpus;
  if (n) memcpy(sel, o->gpus, (size_t)n * sizeof *sel);
  else
    for (n = 0; n < ngpus && n < P2PK_MAX_GPUS; n++) sel[n] = n;
  if (n < 2)
    return fail(err, len, "copies between GPUs need at least 2 GPUs (%s %d)%s",
                o->ngpus ? "--gpus names" : "this machine has", n,
                o->ngpus ? "" : "; `p2pkit doctor` times a GPU's link to host memory");
  o->pairs = malloc((size_t)n * (size_t)(n - 1) * sizeof *o->pairs);
  if (!o->pairs) return fail(err, len, "out of memory");
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++)
      if (a != b) {
        o->pairs[o->npairs][0] = sel[a];
        o->pairs[o->npairs][1] = sel[b];
        o->npairs++;
      }
  return check_need(o, ngpus, err, len);
}
