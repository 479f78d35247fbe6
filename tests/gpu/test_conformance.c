/* SPDX-License-Identifier: BSD-3-Clause */
/* Conformance: every path of src/coll (path.h) through the public API, the
 * selector steered to it by the P2PKIT_* settings, each call checked
 * against a host reference (coll_calls.h: outputs poisoned, guard bytes
 * around them, reductions within the type's rounding, copies exact).
 * For each configuration below, each rank count and each mode (one
 * process driving every rank with p2pkit_comm_init_all; a process per
 * rank, children of this binary), every collective it serves x every type
 * (x every op for the reductions) x in place and out of place x eager and
 * under a CUDA graph, at odd counts (1, 3, 4097, 70001, taken in turn; all
 * of them with P2PKIT_CONF_FULL=1) and every root in turn. The INFO log of
 * each configuration must show the path it aims at (on 2 ranks; on more,
 * the copy-engine paths under capture give way to the kernels, and the
 * count of each path is printed).
 * On one GPU, P2PKIT_SHARE_GPUS=1 puts every rank on it (one process:
 * init_all with the GPU listed n times). Settings of the test:
 *   P2PKIT_CONF_RANKS   "1-8" (default) or "2", "3-4": the rank counts
 *   P2PKIT_CONF_ONLY    a comma list of configuration names to run
 *   P2PKIT_CONF_QUICK=1 a few types, ops and counts (compute-sanitizer)
 *   P2PKIT_CONF_FULL=1  every count with every type and op */
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coll/coll.h"
#include "coll/kernels/plan.h"
#include "coll_util.h"
#include "core/log.h"
#include "core/param.h"
#include "nccl/dtype.h"
#include "gpu_test.h"
#include "test.h"
#include "test_net.h"
#include "coll_runner.h"
#include "coll_calls.h"

#define MAXCOUNT ((size_t)70001)
static const size_t COUNTS[] = {1, 3, 4097, MAXCOUNT};
#define NCOUNTS 4
static const p2pkit_redop_t OPS[] = {P2PKIT_SUM, P2PKIT_PROD, P2PKIT_MIN, P2PKIT_MAX, P2PKIT_AVG};

static size_t runner_cap(int nr) { return (size_t)nr * MAXCOUNT * 8 + 2 * PAD + 16; }

/* --- configurations ------------------------------------------------------------- */

#define K(kind) (1u << (kind))
#define ALL_KINDS (K(P2PK_COLL_KINDS + 1) - 1)
#define ONE_PROC 1
#define PER_GPU 2

/* One way through the selector: its settings, the collectives it serves,
 * the modes it runs in, and the path its INFO log must show on 2 ranks
 * (per mode, eager and under capture; NULL: not checked). */
typedef struct {
  const char *name;
  const char *env[10];
  unsigned kinds;
  int modes, p2p_off;
  const char *want[3][2]; /* [ONE_PROC or PER_GPU][graph] */
  int ntypes;   /* the data types it runs: the first ntypes of p2pkit_dtype_t */
  int nccl_ids; /* a process per GPU: each rank an NCCL_HOSTID of its own (NCCL refuses two
                   ranks on one GPU of one host) */
} conf_t;

#define CE_ALL "P2PKIT_CE_ALLREDUCE_MIN=1", "P2PKIT_CE_REDUCE_SCATTER_MIN=1", \
    "P2PKIT_CE_ALL_GATHER_MIN=1", "P2PKIT_CE_ALL_TO_ALL_MIN=1", "P2PKIT_CE_REDUCE_MIN=1", \
    "P2PKIT_BCAST_CE_MIN=1", "P2PKIT_SENDRECV_CE_MIN=1", "P2PKIT_CE_CHUNK=64K", "P2PKIT_CE_DEPTH=2"
#define KERNEL_WANT {{NULL, NULL}, {"p2p-kernel", "p2p-kernel"}, {"p2p-kernel", "p2p-kernel"}}
#define NATIVE P2PK_DTYPE_NATIVE_COUNT, 0 /* p2pkit's own types; no NCCL host ids */

static const conf_t CONFS[] = {
    {"kernel-ll", {"P2PKIT_NCCL=0", "P2PKIT_ALGO=oneshot", "P2PKIT_PROTO=ll"}, ALL_KINDS, ONE_PROC | PER_GPU, 0, KERNEL_WANT, NATIVE},
    {"kernel-ll128", {"P2PKIT_NCCL=0", "P2PKIT_ALGO=oneshot", "P2PKIT_PROTO=ll128"}, ALL_KINDS, ONE_PROC | PER_GPU, 0,
     KERNEL_WANT, NATIVE},
    {"kernel-simple", {"P2PKIT_NCCL=0", "P2PKIT_ALGO=oneshot", "P2PKIT_PROTO=simple"}, ALL_KINDS, ONE_PROC | PER_GPU, 0,
     KERNEL_WANT, NATIVE},
    /* all-reduce's two-shot; broadcast's and reduce's rooted two-shot */
    {"kernel-twoshot", {"P2PKIT_NCCL=0", "P2PKIT_ALGO=twoshot", "P2PKIT_PROTO=simple"},
     K(P2PK_COLL_ALL_REDUCE) | K(P2PK_COLL_BROADCAST) | K(P2PK_COLL_REDUCE), ONE_PROC | PER_GPU, 0,
     KERNEL_WANT, NATIVE},
    {"kernel-staged", {"P2PKIT_NCCL=0", "P2PKIT_P2P_DISABLE=1"}, ALL_KINDS, ONE_PROC | PER_GPU, 1,
     {{NULL, NULL}, {"staged-kernel", "staged-kernel"}, {"staged-kernel", "staged-kernel"}}, NATIVE},
    {"copy-engines", {"P2PKIT_NCCL=0", CE_ALL}, ALL_KINDS, ONE_PROC | PER_GPU, 0,
     {{NULL, NULL}, {"ce-events", "ce-direct"}, {"ce-slots", "ce-slots"}}, NATIVE},
    {"copy-engines-staged", {"P2PKIT_NCCL=0", "P2PKIT_P2P_DISABLE=1", "P2PKIT_STAGED_CE_MIN=1"}, K(P2PK_COLL_ALL_REDUCE),
     ONE_PROC | PER_GPU, 1, {{NULL, NULL}, {"ce-staged", "staged-kernel"}, {"ce-staged", "staged-kernel"}}, NATIVE},
    /* NCCL for every call (P2PKIT_NCCL=1), every type (its own too). One
     * process needs a GPU a rank (NCCL: one host id a process). */
    {"nccl", {"P2PKIT_NCCL=1"}, ALL_KINDS, ONE_PROC | PER_GPU, 0,
     {{NULL, NULL}, {"nccl", "nccl"}, {"nccl", "nccl"}}, P2PKIT_DTYPE_COUNT, 1},
};
#define NCONFS (sizeof CONFS / sizeof CONFS[0])

static const conf_t *conf_named(const char *name) {
  for (size_t i = 0; i < NCONFS; i++)
    if (strcmp(CONFS[i].name, name) == 0) return &CONFS[i];
  return NULL;
}

/* Whether P2PKIT_CONF_ONLY (a comma list) leaves `name` in. */
static int conf_wanted(const char *name) {
  const char *only = getenv("P2PKIT_CONF_ONLY");
  if (!only || !*only) return 1;
  const size_t l = strlen(name);
  for (const char *p = only; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
    if (strncmp(p, name, l) == 0 && (p[l] == ',' || p[l] == 0)) return 1;
  return 0;
}

/* The rank counts of P2PKIT_CONF_RANKS ("1-8", "3"). */
static void rank_range(int *lo, int *hi) {
  *lo = 1, *hi = 8;
  const char *e = getenv("P2PKIT_CONF_RANKS");
  if (e && *e && sscanf(e, "%d-%d", lo, hi) < 2) *hi = *lo;
  if (*lo < 1) *lo = 1;
  if (*hi > MAXR) *hi = MAXR;
}

/* The configuration's settings, and the collectives' INFO log into a
 * temporary file (log: its path); conf_end() takes them back. */
static void conf_begin(const conf_t *c, char *log, size_t len) {
  snprintf(log, len, "/tmp/p2pk_conf_log_XXXXXX");
  const int fd = mkstemp(log);
  CHECK(fd >= 0);
  if (fd >= 0) close(fd);
  for (int i = 0; i < 10 && c->env[i]; i++) {
    char name[64];
    const char *eq = strchr(c->env[i], '=');
    snprintf(name, sizeof name, "%.*s", (int)(eq - c->env[i]), c->env[i]);
    setenv(name, eq + 1, 1);
  }
  setenv("P2PKIT_DEBUG", "INFO", 1);
  setenv("P2PKIT_DEBUG_SUBSYS", "COLL", 1);
  setenv("P2PKIT_DEBUG_FILE", log, 1);
  p2pk_param_reset();
  p2pk_log_reset();
}

static void conf_end(const conf_t *c, const char *log) {
  for (int i = 0; i < 10 && c->env[i]; i++) {
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(strchr(c->env[i], '=') - c->env[i]), c->env[i]);
    unsetenv(name);
  }
  unsetenv("P2PKIT_DEBUG");
  unsetenv("P2PKIT_DEBUG_SUBSYS");
  unsetenv("P2PKIT_DEBUG_FILE");
  p2pk_param_reset();
  p2pk_log_reset();
  unlink(log);
}

/* Decisions in the log after its first `skip` lines that took path `path`
 * ("... -> ce-events (rule ...)"); path NULL: the lines. */
static int path_count(const char *log, const char *path, int skip) {
  char needle[48], line[1024];
  snprintf(needle, sizeof needle, " -> %s", path ? path : "");
  FILE *f = fopen(log, "r");
  int hits = 0;
  for (int ln = 0; f && fgets(line, sizeof line, f); ln++) {
    if (ln < skip) continue;
    if (!path) {
      hits++;
      continue;
    }
    const char *at = strstr(line, needle);
    if (at && (at[strlen(needle)] == ' ' || at[strlen(needle)] == '\n')) hits++;
  }
  if (f) fclose(f);
  return hits;
}

/* --- calls ---------------------------------------------------------------------- */

/* The call captured into one graph per local rank's stream, then each graph
 * launched once. */
static p2pkit_status_t issue_graph(runner_t *R, const call_t *k, const void **in, void **out) {
  cudaGraph_t g[MAXR] = {0};
  cudaGraphExec_t x[MAXR] = {0};
  for (int l = 0; l < R->nloc; l++) {
    T_CUDA(cudaSetDevice(R->dev[l]));
    T_CUDA(cudaStreamBeginCapture(R->s[l], cudaStreamCaptureModeGlobal));
  }
  p2pkit_status_t st = issue(R, k, in, out);
  for (int l = 0; l < R->nloc; l++) {
    cudaSetDevice(R->dev[l]);
    if (cudaStreamEndCapture(R->s[l], &g[l]) != cudaSuccess && st == P2PKIT_SUCCESS)
      st = P2PKIT_ERR_CUDA;
  }
  for (int l = 0; l < R->nloc && st == P2PKIT_SUCCESS; l++) {
    cudaSetDevice(R->dev[l]);
    if (cudaGraphInstantiate(&x[l], g[l], 0) != cudaSuccess) st = P2PKIT_ERR_CUDA;
  }
  for (int l = 0; l < R->nloc && st == P2PKIT_SUCCESS; l++) {
    cudaSetDevice(R->dev[l]);
    if (cudaGraphLaunch(x[l], R->s[l]) != cudaSuccess) st = P2PKIT_ERR_CUDA;
  }
  for (int l = 0; l < R->nloc; l++) {
    cudaSetDevice(R->dev[l]);
    if (st == P2PKIT_SUCCESS) cudaStreamSynchronize(R->s[l]);
    if (x[l]) cudaGraphExecDestroy(x[l]);
    if (g[l]) cudaGraphDestroy(g[l]);
  }
  return st;
}

static int run_call(runner_t *R, const conf_t *c, const call_t *k, int graph) {
  char what[240], tag[64];
  snprintf(tag, sizeof tag, "%s%s", c->name, graph ? " graph" : "");
  describe(what, sizeof what, tag, k, R->nr);
  const void *in[MAXR];
  void *out[MAXR];
  size_t off[MAXR];
  prepare(R, R->dout, R->din, k, cu_hash(what, strlen(what)), in, out, off);
  p2pkit_status_t st = graph ? issue_graph(R, k, in, out) : issue(R, k, in, out);
  if (st != P2PKIT_SUCCESS) {
    T_FAIL("%s: %s: %s", what, p2pkit_strerror(st), p2pkit_last_error());
    return 0;
  }
  return verify(R, R->dout, what, k, off);
}

/* Every collective of c x type (x op) x in place or not, eager or under a
 * graph; the count and the root taken in turn (every count each with
 * P2PKIT_CONF_FULL; a few types, ops and counts with P2PKIT_CONF_QUICK). */
static void conf_calls(runner_t *R, const conf_t *c, int graph) {
  static const p2pkit_dtype_t quick_types[] = {P2PKIT_FLOAT32, P2PKIT_BFLOAT16, P2PKIT_INT64};
  const int quick = getenv("P2PKIT_CONF_QUICK") != NULL, full = getenv("P2PKIT_CONF_FULL") != NULL;
  const int ntypes = quick ? 3 : c->ntypes; /* past the native ones: NCCL's own */
  int turn = 0;
  for (int kind = 0; kind <= SENDRECV; kind++) {
    if (!(c->kinds & K(kind))) continue;
    const int has_op = kind != SENDRECV && p2pk_coll_has_op(kind);
    const int roots = kind == SENDRECV ? (R->nr > 1 ? R->nr - 1 : 1) : p2pk_coll_has_root(kind) ? R->nr : 1;
    for (int d = 0; d < ntypes && R->failures < 8; d++)
      for (int o = 0; o < (has_op ? (quick ? 2 : 5) : 1); o++)
        for (int ip = 0; ip < (kind == SENDRECV ? 1 : 2); ip++)
          for (int n = 0; n < (full ? NCOUNTS : 1); n++, turn++) {
            const size_t count = quick ? COUNTS[1 + turn % 2] : COUNTS[full ? n : turn % NCOUNTS];
            call_t k = {kind, turn % roots, ip, turn % 3 == 2,
                        quick ? quick_types[d] : (p2pkit_dtype_t)d, has_op ? OPS[quick ? 3 * o : o] : P2PKIT_SUM,
                        count};
            if (!run_call(R, c, &k, graph)) R->failures++;
          }
  }
}

/* c's calls on R, eager then under a graph; then its log must show the path
 * it aims at (2 ranks; 1 rank: the local copy). Returns 0 or 1 (failed). */
static int conf_run(runner_t *R, const conf_t *c, int mode, const char *log) {
  const int before = t_failed;
  for (int graph = 0; graph < 2 && R->failures == 0; graph++) {
    const int skip = path_count(log, NULL, 0);
    conf_calls(R, c, graph);
    const char *want = R->nr == 1 ? "local" : R->nr == 2 ? c->want[mode][graph] : NULL;
    char counts[256] = "";
    static const char *const names[] = {"local", "p2p-kernel", "staged-kernel", "ce-events",
                                        "ce-slots", "ce-direct", "ce-staged", "nccl",
                                        "hierarchical"};
    for (size_t p = 0; p < sizeof names / sizeof names[0]; p++) {
      const int hits = path_count(log, names[p], skip);
      if (hits) snprintf(counts + strlen(counts), sizeof counts - strlen(counts), " %s %d", names[p], hits);
    }
    printf("  %s, %d ranks, %s, %s: decisions:%s\n", c->name, R->nr,
           mode == ONE_PROC ? "one process" : "process per GPU", graph ? "graph" : "eager", counts);
    if (want && path_count(log, want, skip) == 0)
      T_FAIL("%s, %d ranks, %s: no call took %s", c->name, R->nr, graph ? "graph" : "eager", want);
  }
  fflush(stdout);
  return t_failed != before || R->failures;
}

/* --- one process -------------------------------------------------------------- */

/* n ranks on GPUs 0, 1, ... (the GPUs listed again from 0 when there are
 * fewer, with P2PKIT_SHARE_GPUS=1). 0, or -1 after failing. */
static int runner_n(runner_t *R, int n, int ngpu) {
  memset(R, 0, sizeof *R);
  R->nr = R->nloc = n;
  for (int l = 0; l < n; l++) R->dev[l] = l % ngpu;
  p2pkit_status_t st = p2pkit_comm_init_all(R->comm, n, R->dev);
  if (st != P2PKIT_SUCCESS) {
    T_FAIL("init_all(%d): %s: %s", n, p2pkit_strerror(st), p2pkit_last_error());
    return -1;
  }
  return runner_alloc(R);
}

TEST(one_process) {
  int ngpu = 0, lo, hi;
  T_CUDA(cudaGetDeviceCount(&ngpu));
  rank_range(&lo, &hi);
  for (int n = lo; n <= hi; n++) {
    if (n > ngpu && !cu_share_gpus()) {
      printf("  %d ranks: SKIP: %d GPU(s); P2PKIT_SHARE_GPUS=1 puts several ranks on one\n", n, ngpu);
      continue;
    }
    for (size_t i = 0; i < NCONFS; i++) {
      const conf_t *c = &CONFS[i];
      if (!(c->modes & ONE_PROC) || !conf_wanted(c->name)) continue;
      if (c->nccl_ids && n > ngpu && n > 1) {
        printf("  %s, %d ranks, one process: SKIP: NCCL takes one GPU a rank in one process\n",
               c->name, n);
        continue;
      }
      char log[64];
      conf_begin(c, log, sizeof log);
      runner_t R;
      if (runner_n(&R, n, ngpu) == 0) conf_run(&R, c, ONE_PROC, log);
      runner_destroy(&R);
      conf_end(c, log);
    }
  }
}

/* --- a process per rank --------------------------------------------------------- */

static int hosts_child(const char *mode, int rank, int port, int nranks);
static int abort_child(const char *mode, int rank, int port, int nranks);

/* A child: `--child CONF RANK PORT NRANKS` (CONF also hosts-HxL, abort-...). */
static int child_main(int argc, char **argv) {
  const char *mode = NULL;
  int rank = 0, port = 0, nranks = 0;
  const int bad = cu_child_args(argc, argv, &mode, &rank, &port, &nranks);
  if (bad) return bad;
  if (strncmp(mode, "hosts-", 6) == 0) return hosts_child(mode, rank, port, nranks);
  if (strncmp(mode, "abort-", 6) == 0) return abort_child(mode, rank, port, nranks);
  const conf_t *c = conf_named(mode);
  if (!c) return 2;
  if (c->nccl_ids) { /* NCCL refuses two ranks on one GPU of one host */
    char v[32];
    snprintf(v, sizeof v, "conf.r%d", rank);
    setenv("NCCL_HOSTID", v, 0);
  }
  char log[64];
  conf_begin(c, log, sizeof log);
  runner_t R;
  if (runner_join(&R, rank, nranks, port, (int)p2pk_param_int("P2PKIT_TIMEOUT")) == 0)
    conf_run(&R, c, PER_GPU, log);
  runner_destroy(&R);
  conf_end(c, log);
  fflush(NULL);
  return t_failed ? 1 : 0;
}

TEST(process_per_gpu) {
  int ngpu = 0, lo, hi;
  T_CUDA(cudaGetDeviceCount(&ngpu));
  rank_range(&lo, &hi);
  for (int n = lo; n <= hi; n++) {
    if (n > ngpu && !cu_share_gpus()) {
      printf("  %d ranks: SKIP: %d GPU(s); P2PKIT_SHARE_GPUS=1 puts several ranks on one\n", n, ngpu);
      continue;
    }
    for (size_t i = 0; i < NCONFS; i++) {
      const conf_t *c = &CONFS[i];
      if (!(c->modes & PER_GPU) || !conf_wanted(c->name)) continue;
      if (n == 1) { /* rank 0 of 1: in this process */
        char log[64];
        conf_begin(c, log, sizeof log);
        runner_t R;
        if (runner_one_rank(&R, 1) == 0) conf_run(&R, c, PER_GPU, log);
        runner_destroy(&R);
        conf_end(c, log);
        continue;
      }
      int status[MAXR];
      pid_t pid[MAXR];
      if (cu_spawn_ranks("test_conformance", c->name, n, free_port(), c->p2p_off, 570, status, pid))
        T_FAIL("%s, %d ranks: children still running after 570 s: a hang", c->name, n);
      for (int r = 0; r < n; r++) runner_expect_clean_exit(c->name, r, n, status[r]);
    }
  }
}


/* --- hosts simulated on one machine ---------------------------------------------- */

/* Every collective x every type (NCCL's own too) x op on a communicator
 * spanning hosts: P2PKIT_HOSTID per host, NCCL_HOSTID per rank (ranks
 * sharing a GPU), P2PKIT_NCCL=auto: all-reduce, reduce-scatter and
 * all-gather hierarchical where hosts hold 2 ranks or more, the rest (and
 * one rank per host) NCCL over every rank. */
static const conf_t HOSTS_CONF = {"hosts", {NULL}, ALL_KINDS, PER_GPU, 0, {{NULL, NULL}},
                                  P2PKIT_DTYPE_COUNT, 0};

/* Sum over the ranks r of n with pick(r) of (r + 1) * scale. */
static float rank_sum(int n, int want, int div, int mod, float scale) {
  float s = 0;
  for (int r = 0; r < n; r++)
    if ((mod ? r % mod : r / div) == want) s += (float)(r + 1) * scale;
  return s;
}

static int check_all(const float *h, size_t n, float want, const char *what, int rank) {
  for (size_t i = 0; i < n; i++)
    if (h[i] != want) {
      T_FAIL("%s: rank %d: element %zu is %g, expected %g", what, rank, i, h[i], want);
      return 0;
    }
  return 1;
}

/* Split into even/odd and per-host communicators, both alive at once, an
 * all-reduce on each queued before either is waited for. */
static void split_check(runner_t *R, int L) {
  const int rank = R->rank0, n = R->nr, host = rank / L;
  const size_t count = 4097;
  p2pkit_comm_t eo = NULL, hc = NULL;
  CHECK_OK(p2pkit_comm_split(R->comm[0], rank % 2, rank, NULL, &eo));
  CHECK_OK(p2pkit_comm_split(R->comm[0], host, -rank, NULL, &hc)); /* keys reversed */
  if (!eo || !hc) return;
  CHECK_EQ(p2pkit_comm_size(eo), (n + 1 - rank % 2) / 2);
  CHECK_EQ(p2pkit_comm_rank(hc), L - 1 - rank % L);
  float *a = NULL, *b = NULL, *h = malloc(count * sizeof *h);
  cudaStream_t s2;
  T_CUDA(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  T_CUDA(cudaMalloc((void **)&a, count * sizeof *a));
  T_CUDA(cudaMalloc((void **)&b, count * sizeof *b));
  for (size_t i = 0; i < count; i++) h[i] = (float)(rank + 1);
  T_CUDA(cudaMemcpy(a, h, count * sizeof *h, cudaMemcpyHostToDevice));
  for (size_t i = 0; i < count; i++) h[i] = (float)(rank + 1) * 10;
  T_CUDA(cudaMemcpy(b, h, count * sizeof *h, cudaMemcpyHostToDevice));
  CHECK_OK(p2pkit_all_reduce(a, a, count, P2PKIT_FLOAT32, P2PKIT_SUM, eo, R->s[0]));
  CHECK_OK(p2pkit_all_reduce(b, b, count, P2PKIT_FLOAT32, P2PKIT_SUM, hc, s2));
  T_CUDA(cudaStreamSynchronize(R->s[0]));
  T_CUDA(cudaStreamSynchronize(s2));
  T_CUDA(cudaMemcpy(h, a, count * sizeof *h, cudaMemcpyDeviceToHost));
  check_all(h, count, rank_sum(n, rank % 2, 1, 2, 1), "split even/odd all_reduce", rank);
  T_CUDA(cudaMemcpy(h, b, count * sizeof *h, cudaMemcpyDeviceToHost));
  check_all(h, count, rank_sum(n, host, L, 0, 10), "split per host all_reduce", rank);
  cudaFree(a);
  cudaFree(b);
  cudaStreamDestroy(s2);
  free(h);
  CHECK_OK(p2pkit_comm_destroy(hc));
  CHECK_OK(p2pkit_comm_destroy(eo));
}

/* A rank of `hosts-HxL`: its host's ids, a torchrun-style environment of
 * a larger job (the explicit rank and size must win over it), the
 * collectives, the split. */
static int hosts_child(const char *mode, int rank, int port, int nranks) {
  int H = 0, L = 0;
  if (sscanf(mode, "hosts-%dx%d", &H, &L) != 2 || H * L != nranks) return 2;
  char v[32];
  snprintf(v, sizeof v, "sim%d", rank / L);
  setenv("P2PKIT_HOSTID", v, 1);
  snprintf(v, sizeof v, "sim%d.r%d", rank / L, rank);
  setenv("NCCL_HOSTID", v, 1);
  setenv("RANK", "7", 1), setenv("WORLD_SIZE", "8", 1), setenv("LOCAL_RANK", "5", 1);
  setenv("LOCAL_WORLD_SIZE", "8", 1), setenv("MASTER_PORT", "1", 1);
  unsetenv("P2PKIT_NCCL");
  char log[64];
  conf_begin(&HOSTS_CONF, log, sizeof log);
  runner_t R;
  if (runner_join(&R, rank, nranks, port, (int)p2pk_param_int("P2PKIT_TIMEOUT")) == 0) {
    conf_run(&R, &HOSTS_CONF, PER_GPU, log);
    const char *want = L >= 2 ? "hierarchical" : "nccl";
    if (path_count(log, want, 0) == 0) T_FAIL("%s: rank %d: no call took %s", mode, rank, want);
    if (R.failures == 0) split_check(&R, L);
  }
  runner_destroy(&R);
  conf_end(&HOSTS_CONF, log);
  fflush(NULL);
  return t_failed ? 1 : 0;
}

TEST(hosts) {
  static const char *const layouts[] = {"hosts-2x2", "hosts-3x1"};
  for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
    if (!conf_wanted(layouts[i]) && !conf_wanted("hosts")) continue;
    int H = 0, L = 0, status[MAXR];
    pid_t pid[MAXR];
    sscanf(layouts[i], "hosts-%dx%d", &H, &L);
    if (cu_spawn_ranks("test_conformance", layouts[i], H * L, free_port(), 0, 400, status, pid))
      T_FAIL("%s: children still running after 400 s: a hang", layouts[i]);
    for (int r = 0; r < H * L; r++) runner_expect_clean_exit(layouts[i], r, H * L, status[r]);
  }
}

/* --- abort beside a dead peer ---------------------------------------------------- */

/* The stream's work ended, well, within `secs` (a cudaStreamSynchronize
 * that cannot hang the test). */
static int stream_done_within(cudaStream_t s, double secs) {
  const double t0 = cu_now();
  cudaError_t e;
  while ((e = cudaStreamQuery(s)) == cudaErrorNotReady && cu_now() - t0 < secs) usleep(1000);
  return e == cudaSuccess;
}

/* Ranks 0 and 1 each leave a mark (a file named by the run's port) and go
 * on; rank 2 waits until it sees both, at most `secs`, then removes them. */
static int abort_marks(int port, int rank, double secs) {
  char path[2][96];
  for (int r = 0; r < 2; r++) snprintf(path[r], sizeof path[r], "%s/p2pkit-abort-test.%d.r%d", P_tmpdir, port, r);
  if (rank < 2) {
    int fd = open(path[rank], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return -1;
    close(fd);
    return 0;
  }
  const double t0 = cu_now();
  int seen;
  while (!(seen = access(path[0], F_OK) == 0 && access(path[1], F_OK) == 0) && cu_now() - t0 < secs)
    usleep(1000);
  unlink(path[0]), unlink(path[1]);
  return seen ? 0 : -1;
}

/* `abort-kernel` (P2PKIT_NCCL=0) or `abort-nccl` (=1), 3 ranks: rank 2 dies
 * once a first all-reduce of all three has ended everywhere; ranks 0 and 1
 * start another that waits for it; rank 0 aborts after 1 s, which must return within 3 s and
 * end its call. Rank 1 (the kernels) fails at once on rank 0's abort word,
 * long before its timeout; with NCCL (no such word) it aborts too after
 * 5 s, as an application's watchdog would, and that must return within 3 s. */
static int abort_child(const char *mode, int rank, int port, int nranks) {
  const int nccl = strcmp(mode, "abort-nccl") == 0;
  setenv("P2PKIT_NCCL", nccl ? "1" : "0", 1);
  char v[32];
  snprintf(v, sizeof v, "abort.r%d", rank);
  setenv("NCCL_HOSTID", v, 1);
  p2pk_param_reset();
  setvbuf(stdout, NULL, _IOLBF, 0); /* each step's line out before a hang's kill */
  runner_t R;
  if (runner_join(&R, rank, nranks, port, 30) != 0) return 1;
  const size_t count = 16384; /* within the runner's buffers */
  /* One all-reduce of all three first, so every path has connected its
   * peers (NCCL does so at its first collective) before rank 2 dies. */
  CHECK_OK(p2pkit_all_reduce(R.din[0], R.dout[0], count, P2PKIT_FLOAT32, P2PKIT_SUM, R.comm[0], R.s[0]));
  if (!stream_done_within(R.s[0], 30)) {
    T_FAIL("%s: rank %d: the first all-reduce, with all three alive, not done after 30 s", mode, rank);
    p2pkit_comm_abort(R.comm[0]);
    return 1;
  }
  /* A rank's kernel can end before NCCL's proxy has sent its last chunk
   * over the socket; rank 2 leaving then would starve rank 0's first call
   * (the one-H200 machine hung so). Rank 2 dies only once both others have
   * seen their first call end. */
  if (abort_marks(port, rank, 30) != 0) T_FAIL("%s: rank %d: the others' marks not seen in 30 s", mode, rank);
  if (rank == 2) _exit(0); /* dead, without a word */
  const double t0 = cu_now();
  const p2pkit_status_t st =
      p2pkit_all_reduce(R.din[0], R.dout[0], count, P2PKIT_FLOAT32, P2PKIT_SUM, R.comm[0], R.s[0]);
  /* NCCL may see the dead rank's closed sockets at the call itself
   * (ncclRemoteError; without the first all-reduce it did so on the
   * one-H200 machine after 0.5 s): a prompt failure, as wanted. */
  if (st != P2PKIT_SUCCESS && !(nccl && st == P2PKIT_ERR_REMOTE))
    T_FAIL("%s: rank %d: all_reduce returned %s", mode, rank, p2pkit_strerror(st));
  if (st == P2PKIT_ERR_REMOTE && cu_now() - t0 > 15)
    T_FAIL("%s: rank %d: all_reduce failed only after %.1f s", mode, rank, cu_now() - t0);
  if (rank == 1 && !nccl) {
    cudaStreamSynchronize(R.s[0]);
    p2pkit_status_t as = P2PKIT_SUCCESS;
    CHECK_OK(p2pkit_comm_get_async_error(R.comm[0], &as));
    CHECK(as != P2PKIT_SUCCESS);
    if (cu_now() - t0 > 15) T_FAIL("%s: rank 1 failed only after %.1f s", mode, cu_now() - t0);
  }
  printf("  %s: rank %d: all_reduce returned %s after %.2f s\n", mode, rank, p2pkit_strerror(st),
         cu_now() - t0);
  usleep(rank == 0 ? 1000000 : 5000000);
  const double t1 = cu_now();
  CHECK_OK(p2pkit_comm_abort(R.comm[0]));
  if (cu_now() - t1 > 3) T_FAIL("%s: rank %d: abort took %.1f s", mode, rank, cu_now() - t1);
  printf("  %s: rank %d: abort returned after %.2f s; waiting for its stream\n", mode, rank, cu_now() - t1);
  if (cudaStreamSynchronize(R.s[0]) != cudaSuccess) cudaGetLastError();
  if (cu_now() - t1 > 8) T_FAIL("%s: rank %d: its call ended %.1f s after abort", mode, rank, cu_now() - t1);
  printf("  %s: rank %d: its stream done %.2f s after abort\n", mode, rank, cu_now() - t1);
  R.comm[0] = NULL;
  runner_free(&R);
  printf("  %s: rank %d: buffers freed\n", mode, rank);
  fflush(NULL);
  return t_failed ? 1 : 0;
}

TEST(abort_dead_peer) {
  static const char *const modes[] = {"abort-kernel", "abort-nccl"};
  for (int i = 0; i < 2; i++) {
    int status[MAXR];
    pid_t pid[MAXR];
    if (cu_spawn_ranks("test_conformance", modes[i], 3, free_port(), 0, 120, status, pid))
      T_FAIL("%s: children still running after 120 s: a hang", modes[i]);
    for (int r = 0; r < 3; r++) runner_expect_clean_exit(modes[i], r, 3, status[r]);
  }
}

CU_MAIN({T_CASE(one_process), 1, CU_GPU1}, {T_CASE(process_per_gpu), 1, CU_GPU1},
        {T_CASE(hosts), 1, CU_PROCS}, {T_CASE(abort_dead_peer), 1, CU_PROCS})
