/* SPDX-License-Identifier: BSD-3-Clause */
/* Copies through pinned host memory, and the pull kernel's stream handoff.
 *
 * The pipeline: for piece k in slot k % depth,
 *   s_src: wait ev_h2d[slot] (the slot's previous piece has left it),
 *          D2H piece k -> slot, record ev_d2h[slot]
 *   s_dst: wait ev_d2h[slot], H2D slot -> piece k, record ev_h2d[slot]
 * so the D2H of piece k+1 runs while the H2D of piece k does, on two PCIe
 * links. Waits are enqueued, never taken on the host. */
#include <string.h>

#include "core/check.h"
#include "xfer/pair.h"
#include "xfer/xfer_kernels.h"

void p2pk_pair_init(p2pk_pair_state *p, int src, int dst) {
  memset(p, 0, sizeof *p);
  pthread_mutex_init(&p->lock, NULL);
  p->src = src;
  p->dst = dst;
}

static cudaError_t make_event(cudaEvent_t *ev) {
  return cudaEventCreateWithFlags(ev, cudaEventDisableTiming);
}

p2pkit_status_t p2pk_pair_prepare(p2pk_pair_state *p) {
  if (p->ready) return P2PKIT_SUCCESS;
  p2pkit_status_t st = P2PKIT_SUCCESS;
  P2PK_CUDA_CHECK_GOTO(cudaSetDevice(p->src), st, fail);
  P2PK_CUDA_CHECK_GOTO(cudaStreamCreateWithFlags(&p->s_src, cudaStreamNonBlocking), st, fail);
  P2PK_CUDA_CHECK_GOTO(make_event(&p->ev_start), st, fail);
  for (int i = 0; i < P2PK_STAGE_MAX_DEPTH; i++)
    P2PK_CUDA_CHECK_GOTO(make_event(&p->ev_d2h[i]), st, fail);
  P2PK_CUDA_CHECK_GOTO(cudaSetDevice(p->dst), st, fail);
  P2PK_CUDA_CHECK_GOTO(cudaStreamCreateWithFlags(&p->s_dst, cudaStreamNonBlocking), st, fail);
  P2PK_CUDA_CHECK_GOTO(make_event(&p->ev_done), st, fail);
  for (int i = 0; i < P2PK_STAGE_MAX_DEPTH; i++)
    P2PK_CUDA_CHECK_GOTO(make_event(&p->ev_h2d[i]), st, fail);
  p->ready = 1;
  return P2PKIT_SUCCESS;
fail:
  p->ready = 1; /* let fini destroy what exists */
  p2pk_pair_fini(p);
  return st;
}

static void free_host(unsigned char **buf) {
  if (*buf) cudaFreeHost(*buf);
  *buf = NULL;
}

void p2pk_pair_fini(p2pk_pair_state *p) {
  if (p->ready) {
    /* Pinned buffers may still be in use by queued copies. */
    if (p->s_src) {
      cudaSetDevice(p->src);
      cudaStreamSynchronize(p->s_src);
    }
    if (p->s_dst) {
      cudaSetDevice(p->dst);
      cudaStreamSynchronize(p->s_dst);
    }
    free_host(&p->host);
    free_host(&p->serial);
    cudaSetDevice(p->src);
    if (p->s_src) cudaStreamDestroy(p->s_src);
    if (p->ev_start) cudaEventDestroy(p->ev_start);
    for (int i = 0; i < P2PK_STAGE_MAX_DEPTH; i++)
      if (p->ev_d2h[i]) cudaEventDestroy(p->ev_d2h[i]);
    cudaSetDevice(p->dst);
    if (p->s_dst) cudaStreamDestroy(p->s_dst);
    if (p->ev_done) cudaEventDestroy(p->ev_done);
    for (int i = 0; i < P2PK_STAGE_MAX_DEPTH; i++)
      if (p->ev_h2d[i]) cudaEventDestroy(p->ev_h2d[i]);
    cudaGetLastError();
  }
  int src = p->src, dst = p->dst;
  pthread_mutex_destroy(&p->lock);
  memset(p, 0, sizeof *p);
  p->src = src;
  p->dst = dst;
}

/* Both private streams drained: nothing queued still reads the buffers. */
static p2pkit_status_t drain(p2pk_pair_state *p) {
  P2PK_CUDA_CHECK(cudaSetDevice(p->src));
  P2PK_CUDA_CHECK(cudaStreamSynchronize(p->s_src));
  P2PK_CUDA_CHECK(cudaSetDevice(p->dst));
  P2PK_CUDA_CHECK(cudaStreamSynchronize(p->s_dst));
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t pin(unsigned char **buf, size_t bytes, const p2pk_pair_state *p,
                           const char *what) {
  void *h = NULL;
  cudaError_t e = cudaHostAlloc(&h, bytes, cudaHostAllocPortable);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return p2pk_fail(P2PKIT_ERR_NO_MEMORY,
                     "cannot pin %zu MiB of host memory for %s GPU%d -> GPU%d: %s", bytes >> 20,
                     what, p->src, p->dst, cudaGetErrorString(e));
  }
  *buf = h;
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t ensure_slots(p2pk_pair_state *p, size_t chunk, int depth) {
  if (p->host && p->chunk == chunk && p->depth == depth) return P2PKIT_SUCCESS;
  if (p->host) {
    P2PK_CHECK(drain(p));
    free_host(&p->host);
  }
  P2PK_CHECK(pin(&p->host, chunk * (size_t)depth, p, "the staging pipeline"));
  p->chunk = chunk;
  p->depth = depth;
  return P2PKIT_SUCCESS;
}

size_t p2pk_stage_piece(const p2pk_stage_plan *plan, size_t bytes, size_t done, size_t index) {
  size_t remaining = bytes - done, chunk = plan->chunk, n = chunk;
  if (plan->ramp) {
    size_t minp = chunk / 8 < (64u << 10) ? (64u << 10) : chunk / 8;
    if (minp > chunk) minp = chunk;
    size_t up = index < 16 ? minp << index : chunk;
    if (up < n) n = up;
    if (remaining < 2 * chunk) {
      size_t half = (remaining / 2 + 4095) & ~(size_t)4095;
      if (half < minp) half = minp;
      if (half < n) n = half;
    }
  }
  /* Never leave a sliver behind when the rest fits in one slot. */
  if (n >= remaining || (remaining <= chunk && remaining - n < 4096)) return remaining;
  return n;
}

/* Record the start on the caller's stream (a stream of src). */
static p2pkit_status_t begin(p2pk_pair_state *p, cudaStream_t caller) {
  P2PK_CUDA_CHECK(cudaSetDevice(p->src));
  P2PK_CUDA_CHECK(cudaEventRecord(p->ev_start, caller));
  return P2PKIT_SUCCESS;
}

/* The caller's stream waits for the copy's last operation (on s_dst). */
static p2pkit_status_t finish(p2pk_pair_state *p, cudaStream_t caller) {
  P2PK_CUDA_CHECK(cudaSetDevice(p->dst));
  P2PK_CUDA_CHECK(cudaEventRecord(p->ev_done, p->s_dst));
  P2PK_CUDA_CHECK(cudaSetDevice(p->src));
  P2PK_CUDA_CHECK(cudaStreamWaitEvent(caller, p->ev_done, 0));
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_staged_copy(p2pk_pair_state *p, void *dst, const void *src, size_t bytes,
                                 cudaStream_t caller, const p2pk_stage_plan *plan) {
  P2PK_CHECK(p2pk_pair_prepare(p));
  P2PK_CHECK(ensure_slots(p, plan->chunk, plan->depth));
  P2PK_CHECK(begin(p, caller));
  P2PK_CUDA_CHECK(cudaStreamWaitEvent(p->s_src, p->ev_start, 0));
  const unsigned char *s = src;
  unsigned char *d = dst;
  size_t done = 0;
  for (size_t k = 0; done < bytes; k++) {
    size_t n = p2pk_stage_piece(plan, bytes, done, k);
    int slot = (int)(k % (size_t)p->depth);
    unsigned char *h = p->host + (size_t)slot * p->chunk;
    P2PK_CUDA_CHECK(cudaSetDevice(p->src));
    P2PK_CUDA_CHECK(cudaStreamWaitEvent(p->s_src, p->ev_h2d[slot], 0));
    P2PK_CUDA_CHECK(cudaMemcpyAsync(h, s + done, n, cudaMemcpyDeviceToHost, p->s_src));
    P2PK_CUDA_CHECK(cudaEventRecord(p->ev_d2h[slot], p->s_src));
    P2PK_CUDA_CHECK(cudaSetDevice(p->dst));
    P2PK_CUDA_CHECK(cudaStreamWaitEvent(p->s_dst, p->ev_d2h[slot], 0));
    P2PK_CUDA_CHECK(cudaMemcpyAsync(d + done, h, n, cudaMemcpyHostToDevice, p->s_dst));
    P2PK_CUDA_CHECK(cudaEventRecord(p->ev_h2d[slot], p->s_dst));
    done += n;
  }
  return finish(p, caller);
}

p2pkit_status_t p2pk_staged_serial_copy(p2pk_pair_state *p, void *dst, const void *src,
                                        size_t bytes, cudaStream_t caller) {
  P2PK_CHECK(p2pk_pair_prepare(p));
  size_t want = bytes < P2PK_SERIAL_MAX_BUFFER ? bytes : P2PK_SERIAL_MAX_BUFFER;
  if (p->serial_size < want) {
    if (p->serial) {
      P2PK_CHECK(drain(p));
      free_host(&p->serial);
      p->serial_size = 0;
    }
    P2PK_CHECK(pin(&p->serial, want, p, "the serial staging baseline"));
    p->serial_size = want;
  }
  P2PK_CHECK(begin(p, caller));
  P2PK_CUDA_CHECK(cudaStreamWaitEvent(p->s_src, p->ev_start, 0));
  const unsigned char *s = src;
  unsigned char *d = dst;
  for (size_t done = 0; done < bytes;) {
    size_t n = bytes - done < p->serial_size ? bytes - done : p->serial_size;
    /* ev_h2d[0]: the buffer's previous turn has been copied out. */
    P2PK_CUDA_CHECK(cudaSetDevice(p->src));
    P2PK_CUDA_CHECK(cudaStreamWaitEvent(p->s_src, p->ev_h2d[0], 0));
    P2PK_CUDA_CHECK(cudaMemcpyAsync(p->serial, s + done, n, cudaMemcpyDeviceToHost, p->s_src));
    P2PK_CUDA_CHECK(cudaEventRecord(p->ev_d2h[0], p->s_src));
    P2PK_CUDA_CHECK(cudaSetDevice(p->dst));
    P2PK_CUDA_CHECK(cudaStreamWaitEvent(p->s_dst, p->ev_d2h[0], 0));
    P2PK_CUDA_CHECK(cudaMemcpyAsync(d + done, p->serial, n, cudaMemcpyHostToDevice, p->s_dst));
    P2PK_CUDA_CHECK(cudaEventRecord(p->ev_h2d[0], p->s_dst));
    done += n;
  }
  return finish(p, caller);
}

p2pkit_status_t p2pk_pull_copy(p2pk_pair_state *p, void *dst, const void *src, size_t bytes,
                               cudaStream_t caller, const p2pk_sm_config *cfg, int dst_sm_count) {
  P2PK_CHECK(p2pk_pair_prepare(p));
  P2PK_CHECK(begin(p, caller));
  P2PK_CUDA_CHECK(cudaSetDevice(p->dst));
  P2PK_CUDA_CHECK(cudaStreamWaitEvent(p->s_dst, p->ev_start, 0));
  cudaError_t e = p2pk_launch_sm_copy(dst, src, bytes, cfg, dst_sm_count, p->s_dst);
  if (e != cudaSuccess)
    return p2pk_fail(P2PKIT_ERR_CUDA, "SM pull kernel on GPU%d (reading GPU%d): %s", p->dst,
                     p->src, cudaGetErrorString(e));
  return finish(p, caller);
}
