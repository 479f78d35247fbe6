/* SPDX-License-Identifier: BSD-3-Clause */
/* Peer access is a property of the process (of each device's primary
 * context), not of a p2pkit context: one table for the process, reference
 * counted, so two contexts share a pair and the last one out turns off only
 * what p2pkit turned on. */
#include <cuda_runtime_api.h>
#include <pthread.h>

#include "core/check.h"
#include "topo/topo.h"
#include "xfer/xfer.h"

typedef struct {
  int refs; /* contexts holding (accessor, peer) */
  int on;   /* enabled now, as far as p2pkit knows */
  int ours; /* p2pkit enabled it (so p2pkit may disable it) */
} peer_entry;

static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;
static peer_entry peers[P2PK_MAX_GPUS][P2PK_MAX_GPUS];

static int in_range(int a, int b) {
  return a >= 0 && b >= 0 && a < P2PK_MAX_GPUS && b < P2PK_MAX_GPUS && a != b;
}

/* cudaDeviceEnablePeerAccess on `accessor` for `peer`: 0 ok, 1 already on,
 * or the CUDA error. The device current on entry is current again on exit. */
static cudaError_t enable(int accessor, int peer, int *already) {
  int prev = -1;
  cudaGetDevice(&prev);
  cudaError_t e = cudaSetDevice(accessor);
  if (e == cudaSuccess) e = cudaDeviceEnablePeerAccess(peer, 0);
  *already = e == cudaErrorPeerAccessAlreadyEnabled;
  if (*already) e = cudaSuccess;
  if (e != cudaSuccess || *already) cudaGetLastError(); /* not sticky: clear it */
  if (prev >= 0) cudaSetDevice(prev);
  return e;
}

static cudaError_t disable(int accessor, int peer, int *was_on) {
  int prev = -1;
  cudaGetDevice(&prev);
  cudaError_t e = cudaSetDevice(accessor);
  if (e == cudaSuccess) e = cudaDeviceDisablePeerAccess(peer);
  *was_on = e == cudaSuccess;
  if (e == cudaErrorPeerAccessNotEnabled) {
    cudaGetLastError();
    e = cudaSuccess;
  }
  if (prev >= 0) cudaSetDevice(prev);
  return e;
}

p2pkit_status_t p2pk_peer_acquire(int a, int b) {
  if (!in_range(a, b))
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "peer access GPU%d -> GPU%d: bad pair", a, b);
  pthread_mutex_lock(&peer_lock);
  peer_entry *p = &peers[a][b];
  /* First holder: ask the driver again (the application may have turned it
   * on or off since); later holders trust the table. */
  if (p->refs == 0) {
    int already = 0;
    cudaError_t e = enable(a, b, &already);
    if (e != cudaSuccess) {
      pthread_mutex_unlock(&peer_lock);
      return p2pk_fail(P2PKIT_ERR_CUDA, "GPU%d cannot map GPU%d's memory: "
                       "cudaDeviceEnablePeerAccess: %s", a, b, cudaGetErrorString(e));
    }
    p->on = 1;
    p->ours = !already;
    P2PK_INFO(P2PK_LOG_XFER, "peer access GPU%d -> GPU%d %s", a, b,
              already ? "was already enabled" : "enabled");
  }
  p->refs++;
  pthread_mutex_unlock(&peer_lock);
  return P2PKIT_SUCCESS;
}

void p2pk_peer_release(int a, int b) {
  if (!in_range(a, b)) return;
  pthread_mutex_lock(&peer_lock);
  peer_entry *p = &peers[a][b];
  if (p->refs > 0 && --p->refs == 0) {
    if (p->ours && p->on) {
      int was = 0;
      cudaError_t e = disable(a, b, &was);
      if (e != cudaSuccess)
        P2PK_WARN("disabling peer access GPU%d -> GPU%d: %s", a, b, cudaGetErrorString(e));
    }
    p->on = 0;
    p->ours = 0;
  }
  pthread_mutex_unlock(&peer_lock);
}

p2pkit_status_t p2pk_peer_suspend(int a, int b, int *was_on_p) {
  if (!in_range(a, b))
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "peer access GPU%d -> GPU%d: bad pair", a, b);
  pthread_mutex_lock(&peer_lock);
  int was = 0;
  cudaError_t e = disable(a, b, &was);
  if (e == cudaSuccess) peers[a][b].on = 0;
  pthread_mutex_unlock(&peer_lock);
  if (e != cudaSuccess)
    return p2pk_fail(P2PKIT_ERR_CUDA, "cudaDeviceDisablePeerAccess(GPU%d -> GPU%d): %s", a, b,
                     cudaGetErrorString(e));
  *was_on_p = was;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_peer_resume(int a, int b) {
  if (!in_range(a, b))
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "peer access GPU%d -> GPU%d: bad pair", a, b);
  pthread_mutex_lock(&peer_lock);
  int already = 0;
  cudaError_t e = enable(a, b, &already);
  if (e == cudaSuccess) peers[a][b].on = 1;
  pthread_mutex_unlock(&peer_lock);
  if (e != cudaSuccess)
    return p2pk_fail(P2PKIT_ERR_CUDA, "re-enabling peer access GPU%d -> GPU%d: %s", a, b,
                     cudaGetErrorString(e));
  return P2PKIT_SUCCESS;
}
