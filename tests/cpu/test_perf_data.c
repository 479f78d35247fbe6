/* SPDX-License-Identifier: BSD-3-Clause */
/* The data `p2pkit perf` moves and checks (perf_data.h): inputs are exact in
 * every dtype, and perf_expected() agrees with an independent simulation of
 * each collective done here in the dtype's own arithmetic, for every dtype,
 * op, rank count and root. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "perf/perf.h"
#include "perf/perf_data.h"
#include "test.h"

static const p2pkit_dtype_t all_dtypes[] = {
    P2PKIT_FLOAT32, P2PKIT_FLOAT16, P2PKIT_BFLOAT16, P2PKIT_FLOAT64, P2PKIT_INT32, P2PKIT_INT64,
    P2PKIT_UINT8,   P2PKIT_INT8,    P2PKIT_UINT32,   P2PKIT_UINT64,  P2PKIT_FLOAT8_E4M3,
    P2PKIT_FLOAT8_E5M2};
#define NOPS PERF_OP_COUNT /* p2pkit's five and NCCL's mulsum */
#define NDT (sizeof all_dtypes / sizeof all_dtypes[0])

/* Round a value to what the dtype can hold (store then load). */
static double in_dtype(int dtype, double v) {
  uint64_t cell = 0;
  perf_store(&cell, dtype, 0, v);
  return perf_load(&cell, dtype, 0);
}

/* One reduction step as a library does it: op in the dtype, result rounded. */
static double step(int dtype, int op, double acc, double x) {
  switch (op) {
    case P2PKIT_PROD: return in_dtype(dtype, acc * x);
    case P2PKIT_MIN: return x < acc ? x : acc;
    case P2PKIT_MAX: return x > acc ? x : acc;
    default: return in_dtype(dtype, acc + x);
  }
}

/* A reduction over ranks in the order given, avg as libraries do it: floats
 * scale each term by 1/n (NCCL's premultiply), integers divide the sum. */
static double sim_reduce(const perf_gen *g, uint64_t i, const int *order) {
  int n = g->nranks, dt = g->dtype;
  int fl = perf_dtype_is_float(dt);
  double acc = 0;
  for (int k = 0; k < n; k++) {
    double x = in_dtype(dt, perf_input(g, order[k], i));
    if (g->op == P2PKIT_AVG && fl) x = in_dtype(dt, x * in_dtype(dt, 1.0 / n));
    if (g->op == PERF_OP_MULSUM) x = in_dtype(dt, x * (order[k] % 2 ? 2.0 : 1.0));
    int op = g->op == P2PKIT_AVG || g->op == PERF_OP_MULSUM ? P2PKIT_SUM : g->op;
    acc = k == 0 ? x : step(dt, op, acc, x);
  }
  if (g->op == P2PKIT_AVG && !fl) acc = (double)((int64_t)acc / n);
  return acc;
}

/* Rank r's buffer after nccl-tests' hypercube on n (a power of two) ranks,
 * run here step by step: each rank starts with its own block in place, then
 * at each mask swaps its half (rank & ~(mask - 1) on, mask blocks) with
 * rank ^ mask. Returns element j. */
static double sim_hypercube(const perf_gen *g, int r, uint64_t j) {
  enum { MAXN = 16 };
  int n = g->nranks, src[MAXN][MAXN]; /* src[q][b]: whose block q holds at b, -1 none */
  for (int q = 0; q < n; q++)
    for (int b = 0; b < n; b++) src[q][b] = b == q ? q : -1;
  for (int mask = 1; mask < n; mask <<= 1) {
    int next[MAXN][MAXN];
    memcpy(next, src, sizeof next);
    for (int q = 0; q < n; q++) {
      int peer = q ^ mask, from = peer & ~(mask - 1); /* what the peer sends */
      for (int b = from; b < from + mask; b++) next[q][b] = src[peer][b];
    }
    memcpy(src, next, sizeof src);
  }
  int owner = src[r][j / g->param];
  return owner < 0 ? -1 : in_dtype(g->dtype, perf_input(g, owner, j % g->param));
}

/* What rank r holds at element j after the collective, from the collective's
 * definition (not from perf_expected). */
static double simulate(const perf_gen *g, int r, uint64_t j, const int *order) {
  uint64_t p = g->param;
  int n = g->nranks;
  switch (g->coll) {
    case PERF_ALL_REDUCE:
    case PERF_REDUCE: return sim_reduce(g, j, order);
    case PERF_BROADCAST: return in_dtype(g->dtype, perf_input(g, g->root, j));
    case PERF_ALL_GATHER: return in_dtype(g->dtype, perf_input(g, (int)(j / p), j % p));
    case PERF_REDUCE_SCATTER: return sim_reduce(g, (uint64_t)r * p + j, order);
    case PERF_ALLTOALL: return in_dtype(g->dtype, perf_input(g, (int)(j / p), (uint64_t)r * p + j % p));
    case PERF_SENDRECV: return in_dtype(g->dtype, perf_input(g, (r - 1 + n) % n, j));
    case PERF_HYPERCUBE: return sim_hypercube(g, r, j);
    case PERF_GATHER: return in_dtype(g->dtype, perf_input(g, (int)(j / p), j % p));
    case PERF_SCATTER: return in_dtype(g->dtype, perf_input(g, g->root, (uint64_t)r * p + j));
  }
  return -1;
}

TEST(inputs_are_exact_nonzero_and_rank_dependent) {
  for (size_t d = 0; d < NDT; d++)
    for (int op = 0; op < NOPS; op++)
      for (int n = 1; n <= 16; n++) {
        perf_gen g = {PERF_ALL_REDUCE, (int)all_dtypes[d], op, n, 0, 1234u, 100};
        int differs = 0;
        for (int r = 0; r < n; r++)
          for (uint64_t i = 0; i < 200; i++) {
            double v = perf_input(&g, r, i);
            if (!(v >= 1)) T_FAIL("dtype %d op %d n %d: input %g is not >= 1", g.dtype, op, n, v);
            if (in_dtype(g.dtype, v) != v)
              T_FAIL("dtype %d op %d: input %g is not exact in the dtype", g.dtype, op, v);
            if (r > 0 && v != perf_input(&g, 0, i)) differs = 1;
          }
        /* fp8 holds so few integers that for many ranks every input is 1
         * (a range of one): the sums are still checked, with equal inputs. */
        const int one = op != P2PKIT_PROD && perf_value_range(g.dtype, op, n) == 1;
        if (n > 1 && !differs && !one)
          T_FAIL("dtype %d op %d n %d: ranks hold the same data", g.dtype, op, n);
        if (one && !perf_dtype_is_float(g.dtype)) T_FAIL("dtype %d: a range of one", g.dtype);
      }
}

TEST(seed_changes_the_data) {
  perf_gen a = {PERF_ALL_REDUCE, P2PKIT_FLOAT32, P2PKIT_SUM, 2, 0, 1, 64};
  perf_gen b = a;
  b.seed = 2;
  int same = 0;
  for (uint64_t i = 0; i < 64; i++) same += perf_input(&a, 0, i) == perf_input(&b, 0, i);
  CHECK(same < 16);
}

TEST(expected_matches_simulation_every_collective) {
  int orders[2][16];
  for (size_t ci = 0; p2pk_perf_coll_at((int)ci); ci++) {
    const perf_coll *c = p2pk_perf_coll_at((int)ci);
    for (size_t d = 0; d < NDT; d++)
      for (int op = 0; op < NOPS; op++) {
        if (!c->uses_op && op != P2PKIT_SUM) continue;
        static const int ranks[] = {1, 2, 3, 4, 7, 8, 16};
        for (size_t ni = 0; ni < sizeof ranks / sizeof ranks[0]; ni++) {
          int n = ranks[ni];
          if (c->pow2_ranks && (n & (n - 1))) continue; /* refused at run time */
          /* Sums the fp8 types cannot hold exactly: refused when checked. */
          if (c->uses_op && (op == P2PKIT_SUM || op == P2PKIT_AVG || op == PERF_OP_MULSUM) &&
              !perf_sum_exact((int)all_dtypes[d], op, n))
            continue;
          for (int k = 0; k < n; k++) orders[0][k] = k, orders[1][k] = n - 1 - k;
          for (int root = 0; root < n; root += n > 1 ? n - 1 : 1) {
            perf_counts k;
            size_t ts = p2pkit_dtype_size(all_dtypes[d]);
            p2pk_perf_counts(c, 37 * (size_t)n * ts, ts, n, &k);
            perf_gen g = {c->id, (int)all_dtypes[d], op, n, root, 99u + (uint32_t)n, k.param};
            int bad = 0;
            for (int r = 0; r < n && !bad; r++) {
              if (!p2pk_perf_rank_has_output(c, r, root)) continue;
              for (uint64_t j = 0; j < k.recv_elems && !bad; j++) {
                double want = perf_expected(&g, r, j);
                for (int o = 0; o < 2; o++) {
                  double got = simulate(&g, r, j, orders[o]);
                  if (perf_is_wrong(got, want, perf_tolerance(&g, want))) {
                    T_FAIL("%s dtype %s op %s n %d root %d rank %d elem %llu order %d: simulated "
                           "%.17g, expected %.17g", c->name, p2pk_perf_dtype_name(all_dtypes[d]),
                           p2pk_perf_op_name(op), n, root, r,
                           (unsigned long long)j, o, got, want);
                    bad = 1;
                    break;
                  }
                  /* Exact everywhere but float avg: a tolerance of zero. */
                  if ((op != P2PKIT_AVG || !perf_dtype_is_float(g.dtype)) &&
                      perf_tolerance(&g, want) != 0)
                    T_FAIL("%s: non-zero tolerance for an exact case", c->name);
                }
              }
            }
          }
        }
      }
  }
}

/* gather and scatter in the harness's own buffers (perf_run.c's layout:
 * max(send, recv) elements a rank; in place, send at rank * ip_send_step and
 * receive at rank * ip_recv_step of one buffer): the inputs filled as the
 * fill kernel does, the blocks moved as the collective defines them, then
 * every element a rank holds checked against perf_expected as the check
 * kernel does. In place, the root's buffers are where p2pkit_gather and
 * p2pkit_scatter take "in place" to be (p2pkit.h). */
static void run_rooted(const perf_coll *c, p2pkit_dtype_t dt, int n, int root, int ip) {
  enum { MAXN = 8 };
  const size_t ts = p2pkit_dtype_size(dt);
  perf_counts k;
  p2pk_perf_counts(c, 29 * (size_t)n * ts, ts, n, &k);
  const size_t elems = k.send_elems > k.recv_elems ? k.send_elems : k.recv_elems, p = k.param;
  if (n < 1 || n > MAXN || root < 0 || root >= n) {
    T_FAIL("run_rooted: n %d root %d", n, root);
    return;
  }
  char *sbuf[MAXN] = {0}, *rbuf[MAXN] = {0}, *send[MAXN] = {0}, *recv[MAXN] = {0};
  perf_gen g = {c->id, (int)dt, P2PKIT_SUM, n, root, 77u, p};
  for (int r = 0; r < n; r++) {
    sbuf[r] = malloc(elems * ts);
    rbuf[r] = malloc(elems * ts);
    memset(rbuf[r], 0xFF, elems * ts); /* poisoned, as the harness does */
    send[r] = ip ? rbuf[r] + k.ip_send_step * (size_t)r * ts : sbuf[r];
    recv[r] = ip ? rbuf[r] + k.ip_recv_step * (size_t)r * ts : rbuf[r];
    for (uint64_t i = 0; i < k.send_elems; i++) perf_store(send[r], g.dtype, i, perf_input(&g, r, i));
  }
  if (ip && c->id == PERF_GATHER) CHECK(send[root] == recv[root] + (size_t)root * p * ts);
  if (ip && c->id == PERF_SCATTER) CHECK(recv[root] == send[root] + (size_t)root * p * ts);
  for (int q = 0; q < n; q++) /* memmove: in place the root's own block moves onto itself */
    if (c->id == PERF_GATHER) memmove(recv[root] + (size_t)q * p * ts, send[q], p * ts);
    else memmove(recv[q], send[root] + (size_t)q * p * ts, p * ts);
  for (int r = 0; r < n; r++) {
    int64_t bad = 0;
    if (p2pk_perf_rank_has_output(c, r, root))
      for (uint64_t j = 0; j < k.recv_elems; j++) {
        const double want = perf_expected(&g, r, j);
        bad += perf_is_wrong(perf_load(recv[r], g.dtype, j), want, perf_tolerance(&g, want));
      }
    if (bad) T_FAIL("%s %s n %d root %d %s rank %d: %lld wrong", c->name,
                    p2pk_perf_dtype_name(dt), n, root, ip ? "in place" : "out of place", r,
                    (long long)bad);
    free(sbuf[r]);
    free(rbuf[r]);
  }
}

TEST(gather_and_scatter_layouts) {
  static const p2pkit_dtype_t dts[] = {P2PKIT_FLOAT32, P2PKIT_FLOAT16, P2PKIT_INT8, P2PKIT_FLOAT64};
  static const int ranks[] = {1, 2, 3, 4, 8};
  for (int i = 0; i < 2; i++)
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
      for (size_t ni = 0; ni < sizeof ranks / sizeof ranks[0]; ni++)
        for (int root = 0; root < ranks[ni]; root++)
          for (int ip = 0; ip < 2; ip++)
            run_rooted(p2pk_perf_coll(i ? "scatter" : "gather"), dts[d], ranks[ni], root, ip);
}

/* The checks catch a gather or scatter that moved the wrong block: the
 * expected values of two ranks' blocks differ, so a swap is seen. */
TEST(rooted_mixups_are_caught) {
  perf_gen g = {PERF_GATHER, P2PKIT_FLOAT32, P2PKIT_SUM, 4, 2, 5u, 64};
  int seen = 0;
  for (uint64_t j = 0; j < 64; j++) /* rank 1's block where rank 0's belongs */
    seen += perf_is_wrong(perf_input(&g, 1, j), perf_expected(&g, 2, j), 0);
  CHECK(seen > 48);
  g.coll = PERF_SCATTER;
  seen = 0;
  for (uint64_t j = 0; j < 64; j++) /* rank 3 given rank 1's block, or a non-root's data */
    seen += perf_is_wrong(perf_input(&g, 2, 64 + j), perf_expected(&g, 3, j), 0) +
            perf_is_wrong(perf_input(&g, 0, 3 * 64 + j), perf_expected(&g, 3, j), 0);
  CHECK(seen > 96);
}

TEST(float_avg_is_exact_for_powers_of_two) {
  /* 1/n is exact for n = 2, 4, 8: premultiplied sums then hit the integer. */
  for (int n = 2; n <= 8; n *= 2) {
    perf_gen g = {PERF_ALL_REDUCE, P2PKIT_FLOAT16, P2PKIT_AVG, n, 0, 5u, 64};
    int order[8];
    for (int k = 0; k < n; k++) order[k] = k;
    for (uint64_t j = 0; j < 64; j++) {
      double want = perf_expected(&g, 0, j);
      CHECK(want == (double)(int64_t)want); /* the sum divides by n */
      CHECK_NEAR(simulate(&g, 0, j, order), want, 0);
    }
  }
}

TEST(wrong_values_are_caught) {
  for (size_t d = 0; d < NDT; d++) {
    perf_gen g = {PERF_ALL_REDUCE, (int)all_dtypes[d], P2PKIT_SUM, 2, 0, 7u, 16};
    uint64_t poison = ~0ull; /* all bytes 0xFF, as the harness poisons outputs */
    for (uint64_t j = 0; j < 16; j++) {
      double want = perf_expected(&g, 0, j);
      double tol = perf_tolerance(&g, want);
      CHECK(!perf_is_wrong(want, want, tol));
      CHECK(perf_is_wrong(want + 1, want, tol));
      CHECK(perf_is_wrong(perf_input(&g, 0, j), want, tol)); /* an unreduced input */
      CHECK(perf_is_wrong(perf_load(&poison, g.dtype, 0), want, tol));
    }
    /* avg's tolerance stays under half a unit: an off-by-one still fails.
     * Not for fp8, whose unit roundoff (1/16, 1/8) makes n + 2 of them a
     * unit or more: its avg is checked within that bound only. */
    if (g.dtype == P2PKIT_FLOAT8_E4M3 || g.dtype == P2PKIT_FLOAT8_E5M2) continue;
    g.op = P2PKIT_AVG;
    for (g.nranks = 2; g.nranks <= 16; g.nranks++)
      for (uint64_t j = 0; j < 64; j++) {
        double want = perf_expected(&g, 0, j), tol = perf_tolerance(&g, want);
        if (!perf_is_wrong(want + 1, want, tol) || !perf_is_wrong(want - 1, want, tol))
          T_FAIL("dtype %d avg n %d: %g +- 1 passes (tolerance %g)", g.dtype, g.nranks, want, tol);
      }
  }
  CHECK(perf_is_wrong(NAN, 1.0, 1e9)); /* NaN is never right */
}

TEST(half_and_bfloat16_conversions) {
  CHECK_EQ(perf_f32_to_f16(1.0f), 0x3C00);
  CHECK_EQ(perf_f32_to_f16(-2.0f), 0xC000);
  CHECK_EQ(perf_f32_to_f16(65504.0f), 0x7BFF);
  CHECK_EQ(perf_f32_to_f16(65520.0f), 0x7C00); /* rounds to infinity */
  CHECK_EQ(perf_f32_to_f16(2049.0f), perf_f32_to_f16(2048.0f)); /* tie to even */
  CHECK_EQ(perf_f32_to_f16(2051.0f), perf_f32_to_f16(2052.0f));
  CHECK_EQ(perf_f32_to_f16(0.0f), 0);
  CHECK_EQ(perf_f32_to_f16(0.1f), 0x2E66);
  CHECK(isnan(perf_f16_to_f32(perf_f32_to_f16(NAN))));
  CHECK(isnan(perf_bf16_to_f32(perf_f32_to_bf16(NAN))));
  CHECK_NEAR(perf_f16_to_f32(0x0001), 5.960464477539063e-08, 0); /* smallest subnormal */
  CHECK_EQ(perf_f32_to_bf16(1.0f), 0x3F80);
  CHECK_EQ(perf_f32_to_bf16(257.0f), perf_f32_to_bf16(256.0f)); /* tie to even */
  CHECK_EQ(perf_f32_to_bf16(259.0f), perf_f32_to_bf16(260.0f));
  for (int v = 0; v <= 2048; v++) CHECK_NEAR(perf_f16_to_f32(perf_f32_to_f16((float)v)), v, 0);
  for (int v = 0; v <= 256; v++) CHECK_NEAR(perf_bf16_to_f32(perf_f32_to_bf16((float)v)), v, 0);
}

/* fp8 as CUDA's __nv_fp8_e4m3 / __nv_fp8_e5m2 encode it. */
TEST(fp8_conversions) {
  CHECK_EQ(perf_f32_to_fp8(1.0f, 0), 0x38);  /* e4m3: exponent 7, mantissa 0 */
  CHECK_EQ(perf_f32_to_fp8(1.0f, 1), 0x3C);  /* e5m2: exponent 15 */
  CHECK_EQ(perf_f32_to_fp8(-2.0f, 0), 0xC0);
  CHECK_EQ(perf_f32_to_fp8(448.0f, 0), 0x7E); /* e4m3's largest */
  CHECK_EQ(perf_f32_to_fp8(57344.0f, 1), 0x7B); /* e5m2's largest */
  CHECK_EQ(perf_f32_to_fp8(1e6f, 1), 0x7C);  /* e5m2: infinity */
  CHECK_EQ(perf_f32_to_fp8(1e6f, 0), 0x7F);  /* e4m3fn: no infinity, NaN */
  CHECK_EQ(perf_f32_to_fp8(17.0f, 0), perf_f32_to_fp8(16.0f, 0)); /* tie to even */
  CHECK_EQ(perf_f32_to_fp8(9.0f, 1), perf_f32_to_fp8(8.0f, 1));
  CHECK_EQ(perf_f32_to_fp8(0.001953125f, 0), 0x01); /* e4m3's least subnormal, 2^-9 */
  CHECK_NEAR(perf_fp8_to_f32(0x01, 1), 1.52587890625e-05, 0); /* e5m2's, 2^-16 */
  CHECK(isnan(perf_fp8_to_f32(0xFF, 0)) && isnan(perf_fp8_to_f32(0xFF, 1))); /* the poison */
  CHECK(isinf(perf_fp8_to_f32(0x7C, 1)));
  for (int v = 0; v <= 16; v++) CHECK_NEAR(perf_fp8_to_f32(perf_f32_to_fp8((float)v, 0), 0), v, 0);
  for (int v = 0; v <= 8; v++) CHECK_NEAR(perf_fp8_to_f32(perf_f32_to_fp8((float)v, 1), 1), v, 0);
  for (int b = 0; b < 256; b++) /* every finite byte round-trips */
    for (int e5 = 0; e5 < 2; e5++) {
      float f = perf_fp8_to_f32((uint8_t)b, e5);
      if (!isnan(f) && !isinf(f)) CHECK_EQ(perf_f32_to_fp8(f, e5), b);
    }
  /* Sums of more ranks than the type's integers are refused for checking. */
  CHECK(perf_sum_exact(P2PKIT_FLOAT8_E5M2, P2PKIT_SUM, 8) && !perf_sum_exact(P2PKIT_FLOAT8_E5M2, P2PKIT_SUM, 9));
  CHECK(!perf_sum_exact(P2PKIT_FLOAT8_E4M3, PERF_OP_MULSUM, 9) && perf_sum_exact(P2PKIT_FLOAT8_E4M3, PERF_OP_MULSUM, 8));
  /* int8 products stay under 127: six doubling ranks at most. */
  perf_gen g = {PERF_ALL_REDUCE, P2PKIT_INT8, P2PKIT_PROD, 16, 0, 3u, 64};
  for (uint64_t j = 0; j < 64; j++) CHECK(perf_expected(&g, 0, j) <= 64);
}

T_MAIN(T_CASE(inputs_are_exact_nonzero_and_rank_dependent), T_CASE(seed_changes_the_data), T_CASE(fp8_conversions),
       T_CASE(expected_matches_simulation_every_collective),
       T_CASE(float_avg_is_exact_for_powers_of_two), T_CASE(wrong_values_are_caught),
       T_CASE(half_and_bfloat16_conversions), T_CASE(gather_and_scatter_layouts),
       T_CASE(rooted_mixups_are_caught))
