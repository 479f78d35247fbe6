/* SPDX-License-Identifier: BSD-3-Clause */
/* launch_pool.c without a GPU: deferred jobs of three stand-in
 * communicators run once each, a communicator's in its callers' order, the
 * first communicator's in the calling thread and (once their workers spin)
 * the others' on threads of their own, at once; a failure comes back with
 * its message; a sleeping worker's jobs run in the calling thread; a full
 * queue runs itself first. The jobs record where they ran instead of
 * launching anything. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll/coll.h"
#include "core/check.h"
#include "core/param.h"
#include "test.h"

#define NC 3
#define MAXREC 256

typedef struct {
  int comm, id;
  pthread_t who;
} rec_t;

static rec_t recs[MAXREC];
static _Atomic int nrec;
/* Rounds that must run at once: each communicator's first job waits until
 * every communicator's first job has started (or 10 s passed: then they ran
 * one after the other, and `met` stays 0). */
static int meet;
static _Atomic int arrived, met;

static void pause_us(long us) {
  struct timespec ts = {0, us * 1000};
  nanosleep(&ts, NULL);
}

static p2pkit_status_t record(const p2pk_job *j) {
  if (meet && j->kind < NC) {
    atomic_fetch_add(&arrived, 1);
    for (int i = 0; i < 100000 && atomic_load(&arrived) < NC; i++) pause_us(100);
    if (atomic_load(&arrived) >= NC) atomic_fetch_add(&met, 1);
  }
  int k = atomic_fetch_add(&nrec, 1);
  if (k < MAXREC) recs[k] = (rec_t){j->c->rank, j->kind, pthread_self()};
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t fail(const p2pk_job *j) {
  record(j);
  return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "job %d failed on purpose", j->kind);
}

static struct p2pkit_comm comms[NC];

static void comms_init(void) {
  memset(comms, 0, sizeof comms);
  for (int r = 0; r < NC; r++) comms[r].rank = r, comms[r].device = r;
}

static void comms_stop(void) {
  for (int r = 0; r < NC; r++) {
    p2pk_worker_stop(&comms[r]);
    CHECK(comms[r].worker == NULL);
  }
}

static void reset(void) {
  atomic_store(&nrec, 0);
  atomic_store(&arrived, 0);
  atomic_store(&met, 0);
}

/* Two jobs per communicator, interleaved: ids r and r + NC. */
static p2pkit_status_t round_of(p2pkit_status_t (*run1)(const p2pk_job *)) {
  reset();
  for (int i = 0; i < 2 * NC; i++) {
    p2pk_job j = {.c = &comms[i % NC], .run = i == 2 * NC - 1 ? run1 : record, .kind = i};
    CHECK_OK(p2pk_job_defer(&j));
  }
  CHECK_EQ(p2pk_jobs_pending(), 2 * NC);
  p2pkit_status_t st = p2pk_jobs_run();
  CHECK_EQ(p2pk_jobs_pending(), 0);
  return st;
}

/* Every job once; each communicator's two in order, on one thread; returns
 * a mask of the communicators whose jobs ran in this thread. */
static int check_round(void) {
  CHECK_EQ(atomic_load(&nrec), 2 * NC);
  int seen[2 * NC] = {0}, mask = 0;
  pthread_t where[NC];
  int first[NC];
  for (int r = 0; r < NC; r++) first[r] = -1;
  for (int k = 0; k < atomic_load(&nrec) && k < MAXREC; k++) {
    const rec_t *x = &recs[k];
    CHECK(x->id >= 0 && x->id < 2 * NC);
    seen[x->id]++;
    CHECK_EQ(x->id % NC, x->comm);
    if (first[x->comm] < 0) {
      first[x->comm] = x->id;
      where[x->comm] = x->who;
      CHECK_EQ(x->id, x->comm); /* its first job first */
    } else {
      CHECK(pthread_equal(where[x->comm], x->who));
    }
    if (pthread_equal(x->who, pthread_self())) mask |= 1 << x->comm;
  }
  for (int i = 0; i < 2 * NC; i++) CHECK_EQ(seen[i], 1);
  return mask;
}

TEST(jobs_run_once_in_order_on_a_thread_per_communicator) {
  setenv("P2PKIT_LAUNCH_SPIN_US", "30000000", 1); /* workers never sleep here */
  p2pk_param_reset();
  comms_init();
  /* First round: no workers yet, so everything here (and they start). */
  CHECK_OK(round_of(record));
  CHECK_EQ(check_round(), 7);
  for (int r = 1; r < NC; r++) CHECK(comms[r].worker != NULL);
  CHECK(comms[0].worker == NULL); /* the first communicator's are the caller's */
  /* Then the workers take theirs, beside the caller's. */
  meet = 1;
  for (int round = 0; round < 3; round++) {
    CHECK_OK(round_of(record));
    CHECK_EQ(check_round(), 1);
    CHECK_EQ(atomic_load(&met), NC);
  }
  meet = 0;
  /* A failure on a worker comes back with its message; the rest ran. */
  p2pkit_status_t st = round_of(fail);
  CHECK_EQ(st, P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "job 5 failed on purpose") != NULL);
  CHECK_EQ(check_round(), 1);
  comms_stop();
  unsetenv("P2PKIT_LAUNCH_SPIN_US");
  p2pk_param_reset();
}

/* Waits up to 10 s until every worker of comms[1..] is in `state`. */
static int workers_reach(int state) {
  for (int i = 0; i < 100000; i++) {
    int all = 1;
    for (int r = 1; r < NC; r++) all &= p2pk_worker_state(&comms[r]) == state;
    if (all) return 1;
    pause_us(100);
  }
  return 0;
}

TEST(sleeping_workers_leave_their_jobs_to_the_caller) {
  setenv("P2PKIT_LAUNCH_SPIN_US", "0", 1);
  p2pk_param_reset();
  comms_init();
  CHECK_OK(round_of(record));
  for (int round = 0; round < 3; round++) {
    /* Asleep, and long enough since the last round's wake-up call that it
     * was taken (with no spin a woken thread sleeps again at once, and only
     * a job or a wake-up call wakes it). */
    CHECK(workers_reach(1));
    pause_us(100000);
    CHECK(workers_reach(1));
    CHECK_OK(round_of(record));
    CHECK_EQ(check_round(), 7);
  }
  comms_stop();
  unsetenv("P2PKIT_LAUNCH_SPIN_US");
  p2pk_param_reset();
}

/* A sleeping worker's jobs run here, and it wakes: once awake it takes
 * the next round's (it must not sleep on until a job comes, which would
 * leave every job to the caller from then on). */
TEST(a_woken_worker_takes_the_next_jobs) {
  setenv("P2PKIT_LAUNCH_SPIN_US", "300000", 1); /* 0.3 s */
  p2pk_param_reset();
  comms_init();
  CHECK_OK(round_of(record));
  for (int round = 0; round < 2; round++) {
    CHECK(workers_reach(1));
    CHECK_OK(round_of(record)); /* here, and the workers are woken */
    CHECK_EQ(check_round(), 7);
    CHECK(workers_reach(0));
    meet = 1;
    CHECK_OK(round_of(record));
    meet = 0;
    CHECK_EQ(check_round(), 1);
    CHECK_EQ(atomic_load(&met), NC);
  }
  comms_stop();
  unsetenv("P2PKIT_LAUNCH_SPIN_US");
  p2pk_param_reset();
}

static _Atomic int count;
static p2pkit_status_t bump(const p2pk_job *j) {
  (void)j;
  atomic_fetch_add(&count, 1);
  return P2PKIT_SUCCESS;
}

TEST(a_full_queue_runs_first) {
  comms_init();
  atomic_store(&count, 0);
  for (int i = 0; i < 150; i++) {
    p2pk_job j = {.c = &comms[i % 2], .run = bump, .kind = i};
    CHECK_OK(p2pk_job_defer(&j));
    CHECK(p2pk_jobs_pending() <= 64);
  }
  CHECK(atomic_load(&count) >= 128); /* two full queues ran */
  CHECK_OK(p2pk_jobs_run());
  CHECK_EQ(atomic_load(&count), 150);
  comms_stop();
}

T_MAIN(T_CASE(jobs_run_once_in_order_on_a_thread_per_communicator),
       T_CASE(sleeping_workers_leave_their_jobs_to_the_caller),
       T_CASE(a_woken_worker_takes_the_next_jobs), T_CASE(a_full_queue_runs_first))
