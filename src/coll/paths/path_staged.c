/* SPDX-License-Identifier: BSD-3-Clause */
/* The kernels through host memory, for GPUs without P2P (or with
 * P2PKIT_P2P_DISABLE=1): every collective in one launch of the staged
 * pipeline (kern_staged.cu), a group's sends and receives of a
 * communicator in one kernel through the senders' mailboxes. */
#include "coll/paths/path.h"

static p2pkit_status_t launch(const p2pk_call *call) {
  return p2pk_kernel_coll(call, P2PK_PATH_STAGED, p2pk_launch_allreduce_staged);
}

static p2pkit_status_t sendrecv(struct p2pkit_comm *c, const p2pk_call *ops, int n) {
  return p2pk_kernel_sendrecv(c, ops, n, p2pk_launch_p2p_staged);
}

static p2pkit_status_t init(struct p2pkit_comm *c) { return p2pk_kernel_init(c, P2PK_PATH_STAGED); }
static void fini(struct p2pkit_comm *c) { p2pk_kernel_fini(c, P2PK_PATH_STAGED); }

const p2pk_path p2pk_path_staged = {
    .id = P2PK_PATH_STAGED,
    .kinds = (1u << P2PK_KINDS) - 1,
    .modes = P2PK_MODE_ONE | P2PK_MODE_PER_GPU,
    .transports = P2PK_XPORT_SHM,
    .captures = P2PK_CAPTURE_EAGER | P2PK_CAPTURE_GRAPH,
    .init = init,
    .fini = fini,
    .launch = launch,
    .sendrecv = sendrecv,
};
