/* SPDX-License-Identifier: BSD-3-Clause */
/* Each communicator's ring of its last calls and its dump (trace.h).
 *
 * The ring belongs to one communicator, and its calls come from one thread
 * at a time (as NCCL's rule); only dumps read it from elsewhere (the
 * signal's thread, p2pkit_comm_dump_trace on another thread). So a record
 * takes no lock: each slot is a seqlock of its own, its stamp zeroed
 * before its words are written and set to 1 + the call's index after, all
 * relaxed atomic stores (plain moves on x86); a reader keeps a slot only
 * when its stamp reads the same index before and after the words. A
 * call's path, known at its group's end, is one more word of its slot,
 * written only while the stamp still names that call.
 *
 * GPU start and end are not recorded: the kernels keep no per-call
 * completion the host can read without a copy or an event per call, and
 * their PTX stays as it is. What a dump says of completion is what the
 * host knows: each call queued, launched or failed to launch (a call its
 * group refused or dropped unlaunched: failed, with no path), and the
 * communicator's error words (timeout, mismatch, abort, and the rank they
 * name). */
#include "coll/call/trace.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "coll/paths/path.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/param.h"
#include "trace/trace.h"

#define MAX_DUMPS 16 /* reports of one communicator, at most */

typedef struct {
  _Atomic uint64_t stamp;  /* 1 + the call's index among all recorded; 0 while written */
  _Atomic uint64_t seq;
  _Atomic uint64_t count;
  _Atomic uint64_t stream;
  _Atomic uint64_t t_ns;
  _Atomic uint64_t what;   /* kind | dtype << 8 | (op + 1) << 16 | (root + 1) << 32 */
  _Atomic uint64_t launch; /* 0 queued; path + 1 | state << 8 (1 launched, 2 failed) */
  uint64_t pad;
} tslot;

enum { K_SEND = P2PK_COLL_KINDS, K_RECV };

struct p2pk_trace {
  tslot *slot;
  uint64_t len, mask;  /* a power of two, or 0: no ring */
  _Atomic uint64_t next;
  uint64_t seq[2];     /* collectives, sends and receives numbered so far */
  struct p2pkit_comm *c;
  uint64_t id;
  int rank, nranks, device;
  char gpu[32], host[P2PK_HOSTID_MAX];
  int64_t pid;
  uint64_t pidns;
  p2pk_trace_rank *ranks;
  atomic_int auto_done, ndumps;
  struct p2pk_trace *next_reg;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct p2pk_trace *reg_head;

/* --------------------------------------------------------- recording -- */

void p2pk_trace_record(p2pk_call *call) {
  struct p2pk_trace *t = call->c->trace;
  if (!t || !t->len) return;
  const uint64_t i = atomic_load_explicit(&t->next, memory_order_relaxed);
  tslot *s = &t->slot[i & t->mask];
  atomic_store_explicit(&s->stamp, 0, memory_order_relaxed);
  atomic_thread_fence(memory_order_release); /* stamp 0 is seen before any new word */
  const int p2p = call->kind == P2PK_SENDRECV;
  const uint64_t kind = p2p ? (call->is_send ? K_SEND : K_RECV) : (uint64_t)call->kind;
  const int root = p2p || p2pk_coll_has_root(call->kind) ? call->root : -1;
  const int op = !p2p && p2pk_coll_has_op(call->kind) ? (int)call->op : -1;
  atomic_store_explicit(&s->seq, ++t->seq[p2p], memory_order_relaxed);
  atomic_store_explicit(&s->count, call->count, memory_order_relaxed);
  atomic_store_explicit(&s->stream, (uint64_t)(uintptr_t)call->stream, memory_order_relaxed);
  atomic_store_explicit(&s->t_ns, p2pk_now_ns(), memory_order_relaxed);
  atomic_store_explicit(&s->what, kind | (uint64_t)(call->dtype & 0xff) << 8 |
                        (uint64_t)(op + 1) << 16 | (uint64_t)(uint32_t)(root + 1) << 32,
                        memory_order_relaxed);
  atomic_store_explicit(&s->launch, 0, memory_order_relaxed);
  atomic_store_explicit(&s->stamp, i + 1, memory_order_release);
  atomic_store_explicit(&t->next, i + 1, memory_order_release);
  call->trace_at = i;
}

void p2pk_trace_launched(const p2pk_call *call, int path, p2pkit_status_t st) {
  struct p2pk_trace *t = call->c->trace;
  if (!t || !t->len) return;
  tslot *s = &t->slot[call->trace_at & t->mask];
  if (atomic_load_explicit(&s->stamp, memory_order_relaxed) == call->trace_at + 1)
    atomic_store_explicit(&s->launch, (uint64_t)(path + 1) | (st == P2PKIT_SUCCESS ? 1u : 2u) << 8,
                          memory_order_relaxed);
  if (st == P2PKIT_ERR_TIMEOUT || st == P2PKIT_ERR_REMOTE) p2pk_trace_on_error(call->c, st);
}

void p2pk_trace_dropped(const p2pk_call *call) {
  struct p2pk_trace *t = call->c->trace;
  if (!t || !t->len) return;
  tslot *s = &t->slot[call->trace_at & t->mask];
  if (atomic_load_explicit(&s->stamp, memory_order_relaxed) == call->trace_at + 1 &&
      atomic_load_explicit(&s->launch, memory_order_relaxed) == 0)
    atomic_store_explicit(&s->launch, (uint64_t)2 << 8, memory_order_relaxed);
}

/* ----------------------------------------------------------- reading -- */

/* One slot's words as a call: 0, or -1 when the slot changed while read. */
static int read_slot(tslot *s, uint64_t index, p2pk_tcall *k) {
  if (atomic_load_explicit(&s->stamp, memory_order_acquire) != index + 1) return -1;
  const uint64_t seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
  const uint64_t count = atomic_load_explicit(&s->count, memory_order_relaxed);
  const uint64_t stream = atomic_load_explicit(&s->stream, memory_order_relaxed);
  const uint64_t t_ns = atomic_load_explicit(&s->t_ns, memory_order_relaxed);
  const uint64_t what = atomic_load_explicit(&s->what, memory_order_relaxed);
  const uint64_t launch = atomic_load_explicit(&s->launch, memory_order_relaxed);
  atomic_thread_fence(memory_order_acquire); /* the words are read before the stamp again */
  if (atomic_load_explicit(&s->stamp, memory_order_relaxed) != index + 1) return -1;
  const int kind = (int)(what & 0xff), op = (int)(what >> 16 & 0xff) - 1;
  const int64_t root = (int64_t)(what >> 32) - 1;
  memset(k, 0, sizeof *k);
  k->seq = seq;
  k->p2p = kind >= K_SEND;
  snprintf(k->kind, sizeof k->kind, "%s", kind == K_SEND ? "send" : kind == K_RECV ? "recv"
                                          : p2pk_coll_name(kind));
  snprintf(k->dtype, sizeof k->dtype, "%s", p2pkit_dtype_name((p2pkit_dtype_t)(what >> 8 & 0xff)));
  snprintf(k->op, sizeof k->op, "%s", op < 0 ? "-" : p2pkit_redop_name((p2pkit_redop_t)op));
  snprintf(k->path, sizeof k->path, "%s", launch & 0xff ? p2pk_path_name((int)(launch & 0xff) - 1) : "-");
  snprintf(k->state, sizeof k->state, "%s", launch >> 8 == 2 ? "failed" : launch >> 8 ? "launched" : "queued");
  k->count = count;
  k->root = root;
  k->stream = stream;
  k->t_ns = t_ns;
  return 0;
}

/* The calls the ring holds now, oldest first; how many. */
static size_t snapshot(struct p2pk_trace *t, p2pk_tcall *out, uint64_t *recorded) {
  const uint64_t end = atomic_load_explicit(&t->next, memory_order_acquire);
  const uint64_t begin = end > t->len ? end - t->len : 0;
  size_t n = 0;
  for (uint64_t i = begin; i < end; i++)
    if (read_slot(&t->slot[i & t->mask], i, &out[n]) == 0) n++;
  *recorded = end;
  return n;
}

/* ------------------------------------------------------------- dumps -- */

/* The communicator's error: its kernels' words, else what the trigger
 * says (st). */
static void error_of(const struct p2pk_trace *t, p2pkit_status_t st, p2pk_tdump *d) {
  static const char *const codes[] = {[P2PK_DERR_NONE] = "none", [P2PK_DERR_TIMEOUT] = "timeout",
                                      [P2PK_DERR_MISMATCH] = "mismatch", [P2PK_DERR_ABORTED] = "aborted"};
  const volatile int32_t *he = t->c->host_err;
  const int32_t code = he ? he[0] : P2PK_DERR_NONE, peer = he ? he[1] : -1;
  d->error_peer = -1;
  if (code > P2PK_DERR_NONE && code <= P2PK_DERR_ABORTED) {
    snprintf(d->error, sizeof d->error, "%s", codes[code]);
    d->error_peer = peer >= 0 && peer < t->nranks ? peer : -1;
  } else {
    snprintf(d->error, sizeof d->error, "%s", st == P2PKIT_SUCCESS ? "none"
             : st == P2PKIT_ERR_TIMEOUT ? "timeout" : st == P2PKIT_ERR_REMOTE ? "remote" : "other");
  }
}

/* Who this rank is and what it sees now, with the ring's calls. */
static int fill(struct p2pk_trace *t, const char *reason, p2pkit_status_t st, p2pk_tdump *d) {
  memset(d, 0, sizeof *d);
  d->calls = malloc(sizeof *d->calls * (t->len + 1));
  d->peers = calloc((size_t)t->nranks, sizeof *d->peers);
  if (!d->calls || !d->peers) return -1;
  snprintf(d->version, sizeof d->version, "%d.%d.%d", P2PKIT_VERSION_MAJOR, P2PKIT_VERSION_MINOR,
           P2PKIT_VERSION_PATCH);
  snprintf(d->comm, sizeof d->comm, "%016llx", (unsigned long long)t->id);
  d->rank = t->rank, d->nranks = t->nranks;
  snprintf(d->host, sizeof d->host, "%s", t->host);
  d->pid = t->pid, d->pidns = t->pidns, d->device = t->device;
  snprintf(d->gpu, sizeof d->gpu, "%s", t->gpu);
  snprintf(d->reason, sizeof d->reason, "%s", reason);
  struct timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  d->real_ns = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
  d->mono_ns = p2pk_now_ns();
  error_of(t, st, d);
  for (int r = 0; r < t->nranks; r++) {
    const p2pk_trace_rank *x = &t->ranks[r];
    d->peers[r].pid = x->pid;
    d->peers[r].local = x->same_machine && x->pidns == t->pidns;
    d->peers[r].alive = r == t->rank || !d->peers[r].local ? '-' : p2pk_trace_alive(x->pid);
  }
  d->ring = t->len;
  d->ncalls = snapshot(t, d->calls, &d->recorded);
  return 0;
}

/* The dump as text into a new file of the directory: 0 (msg: its path),
 * -2 dumps are off, -1 failed (msg: why). A communicator's files are
 * numbered from 1, at most MAX_DUMPS of them. */
static int dump_file(struct p2pk_trace *t, const p2pk_tdump *d, char *msg, size_t mlen) {
  char dir[4096], name[128];
  const int dfd = p2pk_trace_dir_open(dir, sizeof dir, msg, mlen);
  if (dfd < 0) return dfd;
  const size_t cap = p2pk_tdump_max_bytes(d->nranks, d->ncalls);
  char *buf = malloc(cap);
  const size_t len = buf ? p2pk_tdump_write(d, buf, cap) : 0;
  const int k = len ? atomic_fetch_add(&t->ndumps, 1) : 0;
  int rc = -1;
  if (!len) {
    snprintf(msg, mlen, "out of memory for the report");
  } else if (k >= MAX_DUMPS) {
    snprintf(msg, mlen, "this communicator wrote its %d reports already", MAX_DUMPS);
  } else {
    snprintf(name, sizeof name, "p2pkit-trace-%s-r%d-p%lld-%d.txt", d->comm, d->rank,
             (long long)d->pid, k + 1);
    rc = p2pk_trace_file_write(dfd, name, buf, len, msg, mlen);
    if (rc == 0) snprintf(msg, mlen, "%s/%s", dir, name);
  }
  close(dfd);
  free(buf);
  return rc;
}

static int dump(struct p2pk_trace *t, const char *reason, p2pkit_status_t st, char *msg, size_t mlen) {
  p2pk_tdump d;
  int rc = -1;
  if (fill(t, reason, st, &d) == 0) rc = dump_file(t, &d, msg, mlen);
  else snprintf(msg, mlen, "out of memory for the report");
  p2pk_tdump_free(&d);
  return rc;
}

/* A dump nobody asked for: its outcome on the log. */
static void dump_logged(struct p2pk_trace *t, const char *reason, p2pkit_status_t st) {
  char msg[4096 + 256];
  const int rc = dump(t, reason, st, msg, sizeof msg);
  if (rc == 0)
    P2PK_WARN("rank %d (GPU %d): desync report %s (`p2pkit trace` on its directory reads every "
              "rank's)", t->rank, t->device, msg);
  else if (rc == -1)
    P2PK_WARN("rank %d (GPU %d): no desync report: %s", t->rank, t->device, msg);
}

void p2pk_trace_on_error(struct p2pkit_comm *c, p2pkit_status_t st) {
  struct p2pk_trace *t = c->trace;
  if (!t || atomic_exchange(&t->auto_done, 1)) return;
  char reason[300];
  snprintf(reason, sizeof reason, "error: %s", p2pkit_last_error());
  dump_logged(t, reason, st);
}

void p2pk_trace_on_abort(struct p2pkit_comm *c) {
  struct p2pk_trace *t = c->trace;
  if (!t || atomic_exchange(&t->auto_done, 1)) return;
  dump_logged(t, "p2pkit_comm_abort", P2PKIT_SUCCESS);
}

p2pkit_status_t p2pkit_comm_dump_trace(p2pkit_comm_t comm, const char *reason) {
  if (!comm) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "comm_dump_trace: communicator is NULL");
  struct p2pk_trace *t = comm->trace;
  if (!t)
    return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "comm_dump_trace: rank %d has no trace (no memory "
                     "for it at init)", comm->rank);
  char msg[4096 + 256];
  const int rc = dump(t, reason && *reason ? reason : "p2pkit_comm_dump_trace", P2PKIT_SUCCESS,
                      msg, sizeof msg);
  if (rc == -2)
    return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "comm_dump_trace: P2PKIT_TRACE_DIR=off: no reports");
  if (rc != 0) return p2pk_fail(P2PKIT_ERR_IO, "comm_dump_trace: rank %d: %s", t->rank, msg);
  P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): desync report %s", t->rank, t->device, msg);
  return P2PKIT_SUCCESS;
}

/* ------------------------------------------------------------ signal -- */

static int sig_pipe[2] = {-1, -1};
static pid_t sig_pid;

/* Async-signal-safe: one byte to the pipe (never blocking), errno kept;
 * a forked child's signal is not this process's. */
static void on_signal(int sig) {
  const int e = errno;
  if (getpid() == sig_pid) {
    const char b = (char)sig;
    if (write(sig_pipe[1], &b, 1) < 0) { /* a full pipe: a dump is coming anyway */
    }
  }
  errno = e;
}

static void dump_all(const char *reason) {
  pthread_mutex_lock(&reg_lock);
  for (struct p2pk_trace *t = reg_head; t; t = t->next_reg) dump_logged(t, reason, P2PKIT_SUCCESS);
  pthread_mutex_unlock(&reg_lock);
}

static void *sig_thread(void *arg) {
  char reason[64], b[64];
  snprintf(reason, sizeof reason, "signal %s", (const char *)arg);
  for (;;) {
    const ssize_t n = read(sig_pipe[0], b, sizeof b);
    if (n > 0) dump_all(reason);
    else if (n == 0 || errno != EINTR) return NULL;
  }
}

/* The signal P2PKIT_TRACE_SIGNAL names (0: none), and its name. */
static int signal_of(const char **name) {
  const char *v = p2pk_param_str("P2PKIT_TRACE_SIGNAL");
  if (strncasecmp(v, "SIG", 3) == 0) v += 3;
  *name = strcasecmp(v, "USR1") == 0 ? "SIGUSR1" : "SIGUSR2";
  return strcasecmp(v, "USR1") == 0 ? SIGUSR1 : strcasecmp(v, "USR2") == 0 ? SIGUSR2 : 0;
}

/* The pipe, its thread, then the handler. Without the thread the pipe is
 * closed again and no handler installed (one line says so). Once made,
 * pipe and thread stay for the life of the process, as the handler does
 * (decided once; a communicator's end takes none of them away). */
static void sig_install(int sig, const char *name) {
  sigset_t all, prev;
  sigfillset(&all);
  pthread_t th;
  if (pipe2(sig_pipe, O_CLOEXEC) != 0) {
    P2PK_WARN("P2PKIT_TRACE_SIGNAL=%s: no pipe for the signal's reports: %s; no report on that "
              "signal", name, strerror(errno));
    return;
  }
  fcntl(sig_pipe[1], F_SETFL, O_NONBLOCK);
  pthread_sigmask(SIG_SETMASK, &all, &prev); /* the thread takes no signal itself */
  const int e = pthread_create(&th, NULL, sig_thread, (void *)name);
  pthread_sigmask(SIG_SETMASK, &prev, NULL);
  if (e != 0) {
    close(sig_pipe[0]);
    close(sig_pipe[1]);
    sig_pipe[0] = sig_pipe[1] = -1;
    P2PK_WARN("P2PKIT_TRACE_SIGNAL=%s: no thread for the signal's reports: %s; no report on that "
              "signal", name, strerror(e));
    return;
  }
  pthread_detach(th);
  sig_pid = getpid();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, NULL);
  P2PK_INFO(P2PK_LOG_COLL, "%s makes every communicator of this process write its desync report",
            name);
}

/* The handler and the thread that dumps, when the setting names a signal
 * the application does not handle already: decided once per process, at
 * the first communicator made while the setting names one. */
static void sig_setup(void) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static int decided;
  const char *name = NULL;
  pthread_mutex_lock(&lock);
  const int sig = decided ? 0 : signal_of(&name);
  struct sigaction old;
  if (sig && sigaction(sig, NULL, &old) == 0) {
    decided = 1;
    if (old.sa_handler != SIG_DFL)
      P2PK_WARN("P2PKIT_TRACE_SIGNAL=%s: the application handles %s already (or ignores it); "
                "p2pkit leaves it so: no report on that signal", name, name);
    else sig_install(sig, name);
  }
  pthread_mutex_unlock(&lock);
}

/* -------------------------------------------------------- lifecycle ---- */

uint64_t p2pk_trace_new_id(void) {
  uint64_t id = 0;
  if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id) id = p2pk_now_ns() ^ ((uint64_t)getpid() << 32);
  return id;
}

/* The ring's length: P2PKIT_TRACE_RING rounded up to a power of two. */
static uint64_t ring_len(void) {
  const int64_t want = p2pk_param_int("P2PKIT_TRACE_RING");
  uint64_t n = 1;
  while ((int64_t)n < want) n <<= 1;
  return want > 0 ? n : 0;
}

static struct p2pk_trace *trace_new(struct p2pkit_comm *c, const p2pk_trace_rank *ranks) {
  struct p2pk_trace *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->len = ring_len();
  t->mask = t->len ? t->len - 1 : 0;
  t->slot = t->len ? aligned_alloc(64, t->len * sizeof *t->slot) : NULL;
  t->ranks = malloc(sizeof *t->ranks * (size_t)c->nranks);
  if ((t->len && !t->slot) || !t->ranks) {
    free(t->slot);
    free(t->ranks);
    free(t);
    return NULL;
  }
  if (t->len) memset(t->slot, 0, t->len * sizeof *t->slot);
  memcpy(t->ranks, ranks, sizeof *t->ranks * (size_t)c->nranks);
  return t;
}

void p2pk_trace_attach(struct p2pkit_comm *c, uint64_t id, const p2pk_trace_rank *ranks) {
  if (c->nested || c->trace) return;
  struct p2pk_trace *t = trace_new(c, ranks);
  if (!t) {
    P2PK_INFO(P2PK_LOG_COLL, "rank %d: no memory for the ring of last calls: no desync report",
              c->rank);
    return;
  }
  t->c = c;
  t->id = id;
  t->rank = c->rank, t->nranks = c->nranks, t->device = c->device;
  t->pid = getpid();
  t->pidns = ranks[c->rank].pidns;
  if (p2pk_host_id(t->host, sizeof t->host) != P2PKIT_SUCCESS) snprintf(t->host, sizeof t->host, "?");
  if (cudaDeviceGetPCIBusId(t->gpu, sizeof t->gpu, c->device) != cudaSuccess) {
    cudaGetLastError();
    snprintf(t->gpu, sizeof t->gpu, "-");
  }
  pthread_mutex_lock(&reg_lock);
  t->next_reg = reg_head;
  reg_head = t;
  c->trace = t;
  pthread_mutex_unlock(&reg_lock);
  sig_setup();
}

void p2pk_trace_detach(struct p2pkit_comm *c) {
  struct p2pk_trace *t = c->trace;
  if (!t) return;
  pthread_mutex_lock(&reg_lock);
  for (struct p2pk_trace **p = &reg_head; *p; p = &(*p)->next_reg)
    if (*p == t) {
      *p = t->next_reg;
      break;
    }
  c->trace = NULL;
  pthread_mutex_unlock(&reg_lock);
  free(t->slot);
  free(t->ranks);
  free(t);
}
