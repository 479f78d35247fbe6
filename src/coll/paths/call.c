/* SPDX-License-Identifier: BSD-3-Clause */
/* What every path and the entry points share about a call: the GPU made
 * current and back, launch errors as statuses, the stream's capture
 * status, the selector's key, the call's name. */
#include <cuda_runtime_api.h>
#include <string.h>

#include "coll/paths/hier.h"
#include "coll/paths/path.h"
#include "core/check.h"
#include "nccl/dtype.h"

p2pkit_status_t p2pk_coll_enter(struct p2pkit_comm *c, const char *name, int *prev) {
  *prev = -1;
  cudaGetDevice(prev);
  if (*prev != c->device && cudaSetDevice(c->device) != cudaSuccess) {
    cudaError_t e = cudaGetLastError();
    return p2pk_fail(P2PKIT_ERR_CUDA, "%s: rank %d cannot use GPU %d: %s", name, c->rank,
                     c->device, cudaGetErrorString(e));
  }
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_cuda_status(const struct p2pkit_comm *c, const char *name, cudaError_t e) {
  if (e != cudaSuccess)
    return p2pk_fail(P2PKIT_ERR_CUDA, "%s: rank %d: launching on GPU %d failed: %s", name, c->rank,
                     c->device, cudaGetErrorString(e));
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_coll_leave(struct p2pkit_comm *c, const char *name, int prev, cudaError_t e) {
  if (prev >= 0 && prev != c->device) cudaSetDevice(prev);
  return p2pk_cuda_status(c, name, e);
}

int p2pk_capture_of(const struct p2pkit_comm *c, p2pkit_stream_t stream) {
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  if (cudaSetDevice(c->device) != cudaSuccess ||
      cudaStreamIsCapturing((cudaStream_t)stream, &cs) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return (int)cs;
}

/* The types the hierarchical path's step across hosts divides once, by
 * NCCL's pre-multiplied sum: those it has the scalar 1/n for (one list). */
static int float_type(p2pkit_dtype_t t) {
  unsigned char scalar[8];
  return p2pk_hier_premul_scalar(t, 2, scalar) == 0;
}

void p2pk_call_key(const p2pk_call *call, p2pk_sel_key *k) {
  memset(k, 0, sizeof *k);
  k->kind = call->kind;
  k->capture = call->capture < 0 ? -1 : call->capture > 0;
  k->in_place = call->kind != P2PK_SENDRECV && call->plan.in_place;
  k->grid_cap = call->grid_cap;
  k->bytes = call->bytes;
  k->nccl_type = !p2pk_dtype_native(call->dtype);
  if (call->op == P2PKIT_AVG && call->kind != P2PK_COLL_ALL_GATHER && call->kind != P2PK_SENDRECV)
    k->avg = float_type(call->dtype) ? P2PK_AVG_FLOAT : P2PK_AVG_INT;
}

const char *p2pk_call_name(const p2pk_call *call) {
  return call->kind == P2PK_SENDRECV ? call->is_send ? "send" : "recv" : p2pk_coll_name(call->kind);
}
