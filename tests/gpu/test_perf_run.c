/* SPDX-License-Identifier: BSD-3-Clause */
/* `p2pkit perf` end to end on two GPUs, every mode (one process eager and
 * graph, -p 2), NCCL alone and p2pkit against NCCL: exit 0, #wrong 0 on every
 * line, JSON that parses; and on one GPU (-g 1, -p 1: a communicator of one
 * rank, which NCCL also makes) every collective. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "gpu/gpu_test.h"
#include "nccl/nccl_dl.h"
#include "test.h"

static char out[1 << 16];

/* Run the CLI; stdout into `out`; returns the exit code. */
static int run(const char *args) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "P2PKIT_TIMEOUT=60 %s perf %s", P2PK_CLI, args);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = '\0';
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Every data line: the #wrong columns are 0. Returns the number of lines. */
static int data_lines_all_right(int wrong_cols_at[], int ncols) {
  int lines = 0;
  for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n")) {
    const char *first = l + strspn(l, " ");
    if (*first < '0' || *first > '9') continue; /* header, footer, JSON */
    char tok[32][32];
    int n = 0;
    for (char *s = l; *s && n < 32;) {
      while (*s == ' ') s++;
      int len = 0;
      while (s[len] && s[len] != ' ') len++;
      if (!len) break;
      snprintf(tok[n++], 32, "%.*s", len, s);
      s += len;
    }
    for (int c = 0; c < ncols; c++)
      if (wrong_cols_at[c] < n && strcmp(tok[wrong_cols_at[c]], "0") != 0)
        T_FAIL("line '%s': #wrong column %d is %s", l, wrong_cols_at[c], tok[wrong_cols_at[c]]);
    lines++;
  }
  return lines;
}

static int have_nccl(void) {
  p2pk_nccl_api api;
  if (p2pk_nccl_load(&api, NULL) == P2PKIT_SUCCESS) return 1;
  printf("note: no NCCL (%s); NCCL cases skipped\n", p2pkit_last_error());
  return 0;
}

/* The cases that need two GPUs skip (said so) on a machine of one. */
static int two_gpus(void) {
  int n = 0;
  if (p2pk_gpu_count(&n) == P2PKIT_SUCCESS && n >= 2) return 1;
  printf("SKIP %s: needs 2 GPUs; this machine has %d\n", t_current, n);
  return 0;
}

/* One GPU: every collective on a communicator of one rank, one process
 * (eager and graph) and one process of one, checked (-c 1), against NCCL's
 * own one-rank communicator where NCCL is present; then the errors a user
 * of one GPU meets: -g 2 and -p 2 name how many GPUs the machine has. */
TEST(one_gpu) {
  int nccl = have_nccl();
  static const char *colls[] = {"all_reduce", "broadcast", "reduce", "all_gather",
                                "reduce_scatter", "sendrecv", "alltoall"};
  static const char *modes[] = {"-g 1", "-g 1 -G 1", "-p 1"};
  int vs_cols[] = {8, 10, 15, 17}, cols[] = {8, 12};
  for (int c = 0; c < 7; c++)
    for (int m = 0; m < 3; m++) {
      char args[256];
      snprintf(args, sizeof args, "%s %s %s -b 4 -e 64M -f 64 -n 3 -w 1 --repeats 1 -c 1", colls[c],
               modes[m], nccl ? "--vs-nccl" : "");
      int rc = run(args);
      if (rc != 0) T_FAIL("perf %s: exit %d:\n%s", args, rc, out);
      CHECK(strstr(out, "# Out of bounds values : 0 OK") != NULL);
      /* 4 B .. 64 MiB by 64x */
      int lines = nccl ? data_lines_all_right(vs_cols, 4) : data_lines_all_right(cols, 2);
      if (lines != 5) T_FAIL("perf %s: %d data lines, want 5", args, lines);
    }
  int n = 0;
  CHECK_OK(p2pk_gpu_count(&n));
  if (n == 1) {
    CHECK(run("all_reduce -g 2 -b 8 -e 8") != 0);
    CHECK(run("all_reduce -p 2 -b 8 -e 8 2>&1") != 0);
    CHECK(strstr(out, "needs 2 GPUs") != NULL);
  }
}

TEST(nccl_every_mode) {
  if (!two_gpus() || !have_nccl()) return;
  static const char *modes[] = {"-g 2", "-g 2 -G 1", "-p 2", "-p 2 -G 1"};
  int cols[] = {8, 12};
  for (int m = 0; m < 4; m++) {
    char args[256];
    snprintf(args, sizeof args, "all_reduce --nccl-only %s -b 8 -e 4M -f 8 -n 3 -w 1 --repeats 3", modes[m]);
    CHECK_EQ(run(args), 0);
    CHECK(strstr(out, "# Out of bounds values : 0 OK") != NULL);
    CHECK_EQ(data_lines_all_right(cols, 2), 7); /* 8 B .. 2 MiB by 8x */
  }
  /* every collective NCCL has, checked */
  static const char *colls[] = {"broadcast", "reduce", "all_gather", "reduce_scatter", "sendrecv", "alltoall"};
  for (int c = 0; c < 6; c++) {
    char args[256];
    snprintf(args, sizeof args, "%s --nccl-only -g 2 -b 1K -e 1M -f 32 -n 2 -w 1 --repeats 1 -d half -o max -r 1", colls[c]);
    CHECK_EQ(run(args), 0);
    CHECK(strstr(out, "# Out of bounds values : 0 OK") != NULL);
  }
}

TEST(p2pkit_against_nccl) {
  if (!two_gpus()) return;
  int nccl = have_nccl();
  int vs_cols[] = {8, 10, 15, 17}, cols[] = {8, 12};
  static const char *modes[] = {"-g 2", "-g 2 -G 1", "-p 2"};
  for (int m = 0; m < 3; m++) {
    char args[256];
    snprintf(args, sizeof args, "all_reduce %s %s -b 8 -e 8M -f 8 -n 3 -w 1 --repeats 3", modes[m],
             nccl ? "--vs-nccl" : "");
    CHECK_EQ(run(args), 0);
    CHECK(strstr(out, "# Out of bounds values : 0 OK") != NULL);
    CHECK_EQ(nccl ? data_lines_all_right(vs_cols, 4) : data_lines_all_right(cols, 2), 7);
  }
  static const char *ops[] = {"-d float -o sum", "-d half -o avg", "-d bfloat16 -o max",
                              "-d int32 -o prod", "-d uint8 -o min", "-d double -o sum", "-d int64 -o avg"};
  for (int o = 0; o < 7; o++) {
    char args[256];
    snprintf(args, sizeof args, "all_reduce -g 2 %s -b 4 -e 1M -f 16 -n 2 -w 1 --repeats 1", ops[o]);
    CHECK_EQ(run(args), 0);
  }
  CHECK_EQ(run("all_reduce -g 2 -b 8 -e 64K -f 16 -n 2 -w 1 --repeats 1 --json"), 0);
  CHECK(strstr(out, "\"schema_version\": 1") != NULL);
}

static void need_one(void) { T_REQUIRE_GPUS(1); }

T_MAIN(T_CASE(need_one), T_CASE(one_gpu), T_CASE(nccl_every_mode), T_CASE(p2pkit_against_nccl))
