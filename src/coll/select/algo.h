/* SPDX-License-Identifier: BSD-3-Clause */
/* Which all-reduce algorithm runs, by transport, rank count and size: a small
 * table (built in, or loaded from P2PKIT_ALGO_TABLE), environment overrides,
 * and the rules that turn a row's "auto" fields into a launch. No CUDA here,
 * so the CPU tests cover all of it.
 *
 * Table text format (what `p2pkit perf` writes after a sweep):
 *   p2pkit-algo-table 1
 *   # transport ranks_min ranks_max max_bytes algo proto blocks threads chunk
 *   p2p 2 2 256K oneshot ll 0 0 0
 *   p2p 2 2 inf oneshot simple 132 512 64K
 * transport: p2p | shm; max_bytes: a size (K/M/G suffixes) or inf; algo:
 * oneshot | twoshot | staged; proto: ll | ll128 | simple; blocks/threads/chunk: 0 for
 * automatic. The first row whose transport and rank range match, whose
 * max_bytes is >= the message size and whose protocol can carry it (LL and
 * LL128: within their areas) wins. */
#ifndef P2PK_ALGO_H
#define P2PK_ALGO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "coll/kernels/coll_dev.h"
#include "p2pkit.h"

#define P2PK_ALGO_MAX_ROWS 64
#define P2PK_ALGO_THREAD_STEPS 17 /* threads / 32 for 0..512 threads */

enum { P2PK_TRANSPORT_P2P = 0, P2PK_TRANSPORT_SHM = 1 };

typedef struct {
  int transport;
  int min_ranks, max_ranks;
  size_t max_bytes; /* SIZE_MAX: no limit */
  int algo, proto;
  int blocks, threads; /* 0: automatic */
  size_t chunk;        /* bytes per mailbox use; 0: automatic */
} p2pk_algo_row;

typedef struct {
  int nrows;
  p2pk_algo_row rows[P2PK_ALGO_MAX_ROWS];
  char source[256]; /* "built-in" or the file it came from */
} p2pk_algo_table;

/* What the environment forces; -1 / 0 where it forces nothing. */
typedef struct {
  int algo, proto;
  int blocks, threads;
  size_t chunk;
} p2pk_algo_force;

/* What a communicator offers the choice. */
typedef struct {
  int nranks;
  int staged;           /* 1: host shared memory, no P2P */
  int sm_count;
  size_t ll_cap;        /* largest message the LL area holds */
  size_t mailbox;       /* bytes per P2P mailbox */
  int mailboxes;        /* P2P mailboxes per peer and set */
  size_t stage_mailbox; /* bytes per staged mailbox */
  size_t ll128_cap;     /* largest message the LL128 area holds (0: none) */
  /* LL128 blocks resident per SM by threads / 32 (64..512 threads); 0:
   * unknown (then four per SM, as LL). */
  int ll128_per_sm[P2PK_ALGO_THREAD_STEPS];
  int ll128_x2; /* LL128 grids within one block per SM may work two passes at once (P2PKIT_LL128_X2) */
} p2pk_algo_geom;

typedef struct {
  int algo, proto;
  int blocks, threads; /* the grid (staged: writer blocks; the grid is twice that) */
  int slots;
  uint32_t chunk;      /* bytes per mailbox use, multiple of 16 (simple protocol) */
  int ll128_x2;        /* LL128: a warp works two passes an iteration (ll128x2_kernel) */
} p2pk_algo_choice;

const char *p2pk_algo_name(int algo);
const char *p2pk_proto_name(int proto);
const char *p2pk_transport_name(int transport);
int p2pk_algo_from_name(const char *name);  /* -1 if unknown */
int p2pk_proto_from_name(const char *name); /* -1 if unknown */

void p2pk_algo_table_default(p2pk_algo_table *t);
/* Parse the text format. P2PKIT_ERR_PARSE naming `name`:line on bad input. */
p2pkit_status_t p2pk_algo_table_parse(const char *name, const char *text, p2pk_algo_table *t);
p2pkit_status_t p2pk_algo_table_load(const char *path, p2pk_algo_table *t);
p2pkit_status_t p2pk_algo_table_write(const p2pk_algo_table *t, FILE *out);
/* First matching row, or NULL. */
const p2pk_algo_row *p2pk_algo_lookup(const p2pk_algo_table *t, int transport, int nranks,
                                      size_t bytes);
/* First row for this communicator and size whose protocol can carry it (LL
 * and LL128 rows are skipped when the message exceeds their area), or NULL. */
const p2pk_algo_row *p2pk_algo_lookup_fit(const p2pk_algo_table *t, const p2pk_algo_geom *g,
                                          size_t bytes);
/* Hash of the rows, for checking that all ranks use the same table. */
uint64_t p2pk_algo_table_hash(const p2pk_algo_table *t);

/* The environment's overrides: P2PKIT_ALGO, P2PKIT_PROTO, P2PKIT_COLL_BLOCKS,
 * P2PKIT_COLL_THREADS, P2PKIT_COLL_CHUNK. P2PKIT_ERR_INVALID_ARGUMENT on an
 * unknown algorithm or protocol name. */
p2pkit_status_t p2pk_algo_force_from_env(p2pk_algo_force *f);
/* Staged: blocks per side (writers, readers) a call gets unless
 * P2PKIT_COLL_BLOCKS says otherwise. */
int p2pk_algo_staged_blocks_max(const p2pk_algo_geom *g);
/* Table row, overrides, then the rules that fill "auto" and clamp to what the
 * communicator has. Deterministic: every rank computes the same choice. */
void p2pk_algo_choose(const p2pk_algo_table *t, const p2pk_algo_force *f, const p2pk_algo_geom *g,
                      size_t bytes, p2pk_algo_choice *c);

#endif
