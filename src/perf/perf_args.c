/* SPDX-License-Identifier: BSD-3-Clause */
/* The command line of `p2pkit perf`: nccl-tests' flags where they apply. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "coll/select/algo.h"
#include "nccl/dtype.h"
#include "core/opts.h"
#include "core/param.h"
#include "perf/perf.h"

void p2pk_perf_usage(FILE *out) {
  fprintf(out,
          "usage: p2pkit perf <collective> [options]\n\n"
          "Times a collective like nccl-tests (its flags, meanings and columns), checks every\n"
          "result, and with --vs-nccl measures NCCL through the same harness. Collectives:\n"
          "all_reduce broadcast reduce all_gather reduce_scatter sendrecv alltoall hypercube\n"
          "gather scatter\n\n"
          "nccl-tests' flags (docs/cli.md: what each does here, what is refused and why):\n"
          "  -b -e SIZE  smallest, largest size (default 8, 128M)   -f N / -i SIZE  step\n"
          "  -n N  calls timed (20)   -w N  warm-up (5)   -m N  calls per group (1)\n"
          "  -N N  passes over the sizes (1; 0 until killed)   -c N  calls checked (1)\n"
          "  -G N  time N launches of a CUDA graph of the -n calls\n"
          "  -d T  int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3\n"
          "        f8e5m2 or all (float; int8, uint32, uint64, fp8: p2pkit's NCCL path)\n"
          "  -o OP sum prod max min avg mulsum (NCCL only) or all   -r N|all  root (0)\n"
          "  -z 0-3 wait/barrier per call   -y 1 default stream   -T SEC  P2PKIT_TIMEOUT\n"
          "  -C 1 host time per call   -S 1 timestamps   -a 0-3 ranks' times: 0 rank 0,\n"
          "        1 mean, 2 min, 3 max (3)   -u N misalign   -R 0|1 register   -J F.json\n"
          "  -g N  GPUs in this process (all)   -t 1   -p 0|1 parallel init (one thread: 0)\n"
          "p2pkit's own:\n"
          "  --procs N         fork N processes, one GPU each (rendezvous on 127.0.0.1)\n"
          "  --repeats N       timed regions per point; the median is shown (default 5)\n"
          "  --vs-nccl         also run NCCL (P2PKIT_NCCL_LIB): its time and the speedup\n"
          "                    (NCCL time / p2pkit time)    --nccl-only  only NCCL\n"
          "  --json            the JSON document on stdout instead of the table\n"
          "  --json-file FILE  also write the JSON document to FILE\n"
          "  --algo A[/P]      force p2pkit's all-reduce algorithm (oneshot, twoshot, staged)\n"
          "                    and protocol (ll, ll128, simple); twoshot: broadcast's and\n"
          "                    reduce's rooted two-shot too\n"
          "  --sweep-algos L   one pass per A[/P] of the comma list, then the fastest per size\n"
          "  --algo-table FILE the fastest per size as an algorithm table (P2PKIT_ALGO_TABLE)\n"
          "  --max-blocks N    cap p2pkit's (P2PKIT_MAX_BLOCKS) and NCCL's (NCCL_MAX_CTAS)\n"
          "                    kernels at N blocks, as beside compute keeping the other SMs\n"
          "  --explain         print the selector and its decision per size, not measure\n"
          "  --from FILE       with --explain: a recorded machine, no GPU (-g, --procs ranks)\n"
          "  --hosts H         with --procs: the ranks simulate H hosts (P2PKIT_HOSTID,\n"
          "                    NCCL_HOSTID per block of ranks): hierarchical path, NCCL across\n"
          "  -h, --help        this text\n\n"
          "Columns: time is us per call (median of the repeats, max over GPUs); algbw =\n"
          "size / time; busbw = algbw x factor (all_reduce 2(n-1)/n; all_gather,\n"
          "reduce_scatter, alltoall, hypercube, gather, scatter (n-1)/n; broadcast, reduce,\n"
          "sendrecv 1).\n"
          "Exit codes: 0 done, every result right; 1 a run failed, a result was wrong or\n"
          "the output could not be written; 2 a bad command line or setting, or no GPU.\n");
}

static int bad(FILE *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(FILE *err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(err, "p2pkit perf: error: ");
  vfprintf(err, fmt, ap);
  fputc('\n', err);
  va_end(ap);
  return PERF_PARSE_ERROR;
}

/* The first spelling of each type is nccl-tests' (printed); "all" runs
 * them in nccl-tests' order, the order of this table. */
static const struct {
  const char *name;
  p2pkit_dtype_t d;
} dtypes[] = {
    {"int8", P2PKIT_INT8},         {"uint8", P2PKIT_UINT8},     {"int32", P2PKIT_INT32},
    {"uint32", P2PKIT_UINT32},     {"int64", P2PKIT_INT64},     {"uint64", P2PKIT_UINT64},
    {"half", P2PKIT_FLOAT16},      {"float", P2PKIT_FLOAT32},   {"double", P2PKIT_FLOAT64},
    {"bfloat16", P2PKIT_BFLOAT16}, {"f8e4m3", P2PKIT_FLOAT8_E4M3}, {"f8e5m2", P2PKIT_FLOAT8_E5M2},
    {"float32", P2PKIT_FLOAT32},   {"fp32", P2PKIT_FLOAT32},    {"float16", P2PKIT_FLOAT16},
    {"fp16", P2PKIT_FLOAT16},      {"bf16", P2PKIT_BFLOAT16},   {"float64", P2PKIT_FLOAT64},
    {"fp64", P2PKIT_FLOAT64},      {"int", P2PKIT_INT32},       {"fp8_e4m3", P2PKIT_FLOAT8_E4M3},
    {"float8_e4m3fn", P2PKIT_FLOAT8_E4M3}, {"fp8_e5m2", P2PKIT_FLOAT8_E5M2},
    {"float8_e5m2", P2PKIT_FLOAT8_E5M2},
};
#define NCCL_TESTS_TYPES 12 /* the first rows: nccl-tests' names, its "all" */

int p2pk_perf_dtype_parse(const char *name, p2pkit_dtype_t *out) {
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
    if (strcmp(name, dtypes[i].name) == 0) {
      *out = dtypes[i].d;
      return 0;
    }
  return -1;
}

const char *p2pk_perf_dtype_name(p2pkit_dtype_t d) {
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
    if (dtypes[i].d == d) return dtypes[i].name; /* the first spelling is nccl-tests' */
  return "?";
}

/* nccl-tests' names and order (its "all"): sum, prod, max, min, avg, mulsum. */
static const struct {
  const char *name;
  int op;
} op_names[PERF_OP_COUNT] = {{"sum", P2PKIT_SUM}, {"prod", P2PKIT_PROD}, {"max", P2PKIT_MAX},
                             {"min", P2PKIT_MIN}, {"avg", P2PKIT_AVG}, {"mulsum", PERF_OP_MULSUM}};

int p2pk_perf_op_parse(const char *name, int *out) {
  for (int i = 0; i < PERF_OP_COUNT; i++)
    if (strcmp(name, op_names[i].name) == 0) {
      *out = op_names[i].op;
      return 0;
    }
  return -1;
}

const char *p2pk_perf_op_name(int op) {
  for (int i = 0; i < PERF_OP_COUNT; i++)
    if (op_names[i].op == op) return op_names[i].name;
  return "?";
}

int p2pk_perf_p2pkit_runs(const perf_variant *v) { return v->op != PERF_OP_MULSUM; }

int p2pk_perf_via_nccl(const perf_variant *v) { return !p2pk_dtype_native(v->dtype); }

int p2pk_perf_variants(const perf_args *a, int nranks, perf_variant *out, int max) {
  const int nops = a->coll->uses_op ? a->nops : 1;
  const int roots = a->coll->uses_root && a->root < 0 ? nranks : 1;
  int n = 0;
  for (int t = 0; t < a->ndtypes; t++)
    for (int o = 0; o < nops; o++)
      for (int r = 0; r < roots; r++, n++) {
        if (n >= max) continue;
        out[n].dtype = a->dtypes[t];
        out[n].op = a->coll->uses_op ? a->ops[o] : P2PKIT_SUM;
        out[n].root = !a->coll->uses_root ? -1 : a->root < 0 ? r : a->root;
      }
  return n;
}

void p2pk_perf_args_default(perf_args *a) {
  memset(a, 0, sizeof *a);
  a->min_bytes = 8;
  a->max_bytes = 128u << 20;
  a->step_factor = 2;
  a->iters = 20;
  a->warmup = 5;
  a->agg = 1;
  a->cycles = 1;
  a->check = 1;
  a->repeats = 5;
  a->nthreads = 1;
  a->dtype = P2PKIT_FLOAT32;
  a->ndtypes = 1;
  a->dtypes[0] = P2PKIT_FLOAT32;
  a->op = P2PKIT_SUM;
  a->nops = 1;
  a->ops[0] = P2PKIT_SUM;
  a->average = 3;
}

int p2pk_perf_uses_p2pkit(const perf_args *a) { return !a->nccl_only; }

int p2pk_perf_algo_split(const char *entry, int *algo, int *proto) {
  char name[32];
  const char *slash = strchr(entry, '/');
  size_t len = slash ? (size_t)(slash - entry) : strlen(entry);
  if (len == 0 || len >= sizeof name) return -1;
  memcpy(name, entry, len);
  name[len] = '\0';
  *algo = p2pk_algo_from_name(name);
  *proto = slash ? p2pk_proto_from_name(slash + 1) : -1;
  return *algo < 0 || (slash && *proto < 0) ? -1 : 0;
}

static int check_algo(FILE *err, const char *flag, const char *entry) {
  int algo, proto;
  if (p2pk_perf_algo_split(entry, &algo, &proto) != 0)
    return bad(err, "%s '%s': unknown algorithm (oneshot, twoshot or staged, optionally /ll, "
               "/ll128 or /simple)", flag, entry);
  return 0;
}
int p2pk_perf_uses_nccl(const perf_args *a) { return a->nccl_only || a->vs_nccl; }

int p2pk_perf_sizes(const perf_args *a, size_t *out, int max) {
  int n = 0;
  size_t s = a->min_bytes;
  if (s == 0) return 0;
  while (s <= a->max_bytes && n < max) {
    out[n++] = s;
    size_t next = a->step_bytes ? s + a->step_bytes : s * (size_t)a->step_factor;
    if (next <= s) break; /* overflow, or a factor of 1 */
    s = next;
  }
  return n;
}

/* The options: nccl-tests' table (its letters and long names, common.cu),
 * then p2pkit's long-only ones, valued past the characters. */
enum { OPT_REPEATS = 256, OPT_VS_NCCL, OPT_NCCL_ONLY, OPT_JSON, OPT_JSON_FILE, OPT_ALGO,
       OPT_SWEEP_ALGOS, OPT_ALGO_TABLE, OPT_MAX_BLOCKS, OPT_EXPLAIN, OPT_HOSTS, OPT_PROCS,
       OPT_FROM };
static const char short_opts[] =
    ":t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:G:C:S:J:a:R:x:D:V:M:u:I:K:h";
static const struct option long_opts[] = {
    {"nthreads", required_argument, NULL, 't'},      {"ngpus", required_argument, NULL, 'g'},
    {"minbytes", required_argument, NULL, 'b'},      {"maxbytes", required_argument, NULL, 'e'},
    {"stepbytes", required_argument, NULL, 'i'},     {"stepfactor", required_argument, NULL, 'f'},
    {"iters", required_argument, NULL, 'n'},         {"agg_iters", required_argument, NULL, 'm'},
    {"warmup_iters", required_argument, NULL, 'w'},  {"run_cycles", required_argument, NULL, 'N'},
    {"parallel_init", required_argument, NULL, 'p'}, {"check", required_argument, NULL, 'c'},
    {"op", required_argument, NULL, 'o'},            {"datatype", required_argument, NULL, 'd'},
    {"root", required_argument, NULL, 'r'},          {"blocking", required_argument, NULL, 'z'},
    {"stream_null", required_argument, NULL, 'y'},   {"timeout", required_argument, NULL, 'T'},
    {"cudagraph", required_argument, NULL, 'G'},     {"report_cputime", required_argument, NULL, 'C'},
    {"report_timestamps", required_argument, NULL, 'S'},
    {"output_file", required_argument, NULL, 'J'},   {"average", required_argument, NULL, 'a'},
    {"local_register", required_argument, NULL, 'R'}, {"cta_policy", required_argument, NULL, 'x'},
    {"device_implementation", required_argument, NULL, 'D'},
    {"device_cta_count", required_argument, NULL, 'V'}, {"memory", required_argument, NULL, 'M'},
    {"unalign", required_argument, NULL, 'u'},       {"per_iter_timing", required_argument, NULL, 'I'},
    {"per_iter_skip", required_argument, NULL, 'K'},
    {"procs", required_argument, NULL, OPT_PROCS},
    {"repeats", required_argument, NULL, OPT_REPEATS}, {"vs-nccl", no_argument, NULL, OPT_VS_NCCL},
    {"nccl-only", no_argument, NULL, OPT_NCCL_ONLY}, {"json", no_argument, NULL, OPT_JSON},
    {"json-file", required_argument, NULL, OPT_JSON_FILE}, {"algo", required_argument, NULL, OPT_ALGO},
    {"sweep-algos", required_argument, NULL, OPT_SWEEP_ALGOS},
    {"algo-table", required_argument, NULL, OPT_ALGO_TABLE},
    {"max-blocks", required_argument, NULL, OPT_MAX_BLOCKS}, {"explain", no_argument, NULL, OPT_EXPLAIN},
    {"hosts", required_argument, NULL, OPT_HOSTS},   {"from", required_argument, NULL, OPT_FROM},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* How errors name option `c`: "-b" where it has a letter, else "--repeats". */
static void flag_name(int c, char *out, size_t len) {
  if (c < 256) {
    snprintf(out, len, "-%c", c);
    return;
  }
  for (const struct option *o = long_opts; o->name; o++)
    if (o->val == c) snprintf(out, len, "--%s", o->name);
}

#define STEP_FACTOR_MAX (1L << 20)
#define STEP_FACTOR_RULE \
  "the step factor must be 2 to 1048576 (1 only with -i, or with -e equal to -b)"

static int int_arg(FILE *err, const char *flag, const char *v, long lo, long hi, int *out) {
  char *end = NULL;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (!*v || *end || errno) return bad(err, "%s '%s' is not a whole number", flag, v);
  if (x < lo || x > hi) return bad(err, "%s %ld is out of range (%ld to %ld)", flag, x, lo, hi);
  *out = (int)x;
  return 0;
}

static int size_arg(FILE *err, const char *flag, const char *v, size_t *out) {
  if (v[0] == '-') return bad(err, "%s '%s': sizes cannot be negative", flag, v);
  if (p2pk_parse_size(v, out) != 0)
    return bad(err, "%s '%s' is not a size (a number of bytes, optionally with K, M, G or T)",
               flag, v);
  if (*out == 0) return bad(err, "%s 0: sizes must be at least 1 byte", flag);
  return 0;
}

static int split_algos(FILE *err, const char *list, perf_args *a) {
  const char *p = list;
  a->nalgos = 0;
  while (*p) {
    size_t len = strcspn(p, ",");
    if (len == 0 || len >= sizeof a->algos[0])
      return bad(err, "--sweep-algos '%s': empty or overlong algorithm name", list);
    if (a->nalgos >= P2PK_PERF_MAX_ALGOS)
      return bad(err, "--sweep-algos '%s': at most %d algorithms", list, P2PK_PERF_MAX_ALGOS);
    memcpy(a->algos[a->nalgos], p, len);
    a->algos[a->nalgos][len] = '\0';
    if (check_algo(err, "--sweep-algos", a->algos[a->nalgos])) return PERF_PARSE_ERROR;
    for (int i = 0; i < a->nalgos; i++)
      if (strcmp(a->algos[i], a->algos[a->nalgos]) == 0)
        return bad(err, "--sweep-algos '%s': %s is listed twice", list, a->algos[i]);
    a->nalgos++;
    p += len;
    if (*p == ',') p++;
  }
  if (a->nalgos == 0) return bad(err, "--sweep-algos needs a list of algorithms");
  return 0;
}

static int file_arg(FILE *err, const char *flag, const char *v, const char **out) {
  if (!v[0]) return bad(err, "%s needs a file name", flag);
  *out = v;
  return 0;
}

static int type_arg(FILE *err, const char *flag, const char *v, perf_args *a) {
  if (strcmp(v, "all") == 0) {
    a->ndtypes = NCCL_TESTS_TYPES;
    for (int i = 0; i < NCCL_TESTS_TYPES; i++) a->dtypes[i] = dtypes[i].d;
  } else if (p2pk_perf_dtype_parse(v, &a->dtypes[0]) == 0) {
    a->ndtypes = 1;
  } else {
    return bad(err, "%s '%s': unknown data type (int8, uint8, int32, uint32, int64, uint64, half, "
               "float, double, bfloat16, f8e4m3, f8e5m2 or all)", flag, v);
  }
  a->dtype = a->dtypes[0];
  return 0;
}

/* "all": every operation; the run drops mulsum where NCCL does not run. */
static int op_arg(FILE *err, const char *flag, const char *v, perf_args *a) {
  if (strcmp(v, "all") == 0) {
    a->nops = PERF_OP_COUNT;
    for (int i = 0; i < PERF_OP_COUNT; i++) a->ops[i] = op_names[i].op;
  } else if (p2pk_perf_op_parse(v, &a->ops[0]) == 0) {
    a->nops = 1;
  } else {
    return bad(err, "%s '%s': unknown reduction (sum, prod, max, min, avg, mulsum or all)", flag, v);
  }
  a->op = a->ops[0];
  return 0;
}

static int root_arg(FILE *err, const char *flag, const char *v, perf_args *a) {
  if (strcmp(v, "all") == 0) {
    a->root = -1;
    return 0;
  }
  return int_arg(err, flag, v, 0, P2PK_PERF_MAX_RANKS - 1, &a->root);
}

/* nccl-tests' -J infers the format from the name and writes only JSON. */
static int json_name_arg(FILE *err, const char *flag, const char *v, perf_args *a) {
  const char *dot = strrchr(v, '.');
  if (!v[0]) return bad(err, "%s needs a file name", flag);
  if (!dot || strchr(dot, '/') || strcasecmp(dot, ".json") != 0)
    return bad(err, "%s '%s': only JSON is written (a name ending in .json, as nccl-tests infers "
               "the format from it)", flag, v);
  a->json_file = v;
  return 0;
}

/* nccl-tests' flags. */
static int apply_nccl_tests(FILE *err, int c, const char *flag, const char *v, perf_args *a) {
  int unused = 0;
  switch (c) {
    case 't': return int_arg(err, flag, v, 1, P2PK_PERF_MAX_RANKS, &a->nthreads);
    case 'm': return int_arg(err, flag, v, 1, 1024, &a->agg);
    case 'N': return int_arg(err, flag, v, 0, 1000000, &a->cycles);
    case 'p': return int_arg(err, flag, v, 0, 1, &a->parallel_init);
    case 'c': return int_arg(err, flag, v, 0, 1000, &a->check);
    case 'z': return int_arg(err, flag, v, 0, 3, &a->blocking);
    case 'y': return int_arg(err, flag, v, 0, 1, &a->stream_null);
    case 'T': return int_arg(err, flag, v, 0, 86400, &a->timeout_s);
    case 'C': return int_arg(err, flag, v, 0, 1, &a->cputime);
    case 'S': return int_arg(err, flag, v, 0, 1, &a->timestamps);
    case 'a': return int_arg(err, flag, v, 0, 3, &a->average);
    case 'u': return int_arg(err, flag, v, 0, 4096, &a->unalign);
    case 'J': return json_name_arg(err, flag, v, a);
    case 'd': return type_arg(err, flag, v, a);
    case 'o': return op_arg(err, flag, v, a);
    case 'r': return root_arg(err, flag, v, a);
    case 'R':
      if (int_arg(err, flag, v, 0, 2, &a->reg)) return PERF_PARSE_ERROR;
      if (a->reg == 2)
        return bad(err, "%s 2: symmetric registration (NCCL's ncclCommWindowRegister) is not done "
                   "by p2pkit perf; -R 1 registers the buffers with each library", flag);
      return 0;
    case 'D':
      if (int_arg(err, flag, v, 0, 1000, &unused)) return PERF_PARSE_ERROR;
      if (unused)
        return bad(err, "%s %d: nccl-tests' own device-API kernels are not in p2pkit perf; "
                   "-D 0 (the libraries' calls) is all it runs", flag, unused);
      return 0;
    case 'x':
      return bad(err, "%s: NCCL's CTA policy is a field of the config p2pkit perf does not pass "
                 "(NCCL's communicators are made with ncclCommInitRank/InitAll), and p2pkit has "
                 "none; --max-blocks caps both libraries' grids", flag);
    case 'V':
      return bad(err, "%s sets the CTA count of -D's device-API kernels, which p2pkit perf does "
                 "not have", flag);
    case 'M':
      if (int_arg(err, flag, v, 0, 1, &unused)) return PERF_PARSE_ERROR;
      if (unused)
        return bad(err, "%s 1: p2pkit perf does not report memory use (the JSON's settings and "
                   "P2PKIT_BUFFER_SIZE say what p2pkit takes)", flag);
      return 0;
    case 'I':
      if (int_arg(err, flag, v, 0, 1, &unused)) return PERF_PARSE_ERROR;
      if (unused)
        return bad(err, "%s 1: p2pkit perf times --repeats regions of -n calls (median, min and "
                   "max in the JSON), not each call", flag);
      return 0;
    case 'K':
      if (int_arg(err, flag, v, 0, 1000000, &unused)) return PERF_PARSE_ERROR;
      if (unused)
        return bad(err, "%s %d skips samples of -I's per-iteration timing, which p2pkit perf "
                   "does not do", flag, unused);
      return 0;
    default: return bad(err, "%s: not handled (a bug)", flag);
  }
}

static int apply(FILE *err, int c, const char *flag, const char *v, perf_args *a) {
  switch (c) {
    case 'b': return size_arg(err, flag, v, &a->min_bytes);
    case 'e': return size_arg(err, flag, v, &a->max_bytes);
    case 'i': return size_arg(err, flag, v, &a->step_bytes);
    case 'f': {
      /* One message for 0, 1 and too large: 1 steps nowhere, so validate()
       * takes it only where nothing steps by the factor. */
      char *end = NULL;
      errno = 0;
      long f = strtol(v, &end, 10);
      if (!*v || *end || errno) return bad(err, "%s '%s' is not a whole number", flag, v);
      if (f < 1 || f > STEP_FACTOR_MAX) return bad(err, "%s %ld: %s", flag, f, STEP_FACTOR_RULE);
      a->step_factor = (int)f;
      a->factor_given = 1;
      return 0;
    }
    case 'n': return int_arg(err, flag, v, 1, 1000000, &a->iters);
    case 'w': return int_arg(err, flag, v, 0, 1000000, &a->warmup);
    case 'G': return int_arg(err, flag, v, 0, 10000, &a->graph);
    case 'g': return int_arg(err, flag, v, 1, P2PK_PERF_MAX_RANKS, &a->ngpus);
    case OPT_PROCS: return int_arg(err, flag, v, 1, P2PK_PERF_MAX_RANKS, &a->nprocs);
    case OPT_REPEATS: return int_arg(err, flag, v, 1, P2PK_PERF_MAX_REPEATS, &a->repeats);
    case OPT_MAX_BLOCKS: return int_arg(err, flag, v, 1, 1024, &a->max_blocks);
    case OPT_HOSTS: return int_arg(err, flag, v, 1, P2PK_PERF_MAX_RANKS, &a->hosts);
    case OPT_VS_NCCL: a->vs_nccl = 1; return 0;
    case OPT_NCCL_ONLY: a->nccl_only = 1; return 0;
    case OPT_JSON: a->json = 1; return 0;
    case OPT_EXPLAIN: a->explain = 1; return 0;
    case OPT_JSON_FILE: return file_arg(err, flag, v, &a->json_file);
    case OPT_ALGO_TABLE: return file_arg(err, flag, v, &a->algo_table);
    case OPT_FROM: return file_arg(err, flag, v, &a->from);
    case OPT_SWEEP_ALGOS: return split_algos(err, v, a);
    case OPT_ALGO:
      if (check_algo(err, flag, v)) return PERF_PARSE_ERROR;
      a->algo = v;
      return 0;
    default: return apply_nccl_tests(err, c, flag, v, a);
  }
}

#define COLL_LIST \
  "all_reduce, broadcast, reduce, all_gather, reduce_scatter, sendrecv, alltoall, hypercube, " \
  "gather, scatter"

/* Sizes and how they step. */
static int validate_sizes(FILE *err, perf_args *a) {
  if (a->max_bytes < a->min_bytes)
    return bad(err, "-e %zu is smaller than -b %zu", a->max_bytes, a->min_bytes);
  if (a->factor_given && a->step_bytes) return bad(err, "-f and -i cannot both be given");
  if (!a->step_bytes && a->step_factor < 2 && a->max_bytes != a->min_bytes)
    return bad(err, "-f %ld: %s", a->step_factor, STEP_FACTOR_RULE);
  size_t sizes[P2PK_PERF_MAX_SIZES + 1];
  int n = p2pk_perf_sizes(a, sizes, P2PK_PERF_MAX_SIZES + 1);
  if (n > P2PK_PERF_MAX_SIZES)
    return bad(err, "-b %zu -e %zu gives more than %d sizes; raise -f or -i", a->min_bytes,
               a->max_bytes, P2PK_PERF_MAX_SIZES);
  /* -r all is counted once the ranks are known. */
  long rows = (long)n * a->ndtypes * (a->coll->uses_op ? a->nops : 1) * (a->cycles ? a->cycles : 1);
  if (rows > P2PK_PERF_MAX_ROWS)
    return bad(err, "%ld rows (sizes x types x operations x -N cycles) are more than the %d one "
               "run holds; fewer sizes, types, operations or cycles", rows, P2PK_PERF_MAX_ROWS);
  return 0;
}

/* nccl-tests' flags p2pkit honours only in some combinations. */
static int validate_nccl_tests(FILE *err, const perf_args *a) {
  if (a->nthreads > 1)
    return bad(err, "-t %d: p2pkit perf drives a process's GPUs from one thread; for %d ranks give "
               "-g %d (one process) or --procs %d", a->nthreads, a->nthreads * (a->ngpus ? a->ngpus : 1),
               a->nthreads * (a->ngpus ? a->ngpus : 1), a->nthreads * (a->ngpus ? a->ngpus : 1));
  if (a->blocking && a->graph)
    return bad(err, "-z %d waits for each call, which a CUDA graph's capture (-G %d) cannot",
               a->blocking, a->graph);
  if (a->stream_null && a->graph)
    return bad(err, "-y 1: the legacy default stream cannot be captured into a CUDA graph (-G %d)",
               a->graph);
  if (a->agg > 1 && a->coll->steps(P2PK_PERF_MAX_RANKS) > 1)
    return bad(err, "-m %d: %s's steps depend on each other, and one group of -m calls would run "
               "them at once", a->agg, a->coll->name);
  if (a->cycles == 0 && (a->json || a->json_file || a->nalgos))
    return bad(err, "-N 0 runs until killed, so its JSON document (or sweep) would never be "
               "written; give -N a count");
  if (a->coll->uses_op && a->nops == 1 && a->op == PERF_OP_MULSUM && !p2pk_perf_uses_nccl(a))
    return bad(err, "-o mulsum is NCCL's pre-multiplied sum, which p2pkit does not have; measure "
                 "NCCL with --vs-nccl or --nccl-only");
  return 0;
}

/* The modes p2pkit adds and how they combine. */
static int validate_modes(FILE *err, const perf_args *a) {
  if (a->nprocs > 0 && a->ngpus > 1)
    return bad(err, "--procs runs one GPU per process; -g %d cannot be combined with it", a->ngpus);
  if (a->vs_nccl && a->nccl_only) return bad(err, "--vs-nccl and --nccl-only exclude each other");
  if (a->hosts && a->nprocs <= 0)
    return bad(err, "--hosts %d simulates hosts among --procs' processes; give --procs N too",
               a->hosts);
  if (a->hosts > a->nprocs && a->nprocs > 0)
    return bad(err, "--hosts %d: more hosts than the %d processes of --procs", a->hosts, a->nprocs);
  if (!a->coll->p2pkit_call && !a->nccl_only)
    return bad(err, "p2pkit has no %s yet; measure NCCL alone with --nccl-only", a->coll->name);
  if (a->nalgos && (a->vs_nccl || a->nccl_only || a->algo))
    return bad(err, "--sweep-algos cannot be combined with --vs-nccl, --nccl-only or --algo");
  if (a->algo && a->nccl_only) return bad(err, "--algo chooses p2pkit's algorithm; not with --nccl-only");
  if (a->algo_table && !a->nalgos) return bad(err, "--algo-table needs --sweep-algos");
  if (a->explain && (a->vs_nccl || a->nccl_only || a->nalgos))
    return bad(err, "--explain prints p2pkit's selector; not with --vs-nccl, --nccl-only or --sweep-algos");
  if (a->from && !a->explain)
    return bad(err, "--from %s: a recorded machine has no GPU to measure; --from is for --explain",
               a->from);
  if (a->nalgos && a->coll->id != PERF_ALL_REDUCE)
    return bad(err, "--sweep-algos sweeps p2pkit's all-reduce algorithms; not for %s", a->coll->name);
  /* Broadcast and reduce: twoshot is their rooted two-shot, oneshot the push. */
  if (a->algo && a->coll->id != PERF_ALL_REDUCE && a->coll->id != PERF_BROADCAST &&
      a->coll->id != PERF_REDUCE)
    return bad(err, "--algo chooses p2pkit's all-reduce algorithm (and broadcast's and reduce's "
               "two-shot form); not for %s", a->coll->name);
  for (int i = 0; a->algo_table && i < a->nalgos; i++)
    if (!strchr(a->algos[i], '/'))
      return bad(err, "--algo-table: give each algorithm its protocol (e.g. --sweep-algos "
                 "oneshot/ll,oneshot/ll128,twoshot/simple); '%s' has none", a->algos[i]);
  return 0;
}

/* Everything that can be judged before touching a GPU. */
static int validate(FILE *err, perf_args *a) {
  if (!a->coll) {
    bad(err, "which collective? (" COLL_LIST ")");
    p2pk_perf_usage(err);
    return PERF_PARSE_ERROR;
  }
  if (validate_sizes(err, a) || validate_nccl_tests(err, a) || validate_modes(err, a))
    return PERF_PARSE_ERROR;
  /* -o all without NCCL: the operations p2pkit has (nccl-tests' "all" less mulsum). */
  if (a->nops > 1 && !p2pk_perf_uses_nccl(a)) a->nops = PERF_OP_COUNT - 1;
  return 0;
}

/* The collective, the one argument that is not an option. */
static int take_collective(FILE *err, int argc, char **argv, perf_args *a) {
  for (int i = optind; i < argc; i++) {
    if (a->coll) return bad(err, "unexpected argument '%s' (one collective per run)", argv[i]);
    a->coll = p2pk_perf_coll(argv[i]);
    if (!a->coll)
      return bad(err, "unknown collective '%s' (" COLL_LIST ")", argv[i]);
  }
  return 0;
}

int p2pk_perf_parse(int argc, char **argv, perf_args *a, FILE *err) {
  p2pk_perf_args_default(a);
  p2pk_opts_begin();
  for (int c; (c = getopt_long(argc, argv, short_opts, long_opts, NULL)) != -1;) {
    if (c == 'h') {
      p2pk_perf_usage(stdout);
      return PERF_PARSE_HELP;
    }
    if (c == ':' || c == '?') {
      char why[160];
      p2pk_opts_error(c, argv, why, sizeof why);
      bad(err, "%s", why);
      if (c == '?') p2pk_perf_usage(err);
      return PERF_PARSE_ERROR;
    }
    char flag[40] = "";
    flag_name(c, flag, sizeof flag);
    if (apply(err, c, flag, optarg, a)) return PERF_PARSE_ERROR;
  }
  if (take_collective(err, argc, argv, a)) return PERF_PARSE_ERROR;
  return validate(err, a) ? PERF_PARSE_ERROR : PERF_PARSE_OK;
}
