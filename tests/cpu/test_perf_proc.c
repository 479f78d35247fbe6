/* SPDX-License-Identifier: BSD-3-Clause */
/* The processes of `p2pkit perf -p`: the barrier holds across processes; a
 * failing, crashing or hung child is reported by rank with its reason and
 * the others are killed; nothing waits forever. Fake children, no GPU. */
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

#include "perf/perf_proc.h"
#include "test.h"

static char errbuf[4096];

/* Busy and making progress until killed (bounded, so it cannot outlive a test run). */
static int keep_working(perf_shared *sh, int proc) {
  for (int i = 0; i < 60000; i++) {
    p2pk_perf_heartbeat(sh, proc, "working");
    usleep(10000);
  }
  return 0;
}

static int spawn(perf_shared *sh, int n, int timeout_s, perf_child_fn fn, void *arg) {
  errbuf[0] = '\0';
  FILE *err = fmemopen(errbuf, sizeof errbuf - 1, "w");
  int rc = p2pk_perf_spawn(sh, n, timeout_s, fn, arg, err);
  fclose(err);
  return rc;
}

/* Every process adds 1 before each barrier; after it all must see the whole round. */
static int barrier_child(void *arg, perf_shared *sh, int proc, int nprocs) {
  atomic_int *count = (atomic_int *)sh->nccl_id; /* spare shared bytes */
  int sense = 0;
  for (int round = 1; round <= 200; round++) {
    atomic_fetch_add(count, 1);
    if (p2pk_perf_barrier(sh, nprocs, &sense, 10) != 0) return 3;
    if (atomic_load(count) < round * nprocs) return 4;
    p2pk_perf_heartbeat(sh, proc, "round %d", round);
    if (p2pk_perf_barrier(sh, nprocs, &sense, 10) != 0) return 3;
  }
  return 0;
}

TEST(barrier_across_processes) {
  perf_shared *sh = p2pk_perf_shared_new();
  CHECK(sh != NULL);
  if (!sh) return;
  CHECK_EQ(spawn(sh, 4, 10, barrier_child, NULL), 0);
  CHECK_STR(errbuf, "");
  CHECK_EQ(atomic_load((atomic_int *)sh->nccl_id), 800);
  p2pk_perf_shared_free(sh);
}

/* Rank 1 fails with a reason; the others keep working until killed. */
static int one_fails(void *arg, perf_shared *sh, int proc, int nprocs) {
  if (proc == 1) {
    usleep(100000);
    p2pk_perf_set_error(sh, proc, 2, "-p 3 needs 3 GPUs (one per process); this machine has 1");
    return 2;
  }
  return keep_working(sh, proc);
}

TEST(failure_is_reported_once_and_others_killed) {
  perf_shared *sh = p2pk_perf_shared_new();
  int64_t t0 = p2pk_perf_now_ms();
  CHECK_EQ(spawn(sh, 3, 30, one_fails, NULL), 2); /* a usage error stays exit code 2 */
  CHECK(p2pk_perf_now_ms() - t0 < 5000);
  CHECK_STR(errbuf, "p2pkit perf: error: rank 1: -p 3 needs 3 GPUs (one per process); this machine has 1\n");
  p2pk_perf_shared_free(sh);
}

/* Rank 0 fails first; rank 1 fails after it (because of it): rank 0 is the cause. */
static int cascade(void *arg, perf_shared *sh, int proc, int nprocs) {
  if (proc == 0) {
    p2pk_perf_set_error(sh, proc, 1, "ncclAllReduce failed: unhandled cuda error");
    return 1;
  }
  usleep(50000);
  p2pk_perf_set_error(sh, proc, 1, "another rank failed");
  return 1;
}

TEST(first_error_is_the_cause) {
  perf_shared *sh = p2pk_perf_shared_new();
  CHECK_EQ(spawn(sh, 2, 30, cascade, NULL), 1);
  CHECK(strstr(errbuf, "rank 0: ncclAllReduce failed") != NULL);
  p2pk_perf_shared_free(sh);
}

static int crashes(void *arg, perf_shared *sh, int proc, int nprocs) {
  if (proc == 0) raise(SIGKILL);
  return keep_working(sh, proc);
}

TEST(crash_is_reported) {
  perf_shared *sh = p2pk_perf_shared_new();
  CHECK_EQ(spawn(sh, 2, 30, crashes, NULL), 1);
  CHECK(strstr(errbuf, "rank 0: died of signal 9") != NULL);
  p2pk_perf_shared_free(sh);
}

/* Rank 1 stops making progress and has no watchdog: the parent kills it. */
static int hangs(void *arg, perf_shared *sh, int proc, int nprocs) {
  if (proc == 1) {
    p2pk_perf_heartbeat(sh, proc, "NCCL all_reduce 8 B out-of-place: timing 1/5");
    sleep(600);
    return 6;
  }
  return keep_working(sh, proc);
}

TEST(hung_child_is_killed) {
  perf_shared *sh = p2pk_perf_shared_new();
  int64_t t0 = p2pk_perf_now_ms();
  CHECK_EQ(spawn(sh, 2, 1, hangs, NULL), 1);
  int64_t took = p2pk_perf_now_ms() - t0;
  CHECK(took >= 4000 && took < 10000); /* the limit, 2 + 2 s */
  CHECK_STR(errbuf, "p2pkit perf: error: rank 1: no progress for 4 s while NCCL all_reduce 8 B "
                    "out-of-place: timing 1/5 (P2PKIT_TIMEOUT=1); killed\n");
  p2pk_perf_shared_free(sh);
}

/* A child's own watchdog ends it, naming what it was doing. */
static int watched(void *arg, perf_shared *sh, int proc, int nprocs) {
  perf_watchdog *w = p2pk_perf_watchdog_start(sh, proc, 1, 0);
  if (!w) return 5;
  p2pk_perf_heartbeat(sh, proc, "p2pkit: creating the communicator");
  sleep(600);
  return 6;
}

TEST(watchdog_ends_a_stuck_process) {
  perf_shared *sh = p2pk_perf_shared_new();
  int64_t t0 = p2pk_perf_now_ms();
  CHECK_EQ(spawn(sh, 1, 0, watched, NULL), 1); /* the parent itself never times out here */
  int64_t took = p2pk_perf_now_ms() - t0;
  CHECK(took >= 2000 && took < 6000); /* P2PKIT_TIMEOUT 1 + 1 s margin */
  CHECK_EQ(p2pk_perf_stall_limit_s(60), 67);
  CHECK_STR(errbuf, "p2pkit perf: error: no progress for 2 s while p2pkit: creating the "
                    "communicator (P2PKIT_TIMEOUT=1); giving up\n");
  p2pk_perf_shared_free(sh);
}

TEST(watchdog_stops_cleanly) {
  perf_shared *sh = p2pk_perf_shared_new();
  perf_watchdog *w = p2pk_perf_watchdog_start(sh, 0, 5, 1);
  CHECK(w != NULL);
  p2pk_perf_heartbeat(sh, 0, "busy");
  p2pk_perf_watchdog_stop(w);
  CHECK(p2pk_perf_watchdog_start(sh, 0, 0, 1) == NULL); /* 0: no watchdog */
  CHECK_STR(sh->slot[0].error, "");
  p2pk_perf_shared_free(sh);
}

TEST(barrier_gives_up) {
  perf_shared *sh = p2pk_perf_shared_new();
  int sense = 0;
  int64_t t0 = p2pk_perf_now_ms();
  CHECK_EQ(p2pk_perf_barrier(sh, 2, &sense, 1), -2); /* the other never comes */
  CHECK(p2pk_perf_now_ms() - t0 >= 1000);
  p2pk_perf_shared_free(sh);
  sh = p2pk_perf_shared_new();
  sense = 0;
  atomic_store(&sh->abort, 1);
  CHECK_EQ(p2pk_perf_barrier(sh, 2, &sense, 0), -1); /* aborted: no wait */
  CHECK_EQ(p2pk_perf_barrier(sh, 1, &sense, 0), 0);  /* alone: nothing to wait for */
  p2pk_perf_shared_free(sh);
}

TEST(ports_and_secrets) {
  int p = p2pk_perf_free_port();
  CHECK(p > 0 && p < 65536);
  char a[40], b[40];
  p2pk_perf_random_secret(a, sizeof a);
  p2pk_perf_random_secret(b, sizeof b);
  CHECK_EQ(strlen(a), 32);
  CHECK(strspn(a, "0123456789abcdef") == 32);
  CHECK(strcmp(a, b) != 0);
}

/* --hosts: the ranks in blocks, each block a host to p2pkit and NCCL (a
 * host id per rank for NCCL when ranks share GPUs); NCCL_HOSTID the
 * caller set stands. */
TEST(hosts_env) {
  unsetenv("NCCL_HOSTID");
  p2pk_proc_hosts_env(3, 4, 2, 0);
  CHECK_STR(getenv("P2PKIT_HOSTID"), "perf-host1");
  CHECK_STR(getenv("NCCL_HOSTID"), "perf-host1");
  unsetenv("NCCL_HOSTID");
  p2pk_proc_hosts_env(1, 3, 3, 1);
  CHECK_STR(getenv("P2PKIT_HOSTID"), "perf-host1");
  CHECK_STR(getenv("NCCL_HOSTID"), "perf-host1.rank1");
  setenv("NCCL_HOSTID", "mine", 1);
  p2pk_proc_hosts_env(0, 4, 2, 1);
  CHECK_STR(getenv("P2PKIT_HOSTID"), "perf-host0");
  CHECK_STR(getenv("NCCL_HOSTID"), "mine");
  unsetenv("NCCL_HOSTID");
  unsetenv("P2PKIT_HOSTID");
}

T_MAIN(T_CASE(barrier_across_processes), T_CASE(failure_is_reported_once_and_others_killed),
       T_CASE(first_error_is_the_cause), T_CASE(crash_is_reported), T_CASE(hung_child_is_killed),
       T_CASE(watchdog_ends_a_stuck_process), T_CASE(watchdog_stops_cleanly),
       T_CASE(barrier_gives_up), T_CASE(ports_and_secrets), T_CASE(hosts_env))
