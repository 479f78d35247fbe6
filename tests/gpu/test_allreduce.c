/* SPDX-License-Identifier: BSD-3-Clause */
/* All-reduce on real GPUs, checked against a float64 / exact-integer host
 * reference: every type x op x in-place/out-of-place at odd counts, with
 * 16-byte-aligned and unaligned (rank-dependent) pointers, for each
 * algorithm; the same bits on every rank; the bytes around the output left
 * alone; CUDA graph capture and replay; P2P disabled (host staging); one
 * process driving all GPUs, and one process per GPU (children started with
 * fork+exec of this binary, so each starts CUDA fresh); a rank killed
 * mid-run; a communicator of one rank. Every GPU takes part (up to
 * P2PK_COLL_MAX_RANKS; the cases that say so use 2); P2PKIT_TEST_NRANKS=k
 * asks for fewer (at least 2). On one GPU only the one-rank cases run, and
 * with P2PKIT_SHARE_GPUS=1 the process-per-GPU ones too. Cases can
 * be named on the command line (`quick`, `quick_mp` are small sets for
 * compute-sanitizer). */
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "coll/coll.h"
#include "coll_util.h"
#include "core/param.h"
#include "gpu_test.h"
#include "nccl/dtype.h"
#include "test.h"
#include "test_net.h"
#include "coll_runner.h"

#define MAXR P2PK_COLL_MAX_RANKS
#define PAD 256
#define MAXCOUNT ((size_t)(1u << 20) + 3)
static const size_t COUNTS[] = {1, 3, 1023, 4097, MAXCOUNT};
#define NCOUNTS (sizeof COUNTS / sizeof COUNTS[0])
static const p2pkit_redop_t ALL_OPS[] = {P2PKIT_SUM, P2PKIT_PROD, P2PKIT_MIN, P2PKIT_MAX, P2PKIT_AVG};


static const variant_t V_AUTO = {"auto", -1, -1, 0, 0, 0};
static const variant_t V_LL = {"oneshot-ll", P2PK_ALGO_ONESHOT, P2PK_PROTO_LL, 0, 0, 0};
static const variant_t V_ONESHOT = {"oneshot", P2PK_ALGO_ONESHOT, P2PK_PROTO_SIMPLE, 0, 0, 0};
/* Few blocks, small chunks: many mailbox uses per block and per call. */
static const variant_t V_ONESHOT_SMALL = {"oneshot-3x4K", P2PK_ALGO_ONESHOT, P2PK_PROTO_SIMPLE, 3, 128, 4096};
static const variant_t V_TWOSHOT = {"twoshot", P2PK_ALGO_TWOSHOT, P2PK_PROTO_SIMPLE, 0, 0, 0};
static const variant_t V_LL128 = {"oneshot-ll128", P2PK_ALGO_ONESHOT, P2PK_PROTO_LL128, 0, 0, 0};
/* Three blocks of two warps: hundreds of passes per warp, each pushing one
 * pass while taking in the one before. */
static const variant_t V_LL128_SMALL = {"ll128-3x64", P2PK_ALGO_ONESHOT, P2PK_PROTO_LL128, 3, 64, 0};
static const variant_t V_TWOSHOT_SMALL = {"twoshot-5x1040", P2PK_ALGO_TWOSHOT, P2PK_PROTO_SIMPLE, 5, 96, 1040};
static const variant_t V_STAGED_SMALL = {"staged-2x4K", -1, -1, 2, 128, 4096};

static size_t runner_cap(int nr) {
  (void)nr;
  return MAXCOUNT * 8 + 2 * PAD + 16; /* + the largest misalignment */
}

static size_t misalign_of(int rank, size_t es, int misalign) {
  return misalign ? ((size_t)(rank + 1) * es) % 16 : 0;
}

/* Every rank's output, the same bits everywhere: single process compares
 * the buffers, one process per GPU compares hashes through the bootstrap. */
static int same_everywhere(runner_t *R, size_t *off, size_t bytes, int local_ok) {
  if (!R->multiproc) {
    for (int l = 1; l < R->nloc; l++)
      if (memcmp(R->hout[l] + PAD + off[l], R->hout[0] + PAD + off[0], bytes) != 0) return 0;
    return 1;
  }
  /* Every rank takes part, also after a local failure (then with a value no
   * hash takes), so both processes stay in step and both see the failure. */
  uint64_t h = local_ok ? cu_hash(R->hout[0] + PAD + off[0], bytes) | 1 : (uint64_t)R->rank0 << 1, all[MAXR];
  if (p2pk_boot_allgather(R->comm[0]->boot, 900, &h, all, sizeof h) != P2PKIT_SUCCESS) return 0;
  for (int r = 0; r < R->nr; r++)
    if (all[r] != h) return 0;
  return 1;
}

static int untouched(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != 0xA5) return 0;
  return 1;
}

/* Upload inputs and poison outputs for one call; pointers into *in / *out. */
static void prepare(runner_t *R, char **dout, char **din, size_t cap, p2pkit_dtype_t dt,
                    p2pkit_redop_t op, size_t count, int inplace, int misalign, uint64_t seed,
                    const void **in, void **out, size_t *off) {
  size_t es = p2pkit_dtype_size(dt), bytes = count * es;
  for (int r = 0; r < R->nr; r++) cu_fill(R->hin[r], count, dt, op, seed + (uint64_t)r);
  for (int l = 0; l < R->nloc; l++) {
    int g = R->rank0 + l;
    off[l] = misalign_of(g, es, misalign);
    T_CUDA(cudaSetDevice(R->dev[l]));
    T_CUDA(cudaMemset(dout[l], 0xA5, cap));
    out[l] = dout[l] + PAD + off[l];
    in[l] = inplace ? out[l] : din[l] + PAD + off[l];
    T_CUDA(cudaMemcpy((void *)in[l], R->hin[g], bytes, cudaMemcpyHostToDevice));
    /* The copy and memset ran on the legacy stream; the all-reduce runs on a
     * non-blocking one: finish them first. */
    T_CUDA(cudaDeviceSynchronize());
  }
}

/* Read back and judge; returns 1 when everything is right. */
static int verify(runner_t *R, char **dout, const char *what, p2pkit_dtype_t dt, p2pkit_redop_t op,
                  size_t count, size_t *off) {
  size_t es = p2pkit_dtype_size(dt), bytes = count * es;
  int ok = 1, first_ok = 0; /* first_ok: local rank 0 matched the reference */
  for (int l = 0; l < R->nloc; l++) {
    T_CUDA(cudaSetDevice(R->dev[l]));
    T_CUDA(cudaStreamSynchronize(R->s[l]));
    p2pkit_status_t as = P2PKIT_SUCCESS;
    CHECK_OK(p2pkit_comm_get_async_error(R->comm[l], &as));
    if (as != P2PKIT_SUCCESS) {
      T_FAIL("%s: rank %d: async error %s: %s", what, R->rank0 + l, p2pkit_strerror(as), p2pkit_last_error());
      ok = 0;
      continue;
    }
    T_CUDA(cudaMemcpy(R->hout[l], dout[l], PAD + off[l] + bytes + PAD, cudaMemcpyDeviceToHost));
    if (!untouched(R->hout[l], PAD + off[l]) || !untouched(R->hout[l] + PAD + off[l] + bytes, PAD)) {
      T_FAIL("%s: rank %d wrote outside its output", what, R->rank0 + l);
      ok = 0;
    }
    /* The same bits as a local rank 0 that matched: no need to redo the
     * host reference (it costs count x n per rank, n ranks in one process). */
    if (l > 0 && first_ok &&
        memcmp(R->hout[l] + PAD + off[l], R->hout[0] + PAD + off[0], bytes) == 0)
      continue;
    const void *ins[MAXR];
    for (int r = 0; r < R->nr; r++) ins[r] = R->hin[r];
    double got = 0, want = 0;
    size_t bad = cu_check(R->hout[l] + PAD + off[l], ins, R->nr, count, dt, op, &got, &want);
    if (bad < count) {
      T_FAIL("%s: rank %d: element %zu of %zu is %.17g, expected %.17g", what, R->rank0 + l, bad,
             count, got, want);
      ok = 0;
    } else if (l == 0) {
      first_ok = 1;
    }
  }
  if (!same_everywhere(R, off, bytes, ok) && ok) {
    T_FAIL("%s: ranks disagree bit for bit (or another rank failed)", what);
    ok = 0;
  }
  return ok;
}

static void describe(char *buf, size_t len, const char *vname, p2pkit_dtype_t dt, p2pkit_redop_t op,
                     size_t count, int inplace, int misalign) {
  snprintf(buf, len, "[%s %s %s count %zu %s%s]", vname, p2pkit_dtype_name(dt), p2pkit_redop_name(op),
           count, inplace ? "in-place" : "out-of-place", misalign ? " unaligned" : "");
}

static int run_case(runner_t *R, const char *vname, p2pkit_dtype_t dt, p2pkit_redop_t op,
                    size_t count, int inplace, int misalign) {
  char what[160];
  describe(what, sizeof what, vname, dt, op, count, inplace, misalign);
  const void *in[MAXR];
  void *out[MAXR];
  size_t off[MAXR];
  uint64_t seed = cu_hash(what, strlen(what));
  prepare(R, R->dout, R->din, R->cap, dt, op, count, inplace, misalign, seed, in, out, off);
  CHECK_OK(p2pkit_group_start());
  for (int l = 0; l < R->nloc; l++) {
    p2pkit_status_t st = p2pkit_all_reduce(in[l], out[l], count, dt, op, R->comm[l], R->s[l]);
    if (st != P2PKIT_SUCCESS) {
      T_FAIL("%s: rank %d: %s: %s", what, R->rank0 + l, p2pkit_strerror(st), p2pkit_last_error());
      p2pkit_group_end();
      return 0;
    }
  }
  CHECK_OK(p2pkit_group_end());
  return verify(R, R->dout, what, dt, op, count, off);
}

static void matrix(runner_t *R, const variant_t *v, const p2pkit_redop_t *ops, int nops,
                   const size_t *counts, int ncounts, int ndtypes) {
  set_variant(R, v);
  int k = 0;
  for (int d = 0; d < ndtypes && R->failures < 8; d++)
    for (int o = 0; o < nops; o++)
      for (int inplace = 0; inplace < 2; inplace++)
        for (int c = 0; c < ncounts; c++)
          if (!run_case(R, v->name, (p2pkit_dtype_t)d, ops[o], counts[c], inplace, k++ % 2))
            R->failures++;
  set_variant(R, &V_AUTO);
}

/* The full check of one communicator kind. */
static void full_suite(runner_t *R, int staged) {
  static const p2pkit_redop_t few[] = {P2PKIT_SUM, P2PKIT_MIN, P2PKIT_AVG};
  static const p2pkit_redop_t few2[] = {P2PKIT_SUM, P2PKIT_PROD, P2PKIT_MAX};
  matrix(R, &V_AUTO, ALL_OPS, 5, COUNTS, NCOUNTS, P2PK_DTYPE_NATIVE_COUNT);
  if (staged) {
    matrix(R, &V_STAGED_SMALL, few, 3, COUNTS, NCOUNTS, P2PK_DTYPE_NATIVE_COUNT);
    return;
  }
  matrix(R, &V_LL, few, 3, COUNTS, NCOUNTS, P2PK_DTYPE_NATIVE_COUNT);
  matrix(R, &V_LL128, few2, 3, COUNTS, NCOUNTS, P2PK_DTYPE_NATIVE_COUNT);
  matrix(R, &V_LL128_SMALL, few, 3, COUNTS, NCOUNTS, P2PK_DTYPE_NATIVE_COUNT);
  matrix(R, &V_ONESHOT, few2, 3, COUNTS, NCOUNTS, P2PK_DTYPE_NATIVE_COUNT);
  matrix(R, &V_ONESHOT_SMALL, few2, 3, COUNTS, NCOUNTS, P2PK_DTYPE_NATIVE_COUNT);
  matrix(R, &V_TWOSHOT, few, 3, COUNTS, NCOUNTS, P2PK_DTYPE_NATIVE_COUNT);
  matrix(R, &V_TWOSHOT_SMALL, few, 3, COUNTS, NCOUNTS, P2PK_DTYPE_NATIVE_COUNT);
}

/* --- graphs ----------------------------------------------------------------- */

typedef struct {
  const variant_t *v;
  p2pkit_dtype_t dt;
  p2pkit_redop_t op;
  size_t count;
  int inplace, misalign;
} gop_t;

#define NGA 4
/* Capture four all-reduces (LL, LL128, chunked one-shot, two-shot) per rank into
 * one graph, replay it `reps` times with fresh inputs, check every replay. */
/* graph_replay_ops: each all-reduce's calls (one per local rank) in one
 * group, so one process sees every rank's call at once. */
static int g_grouped;

static void graph_replay_ops(runner_t *R, const gop_t *ops, int nops, int reps) {
  char *din[NGA][MAXR], *dout[NGA][MAXR];
  const void *in[NGA][MAXR];
  void *out[NGA][MAXR];
  size_t off[NGA][MAXR];
  cudaGraph_t graph[MAXR];
  cudaGraphExec_t exec[MAXR];
  memset(graph, 0, sizeof graph);
  memset(exec, 0, sizeof exec);
  for (int k = 0; k < nops; k++)
    for (int l = 0; l < R->nloc; l++) {
      T_CUDA(cudaSetDevice(R->dev[l]));
      T_CUDA(cudaMalloc((void **)&din[k][l], R->cap));
      T_CUDA(cudaMalloc((void **)&dout[k][l], R->cap));
    }
  /* Pointers are fixed at capture; replays only change the data. */
  for (int k = 0; k < nops; k++)
    prepare(R, dout[k], din[k], R->cap, ops[k].dt, ops[k].op, ops[k].count, ops[k].inplace,
            ops[k].misalign, 1, in[k], out[k], off[k]);
  for (int l = 0; l < R->nloc; l++) {
    T_CUDA(cudaSetDevice(R->dev[l]));
    T_CUDA(cudaStreamBeginCapture(R->s[l], cudaStreamCaptureModeGlobal));
  }
  for (int k = 0; k < nops; k++) {
    set_variant(R, ops[k].v);
    if (g_grouped) CHECK_OK(p2pkit_group_start());
    for (int l = 0; l < R->nloc; l++)
      CHECK_OK(p2pkit_all_reduce(in[k][l], out[k][l], ops[k].count, ops[k].dt, ops[k].op,
                                 R->comm[l], R->s[l]));
    if (g_grouped) CHECK_OK(p2pkit_group_end());
  }
  set_variant(R, &V_AUTO);
  /* End every capture before instantiating any graph: cudaGraphInstantiate
   * is not permitted while another stream still captures in Global mode, and
   * that failed call also invalidates the other stream's capture. */
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
  if (!ready) R->failures++; /* already reported; replaying nothing proves nothing */
  for (int rep = 0; ready && rep < reps && R->failures < 8; rep++) {
    for (int k = 0; k < nops; k++)
      prepare(R, dout[k], din[k], R->cap, ops[k].dt, ops[k].op, ops[k].count, ops[k].inplace,
              ops[k].misalign, 1000 + (uint64_t)rep * 10 + (uint64_t)k * 100, in[k], out[k], off[k]);
    for (int l = 0; l < R->nloc; l++) {
      T_CUDA(cudaSetDevice(R->dev[l]));
      if (exec[l]) T_CUDA(cudaGraphLaunch(exec[l], R->s[l]));
    }
    for (int k = 0; k < nops; k++) {
      char what[160];
      describe(what, sizeof what, ops[k].v->name, ops[k].dt, ops[k].op, ops[k].count,
               ops[k].inplace, ops[k].misalign);
      char w2[200];
      snprintf(w2, sizeof w2, "graph replay %d %s", rep, what);
      /* Inputs of op k were regenerated with its seed: rebuild them host-side. */
      for (int r = 0; r < R->nr; r++)
        cu_fill(R->hin[r], ops[k].count, ops[k].dt, ops[k].op,
                1000 + (uint64_t)rep * 10 + (uint64_t)k * 100 + (uint64_t)r);
      if (!verify(R, dout[k], w2, ops[k].dt, ops[k].op, ops[k].count, off[k])) R->failures++;
    }
  }
  for (int l = 0; l < R->nloc; l++) {
    cudaSetDevice(R->dev[l]);
    if (exec[l]) cudaGraphExecDestroy(exec[l]);
    if (graph[l]) cudaGraphDestroy(graph[l]);
    for (int k = 0; k < nops; k++) {
      cudaFree(din[k][l]);
      cudaFree(dout[k][l]);
    }
  }
}

static void graph_replay(runner_t *R, int reps) {
  static const gop_t ops[NGA] = {
      {&V_LL, P2PKIT_FLOAT32, P2PKIT_SUM, 1023, 0, 0},
      {&V_LL128, P2PKIT_FLOAT16, P2PKIT_SUM, 300001, 0, 1},
      {&V_ONESHOT_SMALL, P2PKIT_BFLOAT16, P2PKIT_MAX, 300001, 1, 1},
      {&V_TWOSHOT, P2PKIT_FLOAT32, P2PKIT_AVG, MAXCOUNT, 0, 1},
  };
  graph_replay_ops(R, ops, NGA, reps);
}

/* Graph replays on the default settings: with the copy-engine thresholds
 * set, the copy engines under capture (replay-safe slot flags,
 * path_ce_slots.c), with a process per GPU and with one. */
static void graph_replay_auto(runner_t *R, int reps) {
  static const gop_t ops[3] = {
      {&V_AUTO, P2PKIT_FLOAT32, P2PKIT_SUM, MAXCOUNT, 0, 1},
      {&V_AUTO, P2PKIT_BFLOAT16, P2PKIT_MIN, 300001, 1, 0},
      {&V_AUTO, P2PKIT_INT64, P2PKIT_PROD, 4097, 0, 1},
  };
  graph_replay_ops(R, ops, 3, reps);
}

/* --- one process, all GPUs ------------------------------------------------- */

TEST(one_process_all_algorithms) {
  runner_t R;
  if (runner_single(&R, MAXR) == 0) full_suite(&R, 0);
  runner_destroy(&R);
}

TEST(one_process_graph_replay) {
  runner_t R;
  if (runner_single(&R, MAXR) == 0) graph_replay(&R, 5);
  runner_destroy(&R);
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

TEST(one_process_p2p_disabled_copy_engine) {
  /* Staged all-reduces in a group over the copy engines through host memory
   * (P2PKIT_STAGED_CE_MIN; 64 KiB chunks, so the two slots cycle many times):
   * every type, op and count, in and out of place, unaligned; graph replay
   * takes the kernel (capture). The log shows the copy engines were used. */
  setenv("P2PKIT_P2P_DISABLE", "1", 1);
  setenv("P2PKIT_STAGED_CE_CHUNK", "64K", 1);
  logcap_t L;
  logcap_begin(&L, "P2PKIT_STAGED_CE_MIN", "1");
  runner_t R;
  if (runner_single(&R, MAXR) == 0) {
    CHECK(R.comm[0]->staged);
    matrix(&R, &V_AUTO, ALL_OPS, 5, COUNTS, NCOUNTS, P2PK_DTYPE_NATIVE_COUNT);
    graph_replay(&R, 2);
  }
  runner_destroy(&R);
  unsetenv("P2PKIT_P2P_DISABLE");
  unsetenv("P2PKIT_STAGED_CE_CHUNK");
  CHECK(logcap_end(&L, "all_reduce of", "uses the copy engines through host memory") >= 1);
}

TEST(one_process_copy_engine_p2p) {
  /* All-reduces over P2P in a group with the copy engines moving every byte
   * (ce_settings_begin: 64 KiB chunks, 2 in flight, so each landing slot is
   * reused many times): every type, op and count, in and out of place,
   * unaligned; graph replay with a kernel setting takes the kernel, on the
   * default settings the landing slots (path_ce_slots.c, replay-safe flags: 64
   * KiB slots here, so each is reused many times a replay); a matrix with a
   * kernel setting forced takes the kernel. The log shows the copy engines
   * were used, eagerly and under capture. */
  ce_settings_begin(NULL, 0);
  logcap_t L;
  logcap_begin(&L, "P2PKIT_CE_ALLREDUCE_MIN", "1");
  runner_t R;
  int nr = 2;
  if (runner_single(&R, MAXR) == 0) {
    /* More than 2 ranks in one process: the landing slots (capture only)
     * are not laid out. */
    nr = R.nr;
    CHECK(!R.comm[0]->staged);
    CHECK(nr > 2 ? R.comm[0]->lay.cep_slot == 0
                 : R.comm[0]->lay.cep_slot == (64u << 10) && R.comm[0]->lay.cep_depth == 2);
    matrix(&R, &V_AUTO, ALL_OPS, 5, COUNTS, NCOUNTS, P2PK_DTYPE_NATIVE_COUNT);
    graph_replay(&R, 2);
    graph_replay_auto(&R, 3); /* each rank's call alone: the landing slots */
    g_grouped = 1;
    graph_replay_auto(&R, 3); /* in a group: the results straight into the outputs */
    g_grouped = 0;
    static const p2pkit_redop_t few[] = {P2PKIT_SUM, P2PKIT_MAX};
    matrix(&R, &V_TWOSHOT, few, 2, COUNTS, NCOUNTS, 2);
  }
  runner_destroy(&R);
  ce_settings_end(NULL, 0);
  CHECK(logcap_capture_ce(&L, nr, "all_reduce of", "captured in a CUDA graph (one process") >= 1);
  CHECK(logcap_capture_ce(&L, nr, "all_reduce of", "pushes straight into the peers' outputs") >= 1);
  CHECK(logcap_end(&L, "all_reduce of", "uses the copy engines over P2P") >= 1);
}

TEST(count_zero_is_a_no_op) {
  runner_t R;
  if (runner_single(&R, 2) == 0) {
    for (int l = 0; l < R.nloc; l++) {
      CHECK_OK(p2pkit_all_reduce(NULL, NULL, 0, P2PKIT_FLOAT32, P2PKIT_SUM, R.comm[l], R.s[l]));
      CHECK_OK(p2pkit_all_reduce(R.din[l], R.dout[l], 0, P2PKIT_INT64, P2PKIT_MAX, R.comm[l], R.s[l]));
    }
    /* Nothing was launched: the next real call still pairs up. */
    CHECK(run_case(&R, "after-zero", P2PKIT_FLOAT32, P2PKIT_SUM, 77, 0, 0));
  }
  runner_destroy(&R);
}

TEST(several_communicators_at_once) {
  runner_t A, B;
  if (runner_single(&A, 2) != 0) {
    runner_destroy(&A);
    return;
  }
  if (runner_single(&B, 2) != 0) {
    runner_destroy(&B);
    runner_destroy(&A);
    return;
  }
  static const size_t counts[] = {5, 70001, 3000001};
  for (int i = 0; i < 6; i++) {
    size_t c = counts[i % 3] > MAXCOUNT ? MAXCOUNT : counts[i % 3];
    CHECK(run_case(&A, "comm-A", P2PKIT_FLOAT32, P2PKIT_SUM, c, i % 2, 0));
    CHECK(run_case(&B, "comm-B", P2PKIT_INT32, P2PKIT_MAX, c, 0, i % 2));
  }
  runner_destroy(&B);
  CHECK(run_case(&A, "comm-A-after-B", P2PKIT_FLOAT64, P2PKIT_AVG, 4097, 1, 1));
  runner_destroy(&A);
}

/* Small set for compute-sanitizer. */
TEST(quick) {
  static const size_t counts[] = {3, 4097};
  static const p2pkit_redop_t ops[] = {P2PKIT_SUM, P2PKIT_MAX};
  runner_t R;
  if (runner_single(&R, 2) == 0) {
    matrix(&R, &V_LL, ops, 1, counts, 2, 3);
    matrix(&R, &V_LL128_SMALL, ops, 1, counts, 2, 3);
    matrix(&R, &V_ONESHOT_SMALL, ops + 1, 1, counts, 2, 3);
    matrix(&R, &V_TWOSHOT_SMALL, ops, 1, counts, 2, 3);
  }
  runner_destroy(&R);
}

/* --- one process per GPU ------------------------------------------------- */

static int spawn_ranks(const char *mode, int p2p_disable, int limit_s, int status[MAXR],
                       pid_t pid[MAXR]) {
  return runner_spawn("test_allreduce", mode, p2p_disable, limit_s, status, pid);
}

TEST(process_per_gpu) {
  int st[MAXR];
  pid_t pid[MAXR];
  int n = spawn_ranks("check", 0, 580, st, pid);
  for (int r = 0; r < n; r++) runner_expect_clean_exit("process_per_gpu", r, n, st[r]);
}

TEST(process_per_gpu_p2p_disabled) {
  int st[MAXR];
  pid_t pid[MAXR];
  int n = spawn_ranks("check", 1, 580, st, pid);
  for (int r = 0; r < n; r++) runner_expect_clean_exit("process_per_gpu_p2p_disabled", r, n, st[r]);
  CHECK_EQ(shm_left_by(pid[0]), 0);
}

TEST(process_per_gpu_p2p_disabled_copy_engine) {
  /* Staged all-reduce over the copy engines with one process per GPU (the
   * children set P2PKIT_STAGED_CE_MIN=1 and 64 KiB chunks): every type, op
   * and count; graph replay (the kernel, under capture); then a count that
   * differs between ranks must fail as a mismatch, quickly. */
  int st[MAXR];
  pid_t pid[MAXR];
  int n = spawn_ranks("ce", 1, 580, st, pid);
  for (int r = 0; r < n; r++)
    runner_expect_clean_exit("process_per_gpu_p2p_disabled_copy_engine", r, n, st[r]);
  CHECK_EQ(shm_left_by(pid[0]), 0);
}

TEST(process_per_gpu_copy_engine_p2p) {
  /* All-reduce over P2P with one process per GPU and the copy engines
   * moving every byte through the landing slots (the children set
   * P2PKIT_CE_ALLREDUCE_MIN=1, 64 KiB chunks, 2 in flight, so each slot is
   * reused many times): every type, op and count, in and out of place,
   * unaligned; graph replay (the kernels, under capture); then a count that
   * differs between ranks must fail as a mismatch, quickly. */
  int st[MAXR];
  pid_t pid[MAXR];
  int n = spawn_ranks("cep", 0, 580, st, pid);
  for (int r = 0; r < n; r++) runner_expect_clean_exit("process_per_gpu_copy_engine_p2p", r, n, st[r]);
}

TEST(process_per_gpu_few_hardware_queues) {
  /* Too few hardware queues for the copy engines' waits on several
   * streams (p2pk_ce_waits_ok): CUDA_DEVICE_MAX_CONNECTIONS=2, where a
   * 2-rank all-reduce hung until the timeout, eagerly and under a graph
   * (docs/decisions/copy-engine-queues.md). The children set the copy-engine thresholds
   * to 1 byte; the kernels must carry every call, eagerly and in graphs,
   * with every result right and the log saying why. */
  int st[MAXR];
  pid_t pid[MAXR];
  int n = spawn_ranks("fewq", 0, 580, st, pid);
  for (int r = 0; r < n; r++) runner_expect_clean_exit("process_per_gpu_few_hardware_queues", r, n, st[r]);
}

/* Which rank a kill mode kills: "kill0" rank 0 (the bootstrap's root),
 * "killlast" the last rank; the same rule in the parent and the children. */
static int kill_victim(const char *mode, int n) { return strcmp(mode, "kill0") == 0 ? 0 : n - 1; }

/* The victim dies by SIGKILL mid-run; every other rank must see its next
 * all-reduce time out and exit cleanly. */
static void kill_test(const char *mode) { runner_kill_test("test_allreduce", mode, 0, kill_victim); }

TEST(kill_last_rank_survivors_time_out) { kill_test("killlast"); }
/* The last rank dies between copy-engine staged all-reduces (process per
 * GPU, 64 MiB in 16 chunks): the survivors' copy streams give up in time. */
TEST(kill_copy_engine_staged_survivors_time_out) {
  runner_kill_test("test_allreduce", "killce", 1, kill_victim);
}
TEST(kill_rank0_survivors_time_out) { kill_test("kill0"); }
/* The same over P2P with the copy engines and landing slots (process per
 * GPU, 64 MiB in 16 MiB chunks). */
TEST(kill_copy_engine_p2p_survivors_time_out) {
  runner_kill_test("test_allreduce", "killcep", 0, kill_victim);
}

TEST(quick_mp) {
  int st[MAXR];
  pid_t pid[MAXR];
  int n = spawn_ranks("quick", 0, 580, st, pid);
  for (int r = 0; r < n; r++) runner_expect_clean_exit("quick_mp", r, n, st[r]);
}

/* --- the children ------------------------------------------------------------ */

#define KILL_TIMEOUT_S 4

typedef struct {
  runner_t *R;
  float *in, *out;
  size_t count;
} kill_call_t;

static p2pkit_status_t kill_call(void *ctx) {
  kill_call_t *k = ctx;
  return p2pkit_all_reduce(k->in, k->out, k->count, P2PKIT_FLOAT32, P2PKIT_SUM, k->R->comm[0],
                           k->R->s[0]);
}

static void child_kill(runner_t *R, const char *mode, int victim) {
  const int rank = R->rank0, n = R->nr;
  /* Killing the last rank: LL; rank 0: the chunked protocol (one-shot on 2
   * GPUs, two-shot from 3); killce, killcep: 64 MiB over the copy engines
   * (through host memory, over P2P). */
  const int ce = strcmp(mode, "killce") == 0 || strcmp(mode, "killcep") == 0;
  const size_t count = victim == n - 1 && !ce ? 1000 : (size_t)16 << 20;
  float *in = NULL, *out = NULL;
  T_CUDA(cudaMalloc((void **)&in, count * 4));
  T_CUDA(cudaMalloc((void **)&out, count * 4));
  float *h = malloc(count * 4);
  for (size_t i = 0; i < count; i++) h[i] = (float)(rank + 1) + (float)(i % 7);
  T_CUDA(cudaMemcpy(in, h, count * 4, cudaMemcpyHostToDevice));
  T_CUDA(cudaDeviceSynchronize());
  kill_call_t kc = {R, in, out, count};
  for (int it = 0; it < 3; it++) CHECK_OK(kill_call(&kc));
  T_CUDA(cudaStreamSynchronize(R->s[0]));
  T_CUDA(cudaMemcpy(h, out, count * 4, cudaMemcpyDeviceToHost));
  /* sum over ranks r of (r + 1) + (i % 7): exact in float */
  CHECK_NEAR(h[count - 1], n * (n + 1) / 2.0 + n * (double)((count - 1) % 7), 0);
  if (rank == victim) {
    fflush(NULL);
    raise(SIGKILL);
  }
  usleep(300000); /* the victim is gone before the next call */
  /* Every survivor waits for the victim (or for a survivor that waits for
   * it) and gives up on its own timeout. */
  runner_survivor_check(R, victim, KILL_TIMEOUT_S, "the all-reduce", SURV_TIMES_OUT, kill_call, &kc);
  runner_destroy_after_kill(R);
  cudaFree(in);
  cudaFree(out);
  free(h);
}

/* argv: prog --child mode rank port nranks (cu_spawn_ranks); device = rank. */
static int child_main(int argc, char **argv) {
  const char *mode = NULL;
  int rank = 0, port = 0, nranks = 0;
  int bad = cu_child_args(argc, argv, &mode, &rank, &port, &nranks);
  if (bad) return bad;
  int kill = strncmp(mode, "kill", 4) == 0;
  int ce = strcmp(mode, "ce") == 0, cep = strcmp(mode, "cep") == 0, fewq = strcmp(mode, "fewq") == 0;
  logcap_t L;
  /* Before this process's first CUDA call (runner_join), where CUDA reads
   * it: too few hardware queues for the copy engines (p2pk_ce_waits_ok). */
  if (fewq) {
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "2", 1);
    ce_settings_begin(NULL, 0);
    logcap_begin(&L, "P2PKIT_CE_ALLREDUCE_MIN", "1");
  }
  if (ce) {
    setenv("P2PKIT_STAGED_CE_CHUNK", "64K", 1);
    logcap_begin(&L, "P2PKIT_STAGED_CE_MIN", "1");
  } else if (cep) {
    ce_settings_begin(NULL, 0);
    logcap_begin(&L, "P2PKIT_CE_ALLREDUCE_MIN", "1");
  } else if (strcmp(mode, "killce") == 0) {
    setenv("P2PKIT_STAGED_CE_MIN", "1", 1);
  } else if (strcmp(mode, "killcep") == 0) {
    setenv("P2PKIT_CE_ALLREDUCE_MIN", "1", 1);
  }
  runner_t R;
  if (runner_join(&R, rank, nranks, port, kill ? KILL_TIMEOUT_S : 60) != 0) return 1;
  if (kill) {
    child_kill(&R, mode, kill_victim(mode, nranks));
  } else if (ce || cep) {
    if (ce) CHECK(R.comm[0]->staged && R.comm[0]->lay.stage_ce_slot == (64u << 10));
    else CHECK(!R.comm[0]->staged && R.comm[0]->lay.cep_slot == (64u << 10) && R.comm[0]->lay.cep_depth == 2);
    matrix(&R, &V_AUTO, ALL_OPS, 5, COUNTS, NCOUNTS, P2PK_DTYPE_NATIVE_COUNT);
    if (cep) {
      /* Under a grid cap the local reduces load both sources at a time
       * (p2pk_ce_local_reduce): every type and op again. */
      CHECK_OK(p2pkit_comm_set_max_blocks(R.comm[0], 2));
      matrix(&R, &V_AUTO, ALL_OPS, 5, COUNTS, NCOUNTS, P2PK_DTYPE_NATIVE_COUNT);
      CHECK_OK(p2pkit_comm_set_max_blocks(R.comm[0], 0));
    }
    graph_replay(&R, 2);
    graph_replay_auto(&R, 3);
    if (cep) {
      /* The caller's stream on each hardware queue in turn: CUDA hands the
       * queues (CUDA_DEVICE_MAX_CONNECTIONS) to streams as they are made,
       * in turn, so nine new streams put the caller's beside each of the
       * library's own (made at init), and none of the copy engines' waits
       * may stand behind a call's work that it needs (p2pk_ce_waits_ok). */
      static const size_t one[] = {1048579};
      static const p2pkit_redop_t sum[] = {P2PKIT_SUM};
      cudaStream_t keep = R.s[0], mine[9] = {NULL};
      for (int j = 0; j < 9 && R.failures == 0; j++) {
        T_CUDA(cudaStreamCreateWithFlags(&mine[j], cudaStreamNonBlocking));
        R.s[0] = mine[j];
        matrix(&R, &V_AUTO, sum, 1, one, 1, 1);
        graph_replay_auto(&R, 1);
        R.s[0] = keep;
      }
      for (int j = 0; j < 9; j++)
        if (mine[j]) cudaStreamDestroy(mine[j]);
    }
    /* Counts that differ: rank 0 sends 19 chunks, the others 13. */
    double t0 = cu_now();
    size_t cnt = rank == 0 ? 300000 : 200000;
    CHECK_OK(p2pkit_all_reduce(R.din[0], R.dout[0], cnt, P2PKIT_FLOAT32, P2PKIT_SUM, R.comm[0], R.s[0]));
    T_CUDA(cudaStreamSynchronize(R.s[0]));
    p2pkit_status_t as = P2PKIT_SUCCESS;
    CHECK_OK(p2pkit_comm_get_async_error(R.comm[0], &as));
    if (as != P2PKIT_ERR_INVALID_ARGUMENT && as != P2PKIT_ERR_REMOTE)
      T_FAIL("ce mismatch: rank %d: %s (%s)", rank, p2pkit_strerror(as), p2pkit_last_error());
    if (cu_now() - t0 > 5) T_FAIL("ce mismatch: rank %d: took %.1f s", rank, cu_now() - t0);
    printf("rank %d: counts that differ: %s\n", rank, p2pkit_last_error());
    runner_destroy_after_kill(&R);
    unsetenv("P2PKIT_STAGED_CE_CHUNK");
    if (cep) ce_settings_end(NULL, 0);
    /* Under capture the landing slots of 2 ranks; more take the kernels
     * there (p2pk_ce_waits_ok), and say so once. */
    if (cep && nranks == 2) CHECK(logcap_count(&L, "all_reduce of", "captured in a CUDA graph") >= 1);
    if (cep && nranks > 2) {
      CHECK_EQ(logcap_count(&L, "all_reduce of", "captured in a CUDA graph"), 0);
      CHECK_EQ(logcap_count(&L, "under a CUDA graph", "more than 2 ranks are off"), 1);
    }
    CHECK(logcap_end(&L, "all_reduce of", "process per GPU") >= 1);
  } else if (fewq) {
    static const p2pkit_redop_t ops[] = {P2PKIT_SUM, P2PKIT_MAX};
    matrix(&R, &V_AUTO, ops, 2, COUNTS, NCOUNTS, P2PK_DTYPE_NATIVE_COUNT);
    graph_replay_auto(&R, 2);
    ce_settings_end(NULL, 0);
    CHECK_EQ(logcap_count(&L, "all_reduce of", "copy engines"), 0);
    CHECK_EQ(logcap_end(&L, "CUDA_DEVICE_MAX_CONNECTIONS=2", "need 8 hardware queues"), 1);
  } else if (strcmp(mode, "quick") == 0) {
    static const size_t counts[] = {3, 4097};
    static const p2pkit_redop_t ops[] = {P2PKIT_SUM, P2PKIT_MAX};
    matrix(&R, &V_LL, ops, 1, counts, 2, 3);
    matrix(&R, &V_LL128_SMALL, ops, 1, counts, 2, 3);
    matrix(&R, &V_ONESHOT_SMALL, ops + 1, 1, counts, 2, 3);
    matrix(&R, &V_TWOSHOT_SMALL, ops, 1, counts, 2, 3);
  } else {
    int staged = R.comm[0]->staged;
    CHECK_EQ(staged, getenv("P2PKIT_P2P_DISABLE") != NULL);
    full_suite(&R, staged);
    if (!staged) {
      /* Registered outputs: two-shot writes peers' shares straight into them. */
      void *handle = NULL;
      CHECK_OK(p2pkit_comm_register(R.comm[0], R.dout[0], R.cap, &handle));
      static const p2pkit_redop_t ops[] = {P2PKIT_SUM, P2PKIT_AVG, P2PKIT_MAX};
      matrix(&R, &V_TWOSHOT, ops, 3, COUNTS, NCOUNTS, P2PK_DTYPE_NATIVE_COUNT);
      matrix(&R, &V_TWOSHOT_SMALL, ops, 1, COUNTS, NCOUNTS, P2PK_DTYPE_NATIVE_COUNT);
      if (handle) CHECK_OK(p2pkit_comm_deregister(R.comm[0], handle));
    }
    graph_replay(&R, 4);
  }
  runner_destroy(&R);
  fflush(NULL);
  return t_failed ? 1 : 0;
}

/* --- one rank ----------------------------------------------------------------- */

/* A communicator of one rank (a one-GPU machine; torchrun
 * --nproc_per_node=1), made by init_all over one GPU or as rank 0 of 1 of a
 * process-per-GPU job: every type x op x count, in and out of place,
 * aligned or not, with each algorithm forced, then a graph replayed. The
 * output is the input (avg and prod of one value are that value), the bytes
 * around it untouched; count 0 is a no-op. */
static void one_rank_suite(int multiproc) {
  runner_t R;
  if (runner_one_rank(&R, multiproc) == 0) {
    full_suite(&R, 0);
    graph_replay(&R, 3);
    CHECK_OK(p2pkit_all_reduce(NULL, NULL, 0, P2PKIT_FLOAT32, P2PKIT_SUM, R.comm[0], R.s[0]));
    CHECK_EQ(p2pkit_all_reduce(R.din[0], R.dout[0], 5, (p2pkit_dtype_t)42, P2PKIT_SUM, R.comm[0],
                               R.s[0]),
             P2PKIT_ERR_INVALID_ARGUMENT);
  }
  runner_destroy(&R);
}

TEST(one_rank) { one_rank_suite(0); }
TEST(one_rank_process) { one_rank_suite(1); }

/* --- main ---------------------------------------------------------------------- */

CU_MAIN(
    {T_CASE(one_rank), 1, CU_GPU1},
    {T_CASE(one_rank_process), 1, CU_GPU1},
    {T_CASE(one_process_all_algorithms), 1, CU_GPUS2},
    {T_CASE(one_process_graph_replay), 1, CU_GPUS2},
    {T_CASE(one_process_p2p_disabled), 1, CU_GPUS2},
    {T_CASE(one_process_p2p_disabled_copy_engine), 1, CU_GPUS2},
    {T_CASE(one_process_copy_engine_p2p), 1, CU_GPUS2},
    {T_CASE(count_zero_is_a_no_op), 1, CU_GPUS2},
    {T_CASE(several_communicators_at_once), 1, CU_GPUS2},
    {T_CASE(process_per_gpu), 1, CU_PROCS},
    {T_CASE(process_per_gpu_p2p_disabled), 1, CU_PROCS},
    {T_CASE(process_per_gpu_p2p_disabled_copy_engine), 1, CU_PROCS},
    {T_CASE(process_per_gpu_copy_engine_p2p), 1, CU_PROCS},
    {T_CASE(process_per_gpu_few_hardware_queues), 1, CU_PROCS},
    {T_CASE(kill_copy_engine_p2p_survivors_time_out), 1, CU_PROCS},
    {T_CASE(kill_last_rank_survivors_time_out), 1, CU_PROCS},
    {T_CASE(kill_copy_engine_staged_survivors_time_out), 1, CU_PROCS},
    {T_CASE(kill_rank0_survivors_time_out), 1, CU_PROCS},
    {T_CASE(quick), 0, CU_GPUS2},
    {T_CASE(quick_mp), 0, CU_PROCS})
