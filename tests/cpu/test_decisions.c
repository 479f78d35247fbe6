/* SPDX-License-Identifier: BSD-3-Clause */
/* Every decision a call makes (the selector's, select.h), pinned: for each
 * collective and send/recv ×
 * mode (one process / process per GPU) × capture × group × in or out of
 * place × rank count 1-16 × P2P or staged × size (powers of two and odd
 * sizes, 1 B - 4 GiB), with the default settings and with each setting in
 * a list, the path, algorithm, protocol and grid the code chooses, compared
 * with tests/data/decisions.txt.gz. A change of behaviour shows as a diff;
 * an intended one regenerates the file:
 *   build/test_decisions --write tests/data/decisions.txt.gz
 * and its commit names the change. `--explain N one|per-gpu KIND [--nccl]
 * [--hosts H]` prints the selector of N H200s over P2P as p2pkit perf
 * --explain does (--nccl: NCCL available; --hosts: N ranks on H hosts). One
 * process: every rank's call of a collective alike, in one group or none.
 *
 * NCCL: the defaults and every setting are dumped as a machine without
 * NCCL sees them (P2PKIT_NCCL=auto then means p2pkit's own paths); then,
 * NCCL available, what differs under auto (the default), under
 * P2PKIT_NCCL=1, for a type only NCCL carries, and for communicators
 * spanning hosts. With NCCL available and P2PKIT_NCCL=0 every decision must
 * equal the defaults' (checked, not dumped). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll/coll.h"
#include "core/log.h"
#include "core/param.h"
#include "test.h"

#define GOLDEN P2PK_TEST_DATA "/decisions.txt.gz"
#define SMS 132 /* an H200's multiprocessors */

enum { SENDRECV = P2PK_SENDRECV, KINDS = P2PK_KINDS };

/* LL128 blocks per SM by threads: a fixed stand-in for CUDA's occupancy
 * query (56 registers a thread, the header warp on top). */
static int ll128_per_sm(int threads) {
  const int t = threads + 32, a = 2048 / t, b = 65536 / (56 * t);
  return a < b ? a : b;
}

static p2pk_group one_group; /* one process: only its rank count is read */

/* What the communicators below are made with: NCCL loadable on every rank
 * (sim_nccl), the hosts their ranks sit on (in blocks: rank r on host
 * r * H / n), and the calls' type (sim_ntype: one only NCCL carries). */
static int sim_nccl, sim_hosts = 1, sim_ntype;

/* c->hosts and c->nccl_mode as init derives them (comm_hosts.c) from
 * P2PKIT_NCCL and every rank's view: one machine, a GPU each, NCCL loaded
 * or not. -1 (the reason recorded) when init would fail. */
static int sim_hosts_of(struct p2pkit_comm *c, int n) {
  char ids[P2PK_COLL_MAX_RANKS][8], bus[P2PK_COLL_MAX_RANKS][8];
  const char *idp[P2PK_COLL_MAX_RANKS];
  p2pk_nccl_rank r[P2PK_COLL_MAX_RANKS];
  for (int i = 0; i < n; i++) {
    snprintf(ids[i], sizeof ids[i], "h%d", i * sim_hosts / n);
    snprintf(bus[i], sizeof bus[i], "g%d", i);
    idp[i] = ids[i];
    r[i] = (p2pk_nccl_rank){sim_nccl, "machine", bus[i], ids[i]};
  }
  if (p2pk_hosts_group(idp, n, 0, &c->hosts) != P2PKIT_SUCCESS) return -1;
  char info[512];
  const int setting = p2pk_nccl_setting(p2pk_param_str("P2PKIT_NCCL"));
  return p2pk_nccl_comm_mode(setting, r, n, 0, &c->hosts, sim_nccl ? "" : "not installed",
                             &c->nccl_mode, info, sizeof info) == P2PKIT_SUCCESS ? 0 : -1;
}
/* The dump's words for a send/recv of one process in a group: both ends
 * there (the selector's `grouped`). */

static int make_comm(struct p2pkit_comm *c, int n, int staged, int multiproc) {
  memset(c, 0, sizeof *c);
  c->nranks = n;
  c->staged = staged;
  c->multiproc = multiproc;
  p2pk_algo_force f;
  if (sim_hosts_of(c, n) != 0 || p2pk_algo_force_from_env(&f) != P2PKIT_SUCCESS) {
    p2pk_hosts_free(&c->hosts);
    return -1;
  }
  if (f.algo == P2PK_ALGO_STAGED) c->staged = 1;
  if (!multiproc) {
    one_group.n = n;
    c->group = &one_group;
  }
  const p2pkit_status_t st = p2pk_comm_derive(c, SMS, p2pk_param_size("P2PKIT_BUFFER_SIZE"), NULL, &f);
  p2pk_hosts_free(&c->hosts); /* the selector keeps what it reads */
  if (st != P2PKIT_SUCCESS) return -1;
  if (c->sel.geom.ll128_cap)
    for (int t = 2; t < P2PK_ALGO_THREAD_STEPS; t++) c->sel.geom.ll128_per_sm[t] = ll128_per_sm(32 * t);
  return 0;
}

/* Eight ranks, a process each, on two simulated hosts with NCCL: where
 * the hierarchical path runs. */
static void two_hosts_comm(struct p2pkit_comm *c) {
  sim_nccl = 1, sim_hosts = 2;
  CHECK_EQ(make_comm(c, 8, 0, 1), 0);
  sim_nccl = 0, sim_hosts = 1;
}

/* A decision in the dump's words. */
static void text(char *o, size_t len, const p2pk_decision *d, int kind) {
  static const char *const names[P2PK_PATHS] = {"local", "kernel", "kernel", "ce-events",
                                                "ce-slots", "ce-direct", "ce-staged", "nccl",
                                                "hierarchical"};
  const p2pk_algo_choice *ch = &d->ch;
  if (d->path != P2PK_PATH_P2P && d->path != P2PK_PATH_STAGED) {
    snprintf(o, len, "%s", names[d->path]);
    return;
  }
  const char *lt = d->flags & P2PK_SEL_LAUNCH_THREAD ? " lt" : "";
  if (kind == SENDRECV) {
    snprintf(o, len, "kernel %dx%d c%u%s", ch->blocks, ch->threads, ch->chunk, lt);
    return;
  }
  snprintf(o, len, "kernel %s/%s %dx%d c%u%s%s%s%s", p2pk_algo_name(ch->algo),
           p2pk_proto_name(ch->proto), ch->blocks, ch->threads, ch->chunk, ch->ll128_x2 ? " x2" : "",
           d->flags & P2PK_SEL_ROOTED ? " rooted" : "", d->flags & P2PK_SEL_SELF_CE ? " self-ce" : "",
           lt);
}

/* What the selector decides for one key (send/recv, grouped: one process,
 * both ends in the group). */
static void decide(char *o, size_t len, const struct p2pkit_comm *c, int kind, size_t bytes,
                   int cap, int grouped, int in_place) {
  const p2pk_sel_key k = {kind, cap, grouped, in_place, 0, bytes, sim_ntype, P2PK_PEERS_RULES,
                         P2PK_AVG_NONE};
  p2pk_decision d;
  CHECK_EQ(p2pk_decide(&c->sel, &k, &d), P2PK_DECIDED);
  text(o, len, &d, kind);
}

static const char *const kind_names[KINDS] = {"all_reduce", "broadcast", "reduce", "all_gather",
                                              "reduce_scatter", "all_to_all", "send_recv"};

static size_t nsizes;
static size_t sizes[128];

static int cmp_size(const void *a, const void *b) {
  const size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

static void fill_sizes(void) {
  nsizes = 0;
  for (int k = 0; k <= 32; k++) {
    sizes[nsizes++] = (size_t)1 << k;
    if (k >= 2) sizes[nsizes++] = ((size_t)1 << k) - 1;             /* odd, just below */
    if (k >= 1 && k <= 31) sizes[nsizes++] = ((size_t)3 << k) + 1; /* odd, between */
  }
  qsort(sizes, nsizes, sizeof sizes[0], cmp_size);
}

/* The decisions of one key over every size, as runs "from-to: what" of
 * the sizes in order (a malloc'ed string). */
static char *runs(const struct p2pkit_comm *c, int kind, int cap, int grp, int ip) {
  char *out = NULL;
  size_t olen = 0;
  FILE *f = open_memstream(&out, &olen);
  char prev[160] = "", o[160] = "";
  size_t from = 0;
  for (size_t si = 0; si <= nsizes; si++) {
    if (si < nsizes) {
      decide(o, sizeof o, c, kind, sizes[si], cap, grp, ip);
    }
    if (si == nsizes || strcmp(o, prev) != 0) {
      if (si > 0) {
        if (from + 1 == si) fprintf(f, " %zu: %s;", sizes[from], prev);
        else fprintf(f, " %zu-%zu: %s;", sizes[from], sizes[si - 1], prev);
      }
      if (si < nsizes) snprintf(prev, sizeof prev, "%s", o);
      from = si;
    }
  }
  fclose(f);
  return out;
}

/* Every key's runs under the current settings: [staged][mp][kind][cap][grp][ip][n]. */
typedef char *table_t[2][2][KINDS][2][2][2][P2PK_COLL_MAX_RANKS + 1];

static char *init_failure(void) {
  char *m = NULL;
  size_t ml = 0;
  FILE *f = open_memstream(&m, &ml);
  fprintf(f, " init fails: %s", p2pkit_last_error());
  fclose(f);
  return m;
}

static void fill(table_t *t, int n0, int n1) {
  for (int staged = 0; staged < 2; staged++)
    for (int mp = 0; mp < 2; mp++)
      for (int n = n0; n <= n1; n++) {
        struct p2pkit_comm c;
        const int bad = make_comm(&c, n, staged, mp) != 0;
        for (int kind = 0; kind < KINDS; kind++)
          for (int cap = 0; cap < 2; cap++)
            for (int grp = 0; grp < 2; grp++)
              for (int ip = 0; ip < 2; ip++)
                (*t)[staged][mp][kind][cap][grp][ip][n] =
                    bad ? init_failure() : runs(&c, kind, cap, grp, kind == SENDRECV ? 0 : ip);
      }
}

static int same(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

typedef char *keyruns_t[2][2][P2PK_COLL_MAX_RANKS + 1]; /* [grp][ip][n] */

/* Does any merged key of ranks n..m differ from base's? */
static int differs(keyruns_t *k, keyruns_t *b, int g, int i, int gm, int im, int n, int m) {
  for (int q = n; q <= m; q++)
    for (int gg = 0; gg < 2; gg++)
      for (int ii = 0; ii < 2; ii++)
        if ((gm || gg == g) && (im || ii == i) && !same((*k)[gg][ii][q], (*b)[gg][ii][q])) return 1;
  return 0;
}

/* One key's lines: ranks with equal runs merged; with base, only what
 * differs from it. */
static void print_key(FILE *f, const char *prefix, int kind, keyruns_t *k, keyruns_t *b, int n0, int n1) {
  static const char *const ipn[3] = {" out", " in", " out|in"};
  static const char *const grpn[3] = {"alone", "group", "alone|group"};
  int gm = 1, im = 1; /* grouped / in place change nothing, at any rank count */
  for (int n = n0; n <= n1; n++) {
    for (int g = 0; g < 2; g++) im &= same((*k)[g][0][n], (*k)[g][1][n]);
    for (int i = 0; i < 2; i++) gm &= same((*k)[0][i][n], (*k)[1][i][n]);
  }
  for (int g = 0; g < (gm ? 1 : 2); g++)
    for (int i = 0; i < (im ? 1 : 2); i++)
      for (int n = n0, m; n <= n1; n = m + 1) {
        m = n;
        while (m < n1 && same((*k)[g][i][m + 1], (*k)[g][i][n])) m++;
        if (b && !differs(k, b, g, i, gm, im, n, m)) continue;
        fprintf(f, "%s %s%s n%d", prefix, grpn[gm ? 2 : g], kind == SENDRECV ? "" : ipn[im ? 2 : i], n);
        if (m > n) fprintf(f, "-%d", m);
        fprintf(f, ":%s\n", (*k)[g][i][n]);
      }
}

static void print(FILE *f, table_t *t, table_t *base, int n0, int n1) {
  for (int staged = 0; staged < 2; staged++)
    for (int mp = sim_hosts > 1; mp < 2; mp++) /* one process is one host */
      for (int kind = 0; kind < KINDS; kind++)
        for (int cap = 0; cap < 2; cap++) {
          char prefix[96];
          snprintf(prefix, sizeof prefix, "%s %s %s %s", kind_names[kind], mp ? "pg" : "1p",
                   staged ? "shm" : "p2p", cap ? "graph" : "eager");
          print_key(f, prefix, kind, &(*t)[staged][mp][kind][cap],
                    base ? &(*base)[staged][mp][kind][cap] : NULL, n0, n1);
        }
}

static void release(table_t *t) {
  char **p = &(*t)[0][0][0][0][0][0][0];
  for (size_t i = 0; i < sizeof *t / sizeof(char *); i++) free(p[i]), p[i] = NULL;
}

/* Settings that act on the choices: each dumped on its own, the rest at
 * their defaults. */
static const char *const settings[] = {
    "P2PKIT_ALGO=oneshot", "P2PKIT_ALGO=twoshot", "P2PKIT_ALGO=staged", "P2PKIT_PROTO=ll",
    "P2PKIT_PROTO=ll128", "P2PKIT_PROTO=simple", "P2PKIT_COLL_BLOCKS=8", "P2PKIT_COLL_THREADS=128",
    "P2PKIT_COLL_CHUNK=64K", "P2PKIT_MAX_BLOCKS=16", "P2PKIT_LL128_MAX=0", "P2PKIT_LL128_X2=0",
    "P2PKIT_BUFFER_SIZE=16M", "P2PKIT_COLL_MAILBOXES=32", "P2PKIT_ROOTED_TWOSHOT_MIN=0",
    "P2PKIT_CE_ALLREDUCE_MIN=1M", "P2PKIT_CE_REDUCE_SCATTER_MIN=1M", "P2PKIT_CE_REDUCE_MIN=0",
    "P2PKIT_CE_ALL_GATHER_MIN=2M", "P2PKIT_CE_ALL_TO_ALL_MIN=0", "P2PKIT_BCAST_CE_MIN=1M",
    "P2PKIT_SENDRECV_CE_MIN=1M", "P2PKIT_SENDRECV_CE_MIN=0", "P2PKIT_STAGED_CE_MIN=0",
    "P2PKIT_BCAST_SELF_CE=0", "P2PKIT_LAUNCH_THREADS=0", "P2PKIT_CE_LAND=16M",
    "P2PKIT_CE_CHUNK=1M", "CUDA_DEVICE_MAX_CONNECTIONS=2", "CUDA_DEVICE_MAX_CONNECTIONS=32"};

static void clear_env(void) {
  extern char **environ;
  for (int again = 1; again;) {
    again = 0;
    for (char **e = environ; *e; e++)
      if ((strncmp(*e, "P2PKIT_", 7) == 0 && strncmp(*e, "P2PKIT_DEBUG", 12) != 0) ||
          strncmp(*e, "CUDA_DEVICE_MAX_CONNECTIONS=", 28) == 0) {
        char name[128];
        const size_t k = (size_t)(strchr(*e, '=') - *e);
        snprintf(name, sizeof name, "%.*s", (int)k, *e);
        unsetenv(name);
        again = 1;
        break;
      }
  }
  p2pk_param_reset();
}

/* NCCL available: what differs from the defaults (made without it) for
 * every rank count. */
static const struct {
  const char *title, *setting;
  int hosts, ntype;
} nccl_dumps[] = {
    {"NCCL available, P2PKIT_NCCL=auto (the default)", NULL, 1, 0},
    {"NCCL available, P2PKIT_NCCL=1", "1", 1, 0},
    {"NCCL available, a type only NCCL carries (int8, uint32, uint64, fp8)", NULL, 1, 1},
    {"NCCL available, 2 hosts (ranks 0..n/2-1 on the first)", NULL, 2, 0},
    {"NCCL available, 3 hosts (ranks in thirds)", NULL, 3, 0},
};

static void dump_nccl(FILE *f, table_t *base) {
  static table_t t;
  for (size_t i = 0; i < sizeof nccl_dumps / sizeof nccl_dumps[0]; i++) {
    if (nccl_dumps[i].setting) setenv("P2PKIT_NCCL", nccl_dumps[i].setting, 1);
    p2pk_param_reset();
    sim_nccl = 1, sim_hosts = nccl_dumps[i].hosts, sim_ntype = nccl_dumps[i].ntype;
    fprintf(f, "# %s: what differs\n", nccl_dumps[i].title);
    fill(&t, 1, P2PK_COLL_MAX_RANKS);
    print(f, &t, base, 1, P2PK_COLL_MAX_RANKS);
    release(&t);
    sim_nccl = 0, sim_hosts = 1, sim_ntype = 0;
    unsetenv("P2PKIT_NCCL");
    p2pk_param_reset();
  }
}

static void dump_all(FILE *f) {
  fill_sizes();
  clear_env();
  static table_t base, t;
  fill(&base, 1, P2PK_COLL_MAX_RANKS);
  fprintf(f, "# defaults\n");
  print(f, &base, NULL, 1, P2PK_COLL_MAX_RANKS);
  /* Each setting on ranks 2-4 and 8: what differs from the defaults. */
  static const int ranges[][2] = {{2, 4}, {8, 8}};
  for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
    char name[64];
    const char *eq = strchr(settings[i], '=');
    snprintf(name, sizeof name, "%.*s", (int)(eq - settings[i]), settings[i]);
    setenv(name, eq + 1, 1);
    p2pk_param_reset();
    fprintf(f, "# %s: what differs\n", settings[i]);
    for (int r = 0; r < 2; r++) {
      fill(&t, ranges[r][0], ranges[r][1]);
      print(f, &t, &base, ranges[r][0], ranges[r][1]);
      release(&t);
    }
    unsetenv(name);
    p2pk_param_reset();
  }
  dump_nccl(f, &base);
  release(&base);
}

/* The runs ("sizes: what;") of line a that line b lacks. */
static void show_runs(const char *tag, const char *a, size_t alen, const char *b, size_t blen) {
  const char *colon = memchr(a, ':', alen);
  fprintf(stderr, "  %s %.*s:", tag, colon ? (int)(colon - a) : 0, a);
  for (const char *r = colon ? colon + 1 : a; r < a + alen;) {
    const char *end = memchr(r, ';', (size_t)(a + alen - r));
    const size_t len = end ? (size_t)(end - r) + 1 : (size_t)(a + alen - r);
    int found = 0;
    for (const char *q = b; q + len <= b + blen && !found; q++) found = memcmp(q, r, len) == 0;
    if (!found) fprintf(stderr, "%.*s", (int)len, r);
    r += len;
  }
  fputc('\n', stderr);
}

/* The dump against the golden file, the first differences shown. */
TEST(decisions_match_the_golden_file) {
  char *mine = NULL;
  size_t mlen = 0;
  FILE *m = open_memstream(&mine, &mlen);
  CHECK(m != NULL);
  if (!m) return;
  dump_all(m);
  fclose(m);
  FILE *g = popen("gzip -dc '" GOLDEN "'", "r");
  CHECK(g != NULL);
  if (!g) return;
  char *line = NULL;
  size_t cap = 0, at = 0, lineno = 0;
  int diffs = 0;
  ssize_t got;
  while ((got = getline(&line, &cap, g)) > 0) {
    lineno++;
    const size_t l = (size_t)got;
    if (at + l > mlen || memcmp(mine + at, line, l) != 0) {
      const char *nl = at < mlen ? memchr(mine + at, '\n', mlen - at) : NULL;
      const int ml = nl ? (int)(nl - (mine + at) + 1) : (int)(mlen - at);
      if (diffs++ < 20) {
        fprintf(stderr, "line %zu differs:\n", lineno);
        show_runs("golden", line, l, at < mlen ? mine + at : "", (size_t)ml);
        show_runs("now   ", at < mlen ? mine + at : "", (size_t)ml, line, l);
      }
    }
    const char *nl = at < mlen ? memchr(mine + at, '\n', mlen - at) : NULL;
    at = nl ? (size_t)(nl - mine) + 1 : mlen;
  }
  free(line);
  const int rc = pclose(g);
  CHECK_EQ(rc, 0);
  if (at != mlen) diffs++, fprintf(stderr, "the dump has %zu bytes more than the golden file\n", mlen - at);
  if (diffs) T_FAIL("%d lines differ from %s (regenerate with --write after an intended change)", diffs, GOLDEN);
  CHECK(lineno > 1000);
  free(mine);
}

/* NCCL available but P2PKIT_NCCL=0, and NCCL missing under auto: every
 * decision as the defaults' (what the golden file's first part pins). */
static void nccl_off_changes_nothing(void) {
  fill_sizes();
  clear_env();
  static table_t base, t;
  fill(&base, 1, P2PK_COLL_MAX_RANKS);
  setenv("P2PKIT_NCCL", "0", 1);
  p2pk_param_reset();
  sim_nccl = 1;
  fill(&t, 1, P2PK_COLL_MAX_RANKS);
  sim_nccl = 0;
  unsetenv("P2PKIT_NCCL");
  p2pk_param_reset();
  char **a = &base[0][0][0][0][0][0][0], **b = &t[0][0][0][0][0][0][0];
  size_t diffs = 0;
  for (size_t i = 0; i < sizeof base / sizeof(char *); i++)
    if ((a[i] || b[i]) && !same(a[i], b[i])) diffs++;
  CHECK_EQ(diffs, 0);
  release(&base);
  release(&t);
}

/* p2pkit perf --explain's text: every rule numbered, the thresholds with
 * their settings, the table's rows, and per size the decision p2pk_decide
 * makes, with the rule's number. */
static void explain_prints_the_rules_and_each_decision(void) {
  clear_env();
  struct p2pkit_comm c;
  CHECK_EQ(make_comm(&c, 4, 0, 0), 0);
  const size_t bytes[] = {4096, (size_t)64 << 20};
  char *text = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&text, &len);
  CHECK(m != NULL);
  if (!m) return;
  p2pk_comm_explain(&c, "allreduce", bytes, 2, 0, m);
  fclose(m);
  CHECK(strstr(text, "selector: 4 ranks, one process, P2P") != NULL);
  CHECK(strstr(text, " 1. ") != NULL);
  CHECK(strstr(text, "P2PKIT_CE_") != NULL);
  CHECK(strstr(text, "the kernels' algorithm table") != NULL);
  CHECK(strstr(text, "decisions for all_reduce, eager") != NULL);
  for (int i = 0; i < 2; i++) {
    p2pk_sel_key k = {.kind = P2PK_COLL_ALL_REDUCE, .bytes = bytes[i]};
    p2pk_decision d;
    CHECK_EQ(p2pk_decide(&c.sel, &k, &d), P2PK_DECIDED);
    char t[96], cell[128];
    p2pk_decision_text(&d, t, sizeof t);
    snprintf(cell, sizeof cell, "%12zu  %s (%d)", bytes[i], t, d.rule + 1);
    if (!strstr(text, cell)) T_FAIL("no '%s' in:\n%s", cell, text);
  }
  free(text);
  CHECK_EQ(p2pk_kind_parse("alltoall"), P2PK_COLL_ALL_TO_ALL);
  CHECK_EQ(p2pk_kind_parse("sendrecv"), P2PK_SENDRECV);
  CHECK_EQ(p2pk_kind_parse("all_gather"), P2PK_COLL_ALL_GATHER);
  CHECK_EQ(p2pk_kind_parse("gather"), -1);
}

/* P2PKIT_DEBUG=INFO: each decision logged with its key, decision and rule. */
static void info_logs_each_decision(void) {
  clear_env();
  struct p2pkit_comm c;
  CHECK_EQ(make_comm(&c, 2, 0, 1), 0);
  char path[] = "/tmp/p2pkit_sel_logXXXXXX";
  const int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd < 0) return;
  close(fd);
  setenv("P2PKIT_DEBUG", "INFO", 1);
  setenv("P2PKIT_DEBUG_FILE", path, 1);
  p2pk_log_reset();
  p2pk_sel_key k = {.kind = P2PK_COLL_BROADCAST, .bytes = 1000};
  p2pk_decision d;
  CHECK_EQ(p2pk_decide(&c.sel, &k, &d), P2PK_DECIDED);
  p2pk_sel_log(&c.sel, 1, &k, &d);
  /* NCCL available: 8 ranks on 2 hosts, an all-reduce goes hierarchical,
   * a broadcast through NCCL, each naming the rule that chose it */
  struct p2pkit_comm s;
  two_hosts_comm(&s);
  p2pk_sel_key ka = {.kind = P2PK_COLL_ALL_REDUCE, .bytes = 4096},
               kb = {.kind = P2PK_COLL_BROADCAST, .bytes = 64};
  p2pk_decision da, db;
  CHECK_EQ(p2pk_decide(&s.sel, &ka, &da), P2PK_DECIDED);
  p2pk_sel_log(&s.sel, 5, &ka, &da);
  CHECK_EQ(p2pk_decide(&s.sel, &kb, &db), P2PK_DECIDED);
  p2pk_sel_log(&s.sel, 5, &kb, &db);
  unsetenv("P2PKIT_DEBUG");
  unsetenv("P2PKIT_DEBUG_FILE");
  p2pk_log_reset();
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  char line[512] = "", l2[512] = "", l3[512] = "";
  if (f) {
    if (!fgets(line, sizeof line, f)) line[0] = 0;
    if (!fgets(l2, sizeof l2, f)) l2[0] = 0;
    if (!fgets(l3, sizeof l3, f)) l3[0] = 0;
    fclose(f);
  }
  unlink(path);
  if (!strstr(l2, "rank 5: all_reduce of 4096 B, 8 ranks, process per GPU, eager, alone, P2P, out "
              "of place, 2 hosts -> hierarchical (hierarchical; rule 4: spanning hosts: p2pkit "
              "inside each host, NCCL across hosts"))
    T_FAIL("logged '%s'", l2);
  if (!strstr(l3, "-> nccl (NCCL; rule 5: spanning hosts: NCCL over every rank")) T_FAIL("logged '%s'", l3);
  char want[256], dec[96];
  p2pk_decision_text(&d, dec, sizeof dec);
  snprintf(want, sizeof want, "rank 1: broadcast of 1000 B, 2 ranks, process per GPU, eager, alone, "
           "P2P, out of place -> %s (%s; rule %d: ", dec, p2pk_path_family(d.path), d.rule + 1);
  if (!strstr(line, want)) T_FAIL("logged '%s', wanted '%s'", line, want);
}

/* ------------------------------------------- what group.c once overrode -- */

static int same_decision(const p2pk_decision *a, const p2pk_decision *b) {
  return memcmp(a, b, sizeof *a) == 0; /* every decision starts zeroed */
}

/* A key of the dump's kind (the rules alone, capture given). */
static p2pk_sel_key key_of(int kind, int cap, int grouped, int in_place, size_t bytes) {
  p2pk_sel_key k = {kind, cap, grouped, in_place, 0, bytes, 0, P2PK_PEERS_RULES, P2PK_AVG_NONE};
  return k;
}

/* The capture status is asked only when the decision depends on it: the
 * eager and captured decisions differ in path or flags; else the decision
 * is the eager one, made without asking. */
static void capture_is_asked_only_when_it_matters(void) {
  clear_env();
  fill_sizes();
  static const int ns[] = {1, 2, 3, 4, 8};
  long asked = 0, not_asked = 0;
  for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
    for (int staged = 0; staged < 2; staged++)
      for (int mp = 0; mp < 2; mp++) {
        struct p2pkit_comm c;
        if (make_comm(&c, ns[ni], staged, mp) != 0) continue;
        for (int kind = 0; kind < KINDS; kind++)
          for (int g = 0; g < 2; g++)
            for (int ip = 0; ip < 2; ip++)
              for (size_t si = 0; si < nsizes; si++) {
                p2pk_sel_key k0 = key_of(kind, 0, g, ip, sizes[si]), k1 = k0, ku = k0;
                k1.capture = 1;
                ku.capture = -1;
                p2pk_decision d0, d1, du;
                CHECK_EQ(p2pk_decide(&c.sel, &k0, &d0), P2PK_DECIDED);
                CHECK_EQ(p2pk_decide(&c.sel, &k1, &d1), P2PK_DECIDED);
                const int r = p2pk_decide(&c.sel, &ku, &du);
                const int differ = d0.path != d1.path || d0.flags != d1.flags;
                if (differ) {
                  asked++;
                  CHECK_EQ(r, P2PK_DECIDE_ASK);
                } else {
                  not_asked++;
                  CHECK(r == P2PK_DECIDED && same_decision(&du, &d0));
                }
              }
      }
  CHECK(asked > 1000 && not_asked > 1000);
}

/* Four ranks with P2PKIT_NCCL=1 (NCCL simulated): one process driving
 * them all, and a process per GPU. */
static void nccl_comms(struct p2pkit_comm *one, struct p2pkit_comm *per) {
  setenv("P2PKIT_NCCL", "1", 1);
  p2pk_param_reset();
  sim_nccl = 1;
  CHECK_EQ(make_comm(one, 4, 0, 0), 0);
  CHECK_EQ(make_comm(per, 4, 0, 1), 0);
  sim_nccl = 0;
  unsetenv("P2PKIT_NCCL");
  p2pk_param_reset();
}

/* One process in the caller's group: a collective waits for its peers'
 * calls from the copy engines' threshold of one process (the rules' first
 * column of P2PK_FROM_EVENTS), or wherever the rules give it to NCCL; the
 * others are decided as the rules say in a group. Alone, or a process per
 * GPU, nothing waits. */
static void queued_calls_wait_where_their_peers_may_join(void) {
  clear_env();
  fill_sizes();
  long waited = 0;
  for (int n = 2; n <= 4; n++)
    for (int mp = 0; mp < 2; mp++) {
      struct p2pkit_comm c;
      CHECK_EQ(make_comm(&c, n, 0, mp), 0);
      for (int kind = 0; kind < P2PK_COLL_KINDS; kind++)
        for (size_t si = 0; si < nsizes; si++) {
          p2pk_sel_key q = key_of(kind, 0, 1, 0, sizes[si]), a = q;
          const p2pk_sel_key r = q;
          q.peers = P2PK_PEERS_QUEUED;
          a.peers = P2PK_PEERS_ALONE;
          a.grouped = 0;
          p2pk_decision dq, dr, da;
          const size_t from = c.sel.from[P2PK_FROM_EVENTS][kind];
          const int want = !mp && from && sizes[si] >= from;
          const int got = p2pk_decide(&c.sel, &q, &dq);
          CHECK_EQ(got, want ? P2PK_DECIDE_WAIT : P2PK_DECIDED);
          waited += got == P2PK_DECIDE_WAIT;
          CHECK_EQ(p2pk_decide(&c.sel, &r, &dr), P2PK_DECIDED);
          if (got == P2PK_DECIDED) CHECK(same_decision(&dq, &dr));
          CHECK_EQ(p2pk_decide(&c.sel, &a, &da), P2PK_DECIDED);
        }
    }
  CHECK(waited > 0);
  /* NCCL for every call (P2PKIT_NCCL=1): one process waits at every size,
   * a process per GPU at none. */
  struct p2pkit_comm one, per;
  nccl_comms(&one, &per);
  p2pk_sel_key q = key_of(P2PK_COLL_ALL_GATHER, 0, 1, 0, 64);
  q.peers = P2PK_PEERS_QUEUED;
  p2pk_decision d;
  CHECK_EQ(p2pk_decide(&one.sel, &q, &d), P2PK_DECIDE_WAIT);
  CHECK_EQ(p2pk_decide(&per.sel, &q, &d), P2PK_DECIDED);
  CHECK_EQ(d.path, P2PK_PATH_NCCL);
}

/* One process, NCCL chosen by the rules: NCCL takes every rank's call in
 * one group, so one rank's call without its peers' goes to the kernels
 * (what the kernels decide for it when the ranks' captures differ, marked
 * P2PK_SEL_NCCL_APART), and a type only NCCL carries is refused; its peers'
 * streams capturing unlike its own, the kernels by its own capture, or the
 * refusal. A process per GPU keeps NCCL. */
static void one_process_calls_apart_from_their_peers_take_the_kernels(void) {
  clear_env();
  struct p2pkit_comm one, per;
  nccl_comms(&one, &per);
  static const size_t bytes[] = {64, 1 << 20, (size_t)256 << 20};
  for (int kind = 0; kind < P2PK_COLL_KINDS; kind++)
    for (int cap = 0; cap < 2; cap++)
      for (size_t b = 0; b < 3; b++) {
        p2pk_sel_key k = key_of(kind, cap, 0, 0, bytes[b]), m = k;
        p2pk_decision rules, alone, mixed;
        CHECK_EQ(p2pk_decide(&one.sel, &k, &rules), P2PK_DECIDED);
        CHECK_EQ(rules.path, P2PK_PATH_NCCL);
        m.peers = P2PK_PEERS_MIXED;
        CHECK_EQ(p2pk_decide(&one.sel, &m, &mixed), P2PK_DECIDED);
        CHECK_EQ(mixed.path, P2PK_PATH_P2P);
        CHECK_EQ(mixed.rule, p2pk_sel_rule_count() - 1);
        CHECK_EQ(mixed.flags & P2PK_SEL_LAUNCH_THREAD, 0);
        k.peers = P2PK_PEERS_ALONE;
        CHECK_EQ(p2pk_decide(&one.sel, &k, &alone), P2PK_DECIDED);
        CHECK_EQ(alone.flags, mixed.flags | P2PK_SEL_NCCL_APART);
        alone.flags = mixed.flags;
        CHECK(same_decision(&alone, &mixed));
        CHECK_EQ(p2pk_decide(&per.sel, &k, &alone), P2PK_DECIDED);
        CHECK_EQ(alone.path, P2PK_PATH_NCCL);
        k.nccl_type = m.nccl_type = 1;
        CHECK_EQ(p2pk_decide(&one.sel, &k, &alone), P2PK_DECIDE_NCCL_APART);
        CHECK_EQ(p2pk_decide(&one.sel, &m, &mixed), P2PK_DECIDE_NCCL_MIXED);
        CHECK_EQ(p2pk_decide(&per.sel, &k, &alone), P2PK_DECIDED);
      }
}

/* Spanning hosts: the hierarchical path divides an average once, by a
 * floating type's pre-multiplied sum in NCCL; an integer average, or NCCL
 * without that sum, goes through NCCL over every rank (one division). */
static void averages_the_hierarchical_path_cannot_divide_go_flat(void) {
  clear_env();
  struct p2pkit_comm c;
  two_hosts_comm(&c);
  static const int kinds[] = {P2PK_COLL_ALL_REDUCE, P2PK_COLL_REDUCE_SCATTER};
  for (int premul = 0; premul < 2; premul++)
    for (int i = 0; i < 2; i++)
      for (int avg = P2PK_AVG_NONE; avg <= P2PK_AVG_INT; avg++) {
        c.sel.premul = premul;
        p2pk_sel_key k = key_of(kinds[i], 0, 0, 0, 4096);
        k.avg = avg;
        p2pk_decision d;
        CHECK_EQ(p2pk_decide(&c.sel, &k, &d), P2PK_DECIDED);
        const int flat = avg == P2PK_AVG_INT || (avg == P2PK_AVG_FLOAT && !premul);
        CHECK_EQ(d.path, flat ? P2PK_PATH_NCCL : P2PK_PATH_HIER);
        CHECK_EQ(d.flags, flat ? P2PK_SEL_AVG_FLAT : 0u);
      }
  p2pk_sel_key b = key_of(P2PK_COLL_BROADCAST, 0, 0, 0, 4096);
  b.avg = P2PK_AVG_INT; /* no average, but the key may say so: only the hierarchical path cares */
  p2pk_decision d;
  CHECK_EQ(p2pk_decide(&c.sel, &b, &d), P2PK_DECIDED);
  CHECK(d.path == P2PK_PATH_NCCL && d.flags == 0);
}

/* --------------------------------------------- what each path can carry -- */

#include "coll/paths/path.h"

#include "coll/paths/hier.h"

/* Every type's average as a call's key says it, spanning hosts: the
 * hierarchical path takes only one whose type has the scalar 1/n for
 * NCCL's pre-multiplied sum (its one division across hosts); every other
 * goes through NCCL over every rank, so the path never meets an average
 * it cannot divide. The scalars: 1/n rounded to the type. */
static void the_hierarchical_path_takes_only_averages_it_can_divide(void) {
  clear_env();
  struct p2pkit_comm c;
  two_hosts_comm(&c);
  c.sel.premul = 1;
  static const int kinds[] = {P2PK_COLL_ALL_REDUCE, P2PK_COLL_REDUCE_SCATTER};
  int hier = 0;
  for (int t = 0; t < P2PKIT_DTYPE_COUNT; t++)
    for (int i = 0; i < 2; i++) {
      p2pk_call call;
      memset(&call, 0, sizeof call);
      call.kind = kinds[i], call.dtype = (p2pkit_dtype_t)t, call.op = P2PKIT_AVG, call.capture = 0;
      call.bytes = 4096, call.esize = p2pkit_dtype_size(call.dtype);
      p2pk_sel_key k;
      p2pk_call_key(&call, &k);
      k.peers = P2PK_PEERS_RULES;
      p2pk_decision d;
      CHECK_EQ(p2pk_decide(&c.sel, &k, &d), P2PK_DECIDED);
      unsigned char scalar[8];
      const int has = p2pk_hier_premul_scalar(call.dtype, c.nranks, scalar) == 0;
      hier += d.path == P2PK_PATH_HIER;
      if (d.path == P2PK_PATH_HIER && !has)
        T_FAIL("avg of %s goes to the hierarchical path, which has no 1/n for it",
               p2pkit_dtype_name(call.dtype));
      if (!has && d.path != P2PK_PATH_NCCL)
        T_FAIL("avg of %s goes to %s, not NCCL over every rank", p2pkit_dtype_name(call.dtype),
               p2pk_path_name(d.path));
    }
  CHECK_EQ(hier, 2 * 4); /* float32, float64, bfloat16, float16 */
  unsigned char b[8];
  float f;
  double g;
  uint16_t h;
  CHECK_EQ(p2pk_hier_premul_scalar(P2PKIT_FLOAT32, 8, b), 0);
  memcpy(&f, b, 4);
  CHECK(f == 0.125f);
  CHECK_EQ(p2pk_hier_premul_scalar(P2PKIT_FLOAT64, 3, b), 0);
  memcpy(&g, b, 8);
  CHECK(g == 1.0 / 3.0);
  CHECK_EQ(p2pk_hier_premul_scalar(P2PKIT_BFLOAT16, 3, b), 0);
  memcpy(&h, b, 2);
  CHECK_EQ(h, 0x3eab); /* 0x3eaaaaab rounded to nearest even */
  CHECK_EQ(p2pk_hier_premul_scalar(P2PKIT_FLOAT16, 3, b), 0);
  memcpy(&h, b, 2);
  CHECK_EQ(h, 0x3555);
  CHECK_EQ(p2pk_hier_premul_scalar(P2PKIT_FLOAT16, 16, b), 0);
  memcpy(&h, b, 2);
  CHECK_EQ(h, 0x2c00);
  CHECK_EQ(p2pk_hier_premul_scalar(P2PKIT_INT32, 2, b), -1);
  CHECK_EQ(p2pk_hier_premul_scalar(P2PKIT_FLOAT8_E4M3, 2, b), -1);
}

/* The paths a rule can choose: its own, or the kernels of either transport. */
static int rule_paths(const p2pk_rule *r, int *paths) {
  if (r->path != P2PK_RULE_KERNEL) return paths[0] = r->path, 1;
  int n = 0;
  if (r->xport != P2PK_RULE_SHM) paths[n++] = P2PK_PATH_P2P;
  if (r->xport != P2PK_RULE_P2P) paths[n++] = P2PK_PATH_STAGED;
  return n;
}

/* Every rule within the capability of the paths it chooses (NCCL's
 * canConnect: each path says what it can carry, path.h): its kinds, its
 * modes (spanning hosts for the rules that need them), its transports, its
 * capture states; a path that takes only whole groups only from rules of
 * one process and a group. */
static void every_rule_lies_within_its_paths(void) {
  for (int i = 0; i < p2pk_sel_rule_count(); i++) {
    const p2pk_rule *r = p2pk_sel_rule_at(i);
    int paths[2];
    const int np = rule_paths(r, paths);
    for (int j = 0; j < np; j++) {
      const p2pk_path *p = p2pk_paths[paths[j]];
      const uint32_t modes = r->hosts == P2PK_RULE_H_SPAN || r->hosts == P2PK_RULE_H_HIER
                                 ? P2PK_MODE_SPAN
                             : r->mode == P2PK_RULE_ONE     ? P2PK_MODE_ONE
                             : r->mode == P2PK_RULE_PER_GPU ? P2PK_MODE_PER_GPU
                                                            : P2PK_MODE_ONE | P2PK_MODE_PER_GPU;
      const uint32_t xports = paths[j] == P2PK_PATH_P2P      ? P2PK_XPORT_P2P
                              : paths[j] == P2PK_PATH_STAGED ? P2PK_XPORT_SHM
                              : r->xport == P2PK_RULE_P2P    ? P2PK_XPORT_P2P
                              : r->xport == P2PK_RULE_SHM    ? P2PK_XPORT_SHM
                                                             : P2PK_XPORT_P2P | P2PK_XPORT_SHM;
      const uint32_t caps = r->capture == P2PK_RULE_EAGER   ? P2PK_CAPTURE_EAGER
                            : r->capture == P2PK_RULE_GRAPH ? P2PK_CAPTURE_GRAPH
                                                            : P2PK_CAPTURE_EAGER | P2PK_CAPTURE_GRAPH;
      if ((r->kinds & ~p->kinds) || (modes & ~p->modes) || (xports & ~p->transports) ||
          (caps & ~p->captures))
        T_FAIL("rule %d (%s) chooses %s beyond what it carries", i + 1, r->why,
               p2pk_path_name(paths[j]));
      if (!p->launch && (r->grouped != P2PK_RULE_GROUP || r->mode != P2PK_RULE_ONE))
        T_FAIL("rule %d chooses %s, which takes only every rank's call in one group", i + 1,
               p2pk_path_name(paths[j]));
    }
  }
}

/* Every decision of the dump's space (and of the keys group.c asks: a call
 * queued in a group, alone, among peers capturing unlike it) goes to a path
 * that can carry it. */
static int decisions_within(const struct p2pkit_comm *c, long *n) {
  static const int peers[] = {P2PK_PEERS_RULES, P2PK_PEERS_QUEUED, P2PK_PEERS_ALONE,
                              P2PK_PEERS_MIXED};
  int bad = 0;
  for (int kind = 0; kind < KINDS; kind++)
    for (int cap = 0; cap < 2; cap++)
      for (int g = 0; g < 2; g++)
        for (int ip = 0; ip < 2; ip++)
          for (size_t pi = 0; pi < 4; pi++)
            for (size_t si = 0; si < nsizes; si += 3) {
              p2pk_sel_key k = key_of(kind, cap, g, ip, sizes[si]);
              k.peers = peers[pi];
              k.nccl_type = sim_ntype;
              p2pk_decision d;
              if (p2pk_decide(&c->sel, &k, &d) != P2PK_DECIDED) continue;
              ++*n;
              if (!p2pk_path_can(p2pk_paths[d.path], &c->sel, &k) && bad++ < 5) {
                char key[160];
                p2pk_sel_key_text(&c->sel, &k, key, sizeof key);
                T_FAIL("%s (peers %d) -> %s, which cannot carry it", key, k.peers,
                       p2pk_path_name(d.path));
              }
            }
  return bad;
}

static void every_decision_goes_to_a_path_that_carries_it(void) {
  clear_env();
  fill_sizes();
  long n = 0;
  for (int v = -1; v < (int)(sizeof nccl_dumps / sizeof nccl_dumps[0]); v++) {
    if (v >= 0 && nccl_dumps[v].setting) setenv("P2PKIT_NCCL", nccl_dumps[v].setting, 1);
    p2pk_param_reset();
    sim_nccl = v >= 0, sim_hosts = v >= 0 ? nccl_dumps[v].hosts : 1;
    sim_ntype = v >= 0 ? nccl_dumps[v].ntype : 0;
    for (int staged = 0; staged < 2; staged++)
      for (int mp = sim_hosts > 1; mp < 2; mp++)
        for (int r = 1; r <= P2PK_COLL_MAX_RANKS; r++) {
          struct p2pkit_comm c;
          if (make_comm(&c, r, staged, mp) == 0) decisions_within(&c, &n);
        }
    sim_nccl = 0, sim_hosts = 1, sim_ntype = 0;
    unsetenv("P2PKIT_NCCL");
  }
  p2pk_param_reset();
  CHECK(n > 100000);
}

int t_failed;
const char *t_current;

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--write") == 0) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "gzip -9n > '%s'", argv[2]);
    FILE *f = popen(cmd, "w");
    if (!f) return 1;
    dump_all(f);
    return pclose(f) == 0 ? 0 : 1;
  }
  if (argc >= 5 && strcmp(argv[1], "--explain") == 0) {
    /* --explain N one|per-gpu KIND [--nccl] [--hosts H]: the selector of
     * an H200 machine (SMS multiprocessors, P2P) as p2pkit perf --explain
     * prints it; --nccl: NCCL available (P2PKIT_NCCL as set); --hosts:
     * the ranks on H hosts. */
    for (int a = 5; a < argc; a++) {
      if (strcmp(argv[a], "--nccl") == 0) sim_nccl = 1;
      else if (strcmp(argv[a], "--hosts") == 0 && a + 1 < argc) sim_hosts = atoi(argv[++a]);
      else return 2;
    }
    struct p2pkit_comm c;
    if (make_comm(&c, atoi(argv[2]), 0, strcmp(argv[3], "per-gpu") == 0) != 0) return 1;
    for (size_t b = 1; b <= ((size_t)1 << 32); b *= 8) sizes[nsizes++] = b;
    p2pk_comm_explain(&c, argv[4], sizes, (int)nsizes, 0, stdout);
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "--print") == 0) {
    dump_all(stdout);
    return 0;
  }
  static const t_case cases[] = {T_CASE(decisions_match_the_golden_file),
                                 T_CASE(nccl_off_changes_nothing),
                                 T_CASE(explain_prints_the_rules_and_each_decision),
                                 T_CASE(info_logs_each_decision),
                                 T_CASE(capture_is_asked_only_when_it_matters),
                                 T_CASE(queued_calls_wait_where_their_peers_may_join),
                                 T_CASE(one_process_calls_apart_from_their_peers_take_the_kernels),
                                 T_CASE(averages_the_hierarchical_path_cannot_divide_go_flat),
                                 T_CASE(the_hierarchical_path_takes_only_averages_it_can_divide),
                                 T_CASE(every_rule_lies_within_its_paths),
                                 T_CASE(every_decision_goes_to_a_path_that_carries_it)};
  return t_main_cases(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
