/* SPDX-License-Identifier: BSD-3-Clause */
/* Running the benchmark on the GPUs. Per size: allocate each pair's buffers
 * once; per measurement: fill the source with a pattern of (seed, offset,
 * measurement), poison the destination, warm up, time each run with CUDA
 * events (the stream held by a gate kernel until every copy is queued), then
 * count mismatching bytes on the device. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/bench_kernels.h"
#include "core/check.h"
#include "xfer/xfer_kernels.h"

int p2pk_bench_fail_alloc;
int p2pk_bench_fail_sweep;

#define POISON 0xA5
#define GATE_TIMEOUT_NS 2000000000ull
#define PINGPONG_TIMEOUT_NS 2000000000ull

typedef struct {
  int src, dst;
  void *sbuf, *dbuf;
  cudaStream_t stream; /* on src */
  cudaEvent_t ev_go, ev_start, ev_stop, ev_end; /* on src */
} bpair;

typedef struct {
  const p2pk_bench_opts *o;
  p2pkit_ctx_t ctx;
  struct p2pkit_topo *topo;
  p2pk_bench_report *r;
  bpair *pairs; /* buffers' universe: plan pairs, plus reverses for both-ways */
  int npairs;
  uint32_t *gate; /* mapped pinned: [0] flag, [1] timed out */
  uint32_t gate_seq;
  unsigned long long *counter[P2PK_MAX_GPUS];
  uint32_t measurement;
  size_t bytes;
  int progress, step, nsteps;
} brun;

/* --- allocation -------------------------------------------------------------- */

static int injected_failure(void) {
  return p2pk_bench_fail_alloc > 0 && --p2pk_bench_fail_alloc == 0;
}

static p2pkit_status_t dev_alloc(int dev, size_t bytes, void **p, const char *what) {
  char sz[32];
  p2pk_bench_fmt_size(bytes, sz, sizeof sz);
  if (injected_failure())
    return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory allocating %s (%s) on GPU%d (injected)",
                     what, sz, dev);
  P2PK_CUDA_CHECK(cudaSetDevice(dev));
  cudaError_t e = cudaMalloc(p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    *p = NULL;
    return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory allocating %s (%s) on GPU%d: %s", what,
                     sz, dev, cudaGetErrorString(e));
  }
  return P2PKIT_SUCCESS;
}

static void dev_free(int dev, void **p) {
  if (!*p) return;
  cudaSetDevice(dev);
  cudaFree(*p);
  *p = NULL;
}

static p2pkit_status_t alloc_buffers(brun *b, size_t bytes) {
  for (int i = 0; i < b->npairs; i++) {
    bpair *p = &b->pairs[i];
    P2PK_CHECK(dev_alloc(p->src, bytes, &p->sbuf, "a source buffer"));
    P2PK_CHECK(dev_alloc(p->dst, bytes, &p->dbuf, "a destination buffer"));
  }
  b->bytes = bytes;
  return P2PKIT_SUCCESS;
}

static void free_buffers(brun *b) {
  for (int i = 0; i < b->npairs; i++) {
    dev_free(b->pairs[i].src, &b->pairs[i].sbuf);
    dev_free(b->pairs[i].dst, &b->pairs[i].dbuf);
  }
  b->bytes = 0;
}

static int in_universe(const brun *b, int s, int d) {
  for (int i = 0; i < b->npairs; i++)
    if (b->pairs[i].src == s && b->pairs[i].dst == d) return i;
  return -1;
}

static p2pkit_status_t setup(brun *b) {
  const p2pk_bench_opts *o = b->o;
  int both = (o->modes >> P2PK_MODE_BOTH) & 1;
  b->pairs = calloc((size_t)o->npairs * 2, sizeof *b->pairs);
  if (!b->pairs) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory");
  for (int i = 0; i < o->npairs; i++)
    for (int rev = 0; rev <= both; rev++) {
      int s = o->pairs[i][rev], d = o->pairs[i][!rev];
      if (in_universe(b, s, d) >= 0) continue;
      bpair *p = &b->pairs[b->npairs++];
      p->src = s;
      p->dst = d;
      P2PK_CUDA_CHECK(cudaSetDevice(s));
      P2PK_CUDA_CHECK(cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking));
      P2PK_CUDA_CHECK(cudaEventCreate(&p->ev_go));
      P2PK_CUDA_CHECK(cudaEventCreate(&p->ev_start));
      P2PK_CUDA_CHECK(cudaEventCreate(&p->ev_stop));
      P2PK_CUDA_CHECK(cudaEventCreate(&p->ev_end));
    }
  for (int i = 0; i < b->npairs; i++)
    for (int k = 0; k < 2; k++) {
      int d = k ? b->pairs[i].dst : b->pairs[i].src;
      if (!b->counter[d]) P2PK_CHECK(dev_alloc(d, sizeof(unsigned long long), (void **)&b->counter[d], "a counter"));
    }
  if (injected_failure())
    return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory pinning the timing gate (injected)");
  void *g = NULL;
  P2PK_CUDA_CHECK(cudaHostAlloc(&g, 64, cudaHostAllocMapped | cudaHostAllocPortable));
  b->gate = g;
  memset(b->gate, 0, 64);
  return P2PKIT_SUCCESS;
}

static void teardown(brun *b) {
  free_buffers(b);
  for (int i = 0; i < b->npairs; i++) {
    bpair *p = &b->pairs[i];
    cudaSetDevice(p->src);
    if (p->stream) {
      cudaStreamSynchronize(p->stream);
      cudaStreamDestroy(p->stream);
    }
    cudaEvent_t *ev[] = {&p->ev_go, &p->ev_start, &p->ev_stop, &p->ev_end};
    for (size_t k = 0; k < 4; k++)
      if (*ev[k]) cudaEventDestroy(*ev[k]);
  }
  for (int d = 0; d < P2PK_MAX_GPUS; d++) dev_free(d, (void **)&b->counter[d]);
  if (b->gate) cudaFreeHost(b->gate);
  b->gate = NULL;
  free(b->pairs);
  b->pairs = NULL;
  cudaGetLastError();
}

/* --- progress ---------------------------------------------------------------- */

static void progress(brun *b, const char *what) {
  b->step++;
  if (!b->progress) return;
  fprintf(stderr, "\r\033[K[%d/%d] %s", b->step, b->nsteps, what);
  fflush(stderr);
}

static void progress_done(brun *b) {
  if (b->progress) fputs("\r\033[K", stderr);
}

/* --- one timed measurement ------------------------------------------------------ */

static p2pkit_status_t sync_pair(const bpair *p) {
  P2PK_CUDA_CHECK(cudaSetDevice(p->src));
  P2PK_CUDA_CHECK(cudaDeviceSynchronize());
  P2PK_CUDA_CHECK(cudaSetDevice(p->dst));
  P2PK_CUDA_CHECK(cudaDeviceSynchronize());
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t issue(brun *b, int method, const bpair *p, size_t bytes,
                             const p2pk_copy_opts *opts) {
  if (method == P2PK_BM_MEMCPY_PEER) {
    P2PK_CUDA_CHECK(cudaSetDevice(p->src));
    P2PK_CUDA_CHECK(cudaMemcpyPeerAsync(p->dbuf, p->dst, p->sbuf, p->src, bytes, p->stream));
    return P2PKIT_SUCCESS;
  }
  return p2pk_copy_ex(b->ctx, p->dbuf, p->dst, p->sbuf, p->src, bytes, p->stream,
                      p2pk_bench_method_path(method), opts);
}

/* Peer access for the raw anchor; off for the driver's fallback. */
static p2pkit_status_t peer_setup(brun *b, int method, bpair **g, int ng, int *was_on) {
  for (int k = 0; k < ng; k++) {
    if (method == P2PK_BM_MEMCPY_PEER)
      P2PK_CHECK(p2pk_ctx_peer(b->ctx, g[k]->src, g[k]->dst, P2PKIT_PATH_P2P_CE));
    if (method == P2PK_BM_DRIVER) {
      P2PK_CHECK(p2pk_peer_suspend(g[k]->src, g[k]->dst, &was_on[2 * k]));
      P2PK_CHECK(p2pk_peer_suspend(g[k]->dst, g[k]->src, &was_on[2 * k + 1]));
    }
  }
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t peer_restore(int method, bpair **g, int ng, const int *was_on) {
  p2pkit_status_t st = P2PKIT_SUCCESS;
  if (method != P2PK_BM_DRIVER) return st;
  for (int k = 0; k < ng; k++) {
    if (was_on[2 * k] && st == P2PKIT_SUCCESS) st = p2pk_peer_resume(g[k]->src, g[k]->dst);
    if (was_on[2 * k + 1] && st == P2PKIT_SUCCESS) st = p2pk_peer_resume(g[k]->dst, g[k]->src);
  }
  return st;
}

/* Release the gate (if closed) and wait for everything queued on the group. */
static void drain(brun *b, bpair **g, int ng) {
  if (b->gate) __atomic_store_n(&b->gate[0], b->gate_seq, __ATOMIC_RELEASE);
  for (int k = 0; k < ng; k++) {
    cudaSetDevice(g[k]->src);
    cudaStreamSynchronize(g[k]->stream);
  }
}

/* One timed run of the group. Gated: every stream is held by its own gate
 * kernel, all released by one host store once everything is queued, so the
 * copies start together and the group's time is its slowest copy's (each
 * timed on its own device). Not gated: the lead's event starts the others,
 * and the group's time runs from it to the last copy's end (the lead's
 * stream waits for every copy). Why the slowest copy: summing each pair's
 * rate counted early finishers while the rest still ran (4x H200: 1781
 * GB/s for 12 pairs, over the 4 x 392 the GPUs can send), and timing from
 * the lead's start also timed its wait for the other GPUs' events
 * (docs/decisions/bench-group-timing.md). */
static p2pkit_status_t one_run(brun *b, int method, bpair **g, int ng, size_t bytes,
                               const p2pk_copy_opts *opts, int gated, double *us, double *total_us) {
  bpair *lead = g[0];
  if (gated) {
    b->gate[1] = 0;
    b->gate_seq++;
    for (int k = 0; k < ng; k++) {
      P2PK_CUDA_CHECK(cudaSetDevice(g[k]->src));
      cudaError_t e = p2pk_launch_gate(&b->gate[0], b->gate_seq, &b->gate[1], GATE_TIMEOUT_NS,
                                       g[k]->stream);
      if (e != cudaSuccess)
        return p2pk_fail(P2PKIT_ERR_CUDA, "timing gate on GPU%d: %s", g[k]->src,
                         cudaGetErrorString(e));
    }
  }
  P2PK_CUDA_CHECK(cudaSetDevice(lead->src));
  P2PK_CUDA_CHECK(cudaEventRecord(lead->ev_go, lead->stream));
  for (int k = 1; k < ng && !gated; k++) {
    P2PK_CUDA_CHECK(cudaSetDevice(g[k]->src));
    P2PK_CUDA_CHECK(cudaStreamWaitEvent(g[k]->stream, lead->ev_go, 0));
  }
  for (int k = 0; k < ng; k++) {
    P2PK_CUDA_CHECK(cudaSetDevice(g[k]->src));
    P2PK_CUDA_CHECK(cudaEventRecord(g[k]->ev_start, g[k]->stream));
    P2PK_CHECK(issue(b, method, g[k], bytes, opts));
    P2PK_CUDA_CHECK(cudaSetDevice(g[k]->src));
    P2PK_CUDA_CHECK(cudaEventRecord(g[k]->ev_stop, g[k]->stream));
  }
  P2PK_CUDA_CHECK(cudaSetDevice(lead->src));
  for (int k = 1; k < ng; k++) P2PK_CUDA_CHECK(cudaStreamWaitEvent(lead->stream, g[k]->ev_stop, 0));
  P2PK_CUDA_CHECK(cudaEventRecord(lead->ev_end, lead->stream));
  if (gated) __atomic_store_n(&b->gate[0], b->gate_seq, __ATOMIC_RELEASE);
  P2PK_CUDA_CHECK(cudaEventSynchronize(lead->ev_end));
  if (gated && __atomic_load_n(&b->gate[1], __ATOMIC_ACQUIRE))
    return p2pk_fail(P2PKIT_ERR_TIMEOUT, "the timing gate timed out before the copies were "
                     "queued (the driver blocked the host); run with --no-gate");
  double slowest = 0;
  for (int k = 0; k < ng; k++) {
    float ms = 0;
    P2PK_CUDA_CHECK(cudaSetDevice(g[k]->src));
    P2PK_CUDA_CHECK(cudaEventElapsedTime(&ms, g[k]->ev_start, g[k]->ev_stop));
    us[k] = ms * 1000.0;
    if (us[k] > slowest) slowest = us[k];
  }
  if (gated) {
    *total_us = slowest;
    return P2PKIT_SUCCESS;
  }
  float ms = 0;
  P2PK_CUDA_CHECK(cudaSetDevice(lead->src));
  P2PK_CUDA_CHECK(cudaEventElapsedTime(&ms, lead->ev_go, lead->ev_end));
  *total_us = ms * 1000.0;
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t prepare_data(brun *b, bpair **g, int ng, size_t bytes, uint32_t iter) {
  for (int k = 0; k < ng; k++) {
    P2PK_CUDA_CHECK(cudaSetDevice(g[k]->src));
    cudaError_t e = p2pk_launch_fill(g[k]->sbuf, bytes, b->o->seed, iter, 0);
    if (e != cudaSuccess)
      return p2pk_fail(P2PKIT_ERR_CUDA, "filling GPU%d: %s", g[k]->src, cudaGetErrorString(e));
    P2PK_CUDA_CHECK(cudaSetDevice(g[k]->dst));
    P2PK_CUDA_CHECK(cudaMemset(g[k]->dbuf, POISON, bytes));
  }
  for (int k = 0; k < ng; k++) P2PK_CHECK(sync_pair(g[k]));
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t verify(brun *b, const bpair *p, const void *dbuf, size_t bytes,
                              uint32_t iter, uint64_t *bad) {
  unsigned long long n = 0, *c = b->counter[p->dst];
  P2PK_CUDA_CHECK(cudaSetDevice(p->dst));
  P2PK_CUDA_CHECK(cudaMemset(c, 0, sizeof *c));
  cudaError_t e = p2pk_launch_verify(dbuf, bytes, b->o->seed, iter, c, 0);
  if (e != cudaSuccess)
    return p2pk_fail(P2PKIT_ERR_CUDA, "verifying on GPU%d: %s", p->dst, cudaGetErrorString(e));
  P2PK_CUDA_CHECK(cudaMemcpy(&n, c, sizeof n, cudaMemcpyDeviceToHost));
  *bad = n;
  return P2PKIT_SUCCESS;
}

typedef struct {
  double *us;       /* [ng * iters] */
  double *total_us; /* [iters] */
  uint64_t *bad;    /* [ng] */
} timing;

/* Warm up, time `iters` runs, verify. */
static p2pkit_status_t measure(brun *b, int method, bpair **g, int ng, size_t bytes,
                               const p2pk_copy_opts *opts, int iters, int warmup, timing *t) {
  uint32_t iter = ++b->measurement;
  P2PK_CHECK(prepare_data(b, g, ng, bytes, iter));
  int *was_on = calloc((size_t)ng * 2, sizeof *was_on);
  double *run_us = malloc((size_t)ng * sizeof *run_us);
  if (!was_on || !run_us) {
    free(was_on);
    free(run_us);
    return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory");
  }
  /* The driver may block the host while it stages: never hold its stream. */
  int gated = b->o->gate && method != P2PK_BM_DRIVER;
  p2pkit_status_t st = peer_setup(b, method, g, ng, was_on);
  for (int w = 0; w < warmup && st == P2PKIT_SUCCESS; w++)
    for (int k = 0; k < ng && st == P2PKIT_SUCCESS; k++) st = issue(b, method, g[k], bytes, opts);
  if (st == P2PKIT_SUCCESS)
    for (int k = 0; k < ng && st == P2PKIT_SUCCESS; k++) st = sync_pair(g[k]);
  for (int it = 0; it < iters && st == P2PKIT_SUCCESS; it++) {
    st = one_run(b, method, g, ng, bytes, opts, gated, run_us, &t->total_us[it]);
    for (int k = 0; k < ng && st == P2PKIT_SUCCESS; k++) t->us[k * iters + it] = run_us[k];
  }
  if (st != P2PKIT_SUCCESS) drain(b, g, ng);
  p2pkit_status_t st2 = peer_restore(method, g, ng, was_on);
  if (st == P2PKIT_SUCCESS) st = st2;
  for (int k = 0; k < ng && st == P2PKIT_SUCCESS; k++) st = verify(b, g[k], g[k]->dbuf, bytes, iter, &t->bad[k]);
  free(was_on);
  free(run_us);
  return st;
}

/* --- rows -------------------------------------------------------------------------- */

static void fill_row(brun *b, p2pk_bench_row *x, int method, int mode, const bpair *p, size_t bytes) {
  p2pkit_pair_t pair;
  p2pk_pair_info(b->topo, p->src, p->dst, &pair);
  x->method = method;
  x->mode = mode;
  x->src = p->src;
  x->dst = p->dst;
  x->bytes = bytes;
  x->npairs = 1;
  x->link = pair.link;
  snprintf(x->label, sizeof x->label, "%s", pair.label);
  p2pk_bench_expected(&pair, p2pk_bench_pair_pcie(b->topo, p->src, p->dst), method, &x->line_gbps,
                      &x->expected_gbps);
  if (method == P2PK_BM_MEMCPY_PEER)
    snprintf(x->path, sizeof x->path, "cudaMemcpyPeerAsync (peer access on)");
  else if (method == P2PK_BM_DRIVER)
    snprintf(x->path, sizeof x->path, "cudaMemcpyPeerAsync (peer access off)");
  else
    p2pk_path_describe(&pair, p2pk_bench_method_path(method), NULL, x->path, sizeof x->path);
}

static void set_stats(p2pk_bench_row *x, double *us, int n, size_t bytes_moved) {
  p2pk_stats_compute(us, n, &x->us);
  if (x->us.median > 0) x->gbps = (double)bytes_moved / (x->us.median * 1e3);
  if (x->us.max > 0) x->gbps_min = (double)bytes_moved / (x->us.max * 1e3);
  if (x->us.min > 0) x->gbps_max = (double)bytes_moved / (x->us.min * 1e3);
}

/* Why a method cannot run on a pair here ("" when it can). */
static int skip_reason(brun *b, int method, const bpair *p, char *why, size_t len) {
  if (!p2pk_bench_method_p2p(method)) return 0;
  p2pkit_pair_t pair;
  p2pk_pair_info(b->topo, p->src, p->dst, &pair);
  if (p2pk_p2p_allowed(&pair, p2pk_ctx_settings(b->ctx), why, len)) return 0;
  return 1;
}

static p2pkit_status_t run_group(brun *b, int method, int mode, bpair **g, int ng, size_t bytes) {
  const p2pk_bench_opts *o = b->o;
  int first = b->r->nrows;
  for (int k = 0; k < ng; k++) {
    p2pk_bench_row *x = p2pk_bench_add_row(b->r);
    if (!x) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory");
    fill_row(b, x, method, mode, g[k], bytes);
  }
  if (mode != P2PK_MODE_ONEWAY) {
    p2pk_bench_row *x = p2pk_bench_add_row(b->r);
    if (!x) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory");
    fill_row(b, x, method, mode, g[0], bytes);
    x->total = 1;
    x->npairs = ng;
    if (mode == P2PK_MODE_ALL) {
      x->src = x->dst = -1;
      x->line_gbps = x->expected_gbps = 0;
      snprintf(x->label, sizeof x->label, "-");
    }
  }
  int last = b->r->nrows;
  char why[192] = "";
  for (int k = 0; k < ng; k++)
    if (skip_reason(b, method, g[k], why, sizeof why)) break;
  if (why[0]) {
    for (int i = first; i < last; i++) {
      b->r->rows[i].status = P2PK_ROW_SKIPPED;
      snprintf(b->r->rows[i].note, sizeof b->r->rows[i].note, "%s", why);
    }
    return P2PKIT_SUCCESS;
  }
  timing t = {calloc((size_t)ng * (size_t)o->iters, sizeof(double)),
              calloc((size_t)o->iters, sizeof(double)), calloc((size_t)ng, sizeof(uint64_t))};
  p2pkit_status_t st = P2PKIT_SUCCESS;
  if (!t.us || !t.total_us || !t.bad) st = p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory");
  if (st == P2PKIT_SUCCESS) st = measure(b, method, g, ng, bytes, NULL, o->iters, o->warmup, &t);
  if (st == P2PKIT_SUCCESS) {
    uint64_t bad_all = 0;
    for (int k = 0; k < ng; k++) {
      p2pk_bench_row *x = &b->r->rows[first + k];
      set_stats(x, t.us + (size_t)k * (size_t)o->iters, o->iters, bytes);
      x->mismatches = t.bad[k];
      x->verified = t.bad[k] == 0;
      bad_all += t.bad[k];
    }
    if (mode != P2PK_MODE_ONEWAY) {
      p2pk_bench_row *x = &b->r->rows[last - 1];
      set_stats(x, t.total_us, o->iters, bytes * (size_t)ng);
      x->mismatches = bad_all;
      x->verified = bad_all == 0;
    }
  } else {
    for (int i = first; i < last; i++) {
      b->r->rows[i].status = P2PK_ROW_FAILED;
      snprintf(b->r->rows[i].note, sizeof b->r->rows[i].note, "%s", p2pkit_last_error());
    }
    /* A path this pair cannot take here: say so and go on. */
    if (st == P2PKIT_ERR_UNSUPPORTED) st = P2PKIT_SUCCESS;
  }
  free(t.us);
  free(t.total_us);
  free(t.bad);
  return st;
}

static p2pkit_status_t run_size(brun *b, size_t bytes) {
  const p2pk_bench_opts *o = b->o;
  bpair **g = malloc((size_t)b->npairs * sizeof *g);
  if (!g) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory");
  p2pkit_status_t st = alloc_buffers(b, bytes);
  char sz[32], what[160];
  p2pk_bench_fmt_size(bytes, sz, sizeof sz);
  for (int mode = 0; mode < P2PK_MODE_COUNT && st == P2PKIT_SUCCESS; mode++) {
    if (!((o->modes >> mode) & 1)) continue;
    for (int m = 0; m < P2PK_BM_COUNT && st == P2PKIT_SUCCESS; m++) {
      if (!((o->methods >> m) & 1)) continue;
      if (mode == P2PK_MODE_ALL) {
        for (int i = 0; i < o->npairs; i++) g[i] = &b->pairs[in_universe(b, o->pairs[i][0], o->pairs[i][1])];
        snprintf(what, sizeof what, "%s all pairs %s", sz, p2pk_bench_method_name(m));
        progress(b, what);
        st = run_group(b, m, mode, g, o->npairs, bytes);
        continue;
      }
      for (int i = 0; i < o->npairs && st == P2PKIT_SUCCESS; i++) {
        int s = o->pairs[i][0], d = o->pairs[i][1];
        g[0] = &b->pairs[in_universe(b, s, d)];
        int ng = 1;
        if (mode == P2PK_MODE_BOTH) {
          /* Each unordered pair once, led by its lower GPU. */
          int ri = -1;
          for (int k = 0; k < o->npairs; k++)
            if (o->pairs[k][0] == d && o->pairs[k][1] == s) ri = k;
          if (ri >= 0 && ri < i) continue;
          if (s > d) g[0] = &b->pairs[in_universe(b, d, s)];
          g[1] = &b->pairs[in_universe(b, g[0]->dst, g[0]->src)];
          ng = 2;
        }
        snprintf(what, sizeof what, "%s %s %s %d%s%d", sz, p2pk_bench_mode_name(mode),
                 p2pk_bench_method_name(m), g[0]->src, ng == 2 ? "<->" : "->", g[0]->dst);
        progress(b, what);
        st = run_group(b, m, mode, g, ng, bytes);
      }
    }
  }
  free_buffers(b);
  free(g);
  return st;
}

/* --- latency ------------------------------------------------------------------------ */

typedef struct {
  int src, dst;
  void *s, *d;          /* lat_bytes each */
  void *slot_s, *slot_d; /* ping-pong slots (256 bytes) on src and dst */
  unsigned long long *out_s, *out_d;
  cudaStream_t st_d;     /* a stream on dst for the responder */
} lat_bufs;

static void lat_free(lat_bufs *l) {
  dev_free(l->src, &l->s);
  dev_free(l->dst, &l->d);
  dev_free(l->src, &l->slot_s);
  dev_free(l->dst, &l->slot_d);
  dev_free(l->src, (void **)&l->out_s);
  dev_free(l->dst, (void **)&l->out_d);
  if (l->st_d) {
    cudaSetDevice(l->dst);
    cudaStreamSynchronize(l->st_d);
    cudaStreamDestroy(l->st_d);
    l->st_d = NULL;
  }
}

static p2pkit_status_t lat_alloc(lat_bufs *l, size_t bytes) {
  P2PK_CHECK(dev_alloc(l->src, bytes, &l->s, "a latency buffer"));
  P2PK_CHECK(dev_alloc(l->dst, bytes, &l->d, "a latency buffer"));
  P2PK_CHECK(dev_alloc(l->src, 256, &l->slot_s, "a flag slot"));
  P2PK_CHECK(dev_alloc(l->dst, 256, &l->slot_d, "a flag slot"));
  P2PK_CHECK(dev_alloc(l->src, 64, (void **)&l->out_s, "a result slot"));
  P2PK_CHECK(dev_alloc(l->dst, 64, (void **)&l->out_d, "a result slot"));
  P2PK_CUDA_CHECK(cudaSetDevice(l->dst));
  P2PK_CUDA_CHECK(cudaStreamCreateWithFlags(&l->st_d, cudaStreamNonBlocking));
  return P2PKIT_SUCCESS;
}

/* Back-to-back copies of lat_bytes: time per copy, `reps` samples. */
static p2pkit_status_t lat_b2b(brun *b, const bpair *p, lat_bufs *l, int kind, p2pk_bench_lat *x,
                               double *samples) {
  const p2pk_bench_opts *o = b->o;
  static const int method_of[] = {P2PK_BM_MEMCPY_PEER, P2PK_BM_CE, P2PK_BM_SM_PUSH, P2PK_BM_STAGED};
  int method = method_of[kind];
  int count = o->lat_iters < 200 ? o->lat_iters : 200;
  bpair q = *p;
  q.sbuf = l->s;
  q.dbuf = l->d;
  uint32_t iter = ++b->measurement;
  P2PK_CUDA_CHECK(cudaSetDevice(p->src));
  cudaError_t e = p2pk_launch_fill(l->s, o->lat_bytes, o->seed, iter, 0);
  if (e != cudaSuccess) return p2pk_fail(P2PKIT_ERR_CUDA, "fill: %s", cudaGetErrorString(e));
  P2PK_CUDA_CHECK(cudaSetDevice(p->dst));
  P2PK_CUDA_CHECK(cudaMemset(l->d, POISON, o->lat_bytes));
  P2PK_CHECK(sync_pair(p));
  if (method == P2PK_BM_MEMCPY_PEER) P2PK_CHECK(p2pk_ctx_peer(b->ctx, p->src, p->dst, P2PKIT_PATH_P2P_CE));
  for (int w = 0; w < 10; w++) P2PK_CHECK(issue(b, method, &q, o->lat_bytes, NULL));
  for (int r = 0; r < o->iters; r++) {
    P2PK_CUDA_CHECK(cudaSetDevice(p->src));
    P2PK_CUDA_CHECK(cudaEventRecord(p->ev_start, p->stream));
    for (int c = 0; c < count; c++) P2PK_CHECK(issue(b, method, &q, o->lat_bytes, NULL));
    P2PK_CUDA_CHECK(cudaSetDevice(p->src));
    P2PK_CUDA_CHECK(cudaEventRecord(p->ev_stop, p->stream));
    P2PK_CUDA_CHECK(cudaEventSynchronize(p->ev_stop));
    float ms = 0;
    P2PK_CUDA_CHECK(cudaEventElapsedTime(&ms, p->ev_start, p->ev_stop));
    samples[r] = ms * 1000.0 / count;
  }
  P2PK_CHECK(sync_pair(p));
  P2PK_CHECK(verify(b, p, l->d, o->lat_bytes, iter, &x->mismatches));
  x->count = count;
  p2pk_stats_compute(samples, o->iters, &x->us);
  x->verified = x->mismatches == 0;
  snprintf(x->note, sizeof x->note, "%d copies back to back per sample, host enqueue included", count);
  return P2PKIT_SUCCESS;
}

/* SM write of 8 bytes + flag to the peer, answered the same way. */
static p2pkit_status_t lat_flag(brun *b, const bpair *p, lat_bufs *l, p2pk_bench_lat *x,
                                double *samples) {
  const p2pk_bench_opts *o = b->o;
  P2PK_CHECK(p2pk_ctx_peer(b->ctx, p->src, p->dst, P2PKIT_PATH_P2P_CE));
  double *gt = calloc((size_t)o->iters, sizeof *gt);
  if (!gt) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory");
  p2pkit_status_t st = P2PKIT_SUCCESS;
  uint64_t bad = 0, timeouts = 0;
  int iters = o->lat_iters < 10 ? 10 : o->lat_iters;
  for (int r = -1; r < o->iters && st == P2PKIT_SUCCESS; r++) { /* r = -1: warm-up */
    unsigned long long hs[4] = {0}, hd[4] = {0};
    /* Zeroed and finished before either kernel starts: they run on
     * non-blocking streams, which do not wait for the legacy stream. */
    P2PK_CUDA_CHECK_GOTO(cudaSetDevice(p->src), st, out);
    P2PK_CUDA_CHECK_GOTO(cudaMemset(l->slot_s, 0, 256), st, out);
    P2PK_CUDA_CHECK_GOTO(cudaDeviceSynchronize(), st, out);
    P2PK_CUDA_CHECK_GOTO(cudaSetDevice(p->dst), st, out);
    P2PK_CUDA_CHECK_GOTO(cudaMemset(l->slot_d, 0, 256), st, out);
    P2PK_CUDA_CHECK_GOTO(cudaDeviceSynchronize(), st, out);
    cudaError_t e = p2pk_launch_pingpong(l->slot_s, l->slot_d, iters, 0, o->seed, l->out_d,
                                         PINGPONG_TIMEOUT_NS, l->st_d);
    if (e != cudaSuccess) {
      st = p2pk_fail(P2PKIT_ERR_CUDA, "ping-pong on GPU%d: %s", p->dst, cudaGetErrorString(e));
      goto out;
    }
    P2PK_CUDA_CHECK_GOTO(cudaSetDevice(p->src), st, out);
    P2PK_CUDA_CHECK_GOTO(cudaEventRecord(p->ev_start, p->stream), st, out);
    e = p2pk_launch_pingpong(l->slot_d, l->slot_s, iters, 1, o->seed, l->out_s, PINGPONG_TIMEOUT_NS,
                             p->stream);
    if (e != cudaSuccess) {
      st = p2pk_fail(P2PKIT_ERR_CUDA, "ping-pong on GPU%d: %s", p->src, cudaGetErrorString(e));
      goto out;
    }
    P2PK_CUDA_CHECK_GOTO(cudaEventRecord(p->ev_stop, p->stream), st, out);
    P2PK_CUDA_CHECK_GOTO(cudaEventSynchronize(p->ev_stop), st, out);
    P2PK_CUDA_CHECK_GOTO(cudaMemcpy(hs, l->out_s, sizeof hs, cudaMemcpyDeviceToHost), st, out);
    P2PK_CUDA_CHECK_GOTO(cudaSetDevice(p->dst), st, out);
    P2PK_CUDA_CHECK_GOTO(cudaStreamSynchronize(l->st_d), st, out);
    P2PK_CUDA_CHECK_GOTO(cudaMemcpy(hd, l->out_d, sizeof hd, cudaMemcpyDeviceToHost), st, out);
    bad += hs[0] + hd[0];
    timeouts += hs[1] + hd[1];
    if (r < 0) continue;
    float ms = 0;
    P2PK_CUDA_CHECK_GOTO(cudaEventElapsedTime(&ms, p->ev_start, p->ev_stop), st, out);
    samples[r] = ms * 1000.0 / (2.0 * iters);
    int timed = iters - iters / 10;
    gt[r] = hs[3] > hs[2] ? (double)(hs[3] - hs[2]) / 1e3 / (2.0 * timed) : 0;
  }
  x->count = iters;
  x->mismatches = bad + timeouts;
  x->verified = bad == 0 && timeouts == 0;
  p2pk_stats_compute(samples, o->iters, &x->us);
  p2pk_stats gs;
  p2pk_stats_compute(gt, o->iters, &gs);
  x->gt_us = gs.median;
  snprintf(x->note, sizeof x->note, "%d round trips per launch%s", iters,
           timeouts ? "; the peer stopped answering" : "");
out:
  free(gt);
  return st;
}

static p2pkit_status_t run_latency(brun *b) {
  const p2pk_bench_opts *o = b->o;
  double *samples = calloc((size_t)o->iters, sizeof *samples);
  if (!samples) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory");
  p2pkit_status_t st = P2PKIT_SUCCESS;
  for (int i = 0; i < o->npairs && st == P2PKIT_SUCCESS; i++) {
    const bpair *p = &b->pairs[in_universe(b, o->pairs[i][0], o->pairs[i][1])];
    lat_bufs l = {.src = p->src, .dst = p->dst};
    st = lat_alloc(&l, o->lat_bytes);
    for (int k = 0; k < P2PK_LAT_COUNT && st == P2PKIT_SUCCESS; k++) {
      char what[96];
      snprintf(what, sizeof what, "latency %s %d->%d", p2pk_bench_lat_name(k), p->src, p->dst);
      progress(b, what);
      p2pk_bench_lat *x = p2pk_bench_add_lat(b->r);
      if (!x) {
        st = p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory");
        break;
      }
      x->kind = k;
      x->src = p->src;
      x->dst = p->dst;
      x->bytes = k == P2PK_LAT_FLAG ? 8 : o->lat_bytes;
      char why[160];
      int method = k == P2PK_LAT_STAGED ? P2PK_BM_STAGED : P2PK_BM_CE;
      if (skip_reason(b, method, p, why, sizeof why)) {
        x->status = P2PK_ROW_SKIPPED;
        snprintf(x->note, sizeof x->note, "%s", why);
        continue;
      }
      st = k == P2PK_LAT_FLAG ? lat_flag(b, p, &l, x, samples) : lat_b2b(b, p, &l, k, x, samples);
      if (st != P2PKIT_SUCCESS) {
        x->status = P2PK_ROW_FAILED;
        snprintf(x->note, sizeof x->note, "%s", p2pkit_last_error());
      }
    }
    if (st != P2PKIT_SUCCESS) drain(b, (bpair *[]){(bpair *)p}, 1);
    lat_free(&l);
  }
  free(samples);
  return st;
}

/* --- sweeps --------------------------------------------------------------------------- */

static int injected_sweep_failure(void) {
  if (p2pk_bench_fail_sweep < 0) return 1;
  return p2pk_bench_fail_sweep > 0 && --p2pk_bench_fail_sweep == 0;
}

/* After a configuration failed: can both GPUs still run work? A launch
 * refused (bad shape, too much shared memory) leaves nothing behind; a
 * fault is sticky and every later call would fail too. */
static int pair_usable(const bpair *p) {
  for (int k = 0; k < 2; k++) {
    if (cudaSetDevice(k ? p->dst : p->src) != cudaSuccess) return 0;
    if (cudaDeviceSynchronize() != cudaSuccess) return 0;
  }
  return 1;
}

/* One configuration. Its failure is recorded in x and the sweep goes on
 * (P2PKIT_SUCCESS) while the GPUs can still run work; otherwise the error. */
static p2pkit_status_t sweep_one(brun *b, bpair *p, int method, const p2pk_copy_opts *opts,
                                 p2pk_bench_sweep *x) {
  const p2pk_bench_opts *o = b->o;
  int iters = o->iters < 10 ? o->iters : 10;
  double us[10] = {0}, total[10] = {0};
  uint64_t bad = 0;
  timing t = {us, total, &bad};
  bpair *g[1] = {p};
  p2pkit_status_t st = P2PKIT_SUCCESS;
  if (injected_sweep_failure())
    st = p2pk_fail(P2PKIT_ERR_CUDA, "%s kernel on GPU%d: invalid argument (injected)",
                   p2pk_bench_method_name(method), p->src);
  else
    st = measure(b, method, g, 1, b->bytes, opts, iters, 2, &t);
  if (st != P2PKIT_SUCCESS) {
    x->status = P2PK_ROW_FAILED;
    x->fail_status = st;
    snprintf(x->note, sizeof x->note, "%s", p2pkit_last_error());
    return pair_usable(p) ? P2PKIT_SUCCESS : st;
  }
  p2pk_stats s;
  p2pk_stats_compute(us, iters, &s);
  x->gbps = s.median > 0 ? (double)b->bytes / (s.median * 1e3) : 0;
  x->cv = s.cv;
  x->verified = bad == 0;
  return P2PKIT_SUCCESS;
}

static p2pk_bench_sweep *new_sweep(brun *b, int method, const bpair *p) {
  p2pk_bench_sweep *x = p2pk_bench_add_sweep(b->r);
  if (!x) return NULL;
  x->method = method;
  x->src = p->src;
  x->dst = p->dst;
  x->bytes = b->bytes;
  return x;
}

/* A method of which every configuration failed fails the run (with the
 * first one's error); some failing is what a sweep is for. */
static p2pkit_status_t sweeps_verdict(const p2pk_bench_report *r, int first) {
  for (int m = 0; m < P2PK_BM_COUNT; m++) {
    int ok = 0, failed = 0;
    const p2pk_bench_sweep *first_failed = NULL;
    for (int i = first; i < r->nsweeps; i++) {
      const p2pk_bench_sweep *s = &r->sweeps[i];
      if (s->method != m) continue;
      ok += s->status == P2PK_ROW_OK;
      failed += s->status == P2PK_ROW_FAILED;
      if (s->status == P2PK_ROW_FAILED && !first_failed) first_failed = s;
    }
    if (failed && !ok)
      return p2pk_fail(first_failed->fail_status ? first_failed->fail_status : P2PKIT_ERR_CUDA,
                       "every one of the %d %s sweep configurations failed; the first (%s): %s",
                       failed, p2pk_bench_method_name(m), first_failed->config, first_failed->note);
  }
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t run_sweeps(brun *b) {
  const p2pk_bench_opts *o = b->o;
  const int first = b->r->nsweeps;
  bpair *p = &b->pairs[in_universe(b, o->pairs[0][0], o->pairs[0][1])];
  P2PK_CHECK(dev_alloc(p->src, o->sizes[0], &p->sbuf, "a source buffer"));
  P2PK_CHECK(dev_alloc(p->dst, o->sizes[0], &p->dbuf, "a destination buffer"));
  b->bytes = o->sizes[0];
  p2pkit_status_t st = P2PKIT_SUCCESS;
  char why[160], what[192];
  if (o->sm_sweep && skip_reason(b, P2PK_BM_SM_PUSH, p, why, sizeof why)) {
    p2pk_bench_sweep *x = new_sweep(b, P2PK_BM_SM_PUSH, p);
    if (!x) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory");
    x->status = P2PK_ROW_SKIPPED;
    snprintf(x->note, sizeof x->note, "%s", why);
  } else if (o->sm_sweep) {
    p2pk_sm_config cfg[P2PK_BENCH_MAX_SM_CONFIGS];
    int n = p2pk_bench_sm_sweep_configs(o->sm_sweep, cfg, P2PK_BENCH_MAX_SM_CONFIGS);
    for (int i = 0; i < n && st == P2PKIT_SUCCESS; i++)
      for (int m = P2PK_BM_SM_PUSH; m <= P2PK_BM_SM_PULL && st == P2PKIT_SUCCESS; m++) {
        p2pk_bench_sweep *x = new_sweep(b, m, p);
        if (!x) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory");
        x->sm = cfg[i];
        p2pk_sm_config_format(&cfg[i], x->config, sizeof x->config);
        snprintf(what, sizeof what, "sweep %s %s", p2pk_bench_method_name(m), x->config);
        progress(b, what);
        p2pk_copy_opts opts = {.sm = &cfg[i]};
        st = sweep_one(b, p, m, &opts, x);
      }
  }
  if (o->stage_sweep && st == P2PKIT_SUCCESS) {
    static const size_t chunk[] = {1u << 20, 2u << 20, 4u << 20, 8u << 20, 16u << 20};
    static const int depth[] = {2, 3, 4, 6};
    for (size_t c = 0; c < 5 && st == P2PKIT_SUCCESS; c++)
      for (size_t d = 0; d < 4 && st == P2PKIT_SUCCESS; d++)
        for (int ramp = 1; ramp >= -1 && st == P2PKIT_SUCCESS; ramp -= 2) {
          p2pk_bench_sweep *x = new_sweep(b, P2PK_BM_STAGED, p);
          if (!x) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory");
          x->chunk = chunk[c];
          x->depth = depth[d];
          x->ramp = ramp > 0;
          snprintf(x->config, sizeof x->config, "chunk=%zuM,depth=%d,ramp=%s", chunk[c] >> 20,
                   depth[d], ramp > 0 ? "on" : "off");
          snprintf(what, sizeof what, "sweep staged %s", x->config);
          progress(b, what);
          p2pk_copy_opts opts = {.stage_chunk = chunk[c], .stage_depth = depth[d], .stage_ramp = ramp};
          st = sweep_one(b, p, P2PK_BM_STAGED, &opts, x);
        }
  }
  dev_free(p->src, &p->sbuf);
  dev_free(p->dst, &p->dbuf);
  b->bytes = 0;
  if (st == P2PKIT_SUCCESS) st = sweeps_verdict(b->r, first);
  return st;
}

/* --- entry points ------------------------------------------------------------------------ */

void p2pk_bench_report_header(p2pk_bench_report *r, const p2pk_bench_opts *o, p2pkit_ctx_t ctx) {
  struct p2pkit_topo *t = p2pk_ctx_topo(ctx);
  const p2pk_xfer_settings *s = p2pk_ctx_settings(ctx);
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(r->date, sizeof r->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
  snprintf(r->hostname, sizeof r->hostname, "%s", t->hostname);
  if (!r->hostname[0]) gethostname(r->hostname, sizeof r->hostname - 1);
  snprintf(r->driver, sizeof r->driver, "%s", t->driver);
  r->cuda_driver = t->cuda_driver;
  r->cuda_runtime = t->cuda_runtime;
  r->ngpus = t->ngpus;
  for (int g = 0; g < t->ngpus && g < P2PK_MAX_GPUS; g++) {
    snprintf(r->gpu[g].name, sizeof r->gpu[g].name, "%s", t->gpus[g].name);
    snprintf(r->gpu[g].busid, sizeof r->gpu[g].busid, "%s", t->gpus[g].busid);
  }
  r->p2p_disable = s->p2p_disable;
  snprintf(r->p2p_level, sizeof r->p2p_level, "%s", p2pk_p2p_level_name(s->p2p_level));
  r->stage_chunk = s->stage_chunk;
  r->stage_depth = s->stage_depth;
  p2pk_sm_config_format(o->have_sm_config ? &o->sm : &s->sm, r->sm_config, sizeof r->sm_config);
  r->iters = o->iters;
  r->warmup = o->warmup;
  r->seed = o->seed;
  r->gate = o->gate;
}

p2pkit_status_t p2pk_bench_print_plan(const p2pk_bench_opts *o, p2pkit_ctx_t ctx, FILE *out) {
  struct p2pkit_topo *t = p2pk_ctx_topo(ctx);
  char a[32], z[32];
  p2pk_bench_fmt_size(o->sizes[0], a, sizeof a);
  p2pk_bench_fmt_size(o->sizes[o->nsizes - 1], z, sizeof z);
  fprintf(out, "plan: %d size%s (%s .. %s), %d pair%s, %d timed runs after %d warm-up\n", o->nsizes,
          o->nsizes == 1 ? "" : "s", a, z, o->npairs, o->npairs == 1 ? "" : "s", o->iters,
          o->warmup);
  fprintf(out, "methods:");
  for (int m = 0; m < P2PK_BM_COUNT; m++)
    if ((o->methods >> m) & 1) fprintf(out, " %s", p2pk_bench_method_name(m));
  fprintf(out, "\nmodes:");
  for (int m = 0; m < P2PK_MODE_COUNT; m++)
    if ((o->modes >> m) & 1) fprintf(out, " %s", p2pk_bench_mode_name(m));
  fprintf(out, "%s%s%s\n", o->latency ? "; latency" : "", o->sm_sweep ? "; SM sweep" : "",
          o->stage_sweep ? "; staging sweep" : "");
  fprintf(out, "\n  %-6s %-5s %-4s %10s %10s %10s %10s  %s\n", "pair", "link", "p2p", "line",
          "expect", "pcie-line", "staged-exp", "AUTO path (first size / last size)");
  for (int i = 0; i < o->npairs; i++) {
    int s = o->pairs[i][0], d = o->pairs[i][1];
    p2pkit_pair_t pair;
    p2pk_pair_info(t, s, d, &pair);
    double line, exp, sline, sexp;
    p2pk_bench_expected(&pair, p2pk_bench_pair_pcie(t, s, d), P2PK_BM_CE, &line, &exp);
    p2pk_bench_expected(&pair, p2pk_bench_pair_pcie(t, s, d), P2PK_BM_STAGED, &sline, &sexp);
    p2pkit_path_t p0, p1;
    const char *why;
    char w0[256];
    P2PK_CHECK(p2pkit_copy_choose(ctx, s, d, o->sizes[0], &p0, &why));
    snprintf(w0, sizeof w0, "%s", why);
    P2PK_CHECK(p2pkit_copy_choose(ctx, s, d, o->sizes[o->nsizes - 1], &p1, &why));
    char pn[16];
    snprintf(pn, sizeof pn, "%d->%d", s, d);
    fprintf(out, "  %-6s %-5s %-4s %7.1f GB/s %6.1f GB/s %6.1f GB/s %6.1f GB/s  %s", pn, pair.label,
            pair.p2p > 0 ? "yes" : pair.p2p == 0 ? "no" : "?", line, exp, sline, sexp, w0);
    if (p1 != p0 || strcmp(w0, why) != 0) fprintf(out, " / %s", why);
    fputc('\n', out);
  }
  size_t need[P2PK_MAX_GPUS];
  p2pk_bench_mem_need(o, o->sizes[o->nsizes - 1], t->ngpus, need);
  fprintf(out, "\ndevice memory at %s:", z);
  for (int g = 0; g < t->ngpus; g++)
    if (need[g]) {
      char n[32];
      p2pk_bench_fmt_size(need[g], n, sizeof n);
      fprintf(out, " GPU%d %s", g, n);
    }
  fputc('\n', out);
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t check_memory(const p2pk_bench_opts *o, int ngpus) {
  size_t *need = calloc((size_t)ngpus, sizeof *need), *avail = calloc((size_t)ngpus, sizeof *avail);
  if (!need || !avail) {
    free(need);
    free(avail);
    return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory");
  }
  size_t biggest = o->sizes[o->nsizes - 1];
  p2pk_bench_mem_need(o, biggest, ngpus, need);
  p2pkit_status_t st = P2PKIT_SUCCESS;
  for (int g = 0; g < ngpus && st == P2PKIT_SUCCESS; g++) {
    if (!need[g]) continue;
    size_t f = 0, total = 0;
    cudaError_t e = cudaSetDevice(g);
    if (e == cudaSuccess) e = cudaMemGetInfo(&f, &total);
    if (e != cudaSuccess)
      st = p2pk_fail(P2PKIT_ERR_CUDA, "cudaMemGetInfo on GPU%d: %s", g, cudaGetErrorString(e));
    avail[g] = f;
  }
  char err[256];
  if (st == P2PKIT_SUCCESS && p2pk_bench_mem_check(need, avail, ngpus, biggest, err, sizeof err))
    st = p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s", err);
  free(need);
  free(avail);
  return st;
}

p2pkit_status_t p2pk_bench_run(const p2pk_bench_opts *o, p2pkit_ctx_t ctx, p2pk_bench_report *r) {
  struct p2pkit_topo *t = p2pk_ctx_topo(ctx);
  if (!o->npairs || !o->nsizes)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "nothing to run (validate the options first)");
  int prev = -1;
  P2PK_CUDA_CHECK(cudaGetDevice(&prev));
  P2PK_CHECK(check_memory(o, t->ngpus));
  p2pk_bench_report_header(r, o, ctx);
  if (!r->cuda_driver) cudaDriverGetVersion(&r->cuda_driver);
  if (!r->cuda_runtime) cudaRuntimeGetVersion(&r->cuda_runtime);
  brun b = {.o = o, .ctx = ctx, .topo = t, .r = r};
  b.progress = !o->quiet && isatty(STDERR_FILENO);
  int nmethods = 0, nmodes = 0;
  for (int m = 0; m < P2PK_BM_COUNT; m++) nmethods += (o->methods >> m) & 1;
  for (int m = 0; m < P2PK_MODE_COUNT; m++) nmodes += (o->modes >> m) & 1;
  b.nsteps = o->nsizes * nmethods * nmodes * o->npairs + (o->latency ? o->npairs * P2PK_LAT_COUNT : 0) +
             (o->sm_sweep ? 2 * p2pk_bench_sm_sweep_configs(o->sm_sweep, NULL, P2PK_BENCH_MAX_SM_CONFIGS) : 0) +
             (o->stage_sweep ? 40 : 0);
  p2pkit_status_t st = setup(&b);
  for (int s = 0; s < o->nsizes && st == P2PKIT_SUCCESS && o->methods; s++) st = run_size(&b, o->sizes[s]);
  if (st == P2PKIT_SUCCESS && o->latency) st = run_latency(&b);
  if (st == P2PKIT_SUCCESS && (o->sm_sweep || o->stage_sweep)) st = run_sweeps(&b);
  progress_done(&b);
  teardown(&b);
  p2pk_bench_verdicts(r);
  cudaSetDevice(prev);
  return st;
}
