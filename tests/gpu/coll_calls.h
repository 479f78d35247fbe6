/* SPDX-License-Identifier: BSD-3-Clause */
/* One call of any collective (or a send/recv ring) on every local rank of a
 * runner (coll_runner.h), checked against a host reference: the call's
 * shape per rank, inputs uploaded and outputs poisoned (0xA5, guard bytes
 * of PAD around each output), the call issued as one group, every rank's
 * output read back and compared (reductions within the type's rounding,
 * copies byte for byte, a reduce's non-roots untouched). Shared by
 * test_collectives.c and test_conformance.c; include after coll_runner.h. */
#ifndef P2PK_COLL_CALLS_H
#define P2PK_COLL_CALLS_H

#define MAXR P2PK_COLL_MAX_RANKS
#define PAD 256
enum { SENDRECV = P2PK_COLL_KINDS }; /* send/recv pairs at a shift, as nccl-tests' ring */

typedef struct {
  int kind, root, inplace, misalign; /* send/recv: root picks the shift (sr_shift) */
  p2pkit_dtype_t dt;
  p2pkit_redop_t op;
  size_t count;
} call_t;

/* Send/recv of n ranks: rank r sends to r + shift and receives from r - shift
 * (mod n), shift 1..n-1 from k->root (root 0: the ring, shift 1); one rank
 * sends to itself (shift 0). */
static inline int sr_shift(const call_t *k, int n) { return n < 2 ? 0 : k->root % (n - 1) + 1; }

/* Where rank r's buffers sit, in elements from the start of its user region
 * (PAD + misalignment into dout / din): the send share(s) and the output. */
typedef struct {
  size_t in_elems, out_elems; /* lengths */
  size_t in_at, out_at;       /* offsets inside the one buffer when in place */
  size_t span;                /* elements of dout the call may touch */
  int writes;                 /* 0: this rank's recvbuf is not written */
} shape_t;

static inline shape_t shape_of(const call_t *k, int n, int rank) {
  shape_t s = {k->count, k->count, 0, 0, k->count, 1};
  switch (k->kind) {
    case P2PK_COLL_ALL_GATHER:
      s.out_elems = n * k->count;
      s.in_at = k->inplace ? rank * k->count : 0;
      break;
    case P2PK_COLL_REDUCE_SCATTER:
      s.in_elems = n * k->count;
      s.out_at = k->inplace ? rank * k->count : 0;
      break;
    case P2PK_COLL_ALL_TO_ALL: s.in_elems = s.out_elems = n * k->count; break;
    case P2PK_COLL_REDUCE: s.writes = rank == k->root; break;
    default: break;
  }
  s.span = s.in_elems > s.out_elems ? s.in_elems : s.out_elems;
  if (!k->inplace) s.span = s.out_elems;
  return s;
}

static inline size_t misalign_of(int rank, size_t es, int misalign) {
  return misalign ? ((size_t)(rank + 1) * es) % 16 : 0;
}

/* Rank r's pointers for the call, after uploading its input. */
static inline void prepare(runner_t *R, char **dout, char **din, const call_t *k, uint64_t seed,
                    const void **in, void **out, size_t *off) {
  size_t es = p2pkit_dtype_size(k->dt);
  for (int r = 0; r < R->nr; r++)
    cu_fill(R->hin[r], shape_of(k, R->nr, r).in_elems, k->dt, k->op, seed + (uint64_t)r);
  for (int l = 0; l < R->nloc; l++) {
    int g = R->rank0 + l;
    shape_t s = shape_of(k, R->nr, g);
    off[l] = misalign_of(g, es, k->misalign);
    T_CUDA(cudaSetDevice(R->dev[l]));
    T_CUDA(cudaMemset(dout[l], 0xA5, R->cap));
    T_CUDA(cudaMemset(din[l], 0x5A, R->cap));
    char *base = dout[l] + PAD + off[l];
    out[l] = base + s.out_at * es;
    in[l] = k->inplace ? base + s.in_at * es : din[l] + PAD + off[l];
    T_CUDA(cudaMemcpy((void *)in[l], R->hin[g], s.in_elems * es, cudaMemcpyHostToDevice));
    T_CUDA(cudaDeviceSynchronize());
  }
}

static inline p2pkit_status_t issue(runner_t *R, const call_t *k, const void **in, void **out) {
  p2pkit_status_t st = p2pkit_group_start();
  for (int l = 0; l < R->nloc && st == P2PKIT_SUCCESS; l++) {
    p2pkit_comm_t c = R->comm[l];
    cudaStream_t s = R->s[l];
    int n = R->nr, g = R->rank0 + l;
    switch (k->kind) {
      case P2PK_COLL_ALL_REDUCE: st = p2pkit_all_reduce(in[l], out[l], k->count, k->dt, k->op, c, s); break;
      case P2PK_COLL_BROADCAST: st = p2pkit_broadcast(in[l], out[l], k->count, k->dt, k->root, c, s); break;
      case P2PK_COLL_REDUCE: st = p2pkit_reduce(in[l], out[l], k->count, k->dt, k->op, k->root, c, s); break;
      case P2PK_COLL_ALL_GATHER: st = p2pkit_all_gather(in[l], out[l], k->count, k->dt, c, s); break;
      case P2PK_COLL_REDUCE_SCATTER: st = p2pkit_reduce_scatter(in[l], out[l], k->count, k->dt, k->op, c, s); break;
      case P2PK_COLL_ALL_TO_ALL: st = p2pkit_all_to_all(in[l], out[l], k->count, k->dt, c, s); break;
      default: { /* send to the rank `shift` ahead, receive from the one `shift` behind */
        int sh = sr_shift(k, n);
        st = p2pkit_send(in[l], k->count, k->dt, (g + sh) % n, c, s);
        if (st == P2PKIT_SUCCESS) st = p2pkit_recv(out[l], k->count, k->dt, (g + n - sh) % n, c, s);
        break;
      }
    }
  }
  p2pkit_status_t end = p2pkit_group_end();
  return st != P2PKIT_SUCCESS ? st : end;
}

static inline int untouched(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != 0xA5) return 0;
  return 1;
}

static inline const char *kind_name(int kind) { return kind == SENDRECV ? "sendrecv" : p2pk_coll_name(kind); }

/* Rank q's expected output of a copying collective into R->want; the
 * reductions go through cu_check instead. */
static inline void expect_copy(runner_t *R, const call_t *k, int q) {
  size_t es = p2pkit_dtype_size(k->dt), b = k->count * es;
  int n = R->nr;
  switch (k->kind) {
    case P2PK_COLL_BROADCAST: memcpy(R->want, R->hin[k->root], b); break;
    case P2PK_COLL_ALL_GATHER:
      for (int r = 0; r < n; r++) memcpy(R->want + r * b, R->hin[r], b);
      break;
    case P2PK_COLL_ALL_TO_ALL:
      for (int r = 0; r < n; r++) memcpy(R->want + r * b, (char *)R->hin[r] + q * b, b);
      break;
    default: memcpy(R->want, R->hin[(q + n - sr_shift(k, n)) % n], b); break; /* sendrecv */
  }
}

static inline int verify(runner_t *R, char **dout, const char *what, const call_t *k, size_t *off) {
  size_t es = p2pkit_dtype_size(k->dt);
  int ok = 1, n = R->nr;
  for (int l = 0; l < R->nloc; l++) {
    int q = R->rank0 + l;
    shape_t s = shape_of(k, n, q);
    T_CUDA(cudaSetDevice(R->dev[l]));
    T_CUDA(cudaStreamSynchronize(R->s[l]));
    p2pkit_status_t as = P2PKIT_SUCCESS;
    CHECK_OK(p2pkit_comm_get_async_error(R->comm[l], &as));
    if (as != P2PKIT_SUCCESS) {
      T_FAIL("%s: rank %d: async error %s: %s", what, q, p2pkit_strerror(as), p2pkit_last_error());
      ok = 0;
      continue;
    }
    size_t span = s.span * es;
    T_CUDA(cudaMemcpy(R->hout[l], dout[l], PAD + off[l] + span + PAD, cudaMemcpyDeviceToHost));
    if (!untouched(R->hout[l], PAD + off[l]) || !untouched(R->hout[l] + PAD + off[l] + span, PAD)) {
      T_FAIL("%s: rank %d wrote outside its buffer", what, q);
      ok = 0;
    }
    const unsigned char *got = R->hout[l] + PAD + off[l] + s.out_at * es;
    if (!s.writes) {
      /* A reduce's non-root: recvbuf untouched (out of place), the input
       * as it was (in place). */
      int same = k->inplace ? memcmp(got, R->hin[q], k->count * es) == 0 : untouched(got, k->count * es);
      if (!same) {
        T_FAIL("%s: rank %d is not the root but its recvbuf changed", what, q);
        ok = 0;
      }
      continue;
    }
    if (k->kind == P2PK_COLL_REDUCE || k->kind == P2PK_COLL_REDUCE_SCATTER ||
        k->kind == P2PK_COLL_ALL_REDUCE) {
      const void *ins[MAXR];
      size_t sh = k->kind == P2PK_COLL_REDUCE_SCATTER ? (size_t)q * k->count * es : 0;
      for (int r = 0; r < n; r++) ins[r] = (const char *)R->hin[r] + sh;
      double g = 0, w = 0;
      size_t bad = cu_check(got, ins, n, k->count, k->dt, k->op, &g, &w);
      if (bad < k->count) {
        T_FAIL("%s: rank %d: element %zu of %zu is %.17g, expected %.17g", what, q, bad, k->count, g, w);
        ok = 0;
      }
      continue;
    }
    expect_copy(R, k, q);
    size_t ob = s.out_elems * es;
    if (memcmp(got, R->want, ob) != 0) {
      size_t i = 0;
      while (i < ob && got[i] == R->want[i]) i++;
      T_FAIL("%s: rank %d: byte %zu of %zu is 0x%02x, expected 0x%02x", what, q, i, ob, got[i],
             R->want[i]);
      ok = 0;
    }
  }
  return ok;
}

static inline void describe(char *buf, size_t len, const char *vname, const call_t *k, int n) {
  int sr = k->kind == SENDRECV;
  snprintf(buf, len, "[%s %s %s %d %s %s count %zu %s%s]", vname, kind_name(k->kind),
           sr ? "shift" : "root", sr ? sr_shift(k, n) : k->root, p2pkit_dtype_name(k->dt),
           p2pkit_redop_name(k->op), k->count, k->inplace ? "in-place" : "out-of-place",
           k->misalign ? " unaligned" : "");
}

static inline int run_case(runner_t *R, const char *vname, const call_t *k) {
  char what[200];
  describe(what, sizeof what, vname, k, R->nr);
  const void *in[MAXR];
  void *out[MAXR];
  size_t off[MAXR];
  uint64_t seed = cu_hash(what, strlen(what));
  prepare(R, R->dout, R->din, k, seed, in, out, off);
  p2pkit_status_t st = issue(R, k, in, out);
  if (st != P2PKIT_SUCCESS) {
    T_FAIL("%s: %s: %s", what, p2pkit_strerror(st), p2pkit_last_error());
    return 0;
  }
  return verify(R, R->dout, what, k, off);
}

#endif
