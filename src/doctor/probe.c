/* The doctor's live measurements: a short bandwidth probe per ordered GPU
 * pair (the bench's engine, small budget), and the PCIe link re-read under
 * load. */
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
