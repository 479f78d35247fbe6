/* SPDX-License-Identifier: BSD-3-Clause */
/* The text format of one rank's dump (docs/desync.md): a line per fact,
 * fields one space apart, in a fixed order, ending with `end N` so that a
 * cut file is refused:
 *
 *   p2pkit-trace 1
 *   version 0.1.0
 *   comm 5f3a9c01d2e4b7aa
 *   rank 1 4                         rank, ranks
 *   host node7:0f3c...               host id, the rest of the line
 *   pid 4242 4026531836              pid, pid namespace (0: unknown)
 *   gpu 0 0000:1B:00.0               CUDA ordinal, PCI bus id
 *   reason timeout: ...              the rest of the line
 *   time 123456789 1717171717000000000  monotonic, real (ns)
 *   error timeout 2                  the communicator's error, the rank it names (- none)
 *   peer 0 4240 local y              one a rank: pid, local|remote, alive y|n|-
 *   ring 2048 45                     length, calls recorded in all
 *   call coll 42 all_reduce float32 1024 - sum p2p-kernel 0x7f00 123456 launched
 *   end 1                            the calls above
 *
 * A call: coll|p2p, its number, kind, type, count, root or peer (- none),
 * operation (- none), path (- not launched), stream, enqueue time, state. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/text.h"
#include "trace/trace.h"

#define LINE_MAX_BYTES 1024

static const char *const coll_kinds[] = {"all_reduce", "broadcast", "reduce", "all_gather",
                                         "reduce_scatter", "all_to_all", NULL};
static const char *const p2p_kinds[] = {"send", "recv", NULL};
static const char *const states[] = {"queued", "launched", "failed", NULL};
static const char *const errors[] = {"none", "timeout", "mismatch", "aborted", "remote", "other",
                                     NULL};

void p2pk_tdump_free(p2pk_tdump *d) {
  if (!d) return;
  free(d->members);
  free(d->peers);
  free(d->calls);
  d->members = NULL;
  d->peers = NULL;
  d->calls = NULL;
  d->ncalls = 0;
}

/* ------------------------------------------------------------- writing -- */

size_t p2pk_tdump_max_bytes(int nranks, size_t ncalls) {
  /* The header's lines are bounded by their fields (each under 300 bytes);
   * a peer line under 64, a call line under 256. */
  return 4096 + (size_t)(nranks > 0 ? nranks : 0) * 64 + ncalls * 256;
}

typedef struct {
  char *buf;
  size_t cap, len;
  int full;
} tbuf;

static void put(tbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(tbuf *b, const char *fmt, ...) {
  if (b->full) return;
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(b->buf + b->len, b->cap - b->len, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= b->cap - b->len) b->full = 1;
  else b->len += (size_t)n;
}

/* A token field: printable, no space, not empty; else "-". */
static const char *token(const char *s, char *out, size_t len) {
  snprintf(out, len, "%s", s && *s ? s : "-");
  p2pk_text_printable(out);
  for (char *p = out; *p; p++)
    if (*p == ' ') *p = '_';
  return out;
}

/* The rest of a line: printable, one line. */
static const char *rest(const char *s, char *out, size_t len) {
  snprintf(out, len, "%s", s && *s ? s : "-");
  p2pk_text_printable(out);
  return out;
}

static void put_call(tbuf *b, const p2pk_tcall *k) {
  char kind[32], dt[32], op[16], path[32], st[16], root[24];
  if (k->root >= 0) snprintf(root, sizeof root, "%lld", (long long)k->root);
  else snprintf(root, sizeof root, "-");
  put(b, "call %s %llu %s %s %llu %s %s %s 0x%llx %llu %s\n", k->p2p ? "p2p" : "coll",
      (unsigned long long)k->seq, token(k->kind, kind, sizeof kind), token(k->dtype, dt, sizeof dt),
      (unsigned long long)k->count, root, token(k->op, op, sizeof op),
      token(k->path, path, sizeof path), (unsigned long long)k->stream,
      (unsigned long long)k->t_ns, token(k->state, st, sizeof st));
}

size_t p2pk_tdump_write(const p2pk_tdump *d, char *buf, size_t cap) {
  tbuf b = {buf, cap, 0, 0};
  char t1[300], t2[300];
  put(&b, "%s %d\nversion %s\ncomm %s\nrank %d %d\n", P2PK_TRACE_MAGIC, P2PK_TRACE_FORMAT,
      token(d->version, t1, sizeof t1), token(d->comm, t2, sizeof t2), d->rank, d->nranks);
  put(&b, "host %s\npid %lld %llu\n", rest(d->host, t1, sizeof t1), (long long)d->pid,
      (unsigned long long)d->pidns);
  put(&b, "gpu %d %s\nreason %s\ntime %llu %llu\n", d->device, token(d->gpu, t1, sizeof t1),
      rest(d->reason, t2, sizeof t2), (unsigned long long)d->mono_ns,
      (unsigned long long)d->real_ns);
  if (d->error_peer >= 0) put(&b, "error %s %d\n", token(d->error, t1, sizeof t1), d->error_peer);
  else put(&b, "error %s -\n", token(d->error, t1, sizeof t1));
  for (int r = 0; d->peers && r < d->nranks; r++) {
    const p2pk_tpeer *p = &d->peers[r];
    put(&b, "peer %d %lld %s %c\n", r, (long long)p->pid, p->local ? "local" : "remote",
        p->alive == 'y' || p->alive == 'n' ? p->alive : '-');
  }
  put(&b, "ring %llu %llu\n", (unsigned long long)d->ring, (unsigned long long)d->recorded);
  for (size_t i = 0; i < d->ncalls; i++) put_call(&b, &d->calls[i]);
  put(&b, "end %zu\n", d->ncalls);
  return b.full ? 0 : b.len;
}

/* ------------------------------------------------------------- reading -- */

typedef struct {
  const char *name;
  const char *p, *end;
  int line;
  char text[LINE_MAX_BYTES + 1]; /* the current line */
  char *field[16];
  int nfield;
} reader;

static p2pkit_status_t bad(const reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static p2pkit_status_t bad(const reader *r, const char *fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return p2pk_fail(P2PKIT_ERR_PARSE, "%s:%d: %s", r->name, r->line, what);
}

/* The next line into r->text, checked: ends with a newline, not too long,
 * printable text (no control byte, no tab, well-formed UTF-8). */
static p2pkit_status_t next_line(reader *r) {
  r->line++;
  if (r->p >= r->end) return bad(r, "the file ends here: it was cut off (no `end` line)");
  const char *nl = memchr(r->p, '\n', (size_t)(r->end - r->p));
  if (!nl) return bad(r, "the last line has no newline: the file was cut off");
  const size_t n = (size_t)(nl - r->p);
  if (n > LINE_MAX_BYTES) return bad(r, "a line of %zu bytes (at most %d)", n, LINE_MAX_BYTES);
  if (memchr(r->p, '\0', n)) return bad(r, "a NUL byte in the line");
  memcpy(r->text, r->p, n);
  r->text[n] = '\0';
  r->p = nl + 1;
  char copy[LINE_MAX_BYTES + 1];
  memcpy(copy, r->text, n + 1);
  if (strchr(r->text, '\t') || p2pk_text_printable(copy))
    return bad(r, "control bytes or broken UTF-8 in the line");
  return P2PKIT_SUCCESS;
}

/* Split r->text at single spaces into at most `most` fields (the last one
 * keeps its spaces when `rest_last`); the first must be `key`, and there
 * must be `want` fields (key included). */
static p2pkit_status_t fields(reader *r, const char *key, int want, int rest_last) {
  r->nfield = 0;
  char *s = r->text;
  for (;;) {
    if (r->nfield == (int)(sizeof r->field / sizeof r->field[0]))
      return bad(r, "more fields than any line has");
    r->field[r->nfield++] = s;
    if (rest_last && r->nfield == want) break;
    char *sp = strchr(s, ' ');
    if (!sp) break;
    *sp = '\0';
    s = sp + 1;
  }
  if (strcmp(r->field[0], key) != 0)
    return bad(r, "expected a `%s` line, found `%.40s`", key, r->field[0]);
  for (int i = 1; i < r->nfield; i++)
    if (!*r->field[i]) return bad(r, "an empty field in the `%s` line (two spaces?)", key);
  if (r->nfield != want)
    return bad(r, "`%s` takes %d field%s, not %d", key, want - 1, want == 2 ? "" : "s",
               r->nfield - 1);
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t num(const reader *r, const char *s, uint64_t hi, uint64_t *out) {
  if (*s < '0' || *s > '9' || (s[0] == '0' && s[1]))
    return bad(r, "`%.40s` is not a whole number", s);
  errno = 0;
  char *e = NULL;
  const unsigned long long v = strtoull(s, &e, 10);
  if (*e || errno || v > hi) return bad(r, "`%.40s` is not a whole number up to %llu", s,
                                        (unsigned long long)hi);
  *out = v;
  return P2PKIT_SUCCESS;
}

/* A number, or "-" for -1. */
static p2pkit_status_t num_or_none(const reader *r, const char *s, uint64_t hi, int64_t *out) {
  if (strcmp(s, "-") == 0) {
    *out = -1;
    return P2PKIT_SUCCESS;
  }
  uint64_t v = 0;
  P2PK_CHECK(num(r, s, hi, &v));
  *out = (int64_t)v;
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t hex(const reader *r, const char *s, uint64_t *out) {
  if (s[0] != '0' || s[1] != 'x' || !s[2] || strlen(s) > 18)
    return bad(r, "`%.40s` is not a hexadecimal number (0x...)", s);
  for (const char *p = s + 2; *p; p++)
    if (!strchr("0123456789abcdef", *p)) return bad(r, "`%.40s` is not a hexadecimal number", s);
  *out = strtoull(s + 2, NULL, 16);
  return P2PKIT_SUCCESS;
}

static int one_of(const char *s, const char *const *words) {
  for (int i = 0; words[i]; i++)
    if (strcmp(s, words[i]) == 0) return i;
  return -1;
}

/* A token field into out (len bytes). */
static p2pkit_status_t copy_token(const reader *r, const char *s, char *out, size_t len) {
  if (strlen(s) >= len) return bad(r, "`%.40s` is longer than %zu bytes", s, len - 1);
  memcpy(out, s, strlen(s) + 1);
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t read_identity(reader *r, p2pk_tdump *d) {
  uint64_t v = 0, w = 0;
  P2PK_CHECK(next_line(r));
  P2PK_CHECK(fields(r, P2PK_TRACE_MAGIC, 2, 0));
  if (strcmp(r->field[1], "1") != 0)
    return bad(r, "format version %.20s; this p2pkit reads version %d", r->field[1],
               P2PK_TRACE_FORMAT);
  P2PK_CHECK(next_line(r));
  P2PK_CHECK(fields(r, "version", 2, 0));
  P2PK_CHECK(copy_token(r, r->field[1], d->version, sizeof d->version));
  P2PK_CHECK(next_line(r));
  P2PK_CHECK(fields(r, "comm", 2, 0));
  if (strlen(r->field[1]) != 16 || strspn(r->field[1], "0123456789abcdef") != 16)
    return bad(r, "the communicator id `%.40s` is not 16 hexadecimal digits", r->field[1]);
  P2PK_CHECK(copy_token(r, r->field[1], d->comm, sizeof d->comm));
  P2PK_CHECK(next_line(r));
  P2PK_CHECK(fields(r, "rank", 3, 0));
  P2PK_CHECK(num(r, r->field[2], P2PK_TRACE_MAX_P2PKIT_RANKS, &w));
  if (w < 1) return bad(r, "a communicator of 0 ranks");
  P2PK_CHECK(num(r, r->field[1], w - 1, &v));
  d->rank = (int)v;
  d->nranks = (int)w;
  P2PK_CHECK(next_line(r));
  P2PK_CHECK(fields(r, "host", 2, 1));
  P2PK_CHECK(copy_token(r, r->field[1], d->host, sizeof d->host));
  P2PK_CHECK(next_line(r));
  P2PK_CHECK(fields(r, "pid", 3, 0));
  P2PK_CHECK(num(r, r->field[1], INT32_MAX, &v));
  P2PK_CHECK(num(r, r->field[2], UINT64_MAX, &d->pidns));
  d->pid = (int64_t)v;
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t read_state(reader *r, p2pk_tdump *d) {
  uint64_t v = 0;
  int64_t peer = -1;
  P2PK_CHECK(next_line(r));
  P2PK_CHECK(fields(r, "gpu", 3, 0));
  P2PK_CHECK(num(r, r->field[1], 4096, &v));
  d->device = (int)v;
  P2PK_CHECK(copy_token(r, r->field[2], d->gpu, sizeof d->gpu));
  P2PK_CHECK(next_line(r));
  P2PK_CHECK(fields(r, "reason", 2, 1));
  P2PK_CHECK(copy_token(r, r->field[1], d->reason, sizeof d->reason));
  P2PK_CHECK(next_line(r));
  P2PK_CHECK(fields(r, "time", 3, 0));
  P2PK_CHECK(num(r, r->field[1], UINT64_MAX, &d->mono_ns));
  P2PK_CHECK(num(r, r->field[2], UINT64_MAX, &d->real_ns));
  P2PK_CHECK(next_line(r));
  P2PK_CHECK(fields(r, "error", 3, 0));
  if (one_of(r->field[1], errors) < 0) return bad(r, "unknown error `%.20s`", r->field[1]);
  P2PK_CHECK(copy_token(r, r->field[1], d->error, sizeof d->error));
  P2PK_CHECK(num_or_none(r, r->field[2], (uint64_t)d->nranks - 1, &peer));
  if (peer >= 0 && strcmp(d->error, "none") == 0) return bad(r, "no error, yet a rank it names");
  d->error_peer = (int)peer;
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t read_peers(reader *r, p2pk_tdump *d) {
  d->peers = calloc((size_t)d->nranks, sizeof *d->peers);
  if (!d->peers) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "%s: out of memory", r->name);
  for (int i = 0; i < d->nranks; i++) {
    uint64_t v = 0;
    P2PK_CHECK(next_line(r));
    P2PK_CHECK(fields(r, "peer", 5, 0));
    P2PK_CHECK(num(r, r->field[1], (uint64_t)d->nranks - 1, &v));
    if ((int)v != i) return bad(r, "peer %d where peer %d belongs", (int)v, i);
    P2PK_CHECK(num(r, r->field[2], INT32_MAX, &v));
    p2pk_tpeer *p = &d->peers[i];
    p->pid = (int64_t)v;
    const int loc = one_of(r->field[3], (const char *const[]){"remote", "local", NULL});
    const char *a = r->field[4];
    if (loc < 0 || strlen(a) != 1 || !strchr("yn-", a[0]))
      return bad(r, "a peer is local or remote, and alive y, n or -");
    p->local = loc;
    p->alive = a[0];
    if (i == d->rank && p->alive != '-') return bad(r, "a rank's own peer line says alive -");
  }
  return P2PKIT_SUCCESS;
}

/* Its name, type, operation, path and state fields into k. */
static p2pkit_status_t call_words(reader *r, p2pk_tcall *k) {
  const char *const *kinds = k->p2p ? p2p_kinds : coll_kinds;
  if (one_of(r->field[3], kinds) < 0)
    return bad(r, "`%.30s` is not a %s", r->field[3], k->p2p ? "send or recv" : "collective");
  P2PK_CHECK(copy_token(r, r->field[3], k->kind, sizeof k->kind));
  P2PK_CHECK(copy_token(r, r->field[4], k->dtype, sizeof k->dtype));
  P2PK_CHECK(copy_token(r, r->field[7], k->op, sizeof k->op));
  P2PK_CHECK(copy_token(r, r->field[8], k->path, sizeof k->path));
  if (one_of(r->field[11], states) < 0) return bad(r, "unknown state `%.20s`", r->field[11]);
  return copy_token(r, r->field[11], k->state, sizeof k->state);
}

static p2pkit_status_t read_call(reader *r, const p2pk_tdump *d, p2pk_tcall *k, uint64_t *last) {
  P2PK_CHECK(fields(r, "call", 12, 0));
  memset(k, 0, sizeof *k);
  const int p2p = one_of(r->field[1], (const char *const[]){"coll", "p2p", NULL});
  if (p2p < 0) return bad(r, "a call is coll or p2p, not `%.20s`", r->field[1]);
  k->p2p = p2p;
  P2PK_CHECK(num(r, r->field[2], UINT64_MAX, &k->seq));
  if (k->seq <= last[p2p])
    return bad(r, "%s number %llu after %llu: numbers only grow", p2p ? "send/recv" : "collective",
               (unsigned long long)k->seq, (unsigned long long)last[p2p]);
  last[p2p] = k->seq;
  P2PK_CHECK(call_words(r, k));
  P2PK_CHECK(num(r, r->field[5], UINT64_MAX, &k->count));
  P2PK_CHECK(num_or_none(r, r->field[6], (uint64_t)d->nranks - 1, &k->root));
  P2PK_CHECK(hex(r, r->field[9], &k->stream));
  return num(r, r->field[10], UINT64_MAX, &k->t_ns);
}

static p2pkit_status_t read_calls(reader *r, p2pk_tdump *d) {
  uint64_t v = 0, last[2] = {0, 0};
  P2PK_CHECK(next_line(r));
  P2PK_CHECK(fields(r, "ring", 3, 0));
  P2PK_CHECK(num(r, r->field[1], P2PK_TRACE_MAX_CALLS, &d->ring));
  P2PK_CHECK(num(r, r->field[2], UINT64_MAX, &d->recorded));
  size_t cap = 0;
  for (;;) {
    P2PK_CHECK(next_line(r));
    if (strncmp(r->text, "end", 3) == 0 && (r->text[3] == ' ' || !r->text[3])) break;
    if (d->ncalls == d->ring) return bad(r, "more calls than the ring holds (%llu)",
                                         (unsigned long long)d->ring);
    if (d->ncalls == cap) {
      cap = cap ? cap * 2 : 64;
      p2pk_tcall *n = realloc(d->calls, cap * sizeof *n);
      if (!n) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "%s: out of memory", r->name);
      d->calls = n;
    }
    P2PK_CHECK(read_call(r, d, &d->calls[d->ncalls], last));
    d->ncalls++;
  }
  P2PK_CHECK(fields(r, "end", 2, 0));
  P2PK_CHECK(num(r, r->field[1], P2PK_TRACE_MAX_CALLS, &v));
  if (v != d->ncalls) return bad(r, "`end %llu` after %zu calls", (unsigned long long)v, d->ncalls);
  if (d->recorded < d->ncalls) return bad(r, "the ring says %llu calls in all, the file has %zu",
                                          (unsigned long long)d->recorded, d->ncalls);
  if (r->p != r->end) {
    r->line++;
    return bad(r, "text after the `end` line");
  }
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_tdump_parse(const char *name, const char *text, size_t len, p2pk_tdump *d) {
  memset(d, 0, sizeof *d);
  d->source = P2PK_TSRC_P2PKIT;
  d->error_peer = -1;
  snprintf(d->file, sizeof d->file, "%s", name);
  reader *r = calloc(1, sizeof *r);
  if (!r) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "%s: out of memory", name);
  r->name = name;
  r->p = text;
  r->end = text + len;
  p2pkit_status_t st = read_identity(r, d);
  if (st == P2PKIT_SUCCESS) st = read_state(r, d);
  if (st == P2PKIT_SUCCESS) st = read_peers(r, d);
  if (st == P2PKIT_SUCCESS) st = read_calls(r, d);
  free(r);
  return st;
}
