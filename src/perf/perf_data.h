/* SPDX-License-Identifier: BSD-3-Clause */
/* The data `p2pkit perf` moves and what each rank must hold afterwards: pure
 * functions of (collective, dtype, op, ranks, rank, index, seed), compiled
 * both for the host (tests, spot checks) and the GPU (fill and check kernels).
 *
 * Exactness, nccl-tests style: inputs are small positive integers chosen so
 * that every partial sum, product, min and max is exact in the dtype whatever
 * the order of reduction. So the expected value is exact, and a result is
 * right only when it is bit-for-bit that value. The one exception is avg on
 * floating types, where libraries scale by 1/n (inexact unless n is a power of
 * two): there the expected integer is compared with a tolerance of (n + 2)
 * unit roundoffs, and inputs are kept small enough that this stays under 0.5.
 * For avg the last rank's value is nudged so the sum divides by n, which makes
 * integer avg exact too. mulsum (NCCL's pre-multiplied sum) scales rank r's
 * input by perf_premul(r), 1 or 2, before the sum. Inputs are never 0; the
 * poison pattern (all bytes 0xFF: NaN, -1 or the largest unsigned value)
 * never equals an expected value. */
#ifndef P2PK_PERF_DATA_H
#define P2PK_PERF_DATA_H

#include <stdint.h>
#include <string.h>

#include "p2pkit.h"

#ifdef __CUDACC__
#define PERF_HD static __host__ __device__ inline
#else
#define PERF_HD static inline
#endif

typedef enum {
  PERF_ALL_REDUCE = 0,
  PERF_BROADCAST = 1,
  PERF_REDUCE = 2,
  PERF_ALL_GATHER = 3,
  PERF_REDUCE_SCATTER = 4,
  PERF_SENDRECV = 5,
  PERF_ALLTOALL = 6,
  PERF_HYPERCUBE = 7,
  PERF_GATHER = 8,
  PERF_SCATTER = 9,
  PERF_COLL_COUNT
} perf_coll_id;

/* Everything the generator needs; passed by value to kernels. */
typedef struct {
  int coll;       /* perf_coll_id */
  int dtype;      /* p2pkit_dtype_t */
  int op;         /* p2pkit_redop_t or PERF_OP_MULSUM; P2PKIT_SUM for collectives without one */
  int nranks;
  int root;
  uint32_t seed;  /* differs per size, place, library and phase */
  uint64_t param; /* the count passed to the call (elements per block) */
} perf_gen;

PERF_HD uint32_t perf_hash(uint64_t i, uint32_t rank, uint32_t seed) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull ^ (((uint64_t)rank << 32) | seed) * 0xC2B2AE3D27D4EB4Full;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 32;
  return (uint32_t)x;
}

/* NCCL's pre-multiplied sum, an operation past p2pkit_redop_t's (perf.h). */
#define PERF_MULSUM_OP ((int)P2PKIT_REDOP_COUNT)

/* Largest integer up to which every integer, and so every partial sum, is
 * exact (and, for the unsigned types, below the poison value). */
PERF_HD double perf_exact_limit(int dtype) {
  switch (dtype) {
    case P2PKIT_FLOAT32: return 16777216.0;          /* 2^24 */
    case P2PKIT_FLOAT16: return 2048.0;              /* 2^11 */
    case P2PKIT_BFLOAT16: return 256.0;              /* 2^8 */
    case P2PKIT_FLOAT8_E4M3: return 16.0;            /* 2^4 */
    case P2PKIT_FLOAT8_E5M2: return 8.0;             /* 2^3 */
    case P2PKIT_INT32: return 2147483647.0;
    case P2PKIT_UINT32: return 4294967294.0;
    case P2PKIT_INT8: return 127.0;
    case P2PKIT_UINT8: return 254.0;
    default: return 9007199254740992.0;              /* 2^53: double, int64, uint64 */
  }
}

PERF_HD int perf_dtype_is_float(int dtype) {
  return dtype == P2PKIT_FLOAT32 || dtype == P2PKIT_FLOAT16 || dtype == P2PKIT_BFLOAT16 ||
         dtype == P2PKIT_FLOAT64 || dtype == P2PKIT_FLOAT8_E4M3 || dtype == P2PKIT_FLOAT8_E5M2;
}

/* Unit roundoff (half an ulp of 1) of a floating dtype; 0 for integers. */
PERF_HD double perf_unit_roundoff(int dtype) {
  switch (dtype) {
    case P2PKIT_FLOAT16: return 1.0 / 2048;               /* 2^-11 */
    case P2PKIT_BFLOAT16: return 1.0 / 256;               /* 2^-8 */
    case P2PKIT_FLOAT8_E4M3: return 1.0 / 16;             /* 2^-4 */
    case P2PKIT_FLOAT8_E5M2: return 1.0 / 8;              /* 2^-3 */
    case P2PKIT_FLOAT32: return 1.0 / 16777216;           /* 2^-24 */
    case P2PKIT_FLOAT64: return 1.0 / 9007199254740992.0; /* 2^-53 */
    default: return 0.0;
  }
}

/* mulsum's factor for rank r. */
PERF_HD double perf_premul(int rank) { return (rank & 1) ? 2.0 : 1.0; }

/* Whether n ranks' sums (sum, avg, mulsum) stay exact in dtype even with
 * every input 1 (the fp8 types hold few integers): the checks need it. */
PERF_HD int perf_sum_exact(int dtype, int op, int nranks) {
  double most = op == PERF_MULSUM_OP ? 2.0 * nranks : (double)nranks;
  return most <= perf_exact_limit(dtype);
}

/* Inputs (other than for prod) are 1..K, K chosen so n*K + n - 1 < limit
 * (mulsum: 2n*K); for avg on floats also so that the tolerance stays under
 * half a unit (an off-by-one result is always caught). */
PERF_HD uint32_t perf_value_range(int dtype, int op, int nranks) {
  double k = (perf_exact_limit(dtype) - nranks) / (op == PERF_MULSUM_OP ? 2.0 * nranks : nranks);
  if (op == P2PKIT_AVG && perf_dtype_is_float(dtype)) {
    double avg_k = 0.5 / ((nranks + 2) * perf_unit_roundoff(dtype)) - 1; /* avg < K + 1 */
    if (avg_k < k) k = avg_k;
  }
  if (k > 65536.0) k = 65536.0;
  if (k < 1.0) k = 1.0;
  return (uint32_t)k;
}

PERF_HD double perf_raw(const perf_gen *g, int rank, uint64_t i) {
  uint32_t h = perf_hash(i, (uint32_t)rank, g->seed);
  /* prod: 1 or 2 on the first 7 ranks (6 for int8), 1 beyond: products stay
   * <= 128 (64), powers of two, exact in every type. */
  if (g->op == P2PKIT_PROD)
    return rank < (g->dtype == P2PKIT_INT8 ? 6 : 7) ? 1.0 + (double)(h & 1u) : 1.0;
  return 1.0 + (double)(h % perf_value_range(g->dtype, g->op, g->nranks));
}

/* Element i of rank `rank`'s input. */
PERF_HD double perf_input(const perf_gen *g, int rank, uint64_t i) {
  double v = perf_raw(g, rank, i);
  if (g->op == P2PKIT_AVG && g->nranks > 1 && rank == g->nranks - 1) {
    double s = v;
    for (int q = 0; q < g->nranks - 1; q++) s += perf_raw(g, q, i);
    uint64_t rem = (uint64_t)s % (uint64_t)g->nranks;
    if (rem) v += (double)((uint64_t)g->nranks - rem);
  }
  return v;
}

/* Element i of the reduction over all ranks' inputs. */
PERF_HD double perf_reduced(const perf_gen *g, uint64_t i) {
  double acc = perf_input(g, 0, i); /* mulsum: rank 0's factor is 1 */
  for (int q = 1; q < g->nranks; q++) {
    double x = perf_input(g, q, i);
    switch (g->op) {
      case P2PKIT_PROD: acc *= x; break;
      case P2PKIT_MIN: acc = x < acc ? x : acc; break;
      case P2PKIT_MAX: acc = x > acc ? x : acc; break;
      case PERF_MULSUM_OP: acc += perf_premul(q) * x; break;
      default: acc += x; break; /* sum, avg */
    }
  }
  if (g->op == P2PKIT_AVG) acc /= g->nranks; /* exact: the sum divides by n */
  return acc;
}

/* Element j of rank `rank`'s output (nccl-tests' layouts). */
PERF_HD double perf_expected(const perf_gen *g, int rank, uint64_t j) {
  uint64_t p = g->param ? g->param : 1;
  switch (g->coll) {
    case PERF_BROADCAST: return perf_input(g, g->root, j);
    case PERF_ALL_GATHER:
    case PERF_HYPERCUBE:
    case PERF_GATHER: return perf_input(g, (int)(j / p), j % p); /* gather: on the root */
    case PERF_SCATTER: return perf_input(g, g->root, (uint64_t)rank * p + j);
    case PERF_REDUCE_SCATTER: return perf_reduced(g, (uint64_t)rank * p + j);
    case PERF_ALLTOALL: return perf_input(g, (int)(j / p), (uint64_t)rank * p + j % p);
    case PERF_SENDRECV: return perf_input(g, (rank + g->nranks - 1) % g->nranks, j);
    default: return perf_reduced(g, j); /* all_reduce; reduce (on the root) */
  }
}

/* Allowed |got - expected|: 0 except avg on floating types, where scaling
 * each term by a rounded 1/n and summing n terms errs by at most about
 * (n + 1) unit roundoffs of the result. */
PERF_HD double perf_tolerance(const perf_gen *g, double expected) {
  if (g->op != P2PKIT_AVG || !perf_dtype_is_float(g->dtype)) return 0.0;
  if (g->coll != PERF_ALL_REDUCE && g->coll != PERF_REDUCE && g->coll != PERF_REDUCE_SCATTER)
    return 0.0;
  double a = expected < 0 ? -expected : expected;
  return a * perf_unit_roundoff(g->dtype) * (g->nranks + 2);
}

/* 1 when `got` is not an acceptable `expected` (NaN is never acceptable). */
PERF_HD int perf_is_wrong(double got, double expected, double tol) {
  double d = got - expected;
  if (d < 0) d = -d;
  return !(d <= tol);
}

/* ---- storage: half and bfloat16 as raw bits, so this needs no CUDA header. */

PERF_HD uint32_t perf_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

PERF_HD float perf_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* float -> IEEE half, round to nearest even (normals, zero, inf, NaN; tiny
 * values round half up, which the generator never produces). */
PERF_HD uint16_t perf_f32_to_f16(float f) {
  uint32_t x = perf_f32_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds past 65504 */
  if (a < 0x38800000u) {                                   /* below 2^-14: subnormal */
    float m = perf_bits_f32(a) * 16777216.0f + 0.5f;       /* units of 2^-24 */
    return (uint16_t)(sign | (uint32_t)m);
  }
  uint32_t h = ((((a >> 23) - 127u + 15u)) << 10) | ((a & 0x7fffffu) >> 13);
  uint32_t rest = a & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++; /* carry may bump the exponent */
  return (uint16_t)(sign | h);
}

PERF_HD float perf_f16_to_f32(uint16_t h) {
  uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
  uint32_t e = ((uint32_t)h >> 10) & 0x1fu, m = (uint32_t)h & 0x3ffu;
  if (e == 0) {
    float v = (float)m * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (e == 31) return perf_bits_f32(sign | 0x7f800000u | (m << 13));
  return perf_bits_f32(sign | ((e - 15u + 127u) << 23) | (m << 13));
}

PERF_HD uint16_t perf_f32_to_bf16(float f) {
  uint32_t x = perf_f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

PERF_HD float perf_bf16_to_f32(uint16_t b) { return perf_bits_f32((uint32_t)b << 16); }

/* float -> fp8 (e5m2: 5 exponent bits, bias 15, IEEE-like; else e4m3fn: 4
 * bits, bias 7, no infinity, S.1111.111 the only NaN), round to nearest
 * even, subnormals included; past the largest finite value: infinity
 * (e5m2) or NaN (e4m3fn), which the generator never produces. */
PERF_HD uint8_t perf_f32_to_fp8(float f, int e5m2) {
  const uint32_t mbits = e5m2 ? 2u : 3u;
  const int bias = e5m2 ? 15 : 7;
  const uint32_t x = perf_f32_bits(f);
  const uint32_t sign = (x >> 24) & 0x80u, a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint8_t)(sign | 0x7fu);
  const int e = (int)(a >> 23) - 127 + bias; /* the fp8 exponent field */
  uint32_t q;
  if (e <= 0) { /* subnormal: in units of 2^(1 - bias - mbits) */
    const float units = perf_bits_f32(a) * (float)(1u << (bias - 1 + (int)mbits));
    q = (uint32_t)units;
    const float frac = units - (float)q;
    if (frac > 0.5f || (frac == 0.5f && (q & 1u))) q++; /* 2^mbits is the least normal */
    return (uint8_t)(sign | q);
  }
  const uint32_t drop = 23u - mbits, rest = a & ((1u << drop) - 1u), half = 1u << (drop - 1u);
  q = ((uint32_t)e << mbits) | ((a & 0x7fffffu) >> drop);
  if (rest > half || (rest == half && (q & 1u))) q++; /* a carry bumps the exponent */
  const uint32_t top = e5m2 ? 0x7cu : 0x7fu;          /* infinity / NaN */
  return (uint8_t)(sign | (q >= top ? top : q));
}

PERF_HD float perf_fp8_to_f32(uint8_t b, int e5m2) {
  const uint32_t mbits = e5m2 ? 2u : 3u, bias = e5m2 ? 15u : 7u;
  const uint32_t sign = ((uint32_t)b & 0x80u) << 24, e = ((uint32_t)b & 0x7fu) >> mbits;
  const uint32_t m = (uint32_t)b & ((1u << mbits) - 1u);
  if (e5m2 ? e == 31u : (b & 0x7fu) == 0x7fu) /* NaN, or e5m2's infinity */
    return perf_bits_f32(sign | 0x7f800000u | (m ? 0x400000u : 0u));
  if (e == 0) {
    const float v = (float)m / (float)(1u << (bias - 1u + mbits));
    return sign ? -v : v;
  }
  return perf_bits_f32(sign | ((e - bias + 127u) << 23) | (m << (23u - mbits)));
}

PERF_HD double perf_load(const void *buf, int dtype, uint64_t i) {
  switch (dtype) {
    case P2PKIT_FLOAT32: return ((const float *)buf)[i];
    case P2PKIT_FLOAT16: return perf_f16_to_f32(((const uint16_t *)buf)[i]);
    case P2PKIT_BFLOAT16: return perf_bf16_to_f32(((const uint16_t *)buf)[i]);
    case P2PKIT_FLOAT64: return ((const double *)buf)[i];
    case P2PKIT_INT32: return (double)((const int32_t *)buf)[i];
    case P2PKIT_INT64: return (double)((const int64_t *)buf)[i];
    case P2PKIT_INT8: return (double)((const int8_t *)buf)[i];
    case P2PKIT_UINT32: return (double)((const uint32_t *)buf)[i];
    case P2PKIT_UINT64: return (double)((const uint64_t *)buf)[i];
    case P2PKIT_FLOAT8_E4M3: return perf_fp8_to_f32(((const uint8_t *)buf)[i], 0);
    case P2PKIT_FLOAT8_E5M2: return perf_fp8_to_f32(((const uint8_t *)buf)[i], 1);
    default: return (double)((const uint8_t *)buf)[i];
  }
}

PERF_HD void perf_store(void *buf, int dtype, uint64_t i, double v) {
  switch (dtype) {
    case P2PKIT_FLOAT32: ((float *)buf)[i] = (float)v; break;
    case P2PKIT_FLOAT16: ((uint16_t *)buf)[i] = perf_f32_to_f16((float)v); break;
    case P2PKIT_BFLOAT16: ((uint16_t *)buf)[i] = perf_f32_to_bf16((float)v); break;
    case P2PKIT_FLOAT64: ((double *)buf)[i] = v; break;
    case P2PKIT_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case P2PKIT_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case P2PKIT_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case P2PKIT_UINT32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    case P2PKIT_UINT64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
    case P2PKIT_FLOAT8_E4M3: ((uint8_t *)buf)[i] = perf_f32_to_fp8((float)v, 0); break;
    case P2PKIT_FLOAT8_E5M2: ((uint8_t *)buf)[i] = perf_f32_to_fp8((float)v, 1); break;
    default: ((uint8_t *)buf)[i] = (uint8_t)v; break;
  }
}

#endif
