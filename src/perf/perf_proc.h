/* SPDX-License-Identifier: BSD-3-Clause */
/* The processes of one `p2pkit perf` run: a region shared by all of them
 * (MAP_SHARED, created before fork), a barrier, per-rank heartbeats and error
 * slots, a watchdog thread per process, and the parent that forks the
 * children and kills them when one fails or stops making progress. */
#ifndef P2PK_PERF_PROC_H
#define P2PK_PERF_PROC_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "perf/perf.h"

typedef struct {
  atomic_llong heartbeat_ms; /* monotonic clock at the last sign of progress */
  atomic_int exit_code;      /* set with `error`, before the process exits */
  atomic_llong error_ms;     /* when `error` was set: the earliest is the cause */
  char phase[128];           /* what the process is doing (diagnostics) */
  char error[512];           /* why it failed, "" when it did not */
  perf_rank_info info;
  double t[P2PK_PERF_MAX_REPEATS];  /* this process's time per repeat, us per call */
  double th[P2PK_PERF_MAX_REPEATS]; /* the host's time to issue them (-C), us per call */
  int64_t wrong;
} perf_slot;

struct perf_shared {
  atomic_int bar_count, bar_sense;
  atomic_int abort;          /* set by the parent or a failing rank: stop waiting */
  atomic_int nccl_id_ready;
  char nccl_id[128];
  int ports[P2PK_PERF_MAX_ALGOS]; /* MASTER_PORT of each pass (--procs) */
  char secret[40];                /* P2PKIT_JOB_SECRET (--procs) */
  perf_slot slot[P2PK_PERF_MAX_RANKS];
};

/* Monotonic milliseconds. */
int64_t p2pk_perf_now_ms(void);

/* A zeroed shared region (anonymous MAP_SHARED); NULL on failure. */
perf_shared *p2pk_perf_shared_new(void);
void p2pk_perf_shared_free(perf_shared *sh);

/* Record progress of process `proc`: what it is doing now. */
void p2pk_perf_heartbeat(perf_shared *sh, int proc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Record why process `proc` fails and the exit code it will return. */
void p2pk_perf_set_error(perf_shared *sh, int proc, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* All `nprocs` processes meet; 0 when they all arrived, -1 when the run was
 * aborted, -2 after timeout_s (<= 0: no limit) without the others. `sense`
 * is this process's own state, 0 at the start. */
int p2pk_perf_barrier(perf_shared *sh, int nprocs, int *sense, int timeout_s);

/* Seconds without progress before a process gives up: P2PKIT_TIMEOUT plus a
 * margin, so that a library's own timeout (p2pkit's kernels give up after
 * P2PKIT_TIMEOUT) reports first, with its better reason. */
int p2pk_perf_stall_limit_s(int timeout_s);

/* A thread that ends the process with exit code 1 when process `proc` makes
 * no progress for p2pk_perf_stall_limit_s(timeout_s) (timeout_s <= 0: no
 * watchdog). `print` also writes the
 * error line on stderr (one-process mode); children leave it in their slot. */
typedef struct perf_watchdog perf_watchdog;
perf_watchdog *p2pk_perf_watchdog_start(perf_shared *sh, int proc, int timeout_s, int print);
void p2pk_perf_watchdog_stop(perf_watchdog *w);

/* Fork `nprocs` children running fn(arg, sh, proc, nprocs) and exiting with
 * its return value. Waits for them all; when one fails (non-zero exit,
 * signal) or one shows no progress for 2 s past the stall limit, the others are
 * killed. Prints one line on `err` naming the first rank that failed and why.
 * Returns 0 when all exited 0, else the first failure's exit code (2 stays 2,
 * anything else becomes 1). The parent makes no CUDA call. */
typedef int (*perf_child_fn)(void *arg, perf_shared *sh, int proc, int nprocs);

/* In a child of the spawner: the environment a launcher like torchrun would
 * give rank `proc` of `nprocs` (RANK, LOCAL_RANK, WORLD_SIZE,
 * LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT = the first shared
 * port, P2PKIT_JOB_SECRET), then settings are read afresh. */
void p2pk_proc_launcher_env(const perf_shared *sh, int proc, int nprocs);
/* `p2pkit perf --hosts H`, in rank `proc` of `nprocs`: the ranks in H
 * blocks (rank r on host r * H / nprocs), P2PKIT_HOSTID=perf-host<h>, and
 * unless the caller set it NCCL_HOSTID the same, or, ranks sharing GPUs
 * (share_gpus), perf-host<h>.rank<r>; settings read afresh. */
void p2pk_proc_hosts_env(int proc, int nprocs, int hosts, int share_gpus);
int p2pk_perf_spawn(perf_shared *sh, int nprocs, int timeout_s, perf_child_fn fn, void *arg,
                    FILE *err);

/* A TCP port on 127.0.0.1 nobody listens on now; -1 on failure. */
int p2pk_perf_free_port(void);
/* 32 random hex digits. */
void p2pk_perf_random_secret(char *buf, size_t len);

#endif
