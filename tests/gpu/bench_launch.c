/* SPDX-License-Identifier: BSD-3-Clause */
/* Where the time of a small collective goes: the floors it stands on,
 * measured next to it in one process driving every GPU. Not a test:
 * scripts/device/latency.sh runs it on the device machine.
 *
 *   bench_launch [--iters N] [--count N]
 *
 * Lines (median of 5 repeats, microseconds):
 *   set_device      one cudaSetDevice, alternating between two GPUs
 *   fill_host       host time to enqueue one 16-byte fill kernel (queue not full)
 *   fill_eager      GPU time per fill kernel, N back to back
 *   fill_graph      GPU time per fill kernel, N captured in one graph
 *   big_eager       GPU time per fill kernel of --big bytes (default 32 MiB: far
 *                   longer than its launch), N back to back
 *   big_graph       the same N captured in one graph (does an eager kernel
 *                   take longer on the GPU than one replayed from a graph?)
 *   big_graph1      one such fill captured in a graph of one node, launched N
 *                   times (then "host": the host time per launch)
 *   ar_host         host time of one p2pkit_all_reduce (--count floats; one GPU's call)
 *   sr_host         host time of one p2pkit_send (--count floats, GPU 0 to 1, no
 *                   group: one launch; GPU 1's receive made outside the timing)
 *   ar_eager        time per all-reduce, every GPU's call enqueued per step, N steps
 *   ar_graph        time per all-reduce, N captured per GPU, graphs replayed
 *   fill_seq2       host time per step of one fill on each GPU, one thread
 *   fill_par2       host time per step, a thread per GPU, each launching alone
 *   fill_handoff    host time per step, a thread per GPU, the calling thread
 *                   handing each step to the others and waiting for them
 *   ar_handoff      as ar_eager, each GPU's call made by its own thread, the
 *                   calling thread handing each step over (would launching
 *                   from a thread per GPU halve one process's eager step?)
 * The fill kernel is the library's pattern writer: a launch with small
 * arguments and no work. The all-reduce (--count float32s, default 2: 8
 * bytes) result is checked after each form. P2PKIT_KTRACE builds print the
 * LL kernel's phases too. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/kernels/coll_dev.h"
#include "coll_util.h"
#include "p2pkit.h"
#include "xfer/xfer_kernels.h"

#define MAXG 8
#define REPS 5

typedef struct {
  int n, iters;
  size_t count; /* float32s per all-reduce */
  size_t big;   /* bytes of the big fill */
  int dev[MAXG];
  cudaStream_t s[MAXG];
  float *in[MAXG], *out[MAXG];
  p2pkit_comm_t comm[MAXG];
} lb_t;

static double median(double *t, int n) {
  qsort(t, (size_t)n, sizeof t[0], cu_cmp_double);
  return t[n / 2];
}

static void report(const char *what, double *t, int n) {
  qsort(t, (size_t)n, sizeof t[0], cu_cmp_double);
  printf("%-12s %8.3f us   (min %.3f, max %.3f)\n", what, t[n / 2] * 1e6, t[0] * 1e6,
         t[n - 1] * 1e6);
  fflush(stdout);
}

static int sync_all(lb_t *B) { return cu_sync_streams(B->n, B->dev, B->s); }

static int ar_step(lb_t *B) {
  for (int r = 0; r < B->n; r++)
    if (p2pkit_all_reduce(B->in[r], B->out[r], B->count, P2PKIT_FLOAT32, P2PKIT_SUM, B->comm[r],
                          (p2pkit_stream_t)B->s[r]) != P2PKIT_SUCCESS) {
      fprintf(stderr, "bench_launch: all_reduce: %s\n", p2pkit_last_error());
      return -1;
    }
  return 0;
}

/* Rank r's output holds `want` in every word (after `form`); then it is
 * poisoned for the next form. */
static int out_check(lb_t *B, int r, float want, const char *form) {
  float *h = malloc(B->count * sizeof *h);
  if (!h) return -1;
  int rc = 0;
  cudaSetDevice(B->dev[r]);
  if (cudaMemcpy(h, B->out[r], B->count * sizeof *h, cudaMemcpyDeviceToHost) != cudaSuccess) rc = -1;
  for (size_t i = 0; i < B->count && !rc; i++)
    if (h[i] != want) {
      fprintf(stderr, "bench_launch: %s: rank %d has %g at %zu, want %g\n", form, r, h[i], i, want);
      rc = -1;
    }
  cudaMemset(B->out[r], 0xff, B->count * sizeof *h);
  cudaDeviceSynchronize();
  free(h);
  return rc;
}

/* sr_host: GPU 0 sends its input to GPU 1's output, q times a repeat; t[k]
 * the host time of one p2pkit_send. GPU 1's output then holds GPU 0's
 * input (1.0 everywhere). */
static int sr_host(lb_t *B, int q, double *t) {
  for (int k = 0; k < REPS; k++) {
    double host = 0;
    for (int i = 0; i < q; i++) {
      double t0 = cu_now();
      p2pkit_status_t st = p2pkit_send(B->in[0], B->count, P2PKIT_FLOAT32, 1, B->comm[0],
                                       (p2pkit_stream_t)B->s[0]);
      host += cu_now() - t0;
      if (st == P2PKIT_SUCCESS)
        st = p2pkit_recv(B->out[1], B->count, P2PKIT_FLOAT32, 0, B->comm[1], (p2pkit_stream_t)B->s[1]);
      if (st != P2PKIT_SUCCESS) {
        fprintf(stderr, "bench_launch: send/recv: %s\n", p2pkit_last_error());
        return -1;
      }
    }
    if (sync_all(B)) return -1;
    t[k] = host / q;
  }
  return out_check(B, 1, 1.0f, "send/recv");
}

/* out = sum over ranks of in (rank r holds 1 + r): every rank, every word;
 * then the output is poisoned for the next form. */
static int ar_check(lb_t *B, const char *form) {
  float want = 0;
  for (int r = 0; r < B->n; r++) want += (float)(1 + r);
  int rc = 0;
  for (int r = 0; r < B->n && !rc; r++) rc = out_check(B, r, want, form);
  return rc;
}

/* A thread per GPU beyond the first, spinning on `go` (the step it is to
 * make); it answers in `done`. Step -1: exit. */
typedef struct {
  lb_t *B;
  int r, kind; /* 0 fill, 1 all-reduce */
  void *fbuf;
  int steps;   /* par2: launches to make at once */
  _Atomic long go, done;
  int err;
} worker_t;

static void *worker_main(void *arg) {
  worker_t *w = arg;
  cudaSetDevice(w->B->dev[w->r]);
  long seen = 0;
  for (;;) {
    long g;
    while ((g = atomic_load_explicit(&w->go, memory_order_acquire)) == seen) {
    }
    if (g < 0) break;
    seen = g;
    if (w->kind == 2) {
      for (int i = 0; i < w->steps; i++) p2pk_launch_fill(w->fbuf, 16, 1, (uint32_t)i, w->B->s[w->r]);
    } else if (w->kind == 0) {
      if (p2pk_launch_fill(w->fbuf, 16, 1, (uint32_t)g, w->B->s[w->r]) != cudaSuccess) w->err = 1;
    } else if (p2pkit_all_reduce(w->B->in[w->r], w->B->out[w->r], w->B->count, P2PKIT_FLOAT32, P2PKIT_SUM,
                                 w->B->comm[w->r], (p2pkit_stream_t)w->B->s[w->r]) != P2PKIT_SUCCESS) {
      w->err = 1;
    }
    atomic_store_explicit(&w->done, g, memory_order_release);
  }
  return NULL;
}

/* One step handed to every worker: the caller makes rank 0's part. */
static long hand_seq;
static int handoff_step(lb_t *B, worker_t *w, int kind, void *fbuf0) {
  long g = ++hand_seq;
  for (int r = 1; r < B->n; r++) {
    w[r].kind = kind;
    atomic_store_explicit(&w[r].go, g, memory_order_release);
  }
  int bad = 0;
  if (kind == 0) bad = p2pk_launch_fill(fbuf0, 16, 1, (uint32_t)g, B->s[0]) != cudaSuccess;
  else bad = p2pkit_all_reduce(B->in[0], B->out[0], B->count, P2PKIT_FLOAT32, P2PKIT_SUM, B->comm[0],
                               (p2pkit_stream_t)B->s[0]) != P2PKIT_SUCCESS;
  for (int r = 1; r < B->n; r++)
    while (atomic_load_explicit(&w[r].done, memory_order_acquire) != g) {
    }
  for (int r = 1; r < B->n; r++) bad |= w[r].err;
  return bad ? -1 : 0;
}

/* The threaded forms (fill_seq2 .. ar_handoff); returns non-zero on error. */
static int threaded(lb_t *B, int q) {
  worker_t w[MAXG];
  pthread_t th[MAXG];
  void *fb[MAXG] = {0};
  double t[REPS];
  memset(w, 0, sizeof w);
  for (int r = 0; r < B->n; r++) {
    cudaSetDevice(B->dev[r]);
    if (cudaMalloc(&fb[r], 64) != cudaSuccess) return 1;
  }
  /* One thread, a fill on each GPU per step. */
  for (int k = 0; k < REPS; k++) {
    if (sync_all(B)) return 1;
    double t0 = cu_now();
    for (int i = 0; i < q; i++)
      for (int r = 0; r < B->n; r++) {
        cudaSetDevice(B->dev[r]);
        p2pk_launch_fill(fb[r], 16, 1, (uint32_t)i, B->s[r]);
      }
    t[k] = (cu_now() - t0) / q;
  }
  report("fill_seq2", t, REPS);
  for (int r = 1; r < B->n; r++) {
    w[r].B = B, w[r].r = r, w[r].fbuf = fb[r];
    if (pthread_create(&th[r], NULL, worker_main, &w[r]) != 0) return 1;
  }
  cudaSetDevice(B->dev[0]);
  /* Every thread launching q fills at once. */
  for (int k = 0; k < REPS; k++) {
    if (sync_all(B)) return 1;
    cudaSetDevice(B->dev[0]);
    long g = ++hand_seq;
    double t0 = cu_now();
    for (int r = 1; r < B->n; r++) {
      w[r].kind = 2, w[r].steps = q;
      atomic_store_explicit(&w[r].go, g, memory_order_release);
    }
    for (int i = 0; i < q; i++) p2pk_launch_fill(fb[0], 16, 1, (uint32_t)i, B->s[0]);
    for (int r = 1; r < B->n; r++)
      while (atomic_load_explicit(&w[r].done, memory_order_acquire) != g) {
      }
    t[k] = (cu_now() - t0) / q;
  }
  report("fill_par2", t, REPS);
  int rc = 0;
  for (int k = 0; k < REPS && !rc; k++) {
    if (sync_all(B)) return 1;
    cudaSetDevice(B->dev[0]);
    double t0 = cu_now();
    for (int i = 0; i < q && !rc; i++) rc = handoff_step(B, w, 0, fb[0]);
    t[k] = (cu_now() - t0) / q;
  }
  if (!rc) report("fill_handoff", t, REPS);
  for (int k = 0; k < REPS && !rc; k++) {
    cudaSetDevice(B->dev[0]);
    double t0 = cu_now();
    for (int i = 0; i < B->iters && !rc; i++) rc = handoff_step(B, w, 1, NULL);
    if (rc || sync_all(B)) rc = 1;
    t[k] = (cu_now() - t0) / B->iters;
  }
  if (!rc) report("ar_handoff", t, REPS);
  else fprintf(stderr, "bench_launch: threaded all-reduce failed: %s\n", p2pkit_last_error());
  for (int r = 1; r < B->n; r++) {
    atomic_store_explicit(&w[r].go, -1, memory_order_release);
    pthread_join(th[r], NULL);
  }
  if (!rc && ar_check(B, "threaded")) rc = 1;
  for (int r = 0; r < B->n; r++) {
    cudaSetDevice(B->dev[r]);
    cudaFree(fb[r]);
  }
  return rc;
}

/* P2PKIT_KTRACE builds: the LL kernel's phases in the last two calls on each
 * GPU, microseconds from the call's entry, and the gap from the earlier
 * call's end to the later one's entry. */
static void ktrace_print(lb_t *B, const char *form) {
  static const char *const names[10] = {"entry", "dep",  "prologue", "pushed",   "header",
                                        "data",  "end",  "all_pushed", "all_data", "all_end"};
  for (int r = 0; r < B->n; r++) {
    unsigned long long t[2][10];
    cudaSetDevice(B->dev[r]);
    if (p2pk_ktrace_read(t) != 0) {
      if (r == 0) printf("ktrace: not in this build (cmake -DP2PKIT_KTRACE=ON)\n");
      return;
    }
    int late = t[1][0] > t[0][0];
    printf("ktrace %s GPU %d:", form, B->dev[r]);
    for (int k = 1; k < 10; k++)
      printf(" %s %+.3f", names[k], ((double)t[late][k] - (double)t[late][0]) * 1e-3);
    printf(" | gap from previous end %.3f us\n", ((double)t[late][0] - (double)t[!late][6]) * 1e-3);
  }
}

/* GPU time per fill of `bytes` on GPU 0, n back to back, REPS times into
 * t (seconds); -1 if a sync failed. */
static int eager_fills(lb_t *B, void *buf, size_t bytes, int n, double *t) {
  for (int k = 0; k < REPS; k++) {
    if (sync_all(B)) return -1;
    double t0 = cu_now();
    for (int i = 0; i < n; i++) p2pk_launch_fill(buf, bytes, 1, (uint32_t)i, B->s[0]);
    if (sync_all(B)) return -1;
    t[k] = (cu_now() - t0) / n;
  }
  return 0;
}

/* One fill of `bytes` on GPU 0 captured in a graph of one node, that graph
 * launched n times back to back, REPS times: t the time per launch
 * (seconds), host the host's time to enqueue one. Does a graph launched
 * per call keep the graph's GPU-side advantage over an eager launch? (On
 * 2x H200 no: 4 MiB fills 7.55 us either way, 6.66 from one graph of N.)
 * -1 on a CUDA failure. */
static int graph1_fills(lb_t *B, void *buf, size_t bytes, int n, double *t, double *host) {
  cudaGraph_t g = NULL;
  cudaGraphExec_t x = NULL;
  int bad = 0;
  cudaSetDevice(B->dev[0]);
  bad = cudaStreamBeginCapture(B->s[0], cudaStreamCaptureModeGlobal) != cudaSuccess;
  if (!bad) bad = p2pk_launch_fill(buf, bytes, 1, 7, B->s[0]) != cudaSuccess;
  if (cudaStreamEndCapture(B->s[0], &g) != cudaSuccess) bad = 1;
  if (!bad) bad = cudaGraphInstantiate(&x, g, 0) != cudaSuccess;
  for (int k = 0; k < REPS && !bad; k++) {
    if (sync_all(B)) bad = 1;
    double h = 0, t0 = cu_now();
    for (int i = 0; i < n && !bad; i++) {
      const double h0 = cu_now();
      bad = cudaGraphLaunch(x, B->s[0]) != cudaSuccess;
      h += cu_now() - h0;
    }
    if (bad || sync_all(B)) bad = 1;
    t[k] = (cu_now() - t0) / n;
    host[k] = h / n;
  }
  if (bad) fprintf(stderr, "bench_launch: one-node graph of fills failed: %s\n",
                   cudaGetErrorString(cudaGetLastError()));
  if (x) cudaGraphExecDestroy(x);
  if (g) cudaGraphDestroy(g);
  return bad ? -1 : 0;
}

/* Capture `iters` steps per GPU (fill: GPU 0 only, fills of fbytes),
 * replay, time per step. */
static double graph_time(lb_t *B, int iters, int fill, void *fbuf, size_t fbytes) {
  cudaGraph_t g[MAXG] = {0};
  cudaGraphExec_t x[MAXG] = {0};
  int ng = fill ? 1 : B->n, bad = 0, begun = 0;
  double res = -1, t[REPS + 1];
  for (int r = 0; r < ng && !bad; r++, begun++) {
    cudaSetDevice(B->dev[r]);
    if (cudaStreamBeginCapture(B->s[r], cudaStreamCaptureModeGlobal) != cudaSuccess) bad = 1;
  }
  if (bad) begun--;
  for (int i = 0; i < iters && !bad; i++) {
    if (fill) {
      cudaSetDevice(B->dev[0]);
      bad = p2pk_launch_fill(fbuf, fbytes, 1, (uint32_t)i, B->s[0]) != cudaSuccess;
    } else {
      bad = ar_step(B) != 0;
    }
  }
  for (int r = 0; r < begun; r++) {
    cudaSetDevice(B->dev[r]);
    if (cudaStreamEndCapture(B->s[r], &g[r]) != cudaSuccess) bad = 1;
  }
  for (int r = 0; r < ng && !bad; r++) {
    cudaSetDevice(B->dev[r]);
    if (cudaGraphInstantiate(&x[r], g[r], 0) != cudaSuccess) bad = 1;
  }
  for (int k = 0; k <= REPS && !bad; k++) {
    double t0 = cu_now();
    for (int r = 0; r < ng && !bad; r++) {
      cudaSetDevice(B->dev[r]);
      bad = cudaGraphLaunch(x[r], B->s[r]) != cudaSuccess;
    }
    if (bad || sync_all(B)) bad = 1;
    t[k] = (cu_now() - t0) / iters;
  }
  if (!bad) res = median(t + 1, REPS); /* t[0]: upload and warm-up */
  for (int r = 0; r < ng; r++) {
    cudaSetDevice(B->dev[r]);
    if (x[r]) cudaGraphExecDestroy(x[r]);
    if (g[r]) cudaGraphDestroy(g[r]);
  }
  if (bad) fprintf(stderr, "bench_launch: graph of %s failed: %s\n", fill ? "fills" : "all-reduces",
                   cudaGetErrorString(cudaGetLastError()));
  return res;
}

int main(int argc, char **argv) {
  lb_t B;
  memset(&B, 0, sizeof B);
  B.iters = 1000;
  B.count = 2;
  B.big = (size_t)32 << 20;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc) B.iters = atoi(argv[++i]);
    else if (strcmp(argv[i], "--count") == 0 && i + 1 < argc) B.count = (size_t)strtoull(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--big") == 0 && i + 1 < argc) B.big = (size_t)strtoull(argv[++i], NULL, 10);
    else {
      fprintf(stderr, "usage: bench_launch [--iters N] [--count N] [--big BYTES]\n");
      return 2;
    }
  }
  if (B.iters < 10 || B.iters > 100000) {
    fprintf(stderr, "bench_launch: --iters must be 10 to 100000\n");
    return 2;
  }
  if (B.big < 16 || B.big > ((size_t)1 << 30)) {
    fprintf(stderr, "bench_launch: --big must be 16 B to 1 GiB\n");
    return 2;
  }
  if (B.count < 1 || B.count > ((size_t)1 << 24)) {
    fprintf(stderr, "bench_launch: --count must be 1 to 16777216 float32s\n");
    return 2;
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 2) {
    printf("SKIP: bench_launch needs 2 GPUs (found %d)\n", ndev);
    return 77;
  }
  B.n = ndev < MAXG ? ndev : MAXG;
  const char *pdl = getenv("P2PKIT_PDL");
  printf("bench_launch: %d GPUs, %d calls per timing, all-reduce of %zu B, P2PKIT_PDL=%s\n", B.n,
         B.iters, B.count * sizeof(float), pdl ? pdl : "(unset)");
  for (int r = 0; r < B.n; r++) {
    B.dev[r] = r;
    cudaSetDevice(r);
    if (cudaStreamCreateWithFlags(&B.s[r], cudaStreamNonBlocking) != cudaSuccess ||
        cudaMalloc((void **)&B.in[r], B.count * sizeof(float)) != cudaSuccess ||
        cudaMalloc((void **)&B.out[r], B.count * sizeof(float)) != cudaSuccess) {
      fprintf(stderr, "bench_launch: GPU %d: %s\n", r, cudaGetErrorString(cudaGetLastError()));
      return 1;
    }
    float *v = malloc(B.count * sizeof *v);
    if (!v) return 1;
    for (size_t i = 0; i < B.count; i++) v[i] = (float)(1 + r);
    cudaMemcpy(B.in[r], v, B.count * sizeof *v, cudaMemcpyHostToDevice);
    free(v);
  }
  if (p2pkit_comm_init_all(B.comm, B.n, B.dev) != P2PKIT_SUCCESS) {
    fprintf(stderr, "bench_launch: comm_init_all: %s\n", p2pkit_last_error());
    return 1;
  }
  double t[REPS];
  int rc = 0;

  /* cudaSetDevice alternating between GPU 0 and 1. */
  for (int k = 0; k < REPS; k++) {
    double t0 = cu_now();
    for (int i = 0; i < B.iters; i++) cudaSetDevice(B.dev[i & 1]);
    t[k] = (cu_now() - t0) / B.iters;
  }
  report("set_device", t, REPS);

  /* Fill kernels on GPU 0. */
  void *fbuf = NULL;
  cudaSetDevice(B.dev[0]);
  if (cudaMalloc(&fbuf, 64) != cudaSuccess) return 1;
  int q = B.iters < 200 ? B.iters : 200; /* few enough that the launch queue never fills */
  for (int k = 0; k < REPS; k++) {
    if (sync_all(&B)) return 1;
    double t0 = cu_now();
    for (int i = 0; i < q; i++) p2pk_launch_fill(fbuf, 16, 1, (uint32_t)i, B.s[0]);
    t[k] = (cu_now() - t0) / q;
  }
  report("fill_host", t, REPS);
  if (eager_fills(&B, fbuf, 16, B.iters, t)) return 1;
  report("fill_eager", t, REPS);
  double g = graph_time(&B, B.iters, 1, fbuf, 16);
  if (g > 0) printf("%-12s %8.3f us\n", "fill_graph", g * 1e6);
  else rc = 1;

  /* A kernel far longer than its launch: eager against a graph. */
  void *bbuf = NULL;
  if (cudaMalloc(&bbuf, B.big) != cudaSuccess) return 1;
  if (eager_fills(&B, bbuf, B.big, q, t)) return 1;
  report("big_eager", t, REPS);
  g = graph_time(&B, q, 1, bbuf, B.big);
  if (g > 0) printf("%-12s %8.3f us   (%zu B fills)\n", "big_graph", g * 1e6, B.big);
  else rc = 1;
  double th[REPS];
  if (graph1_fills(&B, bbuf, B.big, q, t, th)) {
    rc = 1;
  } else {
    report("big_graph1", t, REPS);
    report("  host", th, REPS);
  }
  cudaFree(bbuf);

  /* 8-byte all-reduce. */
  for (int w = 0; w < 50; w++)
    if (ar_step(&B)) return 1;
  if (sync_all(&B) || ar_check(&B, "warm-up")) return 1;
  for (int k = 0; k < REPS; k++) {
    double host = 0;
    for (int i = 0; i < q; i++) {
      double t0 = cu_now();
      if (p2pkit_all_reduce(B.in[0], B.out[0], B.count, P2PKIT_FLOAT32, P2PKIT_SUM, B.comm[0],
                            (p2pkit_stream_t)B.s[0]) != P2PKIT_SUCCESS)
        return 1;
      host += cu_now() - t0;
      for (int r = 1; r < B.n; r++)
        if (p2pkit_all_reduce(B.in[r], B.out[r], B.count, P2PKIT_FLOAT32, P2PKIT_SUM, B.comm[r],
                              (p2pkit_stream_t)B.s[r]) != P2PKIT_SUCCESS)
          return 1;
    }
    if (sync_all(&B)) return 1;
    t[k] = host / q;
  }
  report("ar_host", t, REPS);
  if (sr_host(&B, q, t)) return 1;
  report("sr_host", t, REPS);
  for (int k = 0; k < REPS; k++) {
    double t0 = cu_now();
    for (int i = 0; i < B.iters; i++)
      if (ar_step(&B)) return 1;
    if (sync_all(&B)) return 1;
    t[k] = (cu_now() - t0) / B.iters;
  }
  report("ar_eager", t, REPS);
  ktrace_print(&B, "eager");
  if (ar_check(&B, "eager")) rc = 1;
  if (threaded(&B, q)) rc = 1;
  g = graph_time(&B, B.iters, 0, NULL, 0);
  if (g > 0) printf("%-12s %8.3f us\n", "ar_graph", g * 1e6);
  else rc = 1;
  ktrace_print(&B, "graph");
  if (ar_check(&B, "graph")) rc = 1;

  for (int r = 0; r < B.n; r++) p2pkit_comm_destroy(B.comm[r]);
  cudaSetDevice(B.dev[0]);
  cudaFree(fbuf);
  for (int r = 0; r < B.n; r++) {
    cudaSetDevice(B.dev[r]);
    cudaFree(B.in[r]);
    cudaFree(B.out[r]);
    cudaStreamDestroy(B.s[r]);
  }
  printf("bench_launch: %s\n", rc ? "FAILED" : "all-reduce results checked");
  return rc;
}
