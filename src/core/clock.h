/* SPDX-License-Identifier: BSD-3-Clause */
/* The one monotonic clock the host code times itself with (waits for
 * peers, the rendezvous' deadlines, launch threads' idle spins, perf's
 * host enqueue time and watchdog, doctor's wait for its NCCL probe). */
#ifndef P2PK_CLOCK_H
#define P2PK_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t p2pk_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
