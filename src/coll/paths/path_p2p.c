/* SPDX-License-Identifier: BSD-3-Clause */
/* The kernels over P2P (NVLink or PCIe peer access): every collective in
 * one launch (LL, LL128, chunked one-shot, two-shot and its rooted form:
 * p2pk_launch_allreduce_p2p picks the kernel by the selector's protocol and
 * algorithm), a group's sends and receives of a communicator in one
 * kernel. Every sequence number and mailbox counter lives in device
 * memory and only kernels advance it, so a call can be captured in a CUDA
 * graph and replayed. */
#include "coll/paths/path.h"

static p2pkit_status_t launch(const p2pk_call *call) {
  return p2pk_kernel_coll(call, P2PK_PATH_P2P, p2pk_launch_allreduce_p2p);
}

static p2pkit_status_t sendrecv(struct p2pkit_comm *c, const p2pk_call *ops, int n) {
  return p2pk_kernel_sendrecv(c, ops, n, p2pk_launch_p2p);
}

static p2pkit_status_t init(struct p2pkit_comm *c) { return p2pk_kernel_init(c, P2PK_PATH_P2P); }
static void fini(struct p2pkit_comm *c) { p2pk_kernel_fini(c, P2PK_PATH_P2P); }

const p2pk_path p2pk_path_p2p = {
    .id = P2PK_PATH_P2P,
    .kinds = (1u << P2PK_KINDS) - 1,
    .modes = P2PK_MODE_ONE | P2PK_MODE_PER_GPU,
    .transports = P2PK_XPORT_P2P,
    .captures = P2PK_CAPTURE_EAGER | P2PK_CAPTURE_GRAPH,
    .init = init,
    .fini = fini,
    .launch = launch,
    .sendrecv = sendrecv,
};
