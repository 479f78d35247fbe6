/* SPDX-License-Identifier: BSD-3-Clause */
/* One rank's own copies: a collective of a one-rank communicator (its
 * input to its output, unless in place) and a send to itself with its
 * receive from itself in one group, on its stream. */
#include "coll/paths/path.h"

static p2pkit_status_t launch(const p2pk_call *call) {
  const p2pk_coll_plan *pl = &call->plan;
  cudaError_t e = cudaSuccess;
  if (pl->in_bytes && pl->out_bytes && call->send != call->recv)
    e = cudaMemcpyAsync(call->recv, call->send, call->bytes, cudaMemcpyDeviceToDevice,
                        (cudaStream_t)call->stream);
  return p2pk_cuda_status(call->c, p2pk_coll_name(call->kind), e);
}

/* ops: the send to itself and the receive from itself (group.c checked
 * that both are there, of one size). */
static p2pkit_status_t sendrecv(struct p2pkit_comm *c, const p2pk_call *ops, int n) {
  const p2pk_call *snd = NULL, *rcv = NULL;
  for (int i = 0; i < n; i++) *(ops[i].is_send ? &snd : &rcv) = &ops[i];
  cudaError_t e = cudaSuccess;
  if (snd && rcv && snd->send != rcv->recv)
    e = cudaMemcpyAsync(rcv->recv, snd->send, rcv->bytes, cudaMemcpyDeviceToDevice,
                        (cudaStream_t)rcv->stream);
  return p2pk_cuda_status(c, "send/recv", e);
}

const p2pk_path p2pk_path_local = {
    .id = P2PK_PATH_LOCAL,
    .kinds = (1u << P2PK_KINDS) - 1,
    .modes = P2PK_MODE_ONE | P2PK_MODE_PER_GPU,
    .transports = P2PK_XPORT_P2P | P2PK_XPORT_SHM,
    .captures = P2PK_CAPTURE_EAGER | P2PK_CAPTURE_GRAPH,
    .launch = launch,
    .sendrecv = sendrecv,
};
