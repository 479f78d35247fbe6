/* SPDX-License-Identifier: BSD-3-Clause */
/* Gradient buckets as plain data: which gradient goes into which bucket, where,
 * and which buckets a "ready" mark makes launchable. No CUDA here, so every rule
 * is tested on the CPU (tests/cpu/test_ddp_plan.c); grad_sync.c adds streams,
 * events, memory and the all-reduce. */
#ifndef P2PK_DDP_PLAN_H
#define P2PK_DDP_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "p2pkit.h"

/* Bucket starts in the arena and gradient starts in a bucket are aligned to
 * these (padding stays zero, so averaging it changes nothing). */
#define P2PK_DDP_BUCKET_ALIGN 256
#define P2PK_DDP_GRAD_ALIGN 16

typedef struct {
  const void *user;   /* caller's buffer; NULL: a view into its bucket */
  uintptr_t addr;     /* the address mark_ready takes (user, or the view once bound) */
  size_t count, bytes;
  p2pkit_dtype_t dtype;
  size_t bucket;
  size_t offset;      /* byte offset of the gradient in its bucket */
  int ready;          /* marked ready in the current step */
  unsigned long long alloc_id; /* grad_sync.c: the allocation it was registered in */
} p2pk_ddp_grad;

typedef struct {
  size_t first, n;    /* members[first .. first+n): its gradients, in bucket order */
  size_t bytes;       /* payload incl. padding between gradients (a multiple of the element) */
  size_t count;       /* bytes / element size: what the all-reduce covers */
  p2pkit_dtype_t dtype;
  size_t offset;      /* byte offset of the bucket in the arena */
  size_t pending;     /* gradients not yet ready this step */
  int launched;       /* launched this step */
} p2pk_ddp_bucket;

typedef struct {
  size_t bucket_bytes, first_bucket_bytes;
  p2pk_ddp_grad *grads;   /* registration order */
  size_t ngrads, cap;
  p2pk_ddp_bucket *buckets;
  size_t nbuckets;
  size_t *members;        /* gradient indices, bucket by bucket */
  size_t *by_addr;        /* gradient indices sorted by addr (after bind) */
  size_t arena_bytes;
  int laid_out, bound;
  size_t next_launch;     /* first bucket not launched this step */
  size_t nready;          /* gradients marked ready this step */
  uint64_t step;          /* steps finished */
} p2pk_ddp_plan;

void p2pk_ddp_plan_init(p2pk_ddp_plan *p, size_t bucket_bytes, size_t first_bucket_bytes);
void p2pk_ddp_plan_free(p2pk_ddp_plan *p);
/* Register a gradient (before layout). user NULL: owned by the bucket. Errors:
 * zero count, bad type, after layout, a caller buffer registered twice or
 * overlapping another. */
p2pkit_status_t p2pk_ddp_plan_add(p2pk_ddp_plan *p, const void *user, size_t count,
                                  p2pkit_dtype_t dtype);
/* Assign buckets: walk the gradients in reverse registration order; a bucket
 * takes the next gradient while it has the same type and stays within its cap
 * (first_bucket_bytes for bucket 0, bucket_bytes after), and always takes at
 * least one. Sets arena_bytes. */
p2pkit_status_t p2pk_ddp_plan_layout(p2pk_ddp_plan *p);
/* The arena's address is known: views get their addresses; lookup is built.
 * Two gradients at one address (a caller buffer inside the arena): an error. */
p2pkit_status_t p2pk_ddp_plan_bind(p2pk_ddp_plan *p, uintptr_t arena);
/* Index of the gradient registered at `addr`, or an error naming it. */
p2pkit_status_t p2pk_ddp_plan_find(const p2pk_ddp_plan *p, const void *addr, size_t *index_p);
/* Mark gradient `index` ready. Buckets [*from_p, *to_p) may now be launched, in
 * that order (empty when from == to): buckets launch in bucket order on every
 * rank, so a complete bucket waits for the earlier ones. Marking twice in one
 * step is an error and changes nothing. */
p2pkit_status_t p2pk_ddp_plan_mark(p2pk_ddp_plan *p, size_t index, size_t *from_p, size_t *to_p);
/* End the step: an error naming the first gradient never marked ready (and how
 * many there are) when the step is incomplete. The step state is reset either
 * way. */
p2pkit_status_t p2pk_ddp_plan_finish(p2pk_ddp_plan *p);

#endif
