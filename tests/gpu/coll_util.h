/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers for the all-reduce tests and the sweep: input generation, a host
 * reference (float64 for floating types, exact wrap-around integers for
 * integer types), comparison with per-type tolerance, hashing; and for the
 * process-per-GPU tests, the rank count and the start of and wait for the
 * child processes (cu_test_nranks, cu_spawn_ranks). */
#ifndef P2PK_COLL_UTIL_H
#define P2PK_COLL_UTIL_H

#include <cuda_runtime_api.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coll/kernels/coll_dev.h"
#include "core/param.h"
#include "p2pkit.h"

static inline double cu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Ascending order of doubles, for qsort (the timing programs' medians). */
static inline int cu_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Wait for stream s[r] on GPU dev[r], r < n; -1 (reason on stderr) if one
 * failed. */
static inline int cu_sync_streams(int n, const int *dev, cudaStream_t const *s) {
  for (int r = 0; r < n; r++) {
    cudaSetDevice(dev[r]);
    cudaError_t e = cudaStreamSynchronize(s[r]);
    if (e != cudaSuccess) {
      fprintf(stderr, "GPU %d: %s\n", dev[r], cudaGetErrorString(e));
      return -1;
    }
  }
  return 0;
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

/* fp8 (CUDA's __nv_fp8_e4m3 and __nv_fp8_e5m2) on the host: e5m2 is the
 * top byte of a half; e4m3 (bias 7, no infinity, 0x7f NaN) decoded by hand,
 * encoded by the nearest of its 256 values. */
static inline float cu_e5m2_to_f(uint8_t b) { return cu_h2f((uint16_t)(b << 8)); }
static inline uint8_t cu_f_to_e5m2(float f) {
  const uint16_t h = cu_f2h(f);
  const uint16_t r = (uint16_t)(h + 0x7f + ((h >> 8) & 1)); /* to nearest even byte */
  return (uint8_t)(r >> 8);
}
static inline float cu_e4m3_to_f(uint8_t b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return NAN;
  const float v = e ? ldexpf(1.0f + (float)m / 8.0f, e - 7) : ldexpf((float)m / 8.0f, -6);
  return s ? -v : v;
}
static inline uint8_t cu_f_to_e4m3(float f) {
  uint8_t best = 0;
  float err = INFINITY;
  for (int b = 0; b < 256; b++) {
    const float v = cu_e4m3_to_f((uint8_t)b);
    if (!isnan(v) && fabsf(v - f) < err) err = fabsf(v - f), best = (uint8_t)b;
  }
  return best;
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
      /* The types only NCCL carries: fp8 small multiples of 1/4 (products:
       * powers of two within +-2, so n of them stay in range). */
      case P2PKIT_INT8: ((int8_t *)buf)[i] = (int8_t)(uint8_t)(r >> 40); break;
      case P2PKIT_UINT32: ((uint32_t *)buf)[i] = (uint32_t)(r >> 21); break;
      case P2PKIT_UINT64: ((uint64_t *)buf)[i] = r >> 2; break;
      case P2PKIT_FLOAT8_E4M3:
      case P2PKIT_FLOAT8_E5M2: {
        static const float prod[] = {-2.0f, -1.0f, -0.5f, 0.5f, 1.0f, 2.0f};
        const float v = op == P2PKIT_PROD ? prod[r % 6] : (float)(k % 17) / 4.0f;
        ((uint8_t *)buf)[i] = dt == P2PKIT_FLOAT8_E4M3 ? cu_f_to_e4m3(v) : cu_f_to_e5m2(v);
        break;
      }
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
    case P2PKIT_FLOAT8_E4M3: return cu_e4m3_to_f(((const uint8_t *)buf)[i]);
    case P2PKIT_FLOAT8_E5M2: return cu_e5m2_to_f(((const uint8_t *)buf)[i]);
    default: return 0;
  }
}

static inline int cu_is_float(p2pkit_dtype_t dt) {
  return dt == P2PKIT_FLOAT32 || dt == P2PKIT_FLOAT16 || dt == P2PKIT_BFLOAT16 ||
         dt == P2PKIT_FLOAT64 || dt == P2PKIT_FLOAT8_E4M3 || dt == P2PKIT_FLOAT8_E5M2;
}

/* Relative tolerance of one rounding to the type (n small). */
static inline double cu_tol(p2pkit_dtype_t dt) {
  switch (dt) {
    case P2PKIT_FLOAT32: return 1e-6;
    case P2PKIT_FLOAT16: return 1e-3;
    case P2PKIT_BFLOAT16: return 8e-3;
    case P2PKIT_FLOAT64: return 1e-14;
    case P2PKIT_FLOAT8_E4M3: return 0.0625; /* 3 mantissa bits */
    case P2PKIT_FLOAT8_E5M2: return 0.125;  /* 2 */
    default: return 0;
  }
}

/* Smallest positive (subnormal) value of the type: the absolute error of
 * rounding a result below the normal range to the type is half of it. With
 * 5 or more ranks a float16 product of the cu_fill inputs can fall there. */
static inline double cu_tiny(p2pkit_dtype_t dt) {
  switch (dt) {
    case P2PKIT_FLOAT32: return ldexp(1.0, -149);
    case P2PKIT_FLOAT16: return ldexp(1.0, -24);
    case P2PKIT_BFLOAT16: return ldexp(1.0, -133);
    case P2PKIT_FLOAT64: return ldexp(1.0, -1074);
    case P2PKIT_FLOAT8_E4M3: return ldexp(1.0, -9);
    case P2PKIT_FLOAT8_E5M2: return ldexp(1.0, -16);
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
  if (dt == P2PKIT_INT8) {
    int8_t acc = ((const int8_t *)in[0])[i];
    for (int r = 1; r < n; r++) {
      const int8_t x = ((const int8_t *)in[r])[i];
      if (op == P2PKIT_SUM || op == P2PKIT_AVG) acc = (int8_t)(uint8_t)((uint8_t)acc + (uint8_t)x);
      else if (op == P2PKIT_PROD) acc = (int8_t)(uint8_t)((unsigned)(uint8_t)acc * (uint8_t)x);
      else if (op == P2PKIT_MIN) acc = x < acc ? x : acc;
      else acc = x > acc ? x : acc;
    }
    if (op == P2PKIT_AVG) acc = (int8_t)(acc / n);
    return (uint64_t)(uint8_t)acc;
  }
  if (dt == P2PKIT_UINT32 || dt == P2PKIT_UINT64) {
    const int is64 = dt == P2PKIT_UINT64;
    const uint64_t mask = is64 ? ~0ULL : 0xffffffffULL;
#define CU_U(r) (is64 ? ((const uint64_t *)in[r])[i] : (uint64_t)((const uint32_t *)in[r])[i])
    uint64_t acc = CU_U(0);
    for (int r = 1; r < n; r++) {
      const uint64_t x = CU_U(r);
      if (op == P2PKIT_SUM || op == P2PKIT_AVG) acc = (acc + x) & mask;
      else if (op == P2PKIT_PROD) acc = (acc * x) & mask;
      else if (op == P2PKIT_MIN) acc = x < acc ? x : acc;
      else acc = x > acc ? x : acc;
    }
#undef CU_U
    if (op == P2PKIT_AVG) acc /= (uint64_t)n;
    return acc;
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
 * (the sum of magnitudes for sums, |result| otherwise); *amp bounds how much
 * later factors of a product can grow an intermediate's error (the product
 * of the factors above 1, whatever the order). */
static inline double cu_float_ref(const void *const *in, int n, size_t i, p2pkit_dtype_t dt,
                                  p2pkit_redop_t op, double *mag, double *amp) {
  double acc = cu_get_f(in[0], i, dt), m = fabs(acc);
  *amp = fabs(acc) > 1 ? fabs(acc) : 1;
  for (int r = 1; r < n; r++) {
    double x = cu_get_f(in[r], i, dt);
    m += fabs(x);
    if (fabs(x) > 1) *amp *= fabs(x);
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
      double mag = 0, amp = 1, ref = cu_float_ref(in, n, i, dt, op, &mag, &amp), v = cu_get_f(out, i, dt);
      /* One rounding per step of the accumulation, one to the type; below
       * the normal range a rounding errs by up to half a subnormal step. A
       * product reduced in the type at each hop (NCCL's ring) rounds each of
       * its n - 1 partial products, in any order, and later factors grow
       * those errors by at most amp: at 7 ranks float16's NCCL reduce-scatter
       * was 2.1 subnormal steps off on the one-H200 machine. */
      double sub = op == P2PKIT_PROD ? 0.5 * (n - 1) * amp : 0;
      double tol = cu_tol(dt) * n * mag + cu_tiny(dt) * (sub > 1 ? sub : 1);
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

/* --- one process per GPU ----------------------------------------------------- */

/* P2PKIT_SHARE_GPUS on (read as the library reads it): process-per-GPU
 * jobs may put several ranks on one GPU (P2PKIT_TEST_NRANKS above the GPU
 * count), to check results with more ranks than the machine has GPUs. */
static inline int cu_share_gpus(void) { return p2pk_param_int("P2PKIT_SHARE_GPUS") != 0; }

/* How many ranks a test of `maxr` ranks at most runs: one per visible GPU, at
 * most maxr (and P2PK_COLL_MAX_RANKS); P2PKIT_TEST_NRANKS asks for fewer
 * (clamped to 2..that), or with P2PKIT_SHARE_GPUS more (process per GPU).
 * Never below 2: with fewer GPUs the children say so and skip (exit 77). */
static inline int cu_test_nranks(int maxr) {
  int ngpu = 0;
  if (cudaGetDeviceCount(&ngpu) != cudaSuccess) {
    cudaGetLastError();
    ngpu = 0;
  }
  if (maxr > P2PK_COLL_MAX_RANKS) maxr = P2PK_COLL_MAX_RANKS;
  int n = ngpu < maxr ? ngpu : maxr;
  const char *e = getenv("P2PKIT_TEST_NRANKS");
  if (e && *e) {
    char *end = NULL;
    long v = strtol(e, &end, 10);
    if (end == e || *end != '\0')
      fprintf(stderr, "P2PKIT_TEST_NRANKS=%s is not a number: ignored\n", e);
    else if (v < n || (cu_share_gpus() && v <= maxr))
      n = v < 2 ? 2 : (int)v;
  }
  return n < 2 ? 2 : n;
}

/* The GPU rank `rank` of a process-per-GPU job runs on: its own, or with
 * P2PKIT_SHARE_GPUS=1 (more ranks than GPUs) rank modulo the GPU count. */
static inline int cu_rank_device(int rank) {
  int ngpu = 0;
  if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < 1) {
    cudaGetLastError();
    return rank;
  }
  return cu_share_gpus() ? rank % ngpu : rank;
}

extern char **environ;

#ifndef W_EXITCODE
#define W_EXITCODE(ret, sig) ((ret) << 8 | (sig))
#endif

/* Start n children, ranks 0..n-1, each running this binary afresh (fork +
 * exec of /proc/self/exe, so each starts CUDA on its own) as
 * `prog --child mode <rank> <port> <n>`, with P2PKIT_P2P_DISABLE=1 in their
 * environment when p2p_disable (else without it). Wait for all of them at
 * most limit_s seconds; then SIGKILL and reap those still running.
 * status[r] / pid[r]: each child's wait status and pid (a failed fork reads
 * as exit code 127). Returns 1 when children had to be killed (a hang), else
 * 0. */
static inline int cu_spawn_ranks(const char *prog, const char *mode, int n, int port,
                                 int p2p_disable, int limit_s, int *status, pid_t *pid) {
  if (n > P2PK_COLL_MAX_RANKS) n = P2PK_COLL_MAX_RANKS;
  size_t ne = 0;
  while (environ[ne]) ne++;
  char **env = calloc(ne + 2, sizeof *env);
  if (!env) {
    for (int r = 0; r < n; r++) pid[r] = -1, status[r] = W_EXITCODE(127, 0);
    return 0;
  }
  size_t k = 0;
  for (size_t i = 0; i < ne; i++)
    if (strncmp(environ[i], "P2PKIT_P2P_DISABLE=", 19) != 0) env[k++] = environ[i];
  if (p2p_disable) env[k++] = "P2PKIT_P2P_DISABLE=1";
  env[k] = NULL;
  char ports[16], nranks[16], ranks[P2PK_COLL_MAX_RANKS][16];
  snprintf(ports, sizeof ports, "%d", port);
  snprintf(nranks, sizeof nranks, "%d", n);
  int done[P2PK_COLL_MAX_RANKS] = {0}, ndone = 0;
  for (int r = 0; r < n; r++) {
    snprintf(ranks[r], sizeof ranks[r], "%d", r);
    char *argv[] = {(char *)prog, "--child", (char *)mode, ranks[r], ports, nranks, NULL};
    status[r] = 0;
    fflush(NULL);
    pid[r] = fork();
    if (pid[r] == 0) {
      execve("/proc/self/exe", argv, env);
      _exit(127);
    }
    if (pid[r] < 0) {
      status[r] = W_EXITCODE(127, 0);
      done[r] = 1;
      ndone++;
    }
  }
  free(env);
  double t0 = cu_now();
  int hung = 0;
  while (ndone < n) {
    for (int r = 0; r < n; r++)
      if (!done[r] && waitpid(pid[r], &status[r], WNOHANG) == pid[r]) done[r] = 1, ndone++;
    if (ndone < n && cu_now() - t0 > limit_s) {
      hung = 1;
      for (int r = 0; r < n; r++)
        if (!done[r]) {
          kill(pid[r], SIGKILL);
          waitpid(pid[r], &status[r], 0);
          done[r] = 1, ndone++;
        }
    }
    if (ndone < n) usleep(20000);
  }
  return hung;
}

#endif
