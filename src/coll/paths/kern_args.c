/* SPDX-License-Identifier: BSD-3-Clause */
/* What the kernel paths (path_p2p.c over P2P, path_staged.c through host
 * memory) share: one launch per call, its arguments from the
 * communicator's template, the call's plan and the selector's choice; a
 * group's sends and receives of one communicator in one kernel, each
 * operation on its own range of blocks. The per-call host work is a few
 * comparisons and the launch: no allocation, no synchronisation. */
#include "coll/paths/path.h"

#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/log.h"

#define KS(c, id) ((p2pk_kernel_state *)(c)->path_state[id])

/* Where peers may write this rank's all-gather share (two-shot). */
static void set_direct(const struct p2pkit_comm *c, p2pk_ar_args *a, const char *out, size_t bytes,
                       int direct_ok) {
  a->out_token = 0;
  if (!direct_ok || a->direct == 0) return;
  if (a->direct == 1) {
    a->out_token = (uint64_t)(uintptr_t)out;
    return;
  }
  const p2pk_reg *r = p2pk_reg_holding(c, out, bytes);
  if (!r) return;
  uint64_t off = (uint64_t)(out - r->buf);
  if (off >> 40) return;
  a->out_token = ((uint64_t)(r->id + 1) << 40) | off;
  for (int p = 0; p < c->nranks; p++) a->peer_out[p] = r->peer[p] ? r->peer[p] + off : NULL;
}

/* The kernel's arguments of one rank's collective. */
static void fill_args(const p2pk_call *call, p2pk_ar_args *a) {
  const struct p2pkit_comm *c = call->c;
  const p2pk_algo_choice *ch = &call->d.ch;
  const int kind = call->kind, root = call->root;
  p2pk_coll_plan pl = call->plan;
  *a = c->tmpl;
  a->in = call->send;
  a->out = call->recv;
  a->count = call->count;
  a->dtype = call->dtype;
  a->op = call->op;
  a->algo = ch->algo;
  a->proto = ch->proto;
  a->ll128_x2 = ch->ll128_x2;
  a->slots = ch->slots;
  a->chunk = ch->chunk;
  /* Broadcast and reduce in two-shot: the rooted form (coll_dev.h's
   * p2pk_ts_shard), whose masks replace the one-shot plan's. */
  if (call->d.flags & P2PK_SEL_ROOTED) {
    p2pk_coll_plan_twoshot(kind, c->rank, c->nranks, root, &pl);
    a->ts_root1 = root + 1;
  }
  a->send_mask = pl.send_mask;
  a->recv_mask = pl.recv_mask;
  a->send2_mask = pl.send2_mask;
  a->recv2_mask = pl.recv2_mask;
  a->in_stride = pl.in_stride;
  a->out_stride = pl.out_stride;
  a->reduce = pl.reduce;
  a->self_copy = pl.self_copy;
  p2pk_coll_header(kind, call->count, call->dtype, call->op, root, ch->algo, ch->proto, ch->blocks,
                   &a->hdr0, &a->hdr1);
  /* Two-shot results straight into the peers' outputs: all-reduce's
   * owners send to everyone, a reduce's to the root (whose token counts);
   * a broadcast's owners forward to peers that sent them nothing, so no
   * token tells them where those outputs are. */
  if (ch->algo == P2PK_ALGO_TWOSHOT && kind != P2PK_COLL_BROADCAST)
    set_direct(c, a, call->recv, call->bytes, call->direct_ok);
}

/* Once per communicator and (collective, algorithm, protocol) at INFO; every
 * call at TRACE. */
static void log_choice(const p2pk_call *call, const p2pk_ar_args *a, int id) {
  struct p2pkit_comm *c = call->c;
  const p2pk_algo_choice *ch = &call->d.ch;
  const int kind = call->kind, rooted = (call->d.flags & P2PK_SEL_ROOTED) != 0;
  const char *name = p2pk_coll_name(kind);
  uint64_t combo = 1ULL << ((kind * P2PK_ALGO_COUNT + ch->algo) * P2PK_PROTO_COUNT + ch->proto);
  if (!(KS(c, id)->logged & combo)) {
    KS(c, id)->logged |= combo;
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): %s of %zu B uses %s/%s, %d blocks x %d "
              "threads, chunk %u B%s%s", c->rank, c->device, name, call->bytes,
              p2pk_algo_name(ch->algo), p2pk_proto_name(ch->proto), ch->blocks, ch->threads,
              ch->chunk, !rooted ? ""
              : kind == P2PK_COLL_BROADCAST ? ", rooted: the root scatters n - 1 shards, their owners forward them"
                                            : ", rooted: the owners of n - 1 shards reduce them for the root",
              a->out_token ? kind == P2PK_COLL_REDUCE ? ", into the root's output" : ", all-gather into peers' outputs" : "");
  }
  P2PK_TRACE(P2PK_LOG_COLL, "rank %d %s %zu x %s %s root %d: %s/%s grid %d x %d chunk %u",
             c->rank, name, call->count, p2pkit_dtype_name(call->dtype),
             p2pkit_redop_name(call->op), call->root, p2pk_algo_name(ch->algo),
             p2pk_proto_name(ch->proto), ch->blocks, ch->threads, ch->chunk);
}

/* Under capture the broadcast root's own copy (out of place) goes by copy
 * engine on a side stream beside the kernel, which then only pushes: a
 * memcpy node in parallel with the kernel node. On 2x H200, both modes:
 * 64 MiB out of place under a graph 189.4-190.0 us against 200.5-200.9
 * with the kernel copying inline (1.01x -> 1.07-1.08x NCCL), 8-32 MiB
 * 2-3% faster, 4 MiB a tie; eagerly the extra calls cost more than they
 * save (1 MiB per GPU 12.6 against 5.9 us), so never there. */
static cudaError_t self_copy_ce(const p2pk_call *call, p2pk_ar_args *a, int id) {
  struct p2pkit_comm *c = call->c;
  const cudaError_t e =
      p2pk_ce_side_copy(c, (char *)call->recv + (size_t)c->rank * call->plan.out_stride,
                        (const char *)call->send + (size_t)c->rank * call->plan.in_stride,
                        call->bytes, (cudaStream_t)call->stream);
  if (e != cudaSuccess) return e;
  a->self_copy = 0;
  if (!KS(c, id)->self_logged) {
    KS(c, id)->self_logged = 1;
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): broadcast root of %zu B under a CUDA graph: "
              "its own copy by copy engine beside the kernel (from %zu B, "
              "P2PKIT_BCAST_SELF_CE)", c->rank, c->device, call->bytes, c->sel.self_ce);
  }
  return cudaSuccess;
}

p2pkit_status_t p2pk_kernel_coll(const p2pk_call *call, int id, p2pk_coll_launcher launch) {
  p2pk_ar_args a;
  fill_args(call, &a);
  log_choice(call, &a, id);
  const int own_ce = a.self_copy && (call->d.flags & P2PK_SEL_SELF_CE) &&
                     call->capture == (int)cudaStreamCaptureStatusActive;
  cudaError_t e = own_ce ? self_copy_ce(call, &a, id) : cudaSuccess;
  const p2pk_algo_choice *ch = &call->d.ch;
  if (e == cudaSuccess) e = launch(&a, ch->blocks, ch->threads, (cudaStream_t)call->stream);
  if (e == cudaSuccess && own_ce) e = p2pk_ce_side_join(call->c, (cudaStream_t)call->stream);
  return p2pk_cuda_status(call->c, p2pk_coll_name(call->kind), e);
}

/* The send/recv kernel's arguments: each operation on its own blocks, the
 * element width of its copy loops dividing every operation's alignment. */
static int fill_p2p(struct p2pkit_comm *c, const p2pk_call *ops, int n, p2pk_p2p_args *pa,
                    int *threads, size_t *esize) {
  memset(pa, 0, sizeof *pa);
  pa->a = c->tmpl;
  int blocks = 0;
  *threads = 64;
  *esize = 8;
  for (int i = 0; i < n && pa->nops < P2PK_P2P_MAX_OPS; i++) {
    const p2pk_call *o = &ops[i];
    const p2pk_algo_choice *ch = &o->d.ch;
    char *buf = o->is_send ? (char *)o->send : (char *)o->recv;
    p2pk_p2p_op *po = &pa->op[pa->nops++];
    po->buf = buf;
    po->bytes = o->bytes;
    po->peer = o->root;
    po->send = o->is_send;
    po->base = blocks;
    po->blocks = ch->blocks;
    po->chunk = ch->chunk;
    blocks += ch->blocks;
    if (ch->threads > *threads) *threads = ch->threads;
    if (o->esize < *esize) *esize = o->esize;
    /* Same-size elements on both ends: the element loop width only needs to
     * divide every operation's alignment. */
    while (*esize > 1 && (((uintptr_t)buf | o->bytes) & (*esize - 1))) *esize /= 2;
  }
  return blocks;
}

p2pkit_status_t p2pk_kernel_sendrecv(struct p2pkit_comm *c, const p2pk_call *ops, int n,
                                     p2pk_p2p_launcher launch) {
  p2pk_p2p_args pa;
  int threads = 64;
  size_t esize = 8;
  const int blocks = fill_p2p(c, ops, n, &pa, &threads, &esize);
  P2PK_TRACE(P2PK_LOG_COLL, "rank %d send/recv: %d operations, grid %d x %d, element %zu B",
             c->rank, pa.nops, blocks, threads, esize);
  cudaError_t e = launch(&pa, (int)esize, blocks, threads, (cudaStream_t)ops[0].stream);
  return p2pk_cuda_status(c, "send/recv", e);
}

p2pkit_status_t p2pk_kernel_init(struct p2pkit_comm *c, int id) {
  c->path_state[id] = calloc(1, sizeof(p2pk_kernel_state));
  return c->path_state[id] ? P2PKIT_SUCCESS
                           : p2pk_fail(P2PKIT_ERR_NO_MEMORY, "rank %d: out of memory", c->rank);
}

void p2pk_kernel_fini(struct p2pkit_comm *c, int id) {
  free(c->path_state[id]);
  c->path_state[id] = NULL;
}
