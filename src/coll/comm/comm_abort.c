/* SPDX-License-Identifier: BSD-3-Clause */
/* p2pkit_comm_abort: a communicator given up without waiting for anyone.
 * Every rank's abort word (the kernels' and copy-engine steps' waits poll
 * it) says this rank gave up, so peers waiting on it fail at once with
 * P2PK_DERR_ABORTED, and this rank's own waits end; NCCL's communicators
 * are aborted (ncclCommAbort), the per-host one too, the rendezvous
 * sockets closed (peers in a rendezvous operation fail at once). The
 * memory is freed by a thread of its own once the GPU is idle. Every wait
 * of the abort (the abort word's copy, NCCL's aborts, the memory's
 * thread) ends at one deadline, P2PK_ABORT_WAIT_MS after the call (the
 * communicator's timeout when that is shorter); what
 * has not finished by then is left to finish on its own (or not, on a GPU
 * that never quiesces: the memory then stays until the process ends). */
#include <cuda_runtime_api.h>
#include <stddef.h>
#include <unistd.h>

#include "coll/paths/path.h"
#include "coll/call/trace.h"
#include "core/bounded.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/log.h"

#define P2PK_ABORT_WAIT_MS 2000

/* Device scratch (over P2P): a copy on a stream of its own, which a stuck
 * kernel does not hold up; staged: the host region, written directly. */
static void raise_abort(struct p2pkit_comm *c) {
  const int32_t v = 1 + c->rank;
  if (c->staged) {
    for (int p = 0; c->stage && p < c->nranks; p++) {
      volatile p2pk_stage_ctrl *s = (p2pk_stage_ctrl *)(c->stage + (size_t)p * c->lay.stage_stride);
      s->abort = v;
    }
    __sync_synchronize();
    return;
  }
  cudaStream_t s = NULL;
  if (!c->scratch || cudaSetDevice(c->device) != cudaSuccess ||
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  for (int p = 0; p < c->nranks; p++)
    if (c->peer[p])
      cudaMemcpyAsync(c->peer[p] + offsetof(p2pk_dev_ctrl, abort), &v, sizeof v, cudaMemcpyDefault, s);
  uint64_t until = p2pk_now_ns() + 200000000u; /* 200 ms at most, within the deadline */
  if (until > c->abort_until_ns) until = c->abort_until_ns;
  while (cudaStreamQuery(s) == cudaErrorNotReady && p2pk_now_ns() < until) usleep(200);
  cudaStreamDestroy(s);
  cudaGetLastError();
}

/* The memory, once the GPU is idle; arg: the communicator's pointer. */
static void reap(void *arg) {
  struct p2pkit_comm *c = *(struct p2pkit_comm **)arg;
  if (cudaSetDevice(c->device) == cudaSuccess) cudaDeviceSynchronize();
  cudaGetLastError();
  p2pk_comm_release(c);
}

/* The reaper, waited for until the abort's deadline; without a thread
 * (-1) the memory stays. */
static void free_later(struct p2pkit_comm *c) {
  p2pk_run_until(reap, &c, sizeof c, c->abort_until_ns);
}

/* c and its per-host communicator, every wait ending at `until`. */
static void abort_until(struct p2pkit_comm *c, uint64_t until) {
  c->aborted = 1;
  c->abort_until_ns = until;
  raise_abort(c);
  for (int i = 0; i < P2PK_PATHS; i++)
    if (p2pk_paths[i]->abort) p2pk_paths[i]->abort(c);
  if (c->intra) abort_until(c->intra, until);
  c->intra = NULL;
  if (c->boot) p2pk_boot_destroy(c->boot);
  c->boot = NULL;
  P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): communicator aborted", c->rank, c->device);
  free_later(c);
}

p2pkit_status_t p2pkit_comm_abort(p2pkit_comm_t c) {
  if (!c) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "comm_abort: communicator is NULL");
  p2pk_trace_on_abort(c);
  int cur = -1;
  cudaGetDevice(&cur);
  uint64_t wait_ns = (uint64_t)P2PK_ABORT_WAIT_MS * 1000000u;
  if (c->timeout_ns && c->timeout_ns < wait_ns) wait_ns = c->timeout_ns;
  abort_until(c, p2pk_now_ns() + wait_ns);
  if (cur >= 0) cudaSetDevice(cur);
  cudaGetLastError();
  return P2PKIT_SUCCESS;
}
