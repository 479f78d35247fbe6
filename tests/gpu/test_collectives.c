/* SPDX-License-Identifier: BSD-3-Clause */
/* Broadcast, reduce, all-gather, reduce-scatter, all-to-all and send/recv on
 * real GPUs, checked against a host reference built from every rank's input:
 * every collective x type (x op) at odd counts and every root, in place and
 * out of place, 16-byte-aligned and unaligned pointers, poisoned outputs and
 * guard bytes around them; each protocol forced (LL, chunked one-shot with
 * small chunks, staged); CUDA graph capture and replay; P2P disabled; a
 * rank killed mid-run (survivors time out, P2P and staged); one
 * process driving all GPUs and one process per GPU (children started with
 * fork+exec of this binary); a communicator of one rank. Every GPU takes
 * part (up to P2PK_COLL_MAX_RANKS; the cases that say so use 2);
 * P2PKIT_TEST_NRANKS=k asks for fewer (at least 2). On one GPU only the
 * one-rank cases run, and with P2PKIT_SHARE_GPUS=1 the process-per-GPU ones
 * too. Send/recv runs every shift s = 1..n-1: rank r sends to r + s and
 * receives from r - s (mod n; s = n/2 pairs ranks both ways). Cases can be
 * named on the command line (`quick`, `quick_mp` are small sets for
 * compute-sanitizer). */
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coll/paths/ce/cep.h"
#include "coll/coll.h"
#include "coll/kernels/plan.h"
#include "coll_util.h"
#include "core/log.h"
#include "core/param.h"
#include "gpu_test.h"
#include "nccl/dtype.h"
#include "test.h"
#include "test_net.h"
#include "coll_runner.h"
#include "coll_calls.h"

/* What send/recv straight in did on a communicator (the landing-slot
 * path's record). */
#define STRAIGHT(c) p2pk_cep_straight(c)

#define MAXCOUNT ((size_t)300001)
static const size_t COUNTS[] = {1, 3, 1023, 4097, MAXCOUNT};
#define NCOUNTS (sizeof COUNTS / sizeof COUNTS[0])
static const p2pkit_redop_t ALL_OPS[] = {P2PKIT_SUM, P2PKIT_PROD, P2PKIT_MIN, P2PKIT_MAX, P2PKIT_AVG};


static const variant_t V_AUTO = {"auto", -1, -1, 0, 0, 0};
static const variant_t V_LL = {"ll", P2PK_ALGO_ONESHOT, P2PK_PROTO_LL, 0, 0, 0};
static const variant_t V_SIMPLE = {"simple", P2PK_ALGO_ONESHOT, P2PK_PROTO_SIMPLE, 0, 0, 0};
static const variant_t V_LL128 = {"ll128", P2PK_ALGO_ONESHOT, P2PK_PROTO_LL128, 0, 0, 0};
/* Three blocks of two warps: many passes per warp. */
static const variant_t V_LL128_SMALL = {"ll128-3x64", P2PK_ALGO_ONESHOT, P2PK_PROTO_LL128, 3, 64, 0};
/* Few blocks, small chunks: many mailbox uses per block and per call. */
static const variant_t V_SMALL = {"simple-3x4K", P2PK_ALGO_ONESHOT, P2PK_PROTO_SIMPLE, 3, 128, 4096};
static const variant_t V_STAGED_SMALL = {"staged-2x4K", -1, -1, 2, 128, 4096};
/* Broadcast and reduce in their rooted two-shot form (the default on more
 * than 2 ranks from P2PKIT_ROOTED_TWOSHOT_MIN), forced at every size and
 * rank count; the small one with many steps a block. */
static const variant_t V_TWOSHOT = {"twoshot", P2PK_ALGO_TWOSHOT, P2PK_PROTO_SIMPLE, 0, 0, 0};
static const variant_t V_TWOSHOT_SMALL = {"twoshot-3x4K", P2PK_ALGO_TWOSHOT, P2PK_PROTO_SIMPLE, 3, 128, 4096};

static size_t runner_cap(int nr) {
  return (size_t)nr * MAXCOUNT * 8 + 2 * PAD + 16; /* n shares + the largest misalignment */
}

/* Every type (x op where it applies) x in place / out of place x count x
 * root of `kind` (send/recv: x shift), pointers unaligned every other case. */
static void matrix(runner_t *R, const variant_t *v, int kind, const p2pkit_redop_t *ops, int nops) {
  set_variant(R, v);
  int k = 0, has_op = kind != SENDRECV && p2pk_coll_has_op(kind);
  int roots = kind == SENDRECV ? (R->nr > 1 ? R->nr - 1 : 1) : p2pk_coll_has_root(kind) ? R->nr : 1;
  int inplaces = kind == SENDRECV ? 1 : 2;
  for (int d = 0; d < P2PK_DTYPE_NATIVE_COUNT && R->failures < 8; d++)
    for (int o = 0; o < (has_op ? nops : 1); o++)
      for (int root = 0; root < roots; root++)
        for (int ip = 0; ip < inplaces; ip++)
          for (size_t c = 0; c < NCOUNTS; c++) {
            call_t call = {kind, root, ip, k++ % 2, (p2pkit_dtype_t)d, has_op ? ops[o] : P2PKIT_SUM,
                           COUNTS[c]};
            if (!run_case(R, v->name, &call)) R->failures++;
          }
  set_variant(R, &V_AUTO);
}

static void full_suite(runner_t *R, int staged) {
  static const p2pkit_redop_t few[] = {P2PKIT_SUM, P2PKIT_MIN, P2PKIT_AVG};
  for (int kind = P2PK_COLL_BROADCAST; kind <= SENDRECV; kind++) {
    matrix(R, &V_AUTO, kind, ALL_OPS, 5);
    if (staged) {
      matrix(R, &V_STAGED_SMALL, kind, few, 3);
      continue;
    }
    if (kind != SENDRECV) {
      matrix(R, &V_LL, kind, few, 2);
      matrix(R, &V_LL128, kind, few + 1, 2);
      matrix(R, &V_LL128_SMALL, kind, few, 2);
    }
    matrix(R, &V_SIMPLE, kind, few + 1, 2);
    matrix(R, &V_SMALL, kind, few, 3);
    if (kind == P2PK_COLL_BROADCAST || kind == P2PK_COLL_REDUCE) {
      matrix(R, &V_TWOSHOT, kind, few, 3);
      matrix(R, &V_TWOSHOT_SMALL, kind, few + 1, 2);
    }
  }
}

/* --- graphs ---------------------------------------------------------------------- */

#define NG 6
/* Capture one call of each collective (and a send/recv ring) per rank into
 * one graph, replay it `reps` times with fresh inputs, check every replay. */
static void graph_replay(runner_t *R, int reps) {
  int last = R->nr - 1;
  const call_t ops[NG] = {
      {P2PK_COLL_BROADCAST, last, 0, 1, P2PKIT_FLOAT32, P2PKIT_SUM, 1023},
      {P2PK_COLL_REDUCE, 0, 1, 0, P2PKIT_BFLOAT16, P2PKIT_MAX, 300001},
      {P2PK_COLL_ALL_GATHER, 0, 1, 1, P2PKIT_INT32, P2PKIT_SUM, 4097},
      {P2PK_COLL_REDUCE_SCATTER, 0, 0, 0, P2PKIT_FLOAT32, P2PKIT_AVG, 300001},
      {P2PK_COLL_ALL_TO_ALL, 0, 0, 1, P2PKIT_UINT8, P2PKIT_SUM, 70001},
      {SENDRECV, 0, 0, 0, P2PKIT_FLOAT64, P2PKIT_SUM, 3},
  };
  char *din[NG][MAXR], *dout[NG][MAXR];
  const void *in[NG][MAXR];
  void *out[NG][MAXR];
  size_t off[NG][MAXR];
  cudaGraph_t graph[MAXR];
  cudaGraphExec_t exec[MAXR];
  memset(graph, 0, sizeof graph);
  memset(exec, 0, sizeof exec);
  memset(din, 0, sizeof din);
  memset(dout, 0, sizeof dout);
  for (int k = 0; k < NG; k++)
    for (int l = 0; l < R->nloc; l++) {
      T_CUDA(cudaSetDevice(R->dev[l]));
      T_CUDA(cudaMalloc((void **)&din[k][l], R->cap));
      T_CUDA(cudaMalloc((void **)&dout[k][l], R->cap));
    }
  for (int k = 0; k < NG; k++) prepare(R, dout[k], din[k], &ops[k], 1, in[k], out[k], off[k]);
  for (int l = 0; l < R->nloc; l++) {
    T_CUDA(cudaSetDevice(R->dev[l]));
    T_CUDA(cudaStreamBeginCapture(R->s[l], cudaStreamCaptureModeGlobal));
  }
  for (int k = 0; k < NG; k++) CHECK_OK(issue(R, &ops[k], in[k], out[k]));
  /* End every capture before instantiating any graph (Global mode). */
  for (int l = 0; l < R->nloc; l++) {
    T_CUDA(cudaSetDevice(R->dev[l]));
    T_CUDA(cudaStreamEndCapture(R->s[l], &graph[l]));
  }
  int ready = 1;
  for (int l = 0; l < R->nloc; l++) {
    T_CUDA(cudaSetDevice(R->dev[l]));
    if (graph[l]) T_CUDA(cudaGraphInstantiate(&exec[l], graph[l], 0));
    if (!exec[l]) ready = 0;
  }
  if (!ready) R->failures++;
  for (int rep = 0; ready && rep < reps && R->failures < 8; rep++) {
    for (int k = 0; k < NG; k++)
      prepare(R, dout[k], din[k], &ops[k], 1000 + (uint64_t)rep * 10 + (uint64_t)k * 100, in[k],
              out[k], off[k]);
    for (int l = 0; l < R->nloc; l++) {
      T_CUDA(cudaSetDevice(R->dev[l]));
      if (exec[l]) T_CUDA(cudaGraphLaunch(exec[l], R->s[l]));
    }
    for (int k = 0; k < NG; k++) {
      char what[200], w2[240];
      describe(what, sizeof what, "graph", &ops[k], R->nr);
      snprintf(w2, sizeof w2, "replay %d %s", rep, what);
      /* Inputs of op k were regenerated with its seed: rebuild them host-side. */
      for (int r = 0; r < R->nr; r++)
        cu_fill(R->hin[r], shape_of(&ops[k], R->nr, r).in_elems, ops[k].dt, ops[k].op,
                1000 + (uint64_t)rep * 10 + (uint64_t)k * 100 + (uint64_t)r);
      if (!verify(R, dout[k], w2, &ops[k], off[k])) R->failures++;
    }
  }
  for (int l = 0; l < R->nloc; l++) {
    cudaSetDevice(R->dev[l]);
    if (exec[l]) cudaGraphExecDestroy(exec[l]);
    if (graph[l]) cudaGraphDestroy(graph[l]);
    for (int k = 0; k < NG; k++) {
      cudaFree(din[k][l]);
      cudaFree(dout[k][l]);
    }
  }
}

/* --- argument checks (no launch) ------------------------------------------------ */

static void argument_errors(runner_t *R) {
  p2pkit_comm_t c = R->comm[0];
  cudaStream_t s = R->s[0];
  char *a = R->din[0], *b = R->dout[0];
  CHECK_EQ(p2pkit_broadcast(a, b, 5, P2PKIT_FLOAT32, R->nr, c, s), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "root") != NULL);
  CHECK_EQ(p2pkit_reduce(a, b, 5, P2PKIT_FLOAT32, P2PKIT_SUM, -1, c, s), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pkit_reduce(a, b, 5, P2PKIT_FLOAT32, (p2pkit_redop_t)9, 0, c, s), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pkit_all_gather(a, b, 5, (p2pkit_dtype_t)42, c, s), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pkit_all_gather(a, NULL, 5, P2PKIT_FLOAT32, c, s), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pkit_all_gather(b + 4, b, 5, P2PKIT_FLOAT32, c, s), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "overlap") != NULL);
  CHECK_EQ(p2pkit_reduce_scatter(a + 1, b, 5, P2PKIT_FLOAT32, P2PKIT_SUM, c, s), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "aligned") != NULL);
  CHECK_EQ(p2pkit_all_to_all(R->want, b, 5, P2PKIT_FLOAT32, c, s), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pkit_send(a, 5, P2PKIT_FLOAT32, R->nr, c, s), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pkit_recv(NULL, 5, P2PKIT_FLOAT32, 0, c, s), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pkit_broadcast(a, b, 5, P2PKIT_FLOAT32, 0, NULL, s), P2PKIT_ERR_INVALID_ARGUMENT);
  /* Count 0: a no-op for everyone, also with NULL buffers. */
  CHECK_OK(p2pkit_broadcast(NULL, NULL, 0, P2PKIT_FLOAT32, 0, c, s));
  CHECK_OK(p2pkit_send(NULL, 0, P2PKIT_FLOAT32, 0, c, s));
  /* A group: two sends to one peer, a send to itself without a receive. */
  CHECK_OK(p2pkit_group_start());
  CHECK_OK(p2pkit_send(a, 5, P2PKIT_FLOAT32, 1 % R->nr, c, s));
  CHECK_OK(p2pkit_send(a, 5, P2PKIT_FLOAT32, 1 % R->nr, c, s));
  CHECK_EQ(p2pkit_group_end(), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_OK(p2pkit_group_start());
  CHECK_OK(p2pkit_send(a, 5, P2PKIT_FLOAT32, R->rank0, c, s));
  CHECK_EQ(p2pkit_group_end(), P2PKIT_ERR_INVALID_ARGUMENT);
  /* Send to itself with the matching receive: a local copy. */
  float h[5] = {1, 2, 3, 4, 5}, g[5] = {0};
  T_CUDA(cudaSetDevice(R->dev[0]));
  T_CUDA(cudaMemcpy(a, h, sizeof h, cudaMemcpyHostToDevice));
  CHECK_OK(p2pkit_group_start());
  CHECK_OK(p2pkit_send(a, 5, P2PKIT_FLOAT32, R->rank0, c, s));
  CHECK_OK(p2pkit_recv(b, 5, P2PKIT_FLOAT32, R->rank0, c, s));
  CHECK_OK(p2pkit_group_end());
  T_CUDA(cudaStreamSynchronize(s));
  T_CUDA(cudaMemcpy(g, b, sizeof g, cudaMemcpyDeviceToHost));
  CHECK(memcmp(g, h, sizeof h) == 0);
}

/* --- one process, all GPUs ------------------------------------------------------ */

TEST(one_process_all_collectives) {
  runner_t R;
  if (runner_single(&R, MAXR) == 0) full_suite(&R, 0);
  runner_destroy(&R);
}

/* The whole suite with the launch threads kept awake between calls
 * (launch_pool.c: inside a group each GPU's launches are made by a thread
 * of its own; the suite's uploads and checks between calls would let them
 * fall asleep, and a sleeping thread's launches are the caller's). The log
 * must show launches made by a launch thread. */
TEST(one_process_launch_threads) {
  setenv("P2PKIT_LAUNCH_SPIN_US", "600000000", 1);
  logcap_t L;
  logcap_begin(&L, "P2PKIT_LAUNCH_THREADS", "1");
  runner_t R;
  if (runner_single(&R, MAXR) == 0) {
    matrix(&R, &V_AUTO, P2PK_COLL_ALL_REDUCE, ALL_OPS, 5);
    full_suite(&R, 0);
    graph_replay(&R, 2);
  }
  runner_destroy(&R);
  unsetenv("P2PKIT_LAUNCH_SPIN_US");
  CHECK(logcap_end(&L, "its launches in groups", "made by its launch thread") >= 1);
}

/* The kernel grids the TRACE log shows ("grid N x ...", one line per
 * launch) from its skip-th such line on: the largest N, and *lines how many. */
static int log_max_grid(const logcap_t *L, int skip, int *lines) {
  FILE *f = fopen(L->path, "r");
  CHECK(f != NULL);
  char line[1024];
  int most = 0, k = 0;
  *lines = 0;
  while (f && fgets(line, sizeof line, f)) {
    const char *g = strstr(line, " TRACE ") ? strstr(line, " grid ") : NULL;
    if (!g || k++ < skip) continue;
    int v = atoi(g + 6);
    if (v > most) most = v;
    (*lines)++;
  }
  if (f) fclose(f);
  return most;
}

/* Every collective with each communicator's grid capped at `cap` (set
 * through the API unless it is 0: P2PKIT_MAX_BLOCKS from init), every
 * output checked; the log (TRACE, captured by the caller) shows no kernel
 * over the cap from line *skip on. Then the cap lifted: the largest calls
 * take more blocks, so the check above can fail. *skip moves past it all. */
static void max_blocks_suite(runner_t *R, const logcap_t *L, int cap, int *skip) {
  int lines = 0, most = 0;
  for (int l = 0; l < R->nloc; l++) {
    if (cap) CHECK_OK(p2pkit_comm_set_max_blocks(R->comm[l], cap));
    cap = p2pkit_comm_max_blocks(R->comm[l]);
  }
  CHECK(cap > 0);
  matrix(R, &V_AUTO, P2PK_COLL_ALL_REDUCE, ALL_OPS, 5);
  for (int kind = P2PK_COLL_BROADCAST; kind <= SENDRECV; kind++) matrix(R, &V_AUTO, kind, ALL_OPS, 1);
  graph_replay(R, 2);
  most = log_max_grid(L, *skip, &lines);
  CHECK(lines > 50);
  if (most > cap) T_FAIL("a kernel took %d blocks under a cap of %d", most, cap);
  *skip += lines;
  for (int l = 0; l < R->nloc; l++) CHECK_OK(p2pkit_comm_set_max_blocks(R->comm[l], 0));
  matrix(R, &V_AUTO, P2PK_COLL_ALL_REDUCE, ALL_OPS, 1);
  most = log_max_grid(L, *skip, &lines);
  if (most <= cap) T_FAIL("without the cap the largest grid was %d blocks (cap was %d)", most, cap);
  *skip += lines;
}

/* One process: P2PKIT_MAX_BLOCKS=6 at init caps every collective kernel's
 * grid, p2pkit_comm_set_max_blocks then 2, then none. */
TEST(one_process_max_blocks) {
  logcap_t L;
  logcap_begin(&L, "P2PKIT_MAX_BLOCKS", "6");
  setenv("P2PKIT_DEBUG", "TRACE", 1);
  p2pk_log_reset();
  runner_t R;
  if (runner_single(&R, MAXR) == 0) {
    int skip = 0;
    for (int l = 0; l < R.nloc; l++) CHECK_EQ(p2pkit_comm_max_blocks(R.comm[l]), 6);
    max_blocks_suite(&R, &L, 0, &skip);
    max_blocks_suite(&R, &L, 2, &skip);
  }
  runner_destroy(&R);
  CHECK(logcap_end(&L, "collective kernels take at most", "blocks") >= 2);
}

TEST(one_process_graph_replay) {
  runner_t R;
  if (runner_single(&R, MAXR) == 0) graph_replay(&R, 5);
  runner_destroy(&R);
}

/* Under a graph a broadcast root out of place copies its own buffer by copy
 * engine beside the kernel (from P2PKIT_BCAST_SELF_CE, 8 MiB by default; 1
 * byte here, so the replayed graph's broadcast takes it): every replay
 * checked, and the INFO line says the path ran. */
TEST(one_process_graph_broadcast_own_copy) {
  logcap_t L;
  logcap_begin(&L, "P2PKIT_BCAST_SELF_CE", "1");
  runner_t R;
  if (runner_single(&R, MAXR) == 0) graph_replay(&R, 3);
  runner_destroy(&R);
  CHECK(logcap_end(&L, "under a CUDA graph: its own copy by copy engine", "beside the kernel") >= 1);
}

TEST(one_process_p2p_disabled) {
  setenv("P2PKIT_P2P_DISABLE", "1", 1);
  p2pk_param_reset();
  runner_t R;
  if (runner_single(&R, MAXR) == 0) {
    CHECK(R.comm[0]->staged);
    full_suite(&R, 1);
    graph_replay(&R, 3);
  }
  runner_destroy(&R);
  unsetenv("P2PKIT_P2P_DISABLE");
  p2pk_param_reset();
}

/* One process: a send whose receive is in the same group goes through the
 * copy engine from P2PKIT_SENDRECV_CE_MIN on (here every size), ordered by
 * events; the INFO log says so, and every shift, type and count checks out,
 * also next to kernel send/recv of other sizes and under graph capture
 * (where it goes through the landing slots, path_ce_slots.c). */
TEST(one_process_sendrecv_copy_engine) {
  logcap_t L;
  logcap_begin(&L, "P2PKIT_SENDRECV_CE_MIN", "1");
  runner_t R;
  int nr = 2;
  if (runner_single(&R, MAXR) == 0) {
    nr = R.nr;
    matrix(&R, &V_AUTO, SENDRECV, ALL_OPS, 1);
    graph_replay(&R, 2);
  }
  runner_destroy(&R);
  CHECK(logcap_capture_ce(&L, nr, "send/recv of", "captured in a CUDA graph (one process") >= 1);
  CHECK(logcap_capture_ce(&L, nr, "send/recv of", "pushes straight into the peers' outputs") >= 1);
  CHECK(logcap_end(&L, "send/recv", "uses the copy engine") >= 1);
}

/* Two broadcasts and an all-reduce per rank in one group, in that order on
 * every rank: each broadcast is queued, so the all-reduce must launch after
 * the first two and the second broadcast's round must match its own calls.
 * Float inputs with small integers: exact sums. */
static void bcast_group_order(runner_t *R) {
  const size_t cnt = (256u << 10) + 5; /* floats: over 1 MiB, past the threshold set below */
  if (R->nr < 2 || cnt * 4 * 3 > R->cap) {
    T_FAIL("bcast_group_order: needs 2 ranks and %zu bytes per buffer", cnt * 12);
    return;
  }
  float *h = malloc(cnt * 4);
  CHECK(h != NULL);
  if (!h) return;
  for (int l = 0; l < R->nloc; l++) {
    int g = R->rank0 + l;
    for (size_t i = 0; i < cnt; i++) h[i] = (float)((i * 7 + (size_t)g * 3) % 64);
    T_CUDA(cudaSetDevice(R->dev[l]));
    T_CUDA(cudaMemcpy(R->din[l], h, cnt * 4, cudaMemcpyHostToDevice));
    T_CUDA(cudaMemset(R->dout[l], 0xA5, cnt * 4 * 3));
    T_CUDA(cudaDeviceSynchronize());
  }
  CHECK_OK(p2pkit_group_start());
  for (int l = 0; l < R->nloc; l++) {
    float *in = (float *)R->din[l], *out = (float *)R->dout[l];
    /* A: root 0, out of place into out[0..cnt); B: the last rank, in place
     * in out[cnt..2cnt) (its input copied there first, on its stream). */
    int last = R->nr - 1, g = R->rank0 + l;
    T_CUDA(cudaSetDevice(R->dev[l]));
    if (g == last) T_CUDA(cudaMemcpyAsync(out + cnt, in, cnt * 4, cudaMemcpyDeviceToDevice, R->s[l]));
    CHECK_OK(p2pkit_broadcast(in, out, cnt, P2PKIT_FLOAT32, 0, R->comm[l], R->s[l]));
    CHECK_OK(p2pkit_broadcast(out + cnt, out + cnt, cnt, P2PKIT_FLOAT32, last, R->comm[l], R->s[l]));
    CHECK_OK(p2pkit_all_reduce(in, out + 2 * cnt, cnt, P2PKIT_FLOAT32, P2PKIT_SUM, R->comm[l], R->s[l]));
  }
  CHECK_OK(p2pkit_group_end());
  for (int l = 0; l < R->nloc; l++) {
    T_CUDA(cudaSetDevice(R->dev[l]));
    T_CUDA(cudaStreamSynchronize(R->s[l]));
    float *o = malloc(cnt * 4 * 3);
    CHECK(o != NULL);
    if (!o) break;
    T_CUDA(cudaMemcpy(o, R->dout[l], cnt * 4 * 3, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; i < cnt; i++) {
      float a = (float)((i * 7) % 64), b = (float)((i * 7 + (size_t)(R->nr - 1) * 3) % 64), sum = 0;
      for (int r = 0; r < R->nr; r++) sum += (float)((i * 7 + (size_t)r * 3) % 64);
      if (o[i] != a || o[cnt + i] != b || o[2 * cnt + i] != sum) bad++;
    }
    if (bad) T_FAIL("bcast_group_order: rank %d: %zu of %zu elements wrong", R->rank0 + l, bad, cnt);
    free(o);
  }
  free(h);
}

TEST(one_process_broadcast_copy_engine) {
  /* Every broadcast of 1 KiB or more in a group goes over the copy engine:
   * the broadcast matrix (types, roots, in and out of place, odd counts,
   * unaligned pointers), graph replay (under capture straight into the
   * peers' outputs, flags between the graphs), two broadcasts and an
   * all-reduce in one group; the log shows the copy engine was used. */
  logcap_t L;
  logcap_begin(&L, "P2PKIT_BCAST_CE_MIN", "1K");
  runner_t R;
  int nr = 2;
  if (runner_single(&R, MAXR) == 0) {
    nr = R.nr;
    matrix(&R, &V_AUTO, P2PK_COLL_BROADCAST, ALL_OPS, 1);
    graph_replay(&R, 2);
    bcast_group_order(&R);
  }
  runner_destroy(&R);
  CHECK(logcap_capture_ce(&L, nr, "broadcast of", "pushes straight into the peers' outputs") >= 1);
  CHECK(logcap_end(&L, "broadcast of", "uses the copy engine") >= 1);
}

/* Collectives (every kind, send/recv too) back to back on one
 * communicator, at three counts, roots, places and types. */
static void mixed_calls(runner_t *R, const char *name) {
  static const size_t counts[] = {5, 70001, 300001};
  for (int i = 0; i < 12 && R->failures < 4; i++) {
    call_t k = {i % (SENDRECV + 1), i % R->nr, i % 2, (i / 2) % 2, (p2pkit_dtype_t)(i % P2PK_DTYPE_NATIVE_COUNT),
                ALL_OPS[i % 5], counts[i % 3]};
    if (k.kind == SENDRECV) k.inplace = 0;
    if (!run_case(R, name, &k)) R->failures++;
  }
}

TEST(one_process_copy_engine_collectives) {
  /* Reduce-scatters, reduces, all-gathers and all-to-alls over P2P in a
   * group with the copy engines moving every byte (ce_settings_begin: 64
   * KiB chunks, 2 in flight): every type, op, root and count, in and out
   * of place (all-to-all in place takes the kernel), unaligned; graph
   * replay takes the landing slots (path_ce_slots.c) for the reduce and
   * reduce-scatter, straight into the peers' outputs for all-gather and
   * all-to-all, the kernels for the rest; all of them mixed with the kernels'
   * collectives. The log shows the copy engines were used for each. */
  static const char *const vars[] = {"P2PKIT_CE_ALL_GATHER_MIN", "P2PKIT_CE_ALLREDUCE_MIN",
                                     "P2PKIT_CE_REDUCE_MIN", "P2PKIT_CE_ALL_TO_ALL_MIN"};
  ce_settings_begin(vars, 4);
  logcap_t L;
  logcap_begin(&L, "P2PKIT_CE_REDUCE_SCATTER_MIN", "1");
  runner_t R;
  int nr = 2;
  if (runner_single(&R, MAXR) == 0) {
    nr = R.nr;
    matrix(&R, &V_AUTO, P2PK_COLL_REDUCE_SCATTER, ALL_OPS, 5);
    matrix(&R, &V_AUTO, P2PK_COLL_ALL_GATHER, ALL_OPS, 1);
    matrix(&R, &V_AUTO, P2PK_COLL_REDUCE, ALL_OPS, 5);
    /* All-to-all: out of place by the copy engines, in place by the kernel. */
    matrix(&R, &V_AUTO, P2PK_COLL_ALL_TO_ALL, ALL_OPS, 1);
    graph_replay(&R, 2);
    mixed_calls(&R, "mixed-ce");
  }
  runner_destroy(&R);
  ce_settings_end(vars, 4);
  CHECK(logcap_count(&L, "all_to_all of", "uses the copy engines over P2P") >= 1);
  CHECK(logcap_capture_ce(&L, nr, "all_to_all of", "pushes straight into the peers' outputs") >= 1);
  CHECK(logcap_capture_ce(&L, nr, "): reduce of", "captured in a CUDA graph (one process") >= 1);
  CHECK(logcap_capture_ce(&L, nr, "reduce_scatter of", "captured in a CUDA graph (one process") >= 1);
  CHECK(logcap_count(&L, "): reduce of", "uses the copy engines over P2P") >= 1);
  CHECK(logcap_count(&L, "all_gather of", "uses the copy engines over P2P") >= 1);
  CHECK(logcap_capture_ce(&L, nr, "all_gather of", "pushes straight into the peers' outputs") >= 1);
  CHECK(logcap_end(&L, "reduce_scatter of", "uses the copy engines over P2P") >= 1);
}

/* Copy-engine reduces, reduce-scatters and all-reduces of one process back
 * to back with no host sync between them, so a call's first copies run
 * beside the last call's reduces (chunks numbered across calls, path_ce_events.c),
 * including calls whose chunk size differs from the last one's
 * (P2PKIT_CE_CHUNK is read per call: the slots' layout changes). Inputs and
 * poisoned outputs are uploaded first; every output is checked after one
 * sync at the end. */
typedef struct {
  call_t k;
  const char *chunk;
} b2b_t;
static const b2b_t B2B[] = {
    {{P2PK_COLL_REDUCE, 0, 0, 0, P2PKIT_FLOAT32, P2PKIT_SUM, 300001}, "64K"},
    {{P2PK_COLL_REDUCE, 1, 0, 1, P2PKIT_FLOAT32, P2PKIT_SUM, 300001}, "64K"},
    {{P2PK_COLL_ALL_REDUCE, 0, 0, 0, P2PKIT_BFLOAT16, P2PKIT_MAX, 500003}, "40K"},
    {{P2PK_COLL_REDUCE_SCATTER, 0, 0, 1, P2PKIT_INT32, P2PKIT_SUM, 200001}, "40K"},
    {{P2PK_COLL_ALL_REDUCE, 0, 1, 0, P2PKIT_FLOAT64, P2PKIT_AVG, 150001}, "256K"},
    {{P2PK_COLL_REDUCE, 0, 0, 1, P2PKIT_INT64, P2PKIT_MIN, 100003}, "64K"},
    {{P2PK_COLL_REDUCE, 1, 1, 0, P2PKIT_FLOAT32, P2PKIT_PROD, 300001}, "64K"},
    {{P2PK_COLL_ALL_REDUCE, 0, 0, 1, P2PKIT_FLOAT16, P2PKIT_SUM, 77777}, "64K"},
    {{P2PK_COLL_REDUCE_SCATTER, 0, 1, 0, P2PKIT_UINT8, P2PKIT_MAX, 65537}, "64K"},
};
#define NB2B (sizeof B2B / sizeof B2B[0])

static void back_to_back(runner_t *R) {
  const int n = R->nr;
  char *dbuf[NB2B][MAXR];
  void *hin[NB2B][MAXR];
  size_t bytes[NB2B], off[NB2B][MAXR];
  const void *in[NB2B][MAXR];
  void *out[NB2B][MAXR];
  /* Upload every call's input, poison its output. */
  for (size_t i = 0; i < NB2B; i++) {
    const call_t *k = &B2B[i].k;
    const size_t es = p2pkit_dtype_size(k->dt);
    bytes[i] = (size_t)n * k->count * es + 2 * PAD + 16;
    for (int r = 0; r < n; r++) {
      shape_t sh = shape_of(k, n, r);
      hin[i][r] = malloc(sh.in_elems * es);
      CHECK(hin[i][r] != NULL);
      cu_fill(hin[i][r], sh.in_elems, k->dt, k->op, 1000 * i + (uint64_t)r);
    }
    for (int l = 0; l < R->nloc; l++) {
      const int g = R->rank0 + l;
      shape_t sh = shape_of(k, n, g);
      T_CUDA(cudaSetDevice(R->dev[l]));
      T_CUDA(cudaMalloc((void **)&dbuf[i][l], 2 * bytes[i]));
      T_CUDA(cudaMemset(dbuf[i][l], 0xA5, 2 * bytes[i]));
      off[i][l] = misalign_of(g, es, k->misalign);
      char *base = dbuf[i][l] + PAD + off[i][l];
      out[i][l] = base + sh.out_at * es;
      in[i][l] = k->inplace ? base + sh.in_at * es : dbuf[i][l] + bytes[i] + PAD + off[i][l];
      T_CUDA(cudaMemcpy((void *)in[i][l], hin[i][g], sh.in_elems * es, cudaMemcpyHostToDevice));
    }
  }
  for (int l = 0; l < R->nloc; l++) {
    T_CUDA(cudaSetDevice(R->dev[l]));
    T_CUDA(cudaDeviceSynchronize());
  }
  /* Every call, no sync between them. */
  int issued = 1;
  for (size_t i = 0; i < NB2B && issued; i++) {
    setenv("P2PKIT_CE_CHUNK", B2B[i].chunk, 1);
    p2pkit_status_t st = issue(R, &B2B[i].k, in[i], out[i]);
    if (st != P2PKIT_SUCCESS) {
      T_FAIL("back to back call %zu: %s: %s", i, p2pkit_strerror(st), p2pkit_last_error());
      issued = 0;
    }
  }
  setenv("P2PKIT_CE_CHUNK", "64K", 1);
  /* Then every output (verify syncs each stream first). */
  for (size_t i = 0; i < NB2B && issued; i++) {
    const call_t *k = &B2B[i].k;
    char what[200];
    describe(what, sizeof what, "back-to-back", k, n);
    void *saved[MAXR];
    for (int r = 0; r < n; r++) saved[r] = R->hin[r], R->hin[r] = hin[i][r];
    unsigned char *hout[MAXR];
    for (int l = 0; l < R->nloc; l++) {
      hout[l] = R->hout[l];
      R->hout[l] = malloc(2 * bytes[i]);
      CHECK(R->hout[l] != NULL);
    }
    if (!verify(R, dbuf[i], what, k, off[i])) R->failures++;
    for (int l = 0; l < R->nloc; l++) free(R->hout[l]), R->hout[l] = hout[l];
    for (int r = 0; r < n; r++) R->hin[r] = saved[r];
  }
  for (size_t i = 0; i < NB2B; i++) {
    for (int r = 0; r < n; r++) free(hin[i][r]);
    for (int l = 0; l < R->nloc; l++) {
      T_CUDA(cudaSetDevice(R->dev[l]));
      T_CUDA(cudaFree(dbuf[i][l]));
    }
  }
}

TEST(one_process_copy_engine_back_to_back) {
  static const char *const vars[] = {"P2PKIT_CE_ALLREDUCE_MIN", "P2PKIT_CE_REDUCE_SCATTER_MIN"};
  ce_settings_begin(vars, 2);
  logcap_t L;
  logcap_begin(&L, "P2PKIT_CE_REDUCE_MIN", "1");
  runner_t R;
  if (runner_single(&R, MAXR) == 0) {
    back_to_back(&R);
    back_to_back(&R);
  }
  runner_destroy(&R);
  ce_settings_end(vars, 2);
  CHECK(logcap_count(&L, "): reduce of", "uses the copy engines over P2P") >= 1);
  CHECK(logcap_count(&L, "all_reduce of", "uses the copy engines over P2P") >= 1);
  CHECK(logcap_end(&L, "reduce_scatter of", "uses the copy engines over P2P") >= 1);
}

TEST(mixed_with_all_reduce) {
  /* Collectives, send/recv and all-reduce back to back on one communicator:
   * sequence numbers, LL slots and mailbox counters stay in step. */
  runner_t R;
  if (runner_single(&R, MAXR) == 0) mixed_calls(&R, "mixed");
  runner_destroy(&R);
}

TEST(argument_checks) {
  runner_t R;
  if (runner_single(&R, 2) == 0) argument_errors(&R);
  runner_destroy(&R);
}

TEST(quick) {
  runner_t R;
  if (runner_single(&R, 2) == 0)
    for (int kind = P2PK_COLL_BROADCAST; kind <= SENDRECV; kind++) {
      call_t k = {kind, 1, 0, 1, P2PKIT_FLOAT32, P2PKIT_SUM, 4097};
      CHECK(run_case(&R, "quick", &k));
      k.count = 3;
      CHECK(run_case(&R, "quick", &k));
    }
  runner_destroy(&R);
}

/* --- one process per GPU -------------------------------------------------------- */

/* One child per rank (cu_test_nranks) running `mode`; each must end cleanly. */
static void spawn_ranks(const char *mode, int p2p_disable, int limit_s) {
  int status[MAXR];
  pid_t pid[MAXR];
  int n = runner_spawn("test_collectives", mode, p2p_disable, limit_s, status, pid);
  for (int r = 0; r < n; r++) runner_expect_clean_exit(mode, r, n, status[r]);
}

TEST(process_per_gpu) { spawn_ranks("check", 0, 580); }

TEST(process_per_gpu_p2p_disabled) { spawn_ranks("check", 1, 580); }

TEST(quick_mp) { spawn_ranks("quick", 0, 300); }

/* Process per GPU: every collective with the grid capped (P2PKIT_MAX_BLOCKS
 * at init, then p2pkit_comm_set_max_blocks on each rank), as in
 * one_process_max_blocks. */
TEST(process_per_gpu_max_blocks) { spawn_ranks("max-blocks", 0, 300); }

/* Reduce-scatter, reduce, broadcast and send/recv over P2P with one process
 * per GPU and the copy engines moving every byte through the landing slots
 * (the children set each threshold to 1 byte, 64 KiB chunks, 2 in flight):
 * every type, op, root and count, in and out of place, unaligned; graph
 * replay (the same paths under capture: their slot flags are replay-safe;
 * all-gather and all-to-all take the kernels); every collective mixed. The
 * log shows each went over the copy engines, also under capture. */
TEST(process_per_gpu_copy_engine_p2p) { spawn_ranks("cep", 0, 580); }
/* The same with the posts to the peers as one-thread kernels
 * (P2PKIT_CEP_MEMOPS=0), the path taken where stream memory operations are
 * not available, and every call's timeline traced (P2PKIT_CEP_TRACE=1: the
 * log holds the send/recv and broadcast ones; without the setting, none). */
TEST(process_per_gpu_copy_engine_p2p_kernel_posts) { spawn_ranks("cep-kernel-posts", 0, 580); }

/* Send/recv over the copy engines with a process per GPU, the receive
 * buffers registered: a call goes straight into the receive buffer when
 * the sender hears of it in time (the default 2 ms; then 10 s, which the
 * ranks' drift between calls, their host-side checks, never reaches: every
 * call straight in; 2 ms was seen to be too short on 2x H200),
 * else through the landing slots (64 KiB slots, so most calls have many
 * chunks). Every type and count, unaligned; a receiver 0.5 ms late (its
 * sender waits and goes straight in); a sender 3 ms late to a receiver
 * that does not wait (the receiver chooses the slots, and the sender
 * follows); no waiting anywhere (either way, as the hosts race);
 * all-to-all (out of place straight in, in place through the slots);
 * all-gather (straight in, in place too); under a CUDA graph; mixed with
 * every collective; after deregistering, through the slots only. Every
 * output checked; the counts say which ways ran. */
TEST(process_per_gpu_sendrecv_straight_in) { spawn_ranks("cep-direct", 0, 580); }

/* This rank's host wait for its peers, on the communicator (the setting
 * is read once, at init: p2pk_cep_settings, so a change of the forced
 * settings does not undo a wait set here). */
static void set_wait(struct p2pkit_comm *c, uint64_t us) {
  STRAIGHT(c)->wait_ns = us * 1000u;
  for (int p = 0; p < P2PK_COLL_MAX_RANKS; p++) STRAIGHT(c)->rest[p] = STRAIGHT(c)->rrest[p] = 0;
}

static void no_waiting(struct p2pkit_comm *c) { set_wait(c, 0); }

/* A registered receive of N floats against a send of N + 16: the sender
 * goes through the slots (the description's size differs), never writing
 * past the N floats described; the receiver's header check fails the call;
 * both ranks have the error within the timeout, and the bytes after the N
 * floats are as they were poisoned (the N floats of a failed receive are
 * undefined: its copies out still run, from whatever the slots hold). */
TEST(process_per_gpu_sendrecv_straight_in_mismatch) { spawn_ranks("cep-direct-mismatch", 0, 120); }

#define MM_TIMEOUT_S 4
static void straight_in_mismatch(runner_t *R) {
  struct p2pkit_comm *c = R->comm[0];
  const size_t n = 100000;
  void *h = NULL;
  CHECK_OK(p2pkit_comm_register(c, R->dout[0], R->cap, &h));
  set_wait(c, 10000000); /* the sender sees the description */
  T_CUDA(cudaMemset(R->dout[0], 0xA5, R->cap));
  T_CUDA(cudaMemset(R->din[0], 0x11, R->cap));
  T_CUDA(cudaDeviceSynchronize());
  const double t0 = cu_now();
  if (c->rank == 0) CHECK_OK(p2pkit_send(R->din[0], n + 16, P2PKIT_FLOAT32, 1, c, R->s[0]));
  if (c->rank == 1) CHECK_OK(p2pkit_recv(R->dout[0], n, P2PKIT_FLOAT32, 0, c, R->s[0]));
  T_CUDA(cudaStreamSynchronize(R->s[0]));
  p2pkit_status_t as = P2PKIT_SUCCESS;
  CHECK_OK(p2pkit_comm_get_async_error(c, &as));
  if (c->rank == 0) {
    /* The sender's copies need nothing from the receiver, so its stream may
     * finish before the receiver's header check fails the call (seen in 3
     * of 9 tries on 2x H200). The receiver tells it (the abort word): its
     * next call must fail at once, well within the timeout, not wait for
     * the receiver (note_abort: without it that kernel would exit silently
     * and the call "succeed"). */
    p2pkit_status_t st =
        p2pkit_all_reduce(R->din[0], R->din[0], 8, P2PKIT_FLOAT32, P2PKIT_SUM, c, R->s[0]);
    T_CUDA(cudaStreamSynchronize(R->s[0]));
    if (st == P2PKIT_SUCCESS) CHECK_OK(p2pkit_comm_get_async_error(c, &as));
    else as = st;
  }
  printf("rank %d: %s after %.2f s (%s)\n", c->rank, p2pkit_strerror(as), cu_now() - t0,
         p2pkit_last_error());
  /* Ranks past 1 take no part: nothing fails for them. */
  CHECK(c->rank > 1 ? as == P2PKIT_SUCCESS : as != P2PKIT_SUCCESS);
  CHECK(cu_now() - t0 < MM_TIMEOUT_S);
  CHECK_EQ(STRAIGHT(c)->direct, 0);
  if (c->rank == 1) {
    unsigned char back[4096];
    T_CUDA(cudaMemcpy(back, R->dout[0] + n * sizeof(float), sizeof back, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; i < sizeof back; i++) bad += back[i] != 0xA5;
    CHECK_EQ(bad, 0);
  }
  p2pkit_comm_deregister(c, h);
}

/* One send/recv into R->dout (registered, or mapped on demand) captured in a CUDA graph
 * (decided once, at capture), replayed `reps` times with fresh inputs. */
static void graph_straight_in(runner_t *R, int reps) {
  const call_t k = {SENDRECV, 0, 0, 1, P2PKIT_FLOAT32, P2PKIT_SUM, 300001};
  const void *in[MAXR];
  void *out[MAXR];
  size_t off[MAXR];
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  prepare(R, R->dout, R->din, &k, 5, in, out, off);
  T_CUDA(cudaSetDevice(R->dev[0]));
  T_CUDA(cudaStreamBeginCapture(R->s[0], cudaStreamCaptureModeGlobal));
  CHECK_OK(issue(R, &k, in, out));
  T_CUDA(cudaStreamEndCapture(R->s[0], &graph));
  if (graph) T_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(exec != NULL);
  for (int rep = 0; exec && rep < reps; rep++) {
    char what[64];
    snprintf(what, sizeof what, "straight-in send/recv graph replay %d", rep);
    prepare(R, R->dout, R->din, &k, 50 + (uint64_t)rep, in, out, off);
    T_CUDA(cudaGraphLaunch(exec, R->s[0]));
    if (!verify(R, R->dout, what, &k, off)) R->failures++;
  }
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
}

/* All-to-all and all-gather into R->dout, registered or mapped on demand
 * (the hosts waiting long enough): blocks straight in, counted. */
static void blocks_straight_in(runner_t *R) {
  struct p2pkit_comm *c = R->comm[0];
  /* All-to-all: out of place each block goes straight in, in place through
   * the slots. */
  const uint64_t a0 = STRAIGHT(c)->direct, a1 = STRAIGHT(c)->slots;
  matrix(R, &V_AUTO, P2PK_COLL_ALL_TO_ALL, ALL_OPS, 1);
  printf("rank %d, all-to-all: blocks straight in %llu, through the slots %llu (so far by why: "
         "not asked %llu, late %llu, overwritten %llu, not registered %llu, size %llu, not mapped "
         "%llu, receiver first %llu; calls numbered: sent %llu, received %llu)\n", c->rank,
         (unsigned long long)(STRAIGHT(c)->direct - a0), (unsigned long long)(STRAIGHT(c)->slots - a1),
         (unsigned long long)STRAIGHT(c)->why[0], (unsigned long long)STRAIGHT(c)->why[1],
         (unsigned long long)STRAIGHT(c)->why[2], (unsigned long long)STRAIGHT(c)->why[3],
         (unsigned long long)STRAIGHT(c)->why[4], (unsigned long long)STRAIGHT(c)->why[5],
         (unsigned long long)STRAIGHT(c)->why[6], (unsigned long long)STRAIGHT(c)->sent[1 - c->rank],
         (unsigned long long)STRAIGHT(c)->recvd[1 - c->rank]);
  CHECK(STRAIGHT(c)->direct > a0);
  CHECK(STRAIGHT(c)->slots > a1);
  /* All-gather: every block straight in, in place too (no rank's output
   * block is one it sends). */
  const uint64_t g0 = STRAIGHT(c)->direct, g1 = STRAIGHT(c)->slots;
  matrix(R, &V_AUTO, P2PK_COLL_ALL_GATHER, ALL_OPS, 1);
  printf("rank %d, all-gather: blocks straight in %llu, through the slots %llu\n", c->rank,
         (unsigned long long)(STRAIGHT(c)->direct - g0), (unsigned long long)(STRAIGHT(c)->slots - g1));
  CHECK(STRAIGHT(c)->direct > g0);
  CHECK_EQ(STRAIGHT(c)->slots, g1);
}

static void straight_in_suite(runner_t *R) {
  struct p2pkit_comm *c = R->comm[0];
  const uint64_t wait = STRAIGHT(c)->wait_ns;
  void *h = NULL;
  CHECK_OK(p2pkit_comm_register(c, R->dout[0], R->cap, &h));
  matrix(R, &V_AUTO, SENDRECV, ALL_OPS, 1);
  printf("rank %d: straight in %llu, through the slots %llu (waiting up to %llu us; the longest "
         "host wait %.3f ms, %llu in vain)\n", c->rank, (unsigned long long)STRAIGHT(c)->direct,
         (unsigned long long)STRAIGHT(c)->slots, (unsigned long long)(wait / 1000),
         STRAIGHT(c)->wait_max_ns / 1e6, (unsigned long long)STRAIGHT(c)->missed);
  /* With a wait no host drift here reaches (10 s), every call goes
   * straight in. */
  set_wait(c, 10000000);
  STRAIGHT(c)->wait_max_ns = 0;
  const uint64_t m0 = STRAIGHT(c)->slots, m1 = STRAIGHT(c)->direct, m2 = STRAIGHT(c)->rhow[1];
  matrix(R, &V_AUTO, SENDRECV, ALL_OPS, 1);
  printf("rank %d, waiting up to 10 s: straight in %llu, through the slots %llu; the longest "
         "host wait %.3f ms\n", c->rank, (unsigned long long)(STRAIGHT(c)->direct - m1),
         (unsigned long long)(STRAIGHT(c)->slots - m0), STRAIGHT(c)->wait_max_ns / 1e6);
  CHECK_EQ(STRAIGHT(c)->slots, m0);
  CHECK(STRAIGHT(c)->direct > m1);
  CHECK_EQ(STRAIGHT(c)->rhow[1] - m2, STRAIGHT(c)->direct - m1); /* 2 ranks: one send, one receive a call */
  blocks_straight_in(R);
  /* The receiver (rank 1) 0.5 ms late: rank 0's sends wait for it (still
   * up to 10 s). */
  uint64_t d0 = STRAIGHT(c)->direct;
  for (int it = 0; it < 4; it++) {
    if (c->rank == 1) usleep(500);
    const call_t k = {SENDRECV, 0, 0, it % 2, P2PKIT_FLOAT32, P2PKIT_SUM, 300001 + (size_t)it};
    CHECK(run_case(R, "receiver late", &k));
  }
  if (c->rank == 0) CHECK_EQ(STRAIGHT(c)->direct - d0, 4);
  /* The sender (rank 0) 3 ms late, rank 1 not waiting: rank 1's receives
   * choose the slots, and rank 0's sends take them although described. */
  const uint64_t r0 = STRAIGHT(c)->rhow[0], s0 = STRAIGHT(c)->slots;
  if (c->rank == 1) no_waiting(c);
  for (int it = 0; it < 4; it++) {
    if (c->rank == 0) usleep(3000);
    const call_t k = {SENDRECV, 0, 0, it % 2, P2PKIT_FLOAT32, P2PKIT_SUM, 300001 + (size_t)it};
    CHECK(run_case(R, "sender late", &k));
  }
  if (c->rank == 1) CHECK_EQ(STRAIGHT(c)->rhow[0] - r0, 4);
  if (c->rank == 0) CHECK_EQ(STRAIGHT(c)->slots - s0, 4);
  /* No waiting anywhere. */
  no_waiting(c);
  d0 = STRAIGHT(c)->direct;
  const uint64_t s1 = STRAIGHT(c)->slots;
  matrix(R, &V_AUTO, SENDRECV, ALL_OPS, 1);
  printf("rank %d, no waiting: straight in %llu, through the slots %llu\n", c->rank,
         (unsigned long long)(STRAIGHT(c)->direct - d0), (unsigned long long)(STRAIGHT(c)->slots - s1));
  /* Under a CUDA graph: decided once, at capture (waiting up to 10 s), and
   * replayed as it is; more than 2 ranks take the kernels there
   * (p2pk_ce_waits_ok), so nothing goes straight in. */
  const uint64_t cap_in = c->nranks == 2 ? 1 : 0;
  set_wait(c, 10000000);
  d0 = STRAIGHT(c)->direct;
  graph_straight_in(R, 3);
  CHECK_EQ(STRAIGHT(c)->direct - d0, cap_in);
  graph_replay(R, 2); /* its own, unregistered buffers: the slots */
  CHECK_EQ(STRAIGHT(c)->direct - d0, cap_in);
  mixed_calls(R, "mixed-straight-in");
  CHECK_OK(p2pkit_comm_deregister(c, h));
  const uint64_t d2 = STRAIGHT(c)->direct, s2 = STRAIGHT(c)->slots;
  matrix(R, &V_AUTO, SENDRECV, ALL_OPS, 1);
  CHECK_EQ(STRAIGHT(c)->direct, d2);
  CHECK(STRAIGHT(c)->slots > s2);
  STRAIGHT(c)->wait_ns = wait;
}

/* P2PKIT_SENDRECV_MAP: send/recv with a process per GPU into receive
 * buffers that are not registered, over the copy engines (64 KiB slots):
 * with the hosts waiting long enough (10 s) every call goes straight in,
 * the sender mapping the receiver's allocation once (one mapping for
 * R->dout, a second for another allocation); all-to-all out of place and
 * all-gather straight in too; under a CUDA graph; registering and
 * deregistering a mapped buffer leaves the mapping working (CUDA counts
 * the opens of one handle); with the setting off, through the slots.
 * Every output checked. */
TEST(process_per_gpu_sendrecv_map) { spawn_ranks("cep-map", 0, 580); }

static void sendrecv_into(runner_t *R, char **outs, const char *what, uint64_t seed) {
  const call_t k = {SENDRECV, 0, 0, 1, P2PKIT_FLOAT32, P2PKIT_SUM, 300001};
  const void *in[MAXR];
  void *out[MAXR];
  size_t off[MAXR];
  prepare(R, outs, R->din, &k, seed, in, out, off);
  CHECK_OK(issue(R, &k, in, out));
  if (!verify(R, outs, what, &k, off)) R->failures++;
}

static void map_suite(runner_t *R) {
  struct p2pkit_comm *c = R->comm[0];
  const uint64_t wait = STRAIGHT(c)->wait_ns;
  set_wait(c, 10000000);
  uint64_t d0 = STRAIGHT(c)->direct, s0 = STRAIGHT(c)->slots, m0 = STRAIGHT(c)->mapped;
  matrix(R, &V_AUTO, SENDRECV, ALL_OPS, 1);
  printf("rank %d, mapping on demand: straight in %llu (mapped %llu), through the slots %llu; "
         "peer allocations mapped %d\n", c->rank, (unsigned long long)(STRAIGHT(c)->direct - d0),
         (unsigned long long)(STRAIGHT(c)->mapped - m0), (unsigned long long)(STRAIGHT(c)->slots - s0),
         p2pk_map_count(c));
  CHECK_EQ(STRAIGHT(c)->slots, s0);
  CHECK(STRAIGHT(c)->direct > d0);
  CHECK_EQ(STRAIGHT(c)->mapped - m0, STRAIGHT(c)->direct - d0);
  /* Every shift: each peer's R->dout mapped once. */
  const int n = c->nranks;
  CHECK_EQ(p2pk_map_count(c), n - 1);
  /* Another allocation: one more mapping (the one peer this call sends
   * to), then reused. */
  char *alt[MAXR] = {NULL};
  T_CUDA(cudaMalloc((void **)&alt[0], R->cap));
  d0 = STRAIGHT(c)->mapped;
  sendrecv_into(R, alt, "send/recv into a second allocation", 71);
  sendrecv_into(R, alt, "send/recv into a second allocation again", 72);
  CHECK_EQ(STRAIGHT(c)->mapped - d0, 2);
  CHECK_EQ(p2pk_map_count(c), n);
  blocks_straight_in(R);
  /* Under a CUDA graph, into R->dout (mapped, not registered); more than 2
   * ranks take the kernels there (p2pk_ce_waits_ok). */
  d0 = STRAIGHT(c)->direct;
  graph_straight_in(R, 3);
  CHECK_EQ(STRAIGHT(c)->direct - d0, n == 2 ? 1 : 0);
  mixed_calls(R, "mixed-map");
  /* Registered, the registration takes the call; deregistered (its
   * mapping of the same allocation closed), the on-demand mapping still
   * works. */
  void *h = NULL;
  CHECK_OK(p2pkit_comm_register(c, R->dout[0], R->cap, &h));
  m0 = STRAIGHT(c)->mapped, d0 = STRAIGHT(c)->direct;
  sendrecv_into(R, R->dout, "send/recv into a registered buffer also mapped", 73);
  CHECK_EQ(STRAIGHT(c)->mapped, m0);
  CHECK_EQ(STRAIGHT(c)->direct - d0, 1);
  CHECK_OK(p2pkit_comm_deregister(c, h));
  sendrecv_into(R, R->dout, "send/recv into a mapped buffer after deregistering", 74);
  CHECK_EQ(STRAIGHT(c)->mapped - m0, 1);
  CHECK_EQ(p2pk_map_count(c), n);
  /* The setting off: nothing described, every call through the slots. */
  STRAIGHT(c)->map = 0;
  d0 = STRAIGHT(c)->direct, s0 = STRAIGHT(c)->slots;
  const uint64_t w0 = STRAIGHT(c)->why[P2PK_DMB_WHY_NOT_REGISTERED];
  matrix(R, &V_AUTO, SENDRECV, ALL_OPS, 1);
  CHECK_EQ(STRAIGHT(c)->direct, d0);
  CHECK(STRAIGHT(c)->slots > s0);
  CHECK_EQ(STRAIGHT(c)->why[P2PK_DMB_WHY_NOT_REGISTERED] - w0, STRAIGHT(c)->slots - s0);
  STRAIGHT(c)->map = 1;
  T_CUDA(cudaFree(alt[0]));
  STRAIGHT(c)->wait_ns = wait;
}

/* Process per GPU: a copy-engine broadcast and, with no sync between, a run
 * of kernel-path reduces on the same streams whose grids (programmatic
 * dependent launches stacking up) can fill every multiprocessor. The
 * broadcast's last posts to its peer run on their own stream; unless the
 * caller's stream waits for them (p2pk_cep_join_side, cep_core.c), the kernels can
 * hold the GPU while the peer, still in the broadcast, waits for a post that
 * cannot be scheduled: both hang until the timeout (seen under a CUDA
 * graph after eager copy-engine calls). Every output checked. */
#define CTK_KERNELS 8
static void ce_then_kernels(runner_t *R) {
  static const variant_t V_WIDE = {"simple-264x512", P2PK_ALGO_ONESHOT, P2PK_PROTO_SIMPLE, 264, 512, 0};
  const int n = R->nr;
  const call_t a = {P2PK_COLL_BROADCAST, 0, 0, 0, P2PKIT_FLOAT32, P2PKIT_SUM, MAXCOUNT};
  const call_t b = {P2PK_COLL_REDUCE, n - 1, 0, 0, P2PKIT_FLOAT32, P2PKIT_SUM, MAXCOUNT};
  char *din[MAXR], *dout[MAXR];
  for (int l = 0; l < R->nloc; l++) {
    T_CUDA(cudaSetDevice(R->dev[l]));
    T_CUDA(cudaMalloc((void **)&din[l], R->cap));
    T_CUDA(cudaMalloc((void **)&dout[l], R->cap));
  }
  for (int rep = 0; rep < 4; rep++) {
    const void *ina[MAXR], *inb[MAXR];
    void *outa[MAXR], *outb[MAXR];
    size_t offa[MAXR], offb[MAXR];
    prepare(R, R->dout, R->din, &a, 77 + (uint64_t)rep, ina, outa, offa);
    void *hin_a[MAXR];
    for (int r = 0; r < n; r++) { /* prepare() refills R->hin: keep the broadcast's inputs */
      hin_a[r] = malloc(runner_cap(n));
      CHECK(hin_a[r] != NULL);
      memcpy(hin_a[r], R->hin[r], a.count * sizeof(float));
    }
    prepare(R, dout, din, &b, 99 + (uint64_t)rep, inb, outb, offb);
    set_variant(R, &V_AUTO);
    p2pkit_status_t st = issue(R, &a, ina, outa);
    set_variant(R, &V_WIDE);
    for (int i = 0; i < CTK_KERNELS && st == P2PKIT_SUCCESS; i++) st = issue(R, &b, inb, outb);
    set_variant(R, &V_AUTO);
    if (st != P2PKIT_SUCCESS) {
      T_FAIL("copy engines then kernels, rep %d: %s: %s", rep, p2pkit_strerror(st), p2pkit_last_error());
      R->failures++;
    } else {
      if (!verify(R, dout, "kernel reduces after a copy-engine broadcast", &b, offb)) R->failures++;
      for (int r = 0; r < n; r++) {
        void *t = R->hin[r];
        R->hin[r] = hin_a[r];
        hin_a[r] = t;
      }
      if (!verify(R, R->dout, "copy-engine broadcast before kernel reduces", &a, offa)) R->failures++;
      for (int r = 0; r < n; r++) {
        void *t = R->hin[r];
        R->hin[r] = hin_a[r];
        hin_a[r] = t;
      }
    }
    for (int r = 0; r < n; r++) free(hin_a[r]);
  }
  for (int l = 0; l < R->nloc; l++) {
    T_CUDA(cudaSetDevice(R->dev[l]));
    T_CUDA(cudaFree(din[l]));
    T_CUDA(cudaFree(dout[l]));
  }
}

/* Kill modes: the victim dies by SIGKILL after a few good calls; the
 * survivors' next call needs it and must fail on their own timeout.
 *   kill-bcast: broadcast from the victim (last rank), P2P;
 *   kill-ag:    all-gather, victim rank 0 (the bootstrap's root), staged;
 *   kill-sr:    send/recv with shift 1, victim the last rank, P2P and staged
 *               (on more than 2 ranks the survivors that do not talk to it
 *               finish, and the one that only sends to it may: with 4
 *               ranks on 2 GPUs its send can fit the victim's slot). */
#define KILL_TIMEOUT_S 4
static int kill_victim(const char *mode, int n) { return strcmp(mode, "kill-ag") == 0 ? 0 : n - 1; }

static void kill_test(const char *mode, int p2p_disable) {
  runner_kill_test("test_collectives", mode, p2p_disable, kill_victim);
}

TEST(kill_broadcast_root_survivors_time_out) { kill_test("kill-bcast", 0); }
TEST(kill_rank0_staged_all_gather_survivors_time_out) { kill_test("kill-ag", 1); }
TEST(kill_sendrecv_peer_survivors_time_out) { kill_test("kill-sr", 0); }
TEST(kill_staged_sendrecv_peer_survivors_time_out) { kill_test("kill-sr", 1); }

/* The call the survivors make after the kill, with its buffers. */
typedef struct {
  runner_t *R;
  const call_t *k;
  const void *in[MAXR];
  void *out[MAXR];
  size_t off[MAXR];
} kill_call_t;

static p2pkit_status_t kill_call(void *ctx) {
  kill_call_t *c = ctx;
  return issue(c->R, c->k, c->in, c->out);
}

/* A kill mode's child (see kill_test). */
static void child_kill(runner_t *R, const char *mode) {
  const int rank = R->rank0, n = R->nr, victim = kill_victim(mode, n);
  call_t k = {P2PK_COLL_ALL_GATHER, 0, 0, 0, P2PKIT_FLOAT32, P2PKIT_SUM, 70001};
  if (strcmp(mode, "kill-bcast") == 0) k.kind = P2PK_COLL_BROADCAST, k.root = victim, k.count = 300001;
  if (strcmp(mode, "kill-sr") == 0) k.kind = SENDRECV, k.root = 0; /* shift 1 */
  /* Good calls first, the one the survivors will fail on among them. */
  for (int it = 0; it < 2; it++) CHECK(run_case(R, "before the kill", &k));
  if (rank == victim) {
    fflush(NULL);
    raise(SIGKILL);
  }
  usleep(300000); /* the victim is gone before the next call */
  const int shift = sr_shift(&k, n);
  /* Who waits for the victim: every rank of a collective; in send/recv the
   * rank receiving from it. Its sender only may finish (buffered send). */
  const int talks = k.kind != SENDRECV || (rank - shift + n) % n == victim ? SURV_TIMES_OUT
                    : (rank + shift) % n == victim                        ? SURV_MAY_FINISH
                                                                          : SURV_FINISHES;
  kill_call_t kc;
  memset(&kc, 0, sizeof kc);
  kc.R = R;
  kc.k = &k;
  prepare(R, R->dout, R->din, &k, 99, kc.in, kc.out, kc.off);
  /* a send/recv that finished (its receive from a survivor): check what arrived */
  if (runner_survivor_check(R, victim, KILL_TIMEOUT_S, kind_name(k.kind), talks, kill_call, &kc))
    CHECK(verify(R, R->dout, "survivors' send/recv", &k, kc.off));
  runner_destroy_after_kill(R);
}

/* argv: prog --child mode rank port nranks (cu_spawn_ranks); device = rank. */
static int child_main(int argc, char **argv) {
  const char *mode = NULL;
  int rank = 0, port = 0, nranks = 0;
  int bad = cu_child_args(argc, argv, &mode, &rank, &port, &nranks);
  if (bad) return bad;
  runner_t R;
  const int kill = strncmp(mode, "kill", 4) == 0, cep = strncmp(mode, "cep", 3) == 0;
  const int straight = strcmp(mode, "cep-direct") == 0;
  const int mm = strcmp(mode, "cep-direct-mismatch") == 0;
  const int kposts = strcmp(mode, "cep-kernel-posts") == 0;
  const int map = strcmp(mode, "cep-map") == 0;
  if (map) setenv("P2PKIT_SENDRECV_MAP", "1", 1);
  /* With kernel posts, each call's timeline is traced too
   * (P2PKIT_CEP_TRACE; the log must hold it). */
  if (kposts) setenv("P2PKIT_CEP_MEMOPS", "0", 1), setenv("P2PKIT_CEP_TRACE", "1", 1);
  static const char *const cep_vars[] = {"P2PKIT_CE_ALLREDUCE_MIN", "P2PKIT_CE_REDUCE_SCATTER_MIN",
                                         "P2PKIT_CE_REDUCE_MIN", "P2PKIT_BCAST_CE_MIN",
                                         "P2PKIT_CE_ALL_TO_ALL_MIN", "P2PKIT_CE_ALL_GATHER_MIN"};
  logcap_t L;
  const int maxb = strcmp(mode, "max-blocks") == 0;
  if (cep) {
    ce_settings_begin(cep_vars, 6);
    logcap_begin(&L, "P2PKIT_SENDRECV_CE_MIN", "1");
  } else if (maxb) {
    logcap_begin(&L, "P2PKIT_MAX_BLOCKS", "5");
    setenv("P2PKIT_DEBUG", "TRACE", 1);
    p2pk_log_reset();
  }
  if (runner_join(&R, rank, nranks, port, kill ? KILL_TIMEOUT_S : mm ? MM_TIMEOUT_S : 60) != 0) return 1;
  int staged = R.comm[0]->staged;
  CHECK_EQ(staged, getenv("P2PKIT_P2P_DISABLE") != NULL);
  if (kill) {
    child_kill(&R, mode);
  } else if (mm) {
    straight_in_mismatch(&R);
    runner_free(&R);
    runner_destroy_after_kill(&R); /* the communicator is broken: destroy, timed */
  } else if (straight) {
    CHECK(R.comm[0]->lay.cep_slot == (64u << 10) && STRAIGHT(R.comm[0])->on);
    straight_in_suite(&R);
  } else if (map) {
    CHECK(R.comm[0]->lay.cep_slot == (64u << 10) && STRAIGHT(R.comm[0])->on && STRAIGHT(R.comm[0])->map);
    map_suite(&R);
  } else if (cep) {
    CHECK(R.comm[0]->lay.cep_slot == (64u << 10) && R.comm[0]->lay.cep_depth == 2);
    matrix(&R, &V_AUTO, P2PK_COLL_REDUCE_SCATTER, ALL_OPS, 5);
    matrix(&R, &V_AUTO, P2PK_COLL_REDUCE, ALL_OPS, 5);
    matrix(&R, &V_AUTO, P2PK_COLL_BROADCAST, ALL_OPS, 1);
    matrix(&R, &V_AUTO, SENDRECV, ALL_OPS, 1);
    /* In and out of place: in place each chunk's copies out wait for its pushes. */
    matrix(&R, &V_AUTO, P2PK_COLL_ALL_TO_ALL, ALL_OPS, 1);
    matrix(&R, &V_AUTO, P2PK_COLL_ALL_GATHER, ALL_OPS, 1);
    ce_then_kernels(&R);
    graph_replay(&R, 2);
    mixed_calls(&R, "mixed-cep");
  } else if (maxb) {
    /* The caller's P2PKIT_MAX_BLOCKS (5) from init, then 3 set by the API. */
    int skip = 0;
    CHECK_EQ(p2pkit_comm_max_blocks(R.comm[0]), 5);
    max_blocks_suite(&R, &L, 0, &skip);
    max_blocks_suite(&R, &L, 3, &skip);
  } else if (strcmp(mode, "quick") == 0) {
    for (int kind = P2PK_COLL_BROADCAST; kind <= SENDRECV; kind++) {
      call_t k = {kind, 1, 0, 1, P2PKIT_FLOAT32, P2PKIT_SUM, 4097};
      CHECK(run_case(&R, "quick", &k));
    }
  } else {
    full_suite(&R, staged);
    graph_replay(&R, 4);
  }
  if (!mm) runner_destroy(&R);
  if (maxb) CHECK(logcap_end(&L, "collective kernels take at most", "blocks") >= 2);
  if (mm) {
    ce_settings_end(cep_vars, 6);
    logcap_end(&L, "", "");
  } else if (straight) {
    ce_settings_end(cep_vars, 6);
    CHECK(logcap_count(&L, "send/recv of", "pushes straight into the peers' outputs over the copy "
                       "engines (process per GPU)") >= 1);
    CHECK(logcap_count(&L, "all_to_all of", "pushes straight into the peers' outputs over the copy "
                       "engines (process per GPU)") >= 1);
    CHECK(logcap_count(&L, "all_gather of", "pushes straight into the peers' outputs over the copy "
                       "engines (process per GPU)") >= 1);
    /* Under capture the landing slots of 2 ranks only (p2pk_ce_waits_ok). */
    const int hits = logcap_end(&L, "send/recv of", "captured in a CUDA graph (process per GPU)");
    if (nranks == 2) CHECK(hits >= 1);
    else CHECK_EQ(hits, 0);
  } else if (map) {
    ce_settings_end(cep_vars, 6);
    CHECK(logcap_scan(&L, "maps rank", "receive allocation", 1) >= 2); /* with the time each took */
    CHECK(logcap_count(&L, "all_to_all of", "pushes straight into the peers' outputs over the copy "
                       "engines (process per GPU)") >= 1);
    CHECK(logcap_end(&L, "send/recv of", "pushes straight into the peers' outputs over the copy "
                     "engines (process per GPU)") >= 1);
  } else if (cep) {
    ce_settings_end(cep_vars, 6);
    /* Under capture the landing slots of 2 ranks; more take the kernels
     * there (p2pk_ce_waits_ok) and say so once. */
    const int two = nranks == 2;
    if (!two) {
      CHECK_EQ(logcap_count(&L, "captured in a CUDA graph", ""), 0);
      CHECK_EQ(logcap_count(&L, "under a CUDA graph", "more than 2 ranks are off"), 1);
    }
    CHECK(logcap_count(&L, "all_to_all of", "process per GPU") >= 1);
    CHECK(logcap_count(&L, "all_gather of", "process per GPU") >= 1);
    CHECK(logcap_count(&L, "copy-engine posts to the peers",
                       kposts ? "one-thread kernels (P2PKIT_CEP_MEMOPS=0)" : "stream memory operations") >= 1);
    CHECK(logcap_count(&L, "): reduce of", "process per GPU") >= 1);
    static const char *const caught[][2] = {
        {"all_to_all of", "captured in a CUDA graph (process per GPU)"},
        {"all_gather of", "captured in a CUDA graph (process per GPU)"},
        {"): reduce of", "captured in a CUDA graph"},
        {"broadcast of", "captured in a CUDA graph (process per GPU)"},
        {"send/recv of", "captured in a CUDA graph"}};
    for (size_t i = 0; two && i < sizeof caught / sizeof caught[0]; i++)
      CHECK(logcap_count(&L, caught[i][0], caught[i][1]) >= 1);
    CHECK(logcap_count(&L, "broadcast of", "process per GPU") >= 1);
    CHECK(logcap_count(&L, "send/recv of", "process per GPU") >= 1);
    if (kposts) CHECK(logcap_count(&L, "send/recv call", " pushed0 ") >= 1);
    if (kposts) CHECK(logcap_count(&L, "broadcast call", " out0 ") >= 1);
    else CHECK_EQ(logcap_count(&L, "over the copy engines, us after its start", ""), 0);
    CHECK(logcap_end(&L, "reduce_scatter of", "process per GPU") >= 1);
  }
  fflush(NULL);
  return t_failed ? 1 : 0;
}

/* --- one rank ------------------------------------------------------------------ */

/* A communicator of one rank (a one-GPU machine; torchrun
 * --nproc_per_node=1), made by init_all over one GPU or as rank 0 of 1 of a
 * process-per-GPU job: the argument checks, then every collective x type (x
 * op) x count, in and out of place, aligned or not, with each protocol
 * forced (send/recv: to itself), then a graph replayed. Each is a local
 * copy or nothing (a reduce of one value is that value), and the bytes
 * around the output stay untouched. */
static void one_rank_suite(int multiproc) {
  runner_t R;
  if (runner_one_rank(&R, multiproc) == 0) {
    argument_errors(&R);
    full_suite(&R, 0);
    graph_replay(&R, 3);
  }
  runner_destroy(&R);
}

TEST(one_rank) { one_rank_suite(0); }
TEST(one_rank_process) { one_rank_suite(1); }

/* --- main ------------------------------------------------------------------------- */

CU_MAIN(
    {T_CASE(one_rank), 1, CU_GPU1},
    {T_CASE(one_rank_process), 1, CU_GPU1},
    {T_CASE(argument_checks), 1, CU_GPUS2},
    {T_CASE(one_process_all_collectives), 1, CU_GPUS2},
    {T_CASE(one_process_graph_replay), 1, CU_GPUS2},
    {T_CASE(one_process_graph_broadcast_own_copy), 1, CU_GPUS2},
    {T_CASE(one_process_p2p_disabled), 1, CU_GPUS2},
    {T_CASE(one_process_launch_threads), 1, CU_GPUS2},
    {T_CASE(one_process_max_blocks), 1, CU_GPUS2},
    {T_CASE(mixed_with_all_reduce), 1, CU_GPUS2},
    {T_CASE(one_process_sendrecv_copy_engine), 1, CU_GPUS2},
    {T_CASE(one_process_broadcast_copy_engine), 1, CU_GPUS2},
    {T_CASE(one_process_copy_engine_collectives), 1, CU_GPUS2},
    {T_CASE(one_process_copy_engine_back_to_back), 1, CU_GPUS2},
    {T_CASE(process_per_gpu), 1, CU_PROCS},
    {T_CASE(process_per_gpu_p2p_disabled), 1, CU_PROCS},
    {T_CASE(process_per_gpu_max_blocks), 1, CU_PROCS},
    {T_CASE(process_per_gpu_copy_engine_p2p), 1, CU_PROCS},
    {T_CASE(process_per_gpu_copy_engine_p2p_kernel_posts), 1, CU_PROCS},
    {T_CASE(process_per_gpu_sendrecv_straight_in), 1, CU_PROCS},
    {T_CASE(process_per_gpu_sendrecv_straight_in_mismatch), 1, CU_PROCS},
    {T_CASE(process_per_gpu_sendrecv_map), 1, CU_PROCS},
    {T_CASE(kill_broadcast_root_survivors_time_out), 1, CU_PROCS},
    {T_CASE(kill_rank0_staged_all_gather_survivors_time_out), 1, CU_PROCS},
    {T_CASE(kill_sendrecv_peer_survivors_time_out), 1, CU_PROCS},
    {T_CASE(kill_staged_sendrecv_peer_survivors_time_out), 1, CU_PROCS},
    {T_CASE(quick), 0, CU_GPUS2},
    {T_CASE(quick_mp), 0, CU_PROCS})
