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
  const p2pk_sel_key k = {kind, cap, grouped, in_place, 0, bytes, sim_ntype};
  p2pk_decision d;
  p2pk_select(&c->sel, &k, &d);
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
 * their settings, the table's rows, and per size the decision p2pk_select
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
    p2pk_select(&c.sel, &k, &d);
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
  p2pk_select(&c.sel, &k, &d);
  p2pk_sel_log(&c.sel, 1, &k, &d);
  /* NCCL available: 8 ranks on 2 hosts, an all-reduce goes hierarchical,
   * a broadcast through NCCL, each naming the rule that chose it */
  sim_nccl = 1, sim_hosts = 2;
  struct p2pkit_comm s;
  CHECK_EQ(make_comm(&s, 8, 0, 1), 0);
  sim_nccl = 0, sim_hosts = 1;
  p2pk_sel_key ka = {.kind = P2PK_COLL_ALL_REDUCE, .bytes = 4096},
               kb = {.kind = P2PK_COLL_BROADCAST, .bytes = 64};
  p2pk_decision da, db;
  p2pk_select(&s.sel, &ka, &da);
  p2pk_sel_log(&s.sel, 5, &ka, &da);
  p2pk_select(&s.sel, &kb, &db);
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
                                 T_CASE(info_logs_each_decision)};
  return t_main_cases(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
