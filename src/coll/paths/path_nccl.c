/* SPDX-License-Identifier: BSD-3-Clause */
/* NCCL under p2pkit: a communicator may own an NCCL communicator over all
 * its ranks (libnccl.so.2 loaded at run time, nccl_dl.h) and hand it
 * every call the selector gives this path: the types only NCCL has,
 * P2PKIT_NCCL=1, the rows where NCCL was measured faster (select.c),
 * communicators spanning hosts. Every call goes on the caller's stream, so
 * it can be captured in a CUDA graph as NCCL allows.
 *
 * The NCCL communicator: with a process per GPU, rank 0's NCCL unique id
 * goes to every rank over p2pkit's own rendezvous (c->boot) and each rank
 * calls ncclCommInitRank; one process makes every rank's with
 * ncclCommInitAll. It is made at init on 3 ranks and more, and on every
 * communicator spanning hosts or under P2PKIT_NCCL=1 (send/recv between
 * two of many ranks could not make it later: it takes every rank); on 2
 * ranks at the first call that needs it (a type only NCCL has), which
 * must then not be under capture. p2pkit_comm_adopt_nccl hands p2pkit the
 * caller's instead (never destroyed here). */
#include <cuda_runtime_api.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll/paths/path.h"
#include "core/check.h"
#include "core/log.h"
#include "nccl/dtype.h"
#include "nccl/nccl_dl.h"

typedef struct {
  const p2pk_nccl_api *api;
  p2pk_nccl_comm_t comm; /* NULL until made (2 ranks) */
  int owned;             /* 1: made here, destroyed at fini; 0: the caller's */
  int cc;                /* compute capability, major * 10 + minor */
  char *a2a;             /* an all-to-all in place goes through it: made with the comm */
  uint64_t a2a_group;    /* one process: the NCCL group whose in-place all-to-all took it */
} nccl_state;

/* The in-place all-to-all's scratch on each rank's GPU: 32 MiB (on 8 ranks
 * pieces of 4 MiB per peer). Not measured against other sizes: a GPU
 * machine's sweep of an in-place all-to-all with P2PKIT_NCCL=1 would say
 * what a smaller or larger one costs. */
#define A2A_BYTES ((size_t)32 << 20)

/* One process's NCCL groups (group.c), numbered from 1 across every
 * thread; open_group: this thread's open one, 0 when none. A state's
 * scratch is taken in the open group when its a2a_group is that number:
 * nothing to clear at the group's end, and no bound on the states one
 * group may hold. */
static _Atomic uint64_t groups_opened;
static _Thread_local uint64_t open_group;

static const p2pk_nccl_api *loaded_api; /* once a state exists: the group hooks' */

static nccl_state *state_of(const struct p2pkit_comm *c) {
  return (nccl_state *)c->path_state[P2PK_PATH_NCCL];
}

static p2pkit_status_t nccl_status(const struct p2pkit_comm *c, const nccl_state *s,
                                   p2pk_nccl_result r, const char *what) {
  if (r == P2PK_NCCL_SUCCESS) return P2PKIT_SUCCESS;
  const p2pkit_status_t st = r == P2PK_NCCL_INVALID_ARGUMENT || r == P2PK_NCCL_INVALID_USAGE
                                 ? P2PKIT_ERR_INVALID_ARGUMENT
                             : r == P2PK_NCCL_UNHANDLED_CUDA_ERROR ? P2PKIT_ERR_CUDA
                                                                   : P2PKIT_ERR_REMOTE;
  return p2pk_fail(st, "rank %d (GPU %d): %s failed: %s (NCCL error %d)", c->rank, c->device, what,
                   s->api->GetErrorString ? s->api->GetErrorString(r) : "?", r);
}

/* c's state (api, compute capability), made once; NULL when NCCL is off. */
static p2pkit_status_t make_state(struct p2pkit_comm *c) {
  if (state_of(c) || c->nccl_mode == P2PK_NCCL_OFF) return P2PKIT_SUCCESS;
  nccl_state *s = calloc(1, sizeof *s);
  if (!s) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "rank %d: out of memory", c->rank);
  if (p2pk_nccl_shared(&s->api, NULL, 0) != P2PKIT_SUCCESS) {
    free(s);
    return P2PKIT_ERR_UNSUPPORTED;
  }
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, c->device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, c->device);
  cudaGetLastError();
  s->cc = major * 10 + minor;
  loaded_api = s->api;
  c->path_state[P2PK_PATH_NCCL] = s;
  return P2PKIT_SUCCESS;
}

/* The in-place all-to-all's scratch of rank c, on its GPU, made with the
 * NCCL communicator (at init, at the first call that needs NCCL on 2 ranks,
 * or when the caller's is adopted), else at the first in-place all-to-all
 * after making it then failed: never per call, never under capture. */
static p2pkit_status_t make_a2a(struct p2pkit_comm *c, nccl_state *s) {
  if (s->a2a) return P2PKIT_SUCCESS;
  int prev = -1;
  cudaGetDevice(&prev);
  cudaError_t e = cudaSetDevice(c->device);
  if (e == cudaSuccess) e = cudaMalloc((void **)&s->a2a, A2A_BYTES);
  if (prev >= 0) cudaSetDevice(prev);
  if (e == cudaSuccess) return P2PKIT_SUCCESS;
  cudaGetLastError();
  s->a2a = NULL;
  return p2pk_fail(e == cudaErrorMemoryAllocation ? P2PKIT_ERR_NO_MEMORY : P2PKIT_ERR_CUDA,
                   "rank %d: the NCCL path's %zu bytes of scratch on GPU %d: %s", c->rank,
                   A2A_BYTES, c->device, cudaGetErrorString(e));
}

/* Process per GPU: rank 0's unique id to every rank, then each its init. */
static p2pkit_status_t make_comm_boot(struct p2pkit_comm *c, nccl_state *s) {
  void *comm = NULL;
  P2PK_CHECK(p2pk_nccl_comm_among(c, P2PK_TAG_NCCL_ID, 0, c->nranks, c->rank, &comm));
  s->comm = comm;
  s->owned = 1;
  return make_a2a(c, s);
}

/* One process: every rank's at once (ncclCommInitAll), under the group's lock. */
static p2pkit_status_t make_comm_all(struct p2pkit_comm *c) {
  p2pk_group *g = c->group;
  const int n = c->nranks;
  int devs[P2PK_COLL_MAX_RANKS];
  p2pk_nccl_comm_t comms[P2PK_COLL_MAX_RANKS] = {0};
  for (int r = 0; r < n; r++) {
    P2PK_CHECK(make_state(g->comms[r]));
    if (state_of(g->comms[r])->comm) return P2PKIT_SUCCESS; /* made already */
    devs[r] = g->comms[r]->device;
  }
  nccl_state *s = state_of(c);
  P2PK_CHECK(nccl_status(c, s, s->api->CommInitAll(comms, n, devs), "ncclCommInitAll"));
  for (int r = 0; r < n; r++) {
    state_of(g->comms[r])->comm = comms[r];
    state_of(g->comms[r])->owned = 1;
  }
  for (int r = 0; r < n; r++) P2PK_CHECK(make_a2a(g->comms[r], state_of(g->comms[r])));
  P2PK_INFO(P2PK_LOG_COLL, "one process: NCCL communicators of %d ranks made (NCCL %d)", n,
            s->api->version);
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t make_comm(struct p2pkit_comm *c) {
  P2PK_CHECK(make_state(c));
  nccl_state *s = state_of(c);
  if (!s) return p2pk_fail(P2PKIT_ERR_INTERNAL, "rank %d: the NCCL path without NCCL", c->rank);
  if (s->comm) return P2PKIT_SUCCESS;
  if (!c->group) return make_comm_boot(c, s);
  pthread_mutex_lock(&c->group->lock);
  const p2pkit_status_t st = make_comm_all(c);
  pthread_mutex_unlock(&c->group->lock);
  return st;
}

/* Made at init: wherever a call of any type may come to NCCL on more
 * than 2 ranks (send/recv between two of them could not make it later). */
static int made_at_init(const struct p2pkit_comm *c) {
  return c->nccl_mode == P2PK_NCCL_ALL || c->hosts.nhosts > 1 || c->nranks > 2;
}

static p2pkit_status_t init(struct p2pkit_comm *c) {
  if (c->nccl_mode == P2PK_NCCL_OFF || c->nranks < 2) return P2PKIT_SUCCESS;
  P2PK_CHECK(make_state(c));
  if (!made_at_init(c)) return P2PKIT_SUCCESS;
  P2PK_CHECK(make_comm(c));
  P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): NCCL communicator of %d ranks ready (P2PKIT_NCCL=%s)",
            c->rank, c->device, c->nranks, p2pk_nccl_mode_name(c->nccl_mode));
  return P2PKIT_SUCCESS;
}

static void fini(struct p2pkit_comm *c) {
  nccl_state *s = state_of(c);
  if (!s) return;
  if (s->comm && s->owned) s->api->CommDestroy(s->comm);
  if (s->a2a) cudaFree(s->a2a);
  free(s);
  c->path_state[P2PK_PATH_NCCL] = NULL;
}

/* The NCCL communicator for a call: made now on 2 ranks, not under capture. */
static p2pkit_status_t ready(const p2pk_call *call, nccl_state **sp) {
  struct p2pkit_comm *c = call->c;
  P2PK_CHECK(make_state(c));
  nccl_state *s = state_of(c);
  if (!s)
    return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "%s: rank %d: %s needs the NCCL path, and NCCL is "
                     "off on this communicator", p2pk_call_name(call), c->rank,
                     p2pkit_dtype_name(call->dtype));
  if (!s->comm && p2pk_capture_of(c, call->stream) > 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: the first call through NCCL (%s) "
                     "is under CUDA graph capture, and NCCL's communicator is made at that call: "
                     "make one such call before capturing (or set P2PKIT_NCCL=1)",
                     p2pk_call_name(call), c->rank, p2pkit_dtype_name(call->dtype));
  P2PK_CHECK(make_comm(c));
  *sp = s;
  return P2PKIT_SUCCESS;
}

/* Block p of `src` to rank p, rank p's block into the output's place p,
 * `len` bytes from `off` of each `block`-byte block: one NCCL group. */
static p2pk_nccl_result exchange(const p2pk_call *call, nccl_state *s, int dt, const char *src,
                                 size_t src_block, size_t off, size_t len) {
  const size_t es = call->esize;
  p2pk_nccl_result r = s->api->GroupStart();
  for (int p = 0; p < call->c->nranks && r == P2PK_NCCL_SUCCESS; p++) {
    r = s->api->Send(src + (size_t)p * src_block, len / es, dt, p, s->comm, call->stream);
    if (r == P2PK_NCCL_SUCCESS)
      r = s->api->Recv((char *)call->recv + (size_t)p * call->bytes + off, len / es, dt, p, s->comm,
                       call->stream);
  }
  const p2pk_nccl_result e = s->api->GroupEnd();
  return r == P2PK_NCCL_SUCCESS ? e : r;
}

/* In place: pieces of every block copied into the scratch (one 2-D copy),
 * then exchanged from there into their places, piece after piece on the
 * stream. One process drives every rank in one NCCL group (group.c), whose
 * sends run only at its end: the copy into the scratch is on the stream at
 * the call, so the scratch holds each rank's input as it was at the call,
 * and the whole call must fit it, once per communicator and group (a
 * second would overwrite the first's before its sends ran). A scratch
 * whose making failed with the NCCL communicator is made now, never under
 * capture. */
static p2pkit_status_t all_to_all_in_place(const p2pk_call *call, nccl_state *s, int dt) {
  struct p2pkit_comm *c = call->c;
  const size_t n = (size_t)c->nranks, block = call->bytes, es = call->esize;
  const size_t piece = A2A_BYTES / n / es * es;
  const int taken = open_group && s->a2a_group == open_group;
  if (c->group && (block > piece || taken))
    return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "all_to_all: rank %d: in place through NCCL with one "
                     "process driving every GPU, %s: the NCCL path's scratch takes one such call of "
                     "up to %zu bytes a rank per communicator and group; call it out of place",
                     c->rank, taken ? "a second in this group" : "this large", piece);
  if (c->group && open_group) s->a2a_group = open_group;
  if (!s->a2a && p2pk_capture_of(c, call->stream) > 0)
    return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "all_to_all: rank %d: in place through NCCL under CUDA "
                     "graph capture, and the NCCL path's %zu bytes of scratch on GPU %d are not "
                     "made (making them with NCCL's communicator failed): make one such call "
                     "before capturing, or call it out of place", c->rank, A2A_BYTES, c->device);
  P2PK_CHECK(make_a2a(c, s));
  cudaStream_t st = (cudaStream_t)call->stream;
  for (size_t off = 0; off < block; off += piece) {
    const size_t len = block - off < piece ? block - off : piece;
    const cudaError_t e = cudaMemcpy2DAsync(s->a2a, len, (const char *)call->send + off, block, len,
                                            n, cudaMemcpyDeviceToDevice, st);
    if (e != cudaSuccess) return p2pk_cuda_status(c, "all_to_all", e);
    const p2pk_nccl_result r = exchange(call, s, dt, s->a2a, len, off, len);
    if (r != P2PK_NCCL_SUCCESS) return nccl_status(c, s, r, "all_to_all (ncclSend/ncclRecv)");
  }
  return P2PKIT_SUCCESS;
}

/* All-to-all as NCCL's grouped sends and receives. */
static p2pkit_status_t all_to_all(const p2pk_call *call, nccl_state *s, int dt) {
  if (call->send == call->recv) return all_to_all_in_place(call, s, dt);
  return nccl_status(call->c, s, exchange(call, s, dt, call->send, call->bytes, 0, call->bytes),
                     "all_to_all (ncclSend/ncclRecv)");
}

static p2pkit_status_t coll(const p2pk_call *call, nccl_state *s) {
  const int dt = p2pk_nccl_dtype(call->dtype), op = p2pk_nccl_op(call->op);
  const p2pk_nccl_api *a = s->api;
  p2pk_nccl_comm_t m = s->comm;
  p2pkit_stream_t st = call->stream;
  p2pk_nccl_result r;
  switch (call->kind) {
    case P2PK_COLL_ALL_REDUCE: r = a->AllReduce(call->send, call->recv, call->count, dt, op, m, st); break;
    case P2PK_COLL_BROADCAST: r = a->Broadcast(call->send, call->recv, call->count, dt, call->root, m, st); break;
    case P2PK_COLL_REDUCE: r = a->Reduce(call->send, call->recv, call->count, dt, op, call->root, m, st); break;
    case P2PK_COLL_ALL_GATHER: r = a->AllGather(call->send, call->recv, call->count, dt, m, st); break;
    case P2PK_COLL_REDUCE_SCATTER:
      r = a->ReduceScatter(call->send, call->recv, call->count, dt, op, m, st);
      break;
    case P2PK_COLL_ALL_TO_ALL: return all_to_all(call, s, dt);
    default: return p2pk_fail(P2PKIT_ERR_INTERNAL, "the NCCL path: collective %d", call->kind);
  }
  char what[64];
  snprintf(what, sizeof what, "%s (NCCL)", p2pk_coll_name(call->kind));
  return nccl_status(call->c, s, r, what);
}

static p2pkit_status_t launch(const p2pk_call *call) {
  nccl_state *s = NULL;
  P2PK_CHECK(ready(call, &s));
  return coll(call, s);
}

/* Every rank's call of one collective in one process: one NCCL group. */
static p2pkit_status_t launch_group(p2pk_call *const *set, int n) {
  nccl_state *s = NULL;
  P2PK_CHECK(ready(set[0], &s));
  p2pkit_status_t st = nccl_status(set[0]->c, s, s->api->GroupStart(), "ncclGroupStart");
  for (int r = 0; r < n && st == P2PKIT_SUCCESS; r++) {
    nccl_state *sr = NULL;
    st = ready(set[r], &sr);
    if (st == P2PKIT_SUCCESS) st = coll(set[r], sr);
  }
  const p2pkit_status_t e = nccl_status(set[0]->c, s, s->api->GroupEnd(), "ncclGroupEnd");
  return st != P2PKIT_SUCCESS ? st : e;
}

/* One communicator's sends and receives of a group: one NCCL group. */
static p2pkit_status_t sendrecv(struct p2pkit_comm *c, const p2pk_call *ops, int n) {
  nccl_state *s = NULL;
  P2PK_CHECK(ready(&ops[0], &s));
  p2pk_nccl_result r = s->api->GroupStart();
  for (int i = 0; i < n && r == P2PK_NCCL_SUCCESS; i++) {
    const p2pk_call *o = &ops[i];
    const int dt = p2pk_nccl_dtype(o->dtype);
    r = o->is_send ? s->api->Send(o->send, o->count, dt, o->root, s->comm, o->stream)
                   : s->api->Recv(o->recv, o->count, dt, o->root, s->comm, o->stream);
  }
  const p2pk_nccl_result e = s->api->GroupEnd();
  return nccl_status(c, s, r != P2PK_NCCL_SUCCESS ? r : e, "send/recv (NCCL)");
}

static p2pkit_status_t async_status(struct p2pkit_comm *c) {
  nccl_state *s = state_of(c);
  if (!s || !s->comm || !s->api->CommGetAsyncError) return P2PKIT_SUCCESS;
  p2pk_nccl_result r = P2PK_NCCL_SUCCESS;
  if (s->api->CommGetAsyncError(s->comm, &r) != P2PK_NCCL_SUCCESS) return P2PKIT_SUCCESS;
  if (r == P2PK_NCCL_SUCCESS || r == P2PK_NCCL_IN_PROGRESS) return P2PKIT_SUCCESS;
  return p2pk_fail(P2PKIT_ERR_REMOTE, "rank %d (GPU %d): NCCL reports an error: %s (NCCL error %d); "
                   "the communicator is unusable", c->rank, c->device,
                   s->api->GetErrorString ? s->api->GetErrorString(r) : "?", r);
}

/* ncclCommAbort: NCCL's kernels stop, its threads end, nothing waits for
 * a peer; waited for until the abort's deadline (p2pk_nccl_abort_until).
 * The caller's adopted communicator is the caller's to abort. */
static void nccl_abort(struct p2pkit_comm *c) {
  nccl_state *s = state_of(c);
  if (!s || !s->comm || !s->owned) return;
  if (p2pk_nccl_abort_until(s->api, s->comm, c->abort_until_ns) == 0)
    P2PK_WARN("rank %d (GPU %d): NCCL's abort has not returned; left to finish on a thread of its own",
              c->rank, c->device);
  s->comm = NULL;
}

static void group_open(void) {
  open_group = atomic_fetch_add(&groups_opened, 1) + 1;
  if (loaded_api) loaded_api->GroupStart();
}

static p2pkit_status_t group_close(void) {
  open_group = 0;
  if (!loaded_api) return P2PKIT_SUCCESS;
  const p2pk_nccl_result r = loaded_api->GroupEnd();
  return r == P2PK_NCCL_SUCCESS ? P2PKIT_SUCCESS : p2pk_nccl_check(loaded_api, r, "ncclGroupEnd");
}

p2pkit_status_t p2pk_nccl_type_check(struct p2pkit_comm *c, const char *who,
                                     p2pkit_dtype_t dtype, int has_op, p2pkit_redop_t op) {
  if (p2pk_dtype_native(dtype) && c->nccl_mode == P2PK_NCCL_OFF) return P2PKIT_SUCCESS;
  if (c->nccl_mode == P2PK_NCCL_OFF) return p2pk_dtype_check_native(who, c->rank, dtype);
  const p2pk_nccl_api *api = NULL;
  P2PK_CHECK(p2pk_nccl_shared(&api, NULL, 0));
  const nccl_state *s = state_of(c);
  char what[64];
  snprintf(what, sizeof what, "%s: rank %d", who, c->rank);
  P2PK_CHECK(p2pk_dtype_check_nccl(what, dtype, has_op, op, api->version, s ? s->cc : 0));
  /* One process on 2 ranks: NCCL's communicators now, outside the NCCL
   * group the call will go in at its group's end. */
  if (c->group && c->nranks > 1 && (!s || !s->comm)) {
    int prev = -1;
    cudaGetDevice(&prev);
    const p2pkit_status_t st = make_comm(c);
    if (prev >= 0) cudaSetDevice(prev);
    return st;
  }
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pkit_comm_adopt_nccl(p2pkit_comm_t c, void *nccl_comm) {
  if (!c || !nccl_comm)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "comm_adopt_nccl: %s is NULL",
                     c ? "nccl_comm" : "communicator");
  if (c->nccl_mode == P2PK_NCCL_OFF)
    return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "comm_adopt_nccl: rank %d: NCCL is off on this "
                     "communicator (P2PKIT_NCCL=0, or NCCL not usable: the INFO log says why)",
                     c->rank);
  P2PK_CHECK(make_state(c));
  nccl_state *s = state_of(c);
  /* The scratch first: when it cannot be made, nothing has changed (the
   * communicator p2pkit had is kept, the caller's not taken). */
  P2PK_CHECK(make_a2a(c, s));
  if (s->comm && s->owned) {
    int prev = -1;
    cudaGetDevice(&prev);
    cudaSetDevice(c->device);
    cudaDeviceSynchronize(); /* p2pkit's calls on its own end first */
    s->api->CommDestroy(s->comm);
    if (prev >= 0) cudaSetDevice(prev);
    cudaGetLastError();
  }
  s->comm = (p2pk_nccl_comm_t)nccl_comm;
  s->owned = 0;
  P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): the caller's NCCL communicator carries the NCCL path",
            c->rank, c->device);
  return P2PKIT_SUCCESS;
}

const p2pk_path p2pk_path_nccl = {
    .id = P2PK_PATH_NCCL,
    .kinds = (1u << P2PK_KINDS) - 1,
    .modes = P2PK_MODE_ONE | P2PK_MODE_PER_GPU | P2PK_MODE_SPAN,
    .transports = P2PK_XPORT_P2P | P2PK_XPORT_SHM,
    .captures = P2PK_CAPTURE_EAGER | P2PK_CAPTURE_GRAPH,
    .init = init,
    .fini = fini,
    .launch = launch,
    .launch_group = launch_group,
    .sendrecv = sendrecv,
    .async_status = async_status,
    .abort = nccl_abort,
    .group_open = group_open,
    .group_close = group_close,
};
