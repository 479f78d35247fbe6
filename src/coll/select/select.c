/* SPDX-License-Identifier: BSD-3-Clause */
/* The selector (select.h): the thresholds, the rules, the kernel choices. */
#include "coll/select/select.h"

#include <stdlib.h>
#include <string.h>

#include "coll/kernels/plan.h"
#include "core/log.h"
#include "core/param.h"

#define MIB(x) ((size_t)(x) << 20)
#define PARAM SIZE_MAX /* the setting's own default (core/param.c) */

static const char *const path_names[P2PK_PATHS] = {
    "local", "p2p-kernel", "staged-kernel", "ce-events", "ce-slots", "ce-direct", "ce-staged",
    "nccl", "hierarchical"};

const char *p2pk_path_name(int path) {
  return path >= 0 && path < P2PK_PATHS ? path_names[path] : "?";
}

const char *p2pk_path_family(int path) {
  static const char *const families[P2PK_PATHS] = {
      [P2PK_PATH_LOCAL] = "local copy",          [P2PK_PATH_P2P] = "kernel",
      [P2PK_PATH_STAGED] = "staged kernel",      [P2PK_PATH_CE_EVENTS] = "copy engine",
      [P2PK_PATH_CE_SLOTS] = "copy engine",      [P2PK_PATH_CE_DIRECT] = "copy engine",
      [P2PK_PATH_CE_STAGED] = "staged copy engine", [P2PK_PATH_NCCL] = "NCCL",
      [P2PK_PATH_HIER] = "hierarchical"};
  return path >= 0 && path < P2PK_PATHS ? families[path] : "?";
}

const char *p2pk_kind_name(int kind) {
  return kind == P2PK_SENDRECV ? "send_recv" : p2pk_coll_name(kind);
}

/* Equal but for underscores ("alltoall", "all_to_all"). */
static int same_name(const char *a, const char *b) {
  for (;; a++, b++) {
    while (*a == '_') a++;
    while (*b == '_') b++;
    if (*a != *b) return 0;
    if (!*a) return 1;
  }
}

int p2pk_kind_parse(const char *name) {
  for (int k = 0; k < P2PK_KINDS; k++)
    if (same_name(name, p2pk_kind_name(k))) return k;
  return -1;
}

/* ------------------------------------------------------------ thresholds -- */

enum { X_P2P = 1, X_SHM = 2 }; /* transports a row holds for */
enum { T_KFORCE = 1, T_QUEUES = 2, T_ANY_RANKS = 4 };

/* Where a copy-engine path takes over: per collective, context
 * (P2PK_FROM_EVENTS: one process eagerly, in a group; _SLOTS: process per
 * GPU; _GRAPH: under capture) and transport, the setting that moves it and
 * its defaults when the setting is not given, on 2 ranks and on more (a
 * setting given holds for every rank count). T_KFORCE: a kernel setting
 * (P2PKIT_ALGO, _PROTO, P2PKIT_COLL_*) turns it off; T_QUEUES: it waits
 * on other ranks' flags on several streams (p2pk_sel_waits_ok). Measured
 * on 2x H200 (docs/decisions/copy-engine-thresholds.md); with more ranks
 * only one process's eager all-gather and all-to-all from 64 MiB (4x H200),
 * the rest when given. */
typedef struct {
  int kind, ctx, xport;
  const char *setting;
  size_t two, more;
  unsigned flags;
} threshold_row;

#define KQ (T_KFORCE | T_QUEUES)
static const threshold_row thresholds[] = {
    {P2PK_COLL_ALL_REDUCE, P2PK_FROM_EVENTS, X_P2P, "P2PKIT_CE_ALLREDUCE_MIN", PARAM, 0, T_KFORCE},
    {P2PK_COLL_ALL_REDUCE, P2PK_FROM_SLOTS, X_P2P, "P2PKIT_CE_ALLREDUCE_MIN", MIB(256), 0, KQ},
    {P2PK_COLL_ALL_REDUCE, P2PK_FROM_GRAPH, X_P2P, "P2PKIT_CE_ALLREDUCE_MIN", MIB(512), 0, KQ},
    {P2PK_COLL_ALL_REDUCE, P2PK_FROM_EVENTS, X_SHM, "P2PKIT_STAGED_CE_MIN", PARAM, PARAM, T_ANY_RANKS},
    {P2PK_COLL_ALL_REDUCE, P2PK_FROM_SLOTS, X_SHM, "P2PKIT_STAGED_CE_MIN", PARAM, PARAM,
     T_QUEUES | T_ANY_RANKS},
    /* The broadcast eagerly in one process: its kernel settings do not
     * take it off the copy engines. */
    {P2PK_COLL_BROADCAST, P2PK_FROM_EVENTS, X_P2P, "P2PKIT_BCAST_CE_MIN", PARAM, 0, 0},
    {P2PK_COLL_BROADCAST, P2PK_FROM_SLOTS, X_P2P, "P2PKIT_BCAST_CE_MIN", MIB(16), 0, KQ},
    {P2PK_COLL_BROADCAST, P2PK_FROM_GRAPH, X_P2P, "P2PKIT_BCAST_CE_MIN", MIB(128), 0, KQ},
    {P2PK_COLL_REDUCE, P2PK_FROM_EVENTS, X_P2P, "P2PKIT_CE_REDUCE_MIN", PARAM, 0, T_KFORCE},
    {P2PK_COLL_REDUCE, P2PK_FROM_SLOTS, X_P2P, "P2PKIT_CE_REDUCE_MIN", MIB(64), 0, KQ},
    {P2PK_COLL_REDUCE, P2PK_FROM_GRAPH, X_P2P, "P2PKIT_CE_REDUCE_MIN", MIB(128), 0, KQ},
    {P2PK_COLL_ALL_GATHER, P2PK_FROM_EVENTS, X_P2P, "P2PKIT_CE_ALL_GATHER_MIN", PARAM, MIB(64), T_KFORCE},
    {P2PK_COLL_ALL_GATHER, P2PK_FROM_SLOTS, X_P2P, "P2PKIT_CE_ALL_GATHER_MIN", MIB(256), 0, KQ},
    {P2PK_COLL_ALL_GATHER, P2PK_FROM_GRAPH, X_P2P, "P2PKIT_CE_ALL_GATHER_MIN", MIB(64), 0, KQ},
    {P2PK_COLL_REDUCE_SCATTER, P2PK_FROM_EVENTS, X_P2P, "P2PKIT_CE_REDUCE_SCATTER_MIN", PARAM, 0,
     T_KFORCE},
    {P2PK_COLL_REDUCE_SCATTER, P2PK_FROM_SLOTS, X_P2P, "P2PKIT_CE_REDUCE_SCATTER_MIN", MIB(64), 0, KQ},
    {P2PK_COLL_REDUCE_SCATTER, P2PK_FROM_GRAPH, X_P2P, "P2PKIT_CE_REDUCE_SCATTER_MIN", MIB(128), 0, KQ},
    {P2PK_COLL_ALL_TO_ALL, P2PK_FROM_EVENTS, X_P2P, "P2PKIT_CE_ALL_TO_ALL_MIN", PARAM, MIB(64), T_KFORCE},
    {P2PK_COLL_ALL_TO_ALL, P2PK_FROM_SLOTS, X_P2P, "P2PKIT_CE_ALL_TO_ALL_MIN", MIB(256), 0, KQ},
    {P2PK_COLL_ALL_TO_ALL, P2PK_FROM_GRAPH, X_P2P, "P2PKIT_CE_ALL_TO_ALL_MIN", MIB(32), 0, KQ},
    /* Send/recv: one process eagerly by events (both ends in a group),
     * process per GPU through the landing slots, one process under capture
     * straight into the receive buffer. */
    {P2PK_SENDRECV, P2PK_FROM_EVENTS, X_P2P, "P2PKIT_SENDRECV_CE_MIN", PARAM, PARAM, T_ANY_RANKS},
    {P2PK_SENDRECV, P2PK_FROM_SLOTS, X_P2P, "P2PKIT_SENDRECV_CE_MIN", MIB(256), 0, KQ},
    {P2PK_SENDRECV, P2PK_FROM_GRAPH, X_P2P, "P2PKIT_SENDRECV_CE_MIN", MIB(64), 0, KQ},
};
#undef KQ

/* P2PKIT_NCCL=auto on one host: NCCL from these sizes (one rank's share)
 * where 3-4 ranks were measured slower than NCCL (4x H200, NCCL 2.28.3,
 * bench/baselines/h200x4.json; docs/decisions/nccl-path-rows.md): the
 * all-reduce from 2 MiB (0.81-0.96x), broadcast and reduce from 4 MiB
 * (0.34-0.65x from 8 MiB; 2 MiB still 1.01-2.04x), reduce-scatter from
 * 4 MiB shares (0.89-0.99x from 8 MiB shares; 2 MiB shares 1.35-1.45x).
 * All-gather and all-to-all tied NCCL (0.95-1.29x), send/recv beat it
 * eagerly: p2pkit keeps them. Two ranks: p2pkit was faster everywhere
 * (h200x2.json, 1.03x and up), so no row. More than 4 ranks on one host:
 * never measured, NCCL for every size. */
static const size_t nccl_34[P2PK_KINDS] = {
    [P2PK_COLL_ALL_REDUCE] = MIB(2), [P2PK_COLL_BROADCAST] = MIB(4), [P2PK_COLL_REDUCE] = MIB(4),
    [P2PK_COLL_REDUCE_SCATTER] = MIB(4)};

static const threshold_row *threshold_of(int kind, int ctx, int staged) {
  const int x = staged ? X_SHM : X_P2P;
  for (size_t i = 0; i < sizeof thresholds / sizeof thresholds[0]; i++)
    if (thresholds[i].kind == kind && thresholds[i].ctx == ctx && (thresholds[i].xport & x))
      return &thresholds[i];
  return NULL;
}

int p2pk_ce_queues(void) {
  /* Read by CUDA when it makes the context: a number from 1 to 32, else
   * its default, 8. */
  const char *v = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  char *end = NULL;
  long q = v && *v ? strtol(v, &end, 10) : 0;
  if (!v || !*v || *end || q < 1) return 8;
  return q > 32 ? 32 : (int)q;
}

/* The copy-engine paths that wait on flags other ranks set keep such
 * waits, one-thread kernels, on several streams of one GPU at once, and
 * each needs the others to make progress. Streams share the GPU's hardware
 * queues, and a waiting kernel holds up whatever sits behind it on its
 * queue; a CUDA graph may put independent branches one after the other on
 * a stream of its own choosing. So these paths need 8 queues, and under
 * capture at most 2 ranks (docs/decisions/copy-engine-queues.md); else the
 * kernels (one kernel a call, which waits on nothing of its own GPU) carry
 * every size. */
int p2pk_sel_waits_ok(const p2pk_sel *s, int capture) {
  return s->queues >= P2PK_CE_QUEUES && (!capture || s->nranks <= 2);
}

static int kernel_forced(const p2pk_algo_force *f) {
  return f->algo >= 0 || f->proto >= 0 || f->blocks > 0 || f->threads > 0 || f->chunk > 0;
}

/* P2PKIT_NCCL=auto on one host: where NCCL takes over (0: never). A
 * kernel setting (P2PKIT_ALGO, _PROTO, _COLL_*) asks for the kernels:
 * the rows step aside. */
static size_t nccl_from(const p2pk_sel *s, int kind) {
  if (s->nccl != P2PK_NCCL_AUTO || s->hosts > 1 || s->nranks < 3 || kernel_forced(&s->force))
    return 0;
  return s->nranks > 4 ? 1 : nccl_34[kind];
}

size_t p2pk_sel_setting(const p2pk_sel *s, int kind, int ctx) {
  if (s->nranks < 2) return 0;
  const threshold_row *t = threshold_of(kind, ctx, s->staged);
  if (!t) return 0;
  if ((t->flags & T_QUEUES) && !p2pk_sel_waits_ok(s, ctx == P2PK_FROM_GRAPH)) return 0;
  if ((t->flags & T_KFORCE) && kernel_forced(&s->force)) return 0;
  const int set = p2pk_param_is_set(t->setting);
  if (!set && !(t->flags & T_ANY_RANKS) && s->nranks > 2)
    return t->more == PARAM ? p2pk_param_size(t->setting) : t->more;
  if (!set && t->two != PARAM) return t->two;
  return p2pk_param_size(t->setting);
}

/* The landing slots' thresholds, from the settings alone: process per GPU
 * through them eagerly (the broadcast's under capture), one process under
 * capture. */
static size_t slot_setting(const p2pk_sel *s, int kind) {
  if (kind == P2PK_SENDRECV)
    return p2pk_sel_setting(s, kind, s->per_gpu ? P2PK_FROM_SLOTS : P2PK_FROM_GRAPH);
  const int graph = !s->per_gpu || kind == P2PK_COLL_BROADCAST;
  return p2pk_sel_setting(s, kind, graph ? P2PK_FROM_GRAPH : P2PK_FROM_SLOTS);
}

int p2pk_sel_wants_slots(const p2pk_sel *s) {
  if (s->staged || s->nranks < 2) return 0;
  for (int k = 0; k < P2PK_KINDS; k++)
    if (slot_setting(s, k)) return 1;
  return 0;
}

static size_t larger(size_t a, size_t b) { return a > b ? a : b; }

/* Under capture, through the landing slots: with a process per GPU what
 * runs eagerly (the broadcast from its own threshold there too); one
 * process the all-reduce, reduce-scatter and reduce (the others go straight
 * into the outputs, in a group). */
static size_t graph_from(const p2pk_sel *s, int kind, size_t eager, size_t slots) {
  if (!p2pk_sel_waits_ok(s, 1) || s->staged) return 0;
  if (s->per_gpu) return kind == P2PK_COLL_BROADCAST && slots && eager ? larger(eager, slots) : eager;
  return kind == P2PK_COLL_ALL_REDUCE || kind == P2PK_COLL_REDUCE_SCATTER ||
                 kind == P2PK_COLL_REDUCE ? slots : 0;
}

void p2pk_sel_fill(p2pk_sel *s, int slots, int stage_slots) {
  for (int k = 0; k < P2PK_KINDS; k++) {
    const size_t ev = s->per_gpu ? 0 : p2pk_sel_setting(s, k, P2PK_FROM_EVENTS);
    const int have = s->staged ? stage_slots : slots;
    const size_t pg = s->per_gpu && have ? p2pk_sel_setting(s, k, P2PK_FROM_SLOTS) : 0;
    const size_t sl = slots && !s->staged ? slot_setting(s, k) : 0;
    s->from[P2PK_FROM_EVENTS][k] = ev;
    s->from[P2PK_FROM_SLOTS][k] = pg;
    s->from[P2PK_FROM_GRAPH][k] = k == P2PK_SENDRECV ? (p2pk_sel_waits_ok(s, 1) && !s->staged ? pg : 0)
                                                      : graph_from(s, k, pg, sl);
    /* One process under capture, every rank's call in a group: it waits
     * for the group's end from its eager threshold, then goes straight in
     * from the slots' (send/recv: both ends in the group). */
    const int direct = k == P2PK_COLL_ALL_REDUCE || k == P2PK_COLL_BROADCAST ||
                       k == P2PK_COLL_ALL_TO_ALL || k == P2PK_COLL_ALL_GATHER;
    s->from[P2PK_FROM_DIRECT][k] = s->per_gpu ? 0
                                   : k == P2PK_SENDRECV ? sl
                                   : direct && ev && sl ? larger(ev, sl) : 0;
    s->from[P2PK_FROM_NCCL][k] = nccl_from(s, k);
  }
}

void p2pk_sel_set_hosts(p2pk_sel *s, int nccl, int hosts, int hier) {
  s->nccl = nccl;
  s->hosts = hosts > 1 ? hosts : 1;
  s->hier = s->hosts > 1 && hier;
}

void p2pk_sel_init(p2pk_sel *s, int nranks, int per_gpu, int staged, int group_n,
                   const p2pk_algo_table *t, const p2pk_algo_force *f) {
  memset(s, 0, sizeof *s);
  s->nranks = nranks;
  s->per_gpu = per_gpu;
  s->staged = staged;
  s->group_n = per_gpu ? 0 : group_n;
  s->launch_threads = !per_gpu && p2pk_param_int("P2PKIT_LAUNCH_THREADS") != 0;
  s->queues = p2pk_ce_queues();
  s->max_blocks = (int)p2pk_param_int("P2PKIT_MAX_BLOCKS");
  if (t) s->table = *t;
  else p2pk_algo_table_default(&s->table);
  if (f) s->force = *f;
  else s->force = (p2pk_algo_force){-1, -1, 0, 0, 0};
  s->rooted_min = staged ? 0 : p2pk_param_size("P2PKIT_ROOTED_TWOSHOT_MIN");
  s->self_ce = staged ? 0 : p2pk_param_size("P2PKIT_BCAST_SELF_CE");
  s->hosts = 1;
}

/* ---------------------------------------------------------------- rules -- */

enum { ANY = P2PK_RULE_ANY, ONE = P2PK_RULE_ONE, PER_GPU = P2PK_RULE_PER_GPU }; /* mode */
enum { EAGER = P2PK_RULE_EAGER, GRAPH = P2PK_RULE_GRAPH };                  /* capture */
enum { ALONE = P2PK_RULE_ALONE, GROUP = P2PK_RULE_GROUP };                  /* grouped */
enum { P2P = P2PK_RULE_P2P, SHM = P2PK_RULE_SHM };                          /* transport */
enum { OUT = P2PK_RULE_OUT, IN = P2PK_RULE_IN };                            /* in place */
enum { KERNEL = P2PK_RULE_KERNEL };   /* path: the kernels of the transport */
enum { R_NO_LT = P2PK_RULE_NO_LT };   /* flags: no launch thread */

#define K(k) (1u << (k))
#define COLLS (K(P2PK_KINDS) - 1 - K(P2PK_SENDRECV))
#define ALL (K(P2PK_KINDS) - 1)

typedef p2pk_rule rule_t; /* select.h says what each column means */

enum { NC_ANY = 0, NC_AUTO = P2PK_RULE_NC_AUTO, NC_ALL = P2PK_RULE_NC_ALL, NC_ON = P2PK_RULE_NC_ON };
/* p2pkit's own rows: any NCCL setting, hosts, type and rank count (the
 * NCCL rules before them take what is NCCL's). */
#define ANYWHERE 0, 0, 0, 0, 0
enum { H_ANY = 0, H_ONE = P2PK_RULE_H_ONE, H_SPAN = P2PK_RULE_H_SPAN, H_HIER = P2PK_RULE_H_HIER };

/* NCCL's rules: every call (P2PKIT_NCCL=1), a type only NCCL carries,
 * spanning hosts, and P2PKIT_NCCL=auto where no measured p2pkit row beats
 * NCCL (docs/decisions/nccl-path-rows.md). */
#define R_NCCL_ALL                                                                              \
  {.kinds = ALL, .from = P2PK_FROM_ALWAYS, .path = P2PK_PATH_NCCL, .nccl = NC_ALL,              \
   .why = "P2PKIT_NCCL=1: every call through NCCL"}
#define R_NCCL_TYPE                                                                             \
  {.kinds = ALL, .from = P2PK_FROM_ALWAYS, .path = P2PK_PATH_NCCL, .nccl = NC_ON, .nccl_type = 1, \
   .why = "a data type only NCCL carries"}
#define R_HIER                                                                                  \
  {.kinds = K(P2PK_COLL_ALL_REDUCE) | K(P2PK_COLL_REDUCE_SCATTER) | K(P2PK_COLL_ALL_GATHER),    \
   .from = P2PK_FROM_ALWAYS, .path = P2PK_PATH_HIER, .hosts = H_HIER,                           \
   .why = "spanning hosts: p2pkit inside each host, NCCL across hosts among the ranks of one "  \
          "local index"}
#define R_SPAN                                                                                  \
  {.kinds = ALL, .from = P2PK_FROM_ALWAYS, .path = P2PK_PATH_NCCL, .hosts = H_SPAN,             \
   .why = "spanning hosts: NCCL over every rank (the collectives without a hierarchical form, "  \
          "uneven hosts, one rank per host)"}
#define R_NCCL_MANY                                                                             \
  {.kinds = ALL, .from = P2PK_FROM_NCCL, .path = P2PK_PATH_NCCL, .nccl = NC_AUTO, .hosts = H_ONE, \
   .rmin = 5, .why = "more than 4 ranks on one host: p2pkit never measured there against NCCL"}
#define R_NCCL_34                                                                               \
  {.kinds = ALL, .from = P2PK_FROM_NCCL, .path = P2PK_PATH_NCCL, .nccl = NC_AUTO, .hosts = H_ONE, \
   .rmin = 3, .rmax = 4, .why = "3-4 ranks: NCCL measured faster from this size (4x H200)"}

static const rule_t rules[] = {
    {ALL, ANY, ANY, ANY, ANY, ANY, P2PK_FROM_ALWAYS, 1, P2PK_PATH_LOCAL, 0,
     "one rank: its own copy", ANYWHERE},
    R_NCCL_ALL,
    R_NCCL_TYPE,
    R_HIER,
    R_SPAN,
    R_NCCL_MANY,
    R_NCCL_34,
    {K(P2PK_COLL_ALL_TO_ALL), ONE, ANY, GROUP, ANY, IN, P2PK_FROM_EVENTS, 0, KERNEL, R_NO_LT,
     "all-to-all in place: the copy engines would overwrite blocks not yet sent", ANYWHERE},
    {COLLS | K(P2PK_SENDRECV), ONE, EAGER, GROUP, P2P, ANY, P2PK_FROM_EVENTS, 0, P2PK_PATH_CE_EVENTS, 0,
     "one process, every rank's call in the group: copy engines ordered by events", ANYWHERE},
    {K(P2PK_COLL_ALL_REDUCE), ONE, EAGER, GROUP, SHM, ANY, P2PK_FROM_EVENTS, 0, P2PK_PATH_CE_STAGED, 0,
     "no P2P, one process, every rank's call in the group: copy engines through host memory", ANYWHERE},
    {K(P2PK_COLL_ALL_REDUCE) | K(P2PK_COLL_BROADCAST) | K(P2PK_COLL_ALL_TO_ALL) |
         K(P2PK_COLL_ALL_GATHER) | K(P2PK_SENDRECV),
     ONE, GRAPH, GROUP, P2P, ANY, P2PK_FROM_DIRECT, 0, P2PK_PATH_CE_DIRECT, 0,
     "one process under capture, every rank's call in the group: copy engines into the outputs", ANYWHERE},
    {ALL, PER_GPU, EAGER, ANY, P2P, ANY, P2PK_FROM_SLOTS, 0, P2PK_PATH_CE_SLOTS, 0,
     "process per GPU: copy engines through the peers' landing slots", ANYWHERE},
    {K(P2PK_COLL_ALL_REDUCE), PER_GPU, EAGER, ANY, SHM, ANY, P2PK_FROM_SLOTS, 0, P2PK_PATH_CE_STAGED, 0,
     "no P2P, process per GPU: copy engines through host memory", ANYWHERE},
    {ALL, ANY, GRAPH, ANY, P2P, ANY, P2PK_FROM_GRAPH, 0, P2PK_PATH_CE_SLOTS, 0,
     "under capture: copy engines through the landing slots, handshakes a graph replays", ANYWHERE},
    {ALL, ANY, ANY, ANY, ANY, ANY, P2PK_FROM_ALWAYS, 0, KERNEL, 0, "the kernels", ANYWHERE},
};
#define NRULES ((int)(sizeof rules / sizeof rules[0]))

int p2pk_sel_rule_count(void) { return NRULES; }
const p2pk_rule *p2pk_sel_rule_at(int i) { return i >= 0 && i < NRULES ? &rules[i] : NULL; }

static int pick(int want, int have) { return want == ANY || want == have; }

/* The rule's NCCL, hosts, type and rank-count columns. */
static int nccl_cols(const p2pk_sel *s, const rule_t *r, const p2pk_sel_key *k) {
  const int nc = s->nccl == P2PK_NCCL_ALL ? NC_ALL : s->nccl == P2PK_NCCL_AUTO ? NC_AUTO : 0;
  if (r->nccl && (!nc || (r->nccl != NC_ON && r->nccl != nc))) return 0;
  if (r->hosts == H_ONE && s->hosts > 1) return 0;
  if ((r->hosts == H_SPAN || r->hosts == H_HIER) && s->hosts < 2) return 0;
  if (r->hosts == H_HIER && !s->hier) return 0;
  if (r->nccl_type && !k->nccl_type) return 0;
  return (!r->rmin || s->nranks >= r->rmin) && (!r->rmax || s->nranks <= r->rmax);
}

static int rule_matches(const p2pk_sel *s, const rule_t *r, const p2pk_sel_key *k) {
  if (!(r->kinds & K(k->kind)) || (r->one_rank && s->nranks != 1)) return 0;
  if (!nccl_cols(s, r, k)) return 0;
  if (!pick(r->mode, s->per_gpu ? PER_GPU : ONE) || !pick(r->capture, k->capture ? GRAPH : EAGER) ||
      !pick(r->grouped, k->grouped ? GROUP : ALONE) || !pick(r->xport, s->staged ? SHM : P2P) ||
      !pick(r->in_place, k->in_place ? IN : OUT))
    return 0;
  if (r->from == P2PK_FROM_ALWAYS) return 1;
  const size_t from = s->from[r->from][k->kind];
  return from && k->bytes >= from;
}

static int rule_of(const p2pk_sel *s, const p2pk_sel_key *k) {
  for (int i = 0; i < NRULES; i++)
    if (rule_matches(s, &rules[i], k)) return i;
  return NRULES - 1;
}

const char *p2pk_sel_rule_text(int rule) {
  return rule >= 0 && rule < NRULES ? rules[rule].why : "?";
}

const char *p2pk_sel_rule_setting(const p2pk_sel *s, int rule, int kind) {
  if (rule < 0 || rule >= NRULES || rules[rule].from == P2PK_FROM_ALWAYS) return NULL;
  const int ctx = rules[rule].from == P2PK_FROM_DIRECT ? P2PK_FROM_GRAPH : rules[rule].from;
  const threshold_row *t = threshold_of(kind, ctx, s->staged);
  return t ? t->setting : NULL;
}

/* One process in a group, eagerly: the kernel launches wait for the
 * group's end and are made by a thread per GPU (launch_pool.c). */
static int launch_thread(const p2pk_sel *s, const p2pk_sel_key *k, int rule) {
  return !s->per_gpu && k->grouped && !k->capture && s->launch_threads && s->group_n >= 2 &&
         !(rules[rule].flags & R_NO_LT);
}

/* The kernels' algorithm, protocol, grid and flags for rule `rule`. */
static void kernel_decision(const p2pk_sel *s, const p2pk_sel_key *k, int rule, p2pk_decision *d) {
  memset(d, 0, sizeof *d);
  d->rule = rule;
  d->path = s->staged ? P2PK_PATH_STAGED : P2PK_PATH_P2P;
  if (launch_thread(s, k, d->rule)) d->flags |= P2PK_SEL_LAUNCH_THREAD;
  if (k->kind == P2PK_SENDRECV) {
    p2pk_sel_p2p_op(s, k->bytes, p2pk_sel_cap(s, 0), &d->ch);
    return;
  }
  p2pk_sel_kernel(s, k->kind, k->bytes, p2pk_sel_cap(s, k->grid_cap), &d->ch);
  if (d->ch.algo == P2PK_ALGO_TWOSHOT && k->kind != P2PK_COLL_ALL_REDUCE) d->flags |= P2PK_SEL_ROOTED;
  if (k->capture && !k->in_place && k->kind == P2PK_COLL_BROADCAST && s->self_ce &&
      k->bytes >= s->self_ce)
    d->flags |= P2PK_SEL_SELF_CE;
}

/* The first rule that matches the call eagerly (*re) and under capture
 * (*rg), in one pass over the rules. */
static void rules_of(const p2pk_sel *s, const p2pk_sel_key *k, int *re, int *rg) {
  p2pk_sel_key e = *k, g = *k;
  e.capture = 0;
  g.capture = 1;
  *re = *rg = -1;
  for (int i = 0; i < NRULES && (*re < 0 || *rg < 0); i++) {
    if (*re < 0 && rule_matches(s, &rules[i], &e)) *re = i;
    if (*rg < 0 && rule_matches(s, &rules[i], &g)) *rg = i;
  }
  if (*re < 0) *re = NRULES - 1;
  if (*rg < 0) *rg = NRULES - 1;
}

/* Whether the decision differs by the capture status: another path, or on
 * the kernels a root's own copy or the launch threads. */
static int capture_matters(const p2pk_sel *s, const p2pk_sel_key *k, int re, int rg) {
  if (rules[re].path != rules[rg].path) return 1;
  if (rules[re].path != KERNEL) return 0;
  p2pk_sel_key e = *k;
  e.capture = 0;
  return launch_thread(s, &e, re) ||
         (k->kind == P2PK_COLL_BROADCAST && !k->in_place && s->self_ce && k->bytes >= s->self_ce);
}

/* One process, in the caller's group: does the call wait for its peers'
 * calls? From the size where the copy engines may carry every rank's call
 * at once, or where the rules (eagerly) give it to NCCL. */
static int waits(const p2pk_sel *s, const p2pk_sel_key *k, int re) {
  if (!k->grouped || s->per_gpu || !s->group_n) return 0;
  const size_t from = s->from[P2PK_FROM_EVENTS][k->kind];
  if (from && k->bytes >= from) return 1;
  return s->nccl != P2PK_NCCL_OFF && rules[re].path == P2PK_PATH_NCCL;
}

/* The kernels whatever the rules say, not in a group (no launch thread). */
static void kernels(const p2pk_sel *s, const p2pk_sel_key *k, unsigned why, p2pk_decision *d) {
  p2pk_sel_key alone = *k;
  alone.grouped = 0;
  kernel_decision(s, &alone, NRULES - 1, d);
  d->flags |= why;
}

static void rule_decision(const p2pk_sel *s, const p2pk_sel_key *k, int rule, p2pk_decision *d) {
  if (rules[rule].path == KERNEL) {
    kernel_decision(s, k, rule, d);
    return;
  }
  memset(d, 0, sizeof *d);
  d->rule = rule;
  d->path = rules[rule].path;
}

int p2pk_decide(const p2pk_sel *s, const p2pk_sel_key *call, p2pk_decision *d) {
  p2pk_sel_key key = *call;
  const p2pk_sel_key *k = &key;
  if (key.peers == P2PK_PEERS_ALONE) key.grouped = 0; /* none of its peers' calls with it */
  int re, rg;
  if (k->capture < 0) rules_of(s, k, &re, &rg);
  else re = rg = rule_of(s, k);
  if (k->peers == P2PK_PEERS_QUEUED && waits(s, k, re)) return P2PK_DECIDE_WAIT;
  if (k->peers == P2PK_PEERS_MIXED && !s->per_gpu) {
    if (k->nccl_type) return P2PK_DECIDE_NCCL_MIXED;
    kernels(s, k, 0, d);
    return P2PK_DECIDED;
  }
  if (k->capture < 0 && capture_matters(s, k, re, rg)) return P2PK_DECIDE_ASK;
  const int rule = k->capture > 0 ? rg : re;
  key.capture = k->capture > 0; /* not asked: the same either way, decided as eager */
  rule_decision(s, k, rule, d);
  const int apart = k->peers == P2PK_PEERS_ALONE || k->peers == P2PK_PEERS_QUEUED;
  if (apart && d->path == P2PK_PATH_NCCL && !s->per_gpu && s->nranks > 1) {
    if (k->nccl_type) return P2PK_DECIDE_NCCL_APART;
    kernels(s, k, P2PK_SEL_NCCL_APART, d);
  }
  if (d->path == P2PK_PATH_HIER &&
      (k->avg == P2PK_AVG_INT || (k->avg == P2PK_AVG_FLOAT && !s->premul))) {
    d->path = P2PK_PATH_NCCL;
    d->flags |= P2PK_SEL_AVG_FLAT;
  }
  return P2PK_DECIDED;
}

/* ------------------------------------------------------- kernel choices -- */

int p2pk_sel_cap(const p2pk_sel *s, int call_cap) {
  if (s->staged) return 0;
  const int a = call_cap, b = s->max_blocks;
  return a > 0 && (b <= 0 || a < b) ? a : b > 0 ? b : 0;
}

int p2pk_sel_rooted(const p2pk_sel *s, int kind, size_t block) {
  if (!p2pk_coll_has_root(kind) || s->staged || s->nranks < 2) return 0;
  if (s->force.algo >= 0) return s->force.algo == P2PK_ALGO_TWOSHOT;
  return s->nranks > 2 && s->rooted_min && block >= s->rooted_min;
}

/* Two blocks per multiprocessor (as many as the mailboxes allow) for the
 * chunked kernels over P2P from these sizes, unless a setting or the
 * table's row names a grid. On 2x H200: all-reduce 32-64 MiB 8-9%
 * faster, reduce-scatter, all-gather and all-to-all 8-17% faster from 16
 * MiB shares, reduce 1-10% from 16 MiB; but a 16 MiB all-reduce and 8 MiB
 * shares 15-20% slower, and the data-parallel example's ~25 MiB buckets
 * slower too, so smaller calls keep one block per SM. The broadcast
 * kernel gained nothing (one process uses the copy engine). LL and LL128
 * grids follow their own rule (p2pk_algo_choose). */
static void wide_grid(const p2pk_sel *s, int kind, size_t block, p2pk_algo_force *f,
                      p2pk_algo_choice *ch) {
  const size_t wide_min = kind == P2PK_COLL_ALL_REDUCE ? MIB(32)
                          : kind == P2PK_COLL_BROADCAST ? SIZE_MAX : MIB(16);
  if (ch->proto != P2PK_PROTO_SIMPLE || s->staged || f->blocks > 0 || block < wide_min) return;
  const p2pk_algo_row *r =
      kind == P2PK_COLL_ALL_REDUCE ? p2pk_algo_lookup_fit(&s->table, &s->geom, block) : NULL;
  if (!r || r->blocks <= 0) {
    f->blocks = 2 * s->geom.sm_count;
    p2pk_algo_choose(&s->table, f, &s->geom, block, ch);
  }
}

void p2pk_sel_choose(const p2pk_sel *s, int kind, size_t block, int cap, p2pk_algo_choice *ch) {
  p2pk_algo_force f = s->force;
  if (kind != P2PK_COLL_ALL_REDUCE)
    f.algo = p2pk_sel_rooted(s, kind, block) ? P2PK_ALGO_TWOSHOT : P2PK_ALGO_ONESHOT;
  /* Reduce: the simple protocol from 8 MiB (2x H200: 16 MiB 50.6 us
   * against LL128's 52.2, 64 MiB 187.6 against 200.2), where the
   * other collectives gain from LL128 (all-gather of 32 MiB shares 107.8 us
   * against 118.2, reduce-scatter 111.5 against 130.3). */
  if (kind == P2PK_COLL_REDUCE && f.proto < 0 && block > MIB(8)) f.proto = P2PK_PROTO_SIMPLE;
  /* The table's 96-thread LL128 row was measured for the all-reduce; the
   * other collectives keep 256 threads there (2x H200, process per GPU
   * eager, 96 against 256 threads: all-to-all 1 MiB 7.00 against 5.66 us).
   * Chosen again only there; a grid cap below may still choose its own. */
  const int threads_unset = f.threads <= 0;
  p2pk_algo_choose(&s->table, &f, &s->geom, block, ch);
  if (kind != P2PK_COLL_ALL_REDUCE && threads_unset && ch->proto == P2PK_PROTO_LL128 &&
      ch->threads < 256) {
    f.threads = 256;
    p2pk_algo_choose(&s->table, &f, &s->geom, block, ch);
  }
  wide_grid(s, kind, block, &f, ch);
  /* A grid cap (the call's or the communicator's) bounds whatever was
   * chosen; the chunk follows from the smaller grid. Both ends of every
   * pair must have the same cap: the header carries the grid. LL and LL128
   * move a line per thread (per 8 threads), so a grid of theirs capped
   * within one block per SM takes 512 threads a block, unless a setting
   * names them (2x H200, process per GPU, 66 blocks: 16 MiB 113 us at
   * LL128's 256 threads, 66.5 at 512, 58.6 uncapped). */
  if (cap > 0 && ch->blocks > cap) {
    f.blocks = cap;
    if (ch->proto != P2PK_PROTO_SIMPLE && threads_unset && cap <= s->geom.sm_count) f.threads = 512;
    p2pk_algo_choose(&s->table, &f, &s->geom, block, ch);
  }
}

void p2pk_sel_kernel(const p2pk_sel *s, int kind, size_t block, int cap, p2pk_algo_choice *ch) {
  /* Staged: the grid covers the whole chunk stream (reduce-scatter and
   * all-to-all carry n or n-1 shares through it, kern_staged.cu). */
  const int mode = kind == P2PK_COLL_REDUCE_SCATTER ? P2PK_STAGE_PER_DEST
                   : kind == P2PK_COLL_ALL_TO_ALL   ? P2PK_STAGE_PAIR
                                                    : P2PK_STAGE_SHARED;
  const int segs = s->staged ? p2pk_stage_segs(mode, s->nranks) : 1;
  p2pk_sel_choose(s, kind, block * (size_t)segs, cap, ch);
  if (s->staged && s->force.blocks <= 0) {
    /* At least one block per segment while chunks cover a whole share, so
     * a small reduce-scatter's segments do not queue behind one block. */
    int most = p2pk_algo_staged_blocks_max(&s->geom);
    if (ch->chunk >= block && ch->blocks < segs) ch->blocks = segs < most ? segs : most;
  }
}

/* Staged: an operation's grid, threads and chunk from its size alone (and
 * P2PKIT_COLL_BLOCKS / P2PKIT_COLL_CHUNK, which peers must share), so both
 * ends agree: 64 KiB or more per block, at most half the pair's mailboxes'
 * worth of blocks (each cycles through two), pieces no larger than a
 * send/recv mailbox. */
static void staged_grid(const p2pk_sel *s, size_t bytes, p2pk_algo_choice *ch) {
  memset(ch, 0, sizeof *ch);
  size_t g = s->force.blocks > 0 ? (size_t)s->force.blocks : (bytes + (64u << 10) - 1) / (64u << 10);
  if (g > P2PK_STAGE_P2P_BOXES / 2) g = P2PK_STAGE_P2P_BOXES / 2;
  if (g < 1) g = 1;
  size_t k = s->force.chunk > 0 ? s->force.chunk : (bytes + g - 1) / g;
  k = (k + 15) & ~(size_t)15;
  if (k > s->stage_p2p_box) k = s->stage_p2p_box;
  ch->blocks = (int)g;
  ch->threads = 512;
  ch->chunk = (uint32_t)k;
}

void p2pk_sel_p2p_op(const p2pk_sel *s, size_t bytes, int mb, p2pk_algo_choice *ch) {
  /* A send's blocks wait for the peer's receive blocks: every block of both
   * kernels must be resident at once. With at most 2 (n - 1) operations of
   * `cap` blocks the grid never exceeds one block per multiprocessor. The cap
   * depends only on the communicator, so both ends of a pair agree; the
   * communicator's grid cap is shared out alike, at least a block each. */
  const int nops_max = 2 * (s->nranks - 1 > 0 ? s->nranks - 1 : 1);
  int cap = s->geom.sm_count / nops_max;
  if (mb > 0 && mb / nops_max < cap) cap = mb / nops_max;
  if (cap < 1) cap = 1;
  if (s->staged) {
    staged_grid(s, bytes, ch);
  } else if (bytes <= P2PK_P2P_LL_MAX) {
    /* LL (p2p_ll in kern_sendrecv.cu): one trip over the link, a block per
     * P2PK_P2P_LL_PER_BLOCK region (one line per thread; with fewer
     * blocks, under the cap below, a block takes several regions). */
    memset(ch, 0, sizeof *ch);
    ch->blocks = (int)((bytes + P2PK_P2P_LL_PER_BLOCK - 1) / P2PK_P2P_LL_PER_BLOCK);
    ch->threads = 512;
  } else {
    p2pk_algo_force f = s->force;
    f.algo = P2PK_ALGO_ONESHOT;
    f.proto = P2PK_PROTO_SIMPLE;
    p2pk_algo_choose(&s->table, &f, &s->geom, bytes, ch);
  }
  if (ch->blocks > cap) ch->blocks = cap; /* the chunk still fits a mailbox */
}
