/* SPDX-License-Identifier: BSD-3-Clause */
/* The verdict over every rank's dump, a pure function of the dumps (and of
 * a probe that says whether a process is alive now, which the command
 * supplies): per communicator, the newest dump of each rank, then in this
 * order
 *   - a rank without a dump whose process a peer saw gone when it dumped
 *     (at the failure, not later: by the time anyone reads the dumps every
 *     process of the job may have ended): P2PK_TV_GONE;
 *   - the first collective number where the ranks with a dump part ways:
 *     some did not make it (P2PK_TV_NOT_ARRIVED) or made it with another
 *     collective, count, type, operation or root (P2PK_TV_MISMATCH);
 *   - a rank without a dump, its process not seen gone: P2PK_TV_NO_DUMP,
 *     with what the probe says of it now (still running: it hangs);
 *   - else every rank agrees: P2PK_TV_CONSISTENT.
 * Sends and receives have numbers of their own and are not compared. */
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "trace/trace.h"

typedef struct {
  const p2pk_tcall **coll; /* its collectives, oldest first */
  size_t n, at;            /* how many; the scan's position */
} rank_calls;

/* ------------------------------------------------------------ grouping -- */

static int newer(const p2pk_tdump *a, const p2pk_tdump *b) {
  if (a->real_ns != b->real_ns) return a->real_ns > b->real_ns;
  if (a->mono_ns != b->mono_ns) return a->mono_ns > b->mono_ns;
  return strcmp(a->file, b->file) > 0;
}

/* The index of rank `global` among members (NULL: itself), or -1. */
static int index_of(const int64_t *members, int n, int64_t global) {
  if (!members) return global >= 0 && global < n ? (int)global : -1;
  for (int i = 0; i < n; i++)
    if (members[i] == global) return i;
  return -1;
}

static int same_comm(const p2pk_tdump *a, const p2pk_tdump *b) {
  return a->source == b->source && strcmp(a->comm, b->comm) == 0;
}

/* A torch group whose size no dump says: its members are the ranks that
 * dumped it, in order. */
static p2pkit_status_t members_from_dumps(const p2pk_tdump *d, size_t n, size_t first,
                                          p2pk_tcomm *c, int64_t **own) {
  int64_t *m = malloc(sizeof *m * (n - first));
  if (!m) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "trace: out of memory");
  int k = 0;
  for (size_t i = first; i < n; i++) {
    if (!same_comm(&d[first], &d[i])) continue;
    int pos = 0;
    while (pos < k && m[pos] < d[i].rank) pos++;
    if (pos < k && m[pos] == d[i].rank) continue;
    memmove(m + pos + 1, m + pos, sizeof *m * (size_t)(k - pos));
    m[pos] = d[i].rank;
    k++;
  }
  c->nranks = k;
  c->members = m;
  *own = m;
  return P2PKIT_SUCCESS;
}

/* The size and members every dump of d[first]'s communicator states,
 * alike, else an error naming the dump that differs. */
static p2pkit_status_t comm_size(const p2pk_tdump *d, size_t n, size_t first, p2pk_tcomm *c,
                                 int64_t **own) {
  const p2pk_tdump *ref = NULL;
  for (size_t i = first; i < n; i++) {
    if (!same_comm(&d[first], &d[i]) || (d[i].source == P2PK_TSRC_TORCH && !d[i].nranks)) continue;
    if (!ref) {
      ref = &d[i];
      continue;
    }
    int same = d[i].nranks == ref->nranks;
    for (int r = 0; same && ref->members && r < ref->nranks; r++)
      same = d[i].members && d[i].members[r] == ref->members[r];
    if (!same)
      return p2pk_fail(P2PKIT_ERR_PARSE, "%s: communicator %s has %d ranks here, %d in %s", d[i].file,
                       d[i].comm, d[i].nranks, ref->nranks, ref->file);
  }
  if (!ref) return members_from_dumps(d, n, first, c, own);
  c->nranks = ref->nranks;
  c->members = ref->members;
  return P2PKIT_SUCCESS;
}

/* Communicator c: its ranks' newest dumps. */
static p2pkit_status_t comm_fill(const p2pk_tdump *d, size_t n, size_t first, p2pk_tcomm *c,
                                 int64_t **own) {
  c->comm = d[first].comm;
  c->source = d[first].source;
  P2PK_CHECK(comm_size(d, n, first, c, own));
  c->rank = calloc((size_t)c->nranks + 1, sizeof *c->rank);
  c->culprits = calloc((size_t)c->nranks + 1, sizeof *c->culprits);
  if (!c->rank || !c->culprits) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "trace: out of memory");
  for (size_t i = first; i < n; i++) {
    if (!same_comm(&d[first], &d[i])) continue;
    const int r = index_of(c->members, c->nranks, d[i].rank);
    if (r < 0)
      return p2pk_fail(P2PKIT_ERR_PARSE, "%s: rank %d is not a rank of communicator %s (%d ranks)",
                       d[i].file, d[i].rank, d[i].comm, c->nranks);
    if (!c->rank[r] || newer(&d[i], c->rank[r])) c->rank[r] = &d[i];
  }
  return P2PKIT_SUCCESS;
}

/* ------------------------------------------------------------- words ---- */

static int64_t global_of(const p2pk_tcomm *c, int r) { return c->members ? c->members[r] : r; }

/* "rank 2" / "ranks 0,2,3" / "ranks 0-7,9" of the ranks marked in `set`
 * (runs of three or more as a range). */
static void rank_list(const p2pk_tcomm *c, const int *set, char *out, size_t len) {
  int count = 0, first = 1;
  for (int r = 0; r < c->nranks; r++) count += set[r] != 0;
  size_t o = (size_t)snprintf(out, len, count == 1 ? "rank " : "ranks ");
  for (int r = 0; r < c->nranks && o < len; r++) {
    if (!set[r]) continue;
    int e = r;
    while (e + 1 < c->nranks && set[e + 1] && global_of(c, e + 1) == global_of(c, e) + 1) e++;
    if (e - r < 2) e = r;
    if (e > r)
      o += (size_t)snprintf(out + o, len - o, "%s%lld-%lld", first ? "" : ",",
                            (long long)global_of(c, r), (long long)global_of(c, e));
    else o += (size_t)snprintf(out + o, len - o, "%s%lld", first ? "" : ",", (long long)global_of(c, r));
    first = 0;
    r = e;
  }
}

static const p2pk_tcall *last_coll(const rank_calls *rc) { return rc->n ? rc->coll[rc->n - 1] : NULL; }

/* ------------------------------------------------------------ verdicts -- */

/* Each rank's collectives, oldest first. */
static int calls_of(const p2pk_tcomm *c, rank_calls *rc) {
  for (int r = 0; r < c->nranks; r++) {
    const p2pk_tdump *d = c->rank[r];
    if (!d) continue;
    rc[r].coll = malloc(sizeof *rc[r].coll * (d->ncalls + 1));
    if (!rc[r].coll) return -1;
    for (size_t i = 0; i < d->ncalls; i++)
      if (!d->calls[i].p2p) rc[r].coll[rc[r].n++] = &d->calls[i];
  }
  return 0;
}

/* Did a peer see rank r's process gone when it dumped? How, into
 * c->gone_pid. */
static int seen_gone(p2pk_tcomm *c, int r) {
  for (int o = 0; c->source == P2PK_TSRC_P2PKIT && o < c->nranks; o++) {
    const p2pk_tdump *d = c->rank[o];
    if (!d || !d->peers || d->peers[r].alive != 'n') continue;
    snprintf(c->gone_pid, sizeof c->gone_pid, "pid %lld, gone when rank %lld dumped",
             (long long)d->peers[r].pid, (long long)global_of(c, o));
    return 1;
  }
  return 0;
}

/* Rank r (no dump) now, as the probe sees it: "; its process (pid N) still
 * runs: ..." or "; its process (pid N) is not running now", else "". */
static void probe_text(const p2pk_tcomm *c, int r, p2pk_tprobe_fn probe, void *arg, char *out,
                       size_t len) {
  out[0] = '\0';
  for (int o = 0; probe && o < c->nranks; o++) {
    const p2pk_tdump *d = c->rank[o];
    if (!d || !d->peers || !d->peers[r].local || d->peers[r].pid <= 0) continue;
    const int alive = probe(arg, d->host, d->pidns, d->peers[r].pid);
    if (alive == 1)
      snprintf(out, len, "; its process (pid %lld) still runs: it hangs where it cannot dump "
               "(P2PKIT_TRACE_SIGNAL lets a signal dump it)", (long long)d->peers[r].pid);
    else if (alive == 0)
      snprintf(out, len, "; its process (pid %lld) is not running now", (long long)d->peers[r].pid);
    return;
  }
}

/* The newest last collective among the ranks with a dump, and its number. */
static const p2pk_tcall *furthest(const p2pk_tcomm *c, const rank_calls *rc) {
  const p2pk_tcall *best = NULL;
  for (int r = 0; r < c->nranks; r++) {
    const p2pk_tcall *k = last_coll(&rc[r]);
    if (k && (!best || k->seq > best->seq)) best = k;
  }
  return best;
}

/* "; the others' last call was seq 42 (all_reduce)" for a verdict about
 * ranks without a dump. */
static void others_last(const p2pk_tcomm *c, const rank_calls *rc, char *out, size_t len) {
  const p2pk_tcall *k = furthest(c, rc);
  if (k) snprintf(out, len, "; the others' last call was seq %llu (%s)", (unsigned long long)k->seq,
                  k->kind);
  else snprintf(out, len, "; the others made no collective call");
}

static int missing(p2pk_tcomm *c, const rank_calls *rc) {
  int gone = 0, any = 0;
  char how[64] = "";
  for (int r = 0; r < c->nranks; r++) {
    if (c->rank[r]) continue;
    any = 1;
    if (seen_gone(c, r)) {
      if (!gone) snprintf(how, sizeof how, "%s", c->gone_pid);
      gone++;
      c->culprits[r] = 1;
    }
  }
  if (!gone) return any;
  char who[256], tail[128];
  rank_list(c, c->culprits, who, sizeof who);
  others_last(c, rc, tail, sizeof tail);
  snprintf(c->line, sizeof c->line, "%s%s process%s gone (%s%s) and left no dump%s", who,
           gone == 1 ? "'s" : "'", gone == 1 ? " is" : "es are", how, gone > 1 ? ", ..." : "", tail);
  c->verdict = P2PK_TV_GONE;
  c->seq = furthest(c, rc) ? furthest(c, rc)->seq : 0;
  return any;
}

/* Rank rc's collective number s, its scan moving forward; NULL when its
 * ring has none (it never made it, or the ring no longer holds it). */
static const p2pk_tcall *call_at(rank_calls *rc, uint64_t s) {
  while (rc->at < rc->n && rc->coll[rc->at]->seq < s) rc->at++;
  return rc->at < rc->n && rc->coll[rc->at]->seq == s ? rc->coll[rc->at] : NULL;
}

static const p2pk_tcall *find(const rank_calls *rc, uint64_t s) {
  for (size_t i = rc->n; i > 0; i--)
    if (rc->coll[i - 1]->seq == s) return rc->coll[i - 1];
  return NULL;
}

enum { F_KIND, F_COUNT, F_DTYPE, F_OP, F_ROOT, F_SAME };

static int same_field(const p2pk_tcall *a, const p2pk_tcall *b, int f) {
  switch (f) {
    case F_KIND: return strcmp(a->kind, b->kind) == 0;
    case F_COUNT: return a->count == b->count;
    case F_DTYPE: return strcmp(a->dtype, b->dtype) == 0;
    case F_OP: return strcmp(a->op, b->op) == 0;
    default: return a->root == b->root;
  }
}

/* The first field in which the calls differ, F_SAME when none does. */
static int differ(const p2pk_tcall *const *k, int n) {
  const p2pk_tcall *ref = NULL;
  for (int r = 0; r < n && !ref; r++) ref = k[r];
  for (int f = F_KIND; f < F_SAME; f++)
    for (int r = 0; r < n; r++)
      if (k[r] && !same_field(ref, k[r], f)) return f;
  return F_SAME;
}

static void value_text(const p2pk_tcall *k, int f, int first, char *out, size_t len) {
  static const char *const verbs[2] = {"passed ", "called "};
  const char *v = verbs[f == F_KIND];
  switch (f) {
    case F_KIND: snprintf(out, len, "%s%s", v, k->kind); break;
    case F_COUNT: snprintf(out, len, "%s%s%llu", v, first ? "count " : "", (unsigned long long)k->count); break;
    case F_DTYPE: snprintf(out, len, "%s%s%s", v, first ? "type " : "", k->dtype); break;
    case F_OP: snprintf(out, len, "%s%s%s", v, first ? "operation " : "", k->op); break;
    default:
      if (k->root < 0) snprintf(out, len, "%sno root", v);
      else snprintf(out, len, "%sroot %lld", v, (long long)k->root);
  }
}

/* Ranks grouped by the value of field f: grp[r] the first rank of r's
 * group; returns the largest group's first rank (ties: the lowest). Work
 * grows with ranks times groups, not ranks squared. */
static int group_by(const p2pk_tcall *const *k, int n, int f, int *grp) {
  int *lead = malloc(sizeof *lead * (size_t)(n + 1)), *size = calloc((size_t)n + 1, sizeof *size);
  int nl = 0, best = -1;
  for (int r = 0; lead && size && r < n; r++) {
    grp[r] = -1;
    if (!k[r]) continue;
    int g = 0;
    while (g < nl && !same_field(k[lead[g]], k[r], f)) g++;
    if (g == nl) lead[nl++] = r;
    grp[r] = lead[g];
    size[g]++;
  }
  for (int g = 0; g < nl; g++) /* groups in the order of their first rank */
    if (best < 0 || size[g] > size[best]) best = g;
  const int out = best < 0 ? -1 : lead[best];
  free(lead);
  free(size);
  return out;
}

static void mismatch(p2pk_tcomm *c, const p2pk_tcall *const *k, uint64_t s, int f) {
  int *grp = calloc((size_t)c->nranks, sizeof *grp), *set = calloc((size_t)c->nranks, sizeof *set);
  const int ref = grp && set ? group_by(k, c->nranks, f, grp) : -1;
  if (ref < 0) {
    free(grp);
    free(set);
    snprintf(c->line, sizeof c->line, "ranks disagree at seq %llu (out of memory to say how)",
             (unsigned long long)s);
    c->verdict = P2PK_TV_MISMATCH;
    c->seq = s;
    return;
  }
  size_t o = 0;
  char who[256], val[96];
  for (int g = 0; g < c->nranks && o < sizeof c->line; g++) {
    if (grp[g] != g || g == ref) continue;
    for (int r = 0; r < c->nranks; r++) set[r] = grp[r] == g, c->culprits[r] |= grp[r] == g;
    rank_list(c, set, who, sizeof who);
    value_text(k[g], f, 1, val, sizeof val);
    o += (size_t)snprintf(c->line + o, sizeof c->line - o, "%s%s %s", o ? ", " : "", who, val);
  }
  for (int r = 0; r < c->nranks; r++) set[r] = grp[r] == ref;
  rank_list(c, set, who, sizeof who);
  value_text(k[ref], f, 0, val, sizeof val);
  if (o < sizeof c->line)
    snprintf(c->line + o, sizeof c->line - o, " where %s %s at seq %llu%s%s%s", who, val,
             (unsigned long long)s, f == F_KIND ? "" : " (", f == F_KIND ? "" : k[ref]->kind,
             f == F_KIND ? "" : ")");
  c->verdict = P2PK_TV_MISMATCH;
  c->seq = s;
  free(grp);
  free(set);
}

/* The last completed call of a torch rank whose last call is not, as
 * "; its last completed call was seq N", or "". */
static void completed_tail(const rank_calls *rc, char *out, size_t len) {
  out[0] = '\0';
  const p2pk_tcall *last = last_coll(rc);
  if (!last || (strcmp(last->state, "scheduled") != 0 && strcmp(last->state, "started") != 0)) return;
  for (size_t i = rc->n; i > 0; i--)
    if (strcmp(rc->coll[i - 1]->state, "completed") == 0) {
      snprintf(out, len, "; its last completed call was seq %llu",
               (unsigned long long)rc->coll[i - 1]->seq);
      return;
    }
}

static void not_arrived(p2pk_tcomm *c, const rank_calls *rc, uint64_t s) {
  const p2pk_tcall *there = NULL;
  int lag = -1, nlag = 0;
  for (int r = 0; r < c->nranks; r++) {
    if (!c->rank[r]) continue;
    const p2pk_tcall *l = last_coll(&rc[r]);
    if (!there) there = find(&rc[r], s);
    if (l && l->seq >= s) continue;
    c->culprits[r] = 1;
    nlag++;
    if (lag < 0) lag = r;
  }
  char who[256], kind[40] = "", last[160], done[96];
  rank_list(c, c->culprits, who, sizeof who);
  if (there) snprintf(kind, sizeof kind, " (%s)", there->kind);
  const p2pk_tcall *l = last_coll(&rc[lag]);
  if (l) snprintf(last, sizeof last, "%s last call was seq %llu (%s, %s)", nlag > 1 ? "their" : "its",
                  (unsigned long long)l->seq, l->kind, l->state);
  else snprintf(last, sizeof last, "%s no collective call", nlag > 1 ? "they made" : "it made");
  completed_tail(&rc[lag], done, sizeof done);
  snprintf(c->line, sizeof c->line, "%s never arrived at seq %llu%s; %s%s", who,
           (unsigned long long)s, kind, last, done);
  c->verdict = P2PK_TV_NOT_ARRIVED;
  c->seq = s;
}

/* The next number after s that some rank holds; UINT64_MAX when none. */
static uint64_t next_seq(const p2pk_tcomm *c, const rank_calls *rc, uint64_t s) {
  uint64_t n = UINT64_MAX;
  for (int r = 0; r < c->nranks; r++) {
    const rank_calls *x = &rc[r];
    size_t i = x->at;
    while (i < x->n && x->coll[i]->seq <= s) i++;
    if (i < x->n && x->coll[i]->seq < n) n = x->coll[i]->seq;
  }
  return n;
}

/* The first number where the ranks with a dump part ways, if any. */
static void scan(p2pk_tcomm *c, rank_calls *rc, const p2pk_tcall **k) {
  uint64_t lo = 1, minlast = UINT64_MAX, maxlast = 0;
  int present = 0;
  for (int r = 0; r < c->nranks; r++) {
    if (!c->rank[r]) continue;
    present++;
    const uint64_t last = rc[r].n ? last_coll(&rc[r])->seq : 0;
    if (rc[r].n && rc[r].coll[0]->seq > lo) lo = rc[r].coll[0]->seq;
    if (last < minlast) minlast = last;
    if (last > maxlast) maxlast = last;
  }
  if (!present) return;
  for (uint64_t s = lo; s <= minlast; s = next_seq(c, rc, s)) {
    int gap = 0;
    for (int r = 0; r < c->nranks; r++) {
      k[r] = c->rank[r] ? call_at(&rc[r], s) : NULL;
      gap |= c->rank[r] && !k[r];
    }
    const int f = gap ? F_SAME : differ(k, c->nranks);
    if (f != F_SAME) {
      mismatch(c, k, s, f);
      return;
    }
  }
  if (minlast < maxlast) not_arrived(c, rc, minlast + 1);
}

/* A verdict about the ranks with a dump (mismatch, not arrived) or about
 * the gone ones, given while other ranks left no dump: their names after
 * it ("; rank 3 left no dump"), so that a verdict over part of the job
 * never reads as one over all of it. */
static void absent_tail(p2pk_tcomm *c) {
  int *set = calloc((size_t)c->nranks + 1, sizeof *set), n = 0;
  for (int r = 0; set && r < c->nranks; r++) {
    set[r] = !c->rank[r] && !(c->verdict == P2PK_TV_GONE && c->culprits[r]);
    n += set[r];
  }
  const size_t o = strlen(c->line);
  if (!set) {
    snprintf(c->line + o, sizeof c->line - o, "; some ranks left no dump");
  } else if (n) {
    char who[256];
    rank_list(c, set, who, sizeof who);
    snprintf(c->line + o, sizeof c->line - o, "; %s left no dump", who);
  }
  free(set);
}

static void judge(p2pk_tcomm *c, rank_calls *rc, const p2pk_tcall **k, p2pk_tprobe_fn probe,
                  void *arg) {
  const int absent = missing(c, rc);
  if (c->verdict == P2PK_TV_GONE) {
    absent_tail(c);
    return;
  }
  scan(c, rc, k);
  if (c->verdict != P2PK_TV_CONSISTENT) {
    if (absent) absent_tail(c);
    return;
  }
  char who[256], tail[128], now[200] = "";
  const p2pk_tcall *f = furthest(c, rc);
  if (absent) {
    int n = 0, last = -1;
    for (int r = 0; r < c->nranks; r++) {
      c->culprits[r] = !c->rank[r];
      if (!c->rank[r]) n++, last = r;
    }
    rank_list(c, c->culprits, who, sizeof who);
    others_last(c, rc, tail, sizeof tail);
    if (n == 1) probe_text(c, last, probe, arg, now, sizeof now);
    if (now[0])
      snprintf(c->line, sizeof c->line, "%s left no dump%s%s", who, now, tail);
    else
      snprintf(c->line, sizeof c->line, "%s left no dump (gone, or hung where it could not dump%s)%s",
               who, c->source == P2PK_TSRC_P2PKIT ? ": P2PKIT_TRACE_SIGNAL lets a signal dump it" : "",
               tail);
    c->verdict = P2PK_TV_NO_DUMP;
    c->seq = f ? f->seq : 0;
  } else if (f) {
    snprintf(c->line, sizeof c->line, "no desync found: every rank's last call was seq %llu (%s)",
             (unsigned long long)f->seq, f->kind);
    c->seq = f->seq;
  } else {
    snprintf(c->line, sizeof c->line, "no desync found: no rank made a collective call");
  }
}

static p2pkit_status_t judge_comm(p2pk_tcomm *c, p2pk_tprobe_fn probe, void *arg) {
  rank_calls *rc = calloc((size_t)c->nranks + 1, sizeof *rc);
  const p2pk_tcall **k = calloc((size_t)c->nranks + 1, sizeof *k);
  p2pkit_status_t st = P2PKIT_SUCCESS;
  if (!rc || !k || calls_of(c, rc)) st = p2pk_fail(P2PKIT_ERR_NO_MEMORY, "trace: out of memory");
  else judge(c, rc, k, probe, arg);
  for (int r = 0; rc && r < c->nranks; r++) free(rc[r].coll);
  free(rc);
  free(k);
  return st;
}

/* ---------------------------------------------------------------- job -- */

static uint64_t newest_of(const p2pk_tcomm *c) {
  uint64_t t = 0;
  for (int r = 0; r < c->nranks; r++)
    if (c->rank[r] && c->rank[r]->real_ns > t) t = c->rank[r]->real_ns;
  return t;
}

/* Which comm's verdict comes first: a gone process, then a mismatch,
 * then a rank that did not arrive, then a missing dump; among equals the
 * newest dumps. */
static size_t headline(const p2pk_tjob *job) {
  static const int rank_of[] = {[P2PK_TV_CONSISTENT] = 0, [P2PK_TV_NO_DUMP] = 1,
                                [P2PK_TV_NOT_ARRIVED] = 2, [P2PK_TV_MISMATCH] = 3, [P2PK_TV_GONE] = 4};
  size_t best = 0;
  for (size_t i = 1; i < job->ncomms; i++) {
    const p2pk_tcomm *a = &job->comms[i], *b = &job->comms[best];
    if (rank_of[a->verdict] > rank_of[b->verdict] ||
        (rank_of[a->verdict] == rank_of[b->verdict] && newest_of(a) > newest_of(b)))
      best = i;
  }
  return best;
}

void p2pk_tjob_free(p2pk_tjob *job) {
  for (size_t i = 0; job->comms && i < job->ncomms; i++) {
    free(job->comms[i].rank);
    free(job->comms[i].culprits);
    free(job->comms[i].own_members);
  }
  free(job->comms);
  memset(job, 0, sizeof *job);
}

p2pkit_status_t p2pk_trace_analyze(const p2pk_tdump *dumps, size_t n, p2pk_tprobe_fn probe,
                                   void *arg, p2pk_tjob *job) {
  memset(job, 0, sizeof *job);
  job->comms = calloc(n + 1, sizeof *job->comms);
  if (!job->comms) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "trace: out of memory");
  p2pkit_status_t st = P2PKIT_SUCCESS;
  for (size_t i = 0; i < n && st == P2PKIT_SUCCESS; i++) {
    int seen = 0;
    for (size_t j = 0; j < i && !seen; j++) seen = same_comm(&dumps[i], &dumps[j]);
    if (seen) continue;
    p2pk_tcomm *c = &job->comms[job->ncomms++];
    st = comm_fill(dumps, n, i, c, &c->own_members);
    if (st == P2PKIT_SUCCESS) st = judge_comm(c, probe, arg);
  }
  if (st != P2PKIT_SUCCESS) {
    p2pk_tjob_free(job);
    return st;
  }
  job->headline = headline(job);
  return P2PKIT_SUCCESS;
}
