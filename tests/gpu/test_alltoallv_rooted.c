/* SPDX-License-Identifier: BSD-3-Clause */
/* p2pkit_all_to_allv, p2pkit_gather and p2pkit_scatter on GPUs, against a
 * host reference, with a process per rank: 1 rank, then 2, 3 and 4 (one
 * per GPU, or sharing the GPUs with P2PKIT_SHARE_GPUS=1, as
 * scripts/device/torch.sh runs it on one GPU).
 *   all_to_allv  counts that differ for every pair and round, some zero,
 *                rank by rank (each rank's differ from every other's);
 *                blocks apart, with gaps between them that must stay
 *                untouched; four element sizes; small and large blocks;
 *                eagerly and replayed from a CUDA graph with new data
 *   rooted       gather and scatter from every root, out of place and in
 *                place on the root, odd counts; count 0 a no-op
 * Every rank checks its own output and every rank's call must succeed. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <string.h>

#include "test.h"
#include "gpu_test.h"

static size_t runner_cap(int nr) {
  (void)nr;
  return 8u << 20;
}
#include "coll_runner.h"

enum { MAXN = 4, SENTINEL = 0xEE };

static const p2pkit_dtype_t TYPES[] = {P2PKIT_FLOAT32, P2PKIT_UINT8, P2PKIT_BFLOAT16, P2PKIT_INT64};

/* Elements rank s sends rank d in round k, `scale` a block: every pair and
 * round its own, a quarter of them zero. */
static size_t vcount(int s, int d, int k, size_t scale) {
  if ((s + 2 * d + k) % 4 == 0) return 0;
  return ((size_t)(s * 7 + d * 3 + k * 5) % 11 + 1) * scale;
}

/* Element i of the block s -> d in round k, as a small whole number every
 * type holds exactly (bfloat16 too: below 256). */
static unsigned val(int s, int d, size_t i, int k) {
  return (unsigned)((s * 131 + d * 17 + (int)(i % 1024) * 7 + k * 3) % 251);
}

static void put(void *buf, size_t i, p2pkit_dtype_t dt, unsigned v) {
  switch (dt) {
    case P2PKIT_FLOAT32: ((float *)buf)[i] = (float)v; break;
    case P2PKIT_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case P2PKIT_BFLOAT16: ((uint16_t *)buf)[i] = cu_f2bf((float)v); break;
    default: ((int64_t *)buf)[i] = (int64_t)v - 1000000007LL; break;
  }
}

/* Displacements of one rank's blocks (counts cnt[]): packed in peer
 * order with `gap` elements before every other block. */
static void displs(const size_t *cnt, int n, int odd, size_t *d) {
  size_t at = 0;
  for (int p = 0; p < n; p++) {
    at += (size_t)((p + odd) % 2);
    d[p] = at;
    at += cnt[p];
  }
}

/* Compare `got` (recvbuf read back, `total` elements) with the blocks
 * received from every rank; the gaps must still hold the sentinel. */
static void check_recv(const unsigned char *got, size_t total, const size_t *rc, const size_t *rd,
                       int me, int n, int k, p2pkit_dtype_t dt, const char *what) {
  const size_t es = p2pkit_dtype_size(dt);
  unsigned char one[8], *mark = calloc(total ? total : 1, 1);
  int bad = 0;
  for (int s = 0; s < n && !bad; s++)
    for (size_t i = 0; i < rc[s] && !bad; i++) {
      put(one, 0, dt, val(s, me, i, k));
      mark[rd[s] + i] = 1;
      if (memcmp(got + (rd[s] + i) * es, one, es) != 0) {
        T_FAIL("%s: rank %d, %s: element %zu of the block from rank %d differs", what, me,
               p2pkit_dtype_name(dt), i, s);
        bad = 1;
      }
    }
  for (size_t e = 0; e < total && !bad; e++)
    for (size_t b = 0; b < es && !mark[e]; b++)
      if (got[e * es + b] != SENTINEL) {
        T_FAIL("%s: rank %d, %s: element %zu, between blocks, was written", what, me,
               p2pkit_dtype_name(dt), e);
        bad = 1;
        break;
      }
  free(mark);
}

typedef struct {
  size_t sc[MAXN], sd[MAXN], rc[MAXN], rd[MAXN], stotal, rtotal;
} vplan;

static void plan_round(int me, int n, int k, size_t scale, vplan *P) {
  for (int p = 0; p < n; p++) P->sc[p] = vcount(me, p, k, scale), P->rc[p] = vcount(p, me, k, scale);
  displs(P->sc, n, 0, P->sd);
  displs(P->rc, n, 1, P->rd);
  P->stotal = P->sd[n - 1] + P->sc[n - 1];
  P->rtotal = P->rd[n - 1] + P->rc[n - 1];
}

/* This rank's send buffer of round k on the GPU; the receive buffer full of
 * the sentinel. */
static void stage_round(runner_t *R, const vplan *P, int k, p2pkit_dtype_t dt) {
  const int me = R->rank0, n = R->nr;
  const size_t es = p2pkit_dtype_size(dt);
  unsigned char *h = R->hin[0];
  memset(h, 0, P->stotal * es);
  for (int d = 0; d < n; d++)
    for (size_t i = 0; i < P->sc[d]; i++) put(h, P->sd[d] + i, dt, val(me, d, i, k));
  T_CUDA(cudaMemcpy(R->din[0], h, P->stotal * es, cudaMemcpyHostToDevice));
  T_CUDA(cudaMemset(R->dout[0], SENTINEL, P->rtotal * es + 64));
}

static void finish_round(runner_t *R, const vplan *P, int k, p2pkit_dtype_t dt, const char *what) {
  T_CUDA(cudaStreamSynchronize(R->s[0]));
  p2pkit_status_t as = P2PKIT_SUCCESS;
  CHECK_OK(p2pkit_comm_get_async_error(R->comm[0], &as));
  CHECK_EQ(as, P2PKIT_SUCCESS);
  const size_t es = p2pkit_dtype_size(dt);
  T_CUDA(cudaMemcpy(R->hout[0], R->dout[0], P->rtotal * es, cudaMemcpyDeviceToHost));
  check_recv(R->hout[0], P->rtotal, P->rc, P->rd, R->rank0, R->nr, k, dt, what);
}

/* Rounds 0-2 small, 3 large (tens of thousands of elements a block). */
static void all_to_allv_eager(runner_t *R) {
  for (size_t t = 0; t < sizeof TYPES / sizeof TYPES[0]; t++)
    for (int k = 0; k < 4; k++) {
      vplan P;
      plan_round(R->rank0, R->nr, k, k == 3 ? 9001 : 1 + (size_t)k * 13, &P);
      stage_round(R, &P, k, TYPES[t]);
      CHECK_OK(p2pkit_all_to_allv(R->din[0], P.sc, P.sd, R->dout[0], P.rc, P.rd, TYPES[t],
                                  R->comm[0], R->s[0]));
      finish_round(R, &P, k, TYPES[t], "all_to_allv");
    }
}

/* One all_to_allv captured, replayed twice with new data in the buffers. */
static void all_to_allv_graph(runner_t *R) {
  const p2pkit_dtype_t dt = P2PKIT_FLOAT32;
  vplan P;
  plan_round(R->rank0, R->nr, 1, 300, &P);
  cudaGraph_t g = NULL;
  cudaGraphExec_t ge = NULL;
  T_CUDA(cudaStreamBeginCapture(R->s[0], cudaStreamCaptureModeThreadLocal));
  CHECK_OK(p2pkit_all_to_allv(R->din[0], P.sc, P.sd, R->dout[0], P.rc, P.rd, dt, R->comm[0],
                              R->s[0]));
  T_CUDA(cudaStreamEndCapture(R->s[0], &g));
  T_CUDA(cudaGraphInstantiate(&ge, g, 0));
  for (int rep = 0; rep < 2; rep++) {
    /* Round 1's counts, new values: a different k changes val() only. */
    vplan Q = P;
    stage_round(R, &Q, 5 + rep, dt);
    T_CUDA(cudaGraphLaunch(ge, R->s[0]));
    finish_round(R, &Q, 5 + rep, dt, "all_to_allv (graph replay)");
  }
  if (ge) cudaGraphExecDestroy(ge);
  if (g) cudaGraphDestroy(g);
}

/* gather or scatter of `count` elements per rank from `root`, checked;
 * in place on the root when inplace. */
static void rooted_round(runner_t *R, int gather, int root, size_t count, int inplace,
                         p2pkit_dtype_t dt) {
  const int me = R->rank0, n = R->nr, is_root = me == root;
  const size_t es = p2pkit_dtype_size(dt), whole = count * (size_t)n;
  unsigned char *h = R->hin[0];
  const int src_fill = gather ? 1 : is_root;
  /* gather: rank me's block of `count`; scatter: the root's n blocks. */
  const size_t nsrc = gather ? count : is_root ? whole : 0;
  for (size_t i = 0; i < nsrc; i++)
    put(h, i, dt, gather ? val(me, root, i, 9) : val(root, (int)(i / count), i % count, 9));
  T_CUDA(cudaMemset(R->dout[0], SENTINEL, whole * es + 64));
  char *in = R->din[0], *out = R->dout[0];
  if (inplace && is_root) in = gather ? out + (size_t)me * count * es : out;
  if (inplace && is_root && !gather) out = in + (size_t)me * count * es;
  if (src_fill) T_CUDA(cudaMemcpy(in, h, nsrc * es, cudaMemcpyHostToDevice));
  p2pkit_status_t st = gather ? p2pkit_gather(in, out, count, dt, root, R->comm[0], R->s[0])
                              : p2pkit_scatter(in, out, count, dt, root, R->comm[0], R->s[0]);
  CHECK_OK(st);
  T_CUDA(cudaStreamSynchronize(R->s[0]));
  const size_t nout = gather ? (is_root ? whole : 0) : count;
  if (!nout) return;
  T_CUDA(cudaMemcpy(R->hout[0], out, nout * es, cudaMemcpyDeviceToHost));
  unsigned char one[8];
  for (size_t i = 0; i < nout; i++) {
    put(one, 0, dt, gather ? val((int)(i / count), root, i % count, 9) : val(root, me, i, 9));
    if (memcmp(R->hout[0] + i * es, one, es) != 0) {
      T_FAIL("%s: rank %d, root %d, %s, %s: element %zu differs", gather ? "gather" : "scatter",
             me, root, inplace ? "in place" : "out of place", p2pkit_dtype_name(dt), i);
      return;
    }
  }
}

static void rooted_all(runner_t *R) {
  static const size_t counts[] = {1, 1001, 70001};
  for (int root = 0; root < R->nr; root++)
    for (int gather = 0; gather < 2; gather++)
      for (int inplace = 0; inplace < 2; inplace++)
        for (size_t c = 0; c < 3; c++)
          rooted_round(R, gather, root, counts[c], inplace, c == 1 ? P2PKIT_UINT8 : P2PKIT_FLOAT32);
  CHECK_OK(p2pkit_gather(NULL, NULL, 0, P2PKIT_FLOAT32, 0, R->comm[0], R->s[0]));
  CHECK_OK(p2pkit_scatter(NULL, NULL, 0, P2PKIT_FLOAT32, 0, R->comm[0], R->s[0]));
}

static void suite(runner_t *R) {
  all_to_allv_eager(R);
  all_to_allv_graph(R);
  rooted_all(R);
}

static int child_main(int argc, char **argv) {
  const char *mode = NULL;
  int rank = 0, port = 0, nranks = 0;
  int bad = cu_child_args(argc, argv, &mode, &rank, &port, &nranks);
  if (bad) return bad;
  runner_t R;
  if (runner_join(&R, rank, nranks, port, 60) != 0) return 1;
  suite(&R);
  runner_destroy(&R);
  return t_failed ? 1 : 0;
}

TEST(one_rank) {
  runner_t R;
  if (runner_one_rank(&R, 1) == 0) suite(&R);
  runner_destroy(&R);
}

/* 2, 3 and 4 ranks, one process each, where the GPUs (or sharing them) allow. */
TEST(ranks_2_to_4) {
  int ngpu = 0;
  T_CUDA(cudaGetDeviceCount(&ngpu));
  for (int n = 2; n <= MAXN; n++) {
    if (n > ngpu && !cu_share_gpus()) {
      char what[32];
      snprintf(what, sizeof what, "%d ranks", n);
      printf("SKIP: %s: needs %d GPUs\n", what, n);
      continue;
    }
    int status[MAXN];
    pid_t pid[MAXN];
    printf("%d ranks, one process each\n", n);
    if (cu_spawn_ranks("test_alltoallv_rooted", "vcoll", n, free_port(), 0, 240, status, pid))
      T_FAIL("%d ranks: still running after 240 s: a hang", n);
    for (int r = 0; r < n; r++) runner_expect_clean_exit("vcoll", r, n, status[r]);
  }
}

CU_MAIN({T_CASE(one_rank), 1, CU_GPU1}, {T_CASE(ranks_2_to_4), 1, CU_PROCS})
