/* SPDX-License-Identifier: BSD-3-Clause */
/* The hierarchical plan run on host memory: every rank's steps, each INTRA
 * or CROSS step executed as its collective over its group (in group order),
 * against a plain collective over all ranks. Integer types (every op) and
 * min / max of every float type must match bit for bit whatever the order;
 * float sum, prod and avg must match a reference that adds in the plan's
 * order (inside each host, then across hosts) bit for bit, and the rank
 * order within rounding. 1-4 hosts x 1-8 ranks, counts 0, 1, 3, 4097 and
 * H*L +- 1, host-major, round-robin and scattered placements, in place;
 * reduce-scatter and all-gather again in pieces through a small scratch. */
#include <stdint.h>

#include "coll/paths/hier.h"
#include "nccl/dtype.h"
#include "test.h"

/* ------------------------------------------------ elements of any type ---- */

static uint64_t ld(const uint8_t *p, size_t es) {
  uint64_t v = 0;
  memcpy(&v, p, es);
  return v;
}
static void st(uint8_t *p, size_t es, uint64_t v) { memcpy(p, &v, es); }
static int64_t sext(uint64_t v, size_t es) {
  if (es == 8) return (int64_t)v;
  uint64_t sign = (uint64_t)1 << (8 * es - 1);
  v &= (sign << 1) - 1;
  return (int64_t)(v ^ sign) - (int64_t)sign;
}
static int is_signed_int(p2pkit_dtype_t d) {
  return d == P2PKIT_INT8 || d == P2PKIT_INT32 || d == P2PKIT_INT64;
}
static int is_int(p2pkit_dtype_t d) {
  return is_signed_int(d) || d == P2PKIT_UINT8 || d == P2PKIT_UINT32 || d == P2PKIT_UINT64;
}
/* fp16, bf16, fp8: sign-magnitude bits; without NaN and -0 their order is
 * the order of this key. */
static int is_small_float(p2pkit_dtype_t d) {
  return d == P2PKIT_FLOAT16 || d == P2PKIT_BFLOAT16 || d == P2PKIT_FLOAT8_E4M3 ||
         d == P2PKIT_FLOAT8_E5M2;
}
static int64_t key(uint64_t bits, size_t es) {
  uint64_t sign = (uint64_t)1 << (8 * es - 1);
  return bits & sign ? -(int64_t)(bits & (sign - 1)) : (int64_t)bits;
}

static double red_f(double a, double b, p2pkit_redop_t op) {
  switch (op) {
    case P2PKIT_PROD: return a * b;
    case P2PKIT_MIN: return b < a ? b : a;
    case P2PKIT_MAX: return b > a ? b : a;
    default: return a + b;
  }
}

/* acc[i] = acc[i] op x[i] for n elements (avg reduces as sum). */
static void reduce(uint8_t *acc, const uint8_t *x, size_t n, p2pkit_dtype_t d, p2pkit_redop_t op) {
  const size_t es = p2pkit_dtype_size(d);
  for (size_t i = 0; i < n; i++, acc += es, x += es) {
    uint64_t a = ld(acc, es), b = ld(x, es);
    if (d == P2PKIT_FLOAT32) {
      float fa, fb;
      memcpy(&fa, &a, 4), memcpy(&fb, &b, 4);
      fa = (float)red_f(fa, fb, op); /* float + float in double, rounded once: as float math */
      memcpy(acc, &fa, 4);
    } else if (d == P2PKIT_FLOAT64) {
      double fa, fb;
      memcpy(&fa, &a, 8), memcpy(&fb, &b, 8);
      fa = red_f(fa, fb, op);
      memcpy(acc, &fa, 8);
    } else if (is_small_float(d)) {
      int take_b = op == P2PKIT_MIN ? key(b, es) < key(a, es) : key(b, es) > key(a, es);
      if (take_b) st(acc, es, b);
    } else if (op == P2PKIT_MIN || op == P2PKIT_MAX) {
      int less = is_signed_int(d) ? sext(b, es) < sext(a, es) : b < a;
      int more = is_signed_int(d) ? sext(b, es) > sext(a, es) : b > a;
      if (op == P2PKIT_MIN ? less : more) st(acc, es, b);
    } else {
      st(acc, es, op == P2PKIT_PROD ? a * b : a + b); /* wraps, as on the GPU */
    }
  }
}

static void divide(uint8_t *x, size_t n, p2pkit_dtype_t d, size_t by) {
  const size_t es = p2pkit_dtype_size(d);
  for (size_t i = 0; i < n; i++, x += es) {
    if (d == P2PKIT_FLOAT32) {
      float f;
      memcpy(&f, x, 4);
      f = f / (float)by;
      memcpy(x, &f, 4);
    } else if (d == P2PKIT_FLOAT64) {
      double f;
      memcpy(&f, x, 8);
      f = f / (double)by;
      memcpy(x, &f, 8);
    } else if (is_signed_int(d)) {
      st(x, es, (uint64_t)(sext(ld(x, es), es) / (int64_t)by));
    } else {
      st(x, es, ld(x, es) / by);
    }
  }
}

/* A deterministic value of rank r's element i: full-range bits for the
 * integers, fractions in (-4, 4) without zero for float32/64, and for the
 * small floats any bits but NaN, infinity and -0. */
static uint64_t value(p2pkit_dtype_t d, int r, size_t i) {
  uint64_t x = (uint64_t)r * 0x9e3779b97f4a7c15u + i * 0xbf58476d1ce4e5b9u + (uint64_t)d;
  x ^= x >> 31, x *= 0x94d049bb133111ebu, x ^= x >> 29;
  double f = ((double)(x % 2000) - 1000.0 + 0.5) / 250.0;
  if (d == P2PKIT_FLOAT32) {
    float g = (float)f;
    uint32_t b;
    memcpy(&b, &g, 4);
    return b;
  }
  if (d == P2PKIT_FLOAT64) {
    uint64_t b;
    memcpy(&b, &f, 8);
    return b;
  }
  if (!is_small_float(d)) return x;
  const size_t es = p2pkit_dtype_size(d);
  uint64_t sign = (uint64_t)1 << (8 * es - 1), bits = x & ((sign << 1) - 1);
  uint64_t expmask = d == P2PKIT_FLOAT16 ? 0x7c00 : d == P2PKIT_BFLOAT16 ? 0x7f80
                   : d == P2PKIT_FLOAT8_E5M2 ? 0x7c : 0x7f; /* e4m3fn: only 0x7f is NaN */
  if ((bits & expmask) == expmask) bits &= ~(expmask & (expmask >> 1)); /* not all ones */
  if ((bits & (sign - 1)) == 0) bits = 0;                                /* no -0 */
  return bits;
}

/* ------------------------------------------------------- the simulation ---- */

typedef struct {
  int kind, nranks, inplace;
  p2pkit_dtype_t d;
  p2pkit_redop_t op;
  size_t count, es, send_n, recv_n; /* elements */
  const p2pk_hosts *h;
  p2pk_hier_plan plan;
  uint8_t **send, **recv, **scratch;
  uint8_t **store; /* what was allocated per rank: send and recv apart, or one */
} sim_t;

static uint8_t *buf(const sim_t *s, int r, int which) {
  return which == P2PK_HIER_SEND ? s->send[r] : which == P2PK_HIER_RECV ? s->recv[r] : s->scratch[r];
}

/* The members of rank r's group for `group`, in group order. */
static int members(const sim_t *s, int r, int group, int *m) {
  if (group == P2PK_HIER_INTRA) return p2pk_hosts_local_ranks(s->h, s->h->host_of[r], m);
  return p2pk_hosts_cross_ranks(s->h, s->h->local_of[r], m);
}

/* One collective step over one group; results go through `tmp` so a step
 * may read what it overwrites (in place). */
static void run_group(const sim_t *s, const int *m, int k, const p2pk_hier_step *st_) {
  const size_t es = s->es, c = st_[m[0]].count;
  uint8_t *tmp = malloc((size_t)k * (size_t)k * c * es + 1);
  for (int i = 0; i < k; i++)
    if (st_[m[i]].count != c || st_[m[i]].op != st_[m[0]].op) T_FAIL("group members disagree");
  for (int i = 0; i < k; i++) { /* what member i ends up with, into tmp */
    const p2pk_hier_step *x = &st_[m[i]];
    uint8_t *t = tmp + (size_t)i * c * (size_t)k * es;
    if (x->op == P2PK_HIER_AG) {
      for (int j = 0; j < k; j++)
        memcpy(t + (size_t)j * c * es, buf(s, m[j], st_[m[j]].in) + st_[m[j]].in_off * es, c * es);
      continue;
    }
    if (x->op == P2PK_HIER_BCAST) {
      const p2pk_hier_step *rt = &st_[m[x->root]];
      memcpy(t, buf(s, m[x->root], rt->in) + rt->in_off * es, c * es);
      continue;
    }
    size_t at = x->op == P2PK_HIER_RS ? (size_t)i * c : 0;
    memcpy(t, buf(s, m[0], st_[m[0]].in) + (st_[m[0]].in_off + at) * es, c * es);
    for (int j = 1; j < k; j++)
      reduce(t, buf(s, m[j], st_[m[j]].in) + (st_[m[j]].in_off + at) * es, c, s->d, x->redop);
  }
  for (int i = 0; i < k; i++) {
    const p2pk_hier_step *x = &st_[m[i]];
    if (x->op == P2PK_HIER_REDUCE && i != x->root) continue;
    size_t n = x->op == P2PK_HIER_AG ? c * (size_t)k : c;
    memcpy(buf(s, m[i], x->out) + x->out_off * es, tmp + (size_t)i * c * (size_t)k * es, n * es);
  }
  free(tmp);
}

static void run_local(const sim_t *s, int r, const p2pk_hier_step *x) {
  const size_t es = s->es, c = x->count;
  if (x->op == P2PK_HIER_DIVIDE) {
    divide(buf(s, r, x->out) + x->out_off * es, c, s->d, x->divisor);
    return;
  }
  for (int q = 0; q < s->nranks; q++) { /* PERMUTE_IN / _OUT: every block (or a piece of it) */
    size_t pos = p2pk_hier_pos(&s->plan, q);
    if (x->op == P2PK_HIER_PERMUTE_IN)
      memcpy(s->scratch[r] + (x->out_off + pos * c) * es,
             s->send[r] + (x->in_off + (size_t)q * x->stride) * es, c * es);
    else
      memcpy(s->recv[r] + (x->out_off + (size_t)q * x->stride) * es,
             s->scratch[r] + (x->in_off + pos * c) * es, c * es);
  }
}

/* Runs every rank's steps of one piece, step by step, each group's at once. */
static void run_piece(sim_t *s, size_t piece) {
  p2pk_hier_step st_[64][P2PK_HIER_MAX_STEPS], cur[64];
  int nsteps = -1;
  for (int r = 0; r < s->nranks; r++) {
    int n = p2pk_hier_steps(&s->plan, r, piece, st_[r]);
    if (nsteps >= 0 && n != nsteps) T_FAIL("rank %d has %d steps, rank 0 %d", r, n, nsteps);
    nsteps = n;
  }
  for (int i = 0; i < nsteps; i++) {
    for (int r = 0; r < s->nranks; r++) cur[r] = st_[r][i];
    for (int r = 0; r < s->nranks; r++) {
      if (cur[r].op != cur[0].op || cur[r].group != cur[0].group) T_FAIL("step %d differs", i);
      if (cur[r].group == P2PK_HIER_LOCAL) run_local(s, r, &cur[r]);
    }
    if (cur[0].group == P2PK_HIER_LOCAL) continue;
    for (int r = 0; r < s->nranks; r++) { /* each group once: from its first member */
      int m[64], k = members(s, r, cur[0].group, m);
      if (m[0] == r) run_group(s, m, k, cur);
    }
  }
}

static void run_plan(sim_t *s) {
  for (size_t j = 0; j < s->plan.pieces; j++) run_piece(s, j);
}

/* ------------------------------------------------- set-up and reference ---- */

static void sim_init(sim_t *s, int kind, const p2pk_hosts *h, p2pkit_dtype_t d, p2pkit_redop_t op,
                     size_t count, int inplace) {
  memset(s, 0, sizeof *s);
  s->kind = kind, s->h = h, s->d = d, s->op = op, s->count = count, s->inplace = inplace;
  s->nranks = h->nranks;
  s->es = p2pkit_dtype_size(d);
  const size_t n = (size_t)s->nranks, es = s->es;
  s->send_n = kind == P2PK_COLL_REDUCE_SCATTER ? n * count : count;
  s->recv_n = kind == P2PK_COLL_ALL_GATHER ? n * count : count;
  s->send = calloc(n, sizeof(uint8_t *));
  s->recv = calloc(n, sizeof(uint8_t *));
  s->scratch = calloc(n, sizeof(uint8_t *));
  s->store = calloc(2 * n, sizeof(uint8_t *));
  for (int r = 0; r < s->nranks; r++) {
    size_t big = s->send_n > s->recv_n ? s->send_n : s->recv_n;
    s->store[2 * r] = malloc(big * es + 1);
    memset(s->store[2 * r], 0xee, big * es + 1);
    s->send[r] = s->recv[r] = s->store[2 * r];
    if (!inplace) {
      s->store[2 * r + 1] = malloc(s->recv_n * es + 1);
      memset(s->store[2 * r + 1], 0xee, s->recv_n * es + 1);
      s->recv[r] = s->store[2 * r + 1];
    } else if (kind == P2PK_COLL_REDUCE_SCATTER) {
      s->recv[r] = s->send[r] + (size_t)r * count * es; /* NCCL's in-place layouts */
    } else if (kind == P2PK_COLL_ALL_GATHER) {
      s->send[r] = s->recv[r] + (size_t)r * count * es;
    }
    for (size_t i = 0; i < s->send_n; i++) st(s->send[r] + i * es, es, value(d, r, i));
  }
}

static void sim_free(sim_t *s) {
  for (int r = 0; r < s->nranks; r++) {
    free(s->store[2 * r]);
    free(s->store[2 * r + 1]);
    free(s->scratch[r]);
  }
  free(s->send), free(s->recv), free(s->scratch), free(s->store);
}

/* The reduction of input element `idx` over all ranks: in rank order, or
 * (two_level) in the plan's order, inside each host then across hosts. */
static void ref_elem(const sim_t *s, size_t idx, int two_level, uint8_t *out) {
  const size_t es = s->es;
  const p2pk_hosts *h = s->h;
  uint8_t x[8], acc_h[8];
  if (!two_level) {
    st(out, es, value(s->d, 0, idx));
    for (int r = 1; r < s->nranks; r++) st(x, es, value(s->d, r, idx)), reduce(out, x, 1, s->d, s->op);
  } else {
    for (int k = 0; k < h->nhosts; k++) {
      st(acc_h, es, value(s->d, p2pk_hosts_rank_at(h, k, 0), idx));
      for (int l = 1; l < h->host_size[k]; l++)
        st(x, es, value(s->d, p2pk_hosts_rank_at(h, k, l), idx)), reduce(acc_h, x, 1, s->d, s->op);
      if (k == 0) memcpy(out, acc_h, es);
      else reduce(out, acc_h, 1, s->d, s->op);
    }
  }
  if (s->op == P2PKIT_AVG) divide(out, 1, s->d, (size_t)s->nranks);
}

static double as_double(const uint8_t *p, p2pkit_dtype_t d) {
  if (d == P2PKIT_FLOAT32) {
    float f;
    memcpy(&f, p, 4);
    return f;
  }
  double f;
  memcpy(&f, p, 8);
  return f;
}

/* Output element e of rank r against both references (want: the plan's
 * order, plain: rank order, both indexed by input element); 1 when wrong. */
static int check_elem(const sim_t *s, int r, size_t e, const uint8_t *want_all,
                      const uint8_t *plain_all) {
  const size_t es = s->es;
  const uint8_t *got = s->recv[r] + e * es;
  if (s->kind == P2PK_COLL_ALL_GATHER) {
    uint8_t want[8];
    st(want, es, value(s->d, (int)(e / s->count), e % s->count));
    return memcmp(got, want, es) != 0;
  }
  size_t idx = s->kind == P2PK_COLL_REDUCE_SCATTER ? (size_t)r * s->count + e : e;
  const uint8_t *want = want_all + idx * es, *plain = plain_all + idx * es;
  if (memcmp(got, want, es) != 0) return 1;
  int exact = is_int(s->d) || s->op == P2PKIT_MIN || s->op == P2PKIT_MAX;
  if (exact) return memcmp(got, plain, es) != 0;
  double a = as_double(got, s->d), b = as_double(plain, s->d);
  double tol = (s->d == P2PKIT_FLOAT32 ? 1e-4 : 1e-12) * (fabs(b) + (s->op == P2PKIT_PROD ? 0 : 4 * s->nranks));
  return !(fabs(a - b) <= tol);
}

/* Every output element of every rank; reports the first wrong one. */
static int check_all(const sim_t *s) {
  size_t n = s->kind == P2PK_COLL_ALL_GATHER ? 0 : s->send_n;
  uint8_t *want = malloc(n * s->es + 1), *plain = malloc(n * s->es + 1);
  for (size_t i = 0; i < n; i++) ref_elem(s, i, 1, want + i * s->es), ref_elem(s, i, 0, plain + i * s->es);
  int ok = 1;
  for (int r = 0; ok && r < s->nranks; r++)
    for (size_t e = 0; ok && e < s->recv_n; e++)
      if (check_elem(s, r, e, want, plain)) {
        T_FAIL("kind %d, %d hosts x %d, %s %s, count %zu%s: rank %d element %zu is wrong", s->kind,
               s->h->nhosts, s->h->local_max, p2pkit_dtype_name(s->d), p2pkit_redop_name(s->op),
               s->count, s->inplace ? " in place" : "", r, e);
        ok = 0;
      }
  free(want), free(plain);
  return ok;
}

/* The scratch the simulations allow, in elements (SIZE_MAX: what a whole
 * call needs). */
static size_t room = SIZE_MAX;

/* One collective through the plan; 1 when every element of every rank is right. */
static int sim_one(int kind, const p2pk_hosts *h, p2pkit_dtype_t d, p2pkit_redop_t op, size_t count,
                   int inplace) {
  sim_t s;
  sim_init(&s, kind, h, d, op, count, inplace);
  int ok = p2pk_hier_make(kind, h, count, op, room, &s.plan) == P2PKIT_SUCCESS;
  if (!ok) T_FAIL("plan: %s", p2pkit_last_error());

  for (int r = 0; ok && r < s.nranks; r++) s.scratch[r] = malloc(s.plan.scratch * s.es + 1);
  if (ok) run_plan(&s);
  if (ok) ok = check_all(&s);
  sim_free(&s);
  return ok;
}

/* ---------------------------------------------------------------- cases ---- */

enum { HOST_MAJOR, ROUND_ROBIN, SCATTERED };
static const int KINDS[] = {P2PK_COLL_ALL_REDUCE, P2PK_COLL_REDUCE_SCATTER, P2PK_COLL_ALL_GATHER};

/* H hosts x L ranks: rank = h * L + l, host = rank % H, or a fixed shuffle. */
static void make_hosts(int H, int L, int placement, p2pk_hosts *h) {
  int n = H * L, slot[64];
  char ids[64][8];
  const char *p[64];
  for (int r = 0; r < n; r++) slot[r] = r;
  uint32_t x = 12345u + (uint32_t)n;
  for (int r = n - 1; placement == SCATTERED && r > 0; r--) {
    x = x * 1103515245u + 12345u;
    int j = (int)((x >> 8) % (uint32_t)(r + 1)), t = slot[r];
    slot[r] = slot[j], slot[j] = t;
  }
  for (int r = 0; r < n; r++) {
    int host = placement == ROUND_ROBIN ? r % H : slot[r] / L;
    snprintf(ids[r], sizeof ids[r], "h%d", host);
    p[r] = ids[r];
  }
  CHECK_OK(p2pk_hosts_group(p, n, 0, h));
}

/* 0, 1, 3, 4097, H*L - 1, H*L, H*L + 1 (reduce-scatter and all-gather
 * count per rank: 4097 each on up to 8 ranks, 67 on more) */
static int odd_counts(int kind, int n, size_t *c) {
  c[0] = 0, c[1] = 1, c[2] = 3, c[3] = kind == P2PK_COLL_ALL_REDUCE || n <= 8 ? 4097 : 67;
  c[4] = (size_t)n - 1, c[5] = (size_t)n, c[6] = (size_t)n + 1;
  return 7;
}

/* The first nkinds of KINDS x the ncases (dtype, op) pairs x odd counts on
 * H hosts x L ranks. */
static void sweep(int H, int L, int placement, const p2pkit_dtype_t *dts, const p2pkit_redop_t *ops,
                  int ncases, int inplace, int nkinds) {
  p2pk_hosts h;
  make_hosts(H, L, placement, &h);
  size_t counts[8];
  for (int k = 0; k < nkinds; k++)
    for (int i = 0; i < ncases; i++)
      for (int c = 0, nc = odd_counts(KINDS[k], H * L, counts); c < nc; c++) {
        if (KINDS[k] == P2PK_COLL_ALL_GATHER && ops[i] != ops[0]) continue; /* no op */
        if (!sim_one(KINDS[k], &h, dts[i], ops[i], counts[c], inplace)) break;
      }
  p2pk_hosts_free(&h);
}

TEST(layouts_and_counts) {
  const p2pkit_dtype_t dts[] = {P2PKIT_UINT32, P2PKIT_FLOAT32};
  const p2pkit_redop_t ops[] = {P2PKIT_SUM, P2PKIT_SUM};
  for (int H = 1; H <= 4; H++)
    for (int L = 1; L <= 8; L++) sweep(H, L, HOST_MAJOR, dts, ops, 2, 0, 3);
}

TEST(placements) {
  const p2pkit_dtype_t dts[] = {P2PKIT_INT32, P2PKIT_FLOAT64};
  const p2pkit_redop_t ops[] = {P2PKIT_SUM, P2PKIT_SUM};
  const int shapes[][2] = {{2, 4}, {4, 2}, {3, 2}, {2, 3}, {3, 3}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    sweep(shapes[i][0], shapes[i][1], ROUND_ROBIN, dts, ops, 2, 0, 3);
    sweep(shapes[i][0], shapes[i][1], SCATTERED, dts, ops, 2, 0, 3);
  }
}

TEST(every_dtype_and_op) {
  p2pkit_dtype_t dts[P2PKIT_DTYPE_COUNT * P2PKIT_REDOP_COUNT];
  p2pkit_redop_t ops[P2PKIT_DTYPE_COUNT * P2PKIT_REDOP_COUNT];
  int n = 0;
  for (int d = 0; d < P2PKIT_DTYPE_COUNT; d++)
    for (int op = 0; op < P2PKIT_REDOP_COUNT; op++) {
      /* 16- and 8-bit float arithmetic rounds as the kernel does: min / max only */
      if (is_small_float((p2pkit_dtype_t)d) && op != P2PKIT_MIN && op != P2PKIT_MAX) continue;
      dts[n] = (p2pkit_dtype_t)d, ops[n++] = (p2pkit_redop_t)op;
    }
  const int shapes[][3] = {{2, 2, HOST_MAJOR}, {3, 1, HOST_MAJOR}, {2, 3, ROUND_ROBIN},
                           {1, 4, HOST_MAJOR}, {2, 2, SCATTERED}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (int j = 0; j < n; j++) /* all-gather (no op) once per type */
      sweep(shapes[i][0], shapes[i][1], shapes[i][2], &dts[j], &ops[j], 1, 0,
            j == 0 || dts[j] != dts[j - 1] ? 3 : 2);
}

TEST(in_place) {
  const p2pkit_dtype_t dts[] = {P2PKIT_INT64, P2PKIT_FLOAT32, P2PKIT_UINT8};
  const p2pkit_redop_t ops[] = {P2PKIT_MAX, P2PKIT_SUM, P2PKIT_AVG};
  sweep(2, 4, HOST_MAJOR, dts, ops, 3, 1, 3);
  sweep(3, 2, ROUND_ROBIN, dts, ops, 3, 1, 3);
  sweep(2, 3, SCATTERED, dts, ops, 3, 1, 3);
}

/* Reduce-scatter and all-gather through a scratch smaller than a whole
 * call's: pieces of each rank's block (down to one element each), every
 * layout and placement, in place too, against the plain collective. */
TEST(in_pieces) {
  const p2pkit_dtype_t dts[] = {P2PKIT_INT32, P2PKIT_FLOAT32, P2PKIT_FLOAT64};
  const p2pkit_redop_t ops[] = {P2PKIT_SUM, P2PKIT_AVG, P2PKIT_MAX};
  const int shapes[][3] = {{2, 4, HOST_MAJOR}, {2, 4, ROUND_ROBIN}, {3, 2, SCATTERED},
                           {4, 2, HOST_MAJOR}, {2, 1, HOST_MAJOR}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const size_t n = (size_t)(shapes[i][0] * shapes[i][1]);
    const size_t rooms[] = {n, 2 * n, 3 * n + 1, 5 * n};
    for (size_t j = 0; j < sizeof rooms / sizeof rooms[0]; j++) {
      room = rooms[j];
      for (int inplace = 0; inplace < 2; inplace++) {
        p2pk_hosts h;
        make_hosts(shapes[i][0], shapes[i][1], shapes[i][2], &h);
        static const size_t counts[] = {1, 2, 7, 64, 4097};
        for (int k = 1; k < 3; k++) /* reduce-scatter, all-gather */
          for (int d = 0; d < 3; d++)
            for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
              if (!sim_one(KINDS[k], &h, dts[d], ops[d], counts[c], inplace)) break;
        p2pk_hosts_free(&h);
      }
    }
  }
  room = SIZE_MAX;
  /* the numbers: 8 ranks host-major (a whole call needs 80), 10 elements
   * each, room for 3 per rank: 4 pieces */
  p2pk_hosts h;
  p2pk_hier_plan p;
  p2pk_hier_step st_[P2PK_HIER_MAX_STEPS];
  make_hosts(2, 4, HOST_MAJOR, &h);
  CHECK_OK(p2pk_hier_make(P2PK_COLL_REDUCE_SCATTER, &h, 10, P2PKIT_SUM, 8 * 3 + 2, &p));
  CHECK(p.piece == 3 && p.pieces == 4 && p.scratch == 24);
  CHECK_EQ(p2pk_hier_steps(&p, 5, 3, st_), 3); /* the last piece: 1 element of each block */
  CHECK(st_[0].op == P2PK_HIER_PERMUTE_IN && st_[0].in_off == 9 && st_[0].count == 1 &&
        st_[0].stride == 10);
  CHECK(st_[1].group == P2PK_HIER_INTRA && st_[1].count == 2 && st_[1].out_off == 2);
  CHECK(st_[2].group == P2PK_HIER_CROSS && st_[2].out_off == 9 && st_[2].count == 1);
  CHECK_EQ(p2pk_hier_make(P2PK_COLL_ALL_GATHER, &h, 10, P2PKIT_SUM, 7, &p),
           P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "holds less than one for each of 8 ranks") != NULL);
  p2pk_hosts_free(&h);
  /* round-robin: a whole reduce-scatter needs 20, an all-gather none */
  make_hosts(2, 4, ROUND_ROBIN, &h);
  CHECK_OK(p2pk_hier_make(P2PK_COLL_REDUCE_SCATTER, &h, 10, P2PKIT_SUM, 20, &p));
  CHECK(p.pieces == 1 && p.scratch == 20);
  CHECK_OK(p2pk_hier_make(P2PK_COLL_ALL_GATHER, &h, 10, P2PKIT_SUM, 7, &p));
  CHECK(p.pieces == 1 && p.scratch == 0);
  p2pk_hosts_free(&h);
}

/* The plan's numbers for a few shapes, as the executor will read them. */
TEST(plan_shapes) {
  p2pk_hosts h;
  p2pk_hier_plan p;
  p2pk_hier_step st_[P2PK_HIER_MAX_STEPS];
  size_t off, cnt;
  make_hosts(2, 4, HOST_MAJOR, &h);
  CHECK_OK(p2pk_hier_make(P2PK_COLL_ALL_REDUCE, &h, 10, P2PKIT_AVG, SIZE_MAX, &p));
  CHECK_EQ(p.nhosts, 2);
  CHECK_EQ(p.nlocal, 4);
  CHECK_EQ(p.base, 2);
  CHECK_EQ(p.tail, 2);
  CHECK_EQ(p.scratch, 0);
  p2pk_hier_shard(&p, 1, &off, &cnt);
  CHECK(off == 2 && cnt == 2);
  p2pk_hier_shard(&p, 3, &off, &cnt); /* the last local rank owns the tail */
  CHECK(off == 6 && cnt == 4);
  /* rank 7 = host 1, local 3: RS, tail reduce, cross AR, divide, AG, tail bcast */
  CHECK_EQ(p2pk_hier_steps(&p, 7, 0, st_), 6);
  const int want[] = {P2PK_HIER_RS, P2PK_HIER_REDUCE, P2PK_HIER_AR, P2PK_HIER_DIVIDE, P2PK_HIER_AG,
                      P2PK_HIER_BCAST};
  for (int i = 0; i < 6; i++) CHECK_EQ(st_[i].op, want[i]);
  CHECK(st_[0].group == P2PK_HIER_INTRA && st_[0].count == 2 && st_[0].out_off == 6);
  CHECK(st_[1].root == 3 && st_[1].in_off == 8 && st_[1].count == 2);
  CHECK(st_[2].group == P2PK_HIER_CROSS && st_[2].in_off == 6 && st_[2].count == 4);
  CHECK(st_[2].redop == P2PKIT_SUM && st_[3].divisor == 8);
  /* count below L: no intra reduce-scatter, everything in the tail */
  CHECK_OK(p2pk_hier_make(P2PK_COLL_ALL_REDUCE, &h, 3, P2PKIT_SUM, SIZE_MAX, &p));
  CHECK_EQ(p2pk_hier_steps(&p, 0, 0, st_), 3);
  CHECK(st_[0].op == P2PK_HIER_REDUCE && st_[1].op == P2PK_HIER_AR && st_[1].count == 0);
  /* host-major: reduce-scatter and all-gather reorder through scratch */
  CHECK_OK(p2pk_hier_make(P2PK_COLL_REDUCE_SCATTER, &h, 5, P2PKIT_SUM, SIZE_MAX, &p));
  CHECK(p.permute == 1 && p.scratch == 40);
  CHECK_EQ(p2pk_hier_pos(&p, 5), 1 * 2 + 1); /* host 1, local 1 */
  CHECK_EQ(p2pk_hier_steps(&p, 5, 0, st_), 3);
  CHECK(st_[0].op == P2PK_HIER_PERMUTE_IN && st_[1].count == 10 && st_[1].out_off == 10);
  CHECK_OK(p2pk_hier_make(P2PK_COLL_ALL_GATHER, &h, 5, P2PKIT_SUM, SIZE_MAX, &p));
  CHECK(p.permute == 1 && p.scratch == 40);
  CHECK_EQ(p2pk_hier_steps(&p, 5, 0, st_), 3);
  CHECK_EQ(st_[2].op, P2PK_HIER_PERMUTE_OUT);
  p2pk_hosts_free(&h);
  /* round-robin: ranks already in local-major order */
  make_hosts(2, 4, ROUND_ROBIN, &h);
  CHECK_OK(p2pk_hier_make(P2PK_COLL_REDUCE_SCATTER, &h, 5, P2PKIT_SUM, SIZE_MAX, &p));
  CHECK(p.permute == 0 && p.scratch == 10);
  CHECK_OK(p2pk_hier_make(P2PK_COLL_ALL_GATHER, &h, 5, P2PKIT_SUM, SIZE_MAX, &p));
  CHECK(p.permute == 0 && p.scratch == 0);
  CHECK_EQ(p2pk_hier_steps(&p, 5, 0, st_), 2);
  p2pk_hosts_free(&h);
}

TEST(refusals) {
  const char *ids[] = {"a", "a", "a", "b"};
  p2pk_hosts h;
  p2pk_hier_plan p;
  CHECK_OK(p2pk_hosts_group(ids, 4, 0, &h));
  CHECK_EQ(p2pk_hier_make(P2PK_COLL_ALL_REDUCE, &h, 8, P2PKIT_SUM, SIZE_MAX, &p), P2PKIT_ERR_UNSUPPORTED);
  CHECK(strstr(p2pkit_last_error(), "all_reduce: the 4 ranks sit unevenly on 2 hosts (3+1") != NULL);
  p2pk_hosts_free(&h);
  make_hosts(2, 2, HOST_MAJOR, &h);
  CHECK_EQ(p2pk_hier_make(P2PK_COLL_BROADCAST, &h, 8, P2PKIT_SUM, SIZE_MAX, &p), P2PKIT_ERR_UNSUPPORTED);
  CHECK(strstr(p2pkit_last_error(), "no hierarchical form; across hosts it goes through NCCL") != NULL);
  CHECK_EQ(p2pk_hier_make(P2PK_COLL_REDUCE_SCATTER, &h, 8, P2PKIT_REDOP_COUNT, SIZE_MAX, &p),
           P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pk_hier_make(P2PK_COLL_ALL_GATHER, &h, SIZE_MAX / 2, P2PKIT_SUM, SIZE_MAX, &p),
           P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "is too large for 4 ranks") != NULL);
  p2pk_hosts_free(&h);
}

T_MAIN(T_CASE(plan_shapes), T_CASE(refusals), T_CASE(layouts_and_counts), T_CASE(placements),
       T_CASE(every_dtype_and_op), T_CASE(in_place), T_CASE(in_pieces))
