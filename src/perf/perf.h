/* SPDX-License-Identifier: BSD-3-Clause */
/* `p2pkit perf <collective>`: nccl-tests' equivalent, with NCCL (loaded at run
 * time) measured through the same harness as the baseline.
 *
 * Pieces, each testable without a GPU except the last two:
 *   perf_args.c    command line -> perf_args; names; the size list
 *   perf_coll.c    one descriptor per collective: counts, bus-bandwidth
 *                  factor, the p2pkit and NCCL calls (adding a collective is
 *                  a table entry here plus its layout in perf_data.h)
 *   perf_format.c  nccl-tests' table, the JSON document, the algorithm table
 *   perf_explain.c --explain --from FILE: the selector of a recorded machine
 *   perf_proc.c    --procs: fork one process per GPU, shared region, barrier,
 *                  watchdog, timeouts
 *   perf_run.c     one process: buffers, communicators, timing, checking
 *   perf_check.cu  fill and check kernels (values from perf_data.h) */
#ifndef P2PK_PERF_H
#define P2PK_PERF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "p2pkit.h"
#include "perf/perf_data.h"

#define P2PK_PERF_MAX_RANKS 64
#define P2PK_PERF_MAX_SIZES 256
#define P2PK_PERF_MAX_REPEATS 64
#define P2PK_PERF_MAX_ALGOS 8
/* Rows of one pass: sizes x types x operations x roots x cycles (-d all,
 * -o all, -r all, -N). */
#define P2PK_PERF_MAX_ROWS 4096
/* nccl-tests' "mulsum": NCCL's pre-multiplied sum (ncclRedOpCreatePreMulSum),
 * each rank's input scaled by its own factor, then summed. An operation
 * code past p2pkit_redop_t's, which p2pkit does not have. */
#define PERF_OP_MULSUM P2PKIT_REDOP_COUNT
#define PERF_OP_COUNT (P2PKIT_REDOP_COUNT + 1)

/* Exit codes, as the CLI's. */
#define P2PK_PERF_EXIT_OK 0
#define P2PK_PERF_EXIT_FAIL 1
#define P2PK_PERF_EXIT_USAGE 2

typedef enum { PERF_LIB_P2PKIT = 0, PERF_LIB_NCCL = 1, PERF_LIB_COUNT } perf_lib;

struct p2pk_nccl_api_s;

/* ---- collectives ----------------------------------------------------- */

/* Element counts for one row, per rank (nccl-tests' definitions). */
typedef struct {
  size_t count;      /* the "count" column: bytes / type size, rounded to whole blocks */
  size_t bytes;      /* the "size" column: count * type size */
  size_t param;      /* count passed to the call */
  size_t send_elems; /* out-of-place send buffer */
  size_t recv_elems; /* out-of-place receive buffer */
  /* in place, one buffer: send = buf + rank * ip_send_step, recv = buf + rank * ip_recv_step */
  size_t ip_send_step, ip_recv_step;
} perf_counts;

/* One call of a collective on one rank. */
typedef struct {
  const void *send;
  void *recv;
  size_t param;
  p2pkit_dtype_t dtype;
  int op;             /* p2pkit_redop_t, or PERF_OP_MULSUM (NCCL only) */
  int nccl_op;        /* NCCL's operation for this call (a pre-multiplied sum: its handle) */
  int root, rank, nranks;
  size_t type_size;
  void *comm; /* p2pkit_comm_t or p2pk_nccl_comm_t */
  p2pkit_stream_t stream;
  int step;   /* which of the collective's steps (perf_coll.steps) */
} perf_call;

typedef struct perf_coll {
  const char *name;   /* as typed: "all_reduce" */
  perf_coll_id id;
  int uses_op;        /* -o applies */
  int uses_root;      /* -r applies */
  int has_inplace;    /* an in-place variant is measured */
  int pow2_ranks;     /* runs only on a power-of-two rank count (hypercube) */
  /* busbw = algbw * factor(n) */
  double (*factor)(int nranks);
  void (*counts)(size_t count, int nranks, perf_counts *out);
  /* NULL: this library has no such collective (yet) */
  p2pkit_status_t (*p2pkit_call)(const perf_call *c);
  p2pkit_status_t (*nccl_call)(const struct p2pk_nccl_api_s *api, const perf_call *c);
  /* Calls that must follow each other (hypercube's dimensions): each is
   * one group over a process's GPUs, in turn. 1 for the rest. */
  int (*steps)(int nranks);
} perf_coll;

/* NULL when unknown. */
const perf_coll *p2pk_perf_coll(const char *name);
const perf_coll *p2pk_perf_coll_at(int i); /* NULL past the end */
/* Whether `rank` holds a result to check when `root` is the root: reduce's
 * and gather's only on the root, every other collective's everywhere. */
int p2pk_perf_rank_has_output(const perf_coll *c, int rank, int root);
/* Counts for a requested size in bytes (at least one element per block). */
void p2pk_perf_counts(const perf_coll *c, size_t bytes, size_t type_size, int nranks,
                      perf_counts *out);
/* GB/s (1e9 bytes per second) from bytes and microseconds; NaN if time <= 0. */
double p2pk_perf_algbw(size_t bytes, double time_us);
double p2pk_perf_busbw(const perf_coll *c, size_t bytes, double time_us, int nranks);
/* Ranks' (processes') times as -a combines them: 0 the first's, 1 the mean,
 * 2 the least, 3 the most. */
double p2pk_perf_combine(const double *t, int n, int mode);

/* ---- arguments --------------------------------------------------------- */

/* nccl-tests' flags keep nccl-tests' meaning (its README and common.cu);
 * the defaults that differ are p2pkit's (-b, -e, -f, -w, -g, -a). */
typedef struct {
  const perf_coll *coll;
  size_t min_bytes, max_bytes;
  size_t step_bytes;     /* -i; 0: use step_factor */
  long step_factor;      /* -f */
  int factor_given;      /* -f was given (it excludes -i) */
  int iters, warmup;     /* -n, -w */
  int agg;               /* -m: calls in one group per iteration (time is per call) */
  int cycles;            /* -N: passes over every size; 0 until interrupted */
  int check;             /* -c: checked calls per point (0: none); the first wrong one stops */
  int graph;             /* -G: graph launches per timed region; 0 eager */
  int repeats;           /* --repeats: timed regions per point; the median is shown */
  int nthreads;          /* -t: threads per process (only 1: one thread drives a process's GPUs) */
  int ngpus;             /* -g: GPUs per process; 0 = all (one process) */
  int nprocs;            /* --procs: processes (one GPU each); 0 = one process */
  int parallel_init;     /* -p: communicators made in parallel by each thread; with one
                            thread per process the same as 0 */
  p2pkit_dtype_t dtype;  /* -d: the first (or only) type */
  int ndtypes;           /* -d all: every type, in nccl-tests' order */
  p2pkit_dtype_t dtypes[P2PKIT_DTYPE_COUNT];
  int op;                /* -o: the first (or only) operation (PERF_OP_MULSUM too) */
  int nops;              /* -o all: every operation the libraries run */
  int ops[PERF_OP_COUNT];
  int root;              /* -r; -1: every rank in turn (-r all) */
  int blocking;          /* -z: 0 none; 1 wait for and barrier after each call (group of -m);
                            2 wait only; 3 wait and barrier after each -n iteration, the
                            barrier not timed */
  int stream_null;       /* -y: the calls on the legacy default stream */
  int timeout_s;         /* -T: P2PKIT_TIMEOUT for the run; 0 leaves it as set */
  int cputime;           /* -C: report the host's time to issue a call instead */
  int timestamps;        /* -S: each row ends with the time it was measured */
  int average;           /* -a: how ranks' times combine: 0 rank 0's, 1 mean, 2 min, 3 max */
  int unalign;           /* -u: buffers start this many elements past their allocation */
  int reg;               /* -R: register buffers with the library */
  int vs_nccl, nccl_only;
  int json;              /* --json: the JSON document on stdout instead of the table */
  const char *json_file; /* --json-file, -J: also write it here */
  const char *from;      /* --from FILE: --explain for a recorded machine, no GPU */
  const char *algo;      /* --algo NAME[/PROTO]: P2PKIT_ALGO (and P2PKIT_PROTO) for the run */
  int max_blocks;        /* --max-blocks: P2PKIT_MAX_BLOCKS and NCCL_MAX_CTAS; 0: neither */
  int nalgos;            /* --sweep-algos: one pass per NAME[/PROTO] */
  char algos[P2PK_PERF_MAX_ALGOS][32];
  const char *algo_table; /* --algo-table: write the sweep's winners here */
  int explain;            /* --explain: print the selector instead of measuring */
  int hosts;              /* --hosts H: --procs' ranks simulate H hosts (0: one, as they are) */
} perf_args;

/* One combination of -d, -o and -r a pass measures (nccl-tests' order: types,
 * then operations, then roots). */
typedef struct {
  p2pkit_dtype_t dtype;
  int op;   /* P2PKIT_SUM for collectives without one */
  int root; /* -1 for collectives without one */
} perf_variant;

enum { PERF_PARSE_OK = 0, PERF_PARSE_HELP = 1, PERF_PARSE_ERROR = -1 };

void p2pk_perf_args_default(perf_args *a);
/* argv[0] is "perf", argv[1] the collective. Errors: one line on `err`
 * ("p2pkit perf: error: ..."), plus the usage for an unknown flag. */
int p2pk_perf_parse(int argc, char **argv, perf_args *a, FILE *err);
void p2pk_perf_usage(FILE *out);
/* Names as nccl-tests spells them (float, half, bfloat16, f8e4m3, ...) and
 * aliases; 0 ok, -1 unknown. Operations: sum, prod, max, min, avg, mulsum. */
int p2pk_perf_dtype_parse(const char *name, p2pkit_dtype_t *out);
int p2pk_perf_op_parse(const char *name, int *out);
const char *p2pk_perf_dtype_name(p2pkit_dtype_t d); /* nccl-tests' name */
const char *p2pk_perf_op_name(int op);
/* The combinations a run of `nranks` ranks measures, at most `max`; returns
 * how many (more than `max` when they do not fit). */
int p2pk_perf_variants(const perf_args *a, int nranks, perf_variant *out, int max);
/* Whether p2pkit runs a variant (mulsum: no), and whether it runs it through
 * its NCCL path (a type p2pkit's kernels lack). */
int p2pk_perf_p2pkit_runs(const perf_variant *v);
int p2pk_perf_via_nccl(const perf_variant *v);
/* The requested sizes in bytes, smallest first; returns how many (<= max). */
int p2pk_perf_sizes(const perf_args *a, size_t *out, int max);
int p2pk_perf_uses_p2pkit(const perf_args *a);
/* "oneshot/ll" -> algorithm and protocol codes of src/coll/select/algo.h (protocol
 * -1 when not given); -1 when a name is unknown. */
int p2pk_perf_algo_split(const char *entry, int *algo, int *proto);
int p2pk_perf_uses_nccl(const perf_args *a);

/* ---- results and output ---------------------------------------------- */

typedef struct {
  int measured;       /* 0: not run (no in-place variant, library not used) */
  double t_med, t_min, t_max; /* microseconds per call over the repeats */
  double t_cpu;       /* the host's microseconds to issue a call (median; -C) */
  int64_t wrong;      /* -1 when not checked */
} perf_stat;

typedef struct {
  perf_counts k;
  perf_variant v;   /* type, operation, root */
  int cycle;        /* -N: which pass over the sizes (0 first) */
  long long when;   /* -S: seconds since the epoch when the row was measured */
  perf_stat st[PERF_LIB_COUNT][2]; /* [library][0 out-of-place, 1 in-place] */
  int algo, proto;  /* what p2pkit ran at this size (src/coll/select/algo.h codes), -1 unknown */
} perf_row;

typedef struct {
  char algo[32];      /* "" when none was forced */
  int nrows;
  perf_row rows[P2PK_PERF_MAX_ROWS];
} perf_pass;

typedef struct {
  int rank, device, pid;
  char name[96], busid[24];
} perf_rank_info;

typedef struct {
  const perf_args *args;
  int nranks, nprocs, gpus_per_proc;
  perf_rank_info ranks[P2PK_PERF_MAX_RANKS];
  char hostname[64];
  char date[32];      /* UTC, ISO 8601 */
  char driver[32];    /* NVIDIA driver version ("" unknown) */
  int cuda_driver, cuda_runtime;
  int staged;         /* p2pkit's transport: 1 host staging (shm), 0 direct P2P */
  int nccl_version;   /* 0: not loaded */
  char nccl_path[256];
  int npasses;
  perf_pass *passes;  /* npasses of them */
} perf_report;

/* Which library fills the main columns, and whether NCCL gets extra ones. */
perf_lib p2pk_perf_primary(const perf_args *a);
/* "12.34" style time like nccl-tests (2, 1 or 0 decimals by magnitude). */
void p2pk_perf_fmt_time(char *buf, size_t len, double us);
void p2pk_perf_print_header(FILE *out, const perf_report *r, const perf_pass *p);
void p2pk_perf_print_row(FILE *out, const perf_report *r, const perf_row *row);
/* A comment line before the rows of a variant p2pkit runs on NCCL, or one
 * a library skips (`why`); nothing otherwise. */
void p2pk_perf_print_variant_note(FILE *out, const perf_report *r, const perf_variant *v,
                                  const char *why);
/* Out-of-bounds and average bus bandwidth lines. */
void p2pk_perf_print_footer(FILE *out, const perf_report *r, const perf_pass *p);
/* Sum of #wrong over a pass (all libraries, both places). */
int64_t p2pk_perf_pass_wrong(const perf_pass *p);
/* Mean busbw of one library over a pass (NaN when nothing was measured). */
double p2pk_perf_avg_busbw(const perf_report *r, const perf_pass *p, perf_lib lib);
void p2pk_perf_write_json(FILE *out, const perf_report *r);
/* The sweep's fastest pass per size (out-of-place median, checked results
 * only), as a summary block / as an algorithm table in src/coll/select/algo.h's
 * format (rows for this transport and rank count, then the built-in rows). */
void p2pk_perf_print_winners(FILE *out, const perf_report *r);
p2pkit_status_t p2pk_perf_write_algo_table(FILE *out, const perf_report *r);

/* ---- running ---------------------------------------------------------- */

/* Shared between the processes of one run (a MAP_SHARED mapping). */
typedef struct perf_shared perf_shared;

/* --explain --from FILE (perf_explain.c): the selector and its decisions for
 * a recorded machine, no GPU. Returns the exit code; errors on `err`. */
int p2pk_perf_explain_file(const perf_args *a, FILE *out, FILE *err);
/* The `p2pkit perf` command (argv[0] = "perf"). Returns the exit code. */
int p2pk_perf_main(int argc, char **argv);
/* One process of a run: `proc` of `nprocs` (1 in one-process mode). Returns
 * the exit code; errors are printed (one process) or left in the shared
 * region for the parent (children). */
int p2pk_perf_run(const perf_args *a, perf_shared *sh, int proc, int nprocs);

#endif
