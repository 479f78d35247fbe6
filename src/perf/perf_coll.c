/* SPDX-License-Identifier: BSD-3-Clause */
/* One descriptor per collective. Adding one: a row in `colls`, its element
 * counts, its calls, and its output layout in perf_expected() (perf_data.h). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <string.h>

#include "core/check.h"

#include "nccl/nccl_dl.h"
#include "perf/perf.h"

/* ---- bus bandwidth factors (nccl-tests' definitions) -------------------- */

static double factor_allreduce(int n) { return n > 0 ? 2.0 * (n - 1) / n : 0.0; }
static double factor_gather(int n) { return n > 0 ? (double)(n - 1) / n : 0.0; }
static double factor_one(int n) { return 1.0; }

/* ---- element counts ----------------------------------------------------- */

static void counts_whole(size_t count, int n, perf_counts *o) {
  memset(o, 0, sizeof *o);
  o->count = o->param = o->send_elems = o->recv_elems = count;
}

/* A block per rank: the count is rounded down to whole blocks, at least one. */
static size_t block(size_t count, int n) {
  size_t p = count / (size_t)n;
  return p ? p : 1;
}

static void counts_allgather(size_t count, int n, perf_counts *o) {
  memset(o, 0, sizeof *o);
  o->param = block(count, n);
  o->count = o->recv_elems = o->param * (size_t)n;
  o->send_elems = o->param;
  o->ip_send_step = o->param; /* in place: rank r sends from its own block */
}

static void counts_reducescatter(size_t count, int n, perf_counts *o) {
  memset(o, 0, sizeof *o);
  o->param = block(count, n);
  o->count = o->send_elems = o->param * (size_t)n;
  o->recv_elems = o->param;
  o->ip_recv_step = o->param; /* in place: rank r receives into its own block */
}

static void counts_alltoall(size_t count, int n, perf_counts *o) {
  memset(o, 0, sizeof *o);
  o->param = block(count, n);
  o->count = o->send_elems = o->recv_elems = o->param * (size_t)n;
}

/* ---- p2pkit ------------------------------------------------------------- */

#define P2OP(c) ((p2pkit_redop_t)(c)->op)

static p2pkit_status_t p2pkit_allreduce(const perf_call *c) {
  return p2pkit_all_reduce(c->send, c->recv, c->param, c->dtype, P2OP(c), (p2pkit_comm_t)c->comm,
                           c->stream);
}

static p2pkit_status_t p2pkit_bcast(const perf_call *c) {
  return p2pkit_broadcast(c->send, c->recv, c->param, c->dtype, c->root, (p2pkit_comm_t)c->comm,
                          c->stream);
}

static p2pkit_status_t p2pkit_reduce_call(const perf_call *c) {
  return p2pkit_reduce(c->send, c->recv, c->param, c->dtype, P2OP(c), c->root, (p2pkit_comm_t)c->comm,
                       c->stream);
}

static p2pkit_status_t p2pkit_allgather(const perf_call *c) {
  return p2pkit_all_gather(c->send, c->recv, c->param, c->dtype, (p2pkit_comm_t)c->comm, c->stream);
}

static p2pkit_status_t p2pkit_reducescatter(const perf_call *c) {
  return p2pkit_reduce_scatter(c->send, c->recv, c->param, c->dtype, P2OP(c), (p2pkit_comm_t)c->comm,
                               c->stream);
}

static p2pkit_status_t p2pkit_alltoall(const perf_call *c) {
  return p2pkit_all_to_all(c->send, c->recv, c->param, c->dtype, (p2pkit_comm_t)c->comm, c->stream);
}

static p2pkit_status_t p2pkit_gather_call(const perf_call *c) {
  return p2pkit_gather(c->send, c->recv, c->param, c->dtype, c->root, (p2pkit_comm_t)c->comm,
                       c->stream);
}

static p2pkit_status_t p2pkit_scatter_call(const perf_call *c) {
  return p2pkit_scatter(c->send, c->recv, c->param, c->dtype, c->root, (p2pkit_comm_t)c->comm,
                        c->stream);
}

/* As nccl-tests' sendrecv: send to the next rank, receive from the previous,
 * in one group. */
static p2pkit_status_t p2pkit_sendrecv(const perf_call *c) {
  p2pkit_comm_t comm = (p2pkit_comm_t)c->comm;
  int to = (c->rank + 1) % c->nranks, from = (c->rank + c->nranks - 1) % c->nranks;
  p2pkit_status_t st = p2pkit_group_start();
  if (st != P2PKIT_SUCCESS) return st;
  st = p2pkit_send(c->send, c->param, c->dtype, to, comm, c->stream);
  if (st == P2PKIT_SUCCESS) st = p2pkit_recv(c->recv, c->param, c->dtype, from, comm, c->stream);
  p2pkit_status_t end = p2pkit_group_end();
  return st != P2PKIT_SUCCESS ? st : end;
}

/* nccl-tests' hypercube: an all-gather by recursive doubling. Each rank
 * copies its block into place, then for each dimension (mask 1, 2, 4, ...)
 * exchanges everything it holds with rank ^ mask in one group: the blocks
 * of its own half, rank & ~(mask - 1) on, go out and the partner's half
 * comes in. The steps depend on each other, so a group must not fuse them:
 * perf's launch() runs them one step at a time over its local GPUs
 * (perf_coll.steps), step 0 being the copy and the first exchange. */
static int hypercube_steps(int n) {
  int s = 0;
  while ((1 << s) < n) s++;
  return s > 0 ? s : 1;
}

typedef p2pkit_status_t (*xchg_fn)(const perf_call *c, int peer, size_t off_send, size_t off_recv,
                                   size_t count);

static p2pkit_status_t hypercube_step(const perf_call *c, int step, xchg_fn xchg) {
  const size_t block = c->param * c->type_size;
  char *rbuf = c->recv;
  if (step == 0 && (const char *)c->send != rbuf + (size_t)c->rank * block) {
    cudaError_t e = cudaMemcpyAsync(rbuf + (size_t)c->rank * block, c->send, block,
                                    cudaMemcpyDeviceToDevice, (cudaStream_t)c->stream);
    if (e != cudaSuccess)
      return p2pk_fail(P2PKIT_ERR_CUDA, "hypercube: rank %d: copying its block failed: %s",
                       c->rank, cudaGetErrorString(e));
  }
  const int mask = 1 << step;
  if (mask >= c->nranks) return P2PKIT_SUCCESS; /* one rank: the copy is all */
  const int s = c->rank & ~(mask - 1), r = s ^ mask;
  return xchg(c, c->rank ^ mask, (size_t)s * block, (size_t)r * block, c->param * (size_t)mask);
}

static p2pkit_status_t p2pkit_xchg(const perf_call *c, int peer, size_t off_send, size_t off_recv,
                                   size_t count) {
  p2pkit_comm_t comm = (p2pkit_comm_t)c->comm;
  p2pkit_status_t st = p2pkit_group_start();
  if (st != P2PKIT_SUCCESS) return st;
  st = p2pkit_send((const char *)c->recv + off_send, count, c->dtype, peer, comm, c->stream);
  if (st == P2PKIT_SUCCESS)
    st = p2pkit_recv((char *)c->recv + off_recv, count, c->dtype, peer, comm, c->stream);
  p2pkit_status_t end = p2pkit_group_end();
  return st != P2PKIT_SUCCESS ? st : end;
}

static p2pkit_status_t p2pkit_hypercube(const perf_call *c) {
  return hypercube_step(c, c->step, p2pkit_xchg);
}

/* ---- NCCL --------------------------------------------------------------- */

#define NCOMM(c) ((p2pk_nccl_comm_t)(c)->comm)
#define NTYPE(c) p2pk_nccl_dtype((c)->dtype)
#define NOP(c) ((c)->nccl_op)

static p2pkit_status_t nccl_allreduce(const p2pk_nccl_api *api, const perf_call *c) {
  return p2pk_nccl_check(api, api->AllReduce(c->send, c->recv, c->param, NTYPE(c), NOP(c), NCOMM(c),
                                             c->stream), "ncclAllReduce");
}

static p2pkit_status_t nccl_broadcast(const p2pk_nccl_api *api, const perf_call *c) {
  return p2pk_nccl_check(api, api->Broadcast(c->send, c->recv, c->param, NTYPE(c), c->root, NCOMM(c),
                                             c->stream), "ncclBroadcast");
}

static p2pkit_status_t nccl_reduce(const p2pk_nccl_api *api, const perf_call *c) {
  return p2pk_nccl_check(api, api->Reduce(c->send, c->recv, c->param, NTYPE(c), NOP(c), c->root,
                                          NCOMM(c), c->stream), "ncclReduce");
}

static p2pkit_status_t nccl_allgather(const p2pk_nccl_api *api, const perf_call *c) {
  return p2pk_nccl_check(api, api->AllGather(c->send, c->recv, c->param, NTYPE(c), NCOMM(c),
                                             c->stream), "ncclAllGather");
}

static p2pkit_status_t nccl_reducescatter(const p2pk_nccl_api *api, const perf_call *c) {
  return p2pk_nccl_check(api, api->ReduceScatter(c->send, c->recv, c->param, NTYPE(c), NOP(c),
                                                 NCOMM(c), c->stream), "ncclReduceScatter");
}

/* Send and receive calls of one rank, fused in their own group. */
static p2pkit_status_t nccl_p2p(const p2pk_nccl_api *api, const perf_call *c, int all) {
  p2pkit_status_t st = p2pk_nccl_check(api, api->GroupStart(), "ncclGroupStart");
  if (st != P2PKIT_SUCCESS) return st;
  size_t block_bytes = c->param * c->type_size;
  for (int q = 0; q < c->nranks && st == P2PKIT_SUCCESS; q++) {
    int to = all ? q : (c->rank + 1) % c->nranks;
    int from = all ? q : (c->rank + c->nranks - 1) % c->nranks;
    size_t off = all ? (size_t)q * block_bytes : 0;
    st = p2pk_nccl_check(api, api->Send((const char *)c->send + off, c->param, NTYPE(c), to,
                                        NCOMM(c), c->stream), "ncclSend");
    if (st == P2PKIT_SUCCESS)
      st = p2pk_nccl_check(api, api->Recv((char *)c->recv + off, c->param, NTYPE(c), from, NCOMM(c),
                                          c->stream), "ncclRecv");
    if (!all) break;
  }
  p2pkit_status_t end = p2pk_nccl_check(api, api->GroupEnd(), "ncclGroupEnd");
  return st != P2PKIT_SUCCESS ? st : end;
}

static p2pkit_status_t nccl_sendrecv(const p2pk_nccl_api *api, const perf_call *c) {
  return nccl_p2p(api, c, 0);
}

static p2pkit_status_t nccl_alltoall(const p2pk_nccl_api *api, const perf_call *c) {
  return nccl_p2p(api, c, 1);
}

/* As nccl-tests' gather and scatter before NCCL 2.28 (ncclGather and
 * ncclScatter): one group per rank, the root's receives (sends) from (to)
 * every rank, itself included, each block at rank * count. */
static p2pkit_status_t nccl_rooted(const p2pk_nccl_api *api, const perf_call *c, int gather) {
  p2pkit_status_t st = p2pk_nccl_check(api, api->GroupStart(), "ncclGroupStart");
  if (st != P2PKIT_SUCCESS) return st;
  const size_t block_bytes = c->param * c->type_size;
  if (gather)
    st = p2pk_nccl_check(api, api->Send(c->send, c->param, NTYPE(c), c->root, NCOMM(c), c->stream),
                         "ncclSend");
  for (int q = 0; c->rank == c->root && q < c->nranks && st == P2PKIT_SUCCESS; q++)
    st = gather ? p2pk_nccl_check(api, api->Recv((char *)c->recv + (size_t)q * block_bytes, c->param,
                                                 NTYPE(c), q, NCOMM(c), c->stream), "ncclRecv")
                : p2pk_nccl_check(api, api->Send((const char *)c->send + (size_t)q * block_bytes,
                                                 c->param, NTYPE(c), q, NCOMM(c), c->stream),
                                  "ncclSend");
  if (!gather && st == P2PKIT_SUCCESS)
    st = p2pk_nccl_check(api, api->Recv(c->recv, c->param, NTYPE(c), c->root, NCOMM(c), c->stream),
                         "ncclRecv");
  p2pkit_status_t end = p2pk_nccl_check(api, api->GroupEnd(), "ncclGroupEnd");
  return st != P2PKIT_SUCCESS ? st : end;
}

static p2pkit_status_t nccl_gather(const p2pk_nccl_api *api, const perf_call *c) {
  return nccl_rooted(api, c, 1);
}

static p2pkit_status_t nccl_scatter(const p2pk_nccl_api *api, const perf_call *c) {
  return nccl_rooted(api, c, 0);
}

/* The API is not a parameter of hypercube_step's exchange: one call at a
 * time per thread, so the step's exchange reads it from here. */
static _Thread_local const p2pk_nccl_api *xchg_api;

static p2pkit_status_t nccl_xchg(const perf_call *c, int peer, size_t off_send, size_t off_recv,
                                 size_t count) {
  const p2pk_nccl_api *api = xchg_api;
  p2pkit_status_t st = p2pk_nccl_check(api, api->GroupStart(), "ncclGroupStart");
  if (st != P2PKIT_SUCCESS) return st;
  st = p2pk_nccl_check(api, api->Send((const char *)c->recv + off_send, count, NTYPE(c), peer,
                                      NCOMM(c), c->stream), "ncclSend");
  if (st == P2PKIT_SUCCESS)
    st = p2pk_nccl_check(api, api->Recv((char *)c->recv + off_recv, count, NTYPE(c), peer,
                                        NCOMM(c), c->stream), "ncclRecv");
  p2pkit_status_t end = p2pk_nccl_check(api, api->GroupEnd(), "ncclGroupEnd");
  return st != P2PKIT_SUCCESS ? st : end;
}

static p2pkit_status_t nccl_hypercube(const p2pk_nccl_api *api, const perf_call *c) {
  xchg_api = api;
  return hypercube_step(c, c->step, nccl_xchg);
}

/* ---- the table ---------------------------------------------------------- */

static int one_step(int n) { return 1; }

static const perf_coll colls[] = {
    /* name, id, op, root, in-place, power-of-two ranks, factor, counts, p2pkit, nccl, steps */
    {"all_reduce", PERF_ALL_REDUCE, 1, 0, 1, 0, factor_allreduce, counts_whole, p2pkit_allreduce,
     nccl_allreduce, one_step},
    {"broadcast", PERF_BROADCAST, 0, 1, 1, 0, factor_one, counts_whole, p2pkit_bcast,
     nccl_broadcast, one_step},
    {"reduce", PERF_REDUCE, 1, 1, 1, 0, factor_one, counts_whole, p2pkit_reduce_call,
     nccl_reduce, one_step},
    {"all_gather", PERF_ALL_GATHER, 0, 0, 1, 0, factor_gather, counts_allgather,
     p2pkit_allgather, nccl_allgather, one_step},
    {"reduce_scatter", PERF_REDUCE_SCATTER, 1, 0, 1, 0, factor_gather, counts_reducescatter,
     p2pkit_reducescatter, nccl_reducescatter, one_step},
    /* Receiving into the buffer being sent races: no in-place variant. */
    {"sendrecv", PERF_SENDRECV, 0, 0, 0, 0, factor_one, counts_whole, p2pkit_sendrecv,
     nccl_sendrecv, one_step},
    {"alltoall", PERF_ALLTOALL, 0, 0, 0, 0, factor_gather, counts_alltoall, p2pkit_alltoall,
     nccl_alltoall, one_step},
    /* nccl-tests' busbw for it is (n-1)/n of the gathered size over the time,
     * as all_gather's; in place, each rank's block already sits in place. */
    {"hypercube", PERF_HYPERCUBE, 0, 0, 1, 1, factor_gather, counts_allgather, p2pkit_hypercube,
     nccl_hypercube, hypercube_steps},
    /* nccl-tests' gather and scatter: all_gather's and reduce_scatter's
     * buffers (the whole on the root, a block elsewhere; in place, each
     * rank's block at rank * count of the whole) and busbw, (n-1)/n of the
     * whole over the time. */
    {"gather", PERF_GATHER, 0, 1, 1, 0, factor_gather, counts_allgather, p2pkit_gather_call,
     nccl_gather, one_step},
    {"scatter", PERF_SCATTER, 0, 1, 1, 0, factor_gather, counts_reducescatter, p2pkit_scatter_call,
     nccl_scatter, one_step},
};

static const struct {
  const char *alias, *name;
} aliases[] = {
    {"allreduce", "all_reduce"},         {"bcast", "broadcast"},
    {"allgather", "all_gather"},         {"reducescatter", "reduce_scatter"},
    {"send_recv", "sendrecv"},           {"all_to_all", "alltoall"},
    {"all_reduce_perf", "all_reduce"},   {"broadcast_perf", "broadcast"},
    {"reduce_perf", "reduce"},           {"all_gather_perf", "all_gather"},
    {"reduce_scatter_perf", "reduce_scatter"}, {"sendrecv_perf", "sendrecv"},
    {"alltoall_perf", "alltoall"},       {"hypercube_perf", "hypercube"},
    {"gather_perf", "gather"},           {"scatter_perf", "scatter"},
};

const perf_coll *p2pk_perf_coll(const char *name) {
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
    if (strcmp(name, aliases[i].alias) == 0) name = aliases[i].name;
  for (size_t i = 0; i < sizeof colls / sizeof colls[0]; i++)
    if (strcmp(name, colls[i].name) == 0) return &colls[i];
  return NULL;
}

const perf_coll *p2pk_perf_coll_at(int i) {
  return i >= 0 && (size_t)i < sizeof colls / sizeof colls[0] ? &colls[i] : NULL;
}

int p2pk_perf_rank_has_output(const perf_coll *c, int rank, int root) {
  return (c->id != PERF_REDUCE && c->id != PERF_GATHER) || rank == root;
}

void p2pk_perf_counts(const perf_coll *c, size_t bytes, size_t type_size, int nranks,
                      perf_counts *out) {
  size_t count = type_size ? bytes / type_size : 0;
  if (count == 0) count = 1;
  c->counts(count, nranks > 0 ? nranks : 1, out);
  out->bytes = out->count * type_size;
}

double p2pk_perf_algbw(size_t bytes, double time_us) {
  if (!(time_us > 0)) return NAN;
  return (double)bytes / time_us / 1e3; /* bytes/us = MB/s; /1e3 = GB/s */
}

double p2pk_perf_busbw(const perf_coll *c, size_t bytes, double time_us, int nranks) {
  return p2pk_perf_algbw(bytes, time_us) * c->factor(nranks);
}

double p2pk_perf_combine(const double *t, int n, int mode) {
  if (n <= 0) return NAN;
  double acc = t[0];
  for (int i = 1; i < n; i++) {
    if (mode == 1) acc += t[i];
    else if (mode == 2 && t[i] < acc) acc = t[i];
    else if (mode == 3 && t[i] > acc) acc = t[i];
  }
  return mode == 1 ? acc / n : acc;
}
