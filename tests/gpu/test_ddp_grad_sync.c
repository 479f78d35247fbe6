/* SPDX-License-Identifier: BSD-3-Clause */
/* Gradient sync on 2 GPUs (one thread per rank, p2pkit_comm_init_all): the
 * averaged gradients are exact for both kinds of gradient (views into the
 * buckets and the caller's buffers) over several steps, and the bad inputs
 * give errors: registered twice, wrong GPU, host memory, marked ready twice,
 * never marked ready, freed while registered. */
#include <cuda_runtime_api.h>
#include <pthread.h>

#include "gpu/gpu_test.h"
#include "p2pkit.h"
#include "test.h"

#define NG 6
static const size_t counts[NG] = {100, 300, 1000, 7, 2000, 50};
static const int user_buf[NG] = {0, 1, 0, 1, 1, 0}; /* 1: the caller's buffer */

static p2pkit_comm_t comms[2];
static pthread_barrier_t bar;
static void *rank1_buf; /* a buffer on rank 1's GPU, for rank 0's wrong-GPU check */

#define EXPECT_ERR(call, code, text)                                                   \
  do {                                                                                 \
    p2pkit_status_t s2_ = (call);                                                      \
    if (s2_ != (code)) T_FAIL("%s returned %s, expected %s", #call, p2pkit_strerror(s2_), \
                              p2pkit_strerror(code));                                  \
    else if (!strstr(p2pkit_last_error(), (text)))                                     \
      T_FAIL("%s: \"%s\" lacks \"%s\"", #call, p2pkit_last_error(), (text));            \
  } while (0)

static float value(int rank, int g, size_t j, int step) {
  return (float)((rank + 1) * (g + 1 + step)) + 0.5f * (float)(j % 1024);
}

static void fill(void *dst, int rank, int g, int step, cudaStream_t s, float *host) {
  for (size_t j = 0; j < counts[g]; j++) host[j] = value(rank, g, j, step);
  T_CUDA(cudaMemcpyAsync(dst, host, counts[g] * 4, cudaMemcpyHostToDevice, s));
  T_CUDA(cudaStreamSynchronize(s)); /* host buffer reused */
}

static void *rank_main(void *arg) {
  int rank = (int)(intptr_t)arg;
  T_CUDA(cudaSetDevice(rank));
  cudaStream_t s;
  T_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float *host = malloc(2000 * sizeof *host);
  void *mine[NG] = {0}, *grad[NG] = {0};
  p2pkit_grad_sync_opts_t o;
  p2pkit_grad_sync_opts_init(&o);
  o.bucket_bytes = 4096;
  o.first_bucket_bytes = 1024;
  p2pkit_grad_sync_t gs = NULL;
  CHECK_OK(p2pkit_grad_sync_create(comms[rank], &o, &gs));
  for (int g = 0; g < NG; g++) {
    if (user_buf[g]) T_CUDA(cudaMalloc(&mine[g], counts[g] * 4));
    CHECK_OK(p2pkit_grad_sync_register(gs, mine[g], counts[g], P2PKIT_FLOAT32));
  }
  /* bad registrations (before build) */
  EXPECT_ERR(p2pkit_grad_sync_register(gs, mine[1], counts[1], P2PKIT_FLOAT32),
             P2PKIT_ERR_INVALID_ARGUMENT, "registered twice");
  EXPECT_ERR(p2pkit_grad_sync_register(gs, host, 4, P2PKIT_FLOAT32), P2PKIT_ERR_INVALID_ARGUMENT,
             "not device memory");
  if (rank == 0)
    EXPECT_ERR(p2pkit_grad_sync_register(gs, rank1_buf, 4, P2PKIT_FLOAT32),
               P2PKIT_ERR_INVALID_ARGUMENT, "not device memory of GPU 0");
  CHECK_OK(p2pkit_grad_sync_build(gs));
  for (int g = 0; g < NG; g++) {
    CHECK_OK(p2pkit_grad_sync_grad(gs, (size_t)g, &grad[g]));
    if (user_buf[g]) CHECK(grad[g] == mine[g]);
  }
  size_t nb = 0;
  CHECK_OK(p2pkit_grad_sync_bucket_count(gs, &nb));
  CHECK(nb >= 3);

  for (int step = 0; step < 3; step++) {
    for (int g = NG - 1; g >= 0; g--) { /* backward order */
      fill(grad[g], rank, g, step, s, host);
      CHECK_OK(p2pkit_grad_sync_mark_ready(gs, grad[g], (p2pkit_stream_t)s));
    }
    CHECK_OK(p2pkit_grad_sync_wait(gs, (p2pkit_stream_t)s));
    T_CUDA(cudaStreamSynchronize(s));
    for (int g = 0; g < NG; g++) {
      T_CUDA(cudaMemcpy(host, grad[g], counts[g] * 4, cudaMemcpyDeviceToHost));
      int bad = 0;
      for (size_t j = 0; j < counts[g] && !bad; j++) {
        float want = (value(0, g, j, step) + value(1, g, j, step)) / 2;
        if (host[j] != want) {
          T_FAIL("rank %d step %d gradient %d [%zu]: %g, expected %g", rank, step, g, j,
                 (double)host[j], (double)want);
          bad = 1;
        }
      }
    }
  }

  /* marked ready twice, and never: both ranks do the same, so no bucket is
   * launched on one rank only */
  CHECK_OK(p2pkit_grad_sync_mark_ready(gs, grad[NG - 1], (p2pkit_stream_t)s));
  EXPECT_ERR(p2pkit_grad_sync_mark_ready(gs, grad[NG - 1], (p2pkit_stream_t)s),
             P2PKIT_ERR_INVALID_ARGUMENT, "marked ready twice");
  EXPECT_ERR(p2pkit_grad_sync_mark_ready(gs, (char *)grad[2] + 4, (p2pkit_stream_t)s),
             P2PKIT_ERR_INVALID_ARGUMENT, "inside gradient 2");
  EXPECT_ERR(p2pkit_grad_sync_wait(gs, (p2pkit_stream_t)s), P2PKIT_ERR_INVALID_ARGUMENT,
             "never marked ready");
  /* a full step still works after the failed one */
  for (int g = NG - 1; g >= 0; g--) {
    fill(grad[g], rank, g, 7, s, host);
    CHECK_OK(p2pkit_grad_sync_mark_ready(gs, grad[g], (p2pkit_stream_t)s));
  }
  CHECK_OK(p2pkit_grad_sync_wait(gs, (p2pkit_stream_t)s));
  T_CUDA(cudaStreamSynchronize(s));

  /* freed while registered */
  T_CUDA(cudaFree(mine[1]));
  EXPECT_ERR(p2pkit_grad_sync_mark_ready(gs, mine[1], (p2pkit_stream_t)s),
             P2PKIT_ERR_INVALID_ARGUMENT, "freed");
  mine[1] = NULL;
  pthread_barrier_wait(&bar);
  CHECK_OK(p2pkit_grad_sync_destroy(gs));
  for (int g = 0; g < NG; g++)
    if (mine[g]) cudaFree(mine[g]);
  cudaStreamDestroy(s);
  free(host);
  return NULL;
}

TEST(grad_sync_two_gpus) {
  CHECK_OK(p2pkit_comm_init_all(comms, 2, NULL));
  T_CUDA(cudaSetDevice(1));
  T_CUDA(cudaMalloc(&rank1_buf, 64));
  pthread_barrier_init(&bar, NULL, 2);
  pthread_t th[2];
  for (int r = 0; r < 2; r++) pthread_create(&th[r], NULL, rank_main, (void *)(intptr_t)r);
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  pthread_barrier_destroy(&bar);
  cudaSetDevice(1);
  cudaFree(rank1_buf);
  for (int r = 0; r < 2; r++) CHECK_OK(p2pkit_comm_destroy(comms[r]));
}

TEST(create_errors) {
  p2pkit_grad_sync_t gs = NULL;
  CHECK_EQ(p2pkit_grad_sync_create(NULL, NULL, &gs), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pkit_grad_sync_mark_ready(NULL, NULL, NULL), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pkit_grad_sync_wait(NULL, NULL), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_OK(p2pkit_grad_sync_destroy(NULL));
}

int t_failed;
const char *t_current;
int main(void) {
  setenv("P2PKIT_TIMEOUT", "60", 0); /* a hang fails in a minute, not the default 10 */
  T_REQUIRE_GPUS(2);
  static const t_case cases[] = {T_CASE(create_errors), T_CASE(grad_sync_two_gpus)};
  char failed[256];
  int n = t_run_cases(cases, sizeof cases / sizeof cases[0], failed, sizeof failed);
  if (n) fprintf(stderr, "failed: %s\n", failed);
  return n ? 1 : 0;
}
