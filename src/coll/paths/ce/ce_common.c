/* SPDX-License-Identifier: BSD-3-Clause */
/* What the copy-engine paths share: their streams and events, the device
 * buffer the chunks land in, the local reduce that runs in rank order on
 * the SMs (the same bits on every rank), the shard and chunk arithmetic,
 * and the one-thread step lists that wait for and post the ranks' flags
 * (as stream memory operations where they can). */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "coll/paths/ce/ce_common.h"
#include "core/check.h"
#include "core/log.h"
#include "core/param.h"

size_t p2pk_sce_chunk_elems(size_t chunk_bytes, size_t es) {
  if (es == 0) return 1;
  size_t k = (chunk_bytes & ~(size_t)15) / es;
  return k ? k : 1;
}

cudaError_t p2pk_ce_prepare(struct p2pkit_comm *c, size_t need) {
  cudaError_t e = cudaSetDevice(c->device);
  if (e == cudaSuccess) e = p2pk_lazy_stream(&c->ce->side);
  if (e == cudaSuccess) e = p2pk_lazy_stream(&c->ce->h2d);
  for (int i = 0; i < P2PK_SCE_EVENTS && e == cudaSuccess; i++) e = p2pk_lazy_event(&c->ce->sev[i]);
  if (e == cudaSuccess && c->ce->buf_bytes < need) {
    /* cudaFree waits for the device: the old buffer is no longer read. */
    if (c->ce->buf) e = cudaFree(c->ce->buf);
    c->ce->buf = NULL;
    c->ce->buf_bytes = 0;
    if (e == cudaSuccess) e = cudaMalloc((void **)&c->ce->buf, need);
    if (e == cudaSuccess) c->ce->buf_bytes = need;
  }
  return e;
}

cudaError_t p2pk_ce_start(p2pk_call *const *set, int n, size_t need, int side_own, int *bad) {
  cudaError_t e = cudaSuccess;
  for (int r = 0; r < n && e == cudaSuccess; r++) {
    *bad = r;
    e = p2pk_ce_prepare(set[r]->c, need);
    if (e == cudaSuccess) e = cudaEventRecord(set[r]->c->ce->sev[P2PK_CE_EV_START], (cudaStream_t)set[r]->stream);
  }
  for (int r = 0; r < n && e == cudaSuccess; r++) {
    *bad = r;
    struct p2pkit_comm *c = set[r]->c;
    e = cudaSetDevice(c->device);
    for (int t = 0; t < n && e == cudaSuccess; t++) {
      cudaEvent_t start = set[t]->c->ce->sev[P2PK_CE_EV_START];
      if (!side_own || t == r) e = cudaStreamWaitEvent(c->ce->side, start, 0);
      if (e == cudaSuccess) e = cudaStreamWaitEvent(c->ce->h2d, start, 0);
    }
  }
  return e;
}

cudaError_t p2pk_ce_local_reduce(const struct p2pkit_comm *c, p2pkit_dtype_t dtype,
                                 const p2pk_lr_args *la, int cap, cudaStream_t stream) {
  size_t blocks = (la->bytes + (64u << 10) - 1) / (64u << 10);
  int sms = c->sel.geom.sm_count > 0 ? c->sel.geom.sm_count : 1;
  if (blocks > (size_t)sms) blocks = (size_t)sms;
  const size_t free_grid = blocks;
  if (cap > 0 && blocks > (size_t)cap) blocks = (size_t)cap;
  const int mb = p2pk_sel_cap(&c->sel, c->ce->cap);
  if (mb > 0 && blocks > (size_t)mb) blocks = (size_t)mb;
  /* A capped grid moves what each block can: its loads go out two sources
   * at a time (2x H200, process per GPU, 256 MiB all-reduce over the
   * copy engines: 16 blocks 1659 -> 1316 us, 64 blocks 811
   * -> 791). Uncapped the reduce runs beside the copies and the paired
   * loads took HBM from them (one process under a graph, 1 GiB: 2914 ->
   * 2956 us), so the whole grid keeps the plain loop. */
  p2pk_lr_args a = *la;
  a.pair = blocks < free_grid;
  return p2pk_launch_local_reduce(dtype, &a, blocks ? (int)blocks : 1, stream);
}

cudaError_t p2pk_ce_reduce_chunk(const struct p2pkit_comm *c, p2pkit_dtype_t dtype,
                                p2pkit_redop_t op, const char *const *src, char *out, size_t lb,
                                cudaStream_t stream) {
  p2pk_lr_args la;
  memset(&la, 0, sizeof la);
  for (int r = 0; r < c->nranks; r++) la.src[r] = src[r];
  la.out = out;
  la.bytes = lb;
  la.n = c->nranks;
  la.me = c->rank;
  la.op = op;
  return p2pk_ce_local_reduce(c, dtype, &la, 0, stream);
}

void p2pk_ce_shard(size_t count, int n, size_t es, int r, size_t *off, size_t *len) {
  *off = *len = 0;
  if (n < 1 || r < 0 || r >= n || es == 0) return;
  /* Shards start on 256-byte boundaries of the message (whole elements). */
  size_t align = es >= 256 ? 1 : 256 / es;
  size_t h = (count + (size_t)n - 1) / (size_t)n;
  h = (h + align - 1) / align * align;
  size_t a = h * (size_t)r;
  if (a >= count) {
    *off = count;
    return;
  }
  *off = a;
  *len = count - a < h ? count - a : h;
}

void p2pk_ce_owned(int kind, size_t count, int n, size_t es, int root, int t, size_t *off,
                   size_t *len) {
  *off = *len = 0;
  if (t < 0 || t >= n) return;
  switch (kind) {
    case P2PK_COLL_ALL_REDUCE: p2pk_ce_shard(count, n, es, t, off, len); break;
    case P2PK_COLL_REDUCE_SCATTER: *off = (size_t)t * count, *len = count; break;
    case P2PK_COLL_REDUCE: *len = t == root ? count : 0; break;
    case P2PK_COLL_BROADCAST: *len = t == root ? 0 : count; break;
    default: break;
  }
}

/* 16 MiB .. 4 GiB: the registry refuses anything else. */
size_t p2pk_ce_land_max(void) { return p2pk_param_size("P2PKIT_CE_LAND"); }

size_t p2pk_ce_chunk_bytes(size_t shard_bytes, int n, int depth) {
  size_t c = p2pk_param_size("P2PKIT_CE_CHUNK");
  if (!c) {
    /* Half a shard, 16 to 64 MiB (2x H200: each chunk's
     * copies cost ~8 us of link time, so 1 GiB took 3031 us in 16 MiB
     * chunks and 2824 in 64 MiB ones; two chunks a shard let the second's
     * copy run beside the first's reduce: 64 MiB 203 us against one
     * chunk's 250 and the kernel's 210). */
    size_t lo = (size_t)16 << 20, hi = (size_t)64 << 20;
    c = shard_bytes / 2;
    c = c < lo ? lo : c > hi ? hi : c;
  }
  /* The landing slots, (n - 1) x depth chunks, within p2pk_ce_land_max(). */
  size_t slots = (size_t)(n > 1 ? n - 1 : 1) * (size_t)(depth > 0 ? depth : 1);
  const size_t land = p2pk_ce_land_max();
  if (c > land / slots) c = land / slots;
  return c;
}

/* 2 .. P2PK_SCE_DEPTH_MAX: the registry refuses anything else. */
int p2pk_ce_depth(void) { return (int)p2pk_param_int("P2PKIT_CE_DEPTH"); }

/* cuStreamWriteValue64 (our own declaration: CUresult, CUstream,
 * CUdeviceptr as the runtime sees them), looked up once through the
 * runtime, so nothing links against the driver. */
typedef int (*write64_fn)(cudaStream_t stream, unsigned long long addr, unsigned long long value,
                          unsigned int flags);

static write64_fn g_write64;

static pthread_once_t g_write64_once = PTHREAD_ONCE_INIT;

static void write64_lookup(void) {
  void *fn = NULL;
  enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue64", &fn, 12000, cudaEnableDefault, &q) ==
          cudaSuccess && q == cudaDriverEntryPointSuccess)
    g_write64 = (write64_fn)fn;
  cudaGetLastError();
}

int p2pk_cep_memops(struct p2pkit_comm *c) {
  if (!c->ce->memops) {
    pthread_once(&g_write64_once, write64_lookup);
    int on = g_write64 && p2pk_param_int("P2PKIT_CEP_MEMOPS") != 0;
    c->ce->memops = on ? 1 : 2;
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): copy-engine posts to the peers %s", c->rank, c->device,
              on ? "as stream memory operations (cuStreamWriteValue64)"
                 : g_write64 ? "as one-thread kernels (P2PKIT_CEP_MEMOPS=0)"
                             : "as one-thread kernels (cuStreamWriteValue64 not found)");
  }
  return c->ce->memops == 1;
}

cudaError_t p2pk_cep_run(struct p2pkit_comm *c, const p2pk_cep_steps *st, int memops,
                         cudaStream_t stream) {
  if (!st->n) return cudaSuccess;
  int posts = 1;
  for (int i = 0; i < st->n; i++) posts &= st->s[i].kind == P2PK_CEP_POST;
  /* A list with a wait stays one kernel: a wait that gives up skips the
   * posts after it. Each memory operation fences the stream's earlier
   * writes first (like __threadfence_system), so the header lands before
   * its counter and the copies before both. */
  if (posts && memops && p2pk_cep_memops(c)) {
    int r = 0;
    for (int i = 0; i < st->n && !r; i++) {
      const p2pk_cep_step *x = &st->s[i];
      if (x->hdr) r = g_write64(stream, (unsigned long long)(uintptr_t)x->hdr, x->hv, 0);
      if (!r) r = g_write64(stream, (unsigned long long)(uintptr_t)x->ctr, x->v, 0);
    }
    if (!r) return cudaSuccess;
    /* Not supported here after all: kernels from now on (the writes are
     * idempotent, so the whole list runs again). */
    c->ce->memops = 2;
    P2PK_WARN("rank %d (GPU %d): cuStreamWriteValue64 failed (CUresult %d); "
              "copy-engine posts go through one-thread kernels", c->rank, c->device, r);
  }
  return p2pk_launch_cep_sync(&c->tmpl, st, stream);
}

p2pkit_status_t p2pk_ce_init(struct p2pkit_comm *c) {
  c->ce = calloc(1, sizeof *c->ce);
  return c->ce ? P2PKIT_SUCCESS : p2pk_fail(P2PKIT_ERR_NO_MEMORY, "rank %d: out of memory", c->rank);
}

void p2pk_ce_fini(struct p2pkit_comm *c) {
  struct p2pk_ce *s = c->ce;
  if (!s) return;
  if (s->side) cudaStreamDestroy(s->side);
  for (int i = 0; i < 3; i++)
    if (s->ev[i]) cudaEventDestroy(s->ev[i]);
  if (s->h2d) cudaStreamDestroy(s->h2d);
  for (int i = 0; i < P2PK_SCE_EVENTS; i++)
    if (s->sev[i]) cudaEventDestroy(s->sev[i]);
  if (s->buf) cudaFree(s->buf);
  for (int i = 0; i < P2PK_CEP_STREAMS; i++)
    if (s->step[i]) cudaStreamDestroy(s->step[i]);
  for (int i = 0; i < P2PK_CEP_EVKINDS; i++)
    for (int k = 0; k < P2PK_SCE_DEPTH_MAX; k++)
      if (s->step_ev[i][k]) cudaEventDestroy(s->step_ev[i][k]);
  free(s);
  c->ce = NULL;
}

cudaError_t p2pk_ce_side_copy(struct p2pkit_comm *c, void *dst, const void *src, size_t bytes,
                              cudaStream_t stream) {
  struct p2pk_ce *ce = c->ce;
  cudaError_t e = p2pk_lazy_stream(&ce->side);
  if (e == cudaSuccess) e = p2pk_lazy_event(&ce->ev[1]);
  if (e == cudaSuccess) e = p2pk_lazy_event(&ce->ev[2]);
  if (e == cudaSuccess) e = cudaEventRecord(ce->ev[1], stream);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(ce->side, ce->ev[1], 0);
  if (e == cudaSuccess) e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ce->side);
  if (e == cudaSuccess) e = cudaEventRecord(ce->ev[2], ce->side);
  return e;
}

cudaError_t p2pk_ce_side_join(struct p2pkit_comm *c, cudaStream_t stream) {
  return cudaStreamWaitEvent(stream, c->ce->ev[2], 0);
}

cudaError_t p2pk_ce_prepare_steps(struct p2pkit_comm *c, int depth) {
  cudaError_t e = p2pk_ce_prepare(c, 0);
  for (int i = 0; i < P2PK_CEP_STREAMS && e == cudaSuccess; i++) e = p2pk_lazy_stream(&c->ce->step[i]);
  for (int i = 0; i < P2PK_CEP_EVKINDS && e == cudaSuccess; i++)
    for (int s = 0; s < depth && e == cudaSuccess; s++) e = p2pk_lazy_event(&c->ce->step_ev[i][s]);
  return e;
}
