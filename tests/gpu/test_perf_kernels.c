/* SPDX-License-Identifier: BSD-3-Clause */
/* The fill and check kernels of `p2pkit perf` on one GPU: the device makes
 * exactly the host's data, a right result passes, and a wrong element, an
 * unwritten (poisoned) output or an unreduced input is counted. */
#include <cuda_runtime_api.h>

#include "gpu/gpu_test.h"
#include "perf/perf.h"
#include "perf/perf_kernels.h"
#include "test.h"

#define N 100003 /* not a multiple of anything the kernels use */

static const p2pkit_dtype_t dts[] = {P2PKIT_FLOAT32, P2PKIT_FLOAT16, P2PKIT_BFLOAT16, P2PKIT_FLOAT64,
                                     P2PKIT_INT32,   P2PKIT_INT64,   P2PKIT_UINT8};
static void *dbuf;
static unsigned long long *dwrong;
static unsigned char *hbuf;

static unsigned long long check(const perf_gen *g, int rank, uint64_t n) {
  unsigned long long w = ~0ull;
  T_CUDA(cudaMemset(dwrong, 0, sizeof w));
  T_CUDA(p2pk_perf_check(dbuf, n, g, rank, dwrong, 0));
  T_CUDA(cudaMemcpy(&w, dwrong, sizeof w, cudaMemcpyDeviceToHost));
  return w;
}

TEST(device_data_equals_host_data) {
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
    for (int op = 0; op < P2PKIT_REDOP_COUNT; op++) {
      perf_gen g = {PERF_ALL_GATHER, (int)dts[d], op, 3, 0, 77u, N};
      T_CUDA(p2pk_perf_fill(dbuf, N, &g, 2, 0));
      T_CUDA(cudaMemcpy(hbuf, dbuf, N * p2pkit_dtype_size(dts[d]), cudaMemcpyDeviceToHost));
      int bad = 0;
      for (uint64_t i = 0; i < N && bad < 3; i++)
        if (perf_load(hbuf, g.dtype, i) != perf_input(&g, 2, i)) {
          T_FAIL("%s op %d elem %llu: device %g, host %g", p2pk_perf_dtype_name(dts[d]), op,
                 (unsigned long long)i, perf_load(hbuf, g.dtype, i), perf_input(&g, 2, i));
          bad++;
        }
    }
}

TEST(check_counts_what_is_wrong) {
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
    for (int op = 0; op < P2PKIT_REDOP_COUNT; op++) {
      size_t ts = p2pkit_dtype_size(dts[d]);
      /* one rank: the all-reduce of the input is the input */
      perf_gen g = {PERF_ALL_REDUCE, (int)dts[d], op, 1, 0, 5u, N};
      T_CUDA(p2pk_perf_fill(dbuf, N, &g, 0, 0));
      CHECK_EQ(check(&g, 0, N), 0);
      T_CUDA(cudaMemset((char *)dbuf + 4321 * ts, 0xFF, ts)); /* one element poisoned */
      CHECK_EQ(check(&g, 0, N), 1);
      T_CUDA(cudaMemset(dbuf, 0xFF, N * ts)); /* nothing written */
      CHECK_EQ(check(&g, 0, N), N);
      /* two ranks: one rank's input is not the sum */
      perf_gen g2 = {PERF_ALL_REDUCE, (int)dts[d], op, 2, 0, 5u, N};
      T_CUDA(p2pk_perf_fill(dbuf, N, &g2, 0, 0));
      unsigned long long w = check(&g2, 0, N);
      if (op == P2PKIT_SUM) CHECK_EQ(w, N); /* inputs >= 1: the sum always differs */
      else CHECK(w > N / 5);                /* avg/min/max/prod: often differs */
    }
}

TEST(check_against_host_reduction) {
  /* Inputs of 3 ranks made on the GPU, reduced on the host in the dtype's
   * arithmetic, copied back: the GPU check agrees with the host reference. */
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
    for (int op = 0; op < P2PKIT_REDOP_COUNT; op++) {
      size_t ts = p2pkit_dtype_size(dts[d]);
      perf_gen g = {PERF_ALL_REDUCE, (int)dts[d], op, 3, 0, 11u, N};
      unsigned char *in = malloc(3 * N * ts), *acc = malloc(N * ts);
      for (int r = 0; r < 3; r++) {
        T_CUDA(p2pk_perf_fill(dbuf, N, &g, r, 0));
        T_CUDA(cudaMemcpy(in + (size_t)r * N * ts, dbuf, N * ts, cudaMemcpyDeviceToHost));
      }
      for (uint64_t i = 0; i < N; i++) {
        double x = 0;
        for (int r = 0; r < 3; r++) {
          double v = perf_load(in + (size_t)r * N * ts, g.dtype, i);
          if (r == 0) x = v;
          else if (op == P2PKIT_PROD) x *= v;
          else if (op == P2PKIT_MIN) x = v < x ? v : x;
          else if (op == P2PKIT_MAX) x = v > x ? v : x;
          else x += v;
        }
        if (op == P2PKIT_AVG) x /= 3;
        perf_store(acc, g.dtype, i, x);
      }
      T_CUDA(cudaMemcpy(dbuf, acc, N * ts, cudaMemcpyHostToDevice));
      CHECK_EQ(check(&g, 0, N), 0);
      free(in);
      free(acc);
    }
}

static void setup(void) {
  T_REQUIRE_GPUS(1);
  T_CUDA(cudaMalloc(&dbuf, N * 8));
  T_CUDA(cudaMalloc((void **)&dwrong, sizeof *dwrong));
  hbuf = malloc(N * 8);
}

static void teardown(void) {
  cudaFree(dbuf);
  cudaFree(dwrong);
  free(hbuf);
}

T_MAIN(T_CASE(setup), T_CASE(device_data_equals_host_data), T_CASE(check_counts_what_is_wrong),
       T_CASE(check_against_host_reduction), T_CASE(teardown))
