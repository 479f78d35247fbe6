/* SPDX-License-Identifier: BSD-3-Clause */
/* p2pkit_copy on two GPUs: every path x sizes {1, 3, 4 KiB+1, 1 GiB+7} x
 * source/destination offsets {0, 1, 3, 8} x both directions, with P2P on and
 * disabled. Each case fills the source with the pattern of its own iteration,
 * poisons the destination and the guard bytes around it, waits on the
 * caller's stream only, then counts on the GPU: mismatching bytes in the
 * region and changed guard bytes. Also: peer access already enabled by the
 * application, stream ordering, SM kernel variants, threads, the log line. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "core/param.h"
#include "gpu/gpu_test.h"
#include "test.h"
#include "xfer/pattern.h"
#include "xfer/xfer.h"
#include "xfer/xfer_kernels.h"

#define GUARD 64
#define POISON 0x5a
#define BIG ((size_t)(1u << 30) + 7)
#define CAP (BIG + 8 + GUARD + 256)
#define SEED 0x1234abcdULL

static unsigned char *buf[2];
static unsigned long long *counter[2];
static cudaStream_t stream[2];
static uint32_t iteration;

static void setup(void) {
  for (int d = 0; d < 2; d++) {
    T_CUDA(cudaSetDevice(d));
    T_CUDA(cudaMalloc((void **)&buf[d], CAP));
    T_CUDA(cudaMalloc((void **)&counter[d], sizeof(unsigned long long)));
    T_CUDA(cudaStreamCreateWithFlags(&stream[d], cudaStreamNonBlocking));
  }
}

static void teardown(void) {
  for (int d = 0; d < 2; d++) {
    cudaSetDevice(d);
    cudaFree(buf[d]);
    cudaFree(counter[d]);
    cudaStreamDestroy(stream[d]);
  }
}

static unsigned long long count_on(int dev, int verify, const void *p, size_t n) {
  unsigned long long c = ~0ull;
  cudaSetDevice(dev);
  T_CUDA(cudaMemset(counter[dev], 0, sizeof c));
  cudaError_t e = verify ? p2pk_launch_verify(p, n, SEED, iteration, counter[dev], 0)
                         : p2pk_launch_count_ne(p, n, POISON, counter[dev], 0);
  T_CUDA(e);
  T_CUDA(cudaMemcpy(&c, counter[dev], sizeof c, cudaMemcpyDeviceToHost));
  return c;
}

/* Copy n bytes src+so -> dst+dof over `path`; 1 when everything checks out. */
static int one(p2pkit_ctx_t ctx, p2pkit_path_t path, const p2pk_copy_opts *opts, int src, int dst,
               size_t n, size_t so, size_t dof, int null_stream) {
  iteration++;
  T_CUDA(cudaSetDevice(src));
  T_CUDA(p2pk_launch_fill(buf[src] + so, n, SEED, iteration, 0));
  T_CUDA(cudaDeviceSynchronize());
  T_CUDA(cudaSetDevice(dst));
  T_CUDA(cudaMemset(buf[dst], POISON, dof + n + GUARD));
  T_CUDA(cudaDeviceSynchronize());
  cudaStream_t s = null_stream ? NULL : stream[src];
  p2pkit_status_t st = p2pk_copy_ex(ctx, buf[dst] + dof, dst, buf[src] + so, src, n, s, path, opts);
  if (st != P2PKIT_SUCCESS) {
    T_FAIL("%s %d->%d n=%zu so=%zu do=%zu: %s", p2pkit_path_name(path), src, dst, n, so, dof,
           p2pkit_last_error());
    return 0;
  }
  /* Only the caller's stream: the copy must be ordered before what follows it. */
  T_CUDA(cudaSetDevice(src));
  T_CUDA(s ? cudaStreamSynchronize(s) : cudaStreamSynchronize(0));
  unsigned long long bad = count_on(dst, 1, buf[dst] + dof, n);
  unsigned long long before = count_on(dst, 0, buf[dst], dof);
  unsigned long long after = count_on(dst, 0, buf[dst] + dof + n, GUARD);
  if (bad || before || after) {
    T_FAIL("%s %d->%d n=%zu so=%zu do=%zu: %llu wrong bytes, %llu/%llu guard bytes changed",
           p2pkit_path_name(path), src, dst, n, so, dof, bad, before, after);
    return 0;
  }
  return 1;
}

static const size_t sizes[] = {1, 3, 4097, BIG};
static const size_t offsets[] = {0, 1, 3, 8};

/* Every size x offset pair x direction for one path; the count of cases run. */
static int sweep(p2pkit_ctx_t ctx, p2pkit_path_t path, const p2pk_copy_opts *opts) {
  int cases = 0, ok = 0;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    for (size_t a = 0; a < 4; a++)
      for (size_t b = 0; b < 4; b++)
        for (int dir = 0; dir < 2; dir++) {
          cases++;
          ok += one(ctx, path, opts, dir, !dir, sizes[i], offsets[a], offsets[b], (a + b) % 3 == 0);
        }
  printf("  %-14s %d/%d cases ok\n", p2pkit_path_name(path), ok, cases);
  return cases;
}

static void reset_env(void) {
  unsetenv("P2PKIT_P2P_DISABLE");
  unsetenv("P2PKIT_P2P_LEVEL");
  unsetenv("P2PKIT_SM_COPY_CONFIG");
  p2pk_param_reset();
}

/* First, before anything else turns peer access on: an application that
 * enabled 0 -> 1 itself keeps it after p2pkit is done; what p2pkit enabled
 * (1 -> 0) it turns off again. */
TEST(peer_access_already_enabled) {
  reset_env();
  int can01 = 0, can10 = 0;
  cudaDeviceCanAccessPeer(&can01, 0, 1);
  cudaDeviceCanAccessPeer(&can10, 1, 0);
  if (!can01 || !can10) {
    printf("note: GPU0 and GPU1 have no peer access; skipped\n");
    return;
  }
  T_CUDA(cudaSetDevice(0));
  T_CUDA(cudaDeviceEnablePeerAccess(1, 0));
  p2pkit_ctx_t ctx = NULL;
  CHECK_OK(p2pkit_ctx_create(NULL, &ctx));
  CHECK(one(ctx, P2PKIT_PATH_P2P_CE, NULL, 0, 1, 1u << 20, 0, 0, 0));
  CHECK(one(ctx, P2PKIT_PATH_P2P_CE, NULL, 1, 0, 1u << 20, 0, 0, 0));
  p2pkit_ctx_destroy(ctx);
  T_CUDA(cudaSetDevice(0));
  CHECK_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled);
  cudaGetLastError();
  T_CUDA(cudaDeviceDisablePeerAccess(1));
  T_CUDA(cudaSetDevice(1));
  CHECK_EQ(cudaDeviceDisablePeerAccess(0), cudaErrorPeerAccessNotEnabled);
  cudaGetLastError();
}

TEST(every_path) {
  reset_env();
  p2pkit_ctx_t ctx = NULL;
  CHECK_OK(p2pkit_ctx_create(NULL, &ctx));
  if (!ctx) return;
  for (int p = P2PKIT_PATH_AUTO; p < P2PKIT_PATH_COUNT; p++) {
    p2pkit_path_t path = (p2pkit_path_t)p;
    p2pkit_pair_t pair;
    CHECK_OK(p2pkit_topo_pair(p2pk_ctx_topo(ctx), 0, 1, &pair));
    if (p2pk_path_is_p2p(path) && pair.p2p == 0) {
      printf("  %-14s skipped: no peer access between GPU0 and GPU1\n", p2pkit_path_name(path));
      continue;
    }
    sweep(ctx, path, NULL);
  }
  p2pkit_ctx_destroy(ctx);
}

TEST(p2p_disabled) {
  reset_env();
  setenv("P2PKIT_P2P_DISABLE", "1", 1);
  p2pk_param_reset();
  p2pkit_ctx_t ctx = NULL;
  CHECK_OK(p2pkit_ctx_create(NULL, &ctx));
  if (!ctx) return;
  p2pkit_path_t path;
  const char *why;
  CHECK_OK(p2pkit_copy_choose(ctx, 0, 1, 8, &path, &why));
  CHECK_EQ(path, P2PKIT_PATH_STAGED);
  CHECK_STR(why, "STAGED/host (P2P disabled by P2PKIT_P2P_DISABLE)");
  static const p2pkit_path_t work[] = {P2PKIT_PATH_AUTO, P2PKIT_PATH_STAGED,
                                       P2PKIT_PATH_STAGED_SERIAL, P2PKIT_PATH_DRIVER};
  for (size_t i = 0; i < 4; i++) sweep(ctx, work[i], NULL);
  for (int p = P2PKIT_PATH_P2P_CE; p <= P2PKIT_PATH_P2P_SM_PULL; p++) {
    CHECK_EQ(p2pkit_copy(ctx, buf[1], 1, buf[0], 0, 64, NULL, (p2pkit_path_t)p),
             P2PKIT_ERR_UNSUPPORTED);
    CHECK(strstr(p2pkit_last_error(), "P2P disabled by P2PKIT_P2P_DISABLE") != NULL);
  }
  p2pkit_ctx_destroy(ctx);
  reset_env();
}

/* The SM kernel shapes: every kind, hint and unroll; TMA stage counts and a
 * last tile cut short; all alignment classes of the body. */
TEST(sm_kernel_variants) {
  reset_env();
  p2pkit_ctx_t ctx = NULL;
  CHECK_OK(p2pkit_ctx_create(NULL, &ctx));
  if (!ctx) return;
  p2pkit_pair_t pair;
  CHECK_OK(p2pkit_topo_pair(p2pk_ctx_topo(ctx), 0, 1, &pair));
  if (pair.p2p == 0) {
    printf("note: no peer access; skipped\n");
    p2pkit_ctx_destroy(ctx);
    return;
  }
  static const char *const configs[] = {
      "kind=stride,hint=plain,unroll=1,threads=32",  "kind=stride,hint=cs,unroll=8,bps=4",
      "kind=chunk,hint=nc,unroll=2,threads=1024",    "kind=chunk,hint=plain,unroll=8,bps=1",
      "kind=tma,tile=1K,stages=1,bps=1",             "kind=tma,tile=64K,stages=3,bps=1",
      "kind=tma,tile=8K,stages=8,bps=2",             "kind=tma,tile=16K,stages=2,bps=32",
      /* exactly 48 KiB of stages: with the static mbarriers over the default
       * limit, so the launcher must raise it (the device run's failure) */
      "kind=tma,tile=8K,stages=6,bps=1",             "kind=tma,tile=16K,stages=3,bps=2",
      "kind=tma,tile=47K,stages=1,bps=4",
  };
  static const size_t n[] = {17, 300 * 1024 + 5, (64u << 20) + 3};
  static const size_t off[][2] = {{0, 0}, {3, 3}, {0, 8}, {1, 3}, {8, 1}};
  for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
    p2pk_sm_config cfg;
    char err[160];
    if (p2pk_sm_config_parse(configs[c], &cfg, err, sizeof err)) {
      T_FAIL("%s: %s", configs[c], err);
      continue;
    }
    p2pk_copy_opts opts = {.sm = &cfg};
    int ok = 0, cases = 0;
    for (size_t i = 0; i < 3; i++)
      for (size_t o = 0; o < 5; o++)
        for (int pull = 0; pull < 2; pull++) {
          cases++;
          ok += one(ctx, pull ? P2PKIT_PATH_P2P_SM_PULL : P2PKIT_PATH_P2P_SM_PUSH, &opts, o % 2,
                    !(o % 2), n[i], off[o][0], off[o][1], 0);
        }
    printf("  %-45s %d/%d ok\n", configs[c], ok, cases);
  }
  p2pkit_ctx_destroy(ctx);
}

/* Work queued on the caller's stream before the copy is finished before the
 * copy reads; the stream waits for the copy. A slow fill right before each
 * copy makes a missing dependency show as stale bytes. */
TEST(stream_order) {
  reset_env();
  p2pkit_ctx_t ctx = NULL;
  CHECK_OK(p2pkit_ctx_create(NULL, &ctx));
  if (!ctx) return;
  p2pkit_pair_t pair;
  CHECK_OK(p2pkit_topo_pair(p2pk_ctx_topo(ctx), 0, 1, &pair));
  size_t n = 512u << 20;
  for (int p = P2PKIT_PATH_AUTO; p < P2PKIT_PATH_COUNT; p++) {
    if (p2pk_path_is_p2p((p2pkit_path_t)p) && pair.p2p == 0) continue;
    iteration++;
    T_CUDA(cudaSetDevice(0));
    T_CUDA(p2pk_launch_fill(buf[0], n, SEED, iteration - 1, stream[0])); /* stale */
    T_CUDA(cudaStreamSynchronize(stream[0]));
    T_CUDA(cudaSetDevice(1));
    T_CUDA(cudaMemset(buf[1], POISON, n));
    T_CUDA(cudaDeviceSynchronize());
    T_CUDA(cudaSetDevice(0));
    T_CUDA(p2pk_launch_fill(buf[0], n, SEED, iteration, stream[0])); /* fresh, still running */
    CHECK_OK(p2pkit_copy(ctx, buf[1], 1, buf[0], 0, n, stream[0], (p2pkit_path_t)p));
    T_CUDA(cudaSetDevice(0));
    T_CUDA(cudaStreamSynchronize(stream[0]));
    unsigned long long bad = count_on(1, 1, buf[1], n);
    if (bad) T_FAIL("%s: %llu bytes stale or missing", p2pkit_path_name((p2pkit_path_t)p), bad);
  }
  /* A stream of the wrong GPU is refused. */
  CHECK_EQ(p2pkit_copy(ctx, buf[1], 1, buf[0], 0, 64, stream[1], P2PKIT_PATH_AUTO),
           P2PKIT_ERR_INVALID_ARGUMENT);
  p2pkit_ctx_destroy(ctx);
}

typedef struct {
  p2pkit_ctx_t ctx;
  int index;
  int src, p2p;
  unsigned char *s, *d;
  size_t n;
  int failures;
} worker_args;

static void *worker(void *arg) {
  worker_args *w = arg;
  cudaSetDevice(w->src);
  cudaStream_t s;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
    w->failures++;
    return NULL;
  }
  /* The TMA kernel (the first use of it in this process) with a different
   * shared-memory size per thread, all over the 48 KiB default once the
   * kernel's static mbarriers count: the threads race to raise the kernel's
   * limit on each device (pushes on the source, pulls on the destination),
   * and a smaller raise must never undo a larger one. */
  p2pk_sm_config tma;
  p2pk_sm_config_default(&tma);
  tma.kind = P2PK_SMK_TMA;
  tma.tile_kib = 16;
  tma.stages = 3 + w->index; /* 48 .. 96 KiB */
  p2pk_copy_opts tma_opts = {.sm = &tma};
  static const p2pkit_path_t paths[] = {P2PKIT_PATH_STAGED, P2PKIT_PATH_AUTO, P2PKIT_PATH_P2P_SM_PULL,
                                        P2PKIT_PATH_STAGED_SERIAL, P2PKIT_PATH_P2P_SM_PUSH};
  for (int i = 0; i < 15; i++) {
    p2pkit_path_t path = paths[i % 5];
    if (p2pk_path_is_p2p(path) && !w->p2p) continue;
    int sm = path == P2PKIT_PATH_P2P_SM_PUSH || path == P2PKIT_PATH_P2P_SM_PULL;
    const p2pk_copy_opts *opts = sm ? &tma_opts : NULL;
    p2pkit_status_t st = p2pk_copy_ex(w->ctx, w->d, !w->src, w->s, w->src, w->n, s, path, opts);
    if (st != P2PKIT_SUCCESS) {
      fprintf(stderr, "  thread %d: %s: %s\n", w->index, p2pkit_path_name(path), p2pkit_last_error());
      w->failures++;
    }
  }
  if (cudaStreamSynchronize(s) != cudaSuccess) w->failures++;
  cudaStreamDestroy(s);
  return NULL;
}

/* Several threads on the same pair and context at once. */
TEST(threads) {
  reset_env();
  p2pkit_ctx_t ctx = NULL;
  CHECK_OK(p2pkit_ctx_create(NULL, &ctx));
  if (!ctx) return;
  enum { NT = 4 };
  size_t n = 32u << 20;
  p2pkit_pair_t pair;
  CHECK_OK(p2pkit_topo_pair(p2pk_ctx_topo(ctx), 0, 1, &pair));
  worker_args w[NT];
  pthread_t th[NT];
  iteration++;
  for (int t = 0; t < NT; t++) {
    int src = t % 2;
    w[t] = (worker_args){ctx, t, src, pair.p2p != 0, buf[src] + (size_t)t * n,
                         buf[!src] + (size_t)(NT + t) * n, n, 0};
    T_CUDA(cudaSetDevice(src));
    T_CUDA(p2pk_launch_fill(w[t].s, n, SEED, iteration, 0));
    T_CUDA(cudaDeviceSynchronize());
  }
  for (int t = 0; t < NT; t++) pthread_create(&th[t], NULL, worker, &w[t]);
  for (int t = 0; t < NT; t++) pthread_join(th[t], NULL);
  for (int t = 0; t < NT; t++) {
    CHECK_EQ(w[t].failures, 0);
    CHECK_EQ(count_on(!w[t].src, 1, w[t].d, n), 0);
  }
  p2pkit_ctx_destroy(ctx);
}

/* At INFO: one line per pair and path, the first time. */
TEST(log_line) {
  reset_env();
  char path[] = "/tmp/p2pkit_copy_logXXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) {
    T_FAIL("mkstemp failed");
    return;
  }
  close(fd);
  setenv("P2PKIT_DEBUG", "INFO", 1);
  setenv("P2PKIT_DEBUG_SUBSYS", "XFER", 1);
  setenv("P2PKIT_DEBUG_FILE", path, 1);
  p2pk_param_reset();
  p2pk_log_reset();
  p2pkit_ctx_t ctx = NULL;
  CHECK_OK(p2pkit_ctx_create(NULL, &ctx));
  if (ctx) {
    p2pkit_path_t p;
    const char *why;
    CHECK_OK(p2pkit_copy_choose(ctx, 0, 1, 64u << 20, &p, &why));
    char want[320];
    snprintf(want, sizeof want, "p2pkit INFO GPU0 -> GPU1 via %s\n", why);
    for (int i = 0; i < 3; i++) CHECK(one(ctx, P2PKIT_PATH_AUTO, NULL, 0, 1, 64u << 20, 0, 0, 0));
    p2pkit_ctx_destroy(ctx);
    FILE *f = fopen(path, "r");
    char line[512];
    int hits = 0;
    while (f && fgets(line, sizeof line, f)) {
      char *at = strstr(line, "p2pkit INFO GPU0 -> GPU1 via ");
      if (at) {
        hits++;
        CHECK_STR(at, want);
      }
    }
    if (f) fclose(f);
    CHECK_EQ(hits, 1);
  }
  unsetenv("P2PKIT_DEBUG_FILE");
  unsetenv("P2PKIT_DEBUG_SUBSYS");
  setenv("P2PKIT_DEBUG", "WARN", 1);
  p2pk_param_reset();
  p2pk_log_reset();
  unlink(path);
}

static void run_all(void);
T_MAIN(T_CASE(run_all))

/* run_all has no checks of its own: it fails when a case did, and then names
 * them (stdout line-buffered so the per-case lines stay in order with the
 * failed checks' messages on stderr). */
static void run_all(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  T_REQUIRE_GPUS(2);
  setup();
  /* The kernel variants last: a faulting one (the TMA kind is new on peer
   * memory) would leave the context unusable for whatever ran after it. */
  static const t_case cases[] = {T_CASE(peer_access_already_enabled), T_CASE(every_path),
                                 T_CASE(p2p_disabled), T_CASE(stream_order), T_CASE(threads),
                                 T_CASE(log_line), T_CASE(sm_kernel_variants)};
  char failed[512];
  int nfailed = t_run_cases(cases, sizeof cases / sizeof cases[0], failed, sizeof failed);
  t_current = "run_all";
  teardown();
  if (nfailed)
    fprintf(stderr, "run_all: %d of %zu cases failed: %s (their checks are above)\n", nfailed,
            sizeof cases / sizeof cases[0], failed);
}
