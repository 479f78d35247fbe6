/* SPDX-License-Identifier: BSD-3-Clause */
/* The hierarchical plans (hier.h): each rank's steps, pure. */
#include "coll/paths/hier.h"

#include <stdint.h>
#include <string.h>

#include "core/check.h"

static const char *kind_name(int kind) {
  switch (kind) {
    case P2PK_COLL_ALL_REDUCE: return "all_reduce";
    case P2PK_COLL_REDUCE_SCATTER: return "reduce_scatter";
    case P2PK_COLL_ALL_GATHER: return "all_gather";
    default: return "this collective";
  }
}

size_t p2pk_hier_pos(const p2pk_hier_plan *p, int rank) {
  return (size_t)p->hosts->local_of[rank] * (size_t)p->nhosts + (size_t)p->hosts->host_of[rank];
}

/* A whole call's scratch beyond `room` elements: pieces of `piece`
 * elements of each of the n blocks, n * piece through the scratch. */
static p2pkit_status_t cut(p2pk_hier_plan *p, size_t n, size_t room, const char *name) {
  p->piece = p->count;
  p->pieces = 1;
  if (p->scratch <= room) return P2PKIT_SUCCESS;
  if (room < n)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: a scratch of %zu elements holds less than "
                     "one for each of %zu ranks", name, room, n);
  p->piece = room / n;
  p->pieces = (p->count + p->piece - 1) / p->piece;
  p->scratch = n * p->piece;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_hier_make(int kind, const p2pk_hosts *h, size_t count, p2pkit_redop_t op,
                               size_t room, p2pk_hier_plan *p) {
  memset(p, 0, sizeof *p);
  const char *name = kind_name(kind);
  if (kind != P2PK_COLL_ALL_REDUCE && kind != P2PK_COLL_REDUCE_SCATTER &&
      kind != P2PK_COLL_ALL_GATHER)
    return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "collective %d has no hierarchical form; across hosts "
                     "it goes through NCCL over all ranks", kind);
  P2PK_CHECK(p2pk_hosts_check_regular(h, name));
  if (kind != P2PK_COLL_ALL_GATHER && ((int)op < 0 || op >= P2PKIT_REDOP_COUNT))
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: operation %d is not a p2pkit_redop_t", name,
                     (int)op);
  const size_t n = (size_t)h->nranks;
  if (kind != P2PK_COLL_ALL_REDUCE && count > SIZE_MAX / n)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: count %zu per rank is too large for %zu "
                     "ranks", name, count, n);
  p->kind = kind;
  p->hosts = h;
  p->nhosts = h->nhosts;
  p->nlocal = h->host_size[0];
  p->count = count;
  p->op = kind == P2PK_COLL_ALL_GATHER ? P2PKIT_SUM : op;
  p->piece = count;
  p->pieces = 1;
  if (kind == P2PK_COLL_ALL_REDUCE) {
    p->base = count / (size_t)p->nlocal;
    p->tail = count % (size_t)p->nlocal;
    return P2PKIT_SUCCESS;
  }
  for (int r = 0; r < h->nranks; r++)
    if (p2pk_hier_pos(p, r) != (size_t)r) p->permute = 1;
  if (kind == P2PK_COLL_REDUCE_SCATTER)
    p->scratch = p->permute ? n * count : (size_t)p->nhosts * count;
  else
    p->scratch = p->permute ? n * count : 0;
  return cut(p, n, room, name);
}

void p2pk_hier_shard(const p2pk_hier_plan *p, int local, size_t *off, size_t *count) {
  *off = (size_t)local * p->base;
  *count = p->base + (local == p->nlocal - 1 ? p->tail : 0);
}

static p2pk_hier_step step(int op, int group, p2pkit_redop_t redop, int in, int out, size_t in_off,
                           size_t out_off, size_t count) {
  p2pk_hier_step s;
  memset(&s, 0, sizeof s);
  s.op = op, s.group = group, s.redop = redop, s.in = in, s.out = out;
  s.in_off = in_off, s.out_off = out_off, s.count = count, s.divisor = 1, s.stride = count;
  return s;
}

static int all_reduce_steps(const p2pk_hier_plan *p, int local, p2pkit_redop_t red,
                            p2pk_hier_step *s) {
  enum { SEND = P2PK_HIER_SEND, RECV = P2PK_HIER_RECV, INTRA = P2PK_HIER_INTRA };
  const size_t L = (size_t)p->nlocal, base = p->base, tail = p->tail;
  size_t off, cnt;
  p2pk_hier_shard(p, local, &off, &cnt);
  int n = 0;
  if (base) s[n++] = step(P2PK_HIER_RS, INTRA, red, SEND, RECV, 0, (size_t)local * base, base);
  if (tail) {
    s[n] = step(P2PK_HIER_REDUCE, INTRA, red, SEND, RECV, L * base, L * base, tail);
    s[n++].root = p->nlocal - 1;
  }
  s[n++] = step(P2PK_HIER_AR, P2PK_HIER_CROSS, red, RECV, RECV, off, off, cnt);
  if (p->op == P2PKIT_AVG) {
    s[n] = step(P2PK_HIER_DIVIDE, P2PK_HIER_LOCAL, red, RECV, RECV, off, off, cnt);
    s[n++].divisor = (size_t)p->hosts->nranks;
  }
  if (base) s[n++] = step(P2PK_HIER_AG, INTRA, red, RECV, RECV, (size_t)local * base, 0, base);
  if (tail) {
    s[n] = step(P2PK_HIER_BCAST, INTRA, red, RECV, RECV, L * base, L * base, tail);
    s[n++].root = p->nlocal - 1;
  }
  return n;
}

static int reduce_scatter_steps(const p2pk_hier_plan *p, int local, p2pkit_redop_t red,
                                p2pk_hier_step *s) {
  enum { SEND = P2PK_HIER_SEND, RECV = P2PK_HIER_RECV, SCRATCH = P2PK_HIER_SCRATCH };
  const size_t c = p->count, hc = (size_t)p->nhosts * c;
  /* permuted: the whole local-major copy in scratch, each local rank's
   * result in place at its H blocks; else straight from send into H blocks */
  const size_t mine = p->permute ? (size_t)local * hc : 0;
  int n = 0;
  if (p->permute) s[n++] = step(P2PK_HIER_PERMUTE_IN, P2PK_HIER_LOCAL, red, SEND, SCRATCH, 0, 0, c);
  s[n++] = step(P2PK_HIER_RS, P2PK_HIER_INTRA, red, p->permute ? SCRATCH : SEND, SCRATCH, 0, mine, hc);
  s[n++] = step(P2PK_HIER_RS, P2PK_HIER_CROSS, red, SCRATCH, RECV, mine, 0, c);
  if (p->op == P2PKIT_AVG) {
    s[n] = step(P2PK_HIER_DIVIDE, P2PK_HIER_LOCAL, red, RECV, RECV, 0, 0, c);
    s[n++].divisor = (size_t)p->hosts->nranks;
  }
  return n;
}

static int all_gather_steps(const p2pk_hier_plan *p, int local, p2pk_hier_step *s) {
  const size_t c = p->count, hc = (size_t)p->nhosts * c;
  const int to = p->permute ? P2PK_HIER_SCRATCH : P2PK_HIER_RECV;
  int n = 0;
  s[n++] = step(P2PK_HIER_AG, P2PK_HIER_CROSS, P2PKIT_SUM, P2PK_HIER_SEND, to, 0,
                (size_t)local * hc, c);
  s[n++] = step(P2PK_HIER_AG, P2PK_HIER_INTRA, P2PKIT_SUM, to, to, (size_t)local * hc, 0, hc);
  if (p->permute)
    s[n++] = step(P2PK_HIER_PERMUTE_OUT, P2PK_HIER_LOCAL, P2PKIT_SUM, P2PK_HIER_SCRATCH,
                  P2PK_HIER_RECV, 0, 0, c);
  return n;
}

/* Piece j of a reduce-scatter or all-gather in pieces: the range
 * [o, o + m) of every rank's block, through the scratch in local-major
 * order (n blocks of m). */
static int piece_steps(const p2pk_hier_plan *p, int local, p2pkit_redop_t red, size_t j,
                       p2pk_hier_step *s) {
  enum { SEND = P2PK_HIER_SEND, RECV = P2PK_HIER_RECV, SCRATCH = P2PK_HIER_SCRATCH };
  const size_t o = j * p->piece, m = p->count - o < p->piece ? p->count - o : p->piece;
  const size_t hm = (size_t)p->nhosts * m, mine = (size_t)local * hm;
  int n = 0;
  if (p->kind == P2PK_COLL_REDUCE_SCATTER) {
    s[n] = step(P2PK_HIER_PERMUTE_IN, P2PK_HIER_LOCAL, red, SEND, SCRATCH, o, 0, m);
    s[n++].stride = p->count;
    s[n++] = step(P2PK_HIER_RS, P2PK_HIER_INTRA, red, SCRATCH, SCRATCH, 0, mine, hm);
    s[n++] = step(P2PK_HIER_RS, P2PK_HIER_CROSS, red, SCRATCH, RECV, mine, o, m);
    if (p->op == P2PKIT_AVG) {
      s[n] = step(P2PK_HIER_DIVIDE, P2PK_HIER_LOCAL, red, RECV, RECV, o, o, m);
      s[n++].divisor = (size_t)p->hosts->nranks;
    }
    return n;
  }
  s[n++] = step(P2PK_HIER_AG, P2PK_HIER_CROSS, P2PKIT_SUM, SEND, SCRATCH, o, mine, m);
  s[n++] = step(P2PK_HIER_AG, P2PK_HIER_INTRA, P2PKIT_SUM, SCRATCH, SCRATCH, mine, 0, hm);
  s[n] = step(P2PK_HIER_PERMUTE_OUT, P2PK_HIER_LOCAL, P2PKIT_SUM, SCRATCH, RECV, 0, o, m);
  s[n++].stride = p->count;
  return n;
}

int p2pk_hier_steps(const p2pk_hier_plan *p, int rank, size_t piece, p2pk_hier_step *steps) {
  const int local = p->hosts->local_of[rank];
  /* avg: sums all the way, one division by the rank count on the way out
   * (integer averages then truncate once, as a flat all-reduce's do) */
  const p2pkit_redop_t red = p->op == P2PKIT_AVG ? P2PKIT_SUM : p->op;
  if (p->pieces > 1) return piece_steps(p, local, red, piece, steps);
  switch (p->kind) {
    case P2PK_COLL_ALL_REDUCE: return all_reduce_steps(p, local, red, steps);
    case P2PK_COLL_REDUCE_SCATTER: return reduce_scatter_steps(p, local, red, steps);
    case P2PK_COLL_ALL_GATHER: return all_gather_steps(p, local, steps);
    default: return 0;
  }
}

int p2pk_hier_premul_scalar(p2pkit_dtype_t dt, int n, unsigned char out[8]) {
  const float f = 1.0f / (float)n;
  uint32_t u;
  memcpy(&u, &f, 4);
  if (dt == P2PKIT_FLOAT32) memcpy(out, &f, 4);
  else if (dt == P2PKIT_FLOAT64) {
    const double d = 1.0 / (double)n;
    memcpy(out, &d, 8);
  } else if (dt == P2PKIT_BFLOAT16) {
    const uint16_t b = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); /* round to nearest even */
    memcpy(out, &b, 2);
  } else if (dt == P2PKIT_FLOAT16) {
    /* 1/n lies in [2^-4, 1] for n <= 16: a normal half */
    const int e = (int)((u >> 23) & 0xff) - 127 + 15;
    const uint32_t m = u & 0x7fffffu;
    uint16_t hb = (uint16_t)((e << 10) | (m >> 13));
    if ((m & 0x1fffu) > 0x1000u || ((m & 0x1fffu) == 0x1000u && (hb & 1u))) hb++;
    memcpy(out, &hb, 2);
  } else {
    return -1;
  }
  return 0;
}
