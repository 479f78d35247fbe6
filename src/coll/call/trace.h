/* SPDX-License-Identifier: BSD-3-Clause */
/* Each communicator's ring of its last calls (P2PKIT_TRACE_RING) and its
 * dump, the desync report `p2pkit trace` reads (docs/desync.md). group.c
 * records every call as it joins its group and its path once launched;
 * the dump comes on an asynchronous error or timeout (errors.c, a launch
 * that timed out), an abort, p2pkit_comm_dump_trace, or a signal
 * (P2PKIT_TRACE_SIGNAL). */
#ifndef P2PK_COLL_TRACE_H
#define P2PK_COLL_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "p2pkit.h"

struct p2pkit_comm;
struct p2pk_call;

/* A rank as the rendezvous describes it to the ring's identity. */
typedef struct {
  int64_t pid;
  uint64_t pidns; /* its pid namespace's inode (p2pk_trace_pidns) */
  int same_machine;
} p2pk_trace_rank;

/* A fresh random communicator id (rank 0's is every rank's). */
uint64_t p2pk_trace_new_id(void);
/* This process's pid namespace's inode; 0 when it cannot be read. */
uint64_t p2pk_trace_pidns(void);
/* c's ring and identity (its GPU current), `id` every rank's, ranks[r]
 * every rank's process; registered for the signal's dumps, the signal's
 * handler installed the first time. A spanning communicator's per-host
 * one has none. Without memory c runs without a ring (one INFO line). */
void p2pk_trace_attach(struct p2pkit_comm *c, uint64_t id, const p2pk_trace_rank *ranks);
/* Unregistered and freed (comm_free, before anything the dump reads). */
void p2pk_trace_detach(struct p2pkit_comm *c);

/* A checked call joins its group: its place in the ring into call->trace_at.
 * No allocation, no lock, no system call but the clock's (vDSO). */
void p2pk_trace_record(struct p2pk_call *call);
/* The call went to `path` (P2PK_PATH_*), launched with status st; a
 * launch that timed out or met a failed peer dumps the ring. */
void p2pk_trace_launched(const struct p2pk_call *call, int path, p2pkit_status_t st);
/* The call's group ended without launching it (refused at the group's
 * end: a bad argument there, a group too full, an error before it): it
 * reads "failed" with no path ("-"), the format's word for a call that
 * never ran; one marked launched or failed already keeps its mark. */
void p2pk_trace_dropped(const struct p2pk_call *call);
/* The communicator's error (st, p2pkit_last_error()'s sentence) was seen:
 * the first time, every rank's dump. */
void p2pk_trace_on_error(struct p2pkit_comm *c, p2pkit_status_t st);
/* p2pkit_comm_abort: a dump unless the communicator's error made one. */
void p2pk_trace_on_abort(struct p2pkit_comm *c);

/* trace_file.c: P2PKIT_TRACE_DIR as a descriptor (its name into path): 0
 * or more; -1 with why (another user's directory, one every user may
 * write that is not sticky, a symbolic link in place of the default one);
 * -2 when dumps are off. */
int p2pk_trace_dir_open(char *path, size_t plen, char *why, size_t wlen);
/* buf as the new file `name` in dirfd (O_EXCL, 0600, no link, never
 * blocking): 0, or -1 with why and nothing left behind. */
int p2pk_trace_file_write(int dirfd, const char *name, const char *buf, size_t len, char *why,
                          size_t wlen);
/* Is process pid of this machine and pid namespace alive: 'y', or 'n'
 * (no such process, or a zombie); '-' for no pid. */
char p2pk_trace_alive(int64_t pid);

#endif
