/* Helpers for the all-reduce tests and the sweep: input generation, a host
 * reference (float64 for floating types, exact wrap-around integers for
 * integer types), comparison with per-type tolerance, hashing. */
#ifndef P2PK_COLL_UTIL_H
#define P2PK_COLL_UTIL_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "p2pkit.h"

static inline double cu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* --- half and bfloat16 on the host ------------------------------------------ */

static inline float cu_h2f(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, x;
  if (exp == 0) {
    if (mant == 0) x = sign;
    else {
      int e = -1;
      do {
        e++;
        mant <<= 1;
      } while (!(mant & 0x400));
      x = sign | (uint32_t)(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000 | mant << 13;
  } else {
    x = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static inline uint16_t cu_f2h(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000, mant = x & 0x7fffff;
  int fe = (int)((x >> 23) & 0xff);
  if (fe == 0xff) return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
  int exp = fe - 127 + 15;
  if (exp >= 31) return (uint16_t)(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10) return (uint16_t)sign;
    mant |= 0x800000;
    int shift = 14 - exp;
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = (uint32_t)exp << 10 | mant >> 13, rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

static inline float cu_bf2f(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static inline uint16_t cu_f2bf(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

/* --- inputs -------------------------------------------------------------------- */

static inline uint64_t cu_rand(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 2685821657736338717ULL;
}

/* Rank r's input: `count` elements of `dtype`, values exact in the type and
 * small enough that sums and products of a few stay exact in float. */
static inline void cu_fill(void *buf, size_t count, p2pkit_dtype_t dt, p2pkit_redop_t op,
                           uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 12345;
  for (size_t i = 0; i < count; i++) {
    uint64_t r = cu_rand(&s);
    int k = (int)(r % 257) - 128; /* -128..128 */
    switch (dt) {
      case P2PKIT_FLOAT32: ((float *)buf)[i] = (float)((double)(int64_t)(r >> 11) / (double)(1ULL << 52)) * (op == P2PKIT_PROD ? 2.0f : 1.0f) - (op == P2PKIT_PROD ? 1.0f : 0.5f); break;
      case P2PKIT_FLOAT16: ((uint16_t *)buf)[i] = cu_f2h((float)k / 64.0f); break;
      case P2PKIT_BFLOAT16: ((uint16_t *)buf)[i] = cu_f2bf((float)(k / 2) / 16.0f); break;
      case P2PKIT_FLOAT64: ((double *)buf)[i] = (double)(int64_t)(r >> 11) / (double)(1ULL << 50) - 1.0; break;
      case P2PKIT_INT32: ((int32_t *)buf)[i] = (int32_t)((uint32_t)(r >> 17) - (op == P2PKIT_PROD ? 0u : 0x20000000u)); break;
      case P2PKIT_INT64: ((int64_t *)buf)[i] = (int64_t)(r >> 3) - (int64_t)(1ULL << 59); break;
      case P2PKIT_UINT8: ((uint8_t *)buf)[i] = (uint8_t)(r >> 40); break;
      default: break;
    }
  }
}

static inline double cu_get_f(const void *buf, size_t i, p2pkit_dtype_t dt) {
  switch (dt) {
    case P2PKIT_FLOAT32: return ((const float *)buf)[i];
    case P2PKIT_FLOAT16: return cu_h2f(((const uint16_t *)buf)[i]);
    case P2PKIT_BFLOAT16: return cu_bf2f(((const uint16_t *)buf)[i]);
    case P2PKIT_FLOAT64: return ((const double *)buf)[i];
    default: return 0;
  }
}

static inline int cu_is_float(p2pkit_dtype_t dt) {
  return dt == P2PKIT_FLOAT32 || dt == P2PKIT_FLOAT16 || dt == P2PKIT_BFLOAT16 || dt == P2PKIT_FLOAT64;
}

/* Relative tolerance of one rounding to the type (n small). */
static inline double cu_tol(p2pkit_dtype_t dt) {
  switch (dt) {
    case P2PKIT_FLOAT32: return 1e-6;
    case P2PKIT_FLOAT16: return 1e-3;
    case P2PKIT_BFLOAT16: return 8e-3;
    case P2PKIT_FLOAT64: return 1e-14;
    default: return 0;
  }
}

/* Integer reference with the hardware's wrap-around, in rank order. */
static inline uint64_t cu_int_ref(const void *const *in, int n, size_t i, p2pkit_dtype_t dt,
                                  p2pkit_redop_t op) {
  if (dt == P2PKIT_INT32 || dt == P2PKIT_INT64) {
    int is64 = dt == P2PKIT_INT64;
#define CU_X(r) (is64 ? ((const int64_t *)in[r])[i] : (int64_t)((const int32_t *)in[r])[i])
    int64_t acc = CU_X(0);
    for (int r = 1; r < n; r++) {
      int64_t x = CU_X(r);
      if (op == P2PKIT_SUM || op == P2PKIT_AVG) acc = (int64_t)((uint64_t)acc + (uint64_t)x);
      else if (op == P2PKIT_PROD) acc = (int64_t)((uint64_t)acc * (uint64_t)x);
      else if (op == P2PKIT_MIN) acc = x < acc ? x : acc;
      else acc = x > acc ? x : acc;
      if (!is64) acc = (int64_t)(int32_t)(uint32_t)(uint64_t)acc;
    }
#undef CU_X
    if (op == P2PKIT_AVG) acc /= n;
    return is64 ? (uint64_t)acc : (uint64_t)(uint32_t)(int32_t)acc;
  }
  uint32_t acc = ((const uint8_t *)in[0])[i];
  for (int r = 1; r < n; r++) {
    uint32_t x = ((const uint8_t *)in[r])[i];
    if (op == P2PKIT_SUM || op == P2PKIT_AVG) acc = (acc + x) & 0xff;
    else if (op == P2PKIT_PROD) acc = (acc * x) & 0xff;
    else if (op == P2PKIT_MIN) acc = x < acc ? x : acc;
    else acc = x > acc ? x : acc;
  }
  if (op == P2PKIT_AVG) acc /= (uint32_t)n;
  return acc;
}

/* float64 reference in rank order; *mag bounds the rounding error's scale
 * (the sum of magnitudes for sums, |result| otherwise). */
static inline double cu_float_ref(const void *const *in, int n, size_t i, p2pkit_dtype_t dt,
                                  p2pkit_redop_t op, double *mag) {
  double acc = cu_get_f(in[0], i, dt), m = fabs(acc);
  for (int r = 1; r < n; r++) {
    double x = cu_get_f(in[r], i, dt);
    m += fabs(x);
    if (op == P2PKIT_SUM || op == P2PKIT_AVG) acc += x;
    else if (op == P2PKIT_PROD) acc *= x;
    else if (op == P2PKIT_MIN) acc = x < acc ? x : acc;
    else acc = x > acc ? x : acc;
  }
  if (op == P2PKIT_AVG) acc /= n, m /= n;
  *mag = op == P2PKIT_SUM || op == P2PKIT_AVG ? m : fabs(acc);
  return acc;
}

/* Index of the first element of `out` off the reference (or count when all
 * match); *got / *want say what was found there. */
static inline size_t cu_check(const void *out, const void *const *in, int n, size_t count,
                              p2pkit_dtype_t dt, p2pkit_redop_t op, double *got, double *want) {
  size_t es = p2pkit_dtype_size(dt);
  for (size_t i = 0; i < count; i++) {
    if (cu_is_float(dt)) {
      double mag = 0, ref = cu_float_ref(in, n, i, dt, op, &mag), v = cu_get_f(out, i, dt);
      /* One rounding per step of the accumulation, one to the type. */
      double tol = cu_tol(dt) * n * mag;
      if (!(fabs(v - ref) <= tol)) {
        *got = v, *want = ref;
        return i;
      }
    } else {
      uint64_t ref = cu_int_ref(in, n, i, dt, op), v = 0;
      memcpy(&v, (const char *)out + i * es, es);
      if (v != ref) {
        *got = (double)v, *want = (double)ref;
        return i;
      }
    }
  }
  return count;
}

static inline uint64_t cu_hash(const void *p, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ULL;
  return h;
}

#endif
