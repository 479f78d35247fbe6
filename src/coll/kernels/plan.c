/* SPDX-License-Identifier: BSD-3-Clause */
/* Collective plans: which peers a rank pushes to and receives from, where
 * each rank's share sits in the buffers, and the in-place forms. */
#include "coll/kernels/plan.h"

#include <string.h>

#include "core/check.h"

static const char *const names[P2PK_COLL_KINDS] = {"all_reduce", "broadcast",      "reduce",
                                                   "all_gather", "reduce_scatter", "all_to_all"};

const char *p2pk_coll_name(int kind) {
  return kind >= 0 && kind < P2PK_COLL_KINDS ? names[kind] : "?";
}

double p2pk_coll_busbw_factor(int kind, int n) {
  if (n <= 0) return 0.0;
  switch (kind) {
    case P2PK_COLL_ALL_REDUCE: return 2.0 * (n - 1) / n;
    case P2PK_COLL_ALL_GATHER:
    case P2PK_COLL_REDUCE_SCATTER:
    case P2PK_COLL_ALL_TO_ALL: return (double)(n - 1) / n;
    default: return 1.0; /* broadcast, reduce, send/recv */
  }
}

int p2pk_coll_has_op(int kind) {
  return kind == P2PK_COLL_ALL_REDUCE || kind == P2PK_COLL_REDUCE || kind == P2PK_COLL_REDUCE_SCATTER;
}

int p2pk_coll_has_root(int kind) { return kind == P2PK_COLL_BROADCAST || kind == P2PK_COLL_REDUCE; }

static int overlap(const char *a, uint64_t na, const char *b, uint64_t nb) {
  return na && nb && a < b + nb && b < a + na;
}

p2pkit_status_t p2pk_coll_plan_make(int kind, int rank, int n, int root, uint64_t block,
                                    const void *send, const void *recv, p2pk_coll_plan *pl) {
  memset(pl, 0, sizeof *pl);
  if (kind < 0 || kind >= P2PK_COLL_KINDS)
    return p2pk_fail(P2PKIT_ERR_INTERNAL, "collective %d is not known", kind);
  if (n < 1 || n > P2PK_COLL_MAX_RANKS || rank < 0 || rank >= n)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "rank %d of %d ranks", rank, n);
  if (p2pk_coll_has_root(kind) && (root < 0 || root >= n))
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: root %d is not a rank of %d",
                     names[kind], rank, root, n);
  const uint32_t all = p2pk_peer_mask(n, rank);
  const uint64_t nb = block * (uint64_t)n;
  const char *s = send, *r = recv;
  int is_root = rank == root;
  switch (kind) {
    case P2PK_COLL_ALL_REDUCE:
      pl->send_mask = pl->recv_mask = all;
      pl->send2_mask = pl->recv2_mask = all;
      pl->reduce = 1;
      pl->in_bytes = pl->out_bytes = block;
      pl->in_place = s == r;
      break;
    case P2PK_COLL_BROADCAST:
      /* The root pushes to everyone; the others only receive (their sendbuf
       * is not read, as in NCCL). */
      pl->send_mask = is_root ? all : 0;
      pl->recv_mask = is_root ? 0 : (uint32_t)1 << root;
      pl->in_bytes = is_root ? block : 0;
      pl->out_bytes = block;
      pl->in_place = is_root && s == r;
      pl->self_copy = is_root && !pl->in_place;
      break;
    case P2PK_COLL_REDUCE:
      /* Everyone else pushes to the root; the root reduces in rank order
       * (recvbuf is only written on the root, as in NCCL). */
      pl->send_mask = is_root ? 0 : (uint32_t)1 << root;
      pl->recv_mask = is_root ? all : 0;
      pl->reduce = 1;
      pl->in_bytes = block;
      pl->out_bytes = is_root ? block : 0;
      pl->in_place = is_root && s == r;
      break;
    case P2PK_COLL_ALL_GATHER:
      pl->send_mask = pl->recv_mask = all;
      pl->out_stride = block;
      pl->in_bytes = block;
      pl->out_bytes = nb;
      pl->in_place = s == r + (uint64_t)rank * block;
      pl->self_copy = !pl->in_place;
      break;
    case P2PK_COLL_REDUCE_SCATTER:
      pl->send_mask = pl->recv_mask = all;
      pl->in_stride = block;
      pl->reduce = 1;
      pl->in_bytes = nb;
      pl->out_bytes = block;
      pl->in_place = r == s + (uint64_t)rank * block;
      break;
    case P2PK_COLL_ALL_TO_ALL:
      pl->send_mask = pl->recv_mask = all;
      pl->in_stride = pl->out_stride = block;
      pl->in_bytes = pl->out_bytes = nb;
      pl->in_place = s == r;
      pl->self_copy = !pl->in_place;
      break;
    default: break;
  }
  if (!pl->in_place && overlap(s, pl->in_bytes, r, pl->out_bytes))
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: sendbuf and recvbuf overlap "
                     "other than in the in-place form", names[kind], rank);
  return P2PKIT_SUCCESS;
}

void p2pk_coll_plan_twoshot(int kind, int rank, int n, int root, p2pk_coll_plan *pl) {
  if (kind != P2PK_COLL_BROADCAST && kind != P2PK_COLL_REDUCE) return;
  const uint32_t all = p2pk_peer_mask(n, rank);
  const uint32_t owners = all & ~((uint32_t)1 << root); /* the other owners of shards */
  const uint32_t rbit = rank == root ? 0 : (uint32_t)1 << root;
  if (kind == P2PK_COLL_BROADCAST) {
    pl->send_mask = rank == root ? all : 0;
    pl->recv_mask = rbit;
    pl->send2_mask = pl->recv2_mask = rank == root ? 0 : owners;
  } else {
    pl->send_mask = owners;
    pl->recv_mask = rank == root ? 0 : all;
    pl->send2_mask = rbit;
    pl->recv2_mask = rank == root ? all : 0;
  }
}

void p2pk_coll_header(int kind, uint64_t count, int dtype, int op, int root, int algo, int proto,
                      int blocks, uint32_t *hdr0, uint32_t *hdr1) {
  /* All-reduce keeps the words it always had (kind 0, root 0). The
   * protocol's high bit (LL128) is folded into word 0 below the root's. */
  *hdr0 = (uint32_t)count ^ ((uint32_t)root << 27) ^ ((uint32_t)(proto >> 1) & 1) << 26;
  *hdr1 = (uint32_t)(((count >> 32) & 0xff) << 24 | ((uint32_t)blocks & 0x3ff) << 14 |
                     ((uint32_t)algo & 3) << 12 | ((uint32_t)proto & 1) << 11 |
                     ((uint32_t)kind & 7) << 8 | ((uint32_t)dtype & 0xf) << 4 |
                     ((uint32_t)op & 0xf));
}
