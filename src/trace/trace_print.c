/* SPDX-License-Identifier: BSD-3-Clause */
/* The verdict as `p2pkit trace` prints it: the headline communicator's
 * verdict in one line, then each communicator: its verdict (when there is
 * more than one), its ranks (who, where, the last call, why it dumped),
 * and every rank's call at the number where it happened. As JSON, the
 * same (schema in docs/desync.md). */
#include <string.h>

#include "core/json.h"
#include "trace/trace.h"

static const char *const verdict_names[] = {[P2PK_TV_CONSISTENT] = "consistent",
                                            [P2PK_TV_MISMATCH] = "mismatch",
                                            [P2PK_TV_NOT_ARRIVED] = "not_arrived",
                                            [P2PK_TV_GONE] = "gone",
                                            [P2PK_TV_NO_DUMP] = "no_dump"};

static const char *source_name(int s) { return s == P2PK_TSRC_TORCH ? "torch" : "p2pkit"; }

static long long global_of(const p2pk_tcomm *c, int r) { return c->members ? c->members[r] : r; }

static const p2pk_tcall *last_coll(const p2pk_tdump *d) {
  for (size_t i = d->ncalls; i > 0; i--)
    if (!d->calls[i - 1].p2p) return &d->calls[i - 1];
  return NULL;
}

static const p2pk_tcall *coll_at(const p2pk_tdump *d, uint64_t s) {
  for (size_t i = d->ncalls; i > 0; i--)
    if (!d->calls[i - 1].p2p && d->calls[i - 1].seq == s) return &d->calls[i - 1];
  return NULL;
}

static void comm_title(const p2pk_tcomm *c, FILE *out) {
  int have = 0;
  for (int r = 0; r < c->nranks; r++) have += c->rank[r] != NULL;
  fprintf(out, "%s %s: %d rank%s, %d dump%s (%s)\n", c->source == P2PK_TSRC_TORCH ? "group" : "comm",
          c->comm, c->nranks, c->nranks == 1 ? "" : "s", have, have == 1 ? "" : "s",
          source_name(c->source));
}

/* A rank: who and where, its last collective; why it dumped and its
 * error; its file. */
static void print_rank(const p2pk_tcomm *c, int r, FILE *out) {
  const p2pk_tdump *d = c->rank[r];
  const int gone = c->verdict == P2PK_TV_GONE && c->culprits[r];
  if (!d) {
    fprintf(out, "  rank %lld: no dump%s%s%s\n", global_of(c, r), gone ? " (" : "",
            gone ? c->gone_pid : "", gone ? ")" : "");
    return;
  }
  fprintf(out, "  rank %lld: ", global_of(c, r));
  if (d->source == P2PK_TSRC_P2PKIT)
    fprintf(out, "pid %lld on %s, GPU %d (%s); ", (long long)d->pid, d->host, d->device, d->gpu);
  const p2pk_tcall *l = last_coll(d);
  if (l) fprintf(out, "last call seq %llu %s (%s)\n", (unsigned long long)l->seq, l->kind, l->state);
  else fprintf(out, "no collective call\n");
  if (d->source == P2PK_TSRC_P2PKIT) {
    fprintf(out, "    dumped on: %s\n", d->reason);
    if (d->error_peer >= 0) fprintf(out, "    its error: %s, naming rank %d\n", d->error, d->error_peer);
    else if (strcmp(d->error, "none") != 0) fprintf(out, "    its error: %s\n", d->error);
  }
  fprintf(out, "    file: %s\n", d->file);
}

static void print_call(const p2pk_tcall *k, FILE *out) {
  fprintf(out, "%s %s count %llu", k->kind, k->dtype, (unsigned long long)k->count);
  if (strcmp(k->op, "-") != 0) fprintf(out, " op %s", k->op);
  if (k->root >= 0) fprintf(out, " %s %lld", k->p2p ? "peer" : "root", (long long)k->root);
  if (strcmp(k->path, "-") != 0) fprintf(out, " path %s", k->path);
  fprintf(out, " (%s)\n", k->state);
}

static void print_seq(const p2pk_tcomm *c, FILE *out) {
  if (!c->seq || c->verdict == P2PK_TV_CONSISTENT) return;
  fprintf(out, "  at seq %llu:\n", (unsigned long long)c->seq);
  for (int r = 0; r < c->nranks; r++) {
    fprintf(out, "    rank %lld: ", global_of(c, r));
    const p2pk_tcall *k = c->rank[r] ? coll_at(c->rank[r], c->seq) : NULL;
    if (k) print_call(k, out);
    else fprintf(out, "%s\n", c->rank[r] ? "no such call" : "no dump");
  }
}

void p2pk_trace_print(const p2pk_tjob *job, FILE *out) {
  if (!job->ncomms) {
    fprintf(out, "no dumps\n");
    return;
  }
  const p2pk_tcomm *h = &job->comms[job->headline];
  if (job->ncomms > 1) fprintf(out, "%s %s: ", h->source == P2PK_TSRC_TORCH ? "group" : "comm", h->comm);
  fprintf(out, "%s\n", h->line);
  for (size_t i = 0; i < job->ncomms; i++) {
    const p2pk_tcomm *c = &job->comms[i];
    fprintf(out, "\n");
    comm_title(c, out);
    if (job->ncomms > 1) fprintf(out, "  verdict: %s\n", c->line);
    for (int r = 0; r < c->nranks; r++) print_rank(c, r, out);
    print_seq(c, out);
  }
}

/* --------------------------------------------------------------- JSON -- */

static void json_call(p2pk_json *j, const char *key, const p2pk_tcall *k) {
  if (!k) {
    pj_null(j, key);
    return;
  }
  pj_obj(j, key);
  pj_int(j, "seq", (int64_t)k->seq);
  pj_str(j, "kind", k->kind);
  pj_str(j, "dtype", k->dtype);
  pj_int(j, "count", (int64_t)k->count);
  pj_str(j, "op", strcmp(k->op, "-") ? k->op : NULL);
  if (k->root >= 0) pj_int(j, "root", k->root);
  else pj_null(j, "root");
  pj_str(j, "path", strcmp(k->path, "-") ? k->path : NULL);
  pj_str(j, "state", k->state);
  pj_obj_end(j);
}

static void json_rank(p2pk_json *j, const p2pk_tcomm *c, int r) {
  const p2pk_tdump *d = c->rank[r];
  pj_obj(j, NULL);
  pj_int(j, "rank", global_of(c, r));
  pj_bool(j, "culprit", c->culprits[r]);
  if (!d) {
    pj_null(j, "file");
    pj_str(j, "process", c->verdict == P2PK_TV_GONE && c->culprits[r] ? "gone" : "unknown");
  } else {
    pj_str(j, "file", d->file);
    pj_str(j, "host", d->source == P2PK_TSRC_P2PKIT ? d->host : NULL);
    if (d->pid >= 0) pj_int(j, "pid", d->pid);
    else pj_null(j, "pid");
    pj_str(j, "gpu", d->source == P2PK_TSRC_P2PKIT ? d->gpu : NULL);
    pj_str(j, "reason", d->reason);
    pj_str(j, "error", d->error);
    if (d->error_peer >= 0) pj_int(j, "error_rank", d->error_peer);
    else pj_null(j, "error_rank");
    json_call(j, "last_call", last_coll(d));
  }
  json_call(j, "call_at_seq", d && c->seq ? coll_at(d, c->seq) : NULL);
  pj_obj_end(j);
}

static void json_comm(p2pk_json *j, const p2pk_tcomm *c) {
  pj_obj(j, NULL);
  pj_str(j, "comm", c->comm);
  pj_str(j, "source", source_name(c->source));
  pj_int(j, "nranks", c->nranks);
  pj_str(j, "verdict", verdict_names[c->verdict]);
  pj_str(j, "line", c->line);
  if (c->seq) pj_int(j, "seq", (int64_t)c->seq);
  else pj_null(j, "seq");
  pj_arr(j, "ranks");
  for (int r = 0; r < c->nranks; r++) json_rank(j, c, r);
  pj_arr_end(j);
  pj_obj_end(j);
}

void p2pk_trace_json(const p2pk_tjob *job, FILE *out) {
  p2pk_json j;
  pj_init(&j, out);
  pj_obj(&j, NULL);
  pj_int(&j, "schema_version", 1);
  if (job->ncomms) {
    pj_str(&j, "verdict", verdict_names[job->comms[job->headline].verdict]);
    pj_str(&j, "line", job->comms[job->headline].line);
    pj_str(&j, "comm", job->comms[job->headline].comm);
  } else {
    pj_null(&j, "verdict");
    pj_null(&j, "line");
    pj_null(&j, "comm");
  }
  pj_arr(&j, "comms");
  for (size_t i = 0; i < job->ncomms; i++) json_comm(&j, &job->comms[i]);
  pj_arr_end(&j);
  pj_arr(&j, "bad_files");
  for (size_t i = 0; i < job->nbad; i++) {
    pj_obj(&j, NULL);
    pj_str(&j, "file", job->bad[i].file);
    pj_str(&j, "error", job->bad[i].why);
    pj_obj_end(&j);
  }
  pj_arr_end(&j);
  pj_obj_end(&j);
  pj_finish(&j);
}
