/* SPDX-License-Identifier: BSD-3-Clause */
/* How a communicator is named and cut. Its creation from a unique id
 * (p2pkit_get_unique_id, p2pkit_comm_init_rank_config: init_id.c): the
 * id's wire form, the listening sockets this process keeps for its ids, and
 * the config checks. The arithmetic of p2pkit_comm_split (split.c) and a
 * child's rendezvous over its parent's (subcomm.c). Internal: the CPU tests
 * (test_init_id.c, test_split.c, test_comm_split.c) call these directly. */
#ifndef P2PK_INIT_ID_H
#define P2PK_INIT_ID_H

#include <stdint.h>

#include "coll/rdv/bootstrap.h"
#include "coll/rdv/hosts.h"
#include "p2pkit.h"

#define P2PK_UID_VERSION 1
#define P2PK_UID_SECRET_BYTES 32
#define P2PK_UID_MAX_OPEN 64 /* ids of this process whose socket awaits rank 0's init */

/* What an id carries, decoded. */
typedef struct {
  int version;
  int family;                                  /* AF_INET or AF_INET6 */
  char addr[48];                               /* numeric, as inet_ntop writes it */
  int port;                                    /* 1..65535 */
  unsigned char secret[P2PK_UID_SECRET_BYTES]; /* random */
  char secret_hex[2 * P2PK_UID_SECRET_BYTES + 1];
  uint32_t pid;                                /* the process that made it (messages only) */
} p2pk_uid;

/* Fill `id` from `u` (family, addr, port, secret, pid; the version is set
 * here), with its checksum. INVALID_ARGUMENT for an address that does not
 * parse or a port out of range. */
p2pkit_status_t p2pk_uid_encode(const p2pk_uid *u, p2pkit_unique_id_t *id);
/* Decode and check an id; INVALID_ARGUMENT with one line saying what is
 * wrong (not an id, another version, damaged, bad address or port). */
p2pkit_status_t p2pk_uid_decode(const p2pkit_unique_id_t *id, p2pk_uid *u);
/* The listening socket p2pkit_get_unique_id left open for `u` in this
 * process, removed from the table (the caller closes it); -1 when none. */
int p2pk_uid_take_listen_fd(const p2pk_uid *u);
/* How many ids of this process still hold a socket. */
int p2pk_uid_open_count(void);
/* An id whose rank 0 listens on `host` (numeric or a name; any free port)
 * with a fresh secret, the listening socket in *listen_fd for the caller
 * (not kept in this process's table): a split's child rendezvous. */
p2pkit_status_t p2pk_uid_make(const char *host, p2pkit_unique_id_t *id, int *listen_fd);

/* A job secret for P2PKIT_JOB_SECRET: 16 bytes from getrandom as 32 hex
 * digits, the 128 bits the rendezvous asks of a secret off loopback
 * (`p2pkit env --new-secret`). */
#define P2PK_SECRET_HEX 32
p2pkit_status_t p2pk_secret_new(char hex[P2PK_SECRET_HEX + 1]);

/* The caller's config checked (NULL: the defaults) and copied to `out`. */
p2pkit_status_t p2pk_config_check(const p2pkit_config_t *in, p2pkit_config_t *out);
/* The rendezvous options of rank `rank` of `nranks` for id `u`: every
 * field the launcher's environment could fill is set here. */
p2pkit_status_t p2pk_uid_comm_opts(const p2pk_uid *u, int nranks, int rank,
                                   const p2pkit_config_t *cfg, p2pkit_comm_opts_t *opts);

/* ---------------------------------------------------------------- split -- */

/* The arithmetic of p2pkit_comm_split(comm, color, key, config, &newcomm),
 * NCCL's semantics (ncclCommSplit): the ranks that give the same color form
 * one new communicator, ordered by key, equal keys by their old rank; a
 * rank giving P2PKIT_SPLIT_NOCOLOR joins none (its newcomm is NULL). Pure:
 * every rank computes it from every rank's (color, key), as all-gathered. */

/* NCCL_SPLIT_NOCOLOR's value (moves to p2pkit.h with p2pkit_comm_split). */
#ifndef P2PKIT_SPLIT_NOCOLOR
#define P2PKIT_SPLIT_NOCOLOR (-1)
#endif

typedef struct {
  int color; /* >= 0, or P2PKIT_SPLIT_NOCOLOR */
  int key;
} p2pk_split_in;

typedef struct {
  int rank; /* in the new communicator; -1 for P2PKIT_SPLIT_NOCOLOR */
  int size; /* of the new communicator; 0 for P2PKIT_SPLIT_NOCOLOR */
} p2pk_split_out;

/* out[r] for every old rank r of `nranks`. P2PKIT_ERR_INVALID_ARGUMENT
 * naming the first rank whose color is negative but not NOCOLOR. */
p2pkit_status_t p2pk_split_compute(const p2pk_split_in *in, int nranks, p2pk_split_out *out);
/* The old ranks of `old_rank`'s new communicator, in new-rank order, into
 * `members` (room for nranks); returns how many (0 for NOCOLOR). */
int p2pk_split_members(const p2pk_split_in *in, int nranks, int old_rank, int *members);
/* How many hosts the `n` old ranks in `members` sit on (`h`: the parent's
 * grouping): 1 means p2pkit's own paths can carry the new communicator,
 * more means it spans hosts (hierarchical, or NCCL). */
int p2pk_split_host_count(const p2pk_hosts *h, const int *members, int n);

/* subcomm.c: a child communicator's rendezvous over its parent's
 * bootstrap `b` (p2pkit_comm_split, a spanning communicator's per-host
 * one): collective over every parent rank. `out`: this rank's new rank and
 * size (rank -1 for P2PKIT_SPLIT_NOCOLOR), its child's leader (the parent
 * rank that is new rank 0), the child's unique id, and on the leader the
 * listening socket for its rendezvous (the caller closes it; else -1).
 * same_machine[r] (NULL: all): parent rank r shares this rank's machine, so
 * a leader whose members all do listens on loopback. */
typedef struct {
  int rank, nranks, leader;
  p2pkit_unique_id_t id;
  int listen_fd;
} p2pk_split_rdv;
p2pkit_status_t p2pk_split_rendezvous(p2pk_boot *b, int color, int key,
                                      const unsigned char *same_machine, p2pk_split_rdv *out);

#endif
