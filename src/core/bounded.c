/* SPDX-License-Identifier: BSD-3-Clause */
#include "core/bounded.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"

typedef struct {
  void (*fn)(void *);
  void *arg;
  int done; /* __atomic: fn returned */
  int refs; /* __atomic: the thread's and the waiter's; the last frees */
} job_t;

static void job_drop(job_t *j) {
  if (__atomic_sub_fetch(&j->refs, 1, __ATOMIC_ACQ_REL) == 0) {
    free(j->arg);
    free(j);
  }
}

static void *job_main(void *p) {
  job_t *j = p;
  j->fn(j->arg);
  __atomic_store_n(&j->done, 1, __ATOMIC_RELEASE);
  job_drop(j);
  return NULL;
}

int p2pk_run_until(void (*fn)(void *), const void *arg, size_t bytes, uint64_t until_ns) {
  job_t *j = calloc(1, sizeof *j);
  void *copy = malloc(bytes ? bytes : 1);
  pthread_attr_t attr;
  pthread_t t;
  int started = 0;
  if (j && copy && pthread_attr_init(&attr) == 0) {
    memcpy(copy, arg, bytes);
    *j = (job_t){.fn = fn, .arg = copy, .refs = 2};
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    started = pthread_create(&t, &attr, job_main, j) == 0;
    pthread_attr_destroy(&attr);
  }
  if (!started) {
    free(copy);
    free(j);
    return -1;
  }
  while (!__atomic_load_n(&j->done, __ATOMIC_ACQUIRE) && p2pk_now_ns() < until_ns) usleep(500);
  const int done = __atomic_load_n(&j->done, __ATOMIC_ACQUIRE);
  job_drop(j);
  return done;
}
