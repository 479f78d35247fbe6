/* SPDX-License-Identifier: BSD-3-Clause */
/* Bad input to the communicator and all-reduce: a clear status, never a hang
 * or a crash. Mismatched calls across ranks (another count, type or
 * algorithm) are caught on the device within a fraction of the timeout. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "coll/coll.h"
#include "coll_util.h"
#include "core/param.h"
#include "gpu_test.h"
#include "test.h"

typedef struct {
  p2pkit_comm_t c[2];
  cudaStream_t s[2];
  float *buf[2]; /* 1M floats each, on the rank's GPU */
} pair_t;

static int pair_init(pair_t *p) {
  memset(p, 0, sizeof *p);
  int devs[2] = {0, 1};
  p2pkit_status_t st = p2pkit_comm_init_all(p->c, 2, devs);
  if (st != P2PKIT_SUCCESS) {
    T_FAIL("init_all: %s: %s", p2pkit_strerror(st), p2pkit_last_error());
    return -1;
  }
  for (int r = 0; r < 2; r++) {
    T_CUDA(cudaSetDevice(r));
    T_CUDA(cudaStreamCreateWithFlags(&p->s[r], cudaStreamNonBlocking));
    T_CUDA(cudaMalloc((void **)&p->buf[r], (1u << 20) * sizeof(float) + 64));
    T_CUDA(cudaMemset(p->buf[r], 0, (1u << 20) * sizeof(float) + 64));
    T_CUDA(cudaDeviceSynchronize());
  }
  return 0;
}

static void pair_free(pair_t *p) {
  for (int r = 0; r < 2; r++) {
    cudaSetDevice(r);
    if (p->s[r]) cudaStreamSynchronize(p->s[r]), cudaStreamDestroy(p->s[r]);
    cudaFree(p->buf[r]);
    if (p->c[r]) p2pkit_comm_destroy(p->c[r]);
  }
}

static void expect(p2pkit_status_t got, p2pkit_status_t want, const char *what, const char *needle) {
  if (got != want) {
    T_FAIL("%s: got %s, expected %s (%s)", what, p2pkit_strerror(got), p2pkit_strerror(want),
           p2pkit_last_error());
    return;
  }
  if (needle && !strstr(p2pkit_last_error(), needle))
    T_FAIL("%s: message '%s' lacks '%s'", what, p2pkit_last_error(), needle);
}

TEST(argument_checks) {
  pair_t p;
  if (pair_init(&p) != 0) return;
  p2pkit_comm_t c = p.c[0];
  float *b = p.buf[0];
  cudaStream_t s = p.s[0];
  expect(p2pkit_all_reduce(b, b, 10, P2PKIT_FLOAT32, P2PKIT_SUM, NULL, s),
         P2PKIT_ERR_INVALID_ARGUMENT, "NULL comm", "NULL");
  expect(p2pkit_all_reduce(NULL, b, 10, P2PKIT_FLOAT32, P2PKIT_SUM, c, s),
         P2PKIT_ERR_INVALID_ARGUMENT, "NULL sendbuf", "sendbuf");
  expect(p2pkit_all_reduce(b, NULL, 10, P2PKIT_FLOAT32, P2PKIT_SUM, c, s),
         P2PKIT_ERR_INVALID_ARGUMENT, "NULL recvbuf", "recvbuf");
  expect(p2pkit_all_reduce(NULL, NULL, 0, P2PKIT_FLOAT32, P2PKIT_SUM, c, s), P2PKIT_SUCCESS,
         "count 0 with NULL buffers", NULL);
  expect(p2pkit_all_reduce(b, b, 10, P2PKIT_DTYPE_COUNT, P2PKIT_SUM, c, s),
         P2PKIT_ERR_INVALID_ARGUMENT, "bad dtype", "data type");
  expect(p2pkit_all_reduce(b, b, 10, (p2pkit_dtype_t)-1, P2PKIT_SUM, c, s),
         P2PKIT_ERR_INVALID_ARGUMENT, "negative dtype", "data type");
  expect(p2pkit_all_reduce(b, b, 10, P2PKIT_FLOAT32, P2PKIT_REDOP_COUNT, c, s),
         P2PKIT_ERR_INVALID_ARGUMENT, "bad op", "operation");
  expect(p2pkit_all_reduce(b, b, SIZE_MAX / 2, P2PKIT_FLOAT32, P2PKIT_SUM, c, s),
         P2PKIT_ERR_INVALID_ARGUMENT, "count overflow", "too large");
  expect(p2pkit_all_reduce((char *)b + 1, b + 64, 10, P2PKIT_FLOAT32, P2PKIT_SUM, c, s),
         P2PKIT_ERR_INVALID_ARGUMENT, "misaligned float", "aligned");
  expect(p2pkit_all_reduce(b, b + 5, 10, P2PKIT_FLOAT32, P2PKIT_SUM, c, s),
         P2PKIT_ERR_INVALID_ARGUMENT, "partial overlap", "overlap");
  float *host = malloc(1024);
  expect(p2pkit_all_reduce(host, b, 10, P2PKIT_FLOAT32, P2PKIT_SUM, c, s),
         P2PKIT_ERR_INVALID_ARGUMENT, "malloc'ed host memory", "sendbuf");
  free(host);
  float *pinned = NULL;
  T_CUDA(cudaMallocHost((void **)&pinned, 1024));
  expect(p2pkit_all_reduce(b, pinned, 10, P2PKIT_FLOAT32, P2PKIT_SUM, c, s),
         P2PKIT_ERR_INVALID_ARGUMENT, "pinned host memory", "host memory");
  cudaFreeHost(pinned);
  expect(p2pkit_all_reduce(p.buf[1], b, 10, P2PKIT_FLOAT32, P2PKIT_SUM, c, s),
         P2PKIT_ERR_INVALID_ARGUMENT, "buffer on the other GPU", "on GPU 1");
  /* The grid cap: NULL, negative, inside a group; above the limit it is the limit. */
  expect(p2pkit_comm_set_max_blocks(NULL, 4), P2PKIT_ERR_INVALID_ARGUMENT, "cap on NULL", "NULL");
  expect(p2pkit_comm_set_max_blocks(c, -1), P2PKIT_ERR_INVALID_ARGUMENT, "negative cap", "negative");
  CHECK_EQ(p2pkit_comm_max_blocks(NULL), -1);
  CHECK_EQ(p2pkit_comm_max_blocks(c), 0);
  CHECK_OK(p2pkit_group_start());
  expect(p2pkit_comm_set_max_blocks(c, 8), P2PKIT_ERR_INVALID_ARGUMENT, "cap in a group", "group");
  CHECK_OK(p2pkit_group_end());
  CHECK_EQ(p2pkit_comm_max_blocks(c), 0);
  CHECK_OK(p2pkit_comm_set_max_blocks(c, 1 << 20));
  CHECK_EQ(p2pkit_comm_max_blocks(c), P2PK_COLL_MAX_BLOCKS);
  CHECK_OK(p2pkit_comm_set_max_blocks(c, 0));
  /* None of that launched anything: a real call still pairs up. */
  T_CUDA(cudaSetDevice(0));
  CHECK_OK(p2pkit_all_reduce(b, b, 1000, P2PKIT_FLOAT32, P2PKIT_SUM, p.c[0], p.s[0]));
  CHECK_OK(p2pkit_all_reduce(p.buf[1], p.buf[1], 1000, P2PKIT_FLOAT32, P2PKIT_SUM, p.c[1], p.s[1]));
  for (int r = 0; r < 2; r++) {
    T_CUDA(cudaSetDevice(r));
    T_CUDA(cudaStreamSynchronize(p.s[r]));
    p2pkit_status_t as;
    CHECK_OK(p2pkit_comm_get_async_error(p.c[r], &as));
    CHECK_EQ(as, P2PKIT_SUCCESS);
  }
  expect(p2pkit_comm_get_async_error(NULL, NULL), P2PKIT_ERR_INVALID_ARGUMENT, "async NULL", NULL);
  pair_free(&p);
}

TEST(registration_checks) {
  pair_t p;
  if (pair_init(&p) != 0) return;
  void *h = NULL;
  expect(p2pkit_comm_register(p.c[0], NULL, 16, &h), P2PKIT_ERR_INVALID_ARGUMENT, "NULL buffer", NULL);
  expect(p2pkit_comm_register(p.c[0], p.buf[0], 0, &h), P2PKIT_ERR_INVALID_ARGUMENT, "0 bytes", NULL);
  char host[64];
  expect(p2pkit_comm_register(p.c[0], host, sizeof host, &h), P2PKIT_ERR_INVALID_ARGUMENT,
         "host buffer", NULL);
  expect(p2pkit_comm_register(p.c[0], p.buf[1], 64, &h), P2PKIT_ERR_INVALID_ARGUMENT,
         "other GPU's buffer", "GPU 0");
  CHECK(h == NULL);
  CHECK_OK(p2pkit_comm_register(p.c[0], p.buf[0], 4096, &h));
  CHECK(h != NULL);
  expect(p2pkit_comm_deregister(p.c[0], (void *)&p), P2PKIT_ERR_INVALID_ARGUMENT, "bogus handle",
         "not a registration");
  CHECK_OK(p2pkit_comm_deregister(p.c[0], h));
  expect(p2pkit_comm_deregister(p.c[0], h), P2PKIT_ERR_INVALID_ARGUMENT, "twice", NULL);
  pair_free(&p);
}

TEST(init_checks) {
  p2pkit_comm_t c[20];
  int devs[3] = {0, 0, 1};
  expect(p2pkit_comm_init_all(NULL, 2, NULL), P2PKIT_ERR_INVALID_ARGUMENT, "NULL comms", NULL);
  expect(p2pkit_comm_init_all(c, 0, NULL), P2PKIT_ERR_INVALID_ARGUMENT, "0 GPUs", NULL);
  expect(p2pkit_comm_init_all(c, 17, NULL), P2PKIT_ERR_INVALID_ARGUMENT, "17 GPUs", NULL);
  expect(p2pkit_comm_init_all(c, 3, devs), P2PKIT_ERR_INVALID_ARGUMENT, "duplicate", "twice");
  devs[1] = 999;
  expect(p2pkit_comm_init_all(c, 2, devs), P2PKIT_ERR_INVALID_ARGUMENT, "no such GPU", "999");
  expect(p2pkit_comm_destroy(NULL), P2PKIT_ERR_INVALID_ARGUMENT, "destroy NULL", NULL);
  expect(p2pkit_group_end(), P2PKIT_ERR_INVALID_ARGUMENT, "group_end alone", "group_start");
  CHECK_OK(p2pkit_group_start());
  CHECK_OK(p2pkit_group_end());

  /* The launcher says 2 ranks, the caller 3 and no rank: the launcher's RANK
   * is a rank of another communicator. */
  setenv("WORLD_SIZE", "2", 1);
  setenv("RANK", "0", 1);
  p2pkit_comm_opts_t o;
  p2pkit_comm_opts_init(&o);
  o.nranks = 3;
  p2pkit_comm_t one = NULL;
  expect(p2pkit_comm_init_rank(&o, &one), P2PKIT_ERR_INVALID_ARGUMENT, "rank count vs launcher",
         "launcher");
  unsetenv("WORLD_SIZE");
  unsetenv("RANK");
  p2pkit_comm_opts_init(&o);
  expect(p2pkit_comm_init_rank(&o, &one), P2PKIT_ERR_INVALID_ARGUMENT, "no rank anywhere", "unknown");
  CHECK(one == NULL);

  /* Settings that cannot work fail init, clearly. */
  setenv("P2PKIT_BUFFER_SIZE", "64K", 1);
  p2pk_param_reset();
  expect(p2pkit_comm_init_all(c, 2, NULL), P2PKIT_ERR_INVALID_ARGUMENT, "tiny buffer",
         "P2PKIT_BUFFER_SIZE");
  unsetenv("P2PKIT_BUFFER_SIZE");
  setenv("P2PKIT_ALGO", "ring", 1);
  p2pk_param_reset();
  expect(p2pkit_comm_init_all(c, 2, NULL), P2PKIT_ERR_INVALID_ARGUMENT, "unknown algorithm", "ring");
  unsetenv("P2PKIT_ALGO");
  setenv("P2PKIT_ALGO_TABLE", "/nonexistent/p2pkit-table", 1);
  p2pk_param_reset();
  expect(p2pkit_comm_init_all(c, 2, NULL), P2PKIT_ERR_IO, "missing table", "nonexistent");
  unsetenv("P2PKIT_ALGO_TABLE");
  setenv("P2PKIT_TIMEOUT", "0", 1);
  p2pk_param_reset();
  expect(p2pkit_comm_init_all(c, 2, NULL), P2PKIT_ERR_INVALID_ARGUMENT, "timeout 0",
         "P2PKIT_TIMEOUT='0'");
  unsetenv("P2PKIT_TIMEOUT");
  setenv("P2PKIT_MAX_BLOCKS", "-3", 1);
  p2pk_param_reset();
  expect(p2pkit_comm_init_all(c, 2, NULL), P2PKIT_ERR_INVALID_ARGUMENT, "negative grid cap",
         "P2PKIT_MAX_BLOCKS");
  unsetenv("P2PKIT_MAX_BLOCKS");
  p2pk_param_reset();
  /* Comms that failed to start leave nothing behind: a good init works. */
  CHECK_OK(p2pkit_comm_init_all(c, 2, NULL));
  CHECK_EQ(p2pkit_comm_size(c[0]), 2);
  CHECK_EQ(p2pkit_comm_rank(c[1]), 1);
  CHECK_EQ(p2pkit_comm_device(c[1]), 1);
  CHECK_EQ(p2pkit_comm_rank(NULL), -1);
  CHECK_OK(p2pkit_comm_destroy(c[0]));
  CHECK_OK(p2pkit_comm_destroy(c[1]));
}

/* Rank 0 and rank 1 call with different arguments: both learn it from the
 * device within a fraction of the 30 s timeout, and the communicator refuses
 * further work with the same status. */
static void mismatch_capped(const char *what, size_t count0, p2pkit_dtype_t dt0, size_t count1,
                            p2pkit_dtype_t dt1, int cap0) {
  setenv("P2PKIT_TIMEOUT", "30", 1);
  p2pk_param_reset();
  pair_t p;
  if (pair_init(&p) != 0) return;
  CHECK_OK(p2pkit_comm_set_max_blocks(p.c[0], cap0));
  double t0 = cu_now();
  CHECK_OK(p2pkit_group_start());
  CHECK_OK(p2pkit_all_reduce(p.buf[0], p.buf[0], count0, dt0, P2PKIT_SUM, p.c[0], p.s[0]));
  CHECK_OK(p2pkit_all_reduce(p.buf[1], p.buf[1], count1, dt1, P2PKIT_SUM, p.c[1], p.s[1]));
  CHECK_OK(p2pkit_group_end());
  int invalid = 0;
  for (int r = 0; r < 2; r++) {
    T_CUDA(cudaSetDevice(r));
    T_CUDA(cudaStreamSynchronize(p.s[r]));
    p2pkit_status_t as;
    CHECK_OK(p2pkit_comm_get_async_error(p.c[r], &as));
    if (as == P2PKIT_ERR_INVALID_ARGUMENT) invalid++;
    else if (as != P2PKIT_ERR_REMOTE)
      T_FAIL("%s: rank %d: %s (%s)", what, r, p2pkit_strerror(as), p2pkit_last_error());
    p2pkit_status_t st = p2pkit_all_reduce(p.buf[r], p.buf[r], 8, P2PKIT_FLOAT32, P2PKIT_SUM, p.c[r], p.s[r]);
    CHECK_EQ(st, as);
  }
  CHECK(invalid >= 1);
  double dt = cu_now() - t0;
  if (dt > 5) T_FAIL("%s: detecting the mismatch took %.1f s", what, dt);
  pair_free(&p);
  unsetenv("P2PKIT_TIMEOUT");
  p2pk_param_reset();
}

static void mismatch(const char *what, size_t count0, p2pkit_dtype_t dt0, size_t count1,
                     p2pkit_dtype_t dt1) {
  mismatch_capped(what, count0, dt0, count1, dt1, 0);
}

TEST(mismatched_count_small) { mismatch("count 100 vs 200", 100, P2PKIT_FLOAT32, 200, P2PKIT_FLOAT32); }
TEST(mismatched_dtype) { mismatch("float vs int", 1000, P2PKIT_FLOAT32, 1000, P2PKIT_INT32); }
TEST(mismatched_algorithm) { mismatch("LL vs chunked", 1000, P2PKIT_FLOAT32, 1u << 20, P2PKIT_FLOAT32); }
TEST(mismatched_count_large) {
  mismatch("chunked 1M vs 900K", 1u << 20, P2PKIT_FLOAT32, 900000, P2PKIT_FLOAT32);
}
/* Rank 0 caps its grids (p2pkit_comm_set_max_blocks), rank 1 does not: the
 * grids differ, and the header says so. */
TEST(mismatched_max_blocks) {
  mismatch_capped("grid cap 4 vs none", 1u << 20, P2PKIT_FLOAT32, 1u << 20, P2PKIT_FLOAT32, 4);
}

int t_failed;
const char *t_current;

int main(int argc, char **argv) {
  T_REQUIRE_GPUS(2);
  static const t_case cases[] = {
      T_CASE(argument_checks),        T_CASE(registration_checks), T_CASE(init_checks),
      T_CASE(mismatched_count_small), T_CASE(mismatched_dtype),    T_CASE(mismatched_algorithm),
      T_CASE(mismatched_count_large), T_CASE(mismatched_max_blocks),
  };
  return t_main_cases(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
