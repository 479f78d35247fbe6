/* SPDX-License-Identifier: BSD-3-Clause */
/* One process of a `p2pkit perf` run: its GPUs (all of them, or one per
 * process with -p), buffers, communicators of both libraries, and for each
 * size and place: warm-up, timed regions (eager calls or one CUDA graph),
 * then a checked call on fresh data into a poisoned output.
 *
 * Both libraries go through the same code; only the call differs. Rank 0
 * (process 0) gathers the times and #wrong through the shared region and
 * prints. */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll/coll.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/outfile.h"
#include "core/param.h"
#include "nccl/nccl_dl.h"
#include "perf/perf.h"
#include "perf/perf_kernels.h"
#include "perf/perf_proc.h"
#include "topo/nvml_dl.h"
#include "topo/topo.h"

#define MAXG P2PK_PERF_MAX_RANKS
/* Device memory left for the libraries' own buffers when judging -e. */
#define LIB_RESERVE ((size_t)256 << 20)

typedef struct {
  const perf_args *a;
  perf_shared *sh;
  int proc, nprocs, child, bar_sense, timeout_s, tty;
  int usage;               /* the failure is the caller's input or machine: exit 2 */
  int nranks, nlocal, rank0;
  int dev[MAXG];
  int min_cc;              /* the least compute capability of the local GPUs (90 = sm_90) */
  perf_variant v;          /* the type, operation and root being measured */
  size_t ts;               /* bytes per element of v.dtype */
  perf_variant *var;       /* every variant of the run (-d all, -o all, -r all) */
  int nvar;
  int use[PERF_LIB_COUNT]; /* the libraries that run v */
  int nop[MAXG];           /* NCCL's operation for v on each local GPU (mulsum: made per variant) */
  int have_nop;
  size_t buf_bytes;        /* each of sbuf and rbuf */
  cudaStream_t stream[MAXG];
  cudaEvent_t ev0[MAXG], ev1[MAXG];
  void *sbuf[MAXG], *rbuf[MAXG];
  unsigned long long *dwrong[MAXG];
  cudaGraphExec_t gexec[MAXG];
  int nsizes;
  size_t sizes[P2PK_PERF_MAX_SIZES];
  p2pk_nccl_api nccl;
  p2pk_nccl_comm_t ncomm[MAXG];
  int have_ncomm;
  void *nreg[MAXG][2];
  p2pkit_comm_t pcomm[MAXG];
  int have_pcomm;
  void *preg[MAXG][2];
  char proto_env[40];      /* "=" + the caller's P2PKIT_PROTO, "" when unset */
  perf_report *rep;        /* process 0 only */
  FILE *table;             /* process 0 without --json: stdout */
  /* Process 0: --json-file and --algo-table, opened before any GPU work;
   * created: the file did not exist (removed again when nothing is written). */
  p2pk_outfile json_out, algo_out;
  int gave_way;            /* -p: another rank failed before this one started */
  int64_t wrong_total;
} perf_ctx;

static p2pkit_status_t usage_fail(perf_ctx *c, p2pkit_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static p2pkit_status_t usage_fail(perf_ctx *c, p2pkit_status_t st, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  c->usage = 1;
  return p2pk_fail(st, "%s", msg);
}

static void progress_clear(perf_ctx *c) {
  if (c->tty) fputs("\r\033[K", stderr);
}

static void phase(perf_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void phase(perf_ctx *c, const char *fmt, ...) {
  char buf[128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  p2pk_perf_heartbeat(c->sh, c->proc, "%s", buf);
  if (c->tty) {
    fprintf(stderr, "\r\033[K[p2pkit perf] %s", buf);
    fflush(stderr);
  }
}

static int wait_limit_s(const perf_ctx *c) {
  return c->timeout_s > 0 ? p2pk_perf_stall_limit_s(c->timeout_s) : 0;
}

static p2pkit_status_t barrier(perf_ctx *c) {
  int r = p2pk_perf_barrier(c->sh, c->nprocs, &c->bar_sense, wait_limit_s(c));
  if (r == -1) return p2pk_fail(P2PKIT_ERR_REMOTE, "another rank failed");
  if (r == -2)
    return p2pk_fail(P2PKIT_ERR_TIMEOUT, "waited %d s for the other ranks (P2PKIT_TIMEOUT=%d)",
                     wait_limit_s(c), c->timeout_s);
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t set_device(perf_ctx *c, int l) {
  P2PK_CUDA_CHECK(cudaSetDevice(c->dev[l]));
  return P2PKIT_SUCCESS;
}

/* ---- setup ------------------------------------------------------------- */

/* What the rank count decides: the root, hypercube's power of two, the
 * variants (-r all: one per rank) and the rows they make. */
static p2pkit_status_t ranks_fit(perf_ctx *c) {
  const perf_args *a = c->a;
  if (a->coll->uses_root && a->root >= c->nranks)
    return usage_fail(c, P2PKIT_ERR_INVALID_ARGUMENT, "-r %d: the root must be a rank, 0..%d",
                      a->root, c->nranks - 1);
  if (a->coll->pow2_ranks && (c->nranks & (c->nranks - 1)))
    return usage_fail(c, P2PKIT_ERR_INVALID_ARGUMENT, "%s needs a power-of-two number of ranks; "
                      "this run has %d", a->coll->name, c->nranks);
  c->nvar = p2pk_perf_variants(a, c->nranks, NULL, 0);
  const long rows = (long)c->nvar * p2pk_perf_sizes(a, c->sizes, P2PK_PERF_MAX_SIZES) *
                    (a->cycles ? a->cycles : 1);
  if (rows > P2PK_PERF_MAX_ROWS)
    return usage_fail(c, P2PKIT_ERR_INVALID_ARGUMENT, "%ld rows (sizes x types x operations x "
                      "roots x -N cycles) are more than the %d one run holds", rows,
                      P2PK_PERF_MAX_ROWS);
  c->var = calloc((size_t)c->nvar, sizeof *c->var);
  if (!c->var) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of host memory for %d variants", c->nvar);
  p2pk_perf_variants(a, c->nranks, c->var, c->nvar);
  c->min_cc = 1 << 30;
  for (int l = 0; l < c->nlocal; l++) {
    int major = 0, minor = 0;
    P2PK_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, c->dev[l]));
    P2PK_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, c->dev[l]));
    if (major * 10 + minor < c->min_cc) c->min_cc = major * 10 + minor;
  }
  return set_device(c, 0);
}

static p2pkit_status_t find_gpus(perf_ctx *c) {
  const perf_args *a = c->a;
  int count = 0;
  if (p2pk_gpu_count(&count) != P2PKIT_SUCCESS) {
    char why[256];
    snprintf(why, sizeof why, "%s", p2pkit_last_error());
    return usage_fail(c, P2PKIT_ERR_NO_DEVICE, "no usable GPU on this machine (%s)", why);
  }
  if (c->child) {
    /* More processes than GPUs only with P2PKIT_SHARE_GPUS (testing):
     * process p on GPU p % count; the library warns that no time then
     * means anything. */
    if (c->nprocs > count) {
      if (!p2pk_param_int("P2PKIT_SHARE_GPUS"))
        return usage_fail(c, P2PKIT_ERR_INVALID_ARGUMENT,
                          "-p %d needs %d GPUs (one per process); this machine has %d "
                          "(P2PKIT_SHARE_GPUS=1 lets processes share them, to check results only)",
                          c->nprocs, c->nprocs, count);
      if (a->vs_nccl || a->nccl_only)
        return usage_fail(c, P2PKIT_ERR_INVALID_ARGUMENT,
                          "-p %d on %d GPUs (P2PKIT_SHARE_GPUS) with NCCL: NCCL takes one rank "
                          "per GPU", c->nprocs, count);
    }
    c->nlocal = 1;
    c->nranks = c->nprocs;
    c->rank0 = c->proc;
    c->dev[0] = c->proc % count;
  } else {
    int n = a->ngpus ? a->ngpus : count;
    if (n > count)
      return usage_fail(c, P2PKIT_ERR_INVALID_ARGUMENT, "-g %d: this machine has %d GPU%s", n,
                        count, count == 1 ? "" : "s");
    if (n > MAXG) n = MAXG;
    c->nlocal = c->nranks = n;
    c->rank0 = 0;
    for (int i = 0; i < n; i++) c->dev[i] = i;
  }
  return ranks_fit(c);
}

static void gib(char *buf, size_t len, size_t bytes) {
  snprintf(buf, len, "%.2f GiB", (double)bytes / (1 << 30));
}

/* The largest buffer any type and size needs, plus -u's offset. */
static p2pkit_status_t buffer_bytes(perf_ctx *c) {
  const perf_args *a = c->a;
  c->buf_bytes = 0;
  for (int t = 0; t < a->ndtypes; t++) {
    const size_t ts = p2pkit_dtype_size(a->dtypes[t]);
    size_t elems = 0;
    for (int i = 0; i < c->nsizes; i++) {
      perf_counts k;
      p2pk_perf_counts(a->coll, c->sizes[i], ts, c->nranks, &k);
      if (k.send_elems > elems) elems = k.send_elems;
      if (k.recv_elems > elems) elems = k.recv_elems;
    }
    if (elems > ((size_t)1 << 62) / ts)
      return usage_fail(c, P2PKIT_ERR_INVALID_ARGUMENT, "-e %zu is larger than any GPU", a->max_bytes);
    if ((elems + (size_t)a->unalign) * ts > c->buf_bytes) c->buf_bytes = (elems + (size_t)a->unalign) * ts;
  }
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t alloc(perf_ctx *c) {
  const perf_args *a = c->a;
  c->nsizes = p2pk_perf_sizes(a, c->sizes, P2PK_PERF_MAX_SIZES);
  P2PK_CHECK(buffer_bytes(c));
  size_t need = 2 * c->buf_bytes + LIB_RESERVE;
  for (int l = 0; l < c->nlocal; l++) { /* judge -e before allocating anything */
    P2PK_CHECK(set_device(c, l));
    size_t free_b = 0, total = 0;
    P2PK_CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
    if (need > free_b) {
      char n1[32], n2[32], n3[32];
      gib(n1, sizeof n1, need);
      gib(n2, sizeof n2, c->buf_bytes);
      gib(n3, sizeof n3, free_b);
      return usage_fail(c, P2PKIT_ERR_NO_MEMORY,
                        "-e %zu needs %s on each GPU (send and receive buffers of %s, plus 256 MiB "
                        "for the libraries) but GPU %d has %s free",
                        a->max_bytes, n1, n2, c->dev[l], n3);
    }
  }
  for (int l = 0; l < c->nlocal; l++) {
    P2PK_CHECK(set_device(c, l));
    /* -y 1: the legacy default stream (NULL), as nccl-tests' stream_null. */
    if (!a->stream_null) P2PK_CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream[l], cudaStreamNonBlocking));
    P2PK_CUDA_CHECK(cudaEventCreate(&c->ev0[l]));
    P2PK_CUDA_CHECK(cudaEventCreate(&c->ev1[l]));
    P2PK_CUDA_CHECK(cudaMalloc(&c->sbuf[l], c->buf_bytes));
    P2PK_CUDA_CHECK(cudaMalloc(&c->rbuf[l], c->buf_bytes));
    P2PK_CUDA_CHECK(cudaMalloc((void **)&c->dwrong[l], sizeof(unsigned long long)));
  }
  return P2PKIT_SUCCESS;
}

static void utc_now(char *buf, size_t len) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Every process names its GPUs in the shared region; process 0 builds the report. */
static p2pkit_status_t describe(perf_ctx *c) {
  for (int l = 0; l < c->nlocal; l++) {
    struct cudaDeviceProp p;
    P2PK_CUDA_CHECK(cudaGetDeviceProperties(&p, c->dev[l]));
    perf_rank_info *k = &c->sh->slot[c->rank0 + l].info;
    k->rank = c->rank0 + l;
    k->device = c->dev[l];
    k->pid = (int)getpid();
    snprintf(k->name, sizeof k->name, "%s", p.name);
    snprintf(k->busid, sizeof k->busid, "%04x:%02x:%02x.0", p.pciDomainID, p.pciBusID,
             p.pciDeviceID);
  }
  P2PK_CHECK(barrier(c));
  if (c->proc != 0) return P2PKIT_SUCCESS;
  const perf_args *a = c->a;
  perf_report *r = calloc(1, sizeof *r);
  int npasses = a->nalgos ? a->nalgos : 1;
  if (r) r->passes = calloc((size_t)npasses, sizeof *r->passes);
  if (!r || !r->passes) {
    free(r);
    return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of host memory for the results");
  }
  c->rep = r;
  r->args = a;
  r->npasses = npasses;
  r->nranks = c->nranks;
  r->nprocs = c->child ? c->nprocs : 1;
  r->gpus_per_proc = c->nlocal;
  for (int i = 0; i < c->nranks; i++) r->ranks[i] = c->sh->slot[i].info;
  gethostname(r->hostname, sizeof r->hostname - 1);
  utc_now(r->date, sizeof r->date);
  cudaDriverGetVersion(&r->cuda_driver);
  cudaRuntimeGetVersion(&r->cuda_runtime);
  const p2pk_nvml_api *nv = NULL;
  if (p2pk_nvml_get(&nv) == P2PKIT_SUCCESS &&
      nv->SystemGetDriverVersion(r->driver, sizeof r->driver) != NVML_SUCCESS)
    r->driver[0] = '\0';
  r->nccl_version = c->nccl.version;
  snprintf(r->nccl_path, sizeof r->nccl_path, "%s", c->nccl.path);
  c->table = a->json ? NULL : stdout;
  return P2PKIT_SUCCESS;
}

/* ---- communicators ------------------------------------------------------ */

static p2pkit_status_t nccl_unique_id(perf_ctx *c, p2pk_nccl_id *id) {
  perf_shared *sh = c->sh;
  if (c->proc == 0) {
    P2PK_CHECK(p2pk_nccl_check(&c->nccl, c->nccl.GetUniqueId(id), "ncclGetUniqueId"));
    memcpy(sh->nccl_id, id, sizeof *id);
    atomic_store(&sh->nccl_id_ready, 1);
    return P2PKIT_SUCCESS;
  }
  int64_t t0 = p2pk_perf_now_ms();
  while (!atomic_load(&sh->nccl_id_ready)) {
    if (atomic_load(&sh->abort)) return p2pk_fail(P2PKIT_ERR_REMOTE, "another rank failed");
    if (c->timeout_s > 0 && p2pk_perf_now_ms() - t0 > (int64_t)wait_limit_s(c) * 1000)
      return p2pk_fail(P2PKIT_ERR_TIMEOUT, "rank 0 did not publish NCCL's unique id within %d s",
                       wait_limit_s(c));
    usleep(1000);
  }
  memcpy(id, sh->nccl_id, sizeof *id);
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t nccl_init(perf_ctx *c) {
  phase(c, "NCCL: creating the communicator%s", c->nlocal > 1 ? "s" : "");
  if (!c->child) {
    P2PK_CHECK(p2pk_nccl_check(&c->nccl, c->nccl.CommInitAll(c->ncomm, c->nlocal, c->dev),
                               "ncclCommInitAll"));
  } else {
    p2pk_nccl_id id;
    P2PK_CHECK(nccl_unique_id(c, &id));
    P2PK_CHECK(set_device(c, 0));
    P2PK_CHECK(p2pk_nccl_check(&c->nccl, c->nccl.CommInitRank(&c->ncomm[0], c->nranks, id, c->rank0),
                               "ncclCommInitRank"));
  }
  c->have_ncomm = 1;
  if (!c->a->reg) return P2PKIT_SUCCESS;
  if (!c->nccl.CommRegister)
    return usage_fail(c, P2PKIT_ERR_UNSUPPORTED, "-R 1: this NCCL (%s) has no ncclCommRegister",
                      c->nccl.path);
  for (int l = 0; l < c->nlocal; l++) {
    P2PK_CHECK(set_device(c, l));
    P2PK_CHECK(p2pk_nccl_check(&c->nccl, c->nccl.CommRegister(c->ncomm[l], c->sbuf[l], c->buf_bytes,
                                                              &c->nreg[l][0]), "ncclCommRegister"));
    P2PK_CHECK(p2pk_nccl_check(&c->nccl, c->nccl.CommRegister(c->ncomm[l], c->rbuf[l], c->buf_bytes,
                                                              &c->nreg[l][1]), "ncclCommRegister"));
  }
  return P2PKIT_SUCCESS;
}

static void nccl_fini(perf_ctx *c) {
  if (!c->have_ncomm) return;
  for (int l = 0; l < c->nlocal; l++) {
    for (int b = 0; b < 2; b++)
      if (c->nreg[l][b]) c->nccl.CommDeregister(c->ncomm[l], c->nreg[l][b]);
    cudaSetDevice(c->dev[l]);
    c->nccl.CommDestroy(c->ncomm[l]);
  }
  c->have_ncomm = 0;
}

static const char *pass_algo(const perf_args *a, int pass) {
  if (a->nalgos) return a->algos[pass];
  if (a->algo) return a->algo;
  return p2pk_param_str("P2PKIT_ALGO"); /* "" when unset */
}

/* P2PKIT_ALGO / P2PKIT_PROTO for a forced "algo[/proto]"; a pass without a
 * protocol gets the caller's P2PKIT_PROTO back. */
static void algo_env(perf_ctx *c, const char *entry) {
  char algo[32];
  const char *slash = strchr(entry, '/');
  size_t len = slash ? (size_t)(slash - entry) : strlen(entry);
  if (len >= sizeof algo) len = sizeof algo - 1;
  memcpy(algo, entry, len);
  algo[len] = '\0';
  setenv("P2PKIT_ALGO", algo, 1);
  if (slash) setenv("P2PKIT_PROTO", slash + 1, 1);
  else if (c->proto_env[0]) setenv("P2PKIT_PROTO", c->proto_env + 1, 1);
  else unsetenv("P2PKIT_PROTO");
}

static p2pkit_status_t p2pkit_init(perf_ctx *c, int pass) {
  const char *algo = pass_algo(c->a, pass);
  phase(c, "p2pkit: creating the communicator%s%s%s", c->nlocal > 1 ? "s" : "",
        algo[0] ? ", algo " : "", algo);
  /* Set before the communicator exists, whether it reads it then or per call. */
  if (c->a->nalgos || c->a->algo) algo_env(c, algo);
  p2pk_param_reset();
  if (!c->child) {
    P2PK_CHECK(p2pkit_comm_init_all(c->pcomm, c->nlocal, c->dev));
  } else {
    char port[16];
    snprintf(port, sizeof port, "%d", c->sh->ports[pass]);
    setenv("MASTER_PORT", port, 1);
    p2pkit_comm_opts_t o;
    p2pkit_comm_opts_init(&o);
    o.device = c->dev[0];
    P2PK_CHECK(p2pkit_comm_init_rank(&o, &c->pcomm[0]));
  }
  c->have_pcomm = 1;
  if (c->rep) c->rep->staged = c->pcomm[0]->staged; /* the same for every pair */
  if (!c->a->reg) return P2PKIT_SUCCESS;
  /* Every rank registers the same two buffers in the same order. */
  for (int l = 0; l < c->nlocal; l++) {
    P2PK_CHECK(set_device(c, l));
    P2PK_CHECK(p2pkit_comm_register(c->pcomm[l], c->sbuf[l], c->buf_bytes, &c->preg[l][0]));
    P2PK_CHECK(p2pkit_comm_register(c->pcomm[l], c->rbuf[l], c->buf_bytes, &c->preg[l][1]));
  }
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t p2pkit_fini(perf_ctx *c) {
  if (!c->have_pcomm) return P2PKIT_SUCCESS;
  p2pkit_status_t st = P2PKIT_SUCCESS;
  for (int l = 0; l < c->nlocal; l++)
    for (int b = 0; b < 2; b++)
      if (c->preg[l][b]) {
        p2pkit_status_t s = p2pkit_comm_deregister(c->pcomm[l], c->preg[l][b]);
        if (st == P2PKIT_SUCCESS) st = s;
        c->preg[l][b] = NULL;
      }
  for (int l = 0; l < c->nlocal; l++) {
    p2pkit_status_t s = p2pkit_comm_destroy(c->pcomm[l]);
    if (st == P2PKIT_SUCCESS) st = s;
  }
  c->have_pcomm = 0;
  return st;
}

/* ---- one call of the collective on every local GPU --------------------- */

/* Where the buffers start: -u elements into their allocations. */
static char *sbase(const perf_ctx *c, int l) {
  return (char *)c->sbuf[l] + (size_t)c->a->unalign * c->ts;
}

static char *rbase(const perf_ctx *c, int l) {
  return (char *)c->rbuf[l] + (size_t)c->a->unalign * c->ts;
}

static void buffers(const perf_ctx *c, int l, const perf_counts *k, int ip, const void **send,
                    void **recv) {
  size_t rank = (size_t)(c->rank0 + l);
  if (!ip) {
    *send = sbase(c, l);
    *recv = rbase(c, l);
    return;
  }
  char *base = rbase(c, l);
  *send = base + k->ip_send_step * rank * c->ts;
  *recv = base + k->ip_recv_step * rank * c->ts;
}

/* A group of the library's: started (start 1) or ended. */
static p2pkit_status_t group_edge(perf_ctx *c, perf_lib lib, int start) {
  if (lib == PERF_LIB_NCCL)
    return start ? p2pk_nccl_check(&c->nccl, c->nccl.GroupStart(), "ncclGroupStart")
                 : p2pk_nccl_check(&c->nccl, c->nccl.GroupEnd(), "ncclGroupEnd");
  return start ? p2pkit_group_start() : p2pkit_group_end();
}

/* Step `step` of one call on every local GPU: in one group when there are
 * several. */
static p2pkit_status_t launch_step(perf_ctx *c, perf_lib lib, const perf_counts *k, int ip,
                                   int step) {
  const perf_args *a = c->a;
  int grouped = c->nlocal > 1;
  p2pkit_status_t st = grouped ? group_edge(c, lib, 1) : P2PKIT_SUCCESS;
  if (st != P2PKIT_SUCCESS) return st;
  for (int l = 0; l < c->nlocal && st == P2PKIT_SUCCESS; l++) {
    perf_call call;
    buffers(c, l, k, ip, &call.send, &call.recv);
    call.param = k->param;
    call.dtype = c->v.dtype;
    call.op = c->v.op;
    call.nccl_op = c->nop[l];
    call.root = c->v.root;
    call.rank = c->rank0 + l;
    call.nranks = c->nranks;
    call.type_size = c->ts;
    call.stream = (p2pkit_stream_t)c->stream[l];
    call.step = step;
    if (grouped) st = set_device(c, l);
    if (st != P2PKIT_SUCCESS) break;
    if (lib == PERF_LIB_NCCL) {
      call.comm = c->ncomm[l];
      st = a->coll->nccl_call(&c->nccl, &call);
    } else {
      call.comm = c->pcomm[l];
      st = a->coll->p2pkit_call(&call);
    }
  }
  if (grouped) {
    p2pkit_status_t end = group_edge(c, lib, 0);
    if (st == P2PKIT_SUCCESS) st = end;
  }
  return st;
}

/* One call of the collective: its steps in turn (hypercube's depend on each
 * other, so no group holds two of them). */
static p2pkit_status_t launch(perf_ctx *c, perf_lib lib, const perf_counts *k, int ip) {
  const int steps = c->a->coll->steps(c->nranks);
  for (int s = 0; s < steps; s++) P2PK_CHECK(launch_step(c, lib, k, ip, s));
  return P2PKIT_SUCCESS;
}

/* One iteration: -m calls in one group (nccl-tests' agg_iters). */
static p2pkit_status_t iteration(perf_ctx *c, perf_lib lib, const perf_counts *k, int ip) {
  if (c->a->agg <= 1) return launch(c, lib, k, ip);
  P2PK_CHECK(group_edge(c, lib, 1));
  p2pkit_status_t st = P2PKIT_SUCCESS;
  for (int m = 0; m < c->a->agg && st == P2PKIT_SUCCESS; m++) st = launch(c, lib, k, ip);
  p2pkit_status_t end = group_edge(c, lib, 0);
  return st != P2PKIT_SUCCESS ? st : end;
}

static p2pkit_status_t sync_all(perf_ctx *c) {
  for (int l = 0; l < c->nlocal; l++) {
    P2PK_CHECK(set_device(c, l));
    P2PK_CUDA_CHECK(cudaStreamSynchronize(c->stream[l]));
  }
  return P2PKIT_SUCCESS;
}

/* -n calls captured into one graph per GPU. */
static p2pkit_status_t capture(perf_ctx *c, perf_lib lib, const perf_counts *k, int ip) {
  cudaGraph_t graph[MAXG];
  memset(graph, 0, sizeof graph);
  p2pkit_status_t st = P2PKIT_SUCCESS;
  int begun = 0;
  for (; begun < c->nlocal && st == P2PKIT_SUCCESS; begun++) {
    cudaSetDevice(c->dev[begun]);
    cudaError_t e = cudaStreamBeginCapture(c->stream[begun], cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess)
      st = p2pk_fail(P2PKIT_ERR_CUDA, "cudaStreamBeginCapture on GPU %d failed: %s",
                     c->dev[begun], cudaGetErrorString(e));
  }
  if (st != P2PKIT_SUCCESS) begun--; /* the one that failed never began */
  for (int it = 0; it < c->a->iters && st == P2PKIT_SUCCESS; it++) st = iteration(c, lib, k, ip);
  for (int l = 0; l < begun; l++) { /* end every capture, also after a failure */
    cudaSetDevice(c->dev[l]);
    cudaError_t e = cudaStreamEndCapture(c->stream[l], &graph[l]);
    if (e != cudaSuccess && st == P2PKIT_SUCCESS)
      st = p2pk_fail(P2PKIT_ERR_CUDA, "capturing %d calls in a CUDA graph on GPU %d failed: %s",
                     c->a->iters, c->dev[l], cudaGetErrorString(e));
  }
  for (int l = 0; l < c->nlocal; l++) {
    if (st == P2PKIT_SUCCESS) {
      cudaSetDevice(c->dev[l]);
      cudaError_t e = cudaGraphInstantiate(&c->gexec[l], graph[l], 0);
      if (e != cudaSuccess)
        st = p2pk_fail(P2PKIT_ERR_CUDA, "cudaGraphInstantiate on GPU %d failed: %s", c->dev[l],
                       cudaGetErrorString(e));
    }
    if (graph[l]) cudaGraphDestroy(graph[l]);
  }
  return st;
}

static void graphs_free(perf_ctx *c) {
  for (int l = 0; l < c->nlocal; l++)
    if (c->gexec[l]) {
      cudaGraphExecDestroy(c->gexec[l]);
      c->gexec[l] = NULL;
    }
}

static p2pkit_status_t graph_launch(perf_ctx *c) {
  for (int l = 0; l < c->nlocal; l++) {
    P2PK_CHECK(set_device(c, l));
    P2PK_CUDA_CHECK(cudaGraphLaunch(c->gexec[l], c->stream[l]));
  }
  return P2PKIT_SUCCESS;
}

/* An error a collective left behind on the device (a peer timed out, died
 * or called with other arguments): the run stops with it. */
static p2pkit_status_t async_errors(perf_ctx *c, perf_lib lib, const char *what) {
  for (int l = 0; l < c->nlocal; l++) {
    if (lib == PERF_LIB_P2PKIT) {
      p2pkit_status_t s = P2PKIT_SUCCESS;
      P2PK_CHECK(p2pkit_comm_get_async_error(c->pcomm[l], &s));
      if (s != P2PKIT_SUCCESS) {
        char detail[512];
        snprintf(detail, sizeof detail, "%s", p2pkit_last_error());
        return p2pk_fail(s, "%s: %s", what, detail[0] ? detail : p2pkit_strerror(s));
      }
    } else if (c->nccl.CommGetAsyncError) {
      p2pk_nccl_result r = P2PK_NCCL_SUCCESS;
      if (c->nccl.CommGetAsyncError(c->ncomm[l], &r) == P2PK_NCCL_SUCCESS &&
          r != P2PK_NCCL_SUCCESS && r != P2PK_NCCL_IN_PROGRESS)
        return p2pk_fail(P2PKIT_ERR_REMOTE, "%s: NCCL reports %s (rank %d)", what,
                         c->nccl.GetErrorString(r), c->rank0 + l);
    }
  }
  return P2PKIT_SUCCESS;
}

/* ---- data: fill, poison, check ------------------------------------------ */

static perf_gen make_gen(const perf_ctx *c, const perf_counts *k, uint32_t seed) {
  const perf_args *a = c->a;
  perf_gen g;
  g.coll = a->coll->id;
  g.dtype = c->v.dtype;
  g.op = a->coll->uses_op ? c->v.op : P2PKIT_SUM;
  g.nranks = c->nranks;
  g.root = a->coll->uses_root ? c->v.root : 0;
  g.seed = seed;
  g.param = k->param;
  return g;
}

/* Inputs of every local rank; with `poison`, the output region first gets
 * all bytes 0xFF, a value no correct result has. */
static p2pkit_status_t prepare(perf_ctx *c, const perf_counts *k, int ip, const perf_gen *g,
                               int poison) {
  for (int l = 0; l < c->nlocal; l++) {
    const void *send;
    void *recv;
    buffers(c, l, k, ip, &send, &recv);
    P2PK_CHECK(set_device(c, l));
    if (poison) {
      size_t elems = ip ? (k->send_elems > k->recv_elems ? k->send_elems : k->recv_elems)
                        : k->recv_elems;
      P2PK_CUDA_CHECK(cudaMemsetAsync(rbase(c, l), 0xFF, elems * c->ts, c->stream[l]));
    }
    P2PK_CUDA_CHECK(p2pk_perf_fill((void *)send, k->send_elems, g, c->rank0 + l, c->stream[l]));
  }
  return sync_all(c);
}

/* The first and last 64 elements, compared on the host: a cross-check of
 * the GPU check itself. */
static p2pkit_status_t spot_check(perf_ctx *c, int l, const void *recv, uint64_t n,
                                  const perf_gen *g, int64_t *bad) {
  enum { S = 64 };
  double head[S], tail[S]; /* room for S elements of up to 8 bytes */
  uint64_t nh = n < S ? n : S;
  uint64_t nt = n - nh < S ? n - nh : S;
  int rank = c->rank0 + l;
  P2PK_CUDA_CHECK(cudaMemcpyAsync(head, recv, nh * c->ts, cudaMemcpyDeviceToHost, c->stream[l]));
  if (nt)
    P2PK_CUDA_CHECK(cudaMemcpyAsync(tail, (const char *)recv + (n - nt) * c->ts, nt * c->ts,
                                    cudaMemcpyDeviceToHost, c->stream[l]));
  P2PK_CUDA_CHECK(cudaStreamSynchronize(c->stream[l]));
  *bad = 0;
  for (uint64_t i = 0; i < nh; i++) {
    double want = perf_expected(g, rank, i);
    *bad += perf_is_wrong(perf_load(head, g->dtype, i), want, perf_tolerance(g, want));
  }
  for (uint64_t i = 0; i < nt; i++) {
    double want = perf_expected(g, rank, n - nt + i);
    *bad += perf_is_wrong(perf_load(tail, g->dtype, i), want, perf_tolerance(g, want));
  }
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t verify(perf_ctx *c, const perf_counts *k, int ip, const perf_gen *g,
                              int64_t *wrong_p) {
  int64_t total = 0;
  for (int l = 0; l < c->nlocal; l++) {
    int rank = c->rank0 + l;
    if (!p2pk_perf_rank_has_output(c->a->coll, rank, c->v.root)) continue;
    const void *send;
    void *recv;
    buffers(c, l, k, ip, &send, &recv);
    P2PK_CHECK(set_device(c, l));
    unsigned long long h = 0;
    P2PK_CUDA_CHECK(cudaMemsetAsync(c->dwrong[l], 0, sizeof h, c->stream[l]));
    P2PK_CUDA_CHECK(p2pk_perf_check(recv, k->recv_elems, g, rank, c->dwrong[l], c->stream[l]));
    P2PK_CUDA_CHECK(cudaMemcpyAsync(&h, c->dwrong[l], sizeof h, cudaMemcpyDeviceToHost, c->stream[l]));
    P2PK_CUDA_CHECK(cudaStreamSynchronize(c->stream[l]));
    int64_t spot = 0;
    P2PK_CHECK(spot_check(c, l, recv, k->recv_elems, g, &spot));
    if (spot > (int64_t)h) {
      P2PK_WARN("perf: host spot check found %lld wrong values on rank %d where the GPU check "
                "found %llu", (long long)spot, rank, h);
      h = (unsigned long long)spot;
    }
    total += (int64_t)h;
  }
  *wrong_p = total;
  return P2PKIT_SUCCESS;
}

/* ---- one measurement ---------------------------------------------------- */

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

/* Process 0: per repeat the slowest process, then median, min, max. */
static double median_of(double *t, int n) {
  qsort(t, (size_t)n, sizeof t[0], cmp_double);
  return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

/* Process 0: per repeat the processes' times combined as -a says (the
 * slowest by default), then median, min, max; -C's host times the same. */
static void gather(perf_ctx *c, perf_stat *out) {
  int reps = c->a->repeats;
  double t[P2PK_PERF_MAX_REPEATS], th[P2PK_PERF_MAX_REPEATS], per[P2PK_PERF_MAX_RANKS];
  int64_t wrong = 0;
  for (int r = 0; r < reps; r++) {
    for (int q = 0; q < c->nprocs; q++) per[q] = c->sh->slot[q].t[r];
    t[r] = p2pk_perf_combine(per, c->nprocs, c->a->average);
    for (int q = 0; q < c->nprocs; q++) per[q] = c->sh->slot[q].th[r];
    th[r] = p2pk_perf_combine(per, c->nprocs, c->a->average);
  }
  for (int q = 0; q < c->nprocs; q++) {
    int64_t w = c->sh->slot[q].wrong;
    if (w < 0) wrong = -1;
    else if (wrong >= 0) wrong += w;
  }
  out->measured = 1;
  out->t_med = median_of(t, reps);
  out->t_min = t[0];
  out->t_max = t[reps - 1];
  out->t_cpu = median_of(th, reps);
  out->wrong = wrong;
}

/* The eager iterations of one timed region with -z's waits: 1 and 2 wait
 * for each iteration's calls, 1 and 3 then meet the other ranks. *busy_us:
 * the host's microseconds from each iteration's start to its end, not
 * counting the barriers (what -z 3 reports). */
static p2pkit_status_t eager_region(perf_ctx *c, perf_lib lib, const perf_counts *k, int ip,
                                    double *busy_us) {
  const perf_args *a = c->a;
  *busy_us = 0;
  for (int it = 0; it < a->iters; it++) {
    const uint64_t t0 = p2pk_now_ns();
    P2PK_CHECK(iteration(c, lib, k, ip));
    if (a->blocking) P2PK_CHECK(sync_all(c));
    *busy_us += (double)(p2pk_now_ns() - t0) / 1e3;
    if (a->blocking == 1 || a->blocking == 3) P2PK_CHECK(barrier(c));
  }
  return P2PKIT_SUCCESS;
}

/* The slowest local GPU's time from ev0 to ev1, milliseconds. */
static p2pkit_status_t gpu_ms(perf_ctx *c, double *worst) {
  *worst = 0;
  for (int l = 0; l < c->nlocal; l++) {
    float ms = 0;
    P2PK_CHECK(set_device(c, l));
    P2PK_CUDA_CHECK(cudaEventSynchronize(c->ev1[l]));
    P2PK_CUDA_CHECK(cudaEventElapsedTime(&ms, c->ev0[l], c->ev1[l]));
    if (ms > *worst) *worst = ms;
  }
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t record_all(perf_ctx *c, cudaEvent_t *ev) {
  for (int l = 0; l < c->nlocal; l++) {
    P2PK_CHECK(set_device(c, l));
    P2PK_CUDA_CHECK(cudaEventRecord(ev[l], c->stream[l]));
  }
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t timed(perf_ctx *c, perf_lib lib, const perf_counts *k, int ip,
                             const char *what) {
  const perf_args *a = c->a;
  const int calls = (a->graph ? a->iters * a->graph : a->iters) * a->agg;
  double *t = c->sh->slot[c->proc].t, *th = c->sh->slot[c->proc].th;
  for (int r = 0; r < a->repeats; r++) {
    phase(c, "%s: timing %d/%d", what, r + 1, a->repeats);
    P2PK_CHECK(barrier(c));
    P2PK_CHECK(record_all(c, c->ev0));
    double busy_us = 0, worst = 0;
    const uint64_t h0 = p2pk_now_ns();
    if (a->graph)
      for (int g = 0; g < a->graph; g++) P2PK_CHECK(graph_launch(c));
    else
      P2PK_CHECK(eager_region(c, lib, k, ip, &busy_us));
    const uint64_t h1 = p2pk_now_ns();
    P2PK_CHECK(record_all(c, c->ev1));
    P2PK_CHECK(gpu_ms(c, &worst));
    /* -z 3 reports the host's time without the barriers, as nccl-tests;
     * every other mode the GPU's (the waits of -z 1 and 2 inside it). */
    t[r] = a->blocking == 3 ? busy_us / calls : worst * 1000.0 / calls;
    th[r] = (double)(h1 - h0) / 1e3 / calls;
    /* P2PKIT_PERF_HOST_TIME=1: how long this process took to enqueue the
     * calls, beside what the GPU took (a call the host enqueues slower than
     * the GPU runs it is bound by the host). */
    if (p2pk_param_int("P2PKIT_PERF_HOST_TIME") > 0)
      fprintf(stderr, "# %s: process %d repeat %d: host %.2f us per call, GPU %.2f\n", what,
              c->proc, r, th[r], t[r]);
  }
  return P2PKIT_SUCCESS;
}

/* -c N: N calls, each on fresh data into a poisoned output, each checked;
 * the first with wrong values ends them (nccl-tests' check iterations). The
 * ranks agree on it: every one stops where any found one. */
static p2pkit_status_t checks(perf_ctx *c, perf_lib lib, const perf_counts *k, int ip,
                              uint32_t seed, const char *what, int64_t *wrong) {
  perf_gen g = make_gen(c, k, seed);
  for (int i = 0; i < c->a->check; i++) {
    phase(c, "%s: checking %d/%d", what, i + 1, c->a->check);
    g.seed = (seed ^ 0xA5A5A5A5u) + (uint32_t)i * 2654435761u; /* data the timed calls never saw */
    P2PK_CHECK(prepare(c, k, ip, &g, 1));
    P2PK_CHECK(barrier(c));
    P2PK_CHECK(launch(c, lib, k, ip));
    P2PK_CHECK(sync_all(c));
    P2PK_CHECK(async_errors(c, lib, what));
    P2PK_CHECK(verify(c, k, ip, &g, wrong));
    c->sh->slot[c->proc].wrong = *wrong;
    P2PK_CHECK(barrier(c));
    int64_t any = 0;
    for (int q = 0; q < c->nprocs; q++) any += c->sh->slot[q].wrong > 0;
    P2PK_CHECK(barrier(c)); /* everyone has read the others' before a slot changes */
    if (any) break;
  }
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t measure(perf_ctx *c, perf_lib lib, const perf_counts *k, int ip,
                               uint32_t seed, perf_stat *out) {
  const perf_args *a = c->a;
  char what[96];
  snprintf(what, sizeof what, "%s %s %zu B %s", lib == PERF_LIB_NCCL ? "NCCL" : "p2pkit",
           a->coll->name, k->bytes, ip ? "in-place" : "out-of-place");
  phase(c, "%s: warm-up", what);
  perf_gen g = make_gen(c, k, seed);
  P2PK_CHECK(prepare(c, k, ip, &g, 0));
  P2PK_CHECK(barrier(c));
  for (int w = 0; w < a->warmup; w++) P2PK_CHECK(iteration(c, lib, k, ip));
  p2pkit_status_t st = P2PKIT_SUCCESS;
  if (a->graph) {
    phase(c, "%s: capturing a CUDA graph", what);
    st = capture(c, lib, k, ip);
    if (st == P2PKIT_SUCCESS) st = graph_launch(c); /* upload and warm the graph */
  }
  if (st == P2PKIT_SUCCESS) st = sync_all(c);
  if (st == P2PKIT_SUCCESS) st = timed(c, lib, k, ip, what);
  graphs_free(c);
  P2PK_CHECK(st);
  P2PK_CHECK(async_errors(c, lib, what));

  int64_t wrong = -1;
  if (a->check) P2PK_CHECK(checks(c, lib, k, ip, seed, what, &wrong));
  c->sh->slot[c->proc].wrong = wrong;
  P2PK_CHECK(barrier(c));
  if (c->proc == 0) gather(c, out);
  return P2PKIT_SUCCESS;
}

/* ---- passes ------------------------------------------------------------- */

static uint32_t seed_of(int size, int ip, int lib, int pass) {
  return (uint32_t)(1u + (uint32_t)size * 7919u + (uint32_t)ip * 104729u +
                    (uint32_t)lib * 15485863u + (uint32_t)pass * 32452843u);
}

/* Before the first timing: 50 ms of work on every local GPU, so the first
 * size (timed first, with p2pkit ahead of NCCL) does not pay for clocks that
 * are still rising. */
static p2pkit_status_t warm_gpus(perf_ctx *c) {
  for (int l = 0; l < c->nlocal; l++) {
    int sms = 1;
    P2PK_CHECK(set_device(c, l));
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, c->dev[l]);
    P2PK_CUDA_CHECK(p2pk_perf_spin(50ull * 1000 * 1000, sms, c->stream[l]));
  }
  return sync_all(c);
}

/* ---- variants ----------------------------------------------------------- */

/* Which libraries run variant v (c->use), and in `why` the reason one that
 * was asked for does not ("" when both do). */
static void variant_libs(perf_ctx *c, const perf_variant *v, char *why, size_t len) {
  const perf_args *a = c->a;
  const int reduces = a->coll->uses_op;
  why[0] = '\0';
  c->use[PERF_LIB_P2PKIT] = p2pk_perf_uses_p2pkit(a) && p2pk_perf_p2pkit_runs(v);
  c->use[PERF_LIB_NCCL] = p2pk_perf_uses_nccl(a);
  if (c->use[PERF_LIB_P2PKIT] && p2pk_perf_via_nccl(v) && c->pcomm[0]->nccl_mode == P2PK_NCCL_OFF) {
    c->use[PERF_LIB_P2PKIT] = 0;
    snprintf(why, len, "p2pkit runs %s only on its NCCL path, which is off here (P2PKIT_NCCL=0, "
             "or NCCL cannot be loaded)", p2pk_perf_dtype_name(v->dtype));
  } else if (c->use[PERF_LIB_P2PKIT] && p2pk_perf_via_nccl(v)) {
    /* What p2pkit's NCCL path takes is what its calls check (fp8
     * reductions from sm_90, no fp8 avg, the NCCL version a type needs). */
    const p2pk_nccl_api *api = NULL;
    if (p2pk_nccl_shared(&api, NULL, 0) != P2PKIT_SUCCESS ||
        p2pk_dtype_check_nccl("p2pkit's NCCL path", v->dtype, reduces, v->op, api->version,
                              c->min_cc) != P2PKIT_SUCCESS) {
      c->use[PERF_LIB_P2PKIT] = 0;
      snprintf(why, len, "%s", p2pkit_last_error());
    }
  }
  if (c->use[PERF_LIB_NCCL]) {
    const int mulsum = v->op == PERF_OP_MULSUM;
    if (mulsum && !c->nccl.RedOpCreatePreMulSum) {
      c->use[PERF_LIB_NCCL] = 0;
      snprintf(why, len, "this NCCL (%s) has no ncclRedOpCreatePreMulSum (2.11 and later)", c->nccl.path);
    } else if (p2pk_dtype_check_nccl("NCCL", v->dtype, reduces, mulsum ? P2PKIT_SUM : v->op,
                                     c->nccl.version, c->min_cc) != P2PKIT_SUCCESS) {
      c->use[PERF_LIB_NCCL] = 0;
      snprintf(why, len, "%s", p2pkit_last_error());
    }
  }
  const int sums = v->op == P2PKIT_SUM || v->op == P2PKIT_AVG || v->op == PERF_OP_MULSUM;
  if (a->check && reduces && sums && !perf_sum_exact(v->dtype, v->op, c->nranks)) {
    c->use[PERF_LIB_P2PKIT] = c->use[PERF_LIB_NCCL] = 0;
    snprintf(why, len, "sums of %d ranks are not exact in %s (its integers are exact only up to "
             "%.0f), so they cannot be checked; -c 0 times them unchecked", c->nranks,
             p2pk_perf_dtype_name(v->dtype), perf_exact_limit(v->dtype));
  }
}

/* NCCL's operation for v on each local GPU; mulsum: a pre-multiplied sum
 * with this rank's factor, made for the variant and destroyed after it. */
static p2pkit_status_t variant_ops(perf_ctx *c) {
  for (int l = 0; l < c->nlocal; l++) c->nop[l] = c->a->coll->uses_op ? p2pk_nccl_op(c->v.op) : 0;
  if (!c->use[PERF_LIB_NCCL] || c->v.op != PERF_OP_MULSUM || !c->a->coll->uses_op)
    return P2PKIT_SUCCESS;
  for (int l = 0; l < c->nlocal; l++) {
    uint64_t scalar = 0; /* the factor in the type's own bits */
    perf_store(&scalar, c->v.dtype, 0, perf_premul(c->rank0 + l));
    P2PK_CHECK(set_device(c, l));
    P2PK_CHECK(p2pk_nccl_check(&c->nccl, c->nccl.RedOpCreatePreMulSum(&c->nop[l], &scalar,
                                                                       p2pk_nccl_dtype(c->v.dtype),
                                                                       P2PK_NCCL_SCALAR_HOST,
                                                                       c->ncomm[l]),
                               "ncclRedOpCreatePreMulSum"));
    c->have_nop = l + 1;
  }
  return P2PKIT_SUCCESS;
}

static void variant_ops_free(perf_ctx *c) {
  for (int l = 0; l < c->have_nop; l++) c->nccl.RedOpDestroy(c->nop[l], c->ncomm[l]);
  c->have_nop = 0;
}

/* Every variant is one combination of -d, -o and -r; one named alone that
 * no library can run is the caller's error, one of an "all" list is left
 * out with a comment line. */
static int explicit_variant(const perf_args *a) {
  return a->ndtypes == 1 && (!a->coll->uses_op || a->nops == 1) && (!a->coll->uses_root || a->root >= 0);
}

/* ---- rows and passes ---------------------------------------------------- */

static void print_row(perf_ctx *c, const perf_row *row) {
  if (!c->table) return;
  progress_clear(c);
  p2pk_perf_print_row(c->table, c->rep, row);
  fflush(c->table);
}

/* One size of the variant in c->v: each library, out of place and in place. */
static p2pkit_status_t run_size(perf_ctx *c, int pass, int s, int cycle, uint32_t rowno) {
  const perf_args *a = c->a;
  perf_row row;
  memset(&row, 0, sizeof row);
  p2pk_perf_counts(a->coll, c->sizes[s], c->ts, c->nranks, &row.k);
  row.v = c->v;
  row.cycle = cycle;
  row.algo = row.proto = -1;
  if (c->use[PERF_LIB_P2PKIT] && a->coll->id == PERF_ALL_REDUCE && !p2pk_perf_via_nccl(&c->v)) {
    p2pk_algo_choice ch; /* deterministic: every rank makes the same choice */
    p2pk_comm_choose(c->pcomm[0], row.k.bytes, &ch);
    row.algo = ch.algo;
    row.proto = ch.proto;
  }
  for (int lib = 0; lib < PERF_LIB_COUNT; lib++) {
    if (!c->use[lib]) continue;
    for (int ip = 0; ip < (a->coll->has_inplace ? 2 : 1); ip++)
      P2PK_CHECK(measure(c, (perf_lib)lib, &row.k, ip, seed_of((int)rowno, ip, lib, pass),
                         &row.st[lib][ip]));
  }
  row.when = (long long)time(NULL);
  perf_pass *p = c->rep ? &c->rep->passes[pass] : NULL;
  if (!p) return P2PKIT_SUCCESS;
  if (p->nrows < P2PK_PERF_MAX_ROWS) p->rows[p->nrows++] = row; /* -N 0 reuses them (run_variant) */
  print_row(c, &row);
  return P2PKIT_SUCCESS;
}

/* Variant i: its libraries, its operations, its cycles over every size. */
static p2pkit_status_t run_variant(perf_ctx *c, int pass, int i, uint32_t *rowno) {
  const perf_args *a = c->a;
  char why[512];
  c->v = c->var[i];
  c->ts = p2pkit_dtype_size(c->v.dtype);
  variant_libs(c, &c->v, why, sizeof why);
  if (!c->use[PERF_LIB_P2PKIT] && !c->use[PERF_LIB_NCCL] && explicit_variant(a))
    return usage_fail(c, P2PKIT_ERR_UNSUPPORTED, "%s", why);
  if (c->table) {
    progress_clear(c);
    p2pk_perf_print_variant_note(c->table, c->rep, &c->v, why[0] ? why : NULL);
  }
  if (!c->use[PERF_LIB_P2PKIT] && !c->use[PERF_LIB_NCCL]) return P2PKIT_SUCCESS;
  p2pkit_status_t st = variant_ops(c);
  perf_pass *p = c->rep ? &c->rep->passes[pass] : NULL;
  const int first = p ? p->nrows : 0;
  for (int cyc = 0; st == P2PKIT_SUCCESS && (a->cycles == 0 || cyc < a->cycles); cyc++) {
    if (p && a->cycles == 0) p->nrows = first; /* until killed: only the last cycle kept */
    for (int s = 0; s < c->nsizes && st == P2PKIT_SUCCESS; s++) st = run_size(c, pass, s, cyc, (*rowno)++);
  }
  variant_ops_free(c);
  return st;
}

static p2pkit_status_t run_pass(perf_ctx *c, int pass) {
  const perf_args *a = c->a;
  if (p2pk_perf_uses_p2pkit(a)) P2PK_CHECK(p2pkit_init(c, pass));
  if (pass == 0) {
    phase(c, "warming the GPUs up");
    P2PK_CHECK(warm_gpus(c));
  }
  perf_pass *p = c->rep ? &c->rep->passes[pass] : NULL;
  if (p) {
    snprintf(p->algo, sizeof p->algo, "%s", p2pk_perf_uses_p2pkit(a) ? pass_algo(a, pass) : "");
    if (c->table) {
      progress_clear(c);
      p2pk_perf_print_header(c->table, c->rep, p);
      fflush(c->table);
    }
  }
  uint32_t rowno = 0;
  for (int i = 0; i < c->nvar; i++) P2PK_CHECK(run_variant(c, pass, i, &rowno));
  if (p && c->table) {
    progress_clear(c);
    p2pk_perf_print_footer(c->table, c->rep, p);
    fflush(c->table);
  }
  if (p) c->wrong_total += p2pk_perf_pass_wrong(p);
  phase(c, "p2pkit: destroying the communicator");
  return p2pkit_fini(c);
}

/* ---- output files ------------------------------------------------------- */

/* A file that cannot be written is exit 1, as in every command (docs/cli.md). */
static p2pkit_status_t open_output(perf_ctx *c, const char *path, p2pk_outfile *o) {
  (void)c;
  if (p2pk_outfile_open(o, path) != 0)
    return p2pk_fail(P2PKIT_ERR_IO, "cannot write %s: %s", path, strerror(errno));
  return P2PKIT_SUCCESS;
}

/* Process 0, before NCCL and any GPU: a path that cannot be written fails in
 * a second, not after a sweep of minutes whose results would then be lost.
 * Only process 0 writes them, so only it opens (and truncates) them. */
static p2pkit_status_t open_outputs(perf_ctx *c) {
  const perf_args *a = c->a;
  if (a->algo_table) P2PK_CHECK(open_output(c, a->algo_table, &c->algo_out));
  if (a->json_file) P2PK_CHECK(open_output(c, a->json_file, &c->json_out));
  if (p2pk_outfile_same(&c->algo_out, &c->json_out)) {
    c->json_out.created = 0; /* the same file as --algo-table's: removed once */
    return usage_fail(c, P2PKIT_ERR_INVALID_ARGUMENT,
                      "--algo-table %s and --json-file %s name the same file", a->algo_table,
                      a->json_file);
  }
  return P2PKIT_SUCCESS;
}

/* Closes what is still open; a file created for a run that wrote nothing
 * into it is removed, so a failure leaves no empty report behind. */
static void close_outputs(perf_ctx *c) {
  p2pk_outfile_close(&c->algo_out, 1);
  p2pk_outfile_close(&c->json_out, 1);
}

static p2pkit_status_t write_file(p2pk_outfile *o, const char *path, const perf_report *r,
                                  void (*fn)(FILE *, const perf_report *)) {
  FILE *f = p2pk_outfile_take(o);
  fn(f, r);
  if (fclose(f) != 0) return p2pk_fail(P2PKIT_ERR_IO, "writing %s failed: %s", path, strerror(errno));
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t write_table(p2pk_outfile *o, const char *path, const perf_report *r) {
  FILE *f = p2pk_outfile_take(o);
  p2pkit_status_t st = p2pk_perf_write_algo_table(f, r);
  if (fclose(f) != 0 && st == P2PKIT_SUCCESS)
    st = p2pk_fail(P2PKIT_ERR_IO, "writing %s failed: %s", path, strerror(errno));
  return st;
}

static p2pkit_status_t outputs(perf_ctx *c) {
  const perf_args *a = c->a;
  if (c->proc != 0) return P2PKIT_SUCCESS;
  progress_clear(c);
  if (a->nalgos && c->table) p2pk_perf_print_winners(c->table, c->rep);
  if (c->algo_out.f) P2PK_CHECK(write_table(&c->algo_out, a->algo_table, c->rep));
  if (a->json) p2pk_perf_write_json(stdout, c->rep);
  if (c->json_out.f) P2PK_CHECK(write_file(&c->json_out, a->json_file, c->rep, p2pk_perf_write_json));
  fflush(stdout);
  return P2PKIT_SUCCESS;
}

/* --explain: the communicator, then (process 0) its selector and its
 * decision for the collective at each size; nothing measured. */
static p2pkit_status_t explain(perf_ctx *c) {
  P2PK_CHECK(p2pkit_init(c, 0));
  if (c->proc == 0) {
    size_t bytes[P2PK_PERF_MAX_SIZES];
    c->nsizes = p2pk_perf_sizes(c->a, c->sizes, P2PK_PERF_MAX_SIZES);
    for (int s = 0; s < c->nsizes; s++) {
      perf_counts k;
      p2pk_perf_counts(c->a->coll, c->sizes[s], c->ts, c->nranks, &k);
      bytes[s] = k.param * c->ts;
    }
    progress_clear(c);
    p2pk_comm_explain(c->pcomm[0], c->a->coll->name, bytes, c->nsizes, c->a->graph > 0, stdout);
    fflush(stdout);
  }
  return p2pkit_fini(c);
}

static p2pkit_status_t run(perf_ctx *c) {
  const perf_args *a = c->a;
  if (c->proc == 0) P2PK_CHECK(open_outputs(c));
  /* -p: the others wait until process 0 has its files, so a bad path stops
   * the run before any process loads NCCL or touches a GPU. */
  p2pkit_status_t gate = barrier(c);
  if (gate == P2PKIT_ERR_REMOTE && c->proc != 0 && atomic_load(&c->sh->slot[0].error_ms))
    c->gave_way = 1;
  P2PK_CHECK(gate);
  if (p2pk_perf_uses_nccl(a)) {
    phase(c, "loading NCCL");
    p2pkit_status_t st = p2pk_nccl_load(&c->nccl, NULL);
    if (st != P2PKIT_SUCCESS) {
      c->usage = 1;
      return st;
    }
  }
  phase(c, "finding GPUs");
  P2PK_CHECK(find_gpus(c));
  if (a->explain) return explain(c);
  phase(c, "allocating buffers");
  P2PK_CHECK(alloc(c));
  P2PK_CHECK(describe(c));
  if (p2pk_perf_uses_nccl(a)) P2PK_CHECK(nccl_init(c));
  int npasses = a->nalgos ? a->nalgos : 1;
  for (int pass = 0; pass < npasses; pass++) P2PK_CHECK(run_pass(c, pass));
  P2PK_CHECK(outputs(c));
  phase(c, "cleaning up");
  nccl_fini(c);
  return P2PKIT_SUCCESS;
}

/* Device resources; only after success (after a failure a peer may still be
 * waiting inside a kernel, and freeing would block: the exit cleans up). */
static void release(perf_ctx *c) {
  for (int l = 0; l < c->nlocal; l++) {
    if (cudaSetDevice(c->dev[l]) != cudaSuccess) continue;
    if (c->sbuf[l]) cudaFree(c->sbuf[l]);
    if (c->rbuf[l]) cudaFree(c->rbuf[l]);
    if (c->dwrong[l]) cudaFree(c->dwrong[l]);
    if (c->ev0[l]) cudaEventDestroy(c->ev0[l]);
    if (c->ev1[l]) cudaEventDestroy(c->ev1[l]);
    if (c->stream[l]) cudaStreamDestroy(c->stream[l]);
  }
}

static void report_free(perf_report *r) {
  if (!r) return;
  free(r->passes);
  free(r);
}

int p2pk_perf_run(const perf_args *a, perf_shared *sh, int proc, int nprocs) {
  perf_ctx *c = calloc(1, sizeof *c);
  if (!c) {
    fprintf(stderr, "p2pkit perf: error: out of host memory\n");
    return P2PK_PERF_EXIT_FAIL;
  }
  c->a = a;
  c->sh = sh;
  c->proc = proc;
  c->nprocs = nprocs;
  c->child = a->nprocs > 0;
  c->timeout_s = (int)p2pk_param_int("P2PKIT_TIMEOUT");
  c->ts = p2pkit_dtype_size(a->dtype);
  c->tty = proc == 0 && isatty(STDERR_FILENO);
  if (p2pk_param_is_set("P2PKIT_PROTO"))
    snprintf(c->proto_env, sizeof c->proto_env, "=%s", p2pk_param_str("P2PKIT_PROTO"));
  p2pk_perf_heartbeat(sh, proc, "starting");
  perf_watchdog *wd = p2pk_perf_watchdog_start(sh, proc, c->timeout_s, !c->child);

  p2pkit_status_t st = run(c);
  close_outputs(c); /* still open: nothing was written */
  int code = P2PK_PERF_EXIT_OK;
  if (c->gave_way) {
    /* Process 0 failed before anyone started and its error is the cause;
     * exiting quietly keeps the parent from reporting this process's "another
     * rank failed" instead, should it notice this exit first. */
  } else if (st != P2PKIT_SUCCESS) {
    const char *detail = p2pkit_last_error();
    code = c->usage ? P2PK_PERF_EXIT_USAGE : P2PK_PERF_EXIT_FAIL;
    progress_clear(c);
    if (c->child) {
      p2pk_perf_set_error(sh, proc, code, "%s", detail[0] ? detail : p2pkit_strerror(st));
      atomic_store(&sh->abort, 1);
    } else {
      fprintf(stderr, "p2pkit perf: error: %s\n", detail[0] ? detail : p2pkit_strerror(st));
    }
  } else {
    release(c);
    if (c->wrong_total > 0) {
      code = P2PK_PERF_EXIT_FAIL;
      if (c->child)
        p2pk_perf_set_error(sh, proc, code, "%lld wrong values (see the #wrong columns)",
                            (long long)c->wrong_total);
      else
        fprintf(stderr, "p2pkit perf: error: %lld wrong values (see the #wrong columns)\n",
                (long long)c->wrong_total);
    }
  }
  p2pk_perf_watchdog_stop(wd);
  report_free(c->rep);
  free(c->var);
  free(c);
  return code;
}
