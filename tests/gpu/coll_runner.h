/* SPDX-License-Identifier: BSD-3-Clause */
/* What the two collective GPU tests (test_allreduce.c, test_collectives.c)
 * share: the forced-algorithm variants, the runner holding the local ranks'
 * communicators, streams and buffers (one process driving every GPU, or one
 * rank of a process-per-GPU job), both sides of that job (spawning and
 * judging the children, the kill tests), and the case table of main(). Include after test.h and gpu_test.h; the test defines
 * runner_cap(), the bytes of each buffer for a rank count. */
#ifndef P2PK_COLL_RUNNER_H
#define P2PK_COLL_RUNNER_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "coll/coll.h"
#include "coll_util.h"
#include "core/log.h"
#include "core/param.h"
#include "test_net.h"

typedef struct {
  const char *name;
  int algo, proto, blocks, threads;
  size_t chunk;
} variant_t;

typedef struct {
  int nr, nloc, rank0, multiproc;
  int dev[P2PK_COLL_MAX_RANKS];
  p2pkit_comm_t comm[P2PK_COLL_MAX_RANKS];
  cudaStream_t s[P2PK_COLL_MAX_RANKS];
  char *din[P2PK_COLL_MAX_RANKS], *dout[P2PK_COLL_MAX_RANKS];
  size_t cap;                                 /* bytes of every buffer below */
  void *hin[P2PK_COLL_MAX_RANKS];             /* inputs of every rank */
  unsigned char *hout[P2PK_COLL_MAX_RANKS];   /* outputs of the local ranks, read back */
  unsigned char *want;                        /* expected output of one rank */
  int failures;
} runner_t;

static size_t runner_cap(int nr);

static inline void set_variant(runner_t *R, const variant_t *v) {
  p2pk_algo_force f = {v->algo, v->proto, v->blocks, v->threads, v->chunk};
  for (int l = 0; l < R->nloc; l++) p2pk_comm_set_force(R->comm[l], &f);
}

static inline int runner_alloc(runner_t *R) {
  R->cap = runner_cap(R->nr);
  if (!(R->want = malloc(R->cap))) return -1;
  for (int r = 0; r < R->nr; r++)
    if (!(R->hin[r] = malloc(R->cap))) return -1;
  for (int l = 0; l < R->nloc; l++) {
    T_CUDA(cudaSetDevice(R->dev[l]));
    T_CUDA(cudaStreamCreateWithFlags(&R->s[l], cudaStreamNonBlocking));
    T_CUDA(cudaMalloc((void **)&R->din[l], R->cap));
    T_CUDA(cudaMalloc((void **)&R->dout[l], R->cap));
    if (!(R->hout[l] = malloc(R->cap))) return -1;
  }
  return 0;
}

static inline void runner_free(runner_t *R) {
  for (int l = 0; l < R->nloc; l++) {
    cudaSetDevice(R->dev[l]);
    if (R->s[l]) cudaStreamDestroy(R->s[l]);
    cudaFree(R->din[l]);
    cudaFree(R->dout[l]);
    free(R->hout[l]);
  }
  for (int r = 0; r < R->nr; r++) free(R->hin[r]);
  free(R->want);
}

/* One process driving GPUs 0..k-1, k = cu_test_nranks(want) capped by the
 * GPUs present. */
static inline int runner_single(runner_t *R, int want) {
  memset(R, 0, sizeof *R);
  int n = 0, k = cu_test_nranks(want);
  T_CUDA(cudaGetDeviceCount(&n));
  R->nr = R->nloc = n < k ? n : k;
  for (int l = 0; l < R->nloc; l++) R->dev[l] = l;
  p2pkit_status_t st = p2pkit_comm_init_all(R->comm, R->nloc, R->dev);
  if (st != P2PKIT_SUCCESS) {
    T_FAIL("init_all(%d): %s: %s", R->nloc, p2pkit_strerror(st), p2pkit_last_error());
    return -1;
  }
  return runner_alloc(R);
}

static inline void runner_destroy(runner_t *R) {
  runner_free(R);
  for (int l = 0; l < R->nloc; l++)
    if (R->comm[l]) CHECK_OK(p2pkit_comm_destroy(R->comm[l]));
}

/* The child side of process per GPU: `prog --child MODE RANK PORT NRANKS`
 * (cu_spawn_ranks). 0 with *mode, *rank, *port, *nranks set, or the exit
 * code the child returns: 2 bad arguments, 77 fewer GPUs than ranks. */
static inline int cu_child_args(int argc, char **argv, const char **mode, int *rank, int *port,
                                int *nranks) {
  if (argc < 6) return 2;
  *mode = argv[2];
  *rank = atoi(argv[3]), *port = atoi(argv[4]), *nranks = atoi(argv[5]);
  t_current = *mode;
  if (*nranks < 2 || *nranks > P2PK_COLL_MAX_RANKS || *rank < 0 || *rank >= *nranks) return 2;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1 || (n < *nranks && !cu_share_gpus())) return 77;
  return 0;
}

/* Rank `rank` of `nranks` joins the job on GPU cu_rank_device(rank) (loopback rendezvous
 * at `port`, the tests' secret) and allocates its buffers. 0, or 1 after
 * saying why. */
static inline int runner_join(runner_t *R, int rank, int nranks, int port, int timeout_s) {
  p2pkit_comm_opts_t o;
  p2pkit_comm_opts_init(&o);
  o.nranks = nranks;
  o.rank = rank;
  const int dev = cu_rank_device(rank);
  o.device = dev;
  o.addr = "127.0.0.1";
  o.port = port;
  o.secret = "p2pkit-test-secret";
  o.timeout_s = timeout_s;
  memset(R, 0, sizeof *R);
  R->nr = nranks;
  R->nloc = 1;
  R->rank0 = rank;
  R->multiproc = 1;
  R->dev[0] = dev;
  T_CUDA(cudaSetDevice(dev));
  p2pkit_status_t st = p2pkit_comm_init_rank(&o, &R->comm[0]);
  if (st != P2PKIT_SUCCESS) {
    fprintf(stderr, "rank %d: init_rank: %s: %s\n", rank, p2pkit_strerror(st), p2pkit_last_error());
    return 1;
  }
  CHECK_EQ(p2pkit_comm_rank(R->comm[0]), rank);
  CHECK_EQ(p2pkit_comm_size(R->comm[0]), nranks);
  CHECK_EQ(p2pkit_comm_device(R->comm[0]), dev);
  return runner_alloc(R) != 0;
}

/* A communicator of one rank on GPU 0 (what a job on a one-GPU machine, or
 * torchrun --nproc_per_node=1, makes): every collective of one rank is a
 * local copy or nothing. multiproc: rank 0 of 1 of a process-per-GPU job
 * (runner_join: p2pkit_comm_init_rank, no rendezvous with one rank), else
 * p2pkit_comm_init_all over one GPU. 0, or -1 after failing the test. */
static inline int runner_one_rank(runner_t *R, int multiproc) {
  if (multiproc) {
    if (runner_join(R, 0, 1, free_port(), 20) == 0) return 0;
    T_FAIL("one rank: init_rank (rank 0 of 1) failed");
    return -1;
  }
  memset(R, 0, sizeof *R);
  R->nr = R->nloc = 1;
  T_CUDA(cudaSetDevice(0));
  p2pkit_status_t st = p2pkit_comm_init_all(R->comm, 1, R->dev);
  if (st != P2PKIT_SUCCESS) {
    T_FAIL("one rank: init_all: %s: %s", p2pkit_strerror(st), p2pkit_last_error());
    return -1;
  }
  CHECK_EQ(p2pkit_comm_size(R->comm[0]), 1);
  CHECK_EQ(p2pkit_comm_rank(R->comm[0]), 0);
  return runner_alloc(R);
}

/* --- process per GPU: the parent's side and the kill tests ---------------- */

/* Start one child per rank (cu_test_nranks) of `prog` running `mode` and
 * wait for all of them at most `limit_s` seconds; returns the rank count. */
static inline int runner_spawn(const char *prog, const char *mode, int p2p_disable, int limit_s,
                               int status[P2PK_COLL_MAX_RANKS], pid_t pid[P2PK_COLL_MAX_RANKS]) {
  int n = cu_test_nranks(P2PK_COLL_MAX_RANKS);
  int port = free_port();
  CHECK(port > 0);
  printf("%s: %d ranks, one process each\n", mode, n);
  if (cu_spawn_ranks(prog, mode, n, port, p2p_disable, limit_s, status, pid))
    T_FAIL("%s: children still running after %d s: a hang", mode, limit_s);
  return n;
}

/* Child r of n exited 0, or skipped (exit 77, said so); anything else fails. */
static inline void runner_expect_clean_exit(const char *mode, int r, int n, int status) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
    printf("SKIP: %s rank %d: needs %d GPUs\n", mode, r, n);
    return;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    T_FAIL("%s: rank %d ended with %s %d", mode, r, WIFEXITED(status) ? "exit code" : "signal",
           WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

/* Shared-memory files (/dev/shm/p2pkit-PID-*) that process `pid` created and
 * left behind: p2pkit unlinks each once every rank has mapped it, so a job
 * leaves none, however it ends. */
static inline int shm_left_by(pid_t pid) {
  DIR *d = opendir("/dev/shm");
  if (!d) return 0;
  char prefix[32];
  snprintf(prefix, sizeof prefix, "p2pkit-%d-", (int)pid);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
  closedir(d);
  return n;
}

/* A kill test's parent: rank victim_of(mode, n) must die by SIGKILL and
 * every other rank exit cleanly (having timed out on it), within 90 s, and
 * no rank, the victim included, may leave a shared-memory file behind. */
static inline void runner_kill_test(const char *prog, const char *mode, int p2p_disable,
                                    int (*victim_of)(const char *mode, int n)) {
  int status[P2PK_COLL_MAX_RANKS];
  pid_t pid[P2PK_COLL_MAX_RANKS];
  double t0 = cu_now();
  int n = runner_spawn(prog, mode, p2p_disable, 120, status, pid), victim = victim_of(mode, n);
  for (int r = 0; r < n; r++)
    if (WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 77) {
      printf("SKIP: %s: needs %d GPUs\n", mode, n);
      return;
    }
  if (!WIFSIGNALED(status[victim]) || WTERMSIG(status[victim]) != SIGKILL)
    T_FAIL("%s: rank %d was supposed to die by SIGKILL", mode, victim);
  for (int r = 0; r < n; r++)
    if (r != victim) runner_expect_clean_exit(mode, r, n, status[r]);
  CHECK(cu_now() - t0 < 90);
  for (int r = 0; r < n; r++)
    if (shm_left_by(pid[r]))
      T_FAIL("%s: rank %d left %d file(s) in /dev/shm", mode, r, shm_left_by(pid[r]));
}

/* A kill test's survivor, after the victim died: `call` (`what`, on
 * R->comm[0] and stream R->s[0]) with `needs_victim`
 *   SURV_TIMES_OUT  (it waits for the victim) must end on the stream with
 *                   P2PKIT_ERR_TIMEOUT after about timeout_s seconds, and
 *                   the next call fail at once with the same status;
 *   SURV_FINISHES   (a call between survivors) must succeed;
 *   SURV_MAY_FINISH (it only sends to the victim: a send the victim's slot
 *                   can hold needs nothing back, as with NCCL) may succeed,
 *                   else must time out as above.
 * Returns 1 when the call succeeded. */
enum { SURV_FINISHES = 0, SURV_TIMES_OUT = 1, SURV_MAY_FINISH = 2 };
static inline int runner_survivor_check(runner_t *R, int victim, int timeout_s, const char *what,
                                        int needs_victim, p2pkit_status_t (*call)(void *),
                                        void *ctx) {
  const int rank = R->rank0;
  double t0 = cu_now();
  CHECK_OK(call(ctx));
  cudaError_t e = cudaStreamSynchronize(R->s[0]);
  double waited = cu_now() - t0;
  if (e != cudaSuccess) T_FAIL("survivor rank %d: the stream failed: %s", rank, cudaGetErrorString(e));
  p2pkit_status_t as = P2PKIT_SUCCESS;
  CHECK_OK(p2pkit_comm_get_async_error(R->comm[0], &as));
  if (needs_victim == SURV_FINISHES || (needs_victim == SURV_MAY_FINISH && as == P2PKIT_SUCCESS)) {
    CHECK_EQ(as, P2PKIT_SUCCESS);
    if (needs_victim == SURV_MAY_FINISH)
      printf("rank %d: its send to the dead rank %d finished (buffered)\n", rank, victim);
    return as == P2PKIT_SUCCESS;
  }
  CHECK_EQ(as, P2PKIT_ERR_TIMEOUT);
  if (waited < timeout_s - 0.5 || waited > timeout_s + 4)
    T_FAIL("survivor rank %d: %s ended after %.2f s; timeout %d s", rank, what, waited, timeout_s);
  t0 = cu_now();
  CHECK_EQ(call(ctx), P2PKIT_ERR_TIMEOUT);
  CHECK(cu_now() - t0 < 0.5);
  printf("rank %d: after rank %d died: %s\n", rank, victim, p2pkit_last_error());
  return 0;
}

/* A survivor destroys its communicator: that may fail (the peer is gone) but
 * frees everything, and quickly. */
static inline void runner_destroy_after_kill(runner_t *R) {
  double t0 = cu_now();
  p2pkit_comm_destroy(R->comm[0]);
  R->comm[0] = NULL;
  if (cu_now() - t0 > 5) T_FAIL("survivor rank %d: destroy took %.1f s", R->rank0, cu_now() - t0);
}

/* main()'s case table: the cases marked default (or those named on the
 * command line) in order, each with its verdict and time, those the
 * machine cannot run skipped with the reason. `need` says what a case takes:
 * CU_GPUS2 (the default, 0) one process driving 2 or more GPUs; CU_PROCS a
 * process per GPU, 2 or more of them, or ranks sharing one GPU with
 * P2PKIT_SHARE_GPUS=1; CU_GPU1 one GPU (a communicator of one rank).
 * Returns the exit code: 77 (skipped) when every case asked for was. */
enum { CU_GPUS2 = 0, CU_PROCS = 1, CU_GPU1 = 2 };
typedef struct {
  t_case c;
  int dflt;
  int need;
} cu_case;

/* Why this machine cannot run a case needing `need`, or NULL when it can. */
static inline const char *cu_unmet(int need, int ngpu) {
  if (ngpu >= 2 || need == CU_GPU1) return NULL;
  if (need == CU_PROCS && cu_share_gpus()) return NULL;
  return need == CU_PROCS ? "needs 2 GPUs, or P2PKIT_SHARE_GPUS=1 to put the ranks on one"
                          : "needs 2 GPUs (one process driving several)";
}

static inline int cu_run_cases(const cu_case *cases, size_t n, int argc, char **argv) {
  if (!t_names_known(argc, argv, &cases[0].c, n, sizeof cases[0])) return 2;
  int nfail = 0, nran = 0, nskip = 0, ngpu = 0;
  if (cudaGetDeviceCount(&ngpu) != cudaSuccess) {
    cudaGetLastError();
    ngpu = 0;
  }
  for (size_t i = 0; i < n; i++) {
    int want = argc > 1 ? 0 : cases[i].dflt;
    for (int a = 1; a < argc; a++)
      if (strcmp(argv[a], cases[i].c.name) == 0) want = 1;
    if (!want) continue;
    const char *why = cu_unmet(cases[i].need, ngpu);
    if (why) {
      printf("%-40s SKIP: %s; this machine has %d\n", cases[i].c.name, why, ngpu);
      nskip++;
      continue;
    }
    nran++;
    t_current = cases[i].c.name;
    int before = t_failed;
    double t0 = cu_now();
    cases[i].c.fn();
    printf("%-40s %s (%.1f s)\n", cases[i].c.name, t_failed == before ? "ok" : "FAILED", cu_now() - t0);
    fflush(stdout);
    if (t_failed != before) nfail++;
  }
  if (nfail) return 1;
  return nran == 0 && nskip > 0 ? 77 : 0;
}

/* main() of a collective GPU test: a child of a process-per-GPU job
 * (`--child ...`) runs the test's child_main(); else at least one GPU, then
 * the case table (cu_case entries) through cu_run_cases. The tests check
 * p2pkit's own paths: P2PKIT_NCCL=0 unless the caller (or a case: the
 * conformance suite's NCCL and hosts cases) says otherwise, and a rank that
 * hangs fails the others after P2PKIT_TIMEOUT=60, not the default 600 s,
 * unless the caller says otherwise. */
#define CU_MAIN(...)                                                                  \
  int t_failed;                                                                       \
  const char *t_current;                                                              \
  int main(int argc, char **argv) {                                                   \
    setenv("P2PKIT_NCCL", "0", 0);                                                    \
    setenv("P2PKIT_TIMEOUT", "60", 0);                                                \
    if (argc > 1 && strcmp(argv[1], "--child") == 0) return child_main(argc, argv);   \
    T_REQUIRE_GPUS(1);                                                                \
    static const cu_case cases[] = {__VA_ARGS__};                                     \
    return cu_run_cases(cases, sizeof cases / sizeof cases[0], argc, argv);           \
  }

/* The collectives' INFO log in a temporary file while `var`=`value`, for the
 * copy-engine cases: logcap_end() restores the settings and counts the log
 * lines holding both needles. */
typedef struct {
  char path[64];
  const char *var;
} logcap_t;

static inline void logcap_begin(logcap_t *L, const char *var, const char *value) {
  snprintf(L->path, sizeof L->path, "/tmp/p2pk_ce_log_XXXXXX");
  L->var = var;
  int fd = mkstemp(L->path);
  CHECK(fd >= 0);
  if (fd >= 0) close(fd);
  setenv(var, value, 1);
  setenv("P2PKIT_DEBUG", "INFO", 1);
  setenv("P2PKIT_DEBUG_SUBSYS", "COLL", 1);
  setenv("P2PKIT_DEBUG_FILE", L->path, 1);
  p2pk_param_reset();
  p2pk_log_reset();
}

/* The copy-engine cases' settings: each of vars[0..n) at 1 byte (every
 * call of that collective takes the copy engines) and 64 KiB chunks two
 * deep, so every landing slot is reused many times; ce_settings_end()
 * unsets them. */
static inline void ce_settings_begin(const char *const *vars, int n) {
  setenv("P2PKIT_CE_CHUNK", "64K", 1);
  setenv("P2PKIT_CE_DEPTH", "2", 1);
  for (int i = 0; i < n; i++) setenv(vars[i], "1", 1);
}
static inline void ce_settings_end(const char *const *vars, int n) {
  unsetenv("P2PKIT_CE_CHUNK");
  unsetenv("P2PKIT_CE_DEPTH");
  for (int i = 0; i < n; i++) unsetenv(vars[i]);
}

/* Lines of the log so far that hold both needles (printed too with echo). */
static inline int logcap_scan(const logcap_t *L, const char *needle1, const char *needle2, int echo) {
  FILE *f = fopen(L->path, "r");
  CHECK(f != NULL);
  char line[512];
  int hits = 0;
  while (f && fgets(line, sizeof line, f))
    if (strstr(line, needle1) && strstr(line, needle2)) {
      hits++;
      if (echo) fputs(line, stdout);
    }
  if (f) fclose(f);
  return hits;
}
static inline int logcap_count(const logcap_t *L, const char *needle1, const char *needle2) {
  return logcap_scan(L, needle1, needle2, 0);
}

/* A capture's copy-engine line on nr ranks: with more than 2 the copy
 * engines are off under a CUDA graph (p2pk_ce_waits_ok) and the log says
 * that once instead. */
static inline int logcap_capture_ce(const logcap_t *L, int nr, const char *needle1, const char *needle2) {
  if (nr > 2) return logcap_count(L, "copy-engine paths of more than 2 ranks are off", "");
  return logcap_count(L, needle1, needle2);
}

static inline int logcap_end(logcap_t *L, const char *needle1, const char *needle2) {
  unsetenv(L->var);
  unsetenv("P2PKIT_DEBUG");
  unsetenv("P2PKIT_DEBUG_SUBSYS");
  unsetenv("P2PKIT_DEBUG_FILE");
  p2pk_param_reset();
  p2pk_log_reset();
  int hits = logcap_count(L, needle1, needle2);
  /* The library's warnings went to the file too: show them, so a failing
   * case says which word a timed-out wait was stuck on. */
  logcap_scan(L, " WARN ", "", 1);
  unlink(L->path);
  return hits;
}

#endif
