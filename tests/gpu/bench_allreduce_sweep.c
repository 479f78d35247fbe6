/* SPDX-License-Identifier: BSD-3-Clause */
/* Sweep of the all-reduce tuning knobs (algorithm, protocol, blocks, threads,
 * chunk) at a few sizes, one process driving every GPU, with NCCL measured
 * side by side in the same run and mode. Not a test: scripts/device/coll.sh
 * runs it on the device machine.
 *
 *   bench_allreduce_sweep [--sizes 8,64K,1M,16M,256M,1G] [--quick] [--no-nccl]
 *                         [--p2p-disable] [--table FILE]
 *
 * Eager: wall time of N back-to-back calls (every rank launched, group
 * bracketed) until the last stream is done, divided by N. Graph: N calls per
 * rank captured once, wall time of one replay / N. Each point is the median
 * of 3 repeats. Output: one line per point, then a summary against the
 * targets of the issue. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "coll/coll.h"
#include "coll_util.h"
#include "core/param.h"
#include "nccl/nccl_dl.h"

#define MAXR 8
#define REPEATS 3

typedef struct {
  int algo, proto, blocks, threads;
  size_t chunk;
  char name[48];
} variant_t;

typedef struct {
  int n;
  int dev[MAXR];
  cudaStream_t s[MAXR];
  float *in[MAXR], *out[MAXR];
  p2pkit_comm_t comm[MAXR];
  p2pk_nccl_api nccl;
  p2pk_nccl_comm_t ncomm[MAXR];
  int have_nccl;
} bench_t;

/* Which implementation a timing loop drives. */
typedef struct {
  bench_t *B;
  int nccl;
} impl_t;

static int call(impl_t *I, size_t count) {
  bench_t *B = I->B;
  if (I->nccl) {
    if (B->nccl.GroupStart() != 0) return -1;
    for (int r = 0; r < B->n; r++)
      if (B->nccl.AllReduce(B->in[r], B->out[r], count, P2PK_NCCL_FLOAT32, P2PK_NCCL_SUM,
                            B->ncomm[r], (p2pkit_stream_t)B->s[r]) != 0)
        return -1;
    return B->nccl.GroupEnd() == 0 ? 0 : -1;
  }
  p2pkit_group_start();
  for (int r = 0; r < B->n; r++)
    if (p2pkit_all_reduce(B->in[r], B->out[r], count, P2PKIT_FLOAT32, P2PKIT_SUM, B->comm[r],
                          (p2pkit_stream_t)B->s[r]) != P2PKIT_SUCCESS) {
      fprintf(stderr, "all_reduce: %s\n", p2pkit_last_error());
      p2pkit_group_end();
      return -1;
    }
  p2pkit_group_end();
  return 0;
}

static int sync_all(bench_t *B) { return cu_sync_streams(B->n, B->dev, B->s); }

static int iters_for(size_t bytes) {
  if (bytes <= (1u << 20)) return 200;
  size_t n = ((size_t)4 << 30) / bytes;
  return n < 5 ? 5 : n > 100 ? 100 : (int)n;
}

/* Median seconds per call; negative on failure. */
static double time_eager(impl_t *I, size_t count) {
  size_t bytes = count * 4;
  int iters = iters_for(bytes), warm = bytes <= (1u << 20) ? 20 : 2;
  for (int i = 0; i < warm; i++)
    if (call(I, count)) return -1;
  if (sync_all(I->B)) return -1;
  double t[REPEATS];
  for (int k = 0; k < REPEATS; k++) {
    double t0 = cu_now();
    for (int i = 0; i < iters; i++)
      if (call(I, count)) return -1;
    if (sync_all(I->B)) return -1;
    t[k] = (cu_now() - t0) / iters;
  }
  qsort(t, REPEATS, sizeof t[0], cu_cmp_double);
  return t[REPEATS / 2];
}

static double time_graph(impl_t *I, size_t count) {
  bench_t *B = I->B;
  size_t bytes = count * 4;
  int iters = iters_for(bytes);
  cudaGraph_t g[MAXR] = {0};
  cudaGraphExec_t x[MAXR] = {0};
  double res = -1;
  int bad = 0, begun = 0;
  for (int r = 0; r < B->n && !bad; r++, begun++) {
    cudaSetDevice(B->dev[r]);
    if (cudaStreamBeginCapture(B->s[r], cudaStreamCaptureModeGlobal) != cudaSuccess) bad = 1;
  }
  if (bad) begun--; /* the one that failed did not begin */
  for (int i = 0; i < iters && !bad; i++) bad = call(I, count);
  /* End every capture before instantiating any graph, and end them all even
   * after a failure: cudaGraphInstantiate is not permitted while another
   * stream still captures in Global mode, and a capture left open makes every
   * later call fail (seen on the device: every graph point after the first
   * was reported wrong). */
  for (int r = 0; r < begun; r++) {
    cudaSetDevice(B->dev[r]);
    if (cudaStreamEndCapture(B->s[r], &g[r]) != cudaSuccess) bad = 1;
  }
  if (bad) goto out;
  for (int r = 0; r < B->n; r++) {
    cudaSetDevice(B->dev[r]);
    if (cudaGraphInstantiate(&x[r], g[r], 0) != cudaSuccess) goto out;
  }
  double t[REPEATS + 1];
  for (int k = 0; k <= REPEATS; k++) {
    double t0 = cu_now();
    for (int r = 0; r < B->n; r++) {
      cudaSetDevice(B->dev[r]);
      if (cudaGraphLaunch(x[r], B->s[r]) != cudaSuccess) goto out;
    }
    if (sync_all(B)) goto out;
    t[k] = (cu_now() - t0) / iters;
  }
  qsort(t + 1, REPEATS, sizeof t[0], cu_cmp_double); /* t[0] was the warm-up */
  res = t[1 + REPEATS / 2];
out:
  for (int r = 0; r < B->n; r++) {
    cudaSetDevice(B->dev[r]);
    if (x[r]) cudaGraphExecDestroy(x[r]);
    if (g[r]) cudaGraphDestroy(g[r]);
  }
  cudaGetLastError();
  return res;
}

/* Inputs: rank r holds bytes 0x3c + r everywhere; out = their float sum in
 * rank order. Checks the first and last 4096 elements. */
static int check_output(bench_t *B, size_t count) {
  float want = 0;
  for (int r = 0; r < B->n; r++) {
    uint32_t u = 0x01010101u * (uint32_t)(0x3c + r);
    float v;
    memcpy(&v, &u, 4);
    want = r == 0 ? v : want + v;
  }
  size_t k = count < 4096 ? count : 4096;
  float *h = malloc(k * 4);
  int ok = 1;
  for (int r = 0; r < B->n && ok; r++) {
    cudaSetDevice(B->dev[r]);
    for (int part = 0; part < 2 && ok; part++) {
      size_t at = part ? count - k : 0;
      if (cudaMemcpy(h, B->out[r] + at, k * 4, cudaMemcpyDeviceToHost) != cudaSuccess) ok = 0;
      for (size_t i = 0; ok && i < k; i++)
        if (h[i] != want) ok = 0;
    }
  }
  free(h);
  return ok;
}

static void poison_outputs(bench_t *B, size_t count) {
  for (int r = 0; r < B->n; r++) {
    cudaSetDevice(B->dev[r]);
    cudaMemset(B->out[r], 0xff, count * 4);
    cudaDeviceSynchronize(); /* legacy stream vs the non-blocking ones */
  }
}

static int parse_sizes(const char *s, size_t *out, int max) {
  int n = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  char *save = NULL;
  for (char *t = strtok_r(buf, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save))
    if (p2pk_parse_size(t, &out[n]) == 0 && out[n] >= 4) n++;
  return n;
}

static void add(variant_t *v, int *nv, int algo, int proto, int blocks, int threads, size_t chunk) {
  variant_t *x = &v[(*nv)++];
  x->algo = algo, x->proto = proto, x->blocks = blocks, x->threads = threads, x->chunk = chunk;
  if (algo < 0) snprintf(x->name, sizeof x->name, "auto");
  else snprintf(x->name, sizeof x->name, "%s/%s:b%d:t%d:c%zuK", p2pk_algo_name(algo),
                p2pk_proto_name(proto), blocks, threads, chunk >> 10);
}

/* The knobs worth trying at this size. */
static int variants_for(size_t bytes, int staged, int quick, variant_t *v) {
  int nv = 0;
  add(v, &nv, -1, -1, 0, 0, 0);
  if (staged) {
    static const int blocks[] = {2, 4, 8, 16, 32};
    static const size_t chunks[] = {256 << 10, 1 << 20, 0};
    for (int b = 0; b < 5; b++)
      for (int c = 0; c < 3; c++)
        for (int t = 256; t <= 512; t += 256)
          if (!quick || (t == 512 && c == 1)) add(v, &nv, P2PK_ALGO_STAGED, P2PK_PROTO_SIMPLE, blocks[b], t, chunks[c]);
    return nv;
  }
  if (bytes <= (1u << 20)) {
    static const int blocks[] = {0, 8, 32, 128};
    for (int b = 0; b < 4; b++)
      for (int t = 128; t <= 512; t *= 2)
        if (!quick || t == 256) add(v, &nv, P2PK_ALGO_ONESHOT, P2PK_PROTO_LL, blocks[b], t, 0);
  }
  if (bytes >= (64u << 10)) {
    static const int blocks[] = {16, 32, 66, 132, 264};
    static const size_t chunks[] = {8 << 10, 16 << 10, 32 << 10, 0};
    for (int b = 0; b < 5; b++)
      for (int c = 0; c < 4; c++)
        for (int t = 256; t <= 512; t *= 2)
          if (!quick || (t == 512 && c == 3)) add(v, &nv, P2PK_ALGO_ONESHOT, P2PK_PROTO_SIMPLE, blocks[b], t, chunks[c]);
    static const int tblocks[] = {32, 66, 132, 264};
    static const size_t tchunks[] = {8 << 10, 32 << 10, 0};
    for (int b = 0; b < 4; b++)
      for (int c = 0; c < 3; c++)
        if (!quick || c == 2) add(v, &nv, P2PK_ALGO_TWOSHOT, P2PK_PROTO_SIMPLE, tblocks[b], 512, tchunks[c]);
  }
  return nv;
}

static void set_variant(bench_t *B, const variant_t *v) {
  p2pk_algo_force f = {v->algo, v->proto, v->blocks, v->threads, v->chunk};
  for (int r = 0; r < B->n; r++) p2pk_comm_set_force(B->comm[r], &f);
}

typedef struct {
  double nccl, autov, best;
  variant_t bestv;
} summary_t;

static void print_point(size_t bytes, const char *mode, const char *impl, double t, double nccl,
                        int ok, const bench_t *B) {
  double algbw = t > 0 ? bytes / t / 1e9 : 0;
  double busbw = algbw * 2.0 * (B->n - 1) / B->n;
  printf("%12zu  %-5s  %-36s %10.2f us %8.1f GB/s %8.1f busbw", bytes, mode, impl, t * 1e6, algbw, busbw);
  if (nccl > 0 && t > 0) printf("  %5.2fx NCCL time", t / nccl);
  printf("%s\n", ok ? "" : "  WRONG RESULT");
  fflush(stdout);
}

int main(int argc, char **argv) {
  size_t sizes[16];
  int nsizes = 0, quick = 0, use_nccl = 1, staged = 0;
  const char *table_path = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc) nsizes = parse_sizes(argv[++i], sizes, 16);
    else if (strcmp(argv[i], "--quick") == 0) quick = 1;
    else if (strcmp(argv[i], "--no-nccl") == 0) use_nccl = 0;
    else if (strcmp(argv[i], "--p2p-disable") == 0) staged = 1;
    else if (strcmp(argv[i], "--table") == 0 && i + 1 < argc) table_path = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--sizes LIST] [--quick] [--no-nccl] [--p2p-disable] [--table FILE]\n", argv[0]);
      return 2;
    }
  }
  /* Never let NCCL use NVLink multicast here; P2P off for both sides alike. */
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  if (staged) {
    setenv("P2PKIT_P2P_DISABLE", "1", 1);
    setenv("NCCL_P2P_DISABLE", "1", 1);
    p2pk_param_reset();
  }
  if (!nsizes) nsizes = parse_sizes(staged ? "8,64K,1M,16M,128M" : "8,64K,1M,16M,256M,1G", sizes, 16);
  size_t maxb = 0;
  for (int i = 0; i < nsizes; i++) {
    sizes[i] &= ~(size_t)3;
    if (sizes[i] > maxb) maxb = sizes[i];
  }
  bench_t B;
  memset(&B, 0, sizeof B);
  if (cudaGetDeviceCount(&B.n) != cudaSuccess || B.n < 2) {
    printf("SKIP: needs 2 GPUs\n");
    return 77;
  }
  if (B.n > MAXR) B.n = MAXR;
  for (int r = 0; r < B.n; r++) {
    B.dev[r] = r;
    cudaSetDevice(r);
    if (cudaStreamCreateWithFlags(&B.s[r], cudaStreamNonBlocking) != cudaSuccess ||
        cudaMalloc((void **)&B.in[r], maxb) != cudaSuccess ||
        cudaMalloc((void **)&B.out[r], maxb) != cudaSuccess) {
      fprintf(stderr, "GPU %d: cannot allocate 2 x %zu bytes\n", r, maxb);
      return 1;
    }
    cudaMemset(B.in[r], 0x3c + r, maxb);
    cudaDeviceSynchronize();
  }
  p2pkit_status_t st = p2pkit_comm_init_all(B.comm, B.n, B.dev);
  if (st != P2PKIT_SUCCESS) {
    fprintf(stderr, "p2pkit init: %s\n", p2pkit_last_error());
    return 1;
  }
  if (use_nccl && p2pk_nccl_load(&B.nccl, NULL) == P2PKIT_SUCCESS &&
      B.nccl.CommInitAll(B.ncomm, B.n, B.dev) == 0)
    B.have_nccl = 1;
  else if (use_nccl)
    printf("# NCCL not available: %s\n", p2pkit_last_error());
  char ver[32] = "-";
  if (B.have_nccl) p2pk_nccl_version_str(B.nccl.version, ver, sizeof ver);
  printf("# %d GPUs, %s, P2PKIT_BUFFER_SIZE=%s, NCCL %s, mailbox %llu B, LL up to %zu B\n", B.n,
         staged ? "P2P disabled (staged / NCCL SHM)" : "P2P", p2pk_param_str("P2PKIT_BUFFER_SIZE"),
         ver, (unsigned long long)(staged ? B.comm[0]->lay.stage_mailbox : B.comm[0]->lay.mailbox),
         B.comm[0]->sel.geom.ll_cap);
  printf("# %12s  %-5s  %-36s %13s %13s\n", "bytes", "mode", "implementation", "time", "algbw");
  summary_t sum[16][2];
  variant_t *v = malloc(256 * sizeof *v);
  for (int si = 0; si < nsizes; si++) {
    size_t bytes = sizes[si], count = bytes / 4;
    for (int mode = 0; mode < 2; mode++) {
      const char *mname = mode ? "graph" : "eager";
      summary_t *S = &sum[si][mode];
      memset(S, 0, sizeof *S);
      S->nccl = S->autov = S->best = -1;
      if (B.have_nccl) {
        impl_t I = {&B, 1};
        S->nccl = mode ? time_graph(&I, count) : time_eager(&I, count);
        print_point(bytes, mname, "nccl", S->nccl, 0, 1, &B);
      }
      int nv = variants_for(bytes, staged, quick || (mode == 1 && bytes > (16u << 20)), v);
      for (int k = 0; k < nv; k++) {
        set_variant(&B, &v[k]);
        impl_t I = {&B, 0};
        poison_outputs(&B, count);
        double t = mode ? time_graph(&I, count) : time_eager(&I, count);
        int ok = t > 0 && check_output(&B, count);
        print_point(bytes, mname, v[k].name, t, S->nccl, ok, &B);
        if (!ok) continue;
        if (k == 0) S->autov = t;
        if (S->best < 0 || t < S->best) S->best = t, S->bestv = v[k];
      }
    }
  }
  /* Targets (2 GPUs, ratios against NCCL in the same run and mode). */
  printf("\n# summary: time ratio to NCCL (lower is better), targets of the issue\n");
  printf("# %10s %-5s %10s %10s %7s %10s %7s  best variant\n", "bytes", "mode", "nccl_us", "auto_us",
         "auto/x", "best_us", "best/x");
  p2pk_algo_table t;
  memset(&t, 0, sizeof t);
  for (int si = 0; si < nsizes; si++)
    for (int mode = 0; mode < 2; mode++) {
      summary_t *S = &sum[si][mode];
      size_t bytes = sizes[si];
      double ra = S->nccl > 0 && S->autov > 0 ? S->autov / S->nccl : 0;
      double rb = S->nccl > 0 && S->best > 0 ? S->best / S->nccl : 0;
      const char *goal = "";
      char g[64] = "";
      if (!staged) {
        if (bytes <= (64u << 10) && mode == 0) goal = "goal <=0.50x";
        else if (bytes <= (64u << 10) && mode == 1) {
          snprintf(g, sizeof g, "goal <=2.5us: auto %s", S->autov > 0 && S->autov <= 2.5e-6 ? "MET" : "MISSED");
          goal = g;
        } else if (bytes == (1u << 20)) goal = "goal <=0.50x";
        else if (bytes == (16u << 20)) goal = "goal <=0.77x";
        else if (bytes >= (256u << 20)) {
          double busbw = S->autov > 0 ? bytes / S->autov / 1e9 * 2.0 * (B.n - 1) / B.n : 0;
          snprintf(g, sizeof g, "goal <=0.89x and busbw>=360: auto %.0f GB/s", busbw);
          goal = g;
        } else goal = "goal <=1x";
      } else if (bytes == (128u << 20)) {
        goal = "goal <=0.67x";
      }
      printf("  %10zu %-5s %10.2f %10.2f %7.2f %10.2f %7.2f  %s  %s\n", bytes, mode ? "graph" : "eager",
             S->nccl * 1e6, S->autov * 1e6, ra, S->best * 1e6, rb, S->best > 0 ? S->bestv.name : "-", goal);
      if (mode == 0 && S->best > 0 && t.nrows < P2PK_ALGO_MAX_ROWS) {
        p2pk_algo_row *row = &t.rows[t.nrows++];
        row->transport = staged ? P2PK_TRANSPORT_SHM : P2PK_TRANSPORT_P2P;
        row->min_ranks = row->max_ranks = B.n;
        row->max_bytes = si == nsizes - 1 ? SIZE_MAX : bytes;
        if (S->bestv.algo >= 0) {
          row->algo = S->bestv.algo;
          row->proto = S->bestv.proto;
          row->blocks = S->bestv.blocks;
          row->threads = S->bestv.threads;
          row->chunk = S->bestv.chunk;
        } else { /* the built-in choice won: write down what it chose */
          p2pk_algo_force none = {-1, -1, 0, 0, 0};
          p2pk_algo_choice ch;
          p2pk_comm_set_force(B.comm[0], &none);
          p2pk_comm_choose(B.comm[0], bytes, &ch);
          row->algo = ch.algo;
          row->proto = ch.proto;
          row->blocks = ch.blocks;
          row->threads = ch.threads;
          row->chunk = ch.chunk;
        }
      }
    }
  /* Other rank counts and transports keep the built-in rows. */
  p2pk_algo_table builtin;
  p2pk_algo_table_default(&builtin);
  for (int i = 0; i < builtin.nrows && t.nrows < P2PK_ALGO_MAX_ROWS; i++) t.rows[t.nrows++] = builtin.rows[i];
  if (table_path && t.nrows) {
    FILE *f = fopen(table_path, "w");
    if (f) {
      p2pk_algo_table_write(&t, f);
      fclose(f);
      printf("# eager winners written to %s (load with P2PKIT_ALGO_TABLE)\n", table_path);
    }
  }
  free(v);
  for (int r = 0; r < B.n; r++) {
    if (B.have_nccl) B.nccl.CommDestroy(B.ncomm[r]);
    p2pkit_comm_destroy(B.comm[r]);
    cudaSetDevice(r);
    cudaFree(B.in[r]);
    cudaFree(B.out[r]);
    cudaStreamDestroy(B.s[r]);
  }
  if (B.have_nccl) p2pk_nccl_unload(&B.nccl);
  return 0;
}
