/* SPDX-License-Identifier: BSD-3-Clause */
/* The doctor's live measurements: a short bandwidth probe per ordered GPU
 * pair (the bench's engine, small budget), each GPU's link to host memory,
 * and the PCIe link re-read under load. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "core/check.h"
#include "doctor/doctor.h"
#include "topo/nvml_dl.h"
#include "topo/topo.h"
#include "xfer/pattern.h"

/* A small budget of the bench's own measurement: one size, one way, a few
 * timed runs, data checked by the bench. */
#define PROBE_ITERS 5
#define PROBE_WARMUP 2

static void to_doc(const p2pk_bench_row *x, p2pk_doc_bw *d) {
  memset(d, 0, sizeof *d);
  d->src = x->src;
  d->dst = x->dst;
  snprintf(d->method, sizeof d->method, "%s", p2pk_bench_method_name(x->method));
  d->verified = -1;
  if (x->status == P2PK_ROW_FAILED) {
    snprintf(d->error, sizeof d->error, "%s", x->note[0] ? x->note : "the copy failed");
    return;
  }
  d->gbps = x->gbps;
  d->verified = x->verified;
}

p2pkit_status_t p2pk_doc_probe(p2pkit_topo_t topo, size_t bytes, p2pk_doc_bw **bw_p, int *n_p) {
  int n = p2pkit_topo_gpu_count(topo);
  if (n < 2 || bytes == 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "the probe needs two GPUs and a size");
  p2pk_bench_opts o;
  p2pk_bench_opts_init(&o);
  o.methods = 1u << P2PK_BM_CE | 1u << P2PK_BM_SM_PUSH | 1u << P2PK_BM_STAGED;
  o.methods_given = 1;
  o.modes = 1u << P2PK_MODE_ONEWAY;
  o.sizes[0] = o.min_bytes = o.max_bytes = bytes;
  o.nsizes = 1;
  o.iters = PROBE_ITERS;
  o.warmup = PROBE_WARMUP;
  o.anchor = 0;
  o.quiet = 1;
  char err[256];
  if (p2pk_bench_validate(&o, n, err, sizeof err) != 0) {
    p2pk_bench_opts_free(&o);
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "bandwidth probe: %s", err);
  }
  p2pkit_ctx_t ctx = NULL;
  p2pk_bench_report r;
  p2pk_bench_report_init(&r);
  p2pk_doc_bw *out = NULL;
  p2pkit_status_t st;
  P2PK_CHECK_GOTO(p2pkit_ctx_create(topo, &ctx), st, done);
  P2PK_CHECK_GOTO(p2pk_bench_run(&o, ctx, &r), st, done);
  out = calloc((size_t)r.nrows + 1, sizeof *out);
  if (!out) {
    st = p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory for the probe's results");
    goto done;
  }
  int k = 0;
  for (int i = 0; i < r.nrows; i++) {
    const p2pk_bench_row *x = &r.rows[i];
    /* Skipped: a P2P method where P2P is off; the pair's own finding says why. */
    if (x->mode != P2PK_MODE_ONEWAY || x->total || x->status == P2PK_ROW_SKIPPED) continue;
    to_doc(x, &out[k++]);
  }
  *bw_p = out;
  *n_p = k;
  out = NULL;
done:
  if (ctx) p2pkit_ctx_destroy(ctx);
  free(out);
  p2pk_bench_report_free(&r);
  p2pk_bench_opts_free(&o);
  return st;
}

/* --- each GPU's link to host memory -------------------------------------------- */

typedef struct {
  unsigned char *hsrc, *hdst; /* pinned, as the staged fallback pins (portable) */
  void *d1, *d2;
  cudaStream_t s1, s2;
  cudaEvent_t e0, e1, e2;
} host_bufs;

static double median(double *v, int n) {
  p2pk_stats s;
  p2pk_stats_compute(v, n, &s);
  return s.median;
}

/* One copy of `bytes` on s1 between events: GB/s, or 0 with *e set. */
static double one_way(host_bufs *b, void *dst, const void *src, size_t bytes, cudaError_t *e) {
  float ms = 0;
  if ((*e = cudaEventRecord(b->e0, b->s1)) != cudaSuccess ||
      (*e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, b->s1)) != cudaSuccess ||
      (*e = cudaEventRecord(b->e1, b->s1)) != cudaSuccess ||
      (*e = cudaEventSynchronize(b->e1)) != cudaSuccess ||
      (*e = cudaEventElapsedTime(&ms, b->e0, b->e1)) != cudaSuccess || ms <= 0)
    return 0;
  return (double)bytes / (ms * 1e6);
}

/* Host to GPU on s1 and GPU to host on s2, started together: GB/s of the
 * two summed, or 0 with *e set. */
static double both_ways(host_bufs *b, size_t bytes, cudaError_t *e) {
  float m1 = 0, m2 = 0;
  if ((*e = cudaEventRecord(b->e0, b->s1)) != cudaSuccess ||
      (*e = cudaStreamWaitEvent(b->s2, b->e0, 0)) != cudaSuccess ||
      (*e = cudaMemcpyAsync(b->d2, b->hsrc, bytes, cudaMemcpyHostToDevice, b->s1)) != cudaSuccess ||
      (*e = cudaMemcpyAsync(b->hdst, b->d1, bytes, cudaMemcpyDeviceToHost, b->s2)) != cudaSuccess ||
      (*e = cudaEventRecord(b->e1, b->s1)) != cudaSuccess ||
      (*e = cudaEventRecord(b->e2, b->s2)) != cudaSuccess ||
      (*e = cudaEventSynchronize(b->e1)) != cudaSuccess ||
      (*e = cudaEventSynchronize(b->e2)) != cudaSuccess ||
      (*e = cudaEventElapsedTime(&m1, b->e0, b->e1)) != cudaSuccess ||
      (*e = cudaEventElapsedTime(&m2, b->e0, b->e2)) != cudaSuccess)
    return 0;
  float ms = m1 > m2 ? m1 : m2;
  return ms > 0 ? 2.0 * (double)bytes / (ms * 1e6) : 0;
}

static void host_free(host_bufs *b) {
  if (b->e0) cudaEventDestroy(b->e0);
  if (b->e1) cudaEventDestroy(b->e1);
  if (b->e2) cudaEventDestroy(b->e2);
  if (b->s1) cudaStreamDestroy(b->s1);
  if (b->s2) cudaStreamDestroy(b->s2);
  cudaFree(b->d1);
  cudaFree(b->d2);
  cudaFreeHost(b->hsrc);
  cudaFreeHost(b->hdst);
  cudaGetLastError();
}

/* GPU g: warm-up, then PROBE_ITERS timed copies each way and both ways;
 * the bytes that went to the GPU and came back are compared. */
static void probe_host_one(int g, size_t bytes, p2pk_doc_host_bw *out) {
  memset(out, 0, sizeof *out);
  out->gpu = g;
  out->verified = -1;
  host_bufs b;
  memset(&b, 0, sizeof b);
  cudaError_t e;
  const char *what = "set up";
  if ((e = cudaSetDevice(g)) != cudaSuccess ||
      (e = cudaHostAlloc((void **)&b.hsrc, bytes, cudaHostAllocPortable)) != cudaSuccess ||
      (e = cudaHostAlloc((void **)&b.hdst, bytes, cudaHostAllocPortable)) != cudaSuccess ||
      (e = cudaMalloc(&b.d1, bytes)) != cudaSuccess || (e = cudaMalloc(&b.d2, bytes)) != cudaSuccess ||
      (e = cudaStreamCreateWithFlags(&b.s1, cudaStreamNonBlocking)) != cudaSuccess ||
      (e = cudaStreamCreateWithFlags(&b.s2, cudaStreamNonBlocking)) != cudaSuccess ||
      (e = cudaEventCreate(&b.e0)) != cudaSuccess || (e = cudaEventCreate(&b.e1)) != cudaSuccess ||
      (e = cudaEventCreate(&b.e2)) != cudaSuccess)
    goto fail;
  /* Never time zeros: the tests' and the bench's pattern, seeded per GPU. */
  for (size_t i = 0; i + 4 <= bytes; i += 4) {
    uint32_t w = p2pk_pattern_word((uint64_t)g + 1, 0, i / 4);
    memcpy(b.hsrc + i, &w, 4);
  }
  for (size_t i = bytes & ~(size_t)3; i < bytes; i++) b.hsrc[i] = p2pk_pattern_byte((uint64_t)g + 1, 0, i);
  memset(b.hdst, 0xA5, bytes);
  double h2d[PROBE_ITERS], d2h[PROBE_ITERS], both[PROBE_ITERS];
  what = "host to GPU";
  for (int i = 0; i < PROBE_WARMUP + PROBE_ITERS; i++) {
    double r = one_way(&b, b.d1, b.hsrc, bytes, &e);
    if (r <= 0) goto fail;
    if (i >= PROBE_WARMUP) h2d[i - PROBE_WARMUP] = r;
  }
  what = "GPU to host";
  for (int i = 0; i < PROBE_WARMUP + PROBE_ITERS; i++) {
    double r = one_way(&b, b.hdst, b.d1, bytes, &e);
    if (r <= 0) goto fail;
    if (i >= PROBE_WARMUP) d2h[i - PROBE_WARMUP] = r;
  }
  out->verified = memcmp(b.hsrc, b.hdst, bytes) == 0;
  what = "both ways at once";
  for (int i = 0; i < PROBE_WARMUP + PROBE_ITERS; i++) {
    double r = both_ways(&b, bytes, &e);
    if (r <= 0) goto fail;
    if (i >= PROBE_WARMUP) both[i - PROBE_WARMUP] = r;
  }
  out->h2d_gbps = median(h2d, PROBE_ITERS);
  out->d2h_gbps = median(d2h, PROBE_ITERS);
  out->both_gbps = median(both, PROBE_ITERS);
  host_free(&b);
  return;
fail:
  snprintf(out->error, sizeof out->error, "%s: %s", what,
           e != cudaSuccess ? cudaGetErrorString(e) : "a copy took no time");
  out->h2d_gbps = out->d2h_gbps = out->both_gbps = 0;
  host_free(&b);
}

void p2pk_doc_probe_host(const struct p2pkit_topo *t, size_t bytes, p2pk_doc_host_bw *out) {
  int prev = 0;
  cudaGetDevice(&prev);
  for (int g = 0; g < t->ngpus; g++) probe_host_one(g, bytes, &out[g]);
  cudaSetDevice(prev);
}

/* --- PCIe link under load --------------------------------------------------- */

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

#define LOAD_BYTES (64u << 20)
#define LOAD_COPIES 32

static void reread_one(const p2pk_nvml_api *nv, const struct p2pkit_topo *t, int g,
                       p2pk_doc_link_load *out) {
  nvmlDevice_t dev = NULL;
  if (nv->DeviceGetHandleByPciBusId(t->gpus[g].busid, &dev) != NVML_SUCCESS) return;
  void *host = NULL, *buf = NULL;
  cudaStream_t s = NULL;
  if (cudaSetDevice(g) != cudaSuccess || cudaMallocHost(&host, LOAD_BYTES) != cudaSuccess ||
      cudaMalloc(&buf, LOAD_BYTES) != cudaSuccess ||
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
    goto out;
  for (int i = 0; i < LOAD_COPIES; i++)
    if (cudaMemcpyAsync(buf, host, LOAD_BYTES, cudaMemcpyHostToDevice, s) != cudaSuccess) goto out;
  /* Poll while the copies run: the link retrains to full speed within
   * microseconds of traffic; keep the best reading. */
  unsigned gen = 0, width = 0;
  for (int i = 0; i < 200 && cudaStreamQuery(s) == cudaErrorNotReady; i++) {
    unsigned v = 0;
    if (nv->DeviceGetCurrPcieLinkGeneration(dev, &v) == NVML_SUCCESS && v > gen) gen = v;
    if (nv->DeviceGetCurrPcieLinkWidth(dev, &v) == NVML_SUCCESS && v > width) width = v;
    sleep_ms(1);
  }
  cudaStreamSynchronize(s);
  if (gen) {
    out->measured = 1;
    out->gen = (int)gen;
    out->width = (int)width;
  }
out:
  cudaGetLastError();
  if (s) cudaStreamDestroy(s);
  if (buf) cudaFree(buf);
  if (host) cudaFreeHost(host);
}

void p2pk_doc_link_under_load(const struct p2pkit_topo *t, p2pk_doc_link_load *load) {
  const p2pk_nvml_api *nv = NULL;
  memset(load, 0, sizeof *load * (size_t)t->ngpus);
  if (p2pk_nvml_get(&nv) != P2PKIT_SUCCESS) return;
  int prev = 0;
  cudaGetDevice(&prev);
  for (int g = 0; g < t->ngpus; g++) {
    int p = t->gpus[g].pci;
    if (p < 0) continue;
    const p2pk_pci_node *n = &t->pci[p];
    int low = (n->link_gen && n->max_gen && n->link_gen < n->max_gen) ||
              (n->link_width && n->max_width && n->link_width < n->max_width);
    if (low) reread_one(nv, t, g, &load[g]);
  }
  cudaSetDevice(prev);
}
