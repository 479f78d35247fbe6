/* SPDX-License-Identifier: BSD-3-Clause */
/* The selector in words (select.h): one decision in a line, a call's key
 * and its decision logged at INFO, and `p2pkit perf --explain`'s text: the
 * rules as resolved for a communicator, the algorithm table's rows, and the
 * decision for each size. Reads the rules through p2pk_sel_rule_at. */
#include <stdio.h>
#include <string.h>

#include "coll/select/select.h"
#include "core/log.h"

int p2pk_decision_text(const p2pk_decision *d, char *o, size_t len) {
  const p2pk_algo_choice *ch = &d->ch;
  if (d->path != P2PK_PATH_P2P && d->path != P2PK_PATH_STAGED)
    return snprintf(o, len, "%s", p2pk_path_name(d->path));
  return snprintf(o, len, "%s %s/%s %dx%d c%u%s%s%s%s", p2pk_path_name(d->path),
                  p2pk_algo_name(ch->algo), p2pk_proto_name(ch->proto), ch->blocks, ch->threads,
                  ch->chunk, ch->ll128_x2 ? " x2" : "", d->flags & P2PK_SEL_ROOTED ? " rooted" : "",
                  d->flags & P2PK_SEL_SELF_CE ? " self-ce" : "",
                  d->flags & P2PK_SEL_LAUNCH_THREAD ? " lt" : "");
}

static const char *size_text(size_t v, char *b, size_t len) {
  static const char units[] = "BKMGT";
  int u = 0;
  while (u < 4 && v && v % 1024 == 0) v /= 1024, u++;
  snprintf(b, len, "%zu%c", v, units[u]);
  return b;
}

static const char *const mode_words[] = {"any mode", "one process", "process per GPU"};
static const char *const cap_words[] = {"", ", eager", ", under capture"};
static const char *const grp_words[] = {"", ", alone", ", in a group"};
static const char *const xport_words[] = {"", ", P2P", ", staged"};
static const char *const ip_words[] = {"", ", out of place", ", in place"};

/* One rule: its conditions, then per kind the size it applies from. */
static void explain_rule(const p2pk_sel *s, int i, FILE *f) {
  const p2pk_rule *r = p2pk_sel_rule_at(i);
  const int path = r->path == P2PK_RULE_KERNEL ? (s->staged ? P2PK_PATH_STAGED : P2PK_PATH_P2P) : r->path;
  static const char *const nc_words[] = {"", ", P2PKIT_NCCL=auto", ", P2PKIT_NCCL=1",
                                          ", NCCL on (auto or 1)"};
  static const char *const h_words[] = {"", ", one host", ", spanning hosts",
                                        ", spanning hosts evenly, 2+ ranks each"};
  char ranks[32] = "";
  if (r->rmin || r->rmax) {
    if (r->rmax) snprintf(ranks, sizeof ranks, ", %d-%d ranks", r->rmin, r->rmax);
    else snprintf(ranks, sizeof ranks, ", %d+ ranks", r->rmin);
  }
  fprintf(f, "%2d. %s -> %s\n    when %s%s%s%s%s%s%s%s%s%s\n", i + 1, r->why, p2pk_path_name(path),
          mode_words[r->mode], cap_words[r->capture], grp_words[r->grouped], xport_words[r->xport],
          ip_words[r->in_place], r->one_rank ? ", one rank" : "", nc_words[r->nccl],
          h_words[r->hosts], r->nccl_type ? ", a type only NCCL carries" : "", ranks);
  if (r->from == P2PK_FROM_ALWAYS) return;
  if ((r->rmin && s->nranks < r->rmin) || (r->rmax && s->nranks > r->rmax)) {
    fprintf(f, "      not for %d ranks\n", s->nranks);
    return;
  }
  for (int k = 0; k < P2PK_KINDS; k++) {
    if (!(r->kinds & (1u << k))) continue;
    char b[32];
    const size_t v = s->from[r->from][k];
    const char *set = p2pk_sel_rule_setting(s, i, k);
    fprintf(f, "      %-15s %s%s%s%s\n", p2pk_kind_name(k), v ? "from " : "never",
            v ? size_text(v, b, sizeof b) : "", set ? "  " : "", set ? set : "");
  }
}

void p2pk_sel_explain(const p2pk_sel *s, FILE *f) {
  fprintf(f, "selector: %d ranks, %s, %s; the first rule that matches a call decides%s\n",
          s->nranks, s->per_gpu ? "process per GPU" : "one process", s->staged ? "staged" : "P2P",
          s->launch_threads && s->group_n >= 2 ? " (kernels in a group made by launch threads)" : "");
  fprintf(f, "NCCL: %s; %d host%s%s\n",
          s->nccl == P2PK_NCCL_ALL    ? "every call (P2PKIT_NCCL=1)"
          : s->nccl == P2PK_NCCL_AUTO ? "where the rules say (P2PKIT_NCCL=auto)"
                                      : "off (P2PKIT_NCCL=0, or NCCL not usable)",
          s->hosts, s->hosts == 1 ? "" : "s",
          s->hosts > 1 ? (s->hier ? " (hierarchical layout)" : " (uneven or one rank each: NCCL)") : "");
  for (int i = 0; i < p2pk_sel_rule_count(); i++) explain_rule(s, i, f);
  const int tr = s->staged ? P2PK_TRANSPORT_SHM : P2PK_TRANSPORT_P2P;
  fprintf(f, "the kernels' algorithm table (%s), rows for %d ranks:\n", s->table.source, s->nranks);
  for (int i = 0; i < s->table.nrows; i++) {
    const p2pk_algo_row *r = &s->table.rows[i];
    if (r->transport != tr || s->nranks < r->min_ranks || s->nranks > r->max_ranks) continue;
    char b[32];
    fprintf(f, "    up to %-6s %s/%s, blocks %d, threads %d, chunk %zu (0: automatic)\n",
            r->max_bytes == SIZE_MAX ? "any" : size_text(r->max_bytes, b, sizeof b),
            p2pk_algo_name(r->algo), p2pk_proto_name(r->proto), r->blocks, r->threads, r->chunk);
  }
  const p2pk_algo_force *fo = &s->force;
  fprintf(f, "forced: algorithm %s, protocol %s, blocks %d, threads %d, chunk %zu; grid cap %d; "
          "rooted two-shot from %zu; root's own copy by copy engine under capture from %zu\n",
          fo->algo >= 0 ? p2pk_algo_name(fo->algo) : "-", fo->proto >= 0 ? p2pk_proto_name(fo->proto) : "-",
          fo->blocks, fo->threads, fo->chunk, s->max_blocks, s->rooted_min, s->self_ce);
}

/* ----------------------------------------------------------- decisions -- */

int p2pk_sel_key_text(const p2pk_sel *s, const p2pk_sel_key *k, char *o, size_t len) {
  char hosts[32] = "";
  if (s->hosts > 1) snprintf(hosts, sizeof hosts, ", %d hosts", s->hosts);
  return snprintf(o, len, "%s of %zu B, %d ranks, %s, %s, %s, %s, %s%s%s%s", p2pk_kind_name(k->kind),
                  k->bytes, s->nranks, s->per_gpu ? "process per GPU" : "one process",
                  k->capture ? "under capture" : "eager", k->grouped ? "in a group" : "alone",
                  s->staged ? "staged" : "P2P", k->in_place ? "in place" : "out of place",
                  k->grid_cap > 0 ? ", grid cap" : "", hosts,
                  k->nccl_type ? ", a type only NCCL carries" : "");
}

void p2pk_sel_log(const p2pk_sel *s, int rank, const p2pk_sel_key *k, const p2pk_decision *d) {
  if (!p2pk_log_enabled(P2PK_LEVEL_INFO, P2PK_LOG_COLL)) return;
  char key[160], dec[96];
  p2pk_sel_key_text(s, k, key, sizeof key);
  p2pk_decision_text(d, dec, sizeof dec);
  const char *set = p2pk_sel_rule_setting(s, d->rule, k->kind);
  P2PK_INFO(P2PK_LOG_COLL, "rank %d: %s -> %s (%s; rule %d: %s%s%s)", rank, key, dec,
            p2pk_path_family(d->path), d->rule + 1, p2pk_sel_rule_text(d->rule),
            set ? "; moved by " : "", set ? set : "");
}

void p2pk_sel_explain_calls(const p2pk_sel *s, int k, const size_t *bytes, int n, int capture,
                            FILE *f) {
  fprintf(f, "decisions for %s, %s (bytes: one rank's share):\n", p2pk_kind_name(k),
          capture ? "under capture" : "eager");
  fprintf(f, "  %12s  %-46s  %-46s  %-46s  %s\n", "bytes", "alone", "in a group", "alone, in place",
          "in a group, in place");
  for (int i = 0; i < n; i++) {
    fprintf(f, "  %12zu", bytes[i]);
    for (int j = 0; j < 4; j++) {
      p2pk_sel_key key = {.kind = k, .capture = capture, .grouped = j & 1,
                          .in_place = k != P2PK_SENDRECV && (j & 2), .bytes = bytes[i]};
      p2pk_decision d;
      char t[96];
      p2pk_decide(s, &key, &d); /* the rules alone, the capture status given: decided */
      p2pk_decision_text(&d, t, sizeof t);
      char cell[112];
      snprintf(cell, sizeof cell, "%s (%d)", t, d.rule + 1);
      fprintf(f, j < 3 ? "  %-46s" : "  %s\n", cell);
    }
  }
  fprintf(f, "(n): the rule that decided, numbered as above\n");
}
