/* SPDX-License-Identifier: BSD-3-Clause */
/* Communicator creation from a unique id (p2pkit_get_unique_id,
 * p2pkit_comm_init_rank_config): the id's wire form, the listening sockets
 * this process keeps for its ids, and the config checks. Internal: the CPU
 * tests (tests/cpu/test_init_id.c) call these directly. */
#ifndef P2PK_INIT_ID_H
#define P2PK_INIT_ID_H

#include <stdint.h>

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

#endif
