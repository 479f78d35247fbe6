/* SPDX-License-Identifier: BSD-3-Clause */
#include "perf/perf_proc.h"

#include "core/clock.h"
#include "core/outfile.h"
#include "core/param.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int64_t p2pk_perf_now_ms(void) { return (int64_t)(p2pk_now_ns() / 1000000u); }

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
}

perf_shared *p2pk_perf_shared_new(void) {
  void *p = mmap(NULL, sizeof(perf_shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                 -1, 0);
  if (p == MAP_FAILED) return NULL;
  memset(p, 0, sizeof(perf_shared)); /* already zero; explicit for the atomics */
  perf_shared *sh = p;
  int64_t now = p2pk_perf_now_ms();
  for (int i = 0; i < P2PK_PERF_MAX_RANKS; i++) atomic_store(&sh->slot[i].heartbeat_ms, now);
  return sh;
}

void p2pk_perf_shared_free(perf_shared *sh) {
  if (sh) munmap(sh, sizeof *sh);
}

void p2pk_perf_heartbeat(perf_shared *sh, int proc, const char *fmt, ...) {
  perf_slot *s = &sh->slot[proc];
  char buf[sizeof s->phase];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  memcpy(s->phase, buf, sizeof buf);
  atomic_store(&s->heartbeat_ms, p2pk_perf_now_ms());
}

void p2pk_perf_set_error(perf_shared *sh, int proc, int code, const char *fmt, ...) {
  perf_slot *s = &sh->slot[proc];
  if (s->error[0]) return; /* the first cause is the one worth reporting */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->error, sizeof s->error, fmt, ap);
  va_end(ap);
  atomic_store(&s->exit_code, code);
  atomic_store(&s->error_ms, p2pk_perf_now_ms());
}

int p2pk_perf_barrier(perf_shared *sh, int nprocs, int *sense, int timeout_s) {
  if (nprocs <= 1) return 0;
  int s = !*sense;
  *sense = s;
  if (atomic_fetch_add(&sh->bar_count, 1) == nprocs - 1) {
    atomic_store(&sh->bar_count, 0);
    atomic_store(&sh->bar_sense, s);
    return 0;
  }
  int64_t t0 = p2pk_perf_now_ms();
  for (long spins = 0; atomic_load(&sh->bar_sense) != s; spins++) {
    if (atomic_load(&sh->abort)) return -1;
    if (spins < 2000) {
      sched_yield();
      continue;
    }
    sleep_us(50);
    if (timeout_s > 0 && p2pk_perf_now_ms() - t0 > (int64_t)timeout_s * 1000) return -2;
  }
  return 0;
}

/* ---- watchdog ---------------------------------------------------------- */

int p2pk_perf_stall_limit_s(int timeout_s) { return timeout_s + 1 + timeout_s / 10; }

struct perf_watchdog {
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int stop;
  perf_shared *sh;
  int proc, timeout_s, print;
};

static void *watch(void *arg) {
  perf_watchdog *w = arg;
  perf_slot *s = &w->sh->slot[w->proc];
  pthread_mutex_lock(&w->lock);
  while (!w->stop) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 100 * 1000000L;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&w->cond, &w->lock, &until);
    if (w->stop) break;
    int64_t idle = p2pk_perf_now_ms() - atomic_load(&s->heartbeat_ms);
    int limit = p2pk_perf_stall_limit_s(w->timeout_s);
    if (idle > (int64_t)limit * 1000) {
      char phase[sizeof s->phase];
      memcpy(phase, s->phase, sizeof phase);
      phase[sizeof phase - 1] = '\0';
      p2pk_perf_set_error(w->sh, w->proc, P2PK_PERF_EXIT_FAIL,
                          "no progress for %d s while %s (P2PKIT_TIMEOUT=%d); giving up", limit,
                          phase[0] ? phase : "starting", w->timeout_s);
      atomic_store(&w->sh->abort, 1);
      if (w->print) {
        fprintf(stderr, "p2pkit perf: error: %s\n", s->error);
        fflush(stderr);
      }
      _exit(P2PK_PERF_EXIT_FAIL);
    }
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

perf_watchdog *p2pk_perf_watchdog_start(perf_shared *sh, int proc, int timeout_s, int print) {
  if (timeout_s <= 0) return NULL;
  perf_watchdog *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->sh = sh;
  w->proc = proc;
  w->timeout_s = timeout_s;
  w->print = print;
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->cond, NULL);
  if (pthread_create(&w->thread, NULL, watch, w) != 0) {
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    free(w);
    return NULL;
  }
  return w;
}

void p2pk_perf_watchdog_stop(perf_watchdog *w) {
  if (!w) return;
  pthread_mutex_lock(&w->lock);
  w->stop = 1;
  pthread_cond_signal(&w->cond);
  pthread_mutex_unlock(&w->lock);
  pthread_join(w->thread, NULL);
  pthread_cond_destroy(&w->cond);
  pthread_mutex_destroy(&w->lock);
  free(w);
}

/* ---- the parent of -p -------------------------------------------------- */

typedef struct {
  pid_t pid;
  int alive;
  int status; /* waitpid status once exited */
  int killed; /* by us, after another rank failed */
} child;

static void kill_all(child *c, int n, int sig) {
  for (int i = 0; i < n; i++)
    if (c[i].alive && c[i].pid > 0) {
      kill(c[i].pid, sig);
      c[i].killed = 1;
    }
}

static int reap(child *c, int n) {
  int alive = 0;
  for (int i = 0; i < n; i++) {
    if (!c[i].alive) continue;
    int st = 0;
    pid_t r = waitpid(c[i].pid, &st, WNOHANG);
    if (r == c[i].pid || (r == -1 && errno == ECHILD)) {
      c[i].alive = 0;
      c[i].status = r == c[i].pid ? st : 0;
    } else {
      alive++;
    }
  }
  return alive;
}

static int failed(const child *c) {
  return !(WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0);
}

int p2pk_perf_spawn(perf_shared *sh, int nprocs, int timeout_s, perf_child_fn fn, void *arg,
                    FILE *err) {
  child c[P2PK_PERF_MAX_RANKS];
  memset(c, 0, sizeof c);
  if (nprocs < 1 || nprocs > P2PK_PERF_MAX_RANKS) {
    fprintf(err, "p2pkit perf: error: -p %d: between 1 and %d processes\n", nprocs,
            P2PK_PERF_MAX_RANKS);
    return P2PK_PERF_EXIT_USAGE;
  }
  fflush(stdout);
  fflush(stderr);
  int64_t start = p2pk_perf_now_ms();
  for (int p = 0; p < nprocs; p++) atomic_store(&sh->slot[p].heartbeat_ms, start);
  pid_t parent = getpid();
  for (int p = 0; p < nprocs; p++) {
    pid_t pid = fork();
    if (pid == 0) {
      /* Die with the parent: an orphaned rank would wait on its peers forever. */
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(P2PK_PERF_EXIT_FAIL);
      int rc = fn(arg, sh, p, nprocs);
      if (p2pk_stdout_flush("perf") != 0 && rc == P2PK_PERF_EXIT_OK) rc = P2PK_PERF_EXIT_FAIL;
      fflush(stderr);
      exit(rc);
    }
    if (pid < 0) {
      fprintf(err, "p2pkit perf: error: fork failed: %s\n", strerror(errno));
      atomic_store(&sh->abort, 1);
      kill_all(c, p, SIGKILL);
      while (reap(c, p) > 0) sleep_us(10000);
      return P2PK_PERF_EXIT_FAIL;
    }
    c[p].pid = pid;
    c[p].alive = 1;
  }

  int first = -1;          /* the rank whose failure we report */
  char why[640] = "";
  int64_t term_at = 0;     /* when we sent SIGTERM (0: not yet) */
  /* The child's own watchdog speaks first (it knows the phase); this one is
   * for a child that cannot. */
  int stall_s = p2pk_perf_stall_limit_s(timeout_s) + 2;
  for (;;) {
    int alive = reap(c, nprocs);
    if (first < 0) /* among those that failed on their own, the one whose error came first */
      for (int p = 0; p < nprocs; p++)
        if (!c[p].alive && !c[p].killed && failed(&c[p]) &&
            (first < 0 || (sh->slot[p].error[0] &&
                           (!sh->slot[first].error[0] ||
                            atomic_load(&sh->slot[p].error_ms) < atomic_load(&sh->slot[first].error_ms)))))
          first = p;
    if (first < 0 && timeout_s > 0) {
      int64_t now = p2pk_perf_now_ms();
      for (int p = 0; p < nprocs; p++) {
        perf_slot *s = &sh->slot[p];
        if (c[p].alive && now - atomic_load(&s->heartbeat_ms) > (int64_t)stall_s * 1000) {
          char phase[sizeof s->phase];
          memcpy(phase, s->phase, sizeof phase);
          phase[sizeof phase - 1] = '\0';
          snprintf(why, sizeof why, "no progress for %d s while %s (P2PKIT_TIMEOUT=%d); killed",
                   stall_s, phase[0] ? phase : "starting", timeout_s);
          first = p;
          break;
        }
      }
    }
    if (first >= 0 && alive > 0) {
      atomic_store(&sh->abort, 1);
      if (!term_at) {
        kill_all(c, nprocs, SIGTERM);
        term_at = p2pk_perf_now_ms();
      } else if (p2pk_perf_now_ms() - term_at > 2000) {
        kill_all(c, nprocs, SIGKILL);
      }
    }
    if (alive == 0) break;
    sleep_us(20000);
  }

  if (first < 0) return P2PK_PERF_EXIT_OK;
  perf_slot *s = &sh->slot[first];
  int code = P2PK_PERF_EXIT_FAIL;
  if (!why[0]) {
    if (s->error[0]) {
      snprintf(why, sizeof why, "%.*s", (int)sizeof s->error, s->error);
      code = atomic_load(&s->exit_code);
    } else if (WIFSIGNALED(c[first].status)) {
      snprintf(why, sizeof why, "died of signal %d (%s)", WTERMSIG(c[first].status),
               strsignal(WTERMSIG(c[first].status)));
    } else {
      snprintf(why, sizeof why, "exited with code %d", WEXITSTATUS(c[first].status));
      code = WEXITSTATUS(c[first].status);
    }
  }
  if (nprocs > 1) fprintf(err, "p2pkit perf: error: rank %d: %s\n", first, why);
  else fprintf(err, "p2pkit perf: error: %s\n", why);
  return code == P2PK_PERF_EXIT_USAGE ? P2PK_PERF_EXIT_USAGE : P2PK_PERF_EXIT_FAIL;
}

int p2pk_perf_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = -1;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

void p2pk_perf_random_secret(char *buf, size_t len) {
  unsigned char r[16];
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  ssize_t got = fd >= 0 ? read(fd, r, sizeof r) : -1;
  if (fd >= 0) close(fd);
  if (got != (ssize_t)sizeof r) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40);
    for (size_t i = 0; i < sizeof r; i++) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      r[i] = (unsigned char)(x >> 56);
    }
  }
  size_t o = 0;
  for (size_t i = 0; i < sizeof r && o + 2 < len; i++) o += (size_t)snprintf(buf + o, len - o, "%02x", r[i]);
  if (len) buf[o < len ? o : len - 1] = '\0';
}

void p2pk_proc_hosts_env(int proc, int nprocs, int hosts, int share_gpus) {
  if (hosts < 1 || nprocs < 1) return;
  char v[64];
  const int h = proc * hosts / nprocs;
  snprintf(v, sizeof v, "perf-host%d", h);
  setenv("P2PKIT_HOSTID", v, 1);
  /* Ranks sharing a GPU need an NCCL host id each (NCCL refuses two ranks
   * on one GPU of one host). */
  if (share_gpus) snprintf(v, sizeof v, "perf-host%d.rank%d", h, proc);
  setenv("NCCL_HOSTID", v, 0);
  p2pk_param_reset();
}

void p2pk_proc_launcher_env(const perf_shared *sh, int proc, int nprocs) {
  char v[32];
  snprintf(v, sizeof v, "%d", proc);
  setenv("RANK", v, 1);
  setenv("LOCAL_RANK", v, 1);
  snprintf(v, sizeof v, "%d", nprocs);
  setenv("WORLD_SIZE", v, 1);
  setenv("LOCAL_WORLD_SIZE", v, 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  snprintf(v, sizeof v, "%d", sh->ports[0]);
  setenv("MASTER_PORT", v, 1);
  setenv("P2PKIT_JOB_SECRET", sh->secret, 1);
  p2pk_param_reset();
}
