/* SPDX-License-Identifier: BSD-3-Clause */
/* Every path, by id (select.h's P2PK_PATH_*), and what each can carry. */
#include "coll/paths/path.h"

const p2pk_path *const p2pk_paths[P2PK_PATHS] = {
    [P2PK_PATH_LOCAL] = &p2pk_path_local,         [P2PK_PATH_P2P] = &p2pk_path_p2p,
    [P2PK_PATH_STAGED] = &p2pk_path_staged,       [P2PK_PATH_CE_EVENTS] = &p2pk_path_ce_events,
    [P2PK_PATH_CE_SLOTS] = &p2pk_path_ce_slots,   [P2PK_PATH_CE_DIRECT] = &p2pk_path_ce_direct,
    [P2PK_PATH_CE_STAGED] = &p2pk_path_ce_staged, [P2PK_PATH_NCCL] = &p2pk_path_nccl,
    [P2PK_PATH_HIER] = &p2pk_path_hier,
};

int p2pk_path_can(const p2pk_path *p, const p2pk_sel *s, const p2pk_sel_key *k) {
  const uint32_t mode = s->hosts > 1 ? P2PK_MODE_SPAN : s->per_gpu ? P2PK_MODE_PER_GPU : P2PK_MODE_ONE;
  const uint32_t xport = s->staged ? P2PK_XPORT_SHM : P2PK_XPORT_P2P;
  const uint32_t cap = k->capture > 0 ? P2PK_CAPTURE_GRAPH : P2PK_CAPTURE_EAGER;
  if (!((p->kinds >> k->kind) & 1u) || !(p->modes & mode) || !(p->transports & xport) ||
      !(p->captures & cap))
    return 0;
  if (k->kind == P2PK_SENDRECV) return p->sendrecv || p->sendrecv_pairs;
  return p->launch ||
         (p->launch_group && k->grouped && k->peers == P2PK_PEERS_RULES && mode == P2PK_MODE_ONE);
}
