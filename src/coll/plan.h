/* What each collective moves where, as masks and strides the kernels read
 * (p2pk_ar_args.send_mask ...), and the per-call argument rules they share.
 * Pure C, no CUDA calls: the CPU tests cover all of it. */
#ifndef P2PK_PLAN_H
#define P2PK_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "coll/coll_dev.h"
#include "p2pkit.h"

typedef struct {
  uint32_t send_mask, recv_mask; /* peers this rank pushes to / receives from */
  uint64_t in_stride, out_stride; /* bytes between per-rank blocks (0: one block) */
  int reduce;       /* what arrives is reduced with this rank's share */
  int self_copy;    /* this rank copies its own share to its own output block */
  int in_place;     /* the buffers are the collective's in-place form */
  uint64_t in_bytes, out_bytes; /* how much of sendbuf / recvbuf the call touches */
} p2pk_coll_plan;

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

/* The 32-bit header words peers compare (count, type, op, root, collective,
 * algorithm, protocol, grid): equal calls give equal words. */
void p2pk_coll_header(int kind, uint64_t count, int dtype, int op, int root, int algo, int proto,
                      int blocks, uint32_t *hdr0, uint32_t *hdr1);

/* The chunks of one message of `len` elements (es bytes each) through the
 * landing slots (ce_p2p_mp.c), chunk K: uniform (K each, the last one
 * shorter), or, tapered, head chunks of K (the last of them takes what is
 * left) and then up to P2PK_SCHED_TAIL tail chunks shrinking 2.5x a step
 * toward the end, from about K / 16 (whole 16-byte groups where the
 * element size allows). Why: the receiver's work on the last chunk (its
 * copy out, its reduce) runs after the link went quiet; each chunk's work
 * hides behind the next chunk's push as long as that push takes longer,
 * and pushing x bytes over NVLink takes ~2.7x as long as copying them
 * locally. A 64 MiB last chunk costs ~64 us after the link, a 6 MiB one
 * ~6 us, for three or four more chunk boundaries (~3.5 us each;
 * sixteenth session). Both ends compute it from (len, K, es, taper)
 * alone, so they agree. */
#define P2PK_SCHED_TAIL 8
typedef struct {
  uint64_t nh, hk, head, nt;     /* head: nh chunks of hk = K elements, head elements in all */
  uint64_t tail[P2PK_SCHED_TAIL]; /* the tail chunks, in order */
} p2pk_sched;

void p2pk_sched_make(p2pk_sched *s, uint64_t len, uint64_t K, uint64_t es, int taper);
static inline uint64_t p2pk_sched_n(const p2pk_sched *s) { return s->nh + s->nt; }
/* Chunk k's elements (0 past the end) and its first element (*off). */
uint64_t p2pk_sched_part(const p2pk_sched *s, uint64_t k, uint64_t *off);
/* How many chunks p2pk_sched_make gives. */
uint64_t p2pk_sched_chunks(uint64_t len, uint64_t K, uint64_t es, int taper);

#endif
