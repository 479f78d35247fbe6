/* SPDX-License-Identifier: BSD-3-Clause */
/* The host cost of the ring of last calls (coll/call/trace.c), per call, in
 * one run: small all-reduces enqueued back to back, the ring on and off in
 * turn on the same communicator. Not a test: scripts/device/desync.sh runs
 * it.
 *
 *   bench_trace [--iters N] [--reps R]
 *
 * One process: two ranks (GPUs 0 and 1; on one GPU with
 * P2PKIT_SHARE_GPUS=1 both on GPU 0), else one. Each batch enqueues N
 * steps of every rank's 8-byte all-reduce and is timed on the host up to
 * the last call's return (then synchronised, untimed); batches alternate
 * ring on, ring off, R of each. Prints the medians:
 *   ring_on    host time per call, the ring recording (P2PKIT_TRACE_RING's length)
 *   ring_off   the same with no ring
 *   ring_cost  their difference, in ns
 * and the time of p2pk_trace_record alone, timed in a loop. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll/paths/path.h"
#include "coll/call/trace.h"
#include "coll_util.h"
#include "core/clock.h"
#include "p2pkit.h"

#define MAXR 2

typedef struct {
  int n, iters;
  int dev[MAXR];
  cudaStream_t s[MAXR];
  float *buf[MAXR];
  p2pkit_comm_t comm[MAXR];
} bt_t;

static int ring(bt_t *B, int on) {
  p2pk_trace_rank tr[MAXR];
  for (int r = 0; r < B->n; r++) tr[r] = (p2pk_trace_rank){getpid(), p2pk_trace_pidns(), 1};
  for (int r = 0; r < B->n; r++) {
    if (on) p2pk_trace_attach(B->comm[r], 0x5eed, tr);
    else p2pk_trace_detach(B->comm[r]);
    if ((B->comm[r]->trace != NULL) != on) return -1;
  }
  return 0;
}

/* One batch: host seconds per call. */
static double batch(bt_t *B) {
  const uint64_t t0 = p2pk_now_ns();
  for (int i = 0; i < B->iters; i++)
    for (int r = 0; r < B->n; r++)
      if (p2pkit_all_reduce(B->buf[r], B->buf[r], 2, P2PKIT_FLOAT32, P2PKIT_SUM, B->comm[r],
                            (p2pkit_stream_t)B->s[r]) != P2PKIT_SUCCESS) {
        fprintf(stderr, "bench_trace: all_reduce: %s\n", p2pkit_last_error());
        exit(1);
      }
  const double t = (double)(p2pk_now_ns() - t0) * 1e-9 / ((double)B->iters * B->n);
  if (cu_sync_streams(B->n, B->dev, B->s) != 0) exit(1);
  return t;
}

static int cmp(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void setup(bt_t *B) {
  int ngpu = 0;
  const cudaError_t e = cudaGetDeviceCount(&ngpu);
  if (e != cudaSuccess || ngpu < 1) {
    printf("SKIP: needs %d GPU(s); %s\n", 1, e != cudaSuccess ? cudaGetErrorString(e) : "this machine has fewer");
    exit(77);
  }
  const char *share = getenv("P2PKIT_SHARE_GPUS");
  B->n = ngpu >= 2 || (share && strcmp(share, "1") == 0) ? 2 : 1;
  for (int r = 0; r < B->n; r++) B->dev[r] = ngpu >= 2 ? r : 0;
  if (p2pkit_comm_init_all(B->comm, B->n, B->dev) != P2PKIT_SUCCESS) {
    fprintf(stderr, "bench_trace: init_all: %s\n", p2pkit_last_error());
    exit(1);
  }
  for (int r = 0; r < B->n; r++) {
    cudaSetDevice(B->dev[r]);
    if (cudaStreamCreateWithFlags(&B->s[r], cudaStreamNonBlocking) != cudaSuccess ||
        cudaMalloc((void **)&B->buf[r], 64) != cudaSuccess || cudaMemset(B->buf[r], 0, 64) != cudaSuccess)
      exit(1);
  }
  printf("bench_trace: %d rank(s) on GPU(s) %d%s%d, %d steps a batch\n", B->n, B->dev[0],
         B->n > 1 ? "," : "", B->n > 1 ? B->dev[1] : B->dev[0], B->iters);
}

/* p2pk_trace_record alone, on rank 0's ring: ns per record. */
static double record_alone(bt_t *B) {
  p2pk_call k;
  memset(&k, 0, sizeof k);
  k.c = B->comm[0];
  k.kind = P2PK_COLL_ALL_REDUCE;
  k.count = 2;
  k.dtype = P2PKIT_FLOAT32;
  const int n = 1000000;
  const uint64_t t0 = p2pk_now_ns();
  for (int i = 0; i < n; i++) p2pk_trace_record(&k);
  return (double)(p2pk_now_ns() - t0) / n;
}

int main(int argc, char **argv) {
  bt_t B;
  memset(&B, 0, sizeof B);
  B.iters = 200;
  int reps = 21;
  for (int a = 1; a + 1 < argc; a += 2) {
    if (strcmp(argv[a], "--iters") == 0) B.iters = atoi(argv[a + 1]);
    else if (strcmp(argv[a], "--reps") == 0) reps = atoi(argv[a + 1]);
  }
  if (B.iters < 1 || reps < 1 || reps > 1000) {
    fprintf(stderr, "usage: bench_trace [--iters N] [--reps R]\n");
    return 2;
  }
  setup(&B);
  double on[1000], off[1000];
  batch(&B); /* warm: kernels loaded, pointers checked */
  for (int i = 0; i < reps; i++) {
    if (ring(&B, 1)) return 1;
    on[i] = batch(&B);
    if (ring(&B, 0)) return 1;
    off[i] = batch(&B);
  }
  qsort(on, (size_t)reps, sizeof on[0], cmp);
  qsort(off, (size_t)reps, sizeof off[0], cmp);
  printf("ring_on    %8.3f us per call   (min %.3f, max %.3f)\n", on[reps / 2] * 1e6, on[0] * 1e6,
         on[reps - 1] * 1e6);
  printf("ring_off   %8.3f us per call   (min %.3f, max %.3f)\n", off[reps / 2] * 1e6, off[0] * 1e6,
         off[reps - 1] * 1e6);
  printf("ring_cost  %8.1f ns per call   (medians' difference)\n", (on[reps / 2] - off[reps / 2]) * 1e9);
  if (ring(&B, 1)) return 1;
  printf("record     %8.1f ns per call   (p2pk_trace_record alone, 1e6 in a loop)\n", record_alone(&B));
  for (int r = 0; r < B.n; r++) p2pkit_comm_destroy(B.comm[r]);
  return 0;
}
