/* SPDX-License-Identifier: BSD-3-Clause */
/* PyTorch's flight recorder dumps (ProcessGroupNCCL's, gloo's: a pickle
 * of plain data per rank, TORCH_FR_DUMP_TEMP_FILE<rank>) read into
 * p2pk_tdump, one per process group, so that `p2pkit trace` judges a job
 * on NCCL as it judges one on p2pkit.
 *
 * The pickle is read by a machine of its own that knows only the opcodes
 * of plain data: dict, list, tuple, str, int, float, bool, None, the memo
 * and framing. Everything that would name or run code (GLOBAL,
 * STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, PERSID, EXT*) and every
 * other opcode is refused with its name; so are values past the limits
 * below. Nothing is executed and nothing is looked up by name. The memo
 * holds references, as Python's does, so a list may contain itself: the
 * conversion walks the result only along the fields it knows, to a fixed
 * depth, so such a cycle is never followed. */
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/text.h"
#include "trace/trace.h"

#define MAX_NODES (4u << 20) /* values of one file */
#define MAX_ITEMS (16u << 20) /* list and dict slots of one file, all together */
#define MAX_STACK (1u << 20)

enum { V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_TUPLE, V_DICT };

typedef struct {
  int type;
  uint32_t n, cap;  /* list, tuple: items; dict: 2 x pairs */
  union {
    int64_t i;      /* int, bool */
    double f;
    struct {
      uint32_t off, len;
    } s;            /* str: bytes of the input */
    uint32_t *items; /* list, tuple, dict (key, value, key, value, ...) */
  } u;
} pv;

typedef struct {
  const char *name;
  const unsigned char *in;
  size_t len, at;
  pv *node;
  uint32_t nnode, capnode;
  uint32_t *stack, nstack, capstack;
  uint32_t *marks, nmarks, capmarks;
  uint32_t *memo, nmemo, capmemo; /* node + 1; 0: not set */
  uint64_t items;
  int done;
  uint32_t root;
} pk;

static p2pkit_status_t pk_bad(const pk *p, const char *what) {
  return p2pk_fail(P2PKIT_ERR_PARSE, "%s: byte %zu: %s", p->name, p->at, what);
}

/* Room for one more in an array of `size`-byte elements, up to `most`. */
static int grow(void **arr, uint32_t n, uint32_t *cap, size_t size, uint32_t most) {
  if (n < *cap) return 0;
  if (n >= most) return -1;
  uint32_t c = *cap ? *cap * 2 : 64;
  if (c > most) c = most;
  void *a = realloc(*arr, (size_t)c * size);
  if (!a) return -1;
  *arr = a;
  *cap = c;
  return 0;
}

static p2pkit_status_t new_node(pk *p, int type, uint32_t *id) {
  if (grow((void **)&p->node, p->nnode, &p->capnode, sizeof *p->node, MAX_NODES))
    return pk_bad(p, "more values than a flight recorder dump holds (or out of memory)");
  pv *v = &p->node[p->nnode];
  memset(v, 0, sizeof *v);
  v->type = type;
  *id = p->nnode++;
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t push(pk *p, uint32_t id) {
  if (grow((void **)&p->stack, p->nstack, &p->capstack, sizeof *p->stack, MAX_STACK))
    return pk_bad(p, "the pickle's stack grows past its limit");
  p->stack[p->nstack++] = id;
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t push_new(pk *p, int type, uint32_t *id) {
  P2PK_CHECK(new_node(p, type, id));
  return push(p, *id);
}

/* The stack's top above the last mark: none may be taken past it. */
static uint32_t floor_of(const pk *p) { return p->nmarks ? p->marks[p->nmarks - 1] : 0; }

static p2pkit_status_t add_item(pk *p, uint32_t to, uint32_t item) {
  pv *v = &p->node[to];
  if (p->items >= MAX_ITEMS || grow((void **)&v->u.items, v->n, &v->cap, sizeof *v->u.items, MAX_ITEMS))
    return pk_bad(p, "more list and dict items than a flight recorder dump holds");
  v->u.items[v->n++] = item;
  p->items++;
  return P2PKIT_SUCCESS;
}

/* n bytes of operand, or the file ends too soon. */
static p2pkit_status_t take(pk *p, size_t n, const unsigned char **b) {
  if (p->len - p->at < n) return pk_bad(p, "the pickle ends inside an opcode: the file was cut off");
  *b = p->in + p->at;
  p->at += n;
  return P2PKIT_SUCCESS;
}

static uint64_t le(const unsigned char *b, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | b[i];
  return v;
}

static p2pkit_status_t op_int(pk *p, int64_t v) {
  uint32_t id = 0;
  P2PK_CHECK(push_new(p, V_INT, &id));
  p->node[id].u.i = v;
  return P2PKIT_SUCCESS;
}

/* BININT, BININT1, BININT2, LONG1. */
static p2pkit_status_t op_ints(pk *p, unsigned char op) {
  const unsigned char *b = NULL;
  if (op == 'J') {
    P2PK_CHECK(take(p, 4, &b));
    return op_int(p, (int32_t)(uint32_t)le(b, 4));
  }
  if (op == 'K' || op == 'M') {
    P2PK_CHECK(take(p, op == 'K' ? 1 : 2, &b));
    return op_int(p, (int64_t)le(b, op == 'K' ? 1 : 2));
  }
  P2PK_CHECK(take(p, 1, &b)); /* LONG1: n bytes, little-endian two's complement */
  const int n = b[0];
  if (n > 8) return pk_bad(p, "an integer wider than 64 bits");
  P2PK_CHECK(take(p, (size_t)n, &b));
  uint64_t v = n ? le(b, n) : 0;
  if (n && n < 8 && (b[n - 1] & 0x80)) v |= ~UINT64_C(0) << (8 * n);
  return op_int(p, (int64_t)v);
}

static p2pkit_status_t op_str(pk *p, unsigned char op) {
  const unsigned char *b = NULL;
  const int w = op == 0x8c ? 1 : op == 'X' ? 4 : 8;
  P2PK_CHECK(take(p, (size_t)w, &b));
  const uint64_t n = le(b, w);
  if (n > p->len - p->at) return pk_bad(p, "a string longer than the rest of the file");
  uint32_t id = 0;
  P2PK_CHECK(push_new(p, V_STR, &id));
  p->node[id].u.s.off = (uint32_t)p->at;
  p->node[id].u.s.len = (uint32_t)n;
  p->at += (size_t)n;
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t op_float(pk *p) {
  const unsigned char *b = NULL;
  P2PK_CHECK(take(p, 8, &b));
  uint64_t bits = 0;
  for (int i = 0; i < 8; i++) bits = bits << 8 | b[i]; /* big-endian */
  uint32_t id = 0;
  P2PK_CHECK(push_new(p, V_FLOAT, &id));
  memcpy(&p->node[id].u.f, &bits, sizeof bits);
  return P2PKIT_SUCCESS;
}

/* Everything from the last mark into a new tuple (TUPLE), or the top n. */
static p2pkit_status_t op_tuple(pk *p, int n) {
  uint32_t from = 0;
  if (n < 0) {
    if (!p->nmarks) return pk_bad(p, "TUPLE without a MARK");
    from = p->marks[--p->nmarks];
  } else {
    if (p->nstack < floor_of(p) + (uint32_t)n) return pk_bad(p, "a tuple of values the stack lacks");
    from = p->nstack - (uint32_t)n;
  }
  uint32_t id = 0;
  P2PK_CHECK(new_node(p, V_TUPLE, &id));
  for (uint32_t i = from; i < p->nstack; i++) P2PK_CHECK(add_item(p, id, p->stack[i]));
  p->nstack = from;
  return push(p, id);
}

/* APPEND(S), SETITEM(S): the values above the last mark (or the top one
 * or two) into the list or dict below them. */
static p2pkit_status_t op_fill(pk *p, unsigned char op) {
  const int many = op == 'e' || op == 'u', dict = op == 's' || op == 'u';
  uint32_t from = 0;
  if (many) {
    if (!p->nmarks) return pk_bad(p, "APPENDS or SETITEMS without a MARK");
    from = p->marks[--p->nmarks];
  } else {
    const uint32_t k = dict ? 2 : 1;
    if (p->nstack < floor_of(p) + k) return pk_bad(p, "APPEND or SETITEM without its values");
    from = p->nstack - k;
  }
  if (from <= floor_of(p) || (dict && (p->nstack - from) % 2))
    return pk_bad(p, "APPEND or SETITEM without a list or dict under its values");
  const uint32_t to = p->stack[from - 1];
  if (p->node[to].type != (dict ? V_DICT : V_LIST))
    return pk_bad(p, dict ? "SETITEM on something not a dict" : "APPEND on something not a list");
  for (uint32_t i = from; i < p->nstack; i++) P2PK_CHECK(add_item(p, to, p->stack[i]));
  p->nstack = from;
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t op_memo(pk *p, unsigned char op) {
  const unsigned char *b = NULL;
  uint64_t idx = p->nmemo;
  if (op == 'q' || op == 'h' || op == 'r' || op == 'j') {
    const int w = op == 'q' || op == 'h' ? 1 : 4;
    P2PK_CHECK(take(p, (size_t)w, &b));
    idx = le(b, w);
  }
  if (idx >= MAX_NODES) return pk_bad(p, "a memo index past the dump's limits");
  if (op == 'h' || op == 'j') {
    if (idx >= p->nmemo || !p->memo[idx]) return pk_bad(p, "BINGET of a memo entry never put");
    return push(p, p->memo[idx] - 1);
  }
  if (p->nstack <= floor_of(p)) return pk_bad(p, "PUT with nothing on the stack");
  while (p->nmemo <= idx) {
    if (grow((void **)&p->memo, p->nmemo, &p->capmemo, sizeof *p->memo, MAX_NODES))
      return pk_bad(p, "out of memory for the memo");
    p->memo[p->nmemo++] = 0;
  }
  p->memo[idx] = p->stack[p->nstack - 1] + 1;
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t op_simple(pk *p, unsigned char op) {
  uint32_t id = 0;
  switch (op) {
    case 'N': return push_new(p, V_NONE, &id);
    case 0x88:
    case 0x89:
      P2PK_CHECK(push_new(p, V_BOOL, &id));
      p->node[id].u.i = op == 0x88;
      return P2PKIT_SUCCESS;
    case '}': return push_new(p, V_DICT, &id);
    case ']': return push_new(p, V_LIST, &id);
    case ')': return push_new(p, V_TUPLE, &id);
    default: /* '(' MARK */
      if (grow((void **)&p->marks, p->nmarks, &p->capmarks, sizeof *p->marks, MAX_STACK))
        return pk_bad(p, "too many MARKs");
      p->marks[p->nmarks++] = p->nstack;
      return P2PKIT_SUCCESS;
  }
}

/* The name of an opcode refused, for the message. */
static const char *refused_name(unsigned char op) {
  switch (op) {
    case 'c': return "GLOBAL";
    case 0x93: return "STACK_GLOBAL";
    case 'R': return "REDUCE";
    case 'b': return "BUILD";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 0x82: case 0x83: case 0x84: return "EXT";
    default: return NULL;
  }
}

static p2pkit_status_t op_end(pk *p, unsigned char op) {
  const unsigned char *b = NULL;
  if (op == 0x80) { /* PROTO */
    P2PK_CHECK(take(p, 1, &b));
    return b[0] <= 5 ? P2PKIT_SUCCESS : pk_bad(p, "a pickle protocol newer than 5");
  }
  if (op == 0x95) return take(p, 8, &b); /* FRAME: its length only */
  /* STOP */
  if (p->nmarks || p->nstack != 1) return pk_bad(p, "STOP with the stack not holding one value");
  p->root = p->stack[0];
  p->done = 1;
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t step(pk *p) {
  const unsigned char *b = NULL;
  P2PK_CHECK(take(p, 1, &b));
  const unsigned char op = b[0];
  switch (op) {
    case 'J': case 'K': case 'M': case 0x8a: return op_ints(p, op);
    case 'X': case 0x8c: case 0x8d: return op_str(p, op);
    case 'G': return op_float(p);
    case 't': return op_tuple(p, -1);
    case 0x85: case 0x86: case 0x87: return op_tuple(p, op - 0x84);
    case 'a': case 'e': case 's': case 'u': return op_fill(p, op);
    case 'q': case 'r': case 0x94: case 'h': case 'j': return op_memo(p, op);
    case 'N': case 0x88: case 0x89: case '}': case ']': case ')': case '(': return op_simple(p, op);
    case 0x80: case 0x95: case '.': return op_end(p, op);
    default: break;
  }
  const char *n = refused_name(op);
  char what[128];
  if (n) snprintf(what, sizeof what, "opcode %s (0x%02x) would run code: refused", n, op);
  else snprintf(what, sizeof what, "opcode 0x%02x is not one of plain data's: refused", op);
  p->at--;
  return pk_bad(p, what);
}

static void pk_free(pk *p) {
  for (uint32_t i = 0; i < p->nnode; i++)
    if (p->node[i].type >= V_LIST) free(p->node[i].u.items);
  free(p->node);
  free(p->stack);
  free(p->marks);
  free(p->memo);
}

static p2pkit_status_t pk_run(pk *p) {
  if (p->len == 0 || p->in[0] != 0x80) return pk_bad(p, "not a pickle (no PROTO opcode first)");
  while (!p->done) P2PK_CHECK(step(p));
  if (p->at != p->len) return pk_bad(p, "bytes after the pickle's STOP");
  return P2PKIT_SUCCESS;
}

/* -------------------------------------------- the dump's fields -------- */

static const pv *at(const pk *p, uint32_t id) { return &p->node[id]; }

static int str_is(const pk *p, const pv *v, const char *s) {
  return v->type == V_STR && v->u.s.len == strlen(s) && memcmp(p->in + v->u.s.off, s, v->u.s.len) == 0;
}

/* The value of key `k` in dict d (the last one set), or NULL. */
static const pv *get(const pk *p, const pv *d, const char *k) {
  if (!d || d->type != V_DICT) return NULL;
  for (uint32_t i = d->n; i >= 2; i -= 2)
    if (str_is(p, at(p, d->u.items[i - 2]), k)) return at(p, d->u.items[i - 1]);
  return NULL;
}

/* A str value into out (cut to fit; a NUL byte in it as '?'), "" when not
 * a str. The printers make it printable. */
static void str_of(const pk *p, const pv *v, char *out, size_t len) {
  out[0] = '\0';
  if (!v || v->type != V_STR) return;
  const size_t n = v->u.s.len < len - 1 ? v->u.s.len : len - 1;
  memcpy(out, p->in + v->u.s.off, n);
  out[n] = '\0';
  for (size_t i = 0; i < n; i++)
    if (!out[i]) out[i] = '?';
}

/* A field that is one word: printable, its spaces as '_', "-" when empty. */
static void as_token(char *s, size_t len) {
  if (!s[0]) snprintf(s, len, "-");
  p2pk_text_printable(s);
  for (; *s; s++)
    if (*s == ' ' || *s == '\n' || *s == '\t') *s = '_';
}

static int int_of(const pv *v, int64_t *out) {
  if (!v || (v->type != V_INT && v->type != V_BOOL)) return -1;
  *out = v->u.i;
  return 0;
}

/* "[0, 1, 2]" (torch's text of a group's ranks) into r (room for its
 * length / 2 + 1 numbers); how many, or -1 when it is not that. */
static int ranks_text(const char *s, const char *e, int64_t *r) {
  int k = 0;
  if (s == e || *s++ != '[') return -1;
  while (s < e && *s != ']') {
    if (k) {
      if (e - s < 2 || s[0] != ',' || s[1] != ' ') return -1;
      s += 2;
    }
    int64_t x = 0;
    const char *d = s;
    while (s < e && *s >= '0' && *s <= '9' && s - d < 9) x = x * 10 + (*s++ - '0');
    if (s == d || k >= P2PK_TRACE_MAX_RANKS) return -1;
    r[k++] = x;
  }
  return s + 1 == e && *s == ']' ? k : -1;
}

/* A group's ranks: torch's text of them, or a list of ints; into a new
 * array. -1 when neither. */
static int ranks_of(const pk *p, const pv *v, int64_t **out, int *n) {
  int64_t *r = NULL;
  int k = -1;
  if (v && (v->type == V_LIST || v->type == V_TUPLE) && v->n <= P2PK_TRACE_MAX_RANKS &&
      (r = malloc((v->n + 1) * sizeof *r))) {
    for (k = 0; k < (int)v->n; k++)
      if (int_of(at(p, v->u.items[k]), &r[k]) || r[k] < 0) break;
    if (k != (int)v->n) k = -1;
  } else if (v && v->type == V_STR && (r = malloc(sizeof *r * (v->u.s.len / 2 + 1)))) {
    const char *s = (const char *)p->in + v->u.s.off;
    k = ranks_text(s, s + v->u.s.len, r);
  }
  if (k < 0) {
    free(r);
    return -1;
  }
  *out = r;
  *n = k;
  return 0;
}

/* The members of group `name` from pg_config: its entry by key or by its
 * "name", else the only entry there is (gloo keys its one group by "").
 * 0 and *members NULL when unknown. */
static int members_of(const pk *p, const pv *cfg, const char *name, int64_t **members) {
  *members = NULL;
  if (!cfg || cfg->type != V_DICT) return 0;
  const pv *g = get(p, cfg, name);
  for (uint32_t i = 1; !g && i < cfg->n; i += 2) {
    char n[72];
    str_of(p, get(p, at(p, cfg->u.items[i]), "name"), n, sizeof n);
    if (strcmp(n, name) == 0) g = at(p, cfg->u.items[i]);
  }
  if (!g && cfg->n == 2) g = at(p, cfg->u.items[1]);
  int n = 0;
  if (!g || ranks_of(p, get(p, g, "ranks"), members, &n)) return 0;
  return n;
}

/* An entry's group name (process_group's first field). */
static void group_of(const pk *p, const pv *e, char *out, size_t len) {
  const pv *g = get(p, e, "process_group");
  out[0] = '\0';
  if (g && (g->type == V_TUPLE || g->type == V_LIST) && g->n >= 1) str_of(p, at(p, g->u.items[0]), out, len);
}

/* Elements of the inputs: the sum over tensors of their sizes' product
 * (saturated). */
static uint64_t numel(const pk *p, const pv *sizes) {
  uint64_t total = 0;
  if (!sizes || (sizes->type != V_LIST && sizes->type != V_TUPLE)) return 0;
  for (uint32_t i = 0; i < sizes->n; i++) {
    const pv *t = at(p, sizes->u.items[i]);
    if (t->type != V_LIST && t->type != V_TUPLE) continue;
    uint64_t prod = 1;
    for (uint32_t j = 0; j < t->n; j++) {
      int64_t d = 0;
      if (int_of(at(p, t->u.items[j]), &d) || d < 0) d = 0;
      prod = d && prod > UINT64_MAX / (uint64_t)d ? UINT64_MAX : prod * (uint64_t)d;
    }
    total = total > UINT64_MAX - prod ? UINT64_MAX : total + prod;
  }
  return total;
}

/* "nccl:send 0->1" / "nccl:recv 1<-0" / "nccl:all_reduce": the kind, and
 * a send's or receive's peer (the group's rank). */
static void kind_of(const pk *p, const pv *e, p2pk_tcall *k) {
  char name[96];
  str_of(p, get(p, e, "profiling_name"), name, sizeof name);
  const char *c = strchr(name, ':');
  const char *s = c ? c + 1 : name;
  snprintf(k->kind, sizeof k->kind, "%.*s", (int)strcspn(s, " "), s);
  as_token(k->kind, sizeof k->kind);
  k->p2p = strcmp(k->kind, "send") == 0 || strcmp(k->kind, "recv") == 0;
  k->root = -1;
  const char *arrow = strstr(s, "->"), *back = strstr(s, "<-");
  if (k->p2p && (arrow || back)) k->root = strtol((arrow ? arrow : back) + 2, NULL, 10);
  if (k->root < 0 || k->root >= P2PK_TRACE_MAX_RANKS) k->root = -1;
}

/* One entry as a call (0), or -1 when it is not one (no number). */
static int call_of(const pk *p, const pv *e, p2pk_tcall *k) {
  memset(k, 0, sizeof *k);
  if (e->type != V_DICT) return -1;
  kind_of(p, e, k);
  int64_t seq = 0, t = 0;
  if (int_of(get(p, e, k->p2p ? "p2p_seq_id" : "collective_seq_id"), &seq) || seq < 1) return -1;
  k->seq = (uint64_t)seq;
  const pv *dt = get(p, e, "input_dtypes");
  if (!dt || (dt->type != V_LIST && dt->type != V_TUPLE) || !dt->n) dt = get(p, e, "output_dtypes");
  if (dt && (dt->type == V_LIST || dt->type == V_TUPLE) && dt->n)
    str_of(p, at(p, dt->u.items[0]), k->dtype, sizeof k->dtype);
  as_token(k->dtype, sizeof k->dtype);
  k->count = numel(p, get(p, e, "input_sizes"));
  snprintf(k->op, sizeof k->op, "-");
  snprintf(k->path, sizeof k->path, "-");
  if (!int_of(get(p, e, "time_created_ns"), &t) && t > 0) k->t_ns = (uint64_t)t;
  str_of(p, get(p, e, "state"), k->state, sizeof k->state);
  as_token(k->state, sizeof k->state);
  return 0;
}

/* Group `name`'s calls among the entries, in order (a number seen again,
 * as a coalesced group's parts carry, is kept once). */
static p2pkit_status_t calls_of(const pk *p, const pv *entries, const char *name, p2pk_tdump *d) {
  uint64_t last[2] = {0, 0};
  size_t cap = 0;
  for (uint32_t i = 0; entries && entries->type == V_LIST && i < entries->n; i++) {
    const pv *e = at(p, entries->u.items[i]);
    char g[72];
    group_of(p, e, g, sizeof g);
    p2pk_tcall k;
    if (strcmp(g, name) != 0 || call_of(p, e, &k) || k.seq <= last[k.p2p]) continue;
    last[k.p2p] = k.seq;
    if (d->ncalls == cap) {
      cap = cap ? cap * 2 : 64;
      p2pk_tcall *n = realloc(d->calls, cap * sizeof *n);
      if (!n) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "%s: out of memory", p->name);
      d->calls = n;
    }
    d->calls[d->ncalls++] = k;
  }
  d->ring = d->recorded = d->ncalls;
  return P2PKIT_SUCCESS;
}

/* Rank `rank`'s dump of group `name`: 1 made, 0 when the rank is not one
 * of the group's (the configuration says so). */
static int group_dump(const pk *p, const pv *root, const char *name, int rank, p2pk_tdump *d,
                      p2pkit_status_t *st) {
  memset(d, 0, sizeof *d);
  const int n = members_of(p, get(p, root, "pg_config"), name, &d->members);
  int in = n == 0;
  for (int i = 0; i < n; i++) in |= d->members[i] == rank;
  if (!in) {
    free(d->members);
    d->members = NULL;
    return 0;
  }
  d->source = P2PK_TSRC_TORCH;
  snprintf(d->file, sizeof d->file, "%s", p->name);
  str_of(p, get(p, root, "version"), d->version, sizeof d->version);
  as_token(d->version, sizeof d->version);
  snprintf(d->comm, sizeof d->comm, "%s", name);
  as_token(d->comm, sizeof d->comm);
  d->rank = rank;
  d->nranks = n;
  snprintf(d->host, sizeof d->host, "-");
  d->pid = -1;
  d->device = -1;
  snprintf(d->gpu, sizeof d->gpu, "-");
  snprintf(d->reason, sizeof d->reason, "torch flight recorder %s", d->version);
  snprintf(d->error, sizeof d->error, "none");
  d->error_peer = -1;
  *st = calls_of(p, get(p, root, "entries"), name, d);
  for (size_t i = 0; i < d->ncalls; i++)
    if (d->calls[i].t_ns > d->real_ns) d->real_ns = d->calls[i].t_ns;
  return 1;
}

#define MAX_GROUPS 4096

/* Every group's name: those the entries name, in order, then the
 * configuration's others (not its "" key: gloo's name for the one group). */
static int group_names(const pk *p, const pv *root, char (*names)[72]) {
  int n = 0;
  const pv *entries = get(p, root, "entries"), *cfg = get(p, root, "pg_config");
  for (uint32_t i = 0; entries && entries->type == V_LIST && i < entries->n; i++) {
    char g[72];
    group_of(p, at(p, entries->u.items[i]), g, sizeof g);
    int seen = 0;
    for (int j = 0; j < n && !seen; j++) seen = strcmp(names[j], g) == 0;
    if (!seen && n == MAX_GROUPS) return -1;
    if (!seen) snprintf(names[n++], 72, "%s", g);
  }
  for (uint32_t i = 0; cfg && cfg->type == V_DICT && i < cfg->n; i += 2) {
    char g[72];
    str_of(p, at(p, cfg->u.items[i]), g, sizeof g);
    int seen = !g[0];
    for (int j = 0; j < n && !seen; j++) seen = strcmp(names[j], g) == 0;
    if (!seen && n == MAX_GROUPS) return -1;
    if (!seen) snprintf(names[n++], 72, "%s", g);
  }
  return n;
}

static p2pkit_status_t fr_dumps(const pk *p, int rank, p2pk_tdump **out, size_t *nout) {
  const pv *root = at(p, p->root);
  if (root->type != V_DICT || !get(p, root, "entries"))
    return p2pk_fail(P2PKIT_ERR_PARSE, "%s: a pickle, but not a flight recorder dump (no "
                     "\"entries\")", p->name);
  char (*names)[72] = malloc(MAX_GROUPS * sizeof *names);
  if (!names) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "%s: out of memory", p->name);
  const int ng = group_names(p, root, names);
  p2pk_tdump *d = ng > 0 ? calloc((size_t)ng, sizeof *d) : NULL;
  p2pkit_status_t st = ng < 0 ? p2pk_fail(P2PKIT_ERR_PARSE, "%s: more than %d process groups",
                                          p->name, MAX_GROUPS)
                       : ng > 0 && !d ? p2pk_fail(P2PKIT_ERR_NO_MEMORY, "%s: out of memory", p->name)
                                      : P2PKIT_SUCCESS;
  size_t n = 0;
  for (int g = 0; g < ng && st == P2PKIT_SUCCESS; g++) n += (size_t)group_dump(p, root, names[g], rank, &d[n], &st);
  free(names);
  if (st != P2PKIT_SUCCESS) {
    for (size_t i = 0; i <= n && d && i < (size_t)ng; i++) p2pk_tdump_free(&d[i]);
    free(d);
    return st;
  }
  *out = d;
  *nout = n;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_fr_read(const char *name, const unsigned char *buf, size_t len, int rank,
                             p2pk_tdump **out, size_t *n) {
  *out = NULL;
  *n = 0;
  if (len > P2PK_TRACE_MAX_FR_FILE)
    return p2pk_fail(P2PKIT_ERR_PARSE, "%s: %zu bytes, more than a flight recorder dump p2pkit "
                     "reads (%u MiB)", name, len, P2PK_TRACE_MAX_FR_FILE >> 20);
  pk p;
  memset(&p, 0, sizeof p);
  p.name = name;
  p.in = buf;
  p.len = len;
  p2pkit_status_t st = pk_run(&p);
  if (st == P2PKIT_SUCCESS) st = fr_dumps(&p, rank, out, n);
  pk_free(&p);
  return st;
}

int p2pk_fr_rank_of(const char *name) {
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  size_t len = strlen(base), k = 0;
  while (k < len && base[len - 1 - k] >= '0' && base[len - 1 - k] <= '9') k++;
  if (!k || k > 7) return -1;
  return atoi(base + len - k);
}
