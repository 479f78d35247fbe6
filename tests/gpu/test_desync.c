/* SPDX-License-Identifier: BSD-3-Clause */
/* Desync reports from real jobs: three ranks, a process each (on one GPU
 * with P2PKIT_SHARE_GPUS=1), make five calls together (all-reduces, then a
 * broadcast), then the sixth goes wrong, each rank's report lands in a
 * fresh P2PKIT_TRACE_DIR, and the library's analysis and `p2pkit trace`
 * must both give the verdict in one line:
 *   skip   rank 1 calls all_gather where ranks 0 and 2 call all_reduce
 *          (the kernels' header check fails everywhere at once);
 *   count  rank 1 passes count 1000 where the others pass 1024;
 *   die    rank 2 exits after call 5; ranks 0 and 1 time out (P2PKIT_TIMEOUT
 *          5 s) at call 6 and, dumping, see its process gone;
 *   hang   rank 1 stops after call 5 in its own code, the others wait at
 *          call 6 with a 120 s timeout; this test, as a user would, sends
 *          each process P2PKIT_TRACE_SIGNAL=USR2 and every rank dumps.
 * DESYNC_KEEP_DIR=DIR keeps each job's reports in DIR/<case> (the device
 * suite brings them back as recorded jobs). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "gpu_test.h"
#include "coll_runner.h"
#include "trace/trace.h"

#define NR 3
#define COUNT 1024

static size_t runner_cap(int nr) { return (size_t)COUNT * 4 * (size_t)nr; }

/* ------------------------------------------------------------ a rank -- */

static void mark(const char *what, int rank) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s.r%d", getenv("P2PKIT_TRACE_DIR"), what, rank);
  const int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd >= 0) close(fd);
}

static int marked(const char *what, int rank) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s.r%d", getenv("P2PKIT_TRACE_DIR"), what, rank);
  return access(p, F_OK) == 0;
}

/* Calls 1-5, every rank alike, each waited for. */
static int warm_up(runner_t *R) {
  for (int i = 1; i <= 5; i++) {
    const p2pkit_status_t st =
        i < 5 ? p2pkit_all_reduce(R->din[0], R->dout[0], COUNT, P2PKIT_FLOAT32, P2PKIT_SUM, R->comm[0], R->s[0])
              : p2pkit_broadcast(R->din[0], R->dout[0], COUNT, P2PKIT_FLOAT32, 0, R->comm[0], R->s[0]);
    if (st != P2PKIT_SUCCESS || cudaStreamSynchronize(R->s[0]) != cudaSuccess) {
      T_FAIL("rank %d: call %d: %s", R->rank0, i, p2pkit_last_error());
      return -1;
    }
  }
  return 0;
}

/* Call 6 as the mode has this rank make it. */
static p2pkit_status_t call6(runner_t *R, const char *mode) {
  const int odd = R->rank0 == 1;
  if (strcmp(mode, "skip") == 0 && odd)
    return p2pkit_all_gather(R->din[0], R->dout[0], COUNT, P2PKIT_FLOAT32, R->comm[0], R->s[0]);
  const size_t n = strcmp(mode, "count") == 0 && odd ? 1000 : COUNT;
  return p2pkit_all_reduce(R->din[0], R->dout[0], n, P2PKIT_FLOAT32, P2PKIT_SUM, R->comm[0], R->s[0]);
}

/* skip, count, die: call 6 fails on the device, the error is read (which
 * writes the report). */
static int failing_rank(runner_t *R, const char *mode) {
  if (call6(R, mode) != P2PKIT_SUCCESS) T_FAIL("rank %d: call 6 refused: %s", R->rank0, p2pkit_last_error());
  cudaStreamSynchronize(R->s[0]);
  p2pkit_status_t as = P2PKIT_SUCCESS;
  CHECK_OK(p2pkit_comm_get_async_error(R->comm[0], &as));
  const p2pkit_status_t want = strcmp(mode, "die") == 0 ? P2PKIT_ERR_TIMEOUT : P2PKIT_ERR_INVALID_ARGUMENT;
  if (as != want && as != P2PKIT_ERR_REMOTE)
    T_FAIL("rank %d: the error after call 6 is %s, wanted %s", R->rank0, p2pkit_strerror(as),
           p2pkit_strerror(want));
  return 0;
}

/* hang: rank 1 stops in its own code, the others enqueue call 6; each
 * says it is there and waits to be killed. */
static void hanging_rank(runner_t *R) {
  if (R->rank0 != 1 && call6(R, "hang") != P2PKIT_SUCCESS)
    T_FAIL("rank %d: call 6 refused: %s", R->rank0, p2pkit_last_error());
  mark("ready", R->rank0);
  for (int i = 0; i < 600; i++) usleep(100000);
  _exit(3); /* never killed: the test's side failed */
}

static int child_main(int argc, char **argv) {
  const char *mode = NULL;
  int rank = 0, port = 0, nranks = 0;
  const int bad = cu_child_args(argc, argv, &mode, &rank, &port, &nranks);
  if (bad) return bad;
  signal(SIGUSR2, SIG_DFL); /* as an application that never touched it */
  setvbuf(stdout, NULL, _IOLBF, 0);
  const int hang = strcmp(mode, "hang") == 0;
  runner_t R;
  if (runner_join(&R, rank, nranks, port, hang ? 120 : 5) != 0 || warm_up(&R) != 0) _exit(1);
  if (hang) hanging_rank(&R);
  if (strcmp(mode, "die") == 0) {
    if (rank < 2) mark("done5", rank);
    for (int i = 0; rank == 2 && i < 3000 && !(marked("done5", 0) && marked("done5", 1)); i++) usleep(10000);
    if (rank == 2) _exit(0); /* gone, without a word */
  }
  failing_rank(&R, mode);
  fflush(NULL);
  _exit(t_failed ? 1 : 0); /* the communicator is dead: no teardown with its peers */
}

/* ------------------------------------------------------------ the job -- */

/* The ranks as `prog --child MODE RANK PORT NRANKS`, not waited for. */
static void spawn(const char *mode, int port, pid_t *pid) {
  char ports[16], nranks[16], ranks[NR][16];
  snprintf(ports, sizeof ports, "%d", port);
  snprintf(nranks, sizeof nranks, "%d", NR);
  for (int r = 0; r < NR; r++) {
    snprintf(ranks[r], sizeof ranks[r], "%d", r);
    char *argv[] = {"test_desync", "--child", (char *)mode, ranks[r], ports, nranks, NULL};
    fflush(NULL);
    pid[r] = fork();
    if (pid[r] == 0) {
      execv("/proc/self/exe", argv);
      _exit(127);
    }
  }
}

/* Until every rank has ended (reaped at once, so a dead one is gone, not a
 * zombie), at most limit_s; then kill the rest. hang: once every rank is
 * ready, USR2 to each, and the kill once all three reports are there. */
static void wait_job(const char *mode, const char *dir, pid_t *pid, int *status, int limit_s) {
  int done[NR] = {0}, ndone = 0, signalled = 0;
  const double t0 = cu_now();
  while (ndone < NR) {
    for (int r = 0; r < NR; r++)
      if (!done[r] && waitpid(pid[r], &status[r], WNOHANG) == pid[r]) done[r] = 1, ndone++;
    const int hang = strcmp(mode, "hang") == 0;
    if (hang && !signalled && marked("ready", 0) && marked("ready", 1) && marked("ready", 2)) {
      usleep(500000);
      for (int r = 0; r < NR; r++) kill(pid[r], SIGUSR2);
      signalled = 1;
    }
    p2pk_tdump *d = NULL;
    p2pk_tbad *bad = NULL;
    size_t n = 0, nbad = 0;
    /* Every report whole (one being written reads as cut: wait on). */
    if (signalled && p2pk_trace_load_dir(dir, &d, &n, &bad, &nbad) == P2PKIT_SUCCESS && n == NR)
      for (int r = 0; r < NR; r++) kill(pid[r], SIGKILL);
    for (size_t i = 0; i < n; i++) p2pk_tdump_free(&d[i]);
    free(d);
    free(bad);
    if (cu_now() - t0 > limit_s) {
      T_FAIL("%s: the job still runs after %d s", mode, limit_s);
      for (int r = 0; r < NR; r++) kill(pid[r], SIGKILL);
      limit_s = 1 << 30;
    }
    usleep(20000);
  }
}

/* `p2pkit trace DIR`'s first line. */
static void cli_first_line(const char *dir, char *out, size_t len) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s trace %s 2>&1", P2PK_CLI, dir);
  out[0] = '\0';
  FILE *p = popen(cmd, "r");
  if (!p) return;
  if (fgets(out, (int)len, p)) out[strcspn(out, "\n")] = '\0';
  while (fgetc(p) != EOF) {
  }
  pclose(p);
}

/* The job's reports in dir: the verdict (kind, seq 6, culprit rank) and
 * its line, from the library and from the command. */
typedef struct {
  p2pk_tdump *d;
  size_t n;
  p2pk_tbad *bad;
  size_t nbad;
} loaded_t;

static void judge(const char *mode, const char *dir, int verdict, int culprit, const char *head,
                  const char *tail) {
  loaded_t l;
  memset(&l, 0, sizeof l);
  CHECK_OK(p2pk_trace_load_dir(dir, &l.d, &l.n, &l.bad, &l.nbad));
  CHECK_EQ(l.nbad, 0);
  CHECK_EQ(l.n, verdict == P2PK_TV_GONE ? NR - 1 : NR);
  p2pk_tjob job;
  CHECK_OK(p2pk_trace_analyze(l.d, l.n, NULL, NULL, &job));
  CHECK_EQ(job.ncomms, 1);
  if (job.ncomms == 1) {
    const p2pk_tcomm *c = &job.comms[0];
    printf("%s: %s\n", mode, c->line);
    CHECK_EQ(c->verdict, verdict);
    CHECK_EQ(c->seq, 6);
    for (int r = 0; r < NR; r++) CHECK_EQ(c->culprits[r], r == culprit);
    if (strncmp(c->line, head, strlen(head)) != 0 || strlen(c->line) < strlen(tail) ||
        strcmp(c->line + strlen(c->line) - strlen(tail), tail) != 0)
      T_FAIL("%s: \"%s\" is not \"%s...%s\"", mode, c->line, head, tail);
    char first[700];
    cli_first_line(dir, first, sizeof first);
    CHECK_STR(first, c->line);
  }
  p2pk_tjob_free(&job);
  for (size_t i = 0; i < l.n; i++) p2pk_tdump_free(&l.d[i]);
  free(l.d);
  free(l.bad);
}

static void job(const char *mode, int verdict, int culprit, const char *head, const char *tail) {
  char dir[256] = "/tmp/p2pk_desync.XXXXXX";
  if (!mkdtemp(dir)) {
    T_FAIL("mkdtemp: %s", strerror(errno));
    return;
  }
  setenv("P2PKIT_TRACE_DIR", dir, 1);
  setenv("P2PKIT_TRACE_SIGNAL", strcmp(mode, "hang") == 0 ? "USR2" : "0", 1);
  pid_t pid[NR];
  int status[NR];
  spawn(mode, free_port(), pid);
  wait_job(mode, dir, pid, status, 90);
  for (int r = 0; r < NR; r++) {
    const int killed = strcmp(mode, "hang") == 0 && WIFSIGNALED(status[r]) && WTERMSIG(status[r]) == SIGKILL;
    if (WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 77) {
      printf("SKIP: %s: needs %d GPUs\n", mode, NR); /* or P2PKIT_SHARE_GPUS=1 */
      return;
    }
    if (!killed) runner_expect_clean_exit(mode, r, NR, status[r]);
  }
  char pid2[96];
  snprintf(pid2, sizeof pid2, "%s (pid %d, gone when rank ", head, (int)pid[2]);
  judge(mode, dir, verdict, culprit, verdict == P2PK_TV_GONE ? pid2 : head, tail);
  char cmd[1200];
  const char *keep = getenv("DESYNC_KEEP_DIR");
  if (keep) snprintf(cmd, sizeof cmd, "mkdir -p %s/%s && rm -f %s/*.r[0-9] && cp %s/* %s/%s/ && rm -rf %s",
                     keep, mode, dir, dir, keep, mode, dir);
  else snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) T_FAIL("%s failed", cmd);
}

TEST(skip) {
  job("skip", P2PK_TV_MISMATCH, 1, "rank 1 called all_gather where ranks 0,2 called all_reduce at seq 6", "");
}

TEST(count) {
  job("count", P2PK_TV_MISMATCH, 1,
      "rank 1 passed count 1000 where ranks 0,2 passed 1024 at seq 6 (all_reduce)", "");
}

TEST(die) {
  job("die", P2PK_TV_GONE, 2, "rank 2's process is gone",
      ") and left no dump; the others' last call was seq 6 (all_reduce)");
}

TEST(hang) {
  job("hang", P2PK_TV_NOT_ARRIVED, 1,
      "rank 1 never arrived at seq 6 (all_reduce); its last call was seq 5 (broadcast, launched)", "");
}

CU_MAIN({T_CASE(skip), 1, CU_PROCS}, {T_CASE(count), 1, CU_PROCS}, {T_CASE(die), 1, CU_PROCS},
        {T_CASE(hang), 1, CU_PROCS})
