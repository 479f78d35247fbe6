/* SPDX-License-Identifier: BSD-3-Clause */
/* What each collective moves where, as masks and strides the kernels read
 * (p2pk_ar_args.send_mask ...), and the per-call argument rules they share.
 * Pure C, no CUDA calls: the CPU tests cover all of it. */
#ifndef P2PK_PLAN_H
#define P2PK_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "coll/kernels/coll_dev.h"
#include "p2pkit.h"

typedef struct {
  uint32_t send_mask, recv_mask; /* peers this rank pushes to / receives from */
  uint64_t in_stride, out_stride; /* bytes between per-rank blocks (0: one block) */
  int reduce;       /* what arrives is reduced with this rank's share */
  int self_copy;    /* this rank copies its own share to its own output block */
  int in_place;     /* the buffers are the collective's in-place form */
  uint64_t in_bytes, out_bytes; /* how much of sendbuf / recvbuf the call touches */
  /* Two-shot's second phase (all-reduce: every peer both ways; the rooted
   * form: p2pk_coll_plan_twoshot): whom a shard's owner sends its result
   * to, and whose results this rank takes in. */
  uint32_t send2_mask, recv2_mask;
} p2pk_coll_plan;

/* Every rank of n but `rank`, as a peer mask. */
static inline uint32_t p2pk_peer_mask(int n, int rank) {
  return (uint32_t)(((uint64_t)1 << n) - 1) & ~((uint32_t)1 << rank);
}

const char *p2pk_coll_name(int kind); /* "all_reduce", ...; "?" when unknown */
/* nccl-tests' bus bandwidth factor for `kind` on n ranks. */
double p2pk_coll_busbw_factor(int kind, int n);
/* Does `kind` take a reduction operation / a root? */
int p2pk_coll_has_op(int kind);
int p2pk_coll_has_root(int kind);

/* The plan of rank `rank` of n for one call: `block` is the bytes of one
 * rank's share (count x element size), send/recv the caller's buffers
 * (addresses only; never dereferenced). P2PKIT_ERR_INVALID_ARGUMENT (with
 * p2pk_fail's sentence) when the buffers overlap other than in the
 * collective's in-place form, or a root is out of range. */
p2pkit_status_t p2pk_coll_plan_make(int kind, int rank, int n, int root, uint64_t block,
                                    const void *send, const void *recv, p2pk_coll_plan *pl);

/* Turn rank `rank`'s plan of a broadcast or reduce (from
 * p2pk_coll_plan_make) into its rooted two-shot form (coll_dev.h's
 * p2pk_ts_shard): broadcast, the root pushes shard q to its owner only,
 * and each owner forwards it to the other owners; reduce, every rank pushes
 * shard q to its owner, which reduces it in rank order and sends it to the
 * root. Other collectives keep their plan (all-reduce's is two-shot's
 * already). */
void p2pk_coll_plan_twoshot(int kind, int rank, int n, int root, p2pk_coll_plan *pl);

/* The 32-bit header words peers compare (count, type, op, root, collective,
 * algorithm, protocol, grid): equal calls give equal words. */
void p2pk_coll_header(int kind, uint64_t count, int dtype, int op, int root, int algo, int proto,
                      int blocks, uint32_t *hdr0, uint32_t *hdr1);

#endif
