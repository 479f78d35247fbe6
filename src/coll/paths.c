/* SPDX-License-Identifier: BSD-3-Clause */
/* Every path, by id (select.h's P2PK_PATH_*). */
#include "coll/path.h"

const p2pk_path *const p2pk_paths[P2PK_PATHS] = {
    [P2PK_PATH_LOCAL] = &p2pk_path_local,         [P2PK_PATH_P2P] = &p2pk_path_p2p,
    [P2PK_PATH_STAGED] = &p2pk_path_staged,       [P2PK_PATH_CE_EVENTS] = &p2pk_path_ce_events,
    [P2PK_PATH_CE_SLOTS] = &p2pk_path_ce_slots,   [P2PK_PATH_CE_DIRECT] = &p2pk_path_ce_direct,
    [P2PK_PATH_CE_STAGED] = &p2pk_path_ce_staged, [P2PK_PATH_NCCL] = &p2pk_path_nccl,
    [P2PK_PATH_HIER] = &p2pk_path_hier,
};
