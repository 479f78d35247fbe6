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
    p2pk_json_null(j, key);
    return;
  }
  p2pk_json_obj(j, key);
  p2pk_json_int(j, "seq", (int64_t)k->seq);
  p2pk_json_str(j, "kind", k->kind);
  p2pk_json_str(j, "dtype", k->dtype);
  p2pk_json_int(j, "count", (int64_t)k->count);
  p2pk_json_str(j, "op", strcmp(k->op, "-") ? k->op : NULL);
  if (k->root >= 0) p2pk_json_int(j, "root", k->root);
  else p2pk_json_null(j, "root");
  p2pk_json_str(j, "path", strcmp(k->path, "-") ? k->path : NULL);
  p2pk_json_str(j, "state", k->state);
  p2pk_json_obj_end(j);
}

static void json_rank(p2pk_json *j, const p2pk_tcomm *c, int r) {
  const p2pk_tdump *d = c->rank[r];
  p2pk_json_obj(j, NULL);
  p2pk_json_int(j, "rank", global_of(c, r));
  p2pk_json_bool(j, "culprit", c->culprits[r]);
  if (!d) {
    p2pk_json_null(j, "file");
    p2pk_json_str(j, "process", c->verdict == P2PK_TV_GONE && c->culprits[r] ? "gone" : "unknown");
  } else {
    p2pk_json_str(j, "file", d->file);
    p2pk_json_str(j, "host", d->source == P2PK_TSRC_P2PKIT ? d->host : NULL);
    if (d->pid >= 0) p2pk_json_int(j, "pid", d->pid);
    else p2pk_json_null(j, "pid");
    p2pk_json_str(j, "gpu", d->source == P2PK_TSRC_P2PKIT ? d->gpu : NULL);
    p2pk_json_str(j, "reason", d->reason);
    p2pk_json_str(j, "error", d->error);
    if (d->error_peer >= 0) p2pk_json_int(j, "error_rank", d->error_peer);
    else p2pk_json_null(j, "error_rank");
    json_call(j, "last_call", last_coll(d));
  }
  json_call(j, "call_at_seq", d && c->seq ? coll_at(d, c->seq) : NULL);
  p2pk_json_obj_end(j);
}

static void json_comm(p2pk_json *j, const p2pk_tcomm *c) {
  p2pk_json_obj(j, NULL);
  p2pk_json_str(j, "comm", c->comm);
  p2pk_json_str(j, "source", source_name(c->source));
  p2pk_json_int(j, "nranks", c->nranks);
  p2pk_json_str(j, "verdict", verdict_names[c->verdict]);
  p2pk_json_str(j, "line", c->line);
  if (c->seq) p2pk_json_int(j, "seq", (int64_t)c->seq);
  else p2pk_json_null(j, "seq");
  p2pk_json_arr(j, "no_dump"); /* the ranks without a dump, whatever the verdict */
  for (int r = 0; r < c->nranks; r++)
    if (!c->rank[r]) p2pk_json_int(j, NULL, global_of(c, r));
  p2pk_json_arr_end(j);
  p2pk_json_arr(j, "ranks");
  for (int r = 0; r < c->nranks; r++) json_rank(j, c, r);
  p2pk_json_arr_end(j);
  p2pk_json_obj_end(j);
}

void p2pk_trace_json(const p2pk_tjob *job, FILE *out) {
  p2pk_json j;
  p2pk_json_init(&j, out);
  p2pk_json_obj(&j, NULL);
  p2pk_json_int(&j, "schema_version", 1);
  if (job->ncomms) {
    p2pk_json_str(&j, "verdict", verdict_names[job->comms[job->headline].verdict]);
    p2pk_json_str(&j, "line", job->comms[job->headline].line);
    p2pk_json_str(&j, "comm", job->comms[job->headline].comm);
  } else {
    p2pk_json_null(&j, "verdict");
    p2pk_json_null(&j, "line");
    p2pk_json_null(&j, "comm");
  }
  p2pk_json_arr(&j, "comms");
  for (size_t i = 0; i < job->ncomms; i++) json_comm(&j, &job->comms[i]);
  p2pk_json_arr_end(&j);
  p2pk_json_arr(&j, "bad_files");
  for (size_t i = 0; i < job->nbad; i++) {
    p2pk_json_obj(&j, NULL);
    p2pk_json_str(&j, "file", job->bad[i].file);
    p2pk_json_str(&j, "error", job->bad[i].why);
    p2pk_json_obj_end(&j);
  }
  p2pk_json_arr_end(&j);
  p2pk_json_obj_end(&j);
  p2pk_json_finish(&j);
}
