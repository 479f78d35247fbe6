/* SPDX-License-Identifier: BSD-3-Clause */
/* Per ordered pair (src -> dst) resources of a context: two private streams,
 * events, and the pinned staging buffers, created on first use and reused.
 * Enqueueing on them is serialised by the pair's mutex; the GPU work itself is
 * ordered by events only, so no call blocks the host. */
#ifndef P2PK_XFER_PAIR_H
#define P2PK_XFER_PAIR_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stddef.h>

#include "xfer/xfer.h"

typedef struct {
  pthread_mutex_t lock;
  int src, dst;
  int ready;                 /* streams and events exist */
  cudaStream_t s_src, s_dst; /* non-blocking, on src / dst */
  cudaEvent_t ev_start;      /* src: recorded on the caller's stream */
  cudaEvent_t ev_done;       /* dst: the last operation of a copy */
  cudaEvent_t ev_d2h[P2PK_STAGE_MAX_DEPTH]; /* src: slot filled */
  cudaEvent_t ev_h2d[P2PK_STAGE_MAX_DEPTH]; /* dst: slot drained */
  unsigned char *host;       /* depth x chunk bytes, pinned */
  size_t chunk;
  int depth;
  unsigned char *serial;     /* the serial baseline's one buffer, pinned */
  size_t serial_size;
} p2pk_pair_state;

/* Staged pipeline settings for one call. */
typedef struct {
  size_t chunk;
  int depth;
  int ramp; /* 1: pieces grow from chunk/8 at the start and shrink at the end */
} p2pk_stage_plan;

/* The staged copies keep at most this much pinned memory for the serial
 * baseline; larger copies go through it in turns. */
#define P2PK_SERIAL_MAX_BUFFER (256u << 20)

void p2pk_pair_init(p2pk_pair_state *p, int src, int dst);
/* Create the streams and events (pair lock held). */
p2pkit_status_t p2pk_pair_prepare(p2pk_pair_state *p);
/* Wait for everything queued on the pair, then free it all. */
void p2pk_pair_fini(p2pk_pair_state *p);

/* src -> host -> dst in pieces through `depth` pinned slots: D2H of piece k+1
 * on s_src overlaps H2D of piece k on s_dst. Ordered after `caller` (a stream
 * of src) and before what is queued on it next. Pair lock held. */
p2pkit_status_t p2pk_staged_copy(p2pk_pair_state *p, void *dst, const void *src, size_t bytes,
                                 cudaStream_t caller, const p2pk_stage_plan *plan);
/* The baseline: the whole D2H, then the whole H2D (in turns of at most
 * P2PK_SERIAL_MAX_BUFFER). Pair lock held. */
p2pkit_status_t p2pk_staged_serial_copy(p2pk_pair_state *p, void *dst, const void *src,
                                        size_t bytes, cudaStream_t caller);
/* A kernel on dst reads src (pull). Pair lock held. */
p2pkit_status_t p2pk_pull_copy(p2pk_pair_state *p, void *dst, const void *src, size_t bytes,
                               cudaStream_t caller, const p2pk_sm_config *cfg, int dst_sm_count);
/* Piece sizes of the pipeline (pure; tests check them): the size of the piece
 * that starts at `done` of `bytes`, given its index. */
size_t p2pk_stage_piece(const p2pk_stage_plan *plan, size_t bytes, size_t done, size_t index);

#endif
