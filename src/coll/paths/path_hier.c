/* SPDX-License-Identifier: BSD-3-Clause */
/* The hierarchical path of a communicator spanning hosts (the same number
 * of ranks, at least 2, on every host): all-reduce, reduce-scatter and
 * all-gather run hier.c's plan: inside each host p2pkit on the host's own
 * communicator (c->intra, made by comm_init.c before this path's init),
 * across hosts NCCL among the ranks of one local index (a communicator of
 * its own, made by the init). Every step goes on the caller's stream, so a
 * call can be captured in a CUDA graph; the steps' scratch is made by the
 * init, once (P2PKIT_BUFFER_SIZE, else 128 MiB: the kernels' default share
 * of one peer), and a call whose scratch would exceed it runs in pieces
 * (hier.h). Like the kernels' mailboxes it serves one call at a time: the
 * calls of a communicator follow one another on the GPU.
 *
 * Avg sums all the way; the floating types divide once, by the rank
 * count, in the step across hosts (NCCL's pre-multiplied sum by 1/n); an
 * average it cannot divide so (an integer type, or NCCL without that sum)
 * the selector sends through NCCL over every rank (P2PK_SEL_AVG_FLAT). The
 * host's calls reach the paths' table only through c->sub_launch (group.c's
 * p2pk_sub_launch, which decides them as every call), so this path depends
 * on no module that lists it. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "coll/paths/hier.h"
#include "coll/paths/path.h"
#include "core/check.h"
#include "core/log.h"
#include "nccl/dtype.h"
#include "nccl/nccl_dl.h"

typedef struct {
  const p2pk_nccl_api *api;
  p2pk_nccl_comm_t cross; /* the ranks of this local index, host by host */
  char *scratch;          /* device memory of c's GPU, scratch_bytes */
  size_t scratch_bytes;
} hier_state;

#define HIER_SCRATCH_DEFAULT ((size_t)128 << 20)

static hier_state *state_of(const struct p2pkit_comm *c) {
  return (hier_state *)c->path_state[P2PK_PATH_HIER];
}

/* The cross communicator and the scratch, once the host's communicator
 * exists (c->intra: the hierarchical layout; else nothing to make). */
static p2pkit_status_t init(struct p2pkit_comm *c) {
  const p2pk_hosts *h = &c->hosts;
  if (!c->intra || state_of(c)) return P2PKIT_SUCCESS;
  hier_state *s = calloc(1, sizeof *s);
  if (!s) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "rank %d: out of memory", c->rank);
  c->path_state[P2PK_PATH_HIER] = s; /* fini frees what a failed init made */
  P2PK_CHECK(p2pk_nccl_shared(&s->api, NULL, 0));
  void *cross = NULL;
  P2PK_CHECK(p2pk_nccl_comm_among(c, P2PK_TAG_NCCL_CROSS, p2pk_hosts_rank_at(h, 0, h->local_rank),
                                  h->nhosts, h->host, &cross));
  s->cross = cross;
  s->scratch_bytes = c->buffer_bytes ? c->buffer_bytes : HIER_SCRATCH_DEFAULT;
  const cudaError_t e = cudaMalloc((void **)&s->scratch, s->scratch_bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    s->scratch = NULL;
    return p2pk_fail(e == cudaErrorMemoryAllocation ? P2PKIT_ERR_NO_MEMORY : P2PKIT_ERR_CUDA,
                     "rank %d: the hierarchical path's %zu bytes of scratch on GPU %d: %s",
                     c->rank, s->scratch_bytes, c->device, cudaGetErrorString(e));
  }
  P2PK_INFO(P2PK_LOG_COLL, "rank %d: hierarchical path ready: local rank %d of %d on host %d, NCCL "
            "across %d hosts, %zu bytes of scratch", c->rank, h->local_rank, h->local_size,
            h->host, h->nhosts, s->scratch_bytes);
  return P2PKIT_SUCCESS;
}

static void fini(struct p2pkit_comm *c) {
  hier_state *s = state_of(c);
  if (!s) return;
  if (s->cross) s->api->CommDestroy(s->cross);
  if (s->scratch) cudaFree(s->scratch);
  free(s);
  c->path_state[P2PK_PATH_HIER] = NULL;
}

static p2pkit_status_t async_status(struct p2pkit_comm *c) {
  hier_state *s = state_of(c);
  p2pk_nccl_result r = P2PK_NCCL_SUCCESS;
  if (!s || !s->cross || !s->api->CommGetAsyncError ||
      s->api->CommGetAsyncError(s->cross, &r) != P2PK_NCCL_SUCCESS || r == P2PK_NCCL_SUCCESS ||
      r == P2PK_NCCL_IN_PROGRESS)
    return P2PKIT_SUCCESS;
  return p2pk_fail(P2PKIT_ERR_REMOTE, "rank %d (GPU %d): NCCL across hosts reports an error: %s "
                   "(NCCL error %d); the communicator is unusable", c->rank, c->device,
                   s->api->GetErrorString(r), r);
}

static void hier_abort(struct p2pkit_comm *c) {
  hier_state *s = state_of(c);
  if (!s || !s->cross) return;
  if (p2pk_nccl_abort_until(s->api, s->cross, c->abort_until_ns) == 0)
    P2PK_WARN("rank %d (GPU %d): NCCL's abort of the communicator across hosts has not returned; "
              "left to finish on a thread of its own", c->rank, c->device);
  s->cross = NULL;
}

typedef struct {
  const p2pk_call *call;
  const p2pk_hier_plan *plan;
  hier_state *s;
  char *scratch;
} hier_run;

static char *buf_of(const hier_run *x, int which, size_t off) {
  const p2pk_call *call = x->call;
  char *b = which == P2PK_HIER_SEND ? (char *)call->send
            : which == P2PK_HIER_RECV ? (char *)call->recv
                                       : x->scratch;
  return b + off * call->esize;
}

/* A step inside the host: p2pkit on the host's communicator. */
static p2pkit_status_t intra_step(const hier_run *x, const p2pk_hier_step *st) {
  static const int kinds[] = {[P2PK_HIER_RS] = P2PK_COLL_REDUCE_SCATTER,
                              [P2PK_HIER_REDUCE] = P2PK_COLL_REDUCE,
                              [P2PK_HIER_AR] = P2PK_COLL_ALL_REDUCE,
                              [P2PK_HIER_AG] = P2PK_COLL_ALL_GATHER,
                              [P2PK_HIER_BCAST] = P2PK_COLL_BROADCAST};
  const p2pk_call *call = x->call;
  p2pk_call sub;
  memset(&sub, 0, sizeof sub);
  sub.c = call->c->intra;
  sub.kind = kinds[st->op];
  sub.send = buf_of(x, st->in, st->in_off);
  sub.recv = buf_of(x, st->out, st->out_off);
  sub.count = st->count;
  sub.esize = call->esize;
  sub.bytes = st->count * call->esize;
  sub.dtype = call->dtype;
  sub.op = st->redop;
  sub.root = st->root;
  sub.capture = -1;
  sub.stream = call->stream;
  return call->c->sub_launch(&sub);
}

/* A step across hosts: NCCL among the ranks of this local index; `div`:
 * the avg's division, folded in as a pre-multiplied sum. */
static p2pkit_status_t cross_step(const hier_run *x, const p2pk_hier_step *st, int div) {
  const p2pk_call *call = x->call;
  const p2pk_nccl_api *a = x->s->api;
  const int dt = p2pk_nccl_dtype(call->dtype);
  int op = p2pk_nccl_op(st->redop);
  unsigned char scalar[8];
  if (div) {
    /* The selector sends here only an avg whose type has the scalar (its
     * key's P2PK_AVG_FLOAT is p2pk_hier_premul_scalar's word) and only
     * with NCCL's pre-multiplied sum; anything else would leave the sum
     * undivided, so it fails instead. */
    if (p2pk_hier_premul_scalar(call->dtype, call->c->nranks, scalar) != 0 ||
        !a->RedOpCreatePreMulSum)
      return p2pk_fail(P2PKIT_ERR_INTERNAL, "%s: rank %d: avg of %s across hosts needs NCCL's "
                       "pre-multiplied sum by 1/%d in that type, which %s", p2pk_coll_name(call->kind),
                       call->c->rank, p2pkit_dtype_name(call->dtype), call->c->nranks,
                       a->RedOpCreatePreMulSum ? "p2pkit has no scalar for"
                                               : "this NCCL lacks (ncclRedOpCreatePreMulSum)");
    p2pk_nccl_result r = a->RedOpCreatePreMulSum(&op, scalar, dt, P2PK_NCCL_SCALAR_HOST, x->s->cross);
    if (r != P2PK_NCCL_SUCCESS) return p2pk_nccl_check(a, r, "ncclRedOpCreatePreMulSum");
  }
  const void *in = buf_of(x, st->in, st->in_off);
  void *out = buf_of(x, st->out, st->out_off);
  p2pk_nccl_result r;
  if (st->op == P2PK_HIER_AR) r = a->AllReduce(in, out, st->count, dt, op, x->s->cross, call->stream);
  else if (st->op == P2PK_HIER_RS)
    r = a->ReduceScatter(in, out, st->count, dt, op, x->s->cross, call->stream);
  else r = a->AllGather(in, out, st->count, dt, x->s->cross, call->stream);
  if (div && a->RedOpDestroy) a->RedOpDestroy(op, x->s->cross);
  if (r == P2PK_NCCL_SUCCESS) return P2PKIT_SUCCESS;
  return p2pk_fail(P2PKIT_ERR_REMOTE, "%s: rank %d: the step across hosts (NCCL) failed: %s (NCCL "
                   "error %d)", p2pk_coll_name(call->kind), call->c->rank, a->GetErrorString(r), r);
}

/* A local step: the blocks (a piece of each: `stride` apart in the
 * user's buffer) into local-major order in the scratch and back. */
static p2pkit_status_t local_step(const hier_run *x, const p2pk_hier_step *st) {
  const p2pk_call *call = x->call;
  const size_t blk = st->count * call->esize;
  cudaError_t e = cudaSuccess;
  for (int r = 0; r < call->c->nranks && e == cudaSuccess; r++) {
    const size_t pos = p2pk_hier_pos(x->plan, r);
    const int in = st->op == P2PK_HIER_PERMUTE_IN;
    char *to = buf_of(x, st->out, st->out_off + (in ? pos * st->count : (size_t)r * st->stride));
    const char *from = buf_of(x, st->in, st->in_off + (in ? (size_t)r * st->stride : pos * st->count));
    e = cudaMemcpyAsync(to, from, blk, cudaMemcpyDeviceToDevice, (cudaStream_t)call->stream);
  }
  return p2pk_cuda_status(call->c, p2pk_coll_name(call->kind), e);
}

static p2pkit_status_t run_steps(hier_run *x, const p2pk_hier_step *steps, int n) {
  p2pkit_status_t st = P2PKIT_SUCCESS;
  for (int i = 0; i < n && st == P2PKIT_SUCCESS; i++) {
    const p2pk_hier_step *s = &steps[i];
    if (s->count == 0 || s->op == P2PK_HIER_DIVIDE) continue; /* divide: folded into the cross step */
    const int div = i + 1 < n && steps[i + 1].op == P2PK_HIER_DIVIDE;
    st = s->group == P2PK_HIER_INTRA   ? intra_step(x, s)
         : s->group == P2PK_HIER_CROSS ? cross_step(x, s, div)
                                       : local_step(x, s);
  }
  return st;
}

static p2pkit_status_t launch(const p2pk_call *call) {
  struct p2pkit_comm *c = call->c;
  hier_state *s = state_of(c);
  if (!s || !c->sub_launch)
    return p2pk_fail(P2PKIT_ERR_INTERNAL, "%s: rank %d: the hierarchical path is not attached",
                     p2pk_coll_name(call->kind), c->rank);
  p2pk_hier_plan plan;
  P2PK_CHECK(p2pk_hier_make(call->kind, &c->hosts, call->count, call->op,
                            s->scratch_bytes / call->esize, &plan));
  hier_run x = {call, &plan, s, s->scratch};
  p2pkit_status_t st = P2PKIT_SUCCESS;
  for (size_t j = 0; j < plan.pieces && st == P2PKIT_SUCCESS; j++) {
    p2pk_hier_step steps[P2PK_HIER_MAX_STEPS];
    st = run_steps(&x, steps, p2pk_hier_steps(&plan, c->rank, j, steps));
  }
  return st;
}

const p2pk_path p2pk_path_hier = {
    .id = P2PK_PATH_HIER,
    .kinds = (1u << P2PK_COLL_ALL_REDUCE) | (1u << P2PK_COLL_REDUCE_SCATTER) |
             (1u << P2PK_COLL_ALL_GATHER),
    .modes = P2PK_MODE_SPAN,
    .transports = P2PK_XPORT_P2P | P2PK_XPORT_SHM,
    .captures = P2PK_CAPTURE_EAGER | P2PK_CAPTURE_GRAPH,
    .init = init,
    .fini = fini,
    .launch = launch,
    .async_status = async_status,
    .abort = hier_abort,
};
