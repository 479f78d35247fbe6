/* SPDX-License-Identifier: BSD-3-Clause */
/* Launches from a thread per GPU (one process driving several GPUs).
 *
 * Why: a kernel launch costs the host ~3.5 us on the 2x H200 machine
 * (bench_launch's fill_host), and one thread driving every GPU pays it once
 * per GPU, one after the other: an eager 8-byte all-reduce step on two GPUs
 * took 5.5 us there, where a thread per GPU, the calling one handing the
 * other GPU's call over and waiting for it, took 3.95 (bench_launch's
 * ar_eager and ar_handoff; docs/decisions/launch-threads.md).
 *
 * What: inside a group, the kernel launches of a one-process communicator
 * wait (as NCCL allows: work in a group may be enqueued at its outermost
 * end; the selector says which) and are made when the group ends, or
 * earlier when something must follow them in order (group.c). Then
 * the calling thread makes the first communicator's launches and a worker
 * each other communicator's, at once, and the caller waits for all of them
 * before it returns: the work is on the streams when p2pkit_group_end
 * returns, as before. A communicator's launches stay in its callers' order
 * (one thread makes all of them).
 *
 * A worker (one per communicator, made on first use) spins for
 * P2PKIT_LAUNCH_SPIN_US after its last job, then sleeps. A job for a worker
 * that sleeps (or does not exist yet) is made by the calling thread, as
 * before, and the worker is woken for the next: a sparse caller never waits
 * for a thread to wake up. P2PKIT_LAUNCH_THREADS=0: every launch in the
 * calling thread, at the call. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/param.h"

#define P2PK_JOBS 64

struct p2pk_worker {
  pthread_t th;
  int device, rank, logged;
  pthread_mutex_t m;
  pthread_cond_t cv;
  _Atomic uint64_t posted, finished;
  _Atomic int sleeping, stop;
  uint64_t kicks; /* wake() calls, under m: a kick ends a sleep even with no post */
  uint64_t seq; /* dispatcher's count of posts */
  /* This post's jobs (the dispatcher's storage, alive until it finished). */
  const p2pk_job *const *jobs;
  int njobs;
  p2pkit_status_t st; /* the first failure of this post, with its message */
  char msg[512];
};

static _Thread_local p2pk_job jobs[P2PK_JOBS];
static _Thread_local int njobs;

static void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static void *worker_main(void *arg) {
  struct p2pk_worker *w = arg;
  cudaSetDevice(w->device);
  const uint64_t spin = (uint64_t)p2pk_param_int("P2PKIT_LAUNCH_SPIN_US") * 1000u;
  uint64_t seen = 0, idle_since = p2pk_now_ns();
  for (unsigned i = 0;; i++) {
    uint64_t p = atomic_load_explicit(&w->posted, memory_order_acquire);
    if (p != seen) {
      if (!w->logged) {
        w->logged = 1;
        P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): its launches in groups made by its launch "
                  "thread", w->rank, w->device);
      }
      w->st = P2PKIT_SUCCESS;
      w->msg[0] = 0;
      for (int k = 0; k < w->njobs; k++) {
        p2pkit_status_t s = w->jobs[k]->run(w->jobs[k]);
        if (s != P2PKIT_SUCCESS && w->st == P2PKIT_SUCCESS) {
          w->st = s;
          snprintf(w->msg, sizeof w->msg, "%s", p2pkit_last_error());
        }
      }
      seen = p;
      atomic_store_explicit(&w->finished, p, memory_order_release);
      idle_since = p2pk_now_ns();
      continue;
    }
    if (atomic_load(&w->stop)) break;
    if ((i & 255) == 0 && p2pk_now_ns() - idle_since > spin) {
      pthread_mutex_lock(&w->m);
      atomic_store(&w->sleeping, 1);
      const uint64_t k0 = w->kicks;
      while (atomic_load(&w->posted) == seen && w->kicks == k0 && !atomic_load(&w->stop))
        pthread_cond_wait(&w->cv, &w->m);
      atomic_store(&w->sleeping, 0);
      pthread_mutex_unlock(&w->m);
      idle_since = p2pk_now_ns();
      continue;
    }
    relax();
  }
  return NULL;
}

static void wake(struct p2pk_worker *w) {
  pthread_mutex_lock(&w->m);
  w->kicks++;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->m);
}

/* c's worker, started now if it has none (NULL when it cannot be). */
static struct p2pk_worker *worker_of(struct p2pkit_comm *c) {
  if (c->worker) return c->worker;
  struct p2pk_worker *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->device = c->device;
  w->rank = c->rank;
  pthread_mutex_init(&w->m, NULL);
  pthread_cond_init(&w->cv, NULL);
  if (pthread_create(&w->th, NULL, worker_main, w) != 0) {
    pthread_mutex_destroy(&w->m);
    pthread_cond_destroy(&w->cv);
    free(w);
    return NULL;
  }
  c->worker = w;
  P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): a launch thread of its own for launches in groups "
            "(P2PKIT_LAUNCH_THREADS=0 turns this off)", c->rank, c->device);
  return w;
}

void p2pk_worker_stop(struct p2pkit_comm *c) {
  struct p2pk_worker *w = c->worker;
  if (!w) return;
  atomic_store(&w->stop, 1);
  wake(w);
  pthread_join(w->th, NULL);
  pthread_mutex_destroy(&w->m);
  pthread_cond_destroy(&w->cv);
  free(w);
  c->worker = NULL;
}

int p2pk_jobs_ok(const struct p2pkit_comm *c) {
  return c->sel.launch_threads && !c->multiproc && c->group && c->group->n >= 2;
}

int p2pk_jobs_pending(void) { return njobs; }
int p2pk_worker_state(const struct p2pkit_comm *c) {
  return c->worker ? atomic_load(&c->worker->sleeping) : -1;
}

p2pkit_status_t p2pk_job_defer(const p2pk_job *j) {
  p2pkit_status_t st = P2PKIT_SUCCESS;
  if (njobs == P2PK_JOBS) st = p2pk_jobs_run();
  jobs[njobs++] = *j;
  return st;
}

p2pkit_status_t p2pk_jobs_run(void) {
  if (!njobs) return P2PKIT_SUCCESS;
  int n = njobs;
  /* The communicators in order of first appearance (job i's is number
   * ki[i]); communicator k's jobs, in queue order, are list[at[k] ..
   * at[k] + nby[k]). */
  struct p2pkit_comm *cs[P2PK_JOBS];
  const p2pk_job *list[P2PK_JOBS];
  int ki[P2PK_JOBS], nby[P2PK_JOBS] = {0}, at[P2PK_JOBS], ncs = 0, used = 0;
  for (int i = 0; i < n; i++) {
    int k = 0;
    while (k < ncs && cs[k] != jobs[i].c) k++;
    if (k == ncs) cs[ncs++] = jobs[i].c;
    ki[i] = k;
    nby[k]++;
  }
  for (int k = 0; k < ncs; k++) at[k] = used, used += nby[k], nby[k] = 0;
  for (int i = 0; i < n; i++) list[at[ki[i]] + nby[ki[i]]++] = &jobs[i];
  /* Post to every awake worker but the first communicator's; the rest
   * (the first, and those whose worker sleeps or is new: posted[k] NULL)
   * run here. */
  struct p2pk_worker *posted[P2PK_JOBS] = {NULL};
  for (int k = 1; k < ncs; k++) {
    int fresh = cs[k]->worker == NULL;
    struct p2pk_worker *w = worker_of(cs[k]);
    if (!w || fresh || atomic_load(&w->sleeping)) {
      if (w && !fresh) wake(w);
      continue;
    }
    w->jobs = list + at[k];
    w->njobs = nby[k];
    atomic_store(&w->posted, ++w->seq);
    if (atomic_load(&w->sleeping)) wake(w);
    posted[k] = w;
  }
  p2pkit_status_t st = P2PKIT_SUCCESS;
  for (int k = 0; k < ncs; k++)
    for (int i = 0; !posted[k] && i < nby[k]; i++) {
      const p2pk_job *j = list[at[k] + i];
      p2pkit_status_t s = j->run(j);
      if (st == P2PKIT_SUCCESS) st = s;
    }
  char msg[512] = "";
  p2pkit_status_t wst = P2PKIT_SUCCESS;
  for (int k = 0; k < ncs; k++) {
    struct p2pk_worker *w = posted[k];
    if (!w) continue;
    while (atomic_load_explicit(&w->finished, memory_order_acquire) != w->seq) relax();
    if (w->st != P2PKIT_SUCCESS && wst == P2PKIT_SUCCESS) {
      wst = w->st;
      snprintf(msg, sizeof msg, "%s", w->msg);
    }
  }
  njobs = 0;
  if (st == P2PKIT_SUCCESS && wst != P2PKIT_SUCCESS) st = p2pk_fail(wst, "%s", msg);
  return st;
}
