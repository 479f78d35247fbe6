/* SPDX-License-Identifier: BSD-3-Clause */
/* What NCCL did, read from its NCCL_DEBUG=INFO log: which transport each
 * channel's connection used between two ranks ("Channel 00/0 : 0[0] -> 1[1]
 * via P2P/CUMEM/read"), the version, settings taken from the environment,
 * and warnings. A pure parser, so recorded logs test it. */
#ifndef P2PK_DOCTOR_NCCL_LOG_H
#define P2PK_DOCTOR_NCCL_LOG_H

#include <stddef.h>

#include "p2pkit.h"

#define P2PK_NCCL_MAX_RANKS 32
#define P2PK_NCCL_MAX_ENV 8
#define P2PK_NCCL_MAX_WARN 4

enum {
  P2PK_NT_P2P = 1 << 0, /* P2P/CUMEM, P2P/IPC, P2P/direct pointer, P2P/indirect */
  P2PK_NT_SHM = 1 << 1, /* through host shared memory */
  P2PK_NT_NET = 1 << 2, /* through the network stack (sockets, IB) */
  P2PK_NT_OTHER = 1 << 3
};

typedef struct p2pk_nccl_log {
  char version[48];  /* "2.28.3+cuda13.0"; "" not seen */
  int nranks;        /* 1 + the highest rank a connection names, within the tables below */
  int nconn;         /* connection lines parsed */
  long max_rank;     /* the highest rank any connection names (-1: none) */
  int nconn_far;     /* connections naming a rank past the tables (P2PK_NCCL_MAX_RANKS) */
  unsigned kinds[P2PK_NCCL_MAX_RANKS][P2PK_NCCL_MAX_RANKS];  /* P2PK_NT_* seen, src -> dst */
  int count[P2PK_NCCL_MAX_RANKS][P2PK_NCCL_MAX_RANKS];      /* connections, src -> dst */
  char first[P2PK_NCCL_MAX_RANKS][P2PK_NCCL_MAX_RANKS][40]; /* "P2P/CUMEM/read" */
  int nenv;
  char env[P2PK_NCCL_MAX_ENV][96]; /* "NCCL_P2P_LEVEL=LOC" as NCCL reported it */
  int nwarn;
  char warn[P2PK_NCCL_MAX_WARN][200];
} p2pk_nccl_log;

/* Parse a whole log (lines of several processes may be interleaved). Never
 * fails on odd lines: they are skipped. */
void p2pk_nccl_log_parse(const char *text, size_t len, p2pk_nccl_log *out);
/* Connections that name a rank of `nranks` or more. */
int p2pk_nccl_log_conns_beyond(const p2pk_nccl_log *log, int nranks);
/* Kind of a transport text: "P2P/CUMEM/read" -> P2PK_NT_P2P. */
unsigned p2pk_nccl_transport_kind(const char *transport);
/* The value NCCL reported for a setting taken from the environment
 * ("NCCL_P2P_LEVEL"), or NULL. */
const char *p2pk_nccl_log_env(const p2pk_nccl_log *log, const char *name);

#endif
