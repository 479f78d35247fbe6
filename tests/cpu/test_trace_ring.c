/* SPDX-License-Identifier: BSD-3-Clause */
/* The ring of last calls and its dump, without a GPU (coll/call/trace.c on a
 * communicator made by hand): the ring keeps the last P2PKIT_TRACE_RING
 * calls, each with its number, kind, type, count, root or peer, operation,
 * stream and path, and a path for a call the ring no longer holds lands
 * nowhere; a call its group refused or dropped reads failed, never
 * queued; the dump reads back, says which peers' processes are gone (an
 * exited and a zombie child), and is written once for an error and not
 * again for the abort after it; P2PKIT_TRACE_SIGNAL dumps every
 * communicator from the library's thread and leaves a signal the
 * application handles alone, and without a thread for it leaves no
 * pipe open; the directory must be this user's and not
 * open to all, the file new (a planted link makes the dump fail, not
 * follow it), 0600, and a write that fails leaves nothing; with one thread
 * recording and another dumping, every call a dump holds is whole.
 * `test_trace_ring --bench` prints the host time of one record. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coll/paths/path.h"
#include "coll/call/trace.h"
#include "core/clock.h"
#include "core/param.h"
#include "test.h"
#include "trace/trace.h"

static char tmp[256];

static void set(const char *name, const char *value) {
  if (value) setenv(name, value, 1);
  else unsetenv(name);
  p2pk_param_reset();
}

/* A communicator of `n` ranks as trace.c sees it; ranks[r]'s pid given. */
static struct p2pkit_comm *comm_of(int rank, int n, const int64_t *pids) {
  struct p2pkit_comm *c = calloc(1, sizeof *c);
  c->rank = rank, c->nranks = n, c->device = 0;
  c->host_err = calloc(16, sizeof *c->host_err);
  p2pk_trace_rank tr[P2PK_COLL_MAX_RANKS];
  for (int r = 0; r < n; r++) tr[r] = (p2pk_trace_rank){pids ? pids[r] : getpid(), 7, 1};
  p2pk_trace_attach(c, 0xabcdef0123456789ull, tr);
  return c;
}

static void comm_free(struct p2pkit_comm *c) {
  p2pk_trace_detach(c);
  free(c->host_err);
  free(c);
}

/* Call number q of a fixed pattern: every fourth a send or receive. */
static p2pk_call call_of(struct p2pkit_comm *c, uint64_t q) {
  p2pk_call k;
  memset(&k, 0, sizeof k);
  k.c = c;
  k.kind = q % 4 == 3 ? P2PK_SENDRECV : q % 4 == 1 ? P2PK_COLL_BROADCAST : P2PK_COLL_ALL_REDUCE;
  k.is_send = q % 8 == 3;
  k.root = 1;
  k.count = 3 * q;
  k.dtype = P2PKIT_BFLOAT16;
  k.op = P2PKIT_MAX;
  k.stream = (p2pkit_stream_t)(uintptr_t)(0x1000 + q);
  return k;
}

/* The files of the directory, each parsed, into d (at most `most`). */
static int dumps_in(const char *dir, p2pk_tdump *d, int most) {
  DIR *dp = opendir(dir);
  int n = 0;
  for (struct dirent *e; dp && (e = readdir(dp)) && n < most;) {
    if (e->d_name[0] == '.') continue;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
    FILE *f = fopen(path, "r");
    static char buf[1 << 20];
    const size_t len = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    if (p2pk_tdump_parse(path, buf, len, &d[n]) != P2PKIT_SUCCESS) {
      T_FAIL("%s", p2pkit_last_error());
      p2pk_tdump_free(&d[n]);
      continue;
    }
    n++;
  }
  if (dp) closedir(dp);
  return n;
}

static void empty_dir(const char *dir) {
  DIR *dp = opendir(dir);
  for (struct dirent *e; dp && (e = readdir(dp));) {
    if (e->d_name[0] == '.') continue;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  if (dp) closedir(dp);
}

static void free_all(p2pk_tdump *d, int n) {
  for (int i = 0; i < n; i++) p2pk_tdump_free(&d[i]);
}

TEST(the_ring_keeps_the_last_calls_whole) {
  set("P2PKIT_TRACE_RING", "12"); /* rounded up to 16 */
  set("P2PKIT_TRACE_DIR", tmp);
  empty_dir(tmp);
  struct p2pkit_comm *c = comm_of(0, 2, NULL);
  CHECK(c->trace != NULL);
  p2pk_call first = call_of(c, 0);
  p2pk_trace_record(&first);
  for (uint64_t q = 1; q < 40; q++) {
    p2pk_call k = call_of(c, q);
    p2pk_trace_record(&k);
    CHECK_EQ(k.trace_at, q);
    if (q % 5 == 0) p2pk_trace_launched(&k, P2PK_PATH_P2P, q % 10 ? P2PKIT_SUCCESS : P2PKIT_ERR_CUDA);
  }
  /* Call 0's slot holds call 32 now: its launch lands nowhere. */
  p2pk_trace_launched(&first, P2PK_PATH_NCCL, P2PKIT_SUCCESS);
  CHECK_OK(p2pkit_comm_dump_trace(c, "test"));
  p2pk_tdump d[2];
  int n = dumps_in(tmp, d, 2);
  CHECK_EQ(n, 1);
  if (n != 1) {
    free_all(d, n);
    comm_free(c);
    return;
  }
  CHECK_EQ(d[0].ring, 16);
  CHECK_EQ(d[0].recorded, 40);
  CHECK_EQ(d[0].ncalls, 16);
  CHECK_STR(d[0].comm, "abcdef0123456789");
  CHECK_STR(d[0].reason, "test");
  CHECK_STR(d[0].error, "none");
  uint64_t coll = 0, p2p = 0; /* numbers of the calls before the ring's first */
  for (uint64_t q = 0; q < 24; q++) {
    if (q % 4 == 3) p2p++;
    else coll++;
  }
  for (size_t i = 0; i < d[0].ncalls; i++) {
    const p2pk_tcall *k = &d[0].calls[i];
    const uint64_t q = 24 + i;
    CHECK_EQ(k->count, 3 * q);
    CHECK_EQ(k->stream, 0x1000 + q);
    CHECK_EQ(k->seq, q % 4 == 3 ? ++p2p : ++coll);
    CHECK_STR(k->kind, q % 4 == 3 ? (q % 8 == 3 ? "send" : "recv") : q % 4 == 1 ? "broadcast" : "all_reduce");
    CHECK_STR(k->dtype, "bfloat16");
    CHECK_STR(k->op, q % 4 == 3 || q % 4 == 1 ? "-" : "max");
    CHECK_EQ(k->root, q % 4 == 0 || q % 4 == 2 ? -1 : 1);
    CHECK_STR(k->state, q % 5 ? "queued" : q % 10 ? "launched" : "failed");
    CHECK_STR(k->path, q % 5 ? "-" : "p2p-kernel");
    CHECK(i == 0 || k->t_ns >= d[0].calls[i - 1].t_ns);
  }
  CHECK_STR(d[0].calls[8].path, "-"); /* call 32: not NCCL */
  free_all(d, n);
  comm_free(c);
}

TEST(an_error_dumps_once_naming_the_gone_peers) {
  set("P2PKIT_TRACE_RING", "8");
  set("P2PKIT_TRACE_DIR", tmp);
  empty_dir(tmp);
  /* Rank 1 a child that exited and was reaped, rank 2 a zombie, rank 3
   * this process's parent (alive). */
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  waitpid(gone, NULL, 0);
  const pid_t zombie = fork();
  if (zombie == 0) _exit(0);
  for (int i = 0; i < 200 && p2pk_trace_alive(zombie) == 'y'; i++) usleep(10000);
  const int64_t pids[4] = {getpid(), gone, zombie, getppid()};
  struct p2pkit_comm *c = comm_of(0, 4, pids);
  p2pk_call k = call_of(c, 0);
  p2pk_trace_record(&k);
  c->host_err[0] = P2PK_DERR_TIMEOUT;
  c->host_err[1] = 1;
  p2pk_trace_on_error(c, P2PKIT_ERR_TIMEOUT);
  p2pk_trace_on_error(c, P2PKIT_ERR_TIMEOUT); /* the next call sees it again */
  p2pk_trace_on_abort(c);                     /* the abort after it */
  p2pk_tdump d[4];
  int n = dumps_in(tmp, d, 4);
  CHECK_EQ(n, 1);
  if (n != 1) {
    free_all(d, n);
    comm_free(c);
    return;
  }
  CHECK_STR(d[0].error, "timeout");
  CHECK_EQ(d[0].error_peer, 1);
  CHECK(strncmp(d[0].reason, "error: ", 7) == 0);
  CHECK_EQ(d[0].peers[0].alive, '-');
  CHECK_EQ(d[0].peers[1].alive, 'n');
  CHECK_EQ(d[0].peers[2].alive, 'n');
  CHECK_EQ(d[0].peers[3].alive, 'y');
  CHECK_EQ(d[0].peers[1].pid, gone);
  free_all(d, n);
  waitpid(zombie, NULL, 0);
  comm_free(c);
  /* An abort alone dumps. */
  empty_dir(tmp);
  c = comm_of(0, 1, NULL);
  p2pk_trace_on_abort(c);
  n = dumps_in(tmp, d, 4);
  CHECK_EQ(n, 1);
  if (n == 1) CHECK_STR(d[0].reason, "p2pkit_comm_abort");
  free_all(d, n);
  comm_free(c);
}

/* The calls of the one dump in tmp into d (1 when there is one). */
static int one_dump(p2pk_tdump *d) {
  p2pk_tdump all[2];
  const int n = dumps_in(tmp, all, 2);
  CHECK_EQ(n, 1);
  if (n == 1) *d = all[0];
  else free_all(all, n);
  empty_dir(tmp);
  return n == 1;
}

TEST(a_call_its_group_refused_reads_failed_not_queued) {
  set("P2PKIT_TRACE_RING", "128");
  set("P2PKIT_TRACE_DIR", tmp);
  empty_dir(tmp);
  struct p2pkit_comm *c = comm_of(0, 2, NULL);
  void *buf = (void *)(uintptr_t)0x300000;
  /* Two sends to one peer in one group: refused at the group's end, and
   * neither ever runs. */
  CHECK_OK(p2pkit_group_start());
  CHECK_OK(p2pk_post_checked(1, buf, 4, P2PKIT_FLOAT32, 4, 1, c, NULL));
  CHECK_OK(p2pk_post_checked(1, buf, 4, P2PKIT_FLOAT32, 4, 1, c, NULL));
  CHECK_EQ(p2pkit_group_end(), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "more than one send to rank 1") != NULL);
  CHECK_OK(p2pkit_comm_dump_trace(c, "refused"));
  p2pk_tdump d;
  if (one_dump(&d)) {
    CHECK_EQ(d.ncalls, 2);
    for (size_t i = 0; i < d.ncalls; i++) {
      CHECK_STR(d.calls[i].state, "failed");
      CHECK_STR(d.calls[i].path, "-");
    }
    p2pk_tdump_free(&d);
  }
  /* One send too many for the group: the group drops every call it held. */
  CHECK_OK(p2pkit_group_start());
  int held = 0;
  while (p2pk_post_checked(1, buf, 4, P2PKIT_FLOAT32, 4, 1, c, NULL) == P2PKIT_SUCCESS) held++;
  CHECK_EQ(held, P2PK_GROUP_OPS);
  CHECK_OK(p2pkit_group_end());
  CHECK_OK(p2pkit_comm_dump_trace(c, "dropped"));
  if (one_dump(&d)) {
    CHECK_EQ(d.ncalls, 2 + (size_t)P2PK_GROUP_OPS);
    size_t queued = 0;
    for (size_t i = 0; i < d.ncalls; i++) queued += strcmp(d.calls[i].state, "queued") == 0;
    CHECK_EQ(queued, 0);
    p2pk_tdump_free(&d);
  }
  comm_free(c);
}

/* This process's open descriptors; -1 when /proc cannot say. */
static int open_fds(void) {
  DIR *dp = opendir("/proc/self/fd");
  if (!dp) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(dp));) n += e->d_name[0] != '.';
  closedir(dp);
  return n - 1; /* the directory's own */
}

static volatile sig_atomic_t app_saw;
static void app_handler(int sig) { app_saw = sig; }

TEST(a_signal_dumps_every_communicator_and_spares_the_applications) {
  set("P2PKIT_TRACE_DIR", tmp);
  empty_dir(tmp);
  /* The application's own SIGUSR1, in a child: p2pkit leaves it so. */
  const pid_t child = fork();
  if (child == 0) {
    signal(SIGUSR1, app_handler);
    set("P2PKIT_TRACE_SIGNAL", "USR1");
    struct p2pkit_comm *c = comm_of(0, 1, NULL);
    raise(SIGUSR1);
    usleep(200000);
    comm_free(c);
    _exit(app_saw == SIGUSR1 ? 0 : 3);
  }
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  p2pk_tdump d[4];
  int n = dumps_in(tmp, d, 4);
  CHECK_EQ(n, 0);
  free_all(d, n);
  /* No thread for the signal (no memory for its stack): nothing installed
   * and the pipe closed again, in a child (this process decides once). */
  const pid_t nothread = fork();
  if (nothread == 0) {
    const int before = open_fds();
    pthread_attr_t huge;
    pthread_attr_init(&huge);
    pthread_attr_setstacksize(&huge, (size_t)1 << 50); /* past any address space */
    pthread_setattr_default_np(&huge);
    set("P2PKIT_TRACE_SIGNAL", "USR2");
    struct p2pkit_comm *c = comm_of(0, 1, NULL);
    struct sigaction now;
    sigaction(SIGUSR2, NULL, &now);
    const int after = open_fds();
    comm_free(c);
    _exit(before < 0 || after != before ? 4 : now.sa_handler != SIG_DFL ? 5 : 0);
  }
  waitpid(nothread, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK_EQ(WEXITSTATUS(status), 0);
  /* Here, SIGUSR2: both communicators dump, from the library's thread;
   * the pipe and its thread (two descriptors) stay after them. */
  const int fds0 = open_fds();
  set("P2PKIT_TRACE_SIGNAL", "SIGUSR2");
  struct p2pkit_comm *a = comm_of(0, 2, NULL), *b = comm_of(1, 2, NULL);
  raise(SIGUSR2);
  n = 0;
  for (int i = 0; i < 500 && n < 2; i++, usleep(10000)) {
    n = dumps_in(tmp, d, 4);
    if (n < 2) free_all(d, n);
  }
  CHECK_EQ(n, 2);
  for (int i = 0; i < n; i++) CHECK_STR(d[i].reason, "signal SIGUSR2");
  free_all(d, n);
  comm_free(a);
  comm_free(b);
  CHECK_EQ(open_fds(), fds0 + 2);
  set("P2PKIT_TRACE_SIGNAL", NULL);
}

TEST(the_directory_and_the_file_are_checked) {
  char dir[300], path[600];
  set("P2PKIT_TRACE_RING", "4");
  struct p2pkit_comm *c = comm_of(0, 1, NULL);
  set("P2PKIT_TRACE_DIR", "off");
  CHECK_EQ(p2pkit_comm_dump_trace(c, NULL), P2PKIT_ERR_UNSUPPORTED);
  /* A folder that does not exist is made (0700), one level only. */
  snprintf(dir, sizeof dir, "%s/new/deeper", tmp);
  set("P2PKIT_TRACE_DIR", dir);
  CHECK_EQ(p2pkit_comm_dump_trace(c, NULL), P2PKIT_ERR_IO);
  CHECK(strstr(p2pkit_last_error(), "No such file or directory") != NULL);
  snprintf(dir, sizeof dir, "%s/new", tmp);
  set("P2PKIT_TRACE_DIR", dir);
  CHECK_OK(p2pkit_comm_dump_trace(c, NULL));
  struct stat nd;
  CHECK(stat(dir, &nd) == 0 && (nd.st_mode & 0777) == 0700);
  empty_dir(dir);
  rmdir(dir);
  /* Open to every user without the sticky bit: refused; with it: taken. */
  snprintf(dir, sizeof dir, "%s/open", tmp);
  mkdir(dir, 0700);
  chmod(dir, 0777);
  set("P2PKIT_TRACE_DIR", dir);
  CHECK_EQ(p2pkit_comm_dump_trace(c, NULL), P2PKIT_ERR_IO);
  CHECK(strstr(p2pkit_last_error(), "writable by every user and not sticky") != NULL);
  chmod(dir, 01777);
  CHECK_OK(p2pkit_comm_dump_trace(c, NULL));
  p2pk_tdump d[4];
  const int n = dumps_in(dir, d, 4);
  CHECK_EQ(n, 1);
  free_all(d, n);
  empty_dir(dir);
  /* Another user's directory. */
  if (geteuid() == 0) {
    chmod(dir, 0755);
    CHECK_EQ(chown(dir, 65534, 65534), 0);
  } else {
    snprintf(dir, sizeof dir, "/");
  }
  set("P2PKIT_TRACE_DIR", dir);
  CHECK_EQ(p2pkit_comm_dump_trace(c, NULL), P2PKIT_ERR_IO);
  CHECK(strstr(p2pkit_last_error(), "belongs to another user") != NULL);
  /* A link planted where the next report goes: the dump fails, the link's
   * target is untouched; the one after is written, 0600. */
  set("P2PKIT_TRACE_DIR", tmp);
  empty_dir(tmp);
  char victim[600];
  snprintf(victim, sizeof victim, "%s/open/victim", tmp);
  FILE *v = fopen(victim, "w");
  if (v) fclose(v);
  snprintf(path, sizeof path, "%s/p2pkit-trace-abcdef0123456789-r0-p%d-3.txt", tmp, (int)getpid());
  CHECK_EQ(symlink(victim, path), 0);
  CHECK_EQ(p2pkit_comm_dump_trace(c, NULL), P2PKIT_ERR_IO);
  CHECK(strstr(p2pkit_last_error(), "File exists") != NULL);
  struct stat st;
  CHECK(stat(victim, &st) == 0 && st.st_size == 0);
  unlink(path);
  CHECK_OK(p2pkit_comm_dump_trace(c, NULL));
  snprintf(path, sizeof path, "%s/p2pkit-trace-abcdef0123456789-r0-p%d-4.txt", tmp, (int)getpid());
  CHECK(lstat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0600);
  unlink(victim);
  comm_free(c);
}

TEST(a_write_that_fails_leaves_nothing) {
  set("P2PKIT_TRACE_DIR", tmp);
  set("P2PKIT_TRACE_RING", "64");
  empty_dir(tmp);
  const pid_t child = fork();
  if (child == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {200, 200}; /* a file may not grow past 200 bytes */
    setrlimit(RLIMIT_FSIZE, &rl);
    struct p2pkit_comm *c = comm_of(0, 1, NULL);
    for (uint64_t q = 0; q < 64; q++) {
      p2pk_call k = call_of(c, q);
      p2pk_trace_record(&k);
    }
    const p2pkit_status_t st = p2pkit_comm_dump_trace(c, NULL);
    const int said = strstr(p2pkit_last_error(), "writing p2pkit-trace-") != NULL;
    comm_free(c);
    _exit(st == P2PKIT_ERR_IO && said ? 0 : 3);
  }
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  p2pk_tdump d[2];
  const int n = dumps_in(tmp, d, 2);
  CHECK_EQ(n, 0);
  free_all(d, n);
}

typedef struct {
  struct p2pkit_comm *c;
  atomic_int stop;
} racer;

static void *record_loop(void *arg) {
  racer *r = arg;
  for (uint64_t q = 0; !atomic_load(&r->stop); q++) {
    p2pk_call k = call_of(r->c, q);
    p2pk_trace_record(&k);
    p2pk_trace_launched(&k, P2PK_PATH_P2P, P2PKIT_SUCCESS);
  }
  return NULL;
}

TEST(a_dump_beside_a_recording_thread_holds_whole_calls) {
  set("P2PKIT_TRACE_DIR", tmp);
  set("P2PKIT_TRACE_RING", "32");
  empty_dir(tmp);
  racer r = {comm_of(0, 2, NULL), 0};
  pthread_t th;
  pthread_create(&th, NULL, record_loop, &r);
  for (int i = 0; i < 12; i++) {
    usleep(2000);
    CHECK_OK(p2pkit_comm_dump_trace(r.c, "race"));
  }
  atomic_store(&r.stop, 1);
  pthread_join(th, NULL);
  p2pk_tdump d[16];
  const int n = dumps_in(tmp, d, 16);
  CHECK_EQ(n, 12);
  for (int i = 0; i < n; i++)
    for (size_t j = 0; j < d[i].ncalls; j++) {
      const p2pk_tcall *k = &d[i].calls[j];
      const uint64_t q = k->stream - 0x1000;
      if (k->count != 3 * q || strcmp(k->dtype, "bfloat16") != 0)
        T_FAIL("dump %d call %zu is torn: count %llu, stream 0x%llx", i, j,
               (unsigned long long)k->count, (unsigned long long)k->stream);
    }
  free_all(d, n);
  comm_free(r.c);
}

/* --bench: the host time of one record (one thread, the ring on). */
static int bench(void) {
  set("P2PKIT_TRACE_RING", "2048");
  set("P2PKIT_TRACE_DIR", "off");
  struct p2pkit_comm *c = comm_of(0, 2, NULL);
  p2pk_call k = call_of(c, 1);
  const int n = 10000000;
  double best = 1e9;
  for (int rep = 0; rep < 5; rep++) {
    const uint64_t t0 = p2pk_now_ns();
    for (int i = 0; i < n; i++) {
      k.count = (size_t)i;
      p2pk_trace_record(&k);
    }
    const double ns = (double)(p2pk_now_ns() - t0) / n;
    if (ns < best) best = ns;
  }
  printf("p2pk_trace_record: %.1f ns per call (best of 5 x %d)\n", best, n);
  comm_free(c);
  return 0;
}

int t_failed;
const char *t_current;
int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--bench") == 0) return bench();
  snprintf(tmp, sizeof tmp, "/tmp/p2pk_trace_ring.XXXXXX");
  if (!mkdtemp(tmp)) return 1;
  set("P2PKIT_TRACE_SIGNAL", NULL);
  static const t_case cases[] = {T_CASE(the_ring_keeps_the_last_calls_whole),
                                 T_CASE(a_call_its_group_refused_reads_failed_not_queued),
                                 T_CASE(an_error_dumps_once_naming_the_gone_peers),
                                 T_CASE(a_signal_dumps_every_communicator_and_spares_the_applications),
                                 T_CASE(the_directory_and_the_file_are_checked),
                                 T_CASE(a_write_that_fails_leaves_nothing),
                                 T_CASE(a_dump_beside_a_recording_thread_holds_whole_calls)};
  const int rc = t_main_cases(argc, argv, cases, sizeof cases / sizeof cases[0]);
  char open_dir[300];
  snprintf(open_dir, sizeof open_dir, "%s/open", tmp);
  empty_dir(open_dir);
  rmdir(open_dir);
  empty_dir(tmp);
  rmdir(tmp);
  return rc;
}
