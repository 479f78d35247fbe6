/* SPDX-License-Identifier: BSD-3-Clause */
/* The desync report without a GPU (src/trace): the text format written and
 * read back to the same bytes; every line the reader refuses, and a dump
 * cut at any byte refused; PyTorch's flight recorder pickles read (real
 * gloo dumps and one of ProcessGroupNCCL's shape), code-running opcodes
 * and every cut refused, a list that contains itself read without a loop;
 * and the verdict of every recorded job in tests/data/trace (a skipped
 * call, another count, a dead rank, a hang; p2pkit's and torch's), the
 * newest dump of a rank winning, the probe's word on a rank without a
 * dump, the headline among several communicators, and a directory's
 * report too large refused beside one read whole. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "trace/trace.h"

#define TRACE_DATA P2PK_TEST_DATA "/trace"

/* ---------------------------------------------------------- the format -- */

static p2pk_tcall call_of(uint64_t seq, const char *kind, uint64_t count) {
  p2pk_tcall k;
  memset(&k, 0, sizeof k);
  k.seq = seq;
  snprintf(k.kind, sizeof k.kind, "%s", kind);
  k.p2p = strcmp(kind, "send") == 0 || strcmp(kind, "recv") == 0;
  snprintf(k.dtype, sizeof k.dtype, "float32");
  k.count = count;
  k.root = k.p2p ? 1 : -1;
  snprintf(k.op, sizeof k.op, "%s", k.p2p ? "-" : "sum");
  snprintf(k.path, sizeof k.path, "p2p-kernel");
  k.stream = 0x7f00 + seq;
  k.t_ns = 1000 * seq;
  snprintf(k.state, sizeof k.state, "launched");
  return k;
}

/* A dump of rank `rank` of 3 with calls 1..n (collectives), all fields set. */
static void sample(p2pk_tdump *d, int rank, int n) {
  memset(d, 0, sizeof *d);
  d->source = P2PK_TSRC_P2PKIT;
  snprintf(d->version, sizeof d->version, "0.1.0");
  snprintf(d->comm, sizeof d->comm, "00000000deadbeef");
  d->rank = rank, d->nranks = 3;
  snprintf(d->host, sizeof d->host, "node 7:boot");
  d->pid = 100 + rank, d->pidns = 4026531836u, d->device = rank;
  snprintf(d->gpu, sizeof d->gpu, "0000:1B:00.0");
  snprintf(d->reason, sizeof d->reason, "error: rank 2 did not take part\x1b[2J");
  d->mono_ns = 5, d->real_ns = 6;
  snprintf(d->error, sizeof d->error, "timeout");
  d->error_peer = 2;
  d->peers = calloc(3, sizeof *d->peers);
  for (int r = 0; r < 3; r++) d->peers[r] = (p2pk_tpeer){100 + r, 1, r == rank ? '-' : r == 2 ? 'n' : 'y'};
  d->ring = 64, d->recorded = (uint64_t)n + 1;
  d->calls = calloc((size_t)n + 1, sizeof *d->calls);
  for (int i = 0; i < n; i++) d->calls[d->ncalls++] = call_of((uint64_t)i + 1, "all_reduce", 1024);
  d->calls[d->ncalls++] = call_of(1, "send", 7);
}

static char *written(const p2pk_tdump *d, size_t *len) {
  const size_t cap = p2pk_tdump_max_bytes(d->nranks, d->ncalls);
  char *buf = malloc(cap);
  *len = p2pk_tdump_write(d, buf, cap);
  return buf;
}

TEST(a_dump_reads_back_to_the_same_bytes) {
  p2pk_tdump d, back;
  sample(&d, 1, 5);
  size_t len = 0, len2 = 0;
  char *text = written(&d, &len);
  CHECK(len > 0);
  /* The reason's escape byte was written as '?': a report never carries
   * a terminal's control sequence. */
  CHECK(strstr(text, "reason error: rank 2 did not take part?[2J\n") != NULL);
  CHECK(strstr(text, "host node 7:boot\n") != NULL);
  CHECK_OK(p2pk_tdump_parse("sample", text, len, &back));
  CHECK_STR(back.comm, "00000000deadbeef");
  CHECK_EQ(back.rank, 1);
  CHECK_EQ(back.nranks, 3);
  CHECK_EQ(back.pid, 101);
  CHECK_STR(back.error, "timeout");
  CHECK_EQ(back.error_peer, 2);
  CHECK_EQ(back.peers[2].alive, 'n');
  CHECK_EQ(back.peers[1].alive, '-');
  CHECK_EQ(back.ncalls, 6);
  CHECK_EQ(back.calls[4].seq, 5);
  CHECK_EQ(back.calls[5].p2p, 1);
  CHECK_STR(back.calls[5].kind, "send");
  CHECK_EQ(back.calls[5].root, 1);
  CHECK_EQ(back.calls[0].root, -1);
  CHECK_EQ(back.calls[2].stream, 0x7f03);
  char *again = written(&back, &len2);
  CHECK_EQ(len2, len);
  CHECK(len2 == len && memcmp(again, text, len) == 0);
  /* Too small a buffer: nothing, not a cut dump. */
  CHECK_EQ(p2pk_tdump_write(&d, text, len - 1), 0);
  free(again);
  free(text);
  p2pk_tdump_free(&back);
  p2pk_tdump_free(&d);
}

TEST(a_dump_cut_at_any_byte_is_refused) {
  p2pk_tdump d, back;
  sample(&d, 0, 3);
  size_t len = 0;
  char *text = written(&d, &len);
  for (size_t cut = 0; cut < len; cut++) {
    const p2pkit_status_t st = p2pk_tdump_parse("cut", text, cut, &back);
    p2pk_tdump_free(&back);
    if (st != P2PKIT_ERR_PARSE) T_FAIL("a dump cut to %zu of %zu bytes was not refused", cut, len);
  }
  free(text);
  p2pk_tdump_free(&d);
}

/* The sample's text with the first `from` replaced by `to`. */
static char *edited(const char *from, const char *to, size_t *len) {
  p2pk_tdump d;
  sample(&d, 0, 2);
  size_t n = 0;
  char *text = written(&d, &n);
  p2pk_tdump_free(&d);
  char *at = strstr(text, from);
  if (!at) {
    T_FAIL("the sample has no `%s`", from);
    *len = n;
    return text;
  }
  char *out = malloc(n + strlen(to) + 1);
  const size_t head = (size_t)(at - text);
  memcpy(out, text, head);
  strcpy(out + head, to);
  strcat(out, at + strlen(from));
  *len = strlen(out);
  free(text);
  return out;
}

TEST(every_malformed_line_is_refused_by_name) {
  static const struct {
    const char *from, *to, *why;
  } cases[] = {
      {"p2pkit-trace 1\n", "p2pkit-trace 2\n", "format version 2"},
      {"version 0.1.0\n", "versoin 0.1.0\n", "expected a `version` line"},
      {"comm 00000000deadbeef", "comm 00000000deadbeeg", "not 16 hexadecimal digits"},
      {"rank 0 3\n", "rank 3 3\n", "whole number up to 2"},
      {"rank 0 3\n", "rank 0 0\n", "0 ranks"},
      {"rank 0 3\n", "rank 0 3 4\n", "takes 2 fields, not 3"},
      {"rank 0 3\n", "rank 0  3\n", "empty field"},
      {"pid 100 ", "pid 0100 ", "not a whole number"},
      {"pid 100 ", "pid -100 ", "not a whole number"},
      {"pid 100 ", "pid 99999999999999999999 ", "not a whole number up to"},
      {"error timeout 2\n", "error sad 2\n", "unknown error"},
      {"error timeout 2\n", "error none 2\n", "no error, yet a rank"},
      {"peer 1 101", "peer 2 101", "peer 2 where peer 1 belongs"},
      {"local -\n", "local y\n", "own peer line says alive -"},
      {"local y\n", "nearby y\n", "local or remote"},
      {"call coll 2 all_reduce", "call coll 1 all_reduce", "numbers only grow"},
      {"call coll 1 all_reduce", "call coll 1 all_reduse", "is not a collective"},
      {"call p2p 1 send", "call p2p 1 all_reduce", "is not a send or recv"},
      {"1024 - sum", "1024 3 sum", "whole number up to 2"},
      {"0x7f01", "0x7G01", "not a hexadecimal number"},
      {"launched\ncall coll 2", "landed\ncall coll 2", "unknown state"},
      {"ring 64 3\n", "ring 2 3\n", "more calls than the ring holds"},
      {"ring 64 3\n", "ring 64 1\n", "the file has 3"},
      {"end 3\n", "end 4\n", "`end 4` after 3 calls"},
      {"end 3\n", "end 3\nmore\n", "text after the `end` line"},
      {"host node 7", "host node\x07 7", "control bytes"},
      {"host node 7", "host node\t7", "control bytes"},
      {"host node 7", "host node\xc3\x28 7", "broken UTF-8"},
      {"host node 7", "host \n", "empty field in the `host` line"},
      {"host node 7:boot\n", "host\n", "takes 1 field, not 0"},
      {"reason ", "reason ", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t len = 0;
    char *text = edited(cases[i].from, cases[i].to, &len);
    p2pk_tdump d;
    const p2pkit_status_t st = p2pk_tdump_parse("edited", text, len, &d);
    p2pk_tdump_free(&d);
    if (!cases[i].why) {
      if (st != P2PKIT_SUCCESS) T_FAIL("the sample itself is refused: %s", p2pkit_last_error());
    } else if (st != P2PKIT_ERR_PARSE || !strstr(p2pkit_last_error(), cases[i].why)) {
      T_FAIL("`%s` -> `%s`: wanted a refusal saying \"%s\", got %d: %s", cases[i].from, cases[i].to,
             cases[i].why, (int)st, p2pkit_last_error());
    } else if (strncmp(p2pkit_last_error(), "edited:", 7) != 0) {
      T_FAIL("the refusal does not name the file and line: %s", p2pkit_last_error());
    }
    free(text);
  }
  /* A NUL byte inside a line, and a line past its bound. */
  size_t len = 0;
  char *text = edited("host node 7", "host node", &len);
  text[strstr(text, "host node") - text + 7] = '\0';
  p2pk_tdump d;
  CHECK_EQ(p2pk_tdump_parse("nul", text, len, &d), P2PKIT_ERR_PARSE);
  CHECK(strstr(p2pkit_last_error(), "NUL") != NULL);
  p2pk_tdump_free(&d);
  free(text);
  char longer[1200];
  memset(longer, 'x', sizeof longer - 1);
  longer[sizeof longer - 1] = '\0';
  char line[1300];
  snprintf(line, sizeof line, "reason %s\n", longer);
  text = edited("reason error: rank 2 did not take part?[2J\n", line, &len);
  CHECK_EQ(p2pk_tdump_parse("long", text, len, &d), P2PKIT_ERR_PARSE);
  CHECK(strstr(p2pkit_last_error(), "bytes (at most 1024)") != NULL);
  p2pk_tdump_free(&d);
  free(text);
}

/* ------------------------------------------------ the flight recorder -- */

static unsigned char *file_bytes(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    T_FAIL("cannot open %s", path);
    return NULL;
  }
  unsigned char *buf = malloc(1 << 20);
  *len = fread(buf, 1, 1 << 20, f);
  fclose(f);
  return buf;
}

TEST(a_gloo_flight_recorder_dump_reads) {
  size_t len = 0, n = 0;
  unsigned char *b = file_bytes(TRACE_DATA "/fr_skip/nccl_trace_rank_1", &len);
  p2pk_tdump *d = NULL;
  CHECK_EQ(p2pk_fr_rank_of("/x/nccl_trace_rank_12"), 12);
  CHECK_EQ(p2pk_fr_rank_of("nccl_trace_rank_"), -1);
  CHECK_OK(p2pk_fr_read("fr_skip/1", b, len, 1, &d, &n));
  CHECK_EQ(n, 1);
  if (n == 1) {
    CHECK_STR(d[0].comm, "0");
    CHECK_EQ(d[0].source, P2PK_TSRC_TORCH);
    CHECK_EQ(d[0].nranks, 3); /* gloo's one group is keyed "" in pg_config */
    CHECK_EQ(d[0].rank, 1);
    CHECK_EQ(d[0].ncalls, 3);
    CHECK_STR(d[0].calls[2].kind, "all_gather");
    CHECK_EQ(d[0].calls[2].seq, 3);
    CHECK_EQ(d[0].calls[0].count, 1024);
    CHECK_STR(d[0].calls[0].dtype, "Float");
    CHECK_STR(d[0].calls[0].state, "scheduled");
  }
  for (size_t i = 0; i < n; i++) p2pk_tdump_free(&d[i]);
  free(d);
  free(b);
}

TEST(an_nccl_shaped_dump_reads_every_group) {
  size_t len = 0, n = 0;
  unsigned char *b = file_bytes(TRACE_DATA "/fr_nccl/nccl_trace_rank_0", &len);
  p2pk_tdump *d = NULL;
  CHECK_OK(p2pk_fr_read("fr_nccl/0", b, len, 0, &d, &n));
  CHECK_EQ(n, 2);
  if (n == 2) {
    CHECK_STR(d[0].comm, "0");
    CHECK_STR(d[1].comm, "1");
    CHECK_EQ(d[1].nranks, 2);
    CHECK_EQ(d[1].members[1], 2);
    CHECK_EQ(d[0].calls[0].count, 4096 * 1024);
    CHECK_STR(d[0].calls[4].state, "started");
    CHECK_STR(d[1].calls[5].kind, "send");
    CHECK_EQ(d[1].calls[5].p2p, 1);
    CHECK_EQ(d[1].calls[5].root, 1);
  }
  for (size_t i = 0; i < n; i++) p2pk_tdump_free(&d[i]);
  free(d);
  /* Rank 1 is no member of group 1: it gets group 0 only. */
  free(b);
  b = file_bytes(TRACE_DATA "/fr_nccl/nccl_trace_rank_1", &len);
  CHECK_OK(p2pk_fr_read("fr_nccl/1", b, len, 1, &d, &n));
  CHECK_EQ(n, 1);
  for (size_t i = 0; i < n; i++) p2pk_tdump_free(&d[i]);
  free(d);
  free(b);
}

TEST(a_flight_recorder_dump_cut_at_any_byte_is_refused) {
  size_t len = 0;
  unsigned char *b = file_bytes(TRACE_DATA "/fr_nccl/nccl_trace_rank_2", &len);
  for (size_t cut = 0; b && cut < len; cut++) {
    p2pk_tdump *d = NULL;
    size_t n = 0;
    if (p2pk_fr_read("cut", b, cut, 2, &d, &n) != P2PKIT_ERR_PARSE)
      T_FAIL("a pickle cut to %zu of %zu bytes was not refused", cut, len);
    for (size_t i = 0; i < n; i++) p2pk_tdump_free(&d[i]);
    free(d);
  }
  free(b);
}

/* {"entries": [...]} with the pickle bytes `mid` as the list's items. */
static p2pkit_status_t read_pickle(const char *mid, size_t midlen, size_t *n) {
  unsigned char buf[512];
  size_t o = 0;
  const unsigned char head[] = {0x80, 2, '}', 'X', 7, 0, 0, 0, 'e', 'n', 't', 'r', 'i', 'e', 's', ']'};
  memcpy(buf, head, sizeof head);
  o = sizeof head;
  memcpy(buf + o, mid, midlen);
  o += midlen;
  buf[o++] = 's';
  buf[o++] = '.';
  p2pk_tdump *d = NULL;
  *n = 0;
  const p2pkit_status_t st = p2pk_fr_read("crafted", buf, o, 0, &d, n);
  for (size_t i = 0; i < *n; i++) p2pk_tdump_free(&d[i]);
  free(d);
  return st;
}

TEST(code_and_malformed_pickles_are_refused) {
  static const struct {
    const char *bytes;
    size_t len;
    const char *why;
  } cases[] = {
      {"cos\nsystem\n", 11, "GLOBAL"},
      {"\x8c\x02os\x8c\x06system\x93", 13, "STACK_GLOBAL"},
      {"N)R", 3, "REDUCE"},
      {"N}b", 3, "BUILD"},
      {"(N\x81", 3, "NEWOBJ"},
      {"Pid\n", 4, "PERSID"},
      {"C\x01x", 3, "0x43"},                  /* bytes: not plain data here */
      {"h\x05", 2, "never put"},
      {"\x8a\x09\x01\x02\x03\x04\x05\x06\x07\x08\x09", 11, "wider than 64 bits"},
      {"X\xff\xff\xff\x7f", 5, "longer than the rest"},
      {"}Na", 3, "APPEND on something not a list"},
      {"]NNs", 4, "SETITEM on something not a dict"},
      {"t", 1, "TUPLE without a MARK"},
      {"e", 1, "APPENDS or SETITEMS without a MARK"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t n = 0;
    const p2pkit_status_t st = read_pickle(cases[i].bytes, cases[i].len, &n);
    if (st != P2PKIT_ERR_PARSE || !strstr(p2pkit_last_error(), cases[i].why))
      T_FAIL("case %zu: wanted a refusal saying \"%s\", got %d: %s", i, cases[i].why, (int)st,
             p2pkit_last_error());
  }
  /* Bytes after STOP; no PROTO first; not a dump. */
  const unsigned char after[] = {0x80, 2, '}', '.', 'N'};
  const unsigned char noproto[] = {'}', '.'};
  const unsigned char nodump[] = {0x80, 2, '}', '.'};
  const unsigned char two[] = {0x80, 2, 'N', 'N', '.'};
  p2pk_tdump *d = NULL;
  size_t n = 0;
  CHECK_EQ(p2pk_fr_read("x", after, sizeof after, 0, &d, &n), P2PKIT_ERR_PARSE);
  CHECK(strstr(p2pkit_last_error(), "after the pickle's STOP") != NULL);
  CHECK_EQ(p2pk_fr_read("x", noproto, sizeof noproto, 0, &d, &n), P2PKIT_ERR_PARSE);
  CHECK_EQ(p2pk_fr_read("x", two, sizeof two, 0, &d, &n), P2PKIT_ERR_PARSE);
  CHECK(strstr(p2pkit_last_error(), "STOP with the stack not holding one value") != NULL);
  CHECK_EQ(p2pk_fr_read("x", nodump, sizeof nodump, 0, &d, &n), P2PKIT_ERR_PARSE);
  CHECK(strstr(p2pkit_last_error(), "not a flight recorder dump") != NULL);
}

TEST(a_list_that_contains_itself_is_read_without_a_loop) {
  /* entries = [e]; e = {"input_sizes": L, "collective_seq_id": 1, ...}
   * where L = [L] (memo 0 appended to itself), and entries itself appended
   * into entries. */
  static const char mid[] =
      "}q\x01" /* e, memo 1 */
      "(X\x0b\x00\x00\x00" "input_sizes]q\x00" "h\x00" "a" /* L = [L] */
      "X\x11\x00\x00\x00" "collective_seq_idK\x01"
      "X\x0e\x00\x00\x00" "profiling_nameX\x0f\x00\x00\x00" "nccl:all_reduce"
      "X\x0d\x00\x00\x00" "process_groupX\x01\x00\x00\x00" "0" "\x85"
      "ua";
  size_t n = 0;
  CHECK_OK(read_pickle(mid, sizeof mid - 1, &n));
  CHECK_EQ(n, 1);
}

/* --------------------------------------------------------- the verdict -- */

typedef struct {
  p2pk_tdump *d;
  size_t n;
  p2pk_tbad *bad;
  size_t nbad;
} loaded;

static void load(const char *dir, loaded *l) {
  CHECK_OK(p2pk_trace_load_dir(dir, &l->d, &l->n, &l->bad, &l->nbad));
  CHECK_EQ(l->nbad, 0);
}

static void unload(loaded *l) {
  for (size_t i = 0; i < l->n; i++) p2pk_tdump_free(&l->d[i]);
  free(l->d);
  free(l->bad);
}

/* The job in tests/data/trace/NAME: one communicator, its verdict, the
 * number, the one-line verdict and the culprits (a string of 0/1). */
static void judged(const char *name, int verdict, uint64_t seq, const char *line, const char *culprits) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/%s/", TRACE_DATA, name); /* as a shell completes it */
  loaded l;
  load(dir, &l);
  for (size_t i = 0; i < l.n; i++) /* each report named with one slash before it */
    if (strstr(l.d[i].file, "//")) T_FAIL("%s: read as %s", name, l.d[i].file);
  p2pk_tjob job;
  CHECK_OK(p2pk_trace_analyze(l.d, l.n, NULL, NULL, &job));
  if (job.ncomms >= 1) {
    const p2pk_tcomm *c = &job.comms[job.headline];
    if (c->verdict != verdict || c->seq != seq || strcmp(c->line, line) != 0)
      T_FAIL("%s: verdict %d at %llu, \"%s\"; wanted %d at %llu, \"%s\"", name, c->verdict,
             (unsigned long long)c->seq, c->line, verdict, (unsigned long long)seq, line);
    for (int r = 0; r < c->nranks && culprits[r]; r++)
      if (c->culprits[r] != (culprits[r] == '1')) T_FAIL("%s: rank %d culprit %d", name, r, c->culprits[r]);
  } else {
    T_FAIL("%s: no communicator", name);
  }
  p2pk_tjob_free(&job);
  unload(&l);
}

TEST(every_recorded_job_gets_its_verdict) {
  judged("skip", P2PK_TV_MISMATCH, 6, "rank 1 called all_gather where ranks 0,2 called all_reduce at seq 6", "010");
  judged("count", P2PK_TV_MISMATCH, 6, "rank 1 passed count 1000 where ranks 0,2 passed 1024 at seq 6 (all_reduce)", "010");
  judged("die", P2PK_TV_GONE, 6, "rank 2's process is gone (pid 2215, gone when rank 0 dumped) and left no dump; the others' last call was seq 6 (all_reduce)", "001");
  judged("hang", P2PK_TV_NOT_ARRIVED, 6, "rank 1 never arrived at seq 6 (all_reduce); its last call was seq 5 (broadcast, launched)", "010");
  judged("ok", P2PK_TV_CONSISTENT, 42, "no desync found: every rank's last call was seq 42 (all_reduce)", "000");
  judged("fr_skip", P2PK_TV_MISMATCH, 3, "rank 1 called all_gather where ranks 0,2 called all_reduce at seq 3", "010");
  judged("fr_count", P2PK_TV_MISMATCH, 3, "rank 1 passed count 1000 where ranks 0,2 passed 1024 at seq 3 (all_reduce)", "010");
  judged("fr_die", P2PK_TV_NO_DUMP, 3, "rank 2 left no dump (gone, or hung where it could not dump); the others' last call was seq 3 (all_reduce)", "001");
  judged("fr_hang", P2PK_TV_NOT_ARRIVED, 3, "rank 1 never arrived at seq 3 (all_reduce); its last call was seq 2 (broadcast, scheduled)", "010");
  judged("fr_nccl", P2PK_TV_NOT_ARRIVED, 5, "rank 1 never arrived at seq 5 (all_reduce); its last call was seq 4 (all_reduce, completed)", "010");
}

static int probe_says;
static int probe(void *arg, const char *host, uint64_t pidns, int64_t pid) {
  (void)arg;
  return strncmp(host, "vm:", 3) == 0 && pidns == 4026531836u && pid == 2215 ? probe_says : -1;
}

TEST(a_rank_without_a_dump_is_gone_only_as_seen_then) {
  /* The dead rank's job without the peers' word on it: no dump, and the
   * probe tells what it sees now; it never makes the verdict "gone". */
  loaded l;
  load(TRACE_DATA "/die", &l);
  for (size_t i = 0; i < l.n; i++) l.d[i].peers[2].alive = 'y';
  for (probe_says = -1; probe_says <= 1; probe_says++) {
    p2pk_tjob job;
    CHECK_OK(p2pk_trace_analyze(l.d, l.n, probe, NULL, &job));
    const p2pk_tcomm *c = &job.comms[0];
    CHECK_EQ(c->verdict, P2PK_TV_NO_DUMP);
    const char *want = probe_says == 1 ? "its process (pid 2215) still runs: it hangs"
                       : probe_says == 0 ? "its process (pid 2215) is not running now"
                                         : "(gone, or hung where it could not dump: P2PKIT_TRACE_SIGNAL";
    if (!strstr(c->line, want)) T_FAIL("probe %d: \"%s\" lacks \"%s\"", probe_says, c->line, want);
    p2pk_tjob_free(&job);
  }
  unload(&l);
}

TEST(the_newest_dump_of_a_rank_counts) {
  /* hang's rank 1 dumped again later, having made call 6 by then: the
   * job is consistent. */
  loaded l;
  load(TRACE_DATA "/hang", &l);
  p2pk_tdump *d = realloc(l.d, (l.n + 1) * sizeof *d);
  l.d = d;
  p2pk_tdump *late = &d[l.n], *r1 = NULL;
  for (size_t i = 0; i < l.n; i++)
    if (d[i].rank == 1) r1 = &d[i];
  CHECK(r1 != NULL);
  if (!r1) {
    unload(&l);
    return;
  }
  *late = *r1;
  late->real_ns += 1000;
  late->calls = malloc((r1->ncalls + 1) * sizeof *late->calls);
  memcpy(late->calls, r1->calls, r1->ncalls * sizeof *late->calls);
  late->calls[late->ncalls] = late->calls[0]; /* its seq 1: the same all_reduce */
  late->calls[late->ncalls++].seq = 6;
  late->peers = malloc(3 * sizeof *late->peers);
  memcpy(late->peers, r1->peers, 3 * sizeof *late->peers);
  l.n++;
  p2pk_tjob job;
  CHECK_OK(p2pk_trace_analyze(l.d, l.n, NULL, NULL, &job));
  CHECK_EQ(job.comms[0].verdict, P2PK_TV_CONSISTENT);
  p2pk_tjob_free(&job);
  /* ... and the older one, when it is the newer. */
  late->real_ns -= 1000000000;
  CHECK_OK(p2pk_trace_analyze(l.d, l.n, NULL, NULL, &job));
  CHECK_EQ(job.comms[0].verdict, P2PK_TV_NOT_ARRIVED);
  p2pk_tjob_free(&job);
  unload(&l);
}

TEST(dumps_that_disagree_on_their_communicator_are_refused) {
  loaded l;
  load(TRACE_DATA "/ok", &l);
  l.d[1].nranks = 4;
  p2pk_tjob job;
  CHECK_EQ(p2pk_trace_analyze(l.d, l.n, NULL, NULL, &job), P2PKIT_ERR_PARSE);
  CHECK(strstr(p2pkit_last_error(), "has 4 ranks here, 3 in") != NULL);
  unload(&l);
}

TEST(the_worst_communicator_comes_first) {
  loaded a, b;
  load(TRACE_DATA "/fr_nccl", &a);
  load(TRACE_DATA "/skip", &b);
  p2pk_tdump *all = malloc((a.n + b.n) * sizeof *all);
  memcpy(all, a.d, a.n * sizeof *all);
  memcpy(all + a.n, b.d, b.n * sizeof *all);
  p2pk_tjob job;
  CHECK_OK(p2pk_trace_analyze(all, a.n + b.n, NULL, NULL, &job));
  CHECK_EQ(job.ncomms, 3); /* torch's groups 0 and 1, p2pkit's */
  CHECK_STR(job.comms[job.headline].comm, "4da899b7d965e043");
  char *out = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&out, &len);
  p2pk_trace_print(&job, f);
  fclose(f);
  static const char first[] = "comm 4da899b7d965e043: rank 1 called all_gather where";
  if (strncmp(out, first, strlen(first)) != 0)
    T_FAIL("the first line is not the p2pkit communicator's verdict:\n%s", out);
  CHECK(strstr(out, "  verdict: rank 1 never arrived at seq 5") != NULL);
  free(out);
  p2pk_tjob_free(&job);
  free(all);
  unload(&a);
  unload(&b);
}

/* A file of `len` bytes in dir: `head` first, then spaces and newlines. */
static void put_file(const char *dir, const char *name, const char *head, size_t len) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f) return;
  fputs(head, f);
  for (size_t i = strlen(head); i < len; i++) fputc(i % 64 ? ' ' : '\n', f);
  fclose(f);
}

TEST(a_report_too_large_is_refused_and_its_neighbours_read) {
  /* Named as p2pkit's, larger than a p2pkit report may be but within
   * what the directory's reader takes (a flight recorder's bound): one
   * bad file with why, the report beside it read whole. */
  char dir[] = "/tmp/p2pkit-test-trace-XXXXXX";
  if (!mkdtemp(dir)) {
    T_FAIL("mkdtemp: cannot make %s", dir);
    return;
  }
  p2pk_tdump d;
  sample(&d, 0, 3);
  size_t len = 0;
  char *text = written(&d, &len);
  put_file(dir, "p2pkit-trace-a-r0.txt", text, len);
  put_file(dir, "p2pkit-trace-b-r1.txt", P2PK_TRACE_MAGIC " 1\n", P2PK_TRACE_MAX_FILE + 1);
  loaded l;
  CHECK_OK(p2pk_trace_load_dir(dir, &l.d, &l.n, &l.bad, &l.nbad));
  CHECK_EQ(l.n, 1);
  CHECK_EQ(l.nbad, 1);
  if (l.n == 1) CHECK_EQ(l.d[0].ncalls, d.ncalls);
  if (l.nbad == 1) CHECK(strstr(l.bad[0].why, "larger than the 16 MiB a p2pkit report may be") != NULL);
  unload(&l);
  free(text);
  p2pk_tdump_free(&d);
  char path[512];
  snprintf(path, sizeof path, "%s/p2pkit-trace-a-r0.txt", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/p2pkit-trace-b-r1.txt", dir);
  unlink(path);
  rmdir(dir);
}

/* n dumps of one communicator, rank r's last call (42) from kinds[r] and
 * counts[r]; kinds[r] NULL: rank r stopped at 41. */
static p2pk_tdump *job_of(int n, const char *const *kinds, const uint64_t *counts) {
  p2pk_tdump *d = calloc((size_t)n, sizeof *d);
  for (int r = 0; r < n; r++) {
    sample(&d[r], 0, 41);
    d[r].nranks = n, d[r].rank = r;
    free(d[r].peers);
    d[r].peers = NULL;
    d[r].ncalls = 41;
    if (kinds[r]) d[r].calls[d[r].ncalls++] = call_of(42, kinds[r], counts ? counts[r] : 1024);
  }
  return d;
}

static void verdict_of(int n, const char *const *kinds, const uint64_t *counts, const char *want) {
  p2pk_tdump *d = job_of(n, kinds, counts);
  p2pk_tjob job;
  CHECK_OK(p2pk_trace_analyze(d, (size_t)n, NULL, NULL, &job));
  if (job.ncomms != 1 || strcmp(job.comms[0].line, want) != 0)
    T_FAIL("\"%s\", wanted \"%s\"", job.ncomms ? job.comms[0].line : "(none)", want);
  p2pk_tjob_free(&job);
  for (int r = 0; r < n; r++) p2pk_tdump_free(&d[r]);
  free(d);
}

TEST(a_verdict_names_every_group_of_ranks) {
  const char *ar = "all_reduce", *ag = "all_gather", *bc = "broadcast";
  verdict_of(4, (const char *[]){ar, ag, ar, bc}, NULL,
             "rank 1 called all_gather, rank 3 called broadcast where ranks 0,2 called all_reduce at seq 42");
  /* Two against two: the group of the lowest rank is the reference. */
  verdict_of(4, (const char *[]){ag, ar, ar, ag}, NULL,
             "ranks 1,2 called all_reduce where ranks 0,3 called all_gather at seq 42");
  verdict_of(10, (const char *[]){ar, ar, ar, ar, ar, ar, ar, ar, ar, ar},
             (const uint64_t[]){8, 8, 8, 8, 8, 8, 8, 8, 9, 8},
             "rank 8 passed count 9 where ranks 0-7,9 passed 8 at seq 42 (all_reduce)");
  verdict_of(5, (const char *[]){ar, NULL, ar, NULL, NULL}, NULL,
             "ranks 1,3,4 never arrived at seq 42 (all_reduce); their last call was seq 41 "
             "(all_reduce, launched)");
}

/* Recorded job `name` without rank `drop`'s dump: the verdict's line, and
 * its JSON, into line / json (the caller frees json). */
static void judged_without(const char *name, int drop, char *line, size_t len, char **json) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/%s", TRACE_DATA, name);
  loaded l;
  load(dir, &l);
  p2pk_tdump *kept = calloc(l.n + 1, sizeof *kept);
  size_t n = 0;
  for (size_t i = 0; i < l.n; i++)
    if (l.d[i].rank != drop) kept[n++] = l.d[i];
  CHECK_EQ(n + 1, l.n);
  p2pk_tjob job;
  line[0] = '\0';
  *json = NULL;
  if (p2pk_trace_analyze(kept, n, NULL, NULL, &job) == P2PKIT_SUCCESS) {
    snprintf(line, len, "%s", job.comms[job.headline].line);
    size_t jl = 0;
    FILE *f = open_memstream(json, &jl);
    p2pk_trace_json(&job, f);
    fclose(f);
    p2pk_tjob_free(&job);
  } else {
    T_FAIL("%s without rank %d: %s", name, drop, p2pkit_last_error());
  }
  free(kept);
  unload(&l);
}

TEST(a_verdict_over_part_of_the_job_names_the_ranks_without_a_dump) {
  /* The ranks with a dump disagree, or one did not arrive, or one is gone,
   * while another left no dump: the verdict says so, text and JSON. */
  static const struct {
    const char *job;
    int drop;
    const char *line, *no_dump;
  } cases[] = {
      {"skip", 2, "rank 1 called all_gather where rank 0 called all_reduce at seq 6; rank 2 left "
                  "no dump", "\"no_dump\": [\n        2\n      ]"},
      {"count", 2, "rank 1 passed count 1000 where rank 0 passed 1024 at seq 6 (all_reduce); rank 2 "
                   "left no dump", "\"no_dump\": [\n        2\n      ]"},
      {"hang", 0, "rank 1 never arrived at seq 6 (all_reduce); its last call was seq 5 (broadcast, "
                  "launched); rank 0 left no dump", "\"no_dump\": [\n        0\n      ]"},
      {"fr_skip", 2, "rank 1 called all_gather where rank 0 called all_reduce at seq 3; rank 2 left "
                     "no dump", "\"no_dump\": [\n        2\n      ]"},
  };
  char line[640];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *json = NULL;
    judged_without(cases[i].job, cases[i].drop, line, sizeof line, &json);
    if (strcmp(line, cases[i].line) != 0)
      T_FAIL("%s without rank %d: \"%s\", wanted \"%s\"", cases[i].job, cases[i].drop, line,
             cases[i].line);
    if (!json || !strstr(json, cases[i].no_dump))
      T_FAIL("%s without rank %d: the JSON lacks %s:\n%s", cases[i].job, cases[i].drop,
             cases[i].no_dump, json ? json : "(none)");
    free(json);
  }
  /* A complete job's JSON says no rank lacks one; a gone rank beside one
   * not known gone: both named. */
  loaded l;
  load(TRACE_DATA "/ok", &l);
  p2pk_tjob job;
  CHECK_OK(p2pk_trace_analyze(l.d, l.n, NULL, NULL, &job));
  char *json = NULL;
  size_t jl = 0;
  FILE *f = open_memstream(&json, &jl);
  p2pk_trace_json(&job, f);
  fclose(f);
  CHECK(strstr(json, "\"no_dump\": []") != NULL);
  free(json);
  p2pk_tjob_free(&job);
  unload(&l);
  p2pk_tdump *d = job_of(4, (const char *[]){"all_reduce", "all_reduce", "all_reduce", "all_reduce"},
                         NULL);
  d[0].peers = calloc(4, sizeof *d[0].peers);
  for (int r = 0; r < 4; r++) d[0].peers[r] = (p2pk_tpeer){200 + r, 1, r == 2 ? 'n' : 'y'};
  CHECK_OK(p2pk_trace_analyze(d, 2, NULL, NULL, &job)); /* ranks 0 and 1 dumped */
  CHECK_STR(job.comms[0].line, "rank 2's process is gone (pid 202, gone when rank 0 dumped) and left "
            "no dump; the others' last call was seq 42 (all_reduce); rank 3 left no dump");
  p2pk_tjob_free(&job);
  for (int r = 0; r < 4; r++) p2pk_tdump_free(&d[r]);
  free(d);
}

T_MAIN(T_CASE(a_dump_reads_back_to_the_same_bytes), T_CASE(a_dump_cut_at_any_byte_is_refused),
       T_CASE(every_malformed_line_is_refused_by_name), T_CASE(a_gloo_flight_recorder_dump_reads),
       T_CASE(an_nccl_shaped_dump_reads_every_group),
       T_CASE(a_flight_recorder_dump_cut_at_any_byte_is_refused),
       T_CASE(code_and_malformed_pickles_are_refused),
       T_CASE(a_list_that_contains_itself_is_read_without_a_loop),
       T_CASE(every_recorded_job_gets_its_verdict),
       T_CASE(a_rank_without_a_dump_is_gone_only_as_seen_then),
       T_CASE(the_newest_dump_of_a_rank_counts),
       T_CASE(dumps_that_disagree_on_their_communicator_are_refused),
       T_CASE(the_worst_communicator_comes_first),
       T_CASE(a_report_too_large_is_refused_and_its_neighbours_read),
       T_CASE(a_verdict_names_every_group_of_ranks),
       T_CASE(a_verdict_over_part_of_the_job_names_the_ranks_without_a_dump))
