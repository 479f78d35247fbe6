/* SPDX-License-Identifier: BSD-3-Clause */
/* p2pkit doctor: is this machine moving data between GPUs as fast as it can,
 * and if not, why?
 *
 * Checks are data driven: each one reads its inputs (the topology model, a
 * sysfs root, measured rates, a parsed NCCL log) and appends findings
 * {level, check, subject, one-sentence reason, suggested action}. The
 * analysis is pure, so CPU tests feed recorded machines; only run.c, probe.c
 * and nccl_probe.c touch GPUs or processes. */
#ifndef P2PK_DOCTOR_H
#define P2PK_DOCTOR_H

#include <stddef.h>
#include <stdio.h>

#include "p2pkit.h"

struct p2pkit_topo;
struct p2pk_nccl_log;

typedef enum {
  P2PK_DOC_OK = 0,
  P2PK_DOC_WARN = 1,
  P2PK_DOC_FAIL = 2,
  P2PK_DOC_SKIP = 3 /* could not check; says why. Does not change the exit code. */
} p2pk_doc_level;

typedef struct {
  p2pk_doc_level level;
  char check[24];   /* "driver", "host", "iommu", "pcie-link", "nvlink", "p2p", "acs", ... */
  char subject[24]; /* "system", "GPU0", "GPU0-GPU1", "GPU0->GPU1", "NCCL" */
  char reason[512]; /* one sentence */
  char action[384]; /* what to do about it; "" when nothing */
  double value;     /* bandwidth findings: measured GB/s; NaN otherwise */
  double expected;  /* bandwidth findings: expected GB/s; NaN otherwise */
} p2pk_finding;

typedef struct {
  int n, cap;
  p2pk_finding *v;
  int oom; /* an append failed for lack of memory */
} p2pk_findings;

void p2pk_findings_init(p2pk_findings *f);
void p2pk_findings_free(p2pk_findings *f);
/* Append one finding; returns it (for value/expected) or NULL when out of
 * memory (f->oom is set). `action` may be NULL. */
p2pk_finding *p2pk_finding_add(p2pk_findings *f, p2pk_doc_level level, const char *check,
                               const char *subject, const char *action, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
const char *p2pk_doc_level_name(p2pk_doc_level level);
/* 0 when every finding is OK or SKIP, 1 when the worst is WARN, 2 on FAIL. */
int p2pk_doctor_exit_code(const p2pk_findings *f);
/* Count of findings at `level`. */
int p2pk_findings_count(const p2pk_findings *f, p2pk_doc_level level);
/* The first finding with this check and subject, or NULL. */
const p2pk_finding *p2pk_findings_find(const p2pk_findings *f, const char *check,
                                       const char *subject);

/* --- inputs of the analysis ---------------------------------------------- */

/* One measured copy rate (the bandwidth probe). */
typedef struct {
  int src, dst;
  char method[24];  /* p2pkit_path_name() */
  double gbps;      /* best of the timed batches; 0 when the copy failed */
  int verified;     /* 1 the data arrived intact, 0 it did not, -1 not checked */
  char error[192];  /* "" when the copy worked */
} p2pk_doc_bw;

/* One GPU's link to host memory (the host-link probe): pinned host memory
 * to the GPU, back, and both at once, as the staged fallback uses it. */
typedef struct {
  int gpu;
  double h2d_gbps, d2h_gbps; /* one way each, the median of the timed copies; 0 failed */
  double both_gbps;          /* both ways at once, the two directions summed */
  int verified;              /* 1 the bytes came back intact, 0 they did not, -1 not checked */
  char error[192];           /* "" when the copies worked */
} p2pk_doc_host_bw;

/* A GPU's PCIe link re-read while copies keep it busy (GPUs lower the link
 * speed when idle to save power, so a low reading at rest proves nothing). */
typedef struct {
  int measured; /* 1 when re-read under load */
  int gen, width;
} p2pk_doc_link_load;

typedef struct {
  const struct p2pkit_topo *topo; /* NULL: no driver / discovery failed */
  const char *topo_error;         /* then why, in words */
  int live;                       /* 1: this machine, now; 0: a recorded one */
  const char *sysfs_root;         /* "" or NULL: the real /sys and /proc */
  const char *sysfs_missing;      /* non-NULL: no /sys or /proc belongs to this machine (a
                                     recorded one without P2PKIT_SYSFS_ROOT); says why */
  const p2pk_doc_link_load *load; /* [topo->ngpus], or NULL when not measured */
  const p2pk_doc_bw *bw;          /* bandwidth probe results, NULL when not run */
  int nbw;
  const char *bw_skip;            /* why the probe did not run (when bw is NULL) */
  const p2pk_doc_host_bw *host_bw; /* host-link probe results [nhost_bw], NULL when not run */
  int nhost_bw;
  const char *host_bw_skip;       /* why the host-link probe did not run */
  const struct p2pk_nccl_log *nccl; /* parsed NCCL log, NULL when NCCL did not run */
  const char *nccl_skip;          /* why NCCL did not run (nccl NULL, no error) */
  const char *nccl_error;         /* NCCL ran and failed: what it said */
} p2pk_doc_input;

/* --- the checks (checks.c), in the order the runner prints them ---------- */

void p2pk_doc_check_system(const p2pk_doc_input *in, p2pk_findings *f);
void p2pk_doc_check_gpus(const p2pk_doc_input *in, p2pk_findings *f);
void p2pk_doc_check_pairs(const p2pk_doc_input *in, p2pk_findings *f);
/* gdr.c: GPUDirect RDMA for jobs across machines: whether a NIC can reach
 * GPU memory (peer-memory module or dma-buf) and, per GPU, its nearest NIC
 * and the path's class; one SKIP line where there is no RDMA NIC. */
void p2pk_doc_check_gdr(const p2pk_doc_input *in, p2pk_findings *f);
/* Per GPU, the host-link probe against its PCIe link's expected rate. */
void p2pk_doc_check_host_links(const p2pk_doc_input *in, p2pk_findings *f);
void p2pk_doc_check_bandwidth(const p2pk_doc_input *in, p2pk_findings *f);
void p2pk_doc_check_nccl(const p2pk_doc_input *in, p2pk_findings *f);
/* settings.c: this process's P2PKIT_* settings that keep p2pkit off its fast
 * paths (live only: a recorded machine's settings are not ours). */
void p2pk_doc_check_settings(const p2pk_doc_input *in, p2pk_findings *f);
/* All of the above, in order. P2PKIT_ERR_NO_MEMORY when findings could not
 * be stored. */
p2pkit_status_t p2pk_doctor_analyze(const p2pk_doc_input *in, p2pk_findings *f);

/* Verdict threshold of the bandwidth probes: OK at this fraction of the
 * expected rate or more (the host link: each way alone, and both ways
 * together against twice the one-way rate). */
#define P2PK_DOC_BW_OK_FRACTION 0.7

/* The NCCL_P2P_LEVEL value that lets NCCL use P2P on this pair: "NVL",
 * "PIX", "PXB", "PHB" (also nvidia-smi's NODE) or "SYS". */
const char *p2pk_doc_nccl_level(const p2pkit_pair_t *pair);

/* --- output (findings.c) --------------------------------------------------- */

/* `title`: one line naming the machine ("live: host", "recorded: file"). */
void p2pk_doctor_print_text(const p2pk_findings *f, const char *title, FILE *out);
void p2pk_doctor_print_json(const p2pk_findings *f, const char *title, FILE *out);

/* --- the live runner (run.c) ---------------------------------------------- */

typedef struct {
  const char *from;      /* recorded topology file; NULL: discover this machine */
  const char *nccl_log;  /* analyse this recorded NCCL debug log instead of running NCCL */
  const char *dump_nccl; /* write NCCL's topology XML here (for NCCL_TOPO_FILE) */
  const char *save_nccl_log; /* keep the NCCL ranks' debug log here */
  int probe;             /* run the bandwidth probe (live only) */
  int nccl;              /* run NCCL (live only, needs libnccl.so.2) */
  size_t probe_bytes;    /* per copy; 0: 64 MiB */
  int nccl_timeout_s;    /* 0: 60 */
  const char *self_exe;  /* this program, re-run as `doctor --nccl-probe`; NULL: /proc/self/exe */
} p2pk_doc_opts;

/* --- live measurements (probe.c, nccl_probe.c): need GPUs ----------------- */

/* Time copies between every ordered pair of GPUs with `p2pkit bench`'s engine
 * (p2pkit_copy over the P2P copy engine and SM push where P2P is allowed, the
 * staged pipeline always), `bytes` each, data checked. *bw_p is malloc'ed
 * (free it). Fails when the run cannot be set up (memory, context). */
p2pkit_status_t p2pk_doc_probe(p2pkit_topo_t topo, size_t bytes, p2pk_doc_bw **bw_p, int *n_p);
/* Time each GPU's link to host memory: pinned host buffers (as the staged
 * fallback pins them) copied to the GPU, back, and both ways at once, `bytes`
 * a copy, the round trip's bytes checked. out[] has topo->ngpus entries; a
 * GPU whose copies failed has its error there. */
void p2pk_doc_probe_host(const struct p2pkit_topo *t, size_t bytes, p2pk_doc_host_bw *out);
/* Re-read the PCIe link of each GPU whose link reads below its maximum, while
 * host-to-device copies keep it busy. load[] has topo->ngpus entries. */
void p2pk_doc_link_under_load(const struct p2pkit_topo *t, p2pk_doc_link_load *load);

/* The outcome of the NCCL all-reduce run in child processes. */
typedef struct {
  int ran;          /* the all-reduce ran to completion and checked out */
  char skip[256];   /* why it did not run (no NCCL library), else "" */
  char error[512];  /* why it failed, else "" */
  char *log;        /* the ranks' NCCL_DEBUG=INFO logs, concatenated (malloc'ed) */
  size_t log_len;
} p2pk_doc_nccl_run;

/* Run one process per GPU (`self_exe doctor --nccl-probe RANK N DIR`), each
 * an NCCL rank of one all-reduce, with NCCL_DEBUG=INFO written to files;
 * kill them after timeout_s. Fails only when it cannot start them. */
p2pkit_status_t p2pk_doc_nccl_spawn(const char *self_exe, int ngpus, int timeout_s,
                                    p2pk_doc_nccl_run *out);
void p2pk_doc_nccl_run_free(p2pk_doc_nccl_run *r);
/* The child's side: argv = {RANK, N, DIR}. Returns the exit code: 0 ok,
 * 3 NCCL not available, 1 failure (printed on stdout). */
int p2pk_doc_nccl_child(int argc, char **argv);

/* Gather the inputs (topology, link under load, probe, NCCL) and analyse.
 * `title` receives the line naming the machine. Fails only on what stops the
 * doctor itself: out of memory, an unreadable --from / --nccl-log file, or
 * an output (--dump-nccl, --save-nccl-log) that could not be written, which
 * also sets *output_failed (the CLI's exit code for a write, not an input). */
p2pkit_status_t p2pk_doctor_run(const p2pk_doc_opts *o, p2pk_findings *f, char *title,
                                size_t title_len, int *output_failed);

#endif
