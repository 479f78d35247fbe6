/* SPDX-License-Identifier: BSD-3-Clause */
/* The hierarchical collectives of a communicator spanning hosts, as data:
 * the steps each rank runs, with their groups, buffers, offsets and counts
 * (elements). Pure: the executor runs each step with p2pkit inside a host
 * (INTRA: the host's ranks in local-rank order) and NCCL across hosts
 * (CROSS: the ranks with the same local index, in host order); a CPU test
 * runs the same steps on host memory against a plain collective.
 *
 *   all-reduce      INTRA reduce-scatter (+ reduce of the tail to the last
 *                   local rank) -> CROSS all-reduce of each rank's shard
 *                   -> INTRA all-gather (+ broadcast of the tail)
 *   reduce-scatter  INTRA reduce-scatter of H blocks per local rank
 *                   -> CROSS reduce-scatter of one block each
 *   all-gather      CROSS all-gather of one block each
 *                   -> INTRA all-gather of H blocks per local rank
 *
 * Across hosts a rank's NCCL call carries 1/L of the buffer (all-reduce) or
 * only blocks of its own cross group (reduce-scatter, all-gather).
 * Reduce-scatter and all-gather keep NCCL's semantics (count per rank,
 * block r belongs to rank r): their INTRA step moves a local rank's H
 * blocks as one piece, so blocks sit in "local-major" order (position
 * l * H + h for the rank with local index l on host h) in a scratch buffer,
 * with a permuting copy from or to the user's buffer, unless rank r already
 * is l * H + h (ranks dealt round-robin over the hosts).
 *
 * The scratch is the path's, made once (no allocation per call): a
 * reduce-scatter or all-gather whose scratch would exceed it runs in pieces,
 * each a range of every rank's block, gathered into local-major order
 * through the scratch (PERMUTE_IN), reduced and scattered (or gathered and
 * permuted out: PERMUTE_OUT) as above; every rank cuts the same pieces. */
#ifndef P2PK_COLL_HIER_H
#define P2PK_COLL_HIER_H

#include <stddef.h>

#include "coll/kernels/coll_dev.h"
#include "coll/rdv/hosts.h"
#include "p2pkit.h"

enum {
  P2PK_HIER_RS,          /* reduce-scatter */
  P2PK_HIER_REDUCE,      /* reduce to `root` */
  P2PK_HIER_AR,          /* all-reduce */
  P2PK_HIER_AG,          /* all-gather */
  P2PK_HIER_BCAST,       /* broadcast from `root` */
  P2PK_HIER_DIVIDE,      /* local: divide `count` elements by `divisor` (avg) */
  P2PK_HIER_PERMUTE_IN,  /* local: send (block of rank r) -> scratch (its position) */
  P2PK_HIER_PERMUTE_OUT  /* local: scratch (position) -> recv (block of rank r) */
};
enum { P2PK_HIER_LOCAL, P2PK_HIER_INTRA, P2PK_HIER_CROSS };      /* step groups */
enum { P2PK_HIER_SEND, P2PK_HIER_RECV, P2PK_HIER_SCRATCH };      /* buffers */

#define P2PK_HIER_MAX_STEPS 6

typedef struct {
  int op;              /* P2PK_HIER_RS ... */
  int group;           /* P2PK_HIER_LOCAL / INTRA / CROSS */
  p2pkit_redop_t redop; /* for the reducing ones (avg: sum, then DIVIDE) */
  int root;            /* REDUCE / BCAST: index in the group (a local rank) */
  int in, out;         /* P2PK_HIER_SEND / RECV / SCRATCH */
  size_t in_off, out_off; /* elements into those buffers */
  size_t count;        /* the collective's count as NCCL takes it (RS, AG: per rank) */
  size_t divisor;      /* DIVIDE */
  size_t stride;       /* PERMUTE_*: elements between two ranks' blocks in the user's buffer */
} p2pk_hier_step;

typedef struct {
  int kind;            /* P2PK_COLL_ALL_REDUCE, _REDUCE_SCATTER or _ALL_GATHER */
  const p2pk_hosts *hosts; /* borrowed: the communicator's grouping */
  int nhosts, nlocal;  /* H, L */
  size_t count;        /* as the call gives it (RS, AG: per rank) */
  p2pkit_redop_t op;
  size_t base;         /* all-reduce: count / L, each local rank's even shard */
  size_t tail;         /* all-reduce: count % L, reduced to / broadcast from local rank L - 1 */
  int permute;         /* RS, AG: 1 when blocks must be reordered through scratch */
  size_t scratch;      /* elements of scratch each rank needs */
  size_t piece;        /* RS, AG in pieces: elements of each rank's block a piece takes */
  size_t pieces;       /* how many (1: the whole call at once) */
} p2pk_hier_plan;

/* The plan of `kind` for `count` elements with `op` over the grouping `h`,
 * its scratch at most `room` elements (SIZE_MAX: no bound), in pieces when
 * a whole call's would exceed it. P2PKIT_ERR_UNSUPPORTED when the hosts
 * hold unequal numbers of ranks (one line, p2pk_hosts_check_regular's) or
 * the kind has no hierarchical form; P2PKIT_ERR_INVALID_ARGUMENT when the
 * room holds less than an element per rank. */
p2pkit_status_t p2pk_hier_make(int kind, const p2pk_hosts *h, size_t count, p2pkit_redop_t op,
                               size_t room, p2pk_hier_plan *p);
/* All-reduce: the shard local rank `local` owns after the INTRA step. */
void p2pk_hier_shard(const p2pk_hier_plan *p, int local, size_t *off, size_t *count);
/* RS, AG: where rank r's block sits in local-major order (l * H + h). */
size_t p2pk_hier_pos(const p2pk_hier_plan *p, int rank);
/* The steps `rank` runs for piece `piece` (0 .. pieces - 1), in order;
 * every rank of the communicator gets the same sequence of (op, group), so
 * the groups' calls match. Returns how many (at most P2PK_HIER_MAX_STEPS).
 * A step of count 0 is skipped by the executor; its whole group has count
 * 0 too. */
int p2pk_hier_steps(const p2pk_hier_plan *p, int rank, size_t piece, p2pk_hier_step *steps);

/* 1/n in type dt (float32, float64, bfloat16 rounded to nearest even,
 * float16 for n <= 16) into out, for NCCL's pre-multiplied sum: the
 * avg's one division across hosts. 0, or -1 for a type without one. The
 * call's key says an avg is P2PK_AVG_FLOAT (the hierarchical path may
 * take it) exactly when this has its scalar. */
int p2pk_hier_premul_scalar(p2pkit_dtype_t dt, int n, unsigned char out[8]);

#endif
