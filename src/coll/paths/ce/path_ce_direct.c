/* SPDX-License-Identifier: BSD-3-Clause */
/* One process under capture, every rank's call of an all-reduce,
 * broadcast, all-gather or all-to-all in one group (and sends with their
 * receives there): the copy engines push straight into the receivers'
 * outputs (the all-reduce's contributions still go through the landing
 * slots), with rdy/fin flags a graph can replay (the design is at the head
 * of path_ce_slots.c). It runs on the landing slots' engine (cep.h), as
 * ce-slots does: the engine's functions, never the other path's. */
#include <cuda_runtime_api.h>
#include <stdint.h>

#include "coll/paths/ce/cep.h"
#include "core/check.h"
#include "core/log.h"

/* One rank's part of a call straight into the receivers' outputs (one
 * process under capture, every rank's call in one group, launch_group):
 * tell every rank in `from` that my output is free (rdy), push
 * pu[i] into dst[i] once its receiver said so, copy my own part beside the
 * pushes (own_copy; none when own_src is own_dst), and wait until every
 * rank in `from` has pushed into mine (fin). */
static cudaError_t direct_call(struct p2pkit_comm *c, cudaStream_t stream, uint32_t from,
                               const cep_push *pu, char *const *dst, int np, p2pkit_dtype_t dtype,
                               const void *own_src, void *own_dst, size_t own_bytes) {
  const int n = c->nranks, me = c->rank;
  cudaError_t e = p2pk_cep_start(c, stream, np > 0, 0, 0);
  cep_batch_t bs;
  p2pk_cep_batch(&bs, c, stream);
  for (int t = 0; t < n; t++)
    if ((from >> t) & 1u) p2pk_cep_add(&bs, P2PK_CEP_POST, &CTRL(t)->cep_rdy[me], 1, NULL, 0, t);
  if (np) {
    if (e == cudaSuccess) e = p2pk_cep_flush(&bs);
    if (e == cudaSuccess) e = p2pk_cep_direct_pushes(c, pu, dst, np);
    if (e == cudaSuccess && own_src != own_dst)
      e = p2pk_cep_own_copy(c, dtype, own_src, own_dst, own_bytes, stream);
  }
  for (int t = 0; t < n; t++)
    if ((from >> t) & 1u) p2pk_cep_take(&bs, &CTRL(me)->cep_fin[t], NULL, 0, t);
  if (e == cudaSuccess) e = p2pk_cep_flush(&bs);
  if (e == cudaSuccess && np) e = p2pk_cep_join_side(c, stream, 0);
  return e;
}

/* Broadcast straight into every peer's output (pout; the file's head): the
 * root pushes to every peer and copies its own output beside; the others
 * hear only from the root. */
static cudaError_t bcast_direct(struct p2pkit_comm *c, const void *send, void *recv, size_t bytes,
                                p2pkit_dtype_t dtype, int root, cudaStream_t stream,
                                char *const *pout) {
  const int n = c->nranks, me = c->rank;
  cep_push pu[P2PK_COLL_MAX_RANKS];
  char *dst[P2PK_COLL_MAX_RANKS];
  int np = 0;
  for (int t = 0; t < n && me == root; t++)
    if (t != me) dst[np] = pout[t], pu[np++] = (cep_push){t, (const char *)send, bytes};
  cudaError_t e = direct_call(c, stream, me == root ? 0 : 1u << root, pu, dst, np, dtype, send,
                              recv, bytes);
  if (e == cudaSuccess) p2pk_cep_log_once(c, P2PK_COLL_BROADCAST, "broadcast", bytes, bytes, 1);
  return e;
}

/* All-to-all straight into every peer's output (out of place: the
 * selector sends in-place calls to the kernel): every rank is root and
 * receiver of a broadcast at once, its block t going into rank t's output
 * at its own place. All-gather (gather 1): the same with my one block for
 * every peer, in place too (my block at my place, which no peer writes). */
static cudaError_t a2a_direct(struct p2pkit_comm *c, const void *send, void *recv, size_t bytes,
                              p2pkit_dtype_t dtype, cudaStream_t stream, char *const *pout,
                              int gather) {
  const int n = c->nranks, me = c->rank;
  cep_push pu[P2PK_COLL_MAX_RANKS];
  char *dst[P2PK_COLL_MAX_RANKS];
  int np = 0;
  for (int t = 0; t < n; t++)
    if (t != me) {
      dst[np] = pout[t] + (size_t)me * bytes;
      pu[np++] = (cep_push){t, (const char *)send + (gather ? 0 : (size_t)t * bytes), bytes};
    }
  const uint32_t peers = p2pk_peer_mask(n, me);
  cudaError_t e = direct_call(c, stream, peers, pu, dst, np, dtype,
                              (const char *)send + (gather ? 0 : (size_t)me * bytes),
                              (char *)recv + (size_t)me * bytes, bytes);
  const int kind = gather ? P2PK_COLL_ALL_GATHER : P2PK_COLL_ALL_TO_ALL;
  if (e == cudaSuccess) p2pk_cep_log_once(c, kind, p2pk_coll_name(kind), bytes, bytes, 1);
  return e;
}

/* Every rank's call of one collective (one process under capture). */
static p2pkit_status_t launch_group(p2pk_call *const *set, int n) {
  const int kind = set[0]->kind;
  char *pout[P2PK_COLL_MAX_RANKS];
  for (int r = 0; r < n; r++) pout[r] = set[r]->recv;
  cudaError_t e = cudaSuccess;
  int bad = 0;
  for (int r = 0; r < n && e == cudaSuccess; r++) {
    const p2pk_call *a = set[r];
    struct p2pkit_comm *c = a->c;
    bad = r;
    p2pk_cep_begin(c, 1, a->grid_cap);
    e = cudaSetDevice(c->device);
    if (e != cudaSuccess) break;
    cudaStream_t st = (cudaStream_t)a->stream;
    e = kind == P2PK_COLL_ALL_REDUCE
            ? p2pk_cep_allreduce(c, a->send, a->recv, a->count, a->dtype, a->op, st, pout)
        : kind == P2PK_COLL_ALL_TO_ALL || kind == P2PK_COLL_ALL_GATHER
            ? a2a_direct(c, a->send, a->recv, a->bytes, a->dtype, st, pout,
                         kind == P2PK_COLL_ALL_GATHER)
            : bcast_direct(c, a->send, a->recv, a->bytes, a->dtype, a->root, st, pout);
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    return p2pk_fail(P2PKIT_ERR_CUDA, "%s: rank %d (GPU %d): copy engines into the peers' outputs: %s",
                     p2pk_coll_name(kind), bad, set[bad]->c->device, cudaGetErrorString(e));
  }
  return P2PKIT_SUCCESS;
}

const p2pk_path p2pk_path_ce_direct = {
    .id = P2PK_PATH_CE_DIRECT,
    .kinds = 1u << P2PK_COLL_ALL_REDUCE | 1u << P2PK_COLL_BROADCAST | 1u << P2PK_COLL_ALL_GATHER |
             1u << P2PK_COLL_ALL_TO_ALL | 1u << P2PK_SENDRECV,
    .modes = P2PK_MODE_ONE,
    .transports = P2PK_XPORT_P2P,
    .captures = P2PK_CAPTURE_GRAPH,
    .init = p2pk_cep_open,
    .fini = p2pk_cep_close,
    .launch_group = launch_group,
    .sendrecv = p2pk_cep_sendrecv,
};
