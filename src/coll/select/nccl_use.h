/* SPDX-License-Identifier: BSD-3-Clause */
/* Whether a communicator may use NCCL, decided alike on every rank from
 * what each rank says at init (all-gathered): P2PKIT_NCCL (auto, 0, 1),
 * whether the rank could load NCCL, its machine, GPU and the host id NCCL
 * will see. Pure: the CPU tests call it with tables of ranks.
 *
 *   P2PKIT_NCCL=0     p2pkit's own paths; a communicator spanning hosts fails
 *   P2PKIT_NCCL=1     NCCL for every call; fails when some rank lacks NCCL
 *                     or NCCL would refuse the ranks
 *   auto (default)    NCCL where the selector's rows say; when some rank
 *                     lacks NCCL or NCCL would refuse the ranks, p2pkit's own
 *                     paths (one INFO line), unless the communicator spans
 *                     hosts (then it fails, naming what is missing)
 *
 * NCCL refuses two ranks on one GPU under one NCCL host id ("Duplicate GPU
 * detected"): ranks sharing a GPU (P2PKIT_SHARE_GPUS=1) need a host id
 * each (P2PKIT_HOSTID, or NCCL_HOSTID). */
#ifndef P2PK_COLL_NCCL_USE_H
#define P2PK_COLL_NCCL_USE_H

#include <stddef.h>

#include "coll/rdv/hosts.h"
#include "p2pkit.h"

/* What NCCL may carry (the selector's p2pk_sel.nccl). */
enum {
  P2PK_NCCL_OFF = 0,  /* p2pkit's own paths (P2PKIT_NCCL=0, or auto without NCCL) */
  P2PK_NCCL_AUTO = 1, /* NCCL where the selector's rules say (the default) */
  P2PK_NCCL_ALL = 2   /* NCCL for every call (P2PKIT_NCCL=1) */
};

/* P2PKIT_NCCL's text as a mode (P2PK_NCCL_*): "" and "auto" AUTO, "0" OFF,
 * "1" ALL (any case); -1 for anything else. */
int p2pk_nccl_setting(const char *text);
const char *p2pk_nccl_mode_name(int mode); /* "0", "auto", "1" */

/* One rank as the decision sees it. */
typedef struct {
  int loaded;            /* the rank could load NCCL */
  const char *machine;   /* its real machine: hostname and boot id, whatever P2PKIT_HOSTID says */
  const char *busid;     /* its GPU */
  const char *nccl_host; /* the host id NCCL will see (NCCL_HOSTID, else P2PKIT_HOSTID, else machine) */
} p2pk_nccl_rank;

/* The communicator's mode for rank `rank` of n (every rank's `setting`
 * alike, checked before), its hosts `h`, and this rank's reason when it
 * cannot load NCCL (`why`, "" when it can). *mode: P2PK_NCCL_*; `info`
 * gets a sentence to log at INFO when auto falls back to p2pkit's own
 * paths (else ""). P2PKIT_ERR_UNSUPPORTED with one line naming what is
 * missing when P2PKIT_NCCL=1 or hosts are spanned and NCCL cannot serve. */
p2pkit_status_t p2pk_nccl_comm_mode(int setting, const p2pk_nccl_rank *ranks, int n, int rank,
                                    const p2pk_hosts *h, const char *why, int *mode, char *info,
                                    size_t len);

/* The first two ranks NCCL would refuse (same machine, same GPU, same NCCL
 * host id): 1 with *a < *b set, else 0. */
int p2pk_nccl_duplicate(const p2pk_nccl_rank *ranks, int n, int *a, int *b);

/* What a rank says about its host and NCCL at init (all-gathered with its
 * other settings; comm_hosts.c fills it). */
typedef struct {
  char hostid[P2PK_HOSTID_MAX];    /* P2PKIT_HOSTID, else its machine: what groups ranks by host */
  char machine[P2PK_HOSTID_MAX];   /* hostname and boot id, whatever P2PKIT_HOSTID says */
  char nccl_host[P2PK_HOSTID_MAX]; /* the host id NCCL will see */
  int32_t nccl_setting;            /* P2PKIT_NCCL as P2PK_NCCL_* */
  int32_t nccl_loaded;             /* NCCL loads here (asked only when the setting is not 0) */
} p2pk_host_info;

/* The hosts' layout in a few words ("2 hosts of 2 ranks", "3 hosts: 2+1+1
 * ranks"), for messages. */
void p2pk_hosts_text(const p2pk_hosts *h, char *out, size_t len);

#endif
