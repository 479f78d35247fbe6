/* SPDX-License-Identifier: BSD-3-Clause */
/* Receive buffers shared on demand (P2PKIT_SENDRECV_MAP; process per GPU).
 *
 * Send/recv, out-of-place all-to-all and all-gather over the copy engines
 * go straight into a receive buffer only when the sender maps it
 * (cep_straight.c, "straight in"). A registration (p2pkit_comm_register) maps
 * it collectively, once. With this setting a receive into a buffer that
 * is not registered describes its whole allocation instead: the receiver
 * looks up the allocation (base, size, the driver's process-wide buffer
 * id) and its CUDA IPC handle, made once per allocation, and puts them in
 * its description (dmbox.h); the sender opens the handle the first time it
 * sees that allocation of that peer and keeps it open until the
 * communicator is destroyed. Every later call into the same allocation
 * costs the receiver two driver queries and the sender a table lookup.
 *
 * Why an opt-in: CUDA leaves undefined an allocation freed while another
 * process has it open (cudaIpcOpenMemHandle), and the sender cannot know
 * when the receiver frees it. The caller promises not to free a buffer it
 * received into while the communicator lives, as a caching allocator
 * (PyTorch's) never returns its segments to the driver. The buffer id
 * keeps the receiver from offering an old handle for a new allocation at
 * the same address; a sender that cannot open a handle remembers that and
 * sends that allocation's calls through the landing slots.
 *
 * Allocations CUDA IPC cannot share (stream-ordered pools, cudaMallocAsync;
 * cuMem virtual memory, as PyTorch's expandable segments) are described
 * "no" (logged once) and go through the slots.
 *
 * Why not map per call and unmap after: opening a handle is a driver call
 * that maps memory (its time is in the INFO line of each mapping), and
 * unmapping needs the copy finished, on the host. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "coll/paths/ce/cep.h"
#include "coll/coll.h"
#include "core/clock.h"
#include "core/log.h"

#define MAP_EXPORTS 16  /* the receiver's handles kept, replaced in turn */
#define MAP_IMPORTS 256 /* the sender's mappings, kept until destroy */
#define MAP_LOGS 4      /* mappings logged at INFO, per communicator */

_Static_assert(sizeof(cudaIpcMemHandle_t) == P2PK_DMB_HANDLE_WORDS * sizeof(uint64_t),
               "the description carries a CUDA IPC memory handle whole");

typedef struct {
  unsigned long long bufid; /* 0: empty */
  char *base;
  size_t size;
  cudaIpcMemHandle_t handle;
} map_export;

typedef struct {
  int peer;
  uint64_t bufid;
  char *ptr; /* NULL: opening failed; that allocation goes through the slots */
} map_import;

struct p2pk_map {
  map_export exp[MAP_EXPORTS];
  int next_exp;
  map_import imp[MAP_IMPORTS];
  int nimp, logged, full_logged, export_failed;
};

static struct p2pk_map *map_of(struct p2pkit_comm *c) {
  if (!SI(c)->map_state) SI(c)->map_state = calloc(1, sizeof(struct p2pk_map));
  return SI(c)->map_state;
}

int p2pk_map_describe(struct p2pkit_comm *c, const char *buf, size_t bytes, p2pk_dmb_desc *d) {
  struct p2pk_map *m = SI(c)->map ? map_of(c) : NULL;
  if (!m) return 0;
  char *base = NULL;
  size_t size = 0;
  unsigned long long id = 0;
  if (p2pk_alloc_lookup(buf, &base, &size) != 0 || p2pk_alloc_id(buf, &id) != 0 || !id) return 0;
  if (buf < base || bytes > size || (size_t)(buf - base) > size - bytes) return 0;
  map_export *x = NULL;
  for (int i = 0; i < MAP_EXPORTS && !x; i++)
    if (m->exp[i].bufid == id && m->exp[i].base == base) x = &m->exp[i];
  if (!x) {
    cudaIpcMemHandle_t h;
    if (cudaIpcGetMemHandle(&h, base) != cudaSuccess) {
      const cudaError_t e = cudaGetLastError();
      if (!m->export_failed++)
        P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): receive buffer %p cannot be shared through "
                  "CUDA IPC (%s): its calls go through the landing slots", c->rank, c->device,
                  (const void *)buf, cudaGetErrorString(e));
      return 0;
    }
    x = &m->exp[m->next_exp];
    m->next_exp = (m->next_exp + 1) % MAP_EXPORTS;
    x->bufid = id;
    x->base = base;
    x->size = size;
    x->handle = h;
  }
  d->off = (uint64_t)(buf - base);
  d->bufid = id;
  d->size = size;
  memcpy(d->handle, &x->handle, sizeof x->handle);
  return 1;
}

char *p2pk_map_peer(struct p2pkit_comm *c, int t, const p2pk_dmb_desc *d, size_t bytes) {
  struct p2pk_map *m = SI(c)->map && d->bufid ? map_of(c) : NULL;
  if (!m || d->reg || d->bytes != bytes || d->off > d->size || bytes > d->size - d->off) return NULL;
  for (int i = 0; i < m->nimp; i++)
    if (m->imp[i].peer == t && m->imp[i].bufid == d->bufid)
      return m->imp[i].ptr ? m->imp[i].ptr + d->off : NULL;
  if (m->nimp == MAP_IMPORTS) {
    if (!m->full_logged++)
      P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): %d peer receive allocations mapped, the most "
                "kept: calls into others go through the landing slots", c->rank, c->device,
                MAP_IMPORTS);
    return NULL;
  }
  cudaIpcMemHandle_t h;
  memcpy(&h, d->handle, sizeof h);
  /* Under capture too (the call is decided at capture): opening a handle
   * is no stream work; relaxed, so a global capture does not refuse it. */
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  void *p = NULL;
  const uint64_t t0 = p2pk_now_ns();
  const cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
  const double us = (double)(p2pk_now_ns() - t0) / 1e3;
  cudaThreadExchangeStreamCaptureMode(&mode);
  map_import *im = &m->imp[m->nimp++];
  im->peer = t;
  im->bufid = d->bufid;
  im->ptr = e == cudaSuccess ? p : NULL;
  if (e != cudaSuccess) {
    cudaGetLastError();
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): cannot map rank %d's receive allocation %llu "
              "(%s): its calls go through the landing slots", c->rank, c->device, t,
              (unsigned long long)d->bufid, cudaGetErrorString(e));
    return NULL;
  }
  if (m->logged++ < MAP_LOGS)
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): maps rank %d's receive allocation %llu (%llu B) "
              "to send straight in (P2PKIT_SENDRECV_MAP), until destroy; mapping took %.1f us",
              c->rank, c->device, t, (unsigned long long)d->bufid, (unsigned long long)d->size, us);
  return im->ptr + d->off;
}

int p2pk_map_count(const struct p2pkit_comm *c) {
  const struct p2pk_map *m = SI(c)->map_state;
  int n = 0;
  for (int i = 0; m && i < m->nimp; i++) n += m->imp[i].ptr != NULL;
  return n;
}

void p2pk_map_free(struct p2pkit_comm *c) {
  struct p2pk_map *m = SI(c)->map_state;
  if (!m) return;
  for (int i = 0; i < m->nimp; i++)
    if (m->imp[i].ptr) cudaIpcCloseMemHandle(m->imp[i].ptr);
  free(m);
  SI(c)->map_state = NULL;
}
