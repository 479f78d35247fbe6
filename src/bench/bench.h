/* SPDX-License-Identifier: BSD-3-Clause */
/* `p2pkit bench`: the engine behind the command. Argument parsing, the
 * arithmetic (statistics, expected rates, verdicts) and the writers (table,
 * JSON, CSV, SVG) are plain functions of plain data, so CPU tests call them
 * directly; only bench_run.c touches a GPU. */
#ifndef P2PK_BENCH_H
#define P2PK_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "p2pkit.h"
#include "topo/topo.h"
#include "xfer/xfer.h"

typedef enum {
  P2PK_BM_MEMCPY_PEER = 0, /* the anchor: cudaMemcpyPeerAsync with peer access on */
  P2PK_BM_STAGED_SERIAL,   /* one D2H then one H2D through pinned memory */
  P2PK_BM_STAGED,          /* p2pkit's pipelined staging */
  P2PK_BM_DRIVER,          /* cudaMemcpyPeerAsync with peer access off */
  P2PK_BM_CE,              /* p2pkit, P2P through the copy engine */
  P2PK_BM_SM_PUSH,         /* p2pkit, kernel on the source writes */
  P2PK_BM_SM_PULL,         /* p2pkit, kernel on the destination reads */
  P2PK_BM_COUNT
} p2pk_bench_method;

typedef enum {
  P2PK_MODE_ONEWAY = 0, /* one ordered pair at a time */
  P2PK_MODE_BOTH = 1,   /* a -> b and b -> a at once */
  P2PK_MODE_ALL = 2,    /* every ordered pair at once */
  P2PK_MODE_COUNT
} p2pk_bench_mode;

typedef enum {
  P2PK_LAT_MEMCPY_PEER = 0, /* back-to-back cudaMemcpyPeerAsync, per copy */
  P2PK_LAT_CE,              /* back-to-back p2pkit_copy(P2P_CE), per copy */
  P2PK_LAT_SM_PUSH,         /* back-to-back p2pkit_copy(P2P_SM_PUSH), per copy */
  P2PK_LAT_STAGED,          /* back-to-back p2pkit_copy(STAGED), per copy */
  P2PK_LAT_FLAG,            /* SM write of data + flag, ping-pong, one way */
  P2PK_LAT_COUNT
} p2pk_bench_lat_kind;

enum { P2PK_SM_SWEEP_FULL = 1, P2PK_SM_SWEEP_SHORT = 2 };

#define P2PK_BENCH_MAX_SIZES 64
#define P2PK_BENCH_MAX_PAIRS 4096
#define P2PK_BENCH_PATH 512

typedef struct {
  unsigned methods; /* 1 << p2pk_bench_method */
  int methods_given;
  unsigned modes;   /* 1 << p2pk_bench_mode */
  size_t min_bytes, max_bytes, step_bytes;
  long factor;
  size_t sizes[P2PK_BENCH_MAX_SIZES];
  int nsizes;
  int gpus[P2PK_MAX_GPUS];
  int ngpus; /* 0: every GPU */
  int (*pairs)[2]; /* [npairs][2]; NULL: every ordered pair of the GPUs */
  int npairs;
  int iters, warmup;
  uint64_t seed;
  int latency;
  size_t lat_bytes;
  int lat_iters; /* round trips per ping-pong launch; copies per back-to-back sample */
  int sm_sweep;     /* 0, P2PK_SM_SWEEP_FULL or P2PK_SM_SWEEP_SHORT */
  int stage_sweep;
  int have_sm_config;
  p2pk_sm_config sm;
  int anchor; /* measure memcpy-peer alongside (default 1) */
  int gate;   /* hold the stream until every copy is queued (default 1) */
  int json, csv; /* 0 off, 1 stdout, 2 file */
  char json_path[P2PK_BENCH_PATH], csv_path[P2PK_BENCH_PATH], plot_path[P2PK_BENCH_PATH];
  char from[P2PK_BENCH_PATH];
  char plot_from[P2PK_BENCH_PATH]; /* --plot-from: redraw --plot from this saved --json */
  int dry_run, quiet;
} p2pk_bench_opts;

/* --- arguments ------------------------------------------------------------ */

void p2pk_bench_opts_init(p2pk_bench_opts *o);
void p2pk_bench_opts_free(p2pk_bench_opts *o);
/* argv[0] is "bench". 0 ok, 1 help was asked for, -1 error (one line in err),
 * -2 an unknown option (one line in err; print the usage after it). */
int p2pk_bench_parse(int argc, char **argv, p2pk_bench_opts *o, char *err, size_t errlen);
/* Against a machine of `ngpus` GPUs: ids exist, at least two GPUs, the pair
 * list (every ordered pair of the chosen GPUs when none was given), and the
 * largest size's buffers add up to a count of bytes (p2pk_bench_mem_need).
 * 0 ok, -1 error. */
int p2pk_bench_validate(p2pk_bench_opts *o, int ngpus, char *err, size_t errlen);
void p2pk_bench_usage(FILE *out);
const char *p2pk_bench_method_name(int m);
const char *p2pk_bench_mode_name(int m);
const char *p2pk_bench_lat_name(int k);
/* "ce" / "p2p-ce" / ...; -1 when unknown. */
int p2pk_bench_method_parse(const char *name, size_t len);
/* The p2pkit path a method measures (AUTO for the two raw CUDA methods). */
p2pkit_path_t p2pk_bench_method_path(int m);
/* 1 when the method needs direct P2P. */
int p2pk_bench_method_p2p(int m);
/* "256 MiB", "8 B", "1.5 KiB". */
void p2pk_bench_fmt_size(size_t bytes, char *out, size_t len);

/* --- arithmetic ------------------------------------------------------------ */

typedef struct {
  double median, min, max, mean, cv; /* cv = sample standard deviation / mean */
  int n;
} p2pk_stats;

/* Sorts v in place. n == 0 gives zeros. */
void p2pk_stats_compute(double *v, int n, p2pk_stats *s);

/* Expected rate of one direction of a pair for a method, from its links:
 * P2P methods over NVLink get nvlinks x per-link rate, over PCIe the slower
 * GPU's PCIe link; staged methods the PCIe link (the serial one half of it,
 * its two hops in turn). `line` is the raw rate, `expected` what a good copy
 * reaches (the topology's efficiency factors). */
void p2pk_bench_expected(const p2pkit_pair_t *pair, double pcie_gbps, int method, double *line,
                         double *expected);
/* The slower of the two GPUs' PCIe links, GB/s one way (0 unknown). */
double p2pk_bench_pair_pcie(const struct p2pkit_topo *t, int a, int b);

/* --- results --------------------------------------------------------------- */

enum { P2PK_ROW_OK = 0, P2PK_ROW_SKIPPED = 1, P2PK_ROW_FAILED = 2 };

typedef struct {
  int method, mode;
  int src, dst;   /* the pair; a group total: BOTH src<dst, ALL -1 -1 */
  int total;      /* 1: the group's rate: its bytes over its slowest copy's time
                     (each pair timed on its own device, all released at once by
                     the gate); ungated (--no-gate, driver) over the group's time
                     from the first start to the last end */
  int npairs;     /* pairs moving at once in this group */
  size_t bytes;   /* per pair */
  p2pk_stats us;  /* time per run, microseconds */
  double gbps, gbps_min, gbps_max; /* from the median, max and min time */
  int link;       /* p2pkit_link_t of the pair (totals: of the first pair) */
  char label[8];
  double line_gbps, expected_gbps, frac_line, ratio_anchor; /* 0: unknown */
  int low;
  char verdict[96]; /* "ok", "LOW (under 0.7x expected)", ... */
  int status;       /* P2PK_ROW_* */
  int verified;     /* 1: every byte matched */
  uint64_t mismatches;
  char path[96];    /* what p2pkit logged for it */
  char note[192];   /* why skipped or failed */
} p2pk_bench_row;

typedef struct {
  int kind, src, dst;
  size_t bytes;
  int count;       /* copies per sample (back to back) or round trips */
  p2pk_stats us;   /* per copy / one way, microseconds */
  double gt_us;    /* cross-check from %globaltimer (ping-pong), 0 none */
  int status, verified;
  uint64_t mismatches;
  char note[192];
} p2pk_bench_lat;

typedef struct {
  int method; /* P2PK_BM_SM_PUSH / P2PK_BM_SM_PULL / P2PK_BM_STAGED */
  int src, dst;
  size_t bytes;
  char config[128]; /* SM config text, or "chunk=8M,depth=4,ramp=on" */
  p2pk_sm_config sm;
  size_t chunk;
  int depth, ramp;
  double gbps, cv;
  int status, verified;
  p2pkit_status_t fail_status; /* why it failed (P2PKIT_SUCCESS otherwise) */
  char note[192];
} p2pk_bench_sweep;

typedef struct {
  char name[96];
  char busid[P2PK_BUSID_LEN];
} p2pk_bench_gpu;

typedef struct {
  char date[32], hostname[64], driver[32];
  int cuda_driver, cuda_runtime;
  int ngpus;
  p2pk_bench_gpu gpu[P2PK_MAX_GPUS];
  /* settings in force */
  int p2p_disable;
  char p2p_level[8];
  size_t stage_chunk;
  int stage_depth;
  char sm_config[128];
  int iters, warmup;
  uint64_t seed;
  int gate;
  p2pk_bench_row *rows;
  int nrows, cap_rows;
  p2pk_bench_lat *lats;
  int nlats, cap_lats;
  p2pk_bench_sweep *sweeps;
  int nsweeps, cap_sweeps;
} p2pk_bench_report;

void p2pk_bench_report_init(p2pk_bench_report *r);
void p2pk_bench_report_free(p2pk_bench_report *r);
/* Append a zeroed entry; NULL when out of memory. */
p2pk_bench_row *p2pk_bench_add_row(p2pk_bench_report *r);
p2pk_bench_lat *p2pk_bench_add_lat(p2pk_bench_report *r);
p2pk_bench_sweep *p2pk_bench_add_sweep(p2pk_bench_report *r);

/* Fill frac_line, ratio_anchor, low and verdict of every row: LOW when a
 * bandwidth-sized run (32 MiB and up) reaches under 0.7x its expected rate,
 * or when it is under 0.8x the median of its peers (same size, mode, method
 * and link class). */
void p2pk_bench_verdicts(p2pk_bench_report *r);
#define P2PK_BENCH_LOW_EXPECTED 0.7
#define P2PK_BENCH_LOW_PEERS 0.8
#define P2PK_BENCH_CEILING_MIN_BYTES (32u << 20)

/* Median over the ok one-way rows of (size, method); 0 when none. */
double p2pk_bench_median_gbps(const p2pk_bench_report *r, int mode, int method, size_t bytes);
/* The fastest ok sweep entry of a method, or NULL. */
const p2pk_bench_sweep *p2pk_bench_best_sweep(const p2pk_bench_report *r, int method);

/* The SM kernel configurations a sweep times (P2PK_SM_SWEEP_FULL: every
 * kind x hint x blocks x threads x unroll and bulk blocks x tile x stages;
 * P2PK_SM_SWEEP_SHORT: the ~20 most promising); at most `max`, the count
 * (out NULL: only the count). */
int p2pk_bench_sm_sweep_configs(int which, p2pk_sm_config *out, int max);
#define P2PK_BENCH_MAX_SM_CONFIGS 256

/* Whether a finished run failed: data that did not verify anywhere, a failed
 * bandwidth or latency measurement, or a swept method none of whose
 * configurations ran (a few failed configurations are reported, not fatal).
 * 0 ok; -1 with one line in msg. */
int p2pk_bench_failures(const p2pk_bench_report *r, char *msg, size_t len);
/* Sweep entries that failed. */
int p2pk_bench_sweep_failed(const p2pk_bench_report *r);

/* --- output ---------------------------------------------------------------- */

p2pkit_status_t p2pk_bench_write_table(const p2pk_bench_report *r, FILE *out);
p2pkit_status_t p2pk_bench_write_json(const p2pk_bench_report *r, FILE *out);
p2pkit_status_t p2pk_bench_write_csv(const p2pk_bench_report *r, FILE *out);
/* Bandwidth against size per method (one way, log x axis) and a heat map of
 * the pair matrix per method at the largest size. */
p2pkit_status_t p2pk_bench_write_svg(const p2pk_bench_report *r, FILE *out);
/* bench_load.c: the report's header and rows back from a JSON document that
 * p2pk_bench_write_json wrote (json-c, loaded at run time): what the plot
 * draws. 0 ok; -1 with one line in err (json-c missing, the file unreadable,
 * not JSON, or not bench's document). */
int p2pk_bench_load_json(const char *path, p2pk_bench_report *r, char *err, size_t len);

/* --- planning and running (GPU) -------------------------------------------- */

/* Device memory each GPU needs at `bytes` (per-pair buffers of every mode
 * asked for); need[] has `ngpus` entries. 0 ok; -1 when a need does not fit
 * in a size_t (that entry is SIZE_MAX: saturated, never wrapped). */
int p2pk_bench_mem_need(const p2pk_bench_opts *o, size_t bytes, int ngpus, size_t *need);
/* 0 when need fits in free on every GPU, else -1 and one line in err. */
int p2pk_bench_mem_check(const size_t *need, const size_t *free_bytes, int ngpus, size_t bytes,
                         char *err, size_t errlen);
/* The plan without running it: pairs, links, expected rates, AUTO's path. */
p2pkit_status_t p2pk_bench_print_plan(const p2pk_bench_opts *o, p2pkit_ctx_t ctx, FILE *out);
/* Fill the report's header (date, host, driver, GPUs, settings). */
void p2pk_bench_report_header(p2pk_bench_report *r, const p2pk_bench_opts *o, p2pkit_ctx_t ctx);
/* Run everything the options ask for. P2PKIT_ERR_INVALID_ARGUMENT when the
 * sizes do not fit in free memory (checked before allocating). */
p2pkit_status_t p2pk_bench_run(const p2pk_bench_opts *o, p2pkit_ctx_t ctx, p2pk_bench_report *r);
/* Tests: when > 0, the Nth device or pinned allocation of the run fails as
 * if memory ran out (counts down). */
extern int p2pk_bench_fail_alloc;
/* Tests: when > 0, the Nth sweep measurement of the run fails as a kernel
 * that cannot launch would (counts down); -1: every one fails. */
extern int p2pk_bench_fail_sweep;

#endif
