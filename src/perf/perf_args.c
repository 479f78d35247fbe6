/* The command line of `p2pkit perf`: nccl-tests' flags where they apply. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "coll/algo.h"
#include "core/opts.h"
#include "core/param.h"
#include "perf/perf.h"

void p2pk_perf_usage(FILE *out) {
  fprintf(out,
          "usage: p2pkit perf <collective> [options]\n\n"
          "Times a collective over a range of sizes like nccl-tests (same flags, same columns),\n"
          "checks every result, and with --vs-nccl measures NCCL through the same harness.\n"
          "collectives: all_reduce, broadcast, reduce, all_gather, reduce_scatter, sendrecv,\n"
          "             alltoall\n\n"
          "  -b, --minbytes SIZE    smallest size (default 8; K, M, G, T suffixes)\n"
          "  -e, --maxbytes SIZE    largest size (default 128M)\n"
          "  -f, --stepfactor N     multiply the size by N each step (default 2)\n"
          "  -i, --stepbytes SIZE   add SIZE each step instead\n"
          "  -n, --iters N          calls per timed region (default 20)\n"
          "  -w, --warmup_iters N   untimed calls first (default 5)\n"
          "  -c, --check 0|1        check every result on the GPU (default 1); #wrong must be 0\n"
          "  -G, --cudagraph N      capture the -n calls in a CUDA graph and time N launches of it\n"
          "  -d, --datatype T       float, half, bfloat16, double, int32, int64, uint8 (default float)\n"
          "  -o, --op OP            sum, prod, min, max, avg (default sum)\n"
          "  -r, --root N           root rank of broadcast and reduce (default 0)\n"
          "  -g, --ngpus N          GPUs in this process (default: all; 1 with -p)\n"
          "  -p, --procs N          fork N processes, one GPU each (rendezvous on 127.0.0.1)\n"
          "  -R, --local_register 0|1  register the buffers with the library (default 0)\n"
          "      --repeats N        timed regions per point; the median is shown (default 5)\n"
          "      --vs-nccl          also run NCCL (P2PKIT_NCCL_LIB) the same way; adds its time\n"
          "                         and the speedup (NCCL time / p2pkit time)\n"
          "      --nccl-only        run only NCCL\n"
          "      --json             write the results as JSON on stdout instead of the table\n"
          "      --json-file FILE   also write the JSON document to FILE\n"
          "      --algo A[/P]       force p2pkit's all-reduce algorithm A (oneshot, twoshot,\n"
          "                         staged) and protocol P (ll, ll128, simple): P2PKIT_ALGO, P2PKIT_PROTO;\n"
          "                         twoshot also gives broadcast and reduce their rooted two-shot\n"
          "      --sweep-algos LIST one pass per A[/P] in the comma list, then the fastest per size\n"
          "      --algo-table FILE  write the fastest per size as an algorithm table (needs every\n"
          "                         entry with its protocol; load it with P2PKIT_ALGO_TABLE)\n"
          "      --max-blocks N     cap every collective kernel at N thread blocks, p2pkit's\n"
          "                         (P2PKIT_MAX_BLOCKS) and NCCL's (NCCL_MAX_CTAS, unless set):\n"
          "                         both as they run beside compute that keeps the other SMs\n"
          "      --explain          print the selector's rules and table for this machine and\n"
          "                         mode, and its decision per size, instead of measuring\n"
          "      --hosts H          with -p: the ranks simulate H hosts, in blocks of ranks\n"
          "                         (P2PKIT_HOSTID per block; NCCL_HOSTID per block, or per rank\n"
          "                         with P2PKIT_SHARE_GPUS=1, unless set): the hierarchical path\n"
          "                         and NCCL across the blocks over loopback\n"
          "  -h, --help             this text\n\n"
          "Columns: time is microseconds per call (median of the repeats, max over GPUs);\n"
          "algbw = size / time; busbw = algbw x factor (all_reduce 2(n-1)/n; all_gather,\n"
          "reduce_scatter, alltoall (n-1)/n; broadcast, reduce, sendrecv 1).\n"
          "Settings: P2PKIT_TIMEOUT (seconds without progress before giving up), P2PKIT_NCCL_LIB.\n"
          "Exit codes: 0 done and every result right; 1 a run failed or a result was wrong,\n"
          "or the output could not be written; 2 a bad command line or setting, or no GPU\n"
          "(docs/cli.md).\n");
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

static const struct {
  const char *name;
  p2pkit_dtype_t d;
} dtypes[] = {
    {"float", P2PKIT_FLOAT32},   {"float32", P2PKIT_FLOAT32}, {"fp32", P2PKIT_FLOAT32},
    {"half", P2PKIT_FLOAT16},    {"float16", P2PKIT_FLOAT16}, {"fp16", P2PKIT_FLOAT16},
    {"bfloat16", P2PKIT_BFLOAT16}, {"bf16", P2PKIT_BFLOAT16},
    {"double", P2PKIT_FLOAT64},  {"float64", P2PKIT_FLOAT64}, {"fp64", P2PKIT_FLOAT64},
    {"int32", P2PKIT_INT32},     {"int", P2PKIT_INT32},
    {"int64", P2PKIT_INT64},     {"uint8", P2PKIT_UINT8},
};

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

static const char *const op_names[P2PKIT_REDOP_COUNT] = {"sum", "prod", "min", "max", "avg"};

int p2pk_perf_op_parse(const char *name, p2pkit_redop_t *out) {
  for (int i = 0; i < P2PKIT_REDOP_COUNT; i++)
    if (strcmp(name, op_names[i]) == 0) {
      *out = (p2pkit_redop_t)i;
      return 0;
    }
  return -1;
}

const char *p2pk_perf_op_name(p2pkit_redop_t op) {
  return op >= 0 && op < P2PKIT_REDOP_COUNT ? op_names[op] : "?";
}

void p2pk_perf_args_default(perf_args *a) {
  memset(a, 0, sizeof *a);
  a->min_bytes = 8;
  a->max_bytes = 128u << 20;
  a->step_factor = 2;
  a->iters = 20;
  a->warmup = 5;
  a->check = 1;
  a->repeats = 5;
  a->dtype = P2PKIT_FLOAT32;
  a->op = P2PKIT_SUM;
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

/* The options: getopt_long's table; the long-only ones get values past
 * the characters. */
enum { OPT_REPEATS = 256, OPT_VS_NCCL, OPT_NCCL_ONLY, OPT_JSON, OPT_JSON_FILE, OPT_ALGO,
       OPT_SWEEP_ALGOS, OPT_ALGO_TABLE, OPT_MAX_BLOCKS, OPT_EXPLAIN, OPT_HOSTS };
static const char short_opts[] = ":b:e:f:i:n:w:c:G:d:o:r:g:p:R:h";
static const struct option long_opts[] = {
    {"minbytes", required_argument, NULL, 'b'},     {"maxbytes", required_argument, NULL, 'e'},
    {"stepfactor", required_argument, NULL, 'f'},   {"stepbytes", required_argument, NULL, 'i'},
    {"iters", required_argument, NULL, 'n'},        {"warmup_iters", required_argument, NULL, 'w'},
    {"check", required_argument, NULL, 'c'},        {"cudagraph", required_argument, NULL, 'G'},
    {"datatype", required_argument, NULL, 'd'},     {"op", required_argument, NULL, 'o'},
    {"root", required_argument, NULL, 'r'},         {"ngpus", required_argument, NULL, 'g'},
    {"procs", required_argument, NULL, 'p'},        {"local_register", required_argument, NULL, 'R'},
    {"repeats", required_argument, NULL, OPT_REPEATS}, {"vs-nccl", no_argument, NULL, OPT_VS_NCCL},
    {"nccl-only", no_argument, NULL, OPT_NCCL_ONLY}, {"json", no_argument, NULL, OPT_JSON},
    {"json-file", required_argument, NULL, OPT_JSON_FILE}, {"algo", required_argument, NULL, OPT_ALGO},
    {"sweep-algos", required_argument, NULL, OPT_SWEEP_ALGOS},
    {"algo-table", required_argument, NULL, OPT_ALGO_TABLE},
    {"max-blocks", required_argument, NULL, OPT_MAX_BLOCKS}, {"explain", no_argument, NULL, OPT_EXPLAIN},
    {"hosts", required_argument, NULL, OPT_HOSTS},
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
    case 'c': return int_arg(err, flag, v, 0, 1, &a->check);
    case 'G': return int_arg(err, flag, v, 0, 10000, &a->graph);
    case 'g': return int_arg(err, flag, v, 1, P2PK_PERF_MAX_RANKS, &a->ngpus);
    case 'p': return int_arg(err, flag, v, 1, P2PK_PERF_MAX_RANKS, &a->nprocs);
    case 'r': return int_arg(err, flag, v, 0, P2PK_PERF_MAX_RANKS - 1, &a->root);
    case 'R': return int_arg(err, flag, v, 0, 1, &a->reg);
    case 'd':
      if (p2pk_perf_dtype_parse(v, &a->dtype))
        return bad(err, "%s '%s': unknown data type (float, half, bfloat16, double, int32, "
                   "int64, uint8)", flag, v);
      return 0;
    case 'o':
      if (p2pk_perf_op_parse(v, &a->op))
        return bad(err, "%s '%s': unknown reduction (sum, prod, min, max, avg)", flag, v);
      return 0;
    case OPT_REPEATS: return int_arg(err, flag, v, 1, P2PK_PERF_MAX_REPEATS, &a->repeats);
    case OPT_MAX_BLOCKS: return int_arg(err, flag, v, 1, 1024, &a->max_blocks);
    case OPT_HOSTS: return int_arg(err, flag, v, 1, P2PK_PERF_MAX_RANKS, &a->hosts);
    case OPT_VS_NCCL: a->vs_nccl = 1; return 0;
    case OPT_NCCL_ONLY: a->nccl_only = 1; return 0;
    case OPT_JSON: a->json = 1; return 0;
    case OPT_EXPLAIN: a->explain = 1; return 0;
    case OPT_JSON_FILE: return file_arg(err, flag, v, &a->json_file);
    case OPT_ALGO_TABLE: return file_arg(err, flag, v, &a->algo_table);
    case OPT_SWEEP_ALGOS: return split_algos(err, v, a);
    case OPT_ALGO:
      if (check_algo(err, flag, v)) return PERF_PARSE_ERROR;
      a->algo = v;
      return 0;
    default: return bad(err, "%s: not handled (a bug)", flag);
  }
}

/* Everything that can be judged before touching a GPU. */
static int validate(FILE *err, perf_args *a) {
  if (!a->coll) {
    bad(err, "which collective? (all_reduce, broadcast, reduce, all_gather, reduce_scatter, "
        "sendrecv, alltoall)");
    p2pk_perf_usage(err);
    return PERF_PARSE_ERROR;
  }
  if (a->max_bytes < a->min_bytes)
    return bad(err, "-e %zu is smaller than -b %zu", a->max_bytes, a->min_bytes);
  if (a->factor_given && a->step_bytes) return bad(err, "-f and -i cannot both be given");
  if (!a->step_bytes && a->step_factor < 2 && a->max_bytes != a->min_bytes)
    return bad(err, "-f %ld: %s", a->step_factor, STEP_FACTOR_RULE);
  size_t sizes[P2PK_PERF_MAX_SIZES + 1];
  if (p2pk_perf_sizes(a, sizes, P2PK_PERF_MAX_SIZES + 1) > P2PK_PERF_MAX_SIZES)
    return bad(err, "-b %zu -e %zu gives more than %d sizes; raise -f or -i", a->min_bytes,
               a->max_bytes, P2PK_PERF_MAX_SIZES);
  if (a->nprocs > 0 && a->ngpus > 1)
    return bad(err, "-p runs one GPU per process; -g %d cannot be combined with it", a->ngpus);
  if (a->vs_nccl && a->nccl_only) return bad(err, "--vs-nccl and --nccl-only exclude each other");
  if (a->hosts && a->nprocs <= 0)
    return bad(err, "--hosts %d simulates hosts among -p's processes; give -p N too", a->hosts);
  if (a->hosts > a->nprocs && a->nprocs > 0)
    return bad(err, "--hosts %d: more hosts than the %d processes of -p", a->hosts, a->nprocs);
  if (!a->coll->p2pkit_call && !a->nccl_only)
    return bad(err, "p2pkit has no %s yet; measure NCCL alone with --nccl-only", a->coll->name);
  if (a->nalgos && (a->vs_nccl || a->nccl_only || a->algo))
    return bad(err, "--sweep-algos cannot be combined with --vs-nccl, --nccl-only or --algo");
  if (a->algo && a->nccl_only) return bad(err, "--algo chooses p2pkit's algorithm; not with --nccl-only");
  if (a->algo_table && !a->nalgos) return bad(err, "--algo-table needs --sweep-algos");
  if (a->explain && (a->vs_nccl || a->nccl_only || a->nalgos))
    return bad(err, "--explain prints p2pkit's selector; not with --vs-nccl, --nccl-only or --sweep-algos");
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

/* The collective, the one argument that is not an option. */
static int take_collective(FILE *err, int argc, char **argv, perf_args *a) {
  for (int i = optind; i < argc; i++) {
    if (a->coll) return bad(err, "unexpected argument '%s' (one collective per run)", argv[i]);
    a->coll = p2pk_perf_coll(argv[i]);
    if (!a->coll)
      return bad(err, "unknown collective '%s' (all_reduce, broadcast, reduce, all_gather, "
                 "reduce_scatter, sendrecv, alltoall)", argv[i]);
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
