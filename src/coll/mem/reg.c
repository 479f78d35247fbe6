/* SPDX-License-Identifier: BSD-3-Clause */
/* Registered user buffers: p2pkit_comm_register / _deregister (with a
 * process per GPU each rank maps every peer's buffer through CUDA IPC, in
 * the collective order of registrations), and the lookups the paths make. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "core/check.h"

typedef struct {
  int32_t valid, pad;
  uint64_t offset, bytes;
  cudaIpcMemHandle_t handle;
} reg_info;

static p2pkit_status_t check_device_buffer(const struct p2pkit_comm *c, const void *buf,
                                           const char *what) {
  struct cudaPointerAttributes at;
  if (cudaPointerGetAttributes(&at, buf) != cudaSuccess) {
    cudaGetLastError();
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s %p is not memory CUDA knows", what, buf);
  }
  if (at.type != cudaMemoryTypeDevice || at.device != c->device)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s %p is not device memory of GPU %d (rank %d)",
                     what, buf, c->device, c->rank);
  return P2PKIT_SUCCESS;
}

static void reg_free(struct p2pkit_comm *c, p2pk_reg *r) {
  for (int p = 0; p < c->nranks; p++)
    if (r->ipc_base[p]) cudaIpcCloseMemHandle(r->ipc_base[p]);
  free(r);
}

void p2pk_reg_free_all(struct p2pkit_comm *c) {
  while (c->regs) {
    p2pk_reg *r = c->regs;
    c->regs = r->next;
    reg_free(c, r);
  }
}

p2pkit_status_t p2pkit_comm_register(p2pkit_comm_t c, void *buf, size_t bytes, void **handle_p) {
  if (!c || !handle_p)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "register: communicator or handle_p is NULL");
  /* Shared through CUDA IPC with a process per GPU on one host; a
   * communicator spanning hosts keeps the record only (its calls go
   * through NCCL and the hierarchical path, which map nothing). */
  const int share = c->multiproc && c->hosts.nhosts < 2;
  int cur = -1;
  cudaGetDevice(&cur);
  cudaSetDevice(c->device);
  reg_info mine;
  memset(&mine, 0, sizeof mine);
  p2pkit_status_t st = P2PKIT_SUCCESS;
  if (!buf || bytes == 0)
    st = p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "register: rank %d gave buffer %p of %zu bytes",
                   c->rank, buf, bytes);
  if (st == P2PKIT_SUCCESS) st = check_device_buffer(c, buf, "register: buffer");
  char *base = NULL;
  size_t size = 0;
  if (st == P2PKIT_SUCCESS && share) {
    st = p2pk_alloc_range(buf, &base, &size);
    if (st == P2PKIT_SUCCESS && (char *)buf + bytes > base + size)
      st = p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "register: %zu bytes at %p run past the end of "
                     "their allocation", bytes, buf);
    if (st == P2PKIT_SUCCESS && cudaIpcGetMemHandle(&mine.handle, base) != cudaSuccess) {
      cudaError_t e = cudaGetLastError();
      st = p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "register: buffer %p cannot be shared through CUDA "
                     "IPC: %s", buf, cudaGetErrorString(e));
    }
  }
  mine.valid = st == P2PKIT_SUCCESS;
  mine.offset = (uint64_t)((char *)buf - base);
  mine.bytes = bytes;
  p2pk_reg *r = calloc(1, sizeof *r);
  reg_info all[P2PK_COLL_MAX_RANKS];
  if (!r && st == P2PKIT_SUCCESS) {
    st = p2pk_fail(P2PKIT_ERR_NO_MEMORY, "register: out of memory");
    mine.valid = 0;
  }
  /* Every rank takes part in the exchange, even after a local failure, so
   * registration numbers stay aligned across ranks. */
  if (share) {
    p2pkit_status_t bs = p2pk_boot_allgather(c->boot, P2PK_TAG_REG, &mine, all, sizeof mine);
    if (st == P2PKIT_SUCCESS) st = bs;
  }
  int id = c->next_reg_id++;
  if (st == P2PKIT_SUCCESS) {
    r->id = id;
    r->buf = buf;
    r->bytes = bytes;
    r->peer[c->rank] = buf;
    for (int p = 0; share && p < c->nranks && st == P2PKIT_SUCCESS; p++) {
      if (p == c->rank || !all[p].valid) continue;
      void *ptr = NULL;
      cudaError_t e = cudaIpcOpenMemHandle(&ptr, all[p].handle, cudaIpcMemLazyEnablePeerAccess);
      if (e != cudaSuccess) {
        cudaGetLastError();
        st = p2pk_fail(P2PKIT_ERR_CUDA, "register: rank %d cannot map rank %d's buffer: %s",
                       c->rank, p, cudaGetErrorString(e));
        break;
      }
      r->ipc_base[p] = ptr;
      r->peer[p] = (char *)ptr + all[p].offset;
    }
  }
  if (st != P2PKIT_SUCCESS) {
    if (r) reg_free(c, r);
    if (cur >= 0) cudaSetDevice(cur);
    return st;
  }
  r->next = c->regs;
  c->regs = r;
  if (cur >= 0) cudaSetDevice(cur);
  *handle_p = r;
  return P2PKIT_SUCCESS;
}

const p2pk_reg *p2pk_reg_holding(const struct p2pkit_comm *c, const char *buf, size_t bytes) {
  for (const p2pk_reg *g = c->regs; g; g = g->next)
    if (buf >= g->buf && bytes <= g->bytes && (size_t)(buf - g->buf) <= g->bytes - bytes) return g;
  return NULL;
}

const p2pk_reg *p2pk_reg_numbered(const struct p2pkit_comm *c, uint64_t id) {
  for (const p2pk_reg *g = c->regs; g; g = g->next)
    if ((uint64_t)g->id == id) return g;
  return NULL;
}

p2pkit_status_t p2pkit_comm_deregister(p2pkit_comm_t c, void *handle) {
  if (!c) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "deregister: communicator is NULL");
  p2pk_reg **pp = &c->regs;
  while (*pp && *pp != handle) pp = &(*pp)->next;
  if (!*pp)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "deregister: %p is not a registration of rank %d",
                     handle, c->rank);
  p2pk_reg *r = *pp;
  *pp = r->next;
  int cur = -1;
  cudaGetDevice(&cur);
  cudaSetDevice(c->device);
  /* Kernels that write into peers' registered buffers must be done, and every
   * peer must have closed its mapping before the caller frees the buffer. */
  p2pkit_status_t st = P2PKIT_SUCCESS;
  if (c->multiproc && c->hosts.nhosts < 2) {
    if (cudaDeviceSynchronize() != cudaSuccess) cudaGetLastError();
    reg_free(c, r);
    st = p2pk_boot_barrier(c->boot, P2PK_TAG_DEREG);
  } else {
    free(r);
  }
  if (cur >= 0) cudaSetDevice(cur);
  return st;
}
