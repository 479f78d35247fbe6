/* SPDX-License-Identifier: BSD-3-Clause */
/* The copy context: topology, settings read once, peer access held per pair,
 * per-pair staging resources; p2pkit_copy dispatches to a path. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/param.h"
#include "topo/topo.h"
#include "xfer/pair.h"
#include "xfer/xfer.h"
#include "xfer/xfer_kernels.h"

struct p2pkit_ctx {
  struct p2pkit_topo *topo;
  int own_topo;
  int n;
  p2pk_xfer_settings set;
  pthread_mutex_t lock;    /* the arrays below */
  p2pk_pair_state **pairs; /* [src * n + dst], created on first use */
  unsigned char *held;     /* [accessor * n + peer]: a peer-access reference */
  unsigned *logged;        /* [src * n + dst]: paths already logged */
  int *sm_count;           /* per device, 0 until asked */
};

static _Thread_local char choose_why[256];

p2pkit_status_t p2pkit_ctx_create(p2pkit_topo_t topo, p2pkit_ctx_t *ctx_p) {
  if (!ctx_p) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "p2pkit_ctx_create: output is NULL");
  p2pk_xfer_settings set;
  P2PK_CHECK(p2pk_xfer_settings_read(&set));
  p2pk_param_warn_unknown(); /* here, not in the reader: the doctor reports them itself */
  struct p2pkit_topo *t = topo;
  if (!t) P2PK_CHECK(p2pkit_topo_discover(&t));
  p2pkit_status_t st = P2PKIT_SUCCESS;
  struct p2pkit_ctx *c = calloc(1, sizeof *c);
  if (!c) {
    st = p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory creating a copy context");
    goto fail_topo;
  }
  c->topo = t;
  c->own_topo = topo == NULL;
  c->n = t->ngpus;
  c->set = set;
  if (c->n <= 0) {
    st = p2pk_fail(P2PKIT_ERR_NO_DEVICE, "the topology (%s) has no GPU", t->source);
    goto fail_ctx;
  }
  size_t nn = (size_t)c->n * (size_t)c->n;
  c->pairs = calloc(nn, sizeof *c->pairs);
  c->held = calloc(nn, 1);
  c->logged = calloc(nn, sizeof *c->logged);
  c->sm_count = calloc((size_t)c->n, sizeof *c->sm_count);
  if (!c->pairs || !c->held || !c->logged || !c->sm_count) {
    st = p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory creating a copy context");
    goto fail_arrays;
  }
  pthread_mutex_init(&c->lock, NULL);
  char sm[160];
  p2pk_sm_config_format(&set.sm, sm, sizeof sm);
  P2PK_INFO(P2PK_LOG_XFER,
            "copy context: %d GPUs; P2P %s, level %s; staging %zu KiB x %d; SM copies up to %zu "
            "bytes; SM kernel %s",
            c->n, set.p2p_disable ? "disabled" : "enabled", p2pk_p2p_level_name(set.p2p_level),
            set.stage_chunk >> 10, set.stage_depth, p2pk_sm_copy_threshold(&set), sm);
  *ctx_p = c;
  return P2PKIT_SUCCESS;
fail_arrays:
  free(c->pairs);
  free(c->held);
  free(c->logged);
  free(c->sm_count);
fail_ctx:
  free(c);
fail_topo:
  if (!topo) p2pkit_topo_destroy(t);
  return st;
}

void p2pkit_ctx_destroy(p2pkit_ctx_t c) {
  if (!c) return;
  int prev = -1;
  int have_dev = cudaGetDevice(&prev) == cudaSuccess;
  cudaGetLastError();
  for (int i = 0; i < c->n * c->n; i++) {
    if (c->pairs[i]) {
      p2pk_pair_fini(c->pairs[i]);
      free(c->pairs[i]);
    }
    if (c->held[i]) p2pk_peer_release(i / c->n, i % c->n);
  }
  if (have_dev) cudaSetDevice(prev);
  pthread_mutex_destroy(&c->lock);
  free(c->pairs);
  free(c->held);
  free(c->logged);
  free(c->sm_count);
  if (c->own_topo) p2pkit_topo_destroy(c->topo);
  free(c);
}

const p2pk_xfer_settings *p2pk_ctx_settings(p2pkit_ctx_t ctx) { return &ctx->set; }
p2pkit_topo_t p2pk_ctx_topo(p2pkit_ctx_t ctx) { return ctx->topo; }

static p2pkit_status_t check_dev(const struct p2pkit_ctx *c, int d, const char *what) {
  if (d < 0 || d >= c->n)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT,
                     "%s GPU %d does not exist (the context has %d GPU%s: 0..%d)", what, d, c->n,
                     c->n == 1 ? "" : "s", c->n - 1);
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pkit_copy_choose(p2pkit_ctx_t ctx, int src, int dst, size_t bytes,
                                   p2pkit_path_t *path_p, const char **why_p) {
  if (!ctx || !path_p)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "p2pkit_copy_choose: context or output is NULL");
  P2PK_CHECK(check_dev(ctx, src, "source"));
  P2PK_CHECK(check_dev(ctx, dst, "destination"));
  p2pkit_pair_t pair;
  p2pk_pair_info(ctx->topo, src, dst, &pair);
  *path_p = p2pk_path_choose(&pair, &ctx->set, bytes, choose_why, sizeof choose_why);
  if (why_p) *why_p = choose_why;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_ctx_peer(p2pkit_ctx_t c, int src, int dst, p2pkit_path_t path) {
  if (src == dst) return P2PKIT_SUCCESS;
  /* accessor, peer */
  int need[2][2] = {{src, dst}, {dst, src}};
  int count = 2;
  if (path == P2PKIT_PATH_P2P_SM_PUSH) count = 1;
  if (path == P2PKIT_PATH_P2P_SM_PULL) {
    need[0][0] = dst;
    need[0][1] = src;
    count = 1;
  }
  p2pkit_status_t st = P2PKIT_SUCCESS;
  pthread_mutex_lock(&c->lock);
  for (int i = 0; i < count && st == P2PKIT_SUCCESS; i++) {
    int a = need[i][0], b = need[i][1];
    unsigned char *h = &c->held[a * c->n + b];
    if (*h) continue;
    st = p2pk_peer_acquire(a, b);
    if (st == P2PKIT_SUCCESS) *h = 1;
  }
  pthread_mutex_unlock(&c->lock);
  return st;
}

static p2pk_pair_state *get_pair(struct p2pkit_ctx *c, int src, int dst) {
  pthread_mutex_lock(&c->lock);
  p2pk_pair_state **slot = &c->pairs[src * c->n + dst];
  if (!*slot) {
    p2pk_pair_state *p = malloc(sizeof *p);
    if (p) p2pk_pair_init(p, src, dst);
    *slot = p;
  }
  p2pk_pair_state *p = *slot;
  pthread_mutex_unlock(&c->lock);
  if (!p) p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory for GPU%d -> GPU%d state", src, dst);
  return p;
}

static p2pkit_status_t sm_count_of(struct p2pkit_ctx *c, int dev, int *out) {
  pthread_mutex_lock(&c->lock);
  int n = c->sm_count[dev];
  pthread_mutex_unlock(&c->lock);
  if (n <= 0) {
    P2PK_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    pthread_mutex_lock(&c->lock);
    c->sm_count[dev] = n;
    pthread_mutex_unlock(&c->lock);
  }
  *out = n;
  return P2PKIT_SUCCESS;
}

/* One INFO line per pair and path, the first time it is used; 1 then. */
static int log_path(struct p2pkit_ctx *c, int src, int dst, p2pkit_path_t path, const char *desc) {
  pthread_mutex_lock(&c->lock);
  unsigned *l = &c->logged[src * c->n + dst];
  int first = !(*l & (1u << path));
  *l |= 1u << path;
  pthread_mutex_unlock(&c->lock);
  if (first) P2PK_INFO(P2PK_LOG_XFER, "GPU%d -> GPU%d via %s", src, dst, desc);
  return first;
}

static p2pkit_status_t check_stream(cudaStream_t stream, int src) {
  /* NULL and the special handles name a stream of whatever device is
   * current: p2pkit makes that the source GPU before using them. */
  if (!stream || stream == cudaStreamLegacy || stream == cudaStreamPerThread) return P2PKIT_SUCCESS;
  int dev = -1;
  cudaError_t e = cudaStreamGetDevice(stream, &dev);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "the stream passed for GPU%d is not valid: %s",
                     src, cudaGetErrorString(e));
  }
  if (dev != src)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT,
                     "the stream belongs to GPU%d; a copy from GPU%d needs a stream of GPU%d", dev,
                     src, src);
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t run_path(struct p2pkit_ctx *c, p2pkit_path_t path, void *dst, int dd,
                                const void *src, int sd, size_t bytes, cudaStream_t stream,
                                const p2pk_copy_opts *o) {
  const p2pk_sm_config *sm = o && o->sm ? o->sm : &c->set.sm;
  p2pkit_status_t st = P2PKIT_SUCCESS;
  if (path == P2PKIT_PATH_P2P_CE || path == P2PKIT_PATH_DRIVER) {
    P2PK_CUDA_CHECK(cudaSetDevice(sd));
    if (sd == dd) P2PK_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
    else P2PK_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dd, src, sd, bytes, stream));
    return P2PKIT_SUCCESS;
  }
  if (path == P2PKIT_PATH_P2P_SM_PUSH) {
    int sms = 0;
    P2PK_CHECK(sm_count_of(c, sd, &sms));
    P2PK_CUDA_CHECK(cudaSetDevice(sd));
    cudaError_t e = p2pk_launch_sm_copy(dst, src, bytes, sm, sms, stream);
    if (e != cudaSuccess)
      return p2pk_fail(P2PKIT_ERR_CUDA, "SM push kernel on GPU%d (writing GPU%d): %s", sd, dd,
                       cudaGetErrorString(e));
    return P2PKIT_SUCCESS;
  }
  p2pk_pair_state *p = get_pair(c, sd, dd);
  if (!p) return P2PKIT_ERR_NO_MEMORY;
  int sms = 0;
  if (path == P2PKIT_PATH_P2P_SM_PULL) P2PK_CHECK(sm_count_of(c, dd, &sms));
  pthread_mutex_lock(&p->lock);
  if (path == P2PKIT_PATH_P2P_SM_PULL) {
    st = p2pk_pull_copy(p, dst, src, bytes, stream, sm, sms);
  } else if (path == P2PKIT_PATH_STAGED) {
    p2pk_stage_plan plan = {c->set.stage_chunk, c->set.stage_depth, 1};
    if (o && o->stage_chunk) plan.chunk = o->stage_chunk;
    if (o && o->stage_depth) plan.depth = o->stage_depth;
    if (o && o->stage_ramp) plan.ramp = o->stage_ramp > 0;
    st = p2pk_staged_copy(p, dst, src, bytes, stream, &plan);
  } else {
    st = p2pk_staged_serial_copy(p, dst, src, bytes, stream);
  }
  pthread_mutex_unlock(&p->lock);
  return st;
}

p2pkit_status_t p2pk_copy_ex(p2pkit_ctx_t c, void *dst, int dd, const void *src, int sd,
                             size_t bytes, p2pkit_stream_t stream, p2pkit_path_t path,
                             const p2pk_copy_opts *o) {
  if (!c) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "p2pkit_copy: context is NULL");
  P2PK_CHECK(check_dev(c, sd, "source"));
  P2PK_CHECK(check_dev(c, dd, "destination"));
  if ((int)path < 0 || path >= P2PKIT_PATH_COUNT)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "p2pkit_copy: path %d is not a p2pkit_path_t",
                     (int)path);
  if (o && o->stage_depth && (o->stage_depth < 2 || o->stage_depth > P2PK_STAGE_MAX_DEPTH))
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "staging depth %d: must be 2 to %d",
                     o->stage_depth, P2PK_STAGE_MAX_DEPTH);
  if (o && o->stage_chunk &&
      (o->stage_chunk < P2PK_STAGE_MIN_CHUNK || o->stage_chunk > P2PK_STAGE_MAX_CHUNK))
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "staging chunk %zu bytes is out of range",
                     o->stage_chunk);
  if (bytes == 0) return P2PKIT_SUCCESS;
  if (!dst || !src)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "p2pkit_copy GPU%d -> GPU%d: %s is NULL", sd, dd,
                     !src ? "source" : "destination");
  p2pkit_pair_t pair;
  p2pk_pair_info(c->topo, sd, dd, &pair);
  char desc[320], why[160];
  p2pkit_path_t use = path;
  if (path == P2PKIT_PATH_AUTO) {
    use = p2pk_path_choose(&pair, &c->set, bytes, desc, sizeof desc);
  } else {
    if (p2pk_path_is_p2p(use) && sd != dd && !p2pk_p2p_allowed(&pair, &c->set, why, sizeof why))
      return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "GPU%d -> GPU%d: path %s was asked for, but %s", sd,
                       dd, p2pkit_path_name(use), why);
    p2pk_path_describe(&pair, use, NULL, desc, sizeof desc);
  }
  int prev = -1;
  P2PK_CUDA_CHECK(cudaGetDevice(&prev));
  p2pkit_status_t st = check_stream(stream, sd);
  if (st != P2PKIT_SUCCESS) return st;
  int fell_back = 0;
  if (p2pk_path_is_p2p(use) && sd != dd) {
    st = p2pk_ctx_peer(c, sd, dd, use);
    if (st != P2PKIT_SUCCESS) {
      if (path != P2PKIT_PATH_AUTO) goto out;
      /* AUTO: the topology said yes, the driver said no. Stage instead. */
      snprintf(why, sizeof why, "%s", p2pkit_last_error());
      use = P2PKIT_PATH_STAGED;
      p2pk_path_describe(&pair, use, why, desc, sizeof desc);
      fell_back = 1;
    }
  }
  if (log_path(c, sd, dd, use, desc) && fell_back)
    P2PK_WARN("GPU%d -> GPU%d: %s; staging through host memory instead", sd, dd, why);
  st = run_path(c, use, dst, dd, src, sd, bytes, stream, o);
out:
  cudaSetDevice(prev);
  return st;
}

p2pkit_status_t p2pkit_copy(p2pkit_ctx_t ctx, void *dst, int dst_dev, const void *src, int src_dev,
                            size_t bytes, p2pkit_stream_t stream, p2pkit_path_t path) {
  return p2pk_copy_ex(ctx, dst, dst_dev, src, src_dev, bytes, stream, path, NULL);
}
