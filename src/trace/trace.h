/* SPDX-License-Identifier: BSD-3-Clause */
/* Desync reports, the part that needs no GPU: one rank's dump of its last
 * calls as data (p2pk_tdump), the versioned text format coll/call/trace.c writes
 * it in and `p2pkit trace` reads back (trace_format.c), PyTorch's flight
 * recorder dumps read into the same form (trace_fr.c), and the verdict over
 * every rank's dump (trace_analyze.c). A layer of its own above core, below
 * coll: plain C, tested on recorded dumps (tests/data/trace). */
#ifndef P2PK_TRACE_H
#define P2PK_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "p2pkit.h"

#define P2PK_TRACE_MAGIC "p2pkit-trace"
#define P2PK_TRACE_FORMAT 1
/* What a reader takes at most: a p2pkit dump (the longest ring,
 * P2PKIT_TRACE_RING's 65536 calls, fits), a flight recorder dump. */
#define P2PK_TRACE_MAX_FILE (16u << 20)
#define P2PK_TRACE_MAX_FR_FILE (64u << 20)
#define P2PK_TRACE_MAX_RANKS 65536      /* a flight recorder's group */
#define P2PK_TRACE_MAX_P2PKIT_RANKS 4096 /* a p2pkit communicator (16 today) */
#define P2PK_TRACE_MAX_CALLS 65536

enum { P2PK_TSRC_P2PKIT = 1, P2PK_TSRC_TORCH = 2 };

/* One call as a dump records it. Names, not numbers, so that dumps of
 * either source compare alike. */
typedef struct {
  uint64_t seq;     /* from 1: the collective's number, or a send/recv's own */
  int p2p;          /* 1: a send or receive (their own numbering) */
  char kind[24];    /* all_reduce, broadcast, ..., send, recv */
  char dtype[16];   /* float32, ... (torch: Float, ...) */
  uint64_t count;   /* elements of one rank's call (torch: its input's elements) */
  int64_t root;     /* root, or a send's or receive's peer; -1 none */
  char op[8];       /* sum, ...; "-" none or not recorded */
  char path[24];    /* the path that carried it; "-" not launched (torch: none) */
  uint64_t stream;  /* the caller's stream (torch: 0) */
  uint64_t t_ns;    /* enqueued, on the dumping host's monotonic clock (torch: realtime) */
  char state[12];   /* queued, launched, failed; torch: scheduled, started, completed */
} p2pk_tcall;

/* A peer as the dumping rank saw it when it dumped. */
typedef struct {
  int64_t pid;  /* -1 unknown */
  int local;    /* on this rank's machine, in its pid namespace */
  char alive;   /* 'y' alive, 'n' gone, '-' not known (another machine, or itself) */
} p2pk_tpeer;

/* One rank's dump of one communicator (a torch file: one process group). */
typedef struct {
  int source;         /* P2PK_TSRC_* */
  char file[256];     /* where it was read, for messages */
  char version[24];   /* p2pkit's version; torch: the recorder's */
  char comm[72];      /* p2pkit: the communicator's id, 16 hex digits; torch: the group's name */
  int rank, nranks;   /* p2pkit: rank in the communicator; torch: global rank, group size */
  int64_t *members;   /* torch: the group's global ranks (nranks of them); NULL: 0..nranks-1 */
  char host[136];     /* host id ("hostname:boot id", or P2PKIT_HOSTID) */
  int64_t pid;        /* -1 unknown */
  uint64_t pidns;     /* its pid namespace's inode; 0 unknown */
  int device;         /* CUDA ordinal; -1 unknown */
  char gpu[32];       /* PCI bus id; "-" unknown */
  char reason[256];   /* what made it dump */
  uint64_t mono_ns, real_ns; /* when */
  char error[12];     /* the communicator's error then: none, timeout, mismatch, aborted, remote, other */
  int error_peer;     /* the rank it names; -1 none */
  p2pk_tpeer *peers;  /* nranks of them (p2pkit); NULL (torch) */
  uint64_t ring, recorded; /* the ring's length, calls recorded in all */
  p2pk_tcall *calls;  /* oldest first */
  size_t ncalls;
} p2pk_tdump;

void p2pk_tdump_free(p2pk_tdump *d);

/* ------------------------------------------------ the text format ------ */
/* Bytes p2pk_tdump_write needs at most for nranks peers and ncalls calls. */
size_t p2pk_tdump_max_bytes(int nranks, size_t ncalls);
/* d as the text format into buf; its length, or 0 when cap is too small.
 * Text fields are written printable (control bytes and broken UTF-8 as
 * '?'), and a token field with a space or nothing in it as "-". */
size_t p2pk_tdump_write(const p2pk_tdump *d, char *buf, size_t cap);
/* The text of one dump (len bytes; `name` for messages) into *d, strictly:
 * P2PKIT_ERR_PARSE with "NAME:LINE: what is wrong" for anything else
 * (another version, a line out of place, a number out of range, a cut
 * file). Free with p2pk_tdump_free, whatever it returns. */
p2pkit_status_t p2pk_tdump_parse(const char *name, const char *text, size_t len, p2pk_tdump *d);

/* ------------------------------------------- PyTorch's flight recorder -- */
/* A flight recorder dump (a pickle: TORCH_FR_DUMP_TEMP_FILE<rank>), of
 * `rank` (from its file name): one p2pk_tdump per process group in its
 * entries or its configuration, into a new array *out of *n. Only the
 * pickle opcodes of plain data are read (dict, list, tuple, str, int,
 * float, bool, None); anything else (GLOBAL, REDUCE, ...: code to run) is
 * refused, as is a file past its bounds. P2PKIT_ERR_PARSE, "NAME: what". */
p2pkit_status_t p2pk_fr_read(const char *name, const unsigned char *buf, size_t len, int rank,
                             p2pk_tdump **out, size_t *n);
/* The rank a flight recorder file's name ends with; -1 when it does not. */
int p2pk_fr_rank_of(const char *name);

/* ------------------------------------------------------- a directory -- */
typedef struct p2pk_tbad p2pk_tbad;
/* Every report in `dir` (not its subdirectories): p2pkit's, PyTorch's
 * flight recorder's, into new arrays; the files that could not be read
 * (named like p2pkit's but not one, cut, hostile, too large, a link) into
 * *bad with why. Files that are no report are passed over. Free each dump
 * with p2pk_tdump_free, then both arrays. P2PKIT_ERR_IO when `dir` cannot
 * be read; P2PKIT_ERR_NO_MEMORY. */
p2pkit_status_t p2pk_trace_load_dir(const char *dir, p2pk_tdump **dumps, size_t *n,
                                    p2pk_tbad **bad, size_t *nbad);

/* ---------------------------------------------------------- analysis -- */
enum {
  P2PK_TV_CONSISTENT = 0, /* every rank's calls agree, and each made the last one */
  P2PK_TV_MISMATCH,       /* at a seq, ranks called different things */
  P2PK_TV_NOT_ARRIVED,    /* some ranks never made a call the others made */
  P2PK_TV_GONE,           /* a rank without a dump whose process was gone */
  P2PK_TV_NO_DUMP         /* a rank without a dump, its process not known gone */
};

/* One communicator: its dumps by rank (the newest of each rank's), and the
 * verdict. */
typedef struct {
  const char *comm;
  int source, nranks;
  const int64_t *members;    /* torch: global ranks; NULL: 0..nranks-1 */
  int64_t *own_members;      /* members when no dump said them (freed with the job) */
  const p2pk_tdump **rank;   /* [nranks]; NULL: no dump */
  int verdict;               /* P2PK_TV_* */
  uint64_t seq;              /* where it happened (0: nowhere) */
  int *culprits;             /* [nranks]: 1 for a rank the verdict names */
  char gone_pid[64];         /* P2PK_TV_GONE: how it was known */
  char line[640];            /* the verdict in one line */
} p2pk_tcomm;

/* A file `p2pkit trace` could not read, and why (the reader's sentence). */
struct p2pk_tbad {
  char file[256];
  char why[512];
};

typedef struct {
  p2pk_tcomm *comms;
  size_t ncomms;
  size_t headline;           /* the comm whose verdict comes first */
  const p2pk_tbad *bad;      /* the caller's, listed by the JSON (NULL: none) */
  size_t nbad;
} p2pk_tjob;

/* Is process `pid` of machine `host` (pid namespace `pidns`, 0 unknown)
 * alive now: 1 yes, 0 gone, -1 cannot tell (another machine). NULL: never
 * asked. */
typedef int (*p2pk_tprobe_fn)(void *arg, const char *host, uint64_t pidns, int64_t pid);

/* Every dump grouped by communicator (the newest dump of each rank),
 * each judged. P2PKIT_ERR_PARSE naming the file when two dumps of one
 * communicator disagree on its size or one names a rank outside it. Free
 * with p2pk_tjob_free. */
p2pkit_status_t p2pk_trace_analyze(const p2pk_tdump *dumps, size_t n, p2pk_tprobe_fn probe,
                                   void *arg, p2pk_tjob *job);
void p2pk_tjob_free(p2pk_tjob *job);
/* The verdict line first, then per communicator its ranks and the calls
 * where it happened. */
void p2pk_trace_print(const p2pk_tjob *job, FILE *out);
/* The same as JSON (docs/desync.md gives the schema). */
void p2pk_trace_json(const p2pk_tjob *job, FILE *out);

#endif
