/* SPDX-License-Identifier: BSD-3-Clause */
/* The README's C example, whole: a copy from GPU 0 to GPU 1, then an
 * all-reduce over both, from one process; it checks the sum and says "ok".
 * Built against an installed p2pkit (docs/install.md), either way:
 *   cc quickstart.c $(pkg-config --cflags --libs p2pkit) \
 *      -Wl,-rpath,$(pkg-config --variable=libdir p2pkit)
 *   CMake: find_package(p2pkit CONFIG REQUIRED)
 *          target_link_libraries(quickstart PRIVATE p2pkit::p2pkit)
 * With fewer than two GPUs it says so and exits 2. */
#include <cuda_runtime.h>
#include <p2pkit.h>
#include <stdio.h>
#include <stdlib.h>

/* A failed p2pkit call: its status and the sentence naming what was wrong. */
#define CHECK(call)                                                                        \
  do {                                                                                     \
    p2pkit_status_t st_ = (call);                                                          \
    if (st_ != P2PKIT_SUCCESS) {                                                           \
      fprintf(stderr, "quickstart: %s: %s\n", p2pkit_strerror(st_), p2pkit_last_error()); \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)
#define CUDA(call)                                                                         \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "quickstart: %s: %s\n", #call, cudaGetErrorString(e_));              \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)

int main(void) {
  const int v = p2pkit_version();
  printf("p2pkit %d.%d.%d\n", v / 10000, v / 100 % 100, v % 100);
  int ngpus = 0;
  cudaError_t e = cudaGetDeviceCount(&ngpus);
  if (e != cudaSuccess || ngpus < 2) {
    fprintf(stderr, "quickstart: needs 2 GPUs, this machine has %d%s%s\n", ngpus,
            e != cudaSuccess ? ": " : "", e != cudaSuccess ? cudaGetErrorString(e) : "");
    return 2;
  }
  const size_t count = 1 << 20, bytes = count * sizeof(float);
  float *buf[2], *host = malloc(bytes);
  cudaStream_t streams[2];
  if (!host) return 1;
  for (size_t i = 0; i < count; i++) host[i] = 1.0f;

  p2pkit_comm_t comms[2];                      /* collectives, NCCL's conventions */
  CHECK(p2pkit_comm_init_all(comms, 2, NULL)); /* one process, GPUs 0 and 1 */
  for (int g = 0; g < 2; g++) {
    CUDA(cudaSetDevice(g));
    CUDA(cudaMalloc((void **)&buf[g], bytes));
    CUDA(cudaStreamCreate(&streams[g]));
  }
  CUDA(cudaMemcpy(buf[0], host, bytes, cudaMemcpyHostToDevice));
  p2pkit_ctx_t ctx;                            /* copies: the fastest path the pair allows */
  CHECK(p2pkit_ctx_create(NULL, &ctx));
  CHECK(p2pkit_copy(ctx, buf[1], 1, buf[0], 0, bytes, (p2pkit_stream_t)streams[0],
                    P2PKIT_PATH_AUTO));        /* GPU 0 -> GPU 1, on GPU 0's stream */
  CUDA(cudaStreamSynchronize(streams[0]));     /* landed before GPU 1 reads it */
  CHECK(p2pkit_group_start());                 /* every rank's call in one group */
  for (int g = 0; g < 2; g++)
    CHECK(p2pkit_all_reduce(buf[g], buf[g], count, P2PKIT_FLOAT32, P2PKIT_SUM, comms[g],
                            (p2pkit_stream_t)streams[g]));
  CHECK(p2pkit_group_end());

  CUDA(cudaSetDevice(1));
  CUDA(cudaStreamSynchronize(streams[1]));
  CUDA(cudaMemcpy(host, buf[1], bytes, cudaMemcpyDeviceToHost));
  size_t wrong = 0;
  for (size_t i = 0; i < count; i++) wrong += host[i] != 2.0f; /* 1 + 1 on every element */
  p2pkit_ctx_destroy(ctx);
  for (int g = 0; g < 2; g++) {
    CHECK(p2pkit_comm_destroy(comms[g]));
    cudaFree(buf[g]);
  }
  free(host);
  if (wrong) fprintf(stderr, "quickstart: %zu of %zu sums wrong\n", wrong, count);
  else printf("ok: %zu floats copied from GPU 0 to GPU 1 and summed over both\n", count);
  return wrong != 0;
}
