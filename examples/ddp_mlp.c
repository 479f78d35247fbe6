/* SPDX-License-Identifier: BSD-3-Clause */
/* ddp_mlp: data-parallel training of a multi-layer perceptron (cuBLAS SGEMM,
 * float32) over the GPUs of one machine, one process per GPU, with p2pkit's
 * gradient sync (p2pkit_grad_sync_*) and, for comparison, NCCL with the same
 * buckets (issue 7).
 *
 *   model    `--layers` Linear layers width x width (+ReLU but the last),
 *            deterministic init from `--seed`, identical on every rank
 *   data     inputs uniform in [-1,1) from (seed, step, global sample index);
 *            targets from a fixed random teacher y = T2 tanh(T1 x) (rank 64);
 *            rank r takes samples r*B .. r*B+B-1 of the step's global batch
 *   loss     MSE (mean over samples and outputs), plain SGD (`--lr`)
 *   sync     every gradient registered with buf NULL (a view into its bucket:
 *            backward's GEMMs write straight into the buckets), marked ready as
 *            backward produces it (last layer first), so buckets are averaged
 *            while the earlier layers' backward still runs; wait() before SGD.
 *            NCCL: the same bucket plan (src/ddp/plan.c), ncclAllReduce(AVG) of
 *            each complete bucket on a communication stream after an event.
 *   checks   every `--check-every` steps: bitwise MAX and MIN of the parameter
 *            words over the ranks (int32 all-reduces) must be equal, else exit 1
 *            naming the step. Rank 0 trains a single-GPU reference on the
 *            combined batch (N*B samples) and compares the loss per step within
 *            `--tol` (relative, default 1e-4): both compute the same mean
 *            gradient, summed in another order (B-column GEMMs averaged over
 *            ranks vs one N*B-column GEMM), so they differ by float32 rounding
 *            (~1e-6 relative) that a small learning rate keeps from growing
 *            over tens of steps; a real fault (a bucket not averaged, a sum
 *            instead of an average, a stale gradient) is off by far more.
 *   timing   CUDA events per step: compute = forward+backward (compute stream),
 *            communication = bucket 0 ready .. last bucket done (comm stream),
 *            exposed = backward end .. wait() done; plus "all-reduce alone":
 *            the step's buckets all-reduced back to back with nothing else
 *            running. Median over the steps after `--warmup`, max over ranks.
 *
 * Launch: `ddp_mlp` (one process per visible GPU, forked here), `ddp_mlp -p N`,
 * or under torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT set
 * and no -p). Exit 0 ok, 1 failure (a check or a call), 2 usage or no GPU.
 *
 * Examples (from the repo root; NCCL from the system or
 * P2PKIT_NCCL_LIB=/path/libnccl.so.2):
 *   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j16 --target ddp_mlp
 *   build/examples/ddp_mlp -p 2 --steps 10 --width 512 --layers 4 --backend p2pkit
 *   build/examples/ddp_mlp --backend both
 *   build/examples/ddp_mlp --backend both --width 4096 --layers 8 --batch 512
 *   torchrun --nproc-per-node 2 build/examples/ddp_mlp --backend both --steps 10
 */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/param.h"
#include "ddp/plan.h"
#include "ddp_mlp_kernels.h"
#include "nccl/nccl_dl.h"
#include "p2pkit.h"
#include "perf/perf_proc.h"

#define MAX_LAYERS 64
#define TEACHER_RANK 64
#define EXIT_FAIL 1
#define EXIT_USAGE 2

enum { BK_P2PKIT = 0, BK_NCCL = 1, BK_COUNT = 2 };
static const char *const bk_name[BK_COUNT] = {"p2pkit", "nccl"};

typedef struct {
  int nprocs;        /* -p; 0: not given */
  int use[BK_COUNT]; /* --backend */
  int steps, warmup, batch, layers, width, check_every;
  double lr, tol;
  uint64_t seed;
  size_t bucket_bytes, first_bucket_bytes;
} args_t;

/* ---- errors -------------------------------------------------------------- */

static char g_err[640];
static int g_rank = -1;

static int fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int code, const char *fmt, ...) {
  if (!g_err[0]) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
  }
  return code;
}

#define TRY(call)            \
  do {                       \
    int r_ = (call);         \
    if (r_ != 0) return r_;  \
  } while (0)
#define CU(call)                                                                          \
  do {                                                                                    \
    cudaError_t e_ = (call);                                                              \
    if (e_ != cudaSuccess)                                                                \
      return fail(EXIT_FAIL, "%s: %s (line %d)", #call, cudaGetErrorString(e_), __LINE__); \
  } while (0)
#define CB(call)                                                                              \
  do {                                                                                        \
    cublasStatus_t b_ = (call);                                                               \
    if (b_ != CUBLAS_STATUS_SUCCESS)                                                          \
      return fail(EXIT_FAIL, "%s: %s (line %d)", #call, cublasGetStatusString(b_), __LINE__); \
  } while (0)
#define PK(call)                                                                           \
  do {                                                                                     \
    p2pkit_status_t s_ = (call);                                                           \
    if (s_ != P2PKIT_SUCCESS)                                                              \
      return fail(EXIT_FAIL, "%s: %s: %s", #call, p2pkit_strerror(s_), p2pkit_last_error()); \
  } while (0)

/* ---- the process's context --------------------------------------------- */

typedef struct {
  const args_t *a;
  perf_shared *sh; /* -p: the region shared with the parent; NULL under torchrun */
  int rank, nranks, device;
  p2pkit_comm_t pcomm;
  p2pk_nccl_api nccl;
  p2pk_nccl_comm_t ncomm;
  int have_nccl;
} ctx_t;

static void progress(ctx_t *c, const char *what, int step) {
  if (c->sh) p2pk_perf_heartbeat(c->sh, c->rank, "%s, step %d", what, step);
}

/* ---- the model ------------------------------------------------------------ */

typedef struct {
  int L, w, B;
  size_t nparam;
  float *params;  /* W0 b0 W1 b1 ... */
  float *W[MAX_LAYERS], *b[MAX_LAYERS], *dW[MAX_LAYERS], *db[MAX_LAYERS];
  float *own_grads; /* reference: its gradients (no sync) */
  float *act[MAX_LAYERS + 1]; /* act[0] the input, act[l+1] layer l's output */
  float *target, *g0, *g1;    /* targets; gradients of activations (ping-pong) */
  float *t1, *t2;             /* the teacher */
  double *loss;               /* [steps] */
  cublasHandle_t blas;
  cudaStream_t stream;
} model_t;

static size_t wcount(const model_t *m) { return (size_t)m->w * m->w; }

static int model_create(model_t *m, const args_t *a, int batch, int own_grads) {
  memset(m, 0, sizeof *m);
  m->L = a->layers;
  m->w = a->width;
  m->B = batch;
  m->nparam = (size_t)m->L * (wcount(m) + (size_t)m->w);
  size_t act = (size_t)m->w * m->B;
  CU(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking));
  CB(cublasCreate(&m->blas));
  CB(cublasSetStream(m->blas, m->stream));
  CB(cublasSetMathMode(m->blas, CUBLAS_DEFAULT_MATH)); /* float32 FMA, no TF32 */
  CU(cudaMalloc((void **)&m->params, m->nparam * sizeof(float)));
  float *p = m->params;
  for (int l = 0; l < m->L; l++) {
    m->W[l] = p;
    p += wcount(m);
    m->b[l] = p;
    p += m->w;
  }
  if (own_grads) {
    CU(cudaMalloc((void **)&m->own_grads, m->nparam * sizeof(float)));
    float *g = m->own_grads;
    for (int l = 0; l < m->L; l++) {
      m->dW[l] = g;
      g += wcount(m);
      m->db[l] = g;
      g += m->w;
    }
  }
  for (int l = 0; l <= m->L; l++) CU(cudaMalloc((void **)&m->act[l], act * sizeof(float)));
  CU(cudaMalloc((void **)&m->target, act * sizeof(float)));
  CU(cudaMalloc((void **)&m->g0, act * sizeof(float)));
  CU(cudaMalloc((void **)&m->g1, act * sizeof(float)));
  CU(cudaMalloc((void **)&m->t1, (size_t)TEACHER_RANK * m->w * sizeof(float)));
  CU(cudaMalloc((void **)&m->t2, (size_t)TEACHER_RANK * m->w * sizeof(float)));
  CU(cudaMalloc((void **)&m->loss, (size_t)a->steps * sizeof(double)));
  CU(cudaMemsetAsync(m->loss, 0, (size_t)a->steps * sizeof(double), m->stream));
  /* He-uniform for the ReLU layers, variance 1/width for the last; biases 0. */
  for (int l = 0; l < m->L; l++) {
    float scale = (float)sqrt((l < m->L - 1 ? 6.0 : 3.0) / m->w);
    CU(mlp_init_uniform(m->W[l], wcount(m), a->seed, 100 + (uint64_t)l, scale, m->stream));
    CU(cudaMemsetAsync(m->b[l], 0, (size_t)m->w * sizeof(float), m->stream));
  }
  CU(mlp_init_uniform(m->t1, (size_t)TEACHER_RANK * m->w, a->seed, 1, (float)sqrt(3.0 / m->w),
                      m->stream));
  CU(mlp_init_uniform(m->t2, (size_t)TEACHER_RANK * m->w, a->seed, 2,
                      (float)sqrt(3.0 / TEACHER_RANK), m->stream));
  CU(cudaStreamSynchronize(m->stream));
  return 0;
}

static void model_destroy(model_t *m) {
  if (m->stream) cudaStreamSynchronize(m->stream);
  cudaFree(m->params);
  cudaFree(m->own_grads);
  for (int l = 0; l <= m->L && l <= MAX_LAYERS; l++) cudaFree(m->act[l]);
  cudaFree(m->target);
  cudaFree(m->g0);
  cudaFree(m->g1);
  cudaFree(m->t1);
  cudaFree(m->t2);
  cudaFree(m->loss);
  if (m->blas) cublasDestroy(m->blas);
  if (m->stream) cudaStreamDestroy(m->stream);
  memset(m, 0, sizeof *m);
}

/* This step's inputs and targets: samples first .. first+B-1. */
static int model_data(model_t *m, const args_t *a, int step, uint64_t first) {
  CU(mlp_gen_inputs(m->act[0], m->w, m->B, first, (uint64_t)step, a->seed, m->stream));
  CU(mlp_teacher(m->act[0], m->t1, m->t2, m->target, m->w, TEACHER_RANK, m->B, m->stream));
  return 0;
}

static int model_forward(model_t *m, int step) {
  const float one = 1.f, zero = 0.f;
  for (int l = 0; l < m->L; l++) {
    CB(cublasSgemm(m->blas, CUBLAS_OP_N, CUBLAS_OP_N, m->w, m->B, m->w, &one, m->W[l], m->w,
                   m->act[l], m->w, &zero, m->act[l + 1], m->w));
    CU(mlp_bias_act(m->act[l + 1], m->b[l], m->w, m->B, l < m->L - 1, m->stream));
  }
  CU(mlp_mse(m->act[m->L], m->target, m->g0, &m->loss[step], m->w, m->B, m->stream));
  return 0;
}

/* Called when gradient `index` (2l: W_l, 2l+1: b_l) is complete on m->stream. */
typedef int (*ready_fn)(void *arg, model_t *m, size_t index, const float *grad);

static int model_backward(model_t *m, ready_fn ready, void *arg) {
  const float one = 1.f, zero = 0.f;
  float *g = m->g0, *gp = m->g1;
  for (int l = m->L - 1; l >= 0; l--) {
    CU(mlp_bias_grad(g, m->db[l], m->w, m->B, m->stream));
    if (ready) TRY(ready(arg, m, 2 * (size_t)l + 1, m->db[l]));
    CB(cublasSgemm(m->blas, CUBLAS_OP_N, CUBLAS_OP_T, m->w, m->w, m->B, &one, g, m->w, m->act[l],
                   m->w, &zero, m->dW[l], m->w));
    if (ready) TRY(ready(arg, m, 2 * (size_t)l, m->dW[l]));
    if (l > 0) {
      CB(cublasSgemm(m->blas, CUBLAS_OP_T, CUBLAS_OP_N, m->w, m->B, m->w, &one, m->W[l], m->w, g,
                     m->w, &zero, gp, m->w));
      CU(mlp_relu_bwd(gp, m->act[l], (size_t)m->w * m->B, m->stream));
      float *t = g;
      g = gp;
      gp = t;
    }
  }
  return 0;
}

static int model_sgd(model_t *m, float lr) {
  for (int l = 0; l < m->L; l++) {
    CU(mlp_sgd(m->W[l], m->dW[l], wcount(m), lr, m->stream));
    CU(mlp_sgd(m->b[l], m->db[l], (size_t)m->w, lr, m->stream));
  }
  return 0;
}

/* ---- gradient sync: p2pkit or NCCL with the same buckets ---------------- */

typedef struct {
  ctx_t *c;
  int bk;
  p2pk_ddp_plan plan; /* NCCL: the plan; p2pkit: a mirror of grad_sync's (which mark launches bucket 0) */
  int have_plan;
  char *arena;        /* bucket memory (NCCL: ours; p2pkit: grad_sync's) */
  int own_arena;
  void *nreg;
  p2pkit_grad_sync_t gs;
  cudaStream_t comm;
  cudaEvent_t ev_ready, ev_done;     /* NCCL: compute -> comm, comm -> compute */
  cudaEvent_t ev_comm0, ev_comm_end; /* timing: bucket 0 ready (compute), last bucket done (comm) */
} gsync_t;

static int nccl_ok(ctx_t *c, p2pk_nccl_result r, const char *what) {
  PK(p2pk_nccl_check(&c->nccl, r, what));
  return 0;
}

/* An all-reduce on the backend under test (checks and bookkeeping). */
static int xreduce(gsync_t *s, const void *send, void *recv, size_t count, p2pkit_dtype_t dt,
                   p2pkit_redop_t op, cudaStream_t st) {
  if (s->bk == BK_P2PKIT)
    PK(p2pkit_all_reduce(send, recv, count, dt, op, s->c->pcomm, (p2pkit_stream_t)st));
  else
    TRY(nccl_ok(s->c, s->c->nccl.AllReduce(send, recv, count, p2pk_nccl_dtype(dt), p2pk_nccl_op(op),
                                           s->c->ncomm, (p2pkit_stream_t)st),
                "ncclAllReduce"));
  return 0;
}

static int bucket_reduce(gsync_t *s, size_t b) {
  const p2pk_ddp_bucket *bk = &s->plan.buckets[b];
  return xreduce(s, s->arena + bk->offset, s->arena + bk->offset, bk->count, bk->dtype, P2PKIT_AVG,
                 s->comm);
}

static int gsync_create(gsync_t *s, ctx_t *c, int bk, model_t *m) {
  const args_t *a = c->a;
  memset(s, 0, sizeof *s);
  s->c = c;
  s->bk = bk;
  CU(cudaStreamCreateWithFlags(&s->comm, cudaStreamNonBlocking));
  CU(cudaEventCreateWithFlags(&s->ev_ready, cudaEventDisableTiming));
  CU(cudaEventCreateWithFlags(&s->ev_done, cudaEventDisableTiming));
  CU(cudaEventCreate(&s->ev_comm0));
  CU(cudaEventCreate(&s->ev_comm_end));
  p2pk_ddp_plan_init(&s->plan, a->bucket_bytes, a->first_bucket_bytes);
  s->have_plan = 1;
  for (int l = 0; l < m->L; l++) {
    PK(p2pk_ddp_plan_add(&s->plan, NULL, wcount(m), P2PKIT_FLOAT32));
    PK(p2pk_ddp_plan_add(&s->plan, NULL, (size_t)m->w, P2PKIT_FLOAT32));
  }
  PK(p2pk_ddp_plan_layout(&s->plan));
  if (bk == BK_P2PKIT) {
    p2pkit_grad_sync_opts_t o;
    p2pkit_grad_sync_opts_init(&o);
    o.bucket_bytes = a->bucket_bytes;
    o.first_bucket_bytes = a->first_bucket_bytes;
    o.comm_stream = (p2pkit_stream_t)s->comm;
    PK(p2pkit_grad_sync_create(c->pcomm, &o, &s->gs));
    for (int l = 0; l < m->L; l++) {
      PK(p2pkit_grad_sync_register(s->gs, NULL, wcount(m), P2PKIT_FLOAT32));
      PK(p2pkit_grad_sync_register(s->gs, NULL, (size_t)m->w, P2PKIT_FLOAT32));
    }
    PK(p2pkit_grad_sync_build(s->gs));
    /* The mirror must be grad_sync's layout exactly: same buckets, and every
     * view where the mirror puts it relative to gradient 0's. */
    size_t nb = 0;
    PK(p2pkit_grad_sync_bucket_count(s->gs, &nb));
    if (nb != s->plan.nbuckets)
      return fail(EXIT_FAIL, "grad_sync has %zu buckets, the mirror plan %zu", nb, s->plan.nbuckets);
    for (size_t b = 0; b < nb; b++) {
      size_t bytes = 0, ng = 0;
      PK(p2pkit_grad_sync_bucket_info(s->gs, b, &bytes, &ng));
      if (bytes != s->plan.buckets[b].bytes || ng != s->plan.buckets[b].n)
        return fail(EXIT_FAIL, "grad_sync's bucket %zu (%zu bytes, %zu gradients) is not the mirror "
                    "plan's (%zu, %zu)", b, bytes, ng, s->plan.buckets[b].bytes, s->plan.buckets[b].n);
    }
    void *g0 = NULL;
    PK(p2pkit_grad_sync_grad(s->gs, 0, &g0));
    const p2pk_ddp_grad *d0 = &s->plan.grads[0];
    s->arena = (char *)g0 - (s->plan.buckets[d0->bucket].offset + d0->offset);
    PK(p2pk_ddp_plan_bind(&s->plan, (uintptr_t)s->arena));
    for (size_t i = 0; i < s->plan.ngrads; i++) {
      void *gi = NULL;
      PK(p2pkit_grad_sync_grad(s->gs, i, &gi));
      if ((uintptr_t)gi != s->plan.grads[i].addr)
        return fail(EXIT_FAIL, "gradient %zu: grad_sync's view %p, the mirror plan's %p", i, gi,
                    (void *)s->plan.grads[i].addr);
    }
  } else {
    CU(cudaMalloc((void **)&s->arena, s->plan.arena_bytes));
    s->own_arena = 1;
    CU(cudaMemset(s->arena, 0, s->plan.arena_bytes));
    PK(p2pk_ddp_plan_bind(&s->plan, (uintptr_t)s->arena));
    if (c->nccl.CommRegister) /* as grad_sync registers its arena with p2pkit */
      TRY(nccl_ok(c, c->nccl.CommRegister(c->ncomm, s->arena, s->plan.arena_bytes, &s->nreg),
                  "ncclCommRegister"));
  }
  for (int l = 0; l < m->L; l++) {
    m->dW[l] = (float *)s->plan.grads[2 * l].addr;
    m->db[l] = (float *)s->plan.grads[2 * l + 1].addr;
  }
  return 0;
}

static void gsync_destroy(gsync_t *s) {
  if (s->comm) cudaStreamSynchronize(s->comm);
  if (s->gs) p2pkit_grad_sync_destroy(s->gs);
  if (s->nreg) s->c->nccl.CommDeregister(s->c->ncomm, s->nreg);
  if (s->own_arena) cudaFree(s->arena);
  if (s->have_plan) p2pk_ddp_plan_free(&s->plan);
  if (s->ev_ready) cudaEventDestroy(s->ev_ready);
  if (s->ev_done) cudaEventDestroy(s->ev_done);
  if (s->ev_comm0) cudaEventDestroy(s->ev_comm0);
  if (s->ev_comm_end) cudaEventDestroy(s->ev_comm_end);
  if (s->comm) cudaStreamDestroy(s->comm);
  memset(s, 0, sizeof *s);
}

static int gsync_ready(void *arg, model_t *m, size_t index, const float *grad) {
  gsync_t *s = arg;
  size_t from = 0, to = 0;
  PK(p2pk_ddp_plan_mark(&s->plan, index, &from, &to));
  if (from == 0 && to > 0) CU(cudaEventRecord(s->ev_comm0, m->stream));
  if (s->bk == BK_P2PKIT) {
    PK(p2pkit_grad_sync_mark_ready(s->gs, grad, (p2pkit_stream_t)m->stream));
    return 0;
  }
  if (from == to) return 0;
  CU(cudaEventRecord(s->ev_ready, m->stream));
  CU(cudaStreamWaitEvent(s->comm, s->ev_ready, 0));
  for (size_t b = from; b < to; b++) TRY(bucket_reduce(s, b));
  return 0;
}

/* End of backward: m->stream waits for every bucket. */
static int gsync_wait(gsync_t *s, model_t *m) {
  PK(p2pk_ddp_plan_finish(&s->plan));
  CU(cudaEventRecord(s->ev_comm_end, s->comm));
  if (s->bk == BK_P2PKIT) {
    PK(p2pkit_grad_sync_wait(s->gs, (p2pkit_stream_t)m->stream));
    return 0;
  }
  CU(cudaEventRecord(s->ev_done, s->comm));
  CU(cudaStreamWaitEvent(m->stream, s->ev_done, 0));
  return 0;
}

/* ---- one training run ------------------------------------------------------ */

enum { T_STEP, T_COMPUTE, T_COMM, T_EXPOSED, T_ALONE, T_COUNT };
static const char *const t_name[T_COUNT] = {"step", "compute (fwd+bwd)", "communication",
                                            "exposed communication", "all-reduce alone"};

typedef struct {
  double ms[T_COUNT];   /* medians, max over ranks */
  double *loss;         /* [steps], mean over ranks */
  size_t nbuckets;
  size_t arena_bytes;
  size_t bucket_bytes[8]; /* the first few, for the header */
} result_t;

static double median(double *v, int n) {
  if (n <= 0) return NAN;
  for (int i = 1; i < n; i++) /* insertion sort: n is small */
    for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
      double t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int check_replicas(gsync_t *s, model_t *m, int32_t *hi, int32_t *lo,
                          unsigned long long *flags, int step) {
  TRY(xreduce(s, m->params, hi, m->nparam, P2PKIT_INT32, P2PKIT_MAX, m->stream));
  TRY(xreduce(s, m->params, lo, m->nparam, P2PKIT_INT32, P2PKIT_MIN, m->stream));
  CU(mlp_mismatch(hi, lo, m->nparam, &flags[0], &flags[1], m->stream));
  unsigned long long h[2] = {0, 0};
  CU(cudaMemcpyAsync(h, flags, sizeof h, cudaMemcpyDeviceToHost, m->stream));
  CU(cudaStreamSynchronize(m->stream));
  if (h[0])
    return fail(EXIT_FAIL, "%s: step %d: the replicas' parameters differ in %llu of %zu words "
                "(first at word %llu)", bk_name[s->bk], step, h[0], m->nparam, h[1]);
  return 0;
}

static int train(ctx_t *c, int bk, result_t *res) {
  const args_t *a = c->a;
  model_t m;
  gsync_t s;
  int32_t *hi = NULL, *lo = NULL;
  unsigned long long *flags = NULL;
  double *alone = NULL;
  cudaEvent_t ev[4] = {NULL, NULL, NULL, NULL}; /* start, backward end, wait end, step end */
  int nt = a->steps - a->warmup;
  double *t[T_COUNT];
  memset(t, 0, sizeof t);
  TRY(model_create(&m, a, a->batch, 0));
  TRY(gsync_create(&s, c, bk, &m));
  res->nbuckets = s.plan.nbuckets;
  res->arena_bytes = s.plan.arena_bytes;
  for (size_t b = 0; b < s.plan.nbuckets && b < 8; b++) res->bucket_bytes[b] = s.plan.buckets[b].bytes;
  CU(cudaMalloc((void **)&hi, m.nparam * sizeof(int32_t)));
  CU(cudaMalloc((void **)&lo, m.nparam * sizeof(int32_t)));
  CU(cudaMalloc((void **)&flags, 2 * sizeof *flags));
  for (int i = 0; i < 4; i++) CU(cudaEventCreate(&ev[i]));
  for (int k = 0; k < T_COUNT; k++)
    if (!(t[k] = calloc((size_t)(a->steps > 20 ? a->steps : 20), sizeof(double))))
      return fail(EXIT_FAIL, "out of host memory");
  TRY(check_replicas(&s, &m, hi, lo, flags, -1)); /* the same init everywhere */

  for (int step = 0; step < a->steps; step++) {
    progress(c, bk_name[bk], step);
    TRY(model_data(&m, a, step, (uint64_t)c->rank * (uint64_t)a->batch));
    CU(cudaEventRecord(ev[0], m.stream));
    TRY(model_forward(&m, step));
    TRY(model_backward(&m, gsync_ready, &s));
    CU(cudaEventRecord(ev[1], m.stream));
    TRY(gsync_wait(&s, &m));
    CU(cudaEventRecord(ev[2], m.stream));
    TRY(model_sgd(&m, (float)a->lr));
    CU(cudaEventRecord(ev[3], m.stream));
    CU(cudaStreamSynchronize(m.stream));
    if (step >= a->warmup) {
      int i = step - a->warmup;
      float f = 0.f;
      CU(cudaEventElapsedTime(&f, ev[0], ev[3]));
      t[T_STEP][i] = f;
      CU(cudaEventElapsedTime(&f, ev[0], ev[1]));
      t[T_COMPUTE][i] = f;
      CU(cudaEventElapsedTime(&f, s.ev_comm0, s.ev_comm_end));
      t[T_COMM][i] = f;
      CU(cudaEventElapsedTime(&f, ev[1], ev[2]));
      t[T_EXPOSED][i] = f;
    }
    if ((step + 1) % a->check_every == 0 || step == a->steps - 1)
      TRY(check_replicas(&s, &m, hi, lo, flags, step));
  }

  /* The same buckets all-reduced back to back, nothing else running. */
  progress(c, "all-reduce alone", 0);
  int reps = 20;
  for (int r = -3; r < reps; r++) {
    CU(cudaEventRecord(ev[0], s.comm));
    for (size_t b = 0; b < s.plan.nbuckets; b++) TRY(bucket_reduce(&s, b));
    CU(cudaEventRecord(ev[1], s.comm));
    CU(cudaStreamSynchronize(s.comm));
    float f = 0.f;
    CU(cudaEventElapsedTime(&f, ev[0], ev[1]));
    if (r >= 0) t[T_ALONE][r] = f;
  }

  double med[T_COUNT];
  for (int k = 0; k < T_COUNT; k++) med[k] = median(t[k], k == T_ALONE ? reps : nt);
  CU(cudaMalloc((void **)&alone, T_COUNT * sizeof(double)));
  CU(cudaMemcpyAsync(alone, med, sizeof med, cudaMemcpyHostToDevice, m.stream));
  TRY(xreduce(&s, alone, alone, T_COUNT, P2PKIT_FLOAT64, P2PKIT_MAX, m.stream));
  CU(cudaMemcpyAsync(res->ms, alone, sizeof res->ms, cudaMemcpyDeviceToHost, m.stream));
  TRY(xreduce(&s, m.loss, m.loss, (size_t)a->steps, P2PKIT_FLOAT64, P2PKIT_AVG, m.stream));
  if (!(res->loss = calloc((size_t)a->steps, sizeof(double)))) return fail(EXIT_FAIL, "out of host memory");
  CU(cudaMemcpyAsync(res->loss, m.loss, (size_t)a->steps * sizeof(double), cudaMemcpyDeviceToHost,
                     m.stream));
  CU(cudaStreamSynchronize(m.stream));

  for (int k = 0; k < T_COUNT; k++) free(t[k]);
  for (int i = 0; i < 4; i++) cudaEventDestroy(ev[i]);
  cudaFree(alone);
  cudaFree(flags);
  cudaFree(hi);
  cudaFree(lo);
  gsync_destroy(&s);
  model_destroy(&m);
  return 0;
}

/* Rank 0: the same model on one GPU with the combined batch. */
static int reference(ctx_t *c, double *loss) {
  const args_t *a = c->a;
  model_t m;
  TRY(model_create(&m, a, a->batch * c->nranks, 1));
  for (int step = 0; step < a->steps; step++) {
    progress(c, "single-GPU reference", step);
    TRY(model_data(&m, a, step, 0));
    TRY(model_forward(&m, step));
    TRY(model_backward(&m, NULL, NULL));
    TRY(model_sgd(&m, (float)a->lr));
  }
  CU(cudaMemcpyAsync(loss, m.loss, (size_t)a->steps * sizeof(double), cudaMemcpyDeviceToHost,
                     m.stream));
  CU(cudaStreamSynchronize(m.stream));
  model_destroy(&m);
  return 0;
}

/* ---- communicators --------------------------------------------------------- */

static int nccl_init(ctx_t *c) {
  PK(p2pk_nccl_load(&c->nccl, NULL));
  p2pk_nccl_id id;
  memset(&id, 0, sizeof id);
  if (c->rank == 0) TRY(nccl_ok(c, c->nccl.GetUniqueId(&id), "ncclGetUniqueId"));
  /* Rank 0's id to everyone, over the p2pkit communicator every mode has: a
   * SUM of int32 words where the other ranks contribute zeros is exact. */
  void *d = NULL;
  CU(cudaMalloc(&d, sizeof id));
  CU(cudaMemcpy(d, &id, sizeof id, cudaMemcpyHostToDevice));
  PK(p2pkit_all_reduce(d, d, sizeof id / sizeof(int32_t), P2PKIT_INT32, P2PKIT_SUM, c->pcomm, NULL));
  CU(cudaDeviceSynchronize());
  CU(cudaMemcpy(&id, d, sizeof id, cudaMemcpyDeviceToHost));
  cudaFree(d);
  TRY(nccl_ok(c, c->nccl.CommInitRank(&c->ncomm, c->nranks, id, c->rank), "ncclCommInitRank"));
  c->have_nccl = 1;
  return 0;
}

/* ---- report (rank 0) ----------------------------------------------------- */

static int report(ctx_t *c, result_t *res, const double *ref) {
  const args_t *a = c->a;
  int first = -1;
  double worst = 0.0;
  printf("\nloss per step (mean over the global batch of %d; reference: one GPU, the combined "
         "batch)\n%5s", a->batch * c->nranks, "step");
  for (int k = 0; k < BK_COUNT; k++)
    if (a->use[k]) printf(" %14s %9s", bk_name[k], "rel.diff");
  printf(" %14s\n", "reference");
  for (int s = 0; s < a->steps; s++) {
    printf("%5d", s);
    for (int k = 0; k < BK_COUNT; k++) {
      if (!a->use[k]) continue;
      double d = fabs(res[k].loss[s] - ref[s]) / fmax(fabs(ref[s]), 1e-30);
      if (!(d <= a->tol) && first < 0) first = s;
      if (d > worst || isnan(d)) worst = d;
      printf(" %14.8g %9.2e", res[k].loss[s], d);
    }
    printf(" %14.8g\n", ref[s]);
  }
  printf("\ntime per step, ms (median of steps %d..%d, max over %d ranks; %zu buckets, %.1f MiB of "
         "gradients)\n%-24s", a->warmup, a->steps - 1, c->nranks, res[a->use[0] ? 0 : 1].nbuckets,
         (double)res[a->use[0] ? 0 : 1].arena_bytes / (1 << 20), "");
  for (int k = 0; k < BK_COUNT; k++)
    if (a->use[k]) printf(" %10s", bk_name[k]);
  if (a->use[0] && a->use[1]) printf(" %12s", "p2pkit/nccl");
  printf("\n");
  for (int t = 0; t < T_COUNT; t++) {
    printf("%-24s", t_name[t]);
    for (int k = 0; k < BK_COUNT; k++)
      if (a->use[k]) printf(" %10.3f", res[k].ms[t]);
    if (a->use[0] && a->use[1]) printf(" %12.3f", res[0].ms[t] / res[1].ms[t]);
    printf("\n");
  }
  fflush(stdout);
  if (first >= 0)
    return fail(EXIT_FAIL, "step %d: the loss differs from the single-GPU reference by more than "
                "%.1e relative (worst %.2e)", first, a->tol, worst);
  printf("\nreplicas bit-identical at every check; loss within %.1e of the single-GPU reference "
         "(worst %.2e)\n", a->tol, worst);
  return 0;
}

/* ---- one process ------------------------------------------------------------ */

static int env_int(const char *name, int def) {
  const char *v = getenv(name);
  if (!v || !*v) return def;
  char *end = NULL;
  long x = strtol(v, &end, 10);
  return *end ? def : (int)x;
}

static int rank_run(ctx_t *c) {
  const args_t *a = c->a;
  result_t res[BK_COUNT];
  double *ref = NULL;
  memset(res, 0, sizeof res);
  c->rank = env_int("RANK", 0);
  c->nranks = env_int("WORLD_SIZE", 1);
  c->device = env_int("LOCAL_RANK", c->rank);
  g_rank = c->rank;
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0)
    return fail(EXIT_USAGE, "no GPU (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
  if (c->device < 0 || c->device >= ndev)
    return fail(EXIT_USAGE, "LOCAL_RANK %d: this process sees %d GPUs", c->device, ndev);
  CU(cudaSetDevice(c->device));
  progress(c, "p2pkit communicator", 0);
  p2pkit_comm_opts_t o;
  p2pkit_comm_opts_init(&o);
  o.rank = c->rank;
  o.nranks = c->nranks;
  o.device = c->device;
  PK(p2pkit_comm_init_rank(&o, &c->pcomm));
  if (c->rank == 0) {
    printf("ddp_mlp: %d ranks, %d layers of %d x %d (%.1f M parameters), batch %d per rank, %d "
           "steps, lr %g, seed %llu\n", c->nranks, a->layers, a->width, a->width,
           (double)a->layers * ((double)a->width * a->width + a->width) / 1e6, a->batch, a->steps,
           a->lr, (unsigned long long)a->seed);
    fflush(stdout);
  }
  for (int k = 0; k < BK_COUNT; k++) {
    if (!a->use[k]) continue;
    if (k == BK_NCCL) {
      progress(c, "NCCL communicator", 0);
      TRY(nccl_init(c));
    }
    TRY(train(c, k, &res[k]));
    if (c->rank == 0) {
      printf("%s: done; %zu buckets (", bk_name[k], res[k].nbuckets);
      for (size_t b = 0; b < res[k].nbuckets && b < 8; b++)
        printf("%s%.2f", b ? ", " : "", (double)res[k].bucket_bytes[b] / (1 << 20));
      printf("%s MiB)\n", res[k].nbuckets > 8 ? ", ..." : "");
      fflush(stdout);
    }
  }
  if (c->have_nccl) {
    c->nccl.CommDestroy(c->ncomm);
    c->have_nccl = 0;
  }
  PK(p2pkit_comm_destroy(c->pcomm));
  c->pcomm = NULL;
  int rc = 0;
  if (c->rank == 0) {
    if (!(ref = calloc((size_t)a->steps, sizeof(double)))) return fail(EXIT_FAIL, "out of host memory");
    rc = reference(c, ref); /* on failure too, the buffers below are freed */
    if (rc == 0) rc = report(c, res, ref);
  }
  for (int k = 0; k < BK_COUNT; k++) free(res[k].loss);
  free(ref);
  return rc;
}

/* The process's exit code; the error goes to the parent (-p) or stderr. */
static int rank_main(const args_t *a, perf_shared *sh) {
  ctx_t c;
  memset(&c, 0, sizeof c);
  c.a = a;
  c.sh = sh;
  int rc = rank_run(&c);
  if (rc != 0) {
    if (sh && g_rank >= 0) {
      p2pk_perf_set_error(sh, g_rank, rc, "ddp_mlp: %s", g_err);
      atomic_store(&sh->abort, 1);
    } else if (g_rank >= 0 && c.nranks > 1) {
      fprintf(stderr, "ddp_mlp: error: rank %d: %s\n", g_rank, g_err);
    } else {
      fprintf(stderr, "ddp_mlp: error: %s\n", g_err);
    }
  }
  return rc;
}

/* ---- the parent of -p ----------------------------------------------------- */

typedef struct {
  const args_t *a;
} spawn_arg;

static int child_main(void *arg, perf_shared *sh, int proc, int nprocs) {
  const spawn_arg *sa = arg;
  p2pk_proc_launcher_env(sh, proc, nprocs);
  return rank_main(sa->a, sh);
}

/* GPUs visible, counted in a child: the parent of -p makes no CUDA call (a
 * process that has initialised CUDA cannot fork ranks that use it). -1 and
 * the reason in `why` when there are none or the count failed. */
static int count_gpus(char *why, size_t len) {
  int fd[2];
  if (pipe(fd) != 0) {
    snprintf(why, len, "pipe: %s", strerror(errno));
    return -1;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(why, len, "fork: %s", strerror(errno));
    close(fd[0]);
    close(fd[1]);
    return -1;
  }
  if (pid == 0) {
    close(fd[0]);
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    char buf[256];
    int k = snprintf(buf, sizeof buf, "%d %s", e == cudaSuccess ? n : -1,
                     e == cudaSuccess ? "" : cudaGetErrorString(e));
    ssize_t wr = write(fd[1], buf, (size_t)(k < (int)sizeof buf ? k : (int)sizeof buf - 1));
    _exit(wr > 0 ? 0 : 1);
  }
  close(fd[1]);
  char buf[256];
  size_t got = 0;
  for (;;) {
    ssize_t r = read(fd[0], buf + got, sizeof buf - 1 - got);
    if (r > 0 && (got += (size_t)r) < sizeof buf - 1) continue;
    if (r < 0 && errno == EINTR) continue;
    break;
  }
  close(fd[0]);
  buf[got] = '\0';
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  char *rest = NULL;
  long n = strtol(buf, &rest, 10);
  if (got == 0 || rest == buf) {
    snprintf(why, len, "the CUDA probe process died");
    return -1;
  }
  if (n <= 0) {
    while (*rest == ' ') rest++;
    snprintf(why, len, "%s", n == 0 ? "0 devices" : rest);
    return -1;
  }
  return (int)n;
}

/* ---- command line ------------------------------------------------------------ */

static void usage(FILE *f) {
  fprintf(f,
          "usage: ddp_mlp [-p N] [--backend p2pkit|nccl|both] [--steps N] [--warmup N]\n"
          "               [--batch N] [--layers N] [--width N] [--check-every N] [--lr X]\n"
          "               [--seed N] [--tol X] [--bucket-mb X] [--first-bucket-mb X]\n"
          "Trains an MLP data-parallel, one process per GPU; checks the replicas are\n"
          "bit-identical and the loss matches one GPU with the combined batch; times\n"
          "compute, communication and exposed communication.\n"
          "  -p N              ranks to fork (default: every visible GPU; under torchrun,\n"
          "                    without -p: this process is RANK of WORLD_SIZE)\n"
          "  --backend B       p2pkit, nccl or both (default both)\n"
          "  --steps N         training steps (default 40); --warmup N untimed (default 5)\n"
          "  --batch N         samples per rank per step (default 256)\n"
          "  --layers N        Linear layers (default 8, at most %d)\n"
          "  --width N         features of every layer (default 2048)\n"
          "  --check-every N   replica check every N steps (default 1)\n"
          "  --lr X            SGD learning rate (default 0.05)\n"
          "  --seed N          init and data (default 1)\n"
          "  --tol X           loss vs reference, relative (default 1e-4)\n"
          "  --bucket-mb X     bucket cap, MiB (default P2PKIT_BUCKET_SIZE, 25)\n"
          "  --first-bucket-mb X  first bucket's cap, MiB (default P2PKIT_FIRST_BUCKET_SIZE, 1)\n",
          MAX_LAYERS);
}

static int parse_long(const char *flag, const char *v, long lo, long hi, long *out) {
  char *end = NULL;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi) {
    fprintf(stderr, "ddp_mlp: error: %s %s: an integer from %ld to %ld\n", flag, v, lo, hi);
    return -1;
  }
  *out = x;
  return 0;
}

static int parse_double(const char *flag, const char *v, double lo, double hi, double *out) {
  char *end = NULL;
  errno = 0;
  double x = strtod(v, &end);
  if (errno || end == v || *end || !(x >= lo && x <= hi)) {
    fprintf(stderr, "ddp_mlp: error: %s %s: a number from %g to %g\n", flag, v, lo, hi);
    return -1;
  }
  *out = x;
  return 0;
}

/* 0 ok, 1 help printed, -1 error printed. */
static int parse(int argc, char **argv, args_t *a) {
  memset(a, 0, sizeof *a);
  a->use[BK_P2PKIT] = a->use[BK_NCCL] = 1;
  a->steps = 40;
  a->warmup = 5;
  a->batch = 256;
  a->layers = 8;
  a->width = 2048;
  a->check_every = 1;
  a->lr = 0.05;
  a->tol = 1e-4;
  a->seed = 1;
  a->bucket_bytes = p2pk_param_size("P2PKIT_BUCKET_SIZE");
  a->first_bucket_bytes = p2pk_param_size("P2PKIT_FIRST_BUCKET_SIZE");
  enum { O_BACKEND = 256, O_STEPS, O_WARMUP, O_BATCH, O_LAYERS, O_WIDTH, O_CHECK, O_LR, O_SEED,
         O_TOL, O_BUCKET, O_FIRST };
  static const struct option opts[] = {
      {"help", no_argument, NULL, 'h'},           {"backend", required_argument, NULL, O_BACKEND},
      {"steps", required_argument, NULL, O_STEPS}, {"warmup", required_argument, NULL, O_WARMUP},
      {"batch", required_argument, NULL, O_BATCH}, {"layers", required_argument, NULL, O_LAYERS},
      {"width", required_argument, NULL, O_WIDTH}, {"check-every", required_argument, NULL, O_CHECK},
      {"lr", required_argument, NULL, O_LR},       {"seed", required_argument, NULL, O_SEED},
      {"tol", required_argument, NULL, O_TOL},     {"bucket-mb", required_argument, NULL, O_BUCKET},
      {"first-bucket-mb", required_argument, NULL, O_FIRST}, {NULL, 0, NULL, 0}};
  opterr = 0;
  optind = 1;
  int o;
  long x = 0;
  double d = 0.0;
  while ((o = getopt_long(argc, argv, ":hp:", opts, NULL)) != -1) {
    const char *flag = argv[optind - 1];
    int r = 0;
    switch (o) {
      case 'h': usage(stdout); return 1;
      case 'p': r = parse_long("-p", optarg, 1, P2PK_PERF_MAX_RANKS, &x); a->nprocs = (int)x; break;
      case O_BACKEND:
        a->use[BK_P2PKIT] = !strcmp(optarg, "p2pkit") || !strcmp(optarg, "both");
        a->use[BK_NCCL] = !strcmp(optarg, "nccl") || !strcmp(optarg, "both");
        if (!a->use[BK_P2PKIT] && !a->use[BK_NCCL]) {
          fprintf(stderr, "ddp_mlp: error: --backend %s: p2pkit, nccl or both\n", optarg);
          r = -1;
        }
        break;
      case O_STEPS: r = parse_long("--steps", optarg, 1, 1000000, &x); a->steps = (int)x; break;
      case O_WARMUP: r = parse_long("--warmup", optarg, 0, 1000000, &x); a->warmup = (int)x; break;
      case O_BATCH: r = parse_long("--batch", optarg, 1, 1 << 20, &x); a->batch = (int)x; break;
      case O_LAYERS: r = parse_long("--layers", optarg, 1, MAX_LAYERS, &x); a->layers = (int)x; break;
      case O_WIDTH: r = parse_long("--width", optarg, 1, 1 << 16, &x); a->width = (int)x; break;
      case O_CHECK: r = parse_long("--check-every", optarg, 1, 1000000, &x); a->check_every = (int)x; break;
      case O_LR: r = parse_double("--lr", optarg, 0.0, 1e3, &a->lr); break;
      case O_SEED: r = parse_long("--seed", optarg, 0, 0x7fffffffL, &x); a->seed = (uint64_t)x; break;
      case O_TOL: r = parse_double("--tol", optarg, 0.0, 1.0, &a->tol); break;
      case O_BUCKET:
      case O_FIRST:
        r = parse_double(o == O_BUCKET ? "--bucket-mb" : "--first-bucket-mb", optarg, 1.0 / 1024,
                         1 << 16, &d);
        if (!r) *(o == O_BUCKET ? &a->bucket_bytes : &a->first_bucket_bytes) = (size_t)(d * (1 << 20));
        break;
      case ':':
        fprintf(stderr, "ddp_mlp: error: %s needs a value\n", flag);
        r = -1;
        break;
      default:
        fprintf(stderr, "ddp_mlp: error: unknown option %s\n", flag);
        r = -1;
        break;
    }
    if (r) return -1;
  }
  if (optind < argc) {
    fprintf(stderr, "ddp_mlp: error: unexpected argument %s\n", argv[optind]);
    return -1;
  }
  if (a->warmup >= a->steps) {
    fprintf(stderr, "ddp_mlp: error: --warmup %d: fewer than --steps %d\n", a->warmup, a->steps);
    return -1;
  }
  if ((size_t)a->width * a->batch * 4 > ((size_t)1 << 34)) {
    fprintf(stderr, "ddp_mlp: error: --width x --batch too large\n");
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  args_t a;
  int r = parse(argc, argv, &a);
  if (r > 0) return 0;
  if (r < 0) {
    usage(stderr);
    return EXIT_USAGE;
  }
  /* torchrun: this process is one rank. */
  if (!a.nprocs && getenv("RANK") && getenv("WORLD_SIZE")) return rank_main(&a, NULL);

  char why[256] = "";
  int ngpu = count_gpus(why, sizeof why);
  if (ngpu < 1) {
    fprintf(stderr, "ddp_mlp: error: no GPU (%s)\n", why);
    return EXIT_USAGE;
  }
  int n = a.nprocs ? a.nprocs : ngpu;
  if (n > ngpu) {
    fprintf(stderr, "ddp_mlp: error: -p %d: only %d GPUs are visible\n", n, ngpu);
    return EXIT_USAGE;
  }
  perf_shared *sh = p2pk_perf_shared_new();
  if (!sh) {
    fprintf(stderr, "ddp_mlp: error: cannot map the region shared by the ranks\n");
    return EXIT_FAIL;
  }
  sh->ports[0] = p2pk_perf_free_port();
  if (sh->ports[0] < 0) {
    fprintf(stderr, "ddp_mlp: error: no free TCP port on 127.0.0.1 for the rendezvous\n");
    p2pk_perf_shared_free(sh);
    return EXIT_FAIL;
  }
  p2pk_perf_random_secret(sh->secret, sizeof sh->secret);
  spawn_arg sa = {&a};
  int rc = p2pk_perf_spawn(sh, n, (int)p2pk_param_int("P2PKIT_TIMEOUT"), child_main, &sa, stderr);
  p2pk_perf_shared_free(sh);
  return rc;
}
