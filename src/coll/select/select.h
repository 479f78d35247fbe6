/* SPDX-License-Identifier: BSD-3-Clause */
/* The selector: which path carries a call, and with what algorithm,
 * protocol and grid. One table of rules (select.c's `rules`), read in
 * order, first match wins; each rule is keyed by the call (collective or
 * send/recv, one process or a process per GPU, under capture or not, in a
 * group or not, P2P or staged, in place or not, rank count) and a size
 * from which it applies, taken from a table of thresholds (`thresholds`:
 * the P2PKIT_* setting that moves it and its defaults by context and rank
 * count). The kernel paths take their algorithm, protocol and grid from
 * the algorithm table (algo.h) with the same settings on top. Every rank
 * of a communicator resolves the tables alike at init (p2pk_sel_init,
 * p2pk_sel_fill), so every rank decides alike. No CUDA here: the CPU tests
 * dump every decision, `p2pkit perf --explain` prints the tables. */
#ifndef P2PK_SELECT_H
#define P2PK_SELECT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "coll/select/algo.h"
#include "coll/kernels/coll_dev.h"
#include "coll/select/nccl_use.h"

/* Send/recv, beside the collectives' P2PK_COLL_* codes. */
#define P2PK_SENDRECV P2PK_COLL_KINDS
#define P2PK_KINDS (P2PK_COLL_KINDS + 1)

/* The paths (path.h). Issue-by-issue additions take the next numbers. */
enum {
  P2PK_PATH_LOCAL = 0,  /* one rank: a copy on its stream */
  P2PK_PATH_P2P,        /* the kernels over P2P */
  P2PK_PATH_STAGED,     /* the kernels through host memory */
  P2PK_PATH_CE_EVENTS,  /* one process, every rank's call in a group: copy engines ordered by events */
  P2PK_PATH_CE_SLOTS,   /* copy engines through landing slots (process per GPU; one process under capture) */
  P2PK_PATH_CE_DIRECT,  /* one process under capture, in a group: copy engines into the outputs */
  P2PK_PATH_CE_STAGED,  /* without P2P: all-reduce on the copy engines through host memory */
  P2PK_PATH_NCCL,       /* NCCL's communicator over every rank (path_nccl.c) */
  P2PK_PATH_HIER,       /* spanning hosts: p2pkit inside each host, NCCL across (path_hier.c) */
  P2PK_PATHS
};
const char *p2pk_path_name(int path);
/* What moves the data, in words for the INFO log: "kernel", "copy engine",
 * "staged kernel", "staged copy engine", "NCCL", "hierarchical", "local copy". */
const char *p2pk_path_family(int path);
const char *p2pk_kind_name(int kind); /* collectives as plan.c's names, "send_recv" */
int p2pk_kind_parse(const char *name);  /* the kind so named, underscores optional; -1 */

/* The sizes a rule applies from, per kind (0: never): */
enum {
  P2PK_FROM_ALWAYS = -1,
  P2PK_FROM_EVENTS = 0, /* one process, eagerly, every rank's call in one group */
  P2PK_FROM_DIRECT,     /* one process under capture, in one group, straight into the outputs */
  P2PK_FROM_SLOTS,      /* process per GPU, eagerly */
  P2PK_FROM_GRAPH,      /* under capture, through the landing slots */
  P2PK_FROM_NCCL,       /* P2PKIT_NCCL=auto: NCCL where no measured p2pkit row beats it */
  P2PK_FROM_N
};

/* What the selector reads of a communicator, fixed at init (and when
 * p2pk_comm_set_force or p2pkit_comm_set_max_blocks change it). */
typedef struct {
  int nranks, per_gpu, staged;
  int group_n;        /* one process: ranks of its init_all (launch threads need 2) */
  int launch_threads; /* P2PKIT_LAUNCH_THREADS */
  int queues;         /* CUDA_DEVICE_MAX_CONNECTIONS as CUDA reads it */
  int max_blocks;     /* every kernel's grid cap (P2PKIT_MAX_BLOCKS, p2pkit_comm_set_max_blocks) */
  p2pk_algo_table table;
  p2pk_algo_force force;
  p2pk_algo_geom geom;
  size_t stage_p2p_box; /* staged: bytes of a send/recv mailbox */
  size_t rooted_min;    /* P2PKIT_ROOTED_TWOSHOT_MIN (0 staged) */
  size_t self_ce;       /* P2PKIT_BCAST_SELF_CE (0 staged) */
  size_t from[P2PK_FROM_N][P2PK_KINDS];
  int nccl;  /* P2PK_NCCL_*: what NCCL may carry */
  int hosts; /* hosts the communicator spans (1: one machine) */
  int hier;  /* spanning hosts with the same number of ranks (at least 2) on each: the
                hierarchical path carries all-reduce, reduce-scatter and all-gather */
  int premul; /* NCCL has a pre-multiplied sum (2.11 and later): the hierarchical path's avg */
} p2pk_sel;

/* One call as the selector sees it. */
typedef struct {
  int kind;      /* P2PK_COLL_* or P2PK_SENDRECV */
  int capture;   /* its stream is being captured; -1: not asked (p2pk_decide says when it matters) */
  int grouped;   /* in a group; one process: every rank's call of it there (send/recv: both ends) */
  int in_place;
  int grid_cap;  /* this call's grid cap (0: none; p2pk_all_reduce_capped) */
  size_t bytes;  /* one rank's share (send/recv: the message) */
  int nccl_type; /* its data type only NCCL carries (int8, uint32, uint64, fp8) */
  int peers;     /* P2PK_PEERS_*: how a one-process collective meets its peers' calls */
  int avg;       /* P2PK_AVG_*: an average, and of what type */
} p2pk_sel_key;

/* How a call of a one-process communicator meets its peers' calls (a
 * process per GPU: always as the rules say). */
enum {
  P2PK_PEERS_RULES = 0, /* the rules alone: every rank's call together (their set), a send or
                           receive, `p2pkit perf --explain`, the tests */
  P2PK_PEERS_QUEUED,    /* in the caller's group, its peers' calls maybe still to come */
  P2PK_PEERS_ALONE,     /* on its own, without its peers' calls (so decided as not grouped) */
  P2PK_PEERS_MIXED      /* every rank's call there, but some streams capture and some do not */
};
/* An average: none (or all-gather), of a floating type, of an integer type. */
enum { P2PK_AVG_NONE = 0, P2PK_AVG_FLOAT = 1, P2PK_AVG_INT = 2 };

enum {
  P2PK_SEL_ROOTED = 1,        /* broadcast or reduce in its rooted two-shot form */
  P2PK_SEL_SELF_CE = 2,       /* a broadcast root out of place copies its own buffer by copy engine */
  P2PK_SEL_LAUNCH_THREAD = 4, /* one process in a group: made by a launch thread */
  P2PK_SEL_NCCL_APART = 8,    /* the rules gave it to NCCL, which cannot take one rank's call of
                                 a one-process communicator without its peers': the kernels */
  P2PK_SEL_AVG_FLAT = 16      /* spanning hosts, an average the hierarchical path cannot divide
                                 once (an integer type, or NCCL without a pre-multiplied sum):
                                 NCCL over every rank */
};

typedef struct {
  int path;
  p2pk_algo_choice ch; /* kernel paths: algorithm, protocol, grid, chunk */
  unsigned flags;      /* P2PK_SEL_* */
  int rule;            /* which rule decided (p2pk_sel_rule_text) */
} p2pk_decision;

/* A communicator's selector from its rank count, mode, transport, group,
 * settings and table (force NULL: nothing forced). Then the thresholds
 * (p2pk_sel_fill), once the layout says whether the landing slots
 * (slots: over P2P; stage_slots: process per GPU without P2P) exist;
 * p2pk_sel_wants_slots says whether they should (over P2P, the settings
 * alone). */
void p2pk_sel_init(p2pk_sel *s, int nranks, int per_gpu, int staged, int group_n,
                   const p2pk_algo_table *t, const p2pk_algo_force *f);
/* What NCCL may carry (P2PK_NCCL_*) and the hosts spanned (hier: the
 * layout the hierarchical path takes), between p2pk_sel_init and
 * p2pk_sel_fill (p2pk_sel_init leaves NCCL off, one host). */
void p2pk_sel_set_hosts(p2pk_sel *s, int nccl, int hosts, int hier);
int p2pk_sel_wants_slots(const p2pk_sel *s);
void p2pk_sel_fill(p2pk_sel *s, int slots, int stage_slots);
/* The size from which a copy-engine threshold of `kind` applies in context
 * ctx (P2PK_FROM_EVENTS: one process eagerly; _SLOTS: process per GPU;
 * _GRAPH: under capture) from the settings alone, as every rank must
 * share it (0: never). */
size_t p2pk_sel_setting(const p2pk_sel *s, int kind, int ctx);

/* The one decision of a call: its path, and on the kernels their
 * algorithm, protocol, grid and flags; every call of the library is
 * decided here (group.c asks, `p2pkit perf --explain` prints). Returns
 *   P2PK_DECIDED       *d holds it;
 *   P2PK_DECIDE_ASK    k->capture is -1 and the decision depends on it: the
 *                      caller asks CUDA, sets it and asks again;
 *   P2PK_DECIDE_WAIT   (peers QUEUED) a one-process collective that waits
 *                      for its peers' calls: from the size where the copy
 *                      engines may take every rank's at once, or where NCCL
 *                      carries it (NCCL takes them in one group of its own);
 *   P2PK_DECIDE_NCCL_APART, _NCCL_MIXED: a type only NCCL carries, in a call
 *                      NCCL cannot take (one rank's without its peers', or
 *                      its peers' streams capturing unlike its own): refused.
 * What group.c once overrode is the key's: peers ALONE or QUEUED and the
 * rules saying NCCL on one process, the kernels (P2PK_SEL_NCCL_APART);
 * peers MIXED, the kernels by each rank's own capture; an average the
 * hierarchical path cannot divide once, NCCL over every rank
 * (P2PK_SEL_AVG_FLAT). The rules are read once (twice when asked about
 * the capture status). */
enum { P2PK_DECIDED, P2PK_DECIDE_ASK, P2PK_DECIDE_WAIT, P2PK_DECIDE_NCCL_APART,
       P2PK_DECIDE_NCCL_MIXED };
int p2pk_decide(const p2pk_sel *s, const p2pk_sel_key *k, p2pk_decision *d);

/* The rules as data (select.c's table, in order; explain and the tests
 * read them): each condition P2PK_RULE_ANY or one value. */
enum { P2PK_RULE_ANY = 0 };
enum { P2PK_RULE_ONE = 1, P2PK_RULE_PER_GPU = 2 };  /* mode */
enum { P2PK_RULE_EAGER = 1, P2PK_RULE_GRAPH = 2 };  /* capture */
enum { P2PK_RULE_ALONE = 1, P2PK_RULE_GROUP = 2 };  /* grouped */
enum { P2PK_RULE_P2P = 1, P2PK_RULE_SHM = 2 };      /* transport */
enum { P2PK_RULE_OUT = 1, P2PK_RULE_IN = 2 };       /* in place */
enum { P2PK_RULE_NC_AUTO = 1, P2PK_RULE_NC_ALL = 2, P2PK_RULE_NC_ON = 3 }; /* P2PKIT_NCCL */
enum { P2PK_RULE_H_ONE = 1, P2PK_RULE_H_SPAN = 2, P2PK_RULE_H_HIER = 3 };  /* hosts */
#define P2PK_RULE_KERNEL (-1) /* path: the kernels of the communicator's transport */
#define P2PK_RULE_NO_LT 1u    /* flags: no launch thread */
/* A rule matches a call of one of its kinds in its mode, capture, group,
 * transport and placement from its size on (`from`, per kind and resolved
 * for the communicator: 0 never). The first rule that matches decides. */
typedef struct {
  uint32_t kinds; /* bit per P2PK_COLL_* and P2PK_SENDRECV */
  uint8_t mode, capture, grouped, xport, in_place;
  int8_t from;      /* P2PK_FROM_* */
  uint8_t one_rank; /* only for a communicator of one rank */
  int path;         /* P2PK_PATH_* or P2PK_RULE_KERNEL */
  unsigned flags;
  const char *why;
  uint8_t nccl;       /* what P2PKIT_NCCL must allow (ANY: whatever) */
  uint8_t hosts;      /* one host, spanning hosts, spanning in the hierarchical layout */
  uint8_t nccl_type;  /* only a data type that NCCL alone carries */
  uint8_t rmin, rmax; /* rank counts (0: any) */
} p2pk_rule;
int p2pk_sel_rule_count(void);
const p2pk_rule *p2pk_sel_rule_at(int i);

/* The rule's words (why), and its setting when a threshold moves it. */
const char *p2pk_sel_rule_text(int rule);
const char *p2pk_sel_rule_setting(const p2pk_sel *s, int rule, int kind);
/* explain.c: the decision in one line ("kernel oneshot/ll 2x256 c0 lt", "ce-slots"). */
int p2pk_decision_text(const p2pk_decision *d, char *out, size_t len);
/* A call's key in words ("all_reduce of 4096 B, 8 ranks, one process,
 * eager, alone, P2P, out of place"), and one decision logged at INFO
 * (P2PKIT_DEBUG=INFO, subsystem COLL): the key, the decision, the rule
 * (numbered as p2pk_sel_explain prints them) and the setting that moves
 * its threshold. */
int p2pk_sel_key_text(const p2pk_sel *s, const p2pk_sel_key *k, char *out, size_t len);
void p2pk_sel_log(const p2pk_sel *s, int rank, const p2pk_sel_key *k, const p2pk_decision *d);
/* explain.c: the rules and thresholds this selector resolved, and the
 * algorithm table's rows for its rank count (p2pkit perf --explain); then
 * the decision for a call of `kind` (a name as p2pk_kind_name's) of each
 * of the n sizes (one rank's bytes), alone and in a group, out of place
 * and in place, eager or under capture. */
void p2pk_sel_explain(const p2pk_sel *s, FILE *f);
void p2pk_sel_explain_calls(const p2pk_sel *s, int kind, const size_t *bytes, int n, int capture,
                            FILE *f);

/* The kernel paths' choices. A collective of `block` bytes per rank
 * (staged: its chunk stream covers `segs` shares) under grid cap `cap`
 * (0: none; staged ignores it): the table and settings, then the grid rule
 * (two blocks per SM for large calls). */
void p2pk_sel_choose(const p2pk_sel *s, int kind, size_t block, int cap, p2pk_algo_choice *ch);
void p2pk_sel_kernel(const p2pk_sel *s, int kind, size_t block, int cap, p2pk_algo_choice *ch);
/* Does a broadcast or reduce of `block` bytes take the rooted two-shot
 * (coll_dev.h's p2pk_ts_shard)? P2PKIT_ALGO=twoshot: always (any rank
 * count; P2PKIT_ALGO otherwise: never); else on more than 2 ranks over
 * P2P from P2PKIT_ROOTED_TWOSHOT_MIN. */
int p2pk_sel_rooted(const p2pk_sel *s, int kind, size_t block);
/* One send or receive of `bytes` in the kernel: grid, threads, chunk
 * (from the size alone, so both ends agree; capped so every block of a
 * group's operations is resident at once). */
void p2pk_sel_p2p_op(const p2pk_sel *s, size_t bytes, int cap, p2pk_algo_choice *ch);
/* The grid cap of a kernel launched now over P2P: the smaller of the
 * call's and the communicator's that are set; 0: none (staged: none). */
int p2pk_sel_cap(const p2pk_sel *s, int call_cap);

/* The hardware queues CUDA gives a GPU (CUDA_DEVICE_MAX_CONNECTIONS, else
 * its 8), and whether the copy-engine paths that wait on other ranks'
 * flags on several streams may run (eagerly, or under capture): 8 queues,
 * and under capture at most 2 ranks (docs/decisions/copy-engine-queues.md). */
int p2pk_ce_queues(void);
#define P2PK_CE_QUEUES 8
int p2pk_sel_waits_ok(const p2pk_sel *s, int capture);

#endif
