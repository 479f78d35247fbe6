/* SPDX-License-Identifier: BSD-3-Clause */
/* Which host each rank is on, and the groups a communicator spanning hosts
 * is built from. A host id is the hostname and the boot id, as NCCL's own
 * host hash; P2PKIT_HOSTID replaces it, so several hosts can be simulated on
 * one machine. The grouping is a pure function of every rank's id (what the
 * rendezvous all-gathers), so every rank computes the same one. */
#ifndef P2PK_COLL_HOSTS_H
#define P2PK_COLL_HOSTS_H

#include <stddef.h>

#include "p2pkit.h"

/* Bytes of a host id, its NUL included (hostname up to 64, ':', boot id 36). */
#define P2PK_HOSTID_MAX 128

/* This process's host id: P2PKIT_HOSTID when set, else "<hostname>:<boot
 * id>" with the boot id read from /proc/sys/kernel/random/boot_id under
 * P2PKIT_SYSFS_ROOT (no such file: the hostname alone, as NCCL does).
 * P2PKIT_ERR_INVALID_ARGUMENT when P2PKIT_HOSTID is too long. */
p2pkit_status_t p2pk_host_id(char *buf, size_t len);
/* The same from explicit inputs (tests): `override` (NULL or "": not set),
 * `hostname`, and `root` ("" or NULL: /) under which /proc is read. */
p2pkit_status_t p2pk_host_id_from(const char *override, const char *hostname, const char *root,
                                  char *buf, size_t len);

/* A communicator's ranks by host. Hosts are numbered in the order of their
 * lowest rank; local ranks count a host's ranks in rank order. */
typedef struct {
  int nranks;
  int nhosts;
  int rank;        /* the rank this grouping was computed for */
  int host;        /* its host */
  int local_rank;  /* its index among its host's ranks */
  int local_size;  /* ranks on its host */
  int local_max;   /* ranks on the fullest host */
  int regular;     /* 1: every host has the same number of ranks */
  int *host_of;    /* [nranks] host of each rank */
  int *local_of;   /* [nranks] local rank of each rank */
  int *host_size;  /* [nhosts] ranks on each host */
  int *host_first; /* [nhosts] lowest rank of each host */
} p2pk_hosts;

/* Group `nranks` ranks by their host ids (ids[r]: rank r's) as seen from
 * `rank`. P2PKIT_ERR_INVALID_ARGUMENT naming a missing or empty id; `h` is
 * zeroed on failure. Free with p2pk_hosts_free. */
p2pkit_status_t p2pk_hosts_group(const char *const *ids, int nranks, int rank, p2pk_hosts *h);
void p2pk_hosts_free(p2pk_hosts *h);
/* The rank with local index `local` on host `host`; -1 when there is none. */
int p2pk_hosts_rank_at(const p2pk_hosts *h, int host, int local);
/* The ranks of host `host` in local-rank order into `ranks` (room for its
 * size); returns how many. */
int p2pk_hosts_local_ranks(const p2pk_hosts *h, int host, int *ranks);
/* The ranks with local index `local` on every host that has one, in host
 * order: the cross-host group of the hierarchical collectives. Returns how
 * many (nhosts when the layout is regular). */
int p2pk_hosts_cross_ranks(const p2pk_hosts *h, int local, int *ranks);
/* P2PKIT_SUCCESS when every host has the same number of ranks (what the
 * hierarchical collectives need); else P2PKIT_ERR_UNSUPPORTED with one line
 * saying how the ranks are spread, "`who`: ...". */
p2pkit_status_t p2pk_hosts_check_regular(const p2pk_hosts *h, const char *who);

/* The NCCL_HOSTID this process should give NCCL before its first NCCL call
 * (NCCL reads it once per process): P2PKIT_HOSTID's value when that is set
 * (`p2pkit_hostid`) and the caller has not set NCCL_HOSTID
 * (`nccl_hostid_env`) themselves; NULL when there is nothing to set (real
 * hosts: NCCL derives the same hostname and boot id identity itself). */
const char *p2pk_hosts_nccl_hostid(const char *p2pkit_hostid, const char *nccl_hostid_env);

#endif
