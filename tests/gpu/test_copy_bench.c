/* SPDX-License-Identifier: BSD-3-Clause */
/* The bench on two GPUs: a small run of every method and mode (all verified),
 * the SM and staging sweeps, a run that does not fit (refused before any
 * allocation), running out of memory at every allocation of a run (clean
 * error, device memory back to where it was), and the CLI's bad input. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench.h"
#include "core/param.h"
#include "gpu/gpu_test.h"
#include "test.h"

#ifndef P2PK_CLI
#define P2PK_CLI "p2pkit"
#endif

static int parse(const char *line, p2pk_bench_opts *o, int ngpus) {
  char buf[512], err[512];
  char *argv[40];
  int argc = 0;
  snprintf(buf, sizeof buf, "%s", line);
  argv[argc++] = "bench";
  for (char *t = strtok(buf, " "); t && argc < 40; t = strtok(NULL, " ")) argv[argc++] = t;
  p2pk_bench_opts_init(o);
  if (p2pk_bench_parse(argc, argv, o, err, sizeof err) != 0 ||
      p2pk_bench_validate(o, ngpus, err, sizeof err) != 0) {
    T_FAIL("'%s': %s", line, err);
    return -1;
  }
  return 0;
}

static size_t free_mem(int dev) {
  size_t f = 0, t = 0;
  cudaSetDevice(dev);
  cudaDeviceSynchronize();
  cudaMemGetInfo(&f, &t);
  return f;
}

static p2pkit_ctx_t ctx;

static p2pkit_status_t run(const char *line, p2pk_bench_report *r) {
  p2pk_bench_opts o;
  p2pk_bench_report_init(r);
  if (parse(line, &o, 2) != 0) return P2PKIT_ERR_INVALID_ARGUMENT;
  p2pkit_status_t st = p2pk_bench_run(&o, ctx, r);
  p2pk_bench_opts_free(&o);
  return st;
}

static void writers_ok(const p2pk_bench_report *r) {
  p2pkit_status_t (*fns[])(const p2pk_bench_report *, FILE *) = {
      p2pk_bench_write_table, p2pk_bench_write_json, p2pk_bench_write_csv, p2pk_bench_write_svg};
  for (size_t i = 0; i < 4; i++) {
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (!f) continue;
    CHECK_OK(fns[i](r, f));
    CHECK(ftell(f) > 100);
    fclose(f);
  }
}

TEST(small_run) {
  p2pk_bench_report r;
  CHECK_OK(run("--gpus 0,1 --mode oneway,both,all -b 4K -e 1M -f 256 -n 3 -w 1 --latency "
               "--lat-iters 50", &r));
  CHECK_EQ(r.nrows, 2 * P2PK_BM_COUNT * (2 + 3 + 3));
  CHECK_EQ(r.nlats, 2 * P2PK_LAT_COUNT);
  int ok = 0;
  for (int i = 0; i < r.nrows; i++) {
    const p2pk_bench_row *x = &r.rows[i];
    if (x->status == P2PK_ROW_SKIPPED) continue;
    CHECK_EQ(x->status, P2PK_ROW_OK);
    if (x->status != P2PK_ROW_OK) printf("  %s: %s\n", p2pk_bench_method_name(x->method), x->note);
    CHECK(x->verified);
    CHECK(x->gbps > 0);
    CHECK_EQ(x->us.n, 3);
    ok++;
  }
  CHECK(ok >= 2 * 3 * 8); /* staged, serial and driver run everywhere */
  /* A group's time per run is at least each of its copies' (the slowest
   * copy's, or first start to last end), so its median is too, and its
   * rate is at most the sum of its pairs' rates. */
  for (int i = 0; i < r.nrows; i++) {
    const p2pk_bench_row *t = &r.rows[i];
    if (!t->total || t->status != P2PK_ROW_OK) continue;
    double sum = 0;
    int members = 0;
    for (int j = 0; j < r.nrows; j++) {
      const p2pk_bench_row *x = &r.rows[j];
      if (x->total || x->status != P2PK_ROW_OK || x->method != t->method || x->mode != t->mode ||
          x->bytes != t->bytes)
        continue;
      if (t->mode == P2PK_MODE_BOTH && !((x->src == t->src && x->dst == t->dst) ||
                                         (x->src == t->dst && x->dst == t->src)))
        continue;
      CHECK(t->us.median >= x->us.median * 0.999);
      sum += x->gbps;
      members++;
    }
    CHECK_EQ(members, t->npairs);
    CHECK(t->gbps <= sum * 1.001);
  }
  for (int i = 0; i < r.nlats; i++) {
    const p2pk_bench_lat *l = &r.lats[i];
    if (l->status == P2PK_ROW_SKIPPED) continue;
    CHECK_EQ(l->status, P2PK_ROW_OK);
    CHECK(l->verified);
    CHECK(l->us.median > 0);
    if (l->kind == P2PK_LAT_FLAG) printf("  sm-flag %d->%d one way: %.2f us (globaltimer %.2f us)\n",
                                         l->src, l->dst, l->us.median, l->gt_us);
  }
  writers_ok(&r);
  p2pk_bench_report_free(&r);
}

/* Every configuration of the full SM sweep and the staging sweep runs and
 * verifies, the TMA ones at exactly 48 KiB of dynamic shared memory (plus the
 * kernel's static mbarriers: over the default limit) included. */
TEST(sweeps) {
  p2pk_bench_report r;
  CHECK_OK(run("--pairs 0:1 --sm-sweep --stage-sweep -b 4M -n 2 -w 1", &r));
  int nsm = p2pk_bench_sm_sweep_configs(P2PK_SM_SWEEP_FULL, NULL, P2PK_BENCH_MAX_SM_CONFIGS);
  CHECK_EQ(r.nsweeps, 2 * nsm + 40);
  int staged = 0, at48k = 0;
  for (int i = 0; i < r.nsweeps; i++) {
    const p2pk_bench_sweep *s = &r.sweeps[i];
    staged += s->method == P2PK_BM_STAGED;
    if (s->status != P2PK_ROW_OK || !s->verified)
      printf("  %s %s: %s\n", p2pk_bench_method_name(s->method), s->config, s->note);
    CHECK_EQ(s->status, P2PK_ROW_OK);
    CHECK(s->verified);
    CHECK(s->gbps > 0);
    if (s->method != P2PK_BM_STAGED && s->sm.kind == P2PK_SMK_TMA &&
        s->sm.tile_kib * s->sm.stages == 48 && s->status == P2PK_ROW_OK)
      at48k++;
  }
  CHECK_EQ(staged, 40);
  CHECK_EQ(at48k, 16); /* tile=8K,stages=6 and tile=16K,stages=3 at bps 1-4, push and pull */
  writers_ok(&r);
  p2pk_bench_report_free(&r);
}

/* The short sweep: every configuration in it runs, every kind is in it. */
TEST(short_sweep) {
  p2pk_bench_report r;
  CHECK_OK(run("--pairs 1:0 --sm-sweep=short -b 4M -n 2 -w 1", &r));
  int n = p2pk_bench_sm_sweep_configs(P2PK_SM_SWEEP_SHORT, NULL, P2PK_BENCH_MAX_SM_CONFIGS);
  CHECK_EQ(r.nsweeps, 2 * n);
  unsigned kinds = 0;
  for (int i = 0; i < r.nsweeps; i++) {
    const p2pk_bench_sweep *s = &r.sweeps[i];
    if (s->status != P2PK_ROW_OK || !s->verified)
      printf("  %s %s: %s\n", p2pk_bench_method_name(s->method), s->config, s->note);
    CHECK_EQ(s->status, P2PK_ROW_OK);
    CHECK(s->verified);
    CHECK_EQ(s->src, 1);
    kinds |= 1u << s->sm.kind;
  }
  CHECK_EQ(kinds, (1u << P2PK_SMK_COUNT) - 1);
  p2pk_bench_report_free(&r);
}

/* A configuration that fails is recorded with its reason and the sweep goes
 * on: the run succeeds and the CLI's verdict is ok. A sweep of which every
 * configuration failed fails the run. */
TEST(sweep_failures) {
  p2pk_bench_report r;
  p2pk_bench_fail_sweep = 3; /* the third measurement: the second configuration's push */
  CHECK_OK(run("--pairs 0:1 --sm-sweep=short --stage-sweep -b 4M -n 2 -w 1", &r));
  CHECK_EQ(p2pk_bench_fail_sweep, 0);
  int n = p2pk_bench_sm_sweep_configs(P2PK_SM_SWEEP_SHORT, NULL, P2PK_BENCH_MAX_SM_CONFIGS);
  CHECK_EQ(r.nsweeps, 2 * n + 40);
  int failed = 0;
  for (int i = 0; i < r.nsweeps; i++) {
    const p2pk_bench_sweep *s = &r.sweeps[i];
    if (i == 2) {
      CHECK_EQ(s->status, P2PK_ROW_FAILED);
      CHECK(strstr(s->note, "(injected)") != NULL);
      failed++;
      continue;
    }
    CHECK_EQ(s->status, P2PK_ROW_OK);
    CHECK(s->verified);
  }
  CHECK_EQ(failed, 1);
  CHECK_EQ(p2pk_bench_sweep_failed(&r), 1);
  char msg[256] = "";
  CHECK_EQ(p2pk_bench_failures(&r, msg, sizeof msg), 0);
  writers_ok(&r);
  p2pk_bench_report_free(&r);

  p2pk_bench_fail_sweep = -1; /* every one */
  CHECK_EQ(run("--pairs 0:1 --stage-sweep -b 4M -n 2 -w 1", &r), P2PKIT_ERR_CUDA);
  p2pk_bench_fail_sweep = 0;
  CHECK(strstr(p2pkit_last_error(), "every one of the 40 staged sweep configurations failed") != NULL);
  CHECK_EQ(r.nsweeps, 40);
  for (int i = 0; i < r.nsweeps; i++) CHECK_EQ(r.sweeps[i].status, P2PK_ROW_FAILED);
  CHECK_EQ(p2pk_bench_failures(&r, msg, sizeof msg), -1);
  CHECK_STR(msg, "every one of the 40 staged sweep configurations failed (see the notes)");
  p2pk_bench_report_free(&r);
}

TEST(does_not_fit) {
  size_t f0 = free_mem(0), f1 = free_mem(1);
  p2pk_bench_report r;
  CHECK_EQ(run("--pairs 0:1 -b 100T --methods staged", &r), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "size 100 TiB does not fit: the run needs") != NULL);
  CHECK_EQ(r.nrows, 0);
  CHECK_EQ(free_mem(0), f0);
  CHECK_EQ(free_mem(1), f1);
  p2pk_bench_report_free(&r);
}

/* Fail the k-th allocation of a run for every k until the run gets through. */
TEST(out_of_memory) {
  p2pk_bench_report r;
  const char *line = "--gpus 0,1 --mode oneway,both --methods staged,ce -b 64M -n 2 -w 1 --latency "
                     "--lat-iters 20";
  CHECK_OK(run(line, &r)); /* warm: modules loaded, staging buffers pinned */
  p2pk_bench_report_free(&r);
  size_t f0 = free_mem(0), f1 = free_mem(1);
  int points = 0;
  for (int k = 1; k <= 200; k++) {
    p2pk_bench_fail_alloc = k;
    p2pkit_status_t st = run(line, &r);
    int fired = p2pk_bench_fail_alloc == 0;
    p2pk_bench_report_free(&r);
    if (!fired) {
      CHECK_OK(st);
      break;
    }
    points++;
    CHECK_EQ(st, P2PKIT_ERR_NO_MEMORY);
    CHECK(strstr(p2pkit_last_error(), "(injected)") != NULL);
    size_t g0 = free_mem(0), g1 = free_mem(1);
    if (g0 + (2u << 20) < f0 || g1 + (2u << 20) < f1)
      T_FAIL("allocation %d failing leaked device memory: %zu / %zu bytes", k, f0 - g0, f1 - g1);
  }
  p2pk_bench_fail_alloc = 0;
  printf("  %d allocation points failed cleanly\n", points);
  CHECK(points >= 8);
}

/* Run the CLI; exit code, and stderr into `err`. */
static int cli(const char *args, char *err, size_t len) {
  char path[] = "/tmp/p2pkit_bench_errXXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return -1;
  close(fd);
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "'%s' bench %s >/dev/null 2>'%s'", P2PK_CLI, args, path);
  int rc = system(cmd);
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(err, 1, len - 1, f) : 0;
  err[n] = '\0';
  if (f) fclose(f);
  unlink(path);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static int lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

TEST(cli_input) {
  char err[2048];
  CHECK_EQ(cli("-b 100T", err, sizeof err), 2);
  CHECK(strstr(err, "does not fit") != NULL);
  CHECK_EQ(lines(err), 1);
  CHECK_EQ(cli("--gpus 0,99", err, sizeof err), 2);
  CHECK(strstr(err, "GPU 99 does not exist") != NULL);
  CHECK_EQ(lines(err), 1);
  CHECK_EQ(cli("--pairs 0:1,1:7", err, sizeof err), 2);
  CHECK(strstr(err, "GPU 7 does not exist") != NULL);
  CHECK_EQ(cli("--pairs 0:1,0:1", err, sizeof err), 2);
  CHECK(strstr(err, "given twice") != NULL);
  CHECK_EQ(cli("-b 0", err, sizeof err), 2);
  CHECK_EQ(cli("--methods warp", err, sizeof err), 2);

  char base[] = "/tmp/p2pkit_benchXXXXXX";
  if (!mkdtemp(base)) {
    T_FAIL("mkdtemp");
    return;
  }
  char args[1024];
  snprintf(args, sizeof args, "--pairs 0:1,1:0 -b 1M -e 4M -f 4 -n 3 -w 1 -q --json=%s/b.json "
           "--csv=%s/b.csv --plot %s/b.svg", base, base, base);
  CHECK_EQ(cli(args, err, sizeof err), 0);
  static const char *const files[] = {"b.json", "b.csv", "b.svg"};
  for (int i = 0; i < 3; i++) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", base, files[i]);
    FILE *f = fopen(p, "r");
    CHECK(f != NULL);
    if (!f) continue;
    char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    CHECK(n > 200);
    if (i == 0) {
      CHECK(strstr(text, "\"verified\": true") != NULL);
      CHECK(strstr(text, "\"verified\": false") == NULL);
    }
    unlink(p);
  }
  rmdir(base);
}

static void run_all(void);
T_MAIN(T_CASE(run_all))

/* The cases share one context. run_all has no checks of its own: it fails
 * when a case did, and then names them (each failed check printed its
 * file:line when it failed; stdout is line-buffered so that the "FAILED"
 * lines come out in order with those messages). */
static void run_all(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  T_REQUIRE_GPUS(2);
  unsetenv("P2PKIT_P2P_DISABLE");
  p2pk_param_reset();
  CHECK_OK(p2pkit_ctx_create(NULL, &ctx));
  if (!ctx) return;
  static const t_case cases[] = {T_CASE(small_run),   T_CASE(does_not_fit),
                                 T_CASE(out_of_memory), T_CASE(cli_input),
                                 T_CASE(sweeps),      T_CASE(short_sweep),
                                 T_CASE(sweep_failures)};
  char failed[512];
  int nfailed = t_run_cases(cases, sizeof cases / sizeof cases[0], failed, sizeof failed);
  t_current = "run_all";
  p2pkit_ctx_destroy(ctx);
  if (nfailed)
    fprintf(stderr, "run_all: %d of %zu cases failed: %s (their checks are above)\n", nfailed,
            sizeof cases / sizeof cases[0], failed);
}
