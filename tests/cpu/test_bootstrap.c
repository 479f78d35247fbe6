/* SPDX-License-Identifier: BSD-3-Clause */
/* The TCP rendezvous, with real processes on 127.0.0.1: every rank is a
 * forked child reporting its status, elapsed time and what it received
 * through a pipe. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coll/rdv/bootstrap.h"
#include "coll/rdv/bootstrap_wire.h"
#include "core/crypto.h"
#include "core/param.h"
#include "test.h"
#include "test_net.h"

#define MAXP 8
#define BLOB 37

typedef struct {
  int status;       /* of init, or of the first failing operation */
  int stage;        /* 0 init, 1 allgather, 2 barrier, 3 done */
  int data_ok;
  int64_t elapsed_ms;
  char msg[512];
} report_t;

typedef struct {
  int rank, nranks;
  const char *secret;
  int delay_ms;    /* start late */
  int die_after_init; /* exit right after the rendezvous */
  unsigned tag;    /* all-gather tag */
  int rounds;
  uid_t uid;       /* non-zero: become this user first (the parent is root) */
  const char *addr; /* NULL: 127.0.0.1 */
  const char *env;  /* NAME=VALUE set in the child first, or NULL */
} who_t;

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}


static void blob_of(int rank, int round, unsigned char *b) {
  for (int i = 0; i < BLOB; i++) b[i] = (unsigned char)(rank * 31 + round * 7 + i);
}

static void child(const who_t *w, int port, int timeout_ms, int fd) {
  report_t rep;
  memset(&rep, 0, sizeof rep);
  if (w->delay_ms) usleep((useconds_t)w->delay_ms * 1000);
  if (w->uid && (setgid(w->uid) != 0 || setuid(w->uid) != 0)) {
    snprintf(rep.msg, sizeof rep.msg, "setuid(%u): %s", (unsigned)w->uid, strerror(errno));
    rep.status = -2;
    if (write(fd, &rep, sizeof rep) != (ssize_t)sizeof rep) _exit(3);
    _exit(0);
  }
  if (w->env) {
    char kv[256];
    snprintf(kv, sizeof kv, "%s", w->env);
    char *eq = strchr(kv, '=');
    if (eq) *eq = '\0', setenv(kv, eq + 1, 1);
    p2pk_param_reset();
  }
  int64_t t0 = now_ms();
  p2pk_boot_opts o = {w->rank, w->nranks, w->addr ? w->addr : "127.0.0.1", port, w->secret,
                      timeout_ms, 0};
  p2pk_boot *b = NULL;
  rep.status = p2pk_boot_init(&o, &b);
  rep.elapsed_ms = now_ms() - t0;
  if (rep.status == P2PKIT_SUCCESS) {
    rep.stage = 1;
    if (w->die_after_init) _exit(0);
    rep.data_ok = 1;
    for (int round = 0; round < w->rounds && rep.status == P2PKIT_SUCCESS; round++) {
      unsigned char mine[BLOB], all[MAXP * BLOB];
      blob_of(w->rank, round, mine);
      t0 = now_ms();
      rep.status = p2pk_boot_allgather(b, w->tag, mine, all, BLOB);
      rep.elapsed_ms = now_ms() - t0;
      for (int r = 0; rep.status == P2PKIT_SUCCESS && r < w->nranks; r++) {
        unsigned char want[BLOB];
        blob_of(r, round, want);
        if (memcmp(all + r * BLOB, want, BLOB) != 0) rep.data_ok = 0;
      }
    }
    if (rep.status == P2PKIT_SUCCESS) {
      rep.stage = 2;
      rep.status = p2pk_boot_barrier(b, 99);
    }
    if (rep.status == P2PKIT_SUCCESS) rep.stage = 3;
    p2pk_boot_destroy(b);
  }
  snprintf(rep.msg, sizeof rep.msg, "%s", p2pkit_last_error());
  if (write(fd, &rep, sizeof rep) != (ssize_t)sizeof rep) _exit(3);
  _exit(0);
}

typedef struct {
  const who_t *w;
  int port, timeout_ms;
} run_arg;

static void run_child(int k, void *arg, int fd) {
  const run_arg *a = arg;
  child(&a->w[k], a->port, a->timeout_ms, fd);
}

/* Start one child per entry; collect their reports (killing any that is
 * still running after `limit_ms`: a hang is a failure). */
static void run_on(int port, const who_t *w, int n, int timeout_ms, int limit_ms, report_t *rep) {
  run_arg a = {w, port, timeout_ms};
  const long long missing = t_run_children(n, run_child, &a, rep, sizeof *rep, limit_ms);
  if (missing < 0) {
    T_FAIL("pipe: %s", strerror(errno));
    return;
  }
  for (int i = 0; i < n; i++) {
    if (!(missing >> i & 1)) continue;
    rep[i].status = -1;
    if (!w[i].die_after_init)
      T_FAIL("process %d (rank %d) did not report within %d ms: a hang", i, w[i].rank, limit_ms);
  }
}

static void run(const who_t *w, int n, int timeout_ms, int limit_ms, report_t *rep) {
  int port = free_port();
  CHECK(port > 0);
  run_on(port, w, n, timeout_ms, limit_ms, rep);
}

static who_t rank_(int rank, int nranks, const char *secret) {
  who_t w = {.rank = rank, .nranks = nranks, .secret = secret, .tag = 1, .rounds = 3};
  return w;
}

TEST(all_ranks_arrive_and_allgather) {
  who_t w[4];
  report_t rep[4];
  for (int r = 0; r < 4; r++) w[r] = rank_(r, 4, "s3cret");
  w[3].delay_ms = 300; /* the others retry until it comes */
  run(w, 4, 10000, 20000, rep);
  for (int r = 0; r < 4; r++) {
    if (rep[r].status != P2PKIT_SUCCESS) T_FAIL("rank %d: %d %s", r, rep[r].status, rep[r].msg);
    CHECK_EQ(rep[r].stage, 3);
    CHECK_EQ(rep[r].data_ok, 1);
  }
}

TEST(single_rank_needs_no_network) {
  p2pk_boot_opts o = {0, 1, "127.0.0.1", 1, "", 1000, 0};
  p2pk_boot *b = NULL;
  CHECK_OK(p2pk_boot_init(&o, &b));
  int x = 42, y = 0;
  CHECK_OK(p2pk_boot_allgather(b, 1, &x, &y, sizeof x));
  CHECK_EQ(y, 42);
  CHECK_OK(p2pk_boot_barrier(b, 2));
  CHECK_EQ(p2pk_boot_rank(b), 0);
  CHECK_EQ(p2pk_boot_nranks(b), 1);
  p2pk_boot_destroy(b);
}

TEST(wrong_secret_is_refused) {
  who_t w[2] = {rank_(0, 2, "right"), rank_(1, 2, "wrong")};
  report_t rep[2];
  int64_t t0 = now_ms();
  run(w, 2, 2000, 15000, rep);
  (void)t0;
  CHECK_EQ(rep[1].status, P2PKIT_ERR_REMOTE);
  if (!strstr(rep[1].msg, "secret")) T_FAIL("refusal does not say why: %s", rep[1].msg);
  if (strstr(rep[1].msg, "right")) T_FAIL("refusal leaks the secret: %s", rep[1].msg);
  CHECK(rep[1].elapsed_ms < 1500); /* refused at once, not timed out */
  CHECK_EQ(rep[0].status, P2PKIT_ERR_TIMEOUT); /* rank 1 never really arrived */
}

TEST(stranger_refused_job_continues) {
  /* A process of another job claims rank 1 first; the real rank 1 comes later. */
  who_t w[3] = {rank_(0, 2, "job-a"), rank_(1, 2, "job-b"), rank_(1, 2, "job-a")};
  w[2].delay_ms = 400;
  report_t rep[3];
  run(w, 3, 8000, 20000, rep);
  CHECK_EQ(rep[1].status, P2PKIT_ERR_REMOTE);
  if (rep[0].status != P2PKIT_SUCCESS || rep[2].status != P2PKIT_SUCCESS)
    T_FAIL("job ranks: %d (%s), %d (%s)", rep[0].status, rep[0].msg, rep[2].status, rep[2].msg);
  CHECK_EQ(rep[0].data_ok, 1);
  CHECK_EQ(rep[2].data_ok, 1);
}

TEST(missing_rank_times_out) {
  who_t w[2] = {rank_(0, 3, "x"), rank_(1, 3, "x")}; /* rank 2 never starts */
  report_t rep[2];
  const int timeout = 1500;
  run(w, 2, timeout, 15000, rep);
  for (int r = 0; r < 2; r++) {
    CHECK_EQ(rep[r].status, P2PKIT_ERR_TIMEOUT);
    if (rep[r].elapsed_ms < timeout - 100 || rep[r].elapsed_ms > timeout + 3000)
      T_FAIL("rank %d gave up after %lld ms; timeout %d ms", r, (long long)rep[r].elapsed_ms, timeout);
  }
  if (!strstr(rep[0].msg, "rank(s) 2 ")) T_FAIL("rank 0 does not name the missing rank: %s", rep[0].msg);
}

TEST(rank0_missing_times_out) {
  who_t w[1] = {rank_(1, 2, "x")};
  report_t rep[1];
  run(w, 1, 1000, 10000, rep);
  CHECK_EQ(rep[0].status, P2PKIT_ERR_TIMEOUT);
  CHECK(rep[0].elapsed_ms >= 900 && rep[0].elapsed_ms < 4000);
  if (!strstr(rep[0].msg, "127.0.0.1")) T_FAIL("message lacks the address: %s", rep[0].msg);
}

TEST(rank_count_mismatch_fails_fast) {
  who_t w[2] = {rank_(0, 2, "x"), rank_(1, 3, "x")};
  report_t rep[2];
  run(w, 2, 5000, 15000, rep);
  CHECK_EQ(rep[0].status, P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(rep[1].status, P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(rep[0].elapsed_ms < 3000);
  if (!strstr(rep[0].msg, "3 ranks")) T_FAIL("unclear: %s", rep[0].msg);
}

TEST(duplicate_rank_fails) {
  who_t w[3] = {rank_(0, 3, "x"), rank_(1, 3, "x"), rank_(1, 3, "x")};
  w[2].delay_ms = 200;
  report_t rep[3];
  run(w, 3, 5000, 15000, rep);
  CHECK_EQ(rep[0].status, P2PKIT_ERR_INVALID_ARGUMENT);
  if (!strstr(rep[0].msg, "twice")) T_FAIL("unclear: %s", rep[0].msg);
  /* Everyone learns it, none waits for the timeout. */
  for (int i = 1; i < 3; i++) CHECK(rep[i].status != P2PKIT_SUCCESS && rep[i].elapsed_ms < 3000);
}

TEST(different_collectives_are_detected) {
  who_t w[2] = {rank_(0, 2, "x"), rank_(1, 2, "x")};
  w[1].tag = 7;
  report_t rep[2];
  run(w, 2, 5000, 15000, rep);
  CHECK_EQ(rep[0].status, P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(rep[1].status != P2PKIT_SUCCESS);
  CHECK_EQ(rep[0].stage, 1);
}

TEST(dead_peer_fails_fast) {
  who_t w[3] = {rank_(0, 3, "x"), rank_(1, 3, "x"), rank_(2, 3, "x")};
  w[2].die_after_init = 1;
  report_t rep[3];
  run(w, 3, 8000, 20000, rep);
  for (int r = 0; r < 2; r++) {
    CHECK_EQ(rep[r].status, P2PKIT_ERR_REMOTE);
    CHECK(rep[r].elapsed_ms < 4000); /* socket closed: no need to wait 8 s */
  }
}

TEST(bad_options) {
  p2pk_boot *b = NULL;
  p2pk_boot_opts o = {0, 2, "127.0.0.1", 0, "", 1000, 0};
  CHECK_EQ(p2pk_boot_init(&o, &b), P2PKIT_ERR_INVALID_ARGUMENT);
  o.port = 70000;
  CHECK_EQ(p2pk_boot_init(&o, &b), P2PKIT_ERR_INVALID_ARGUMENT);
  o.port = 5000;
  o.rank = 2;
  CHECK_EQ(p2pk_boot_init(&o, &b), P2PKIT_ERR_INVALID_ARGUMENT);
  o.rank = 0;
  o.timeout_ms = 0;
  CHECK_EQ(p2pk_boot_init(&o, &b), P2PKIT_ERR_INVALID_ARGUMENT);
  o.timeout_ms = 1000;
  char big[P2PK_BOOT_SECRET_MAX + 2];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  o.secret = big;
  CHECK_EQ(p2pk_boot_init(&o, &b), P2PKIT_ERR_INVALID_ARGUMENT);
  o.secret = "";
  o.addr = "no-such-host.invalid";
  CHECK_EQ(p2pk_boot_init(&o, &b), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(b == NULL);
}

TEST(port_in_use_is_a_clear_error) {
  struct sockaddr_in a;
  int fd = bind_loopback(&a);
  CHECK(fd >= 0 && listen(fd, 1) == 0);
  p2pk_boot *b = NULL;
  p2pk_boot_opts o = {0, 2, "127.0.0.1", ntohs(a.sin_port), "", 1000, 0};
  CHECK_EQ(p2pk_boot_init(&o, &b), P2PKIT_ERR_SYSTEM);
  if (!strstr(p2pkit_last_error(), "cannot listen")) T_FAIL("unclear: %s", p2pkit_last_error());
  close(fd);
}

/* The other end of a loopback connection is this process's user, read from
 * /proc/net/tcp (IPv4) and tcp6 (IPv6, where the machine has ::1). */
static void peer_uid_case(int family) {
  int l = socket(family, SOCK_STREAM, 0);
  CHECK(l >= 0);
  struct sockaddr_storage a;
  memset(&a, 0, sizeof a);
  socklen_t al;
  if (family == AF_INET) {
    struct sockaddr_in *s4 = (struct sockaddr_in *)&a;
    s4->sin_family = AF_INET;
    s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    al = sizeof *s4;
  } else {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&a;
    s6->sin6_family = AF_INET6;
    s6->sin6_addr = in6addr_loopback;
    al = sizeof *s6;
  }
  if (bind(l, (struct sockaddr *)&a, al) != 0 || listen(l, 1) != 0 ||
      getsockname(l, (struct sockaddr *)&a, &al) != 0) {
    printf("note: no %s loopback here (%s): not checked\n", family == AF_INET ? "IPv4" : "IPv6",
           strerror(errno));
    close(l);
    return;
  }
  int c = socket(family, SOCK_STREAM, 0);
  CHECK(c >= 0);
  CHECK_EQ(connect(c, (struct sockaddr *)&a, al), 0);
  int s = accept(l, NULL, NULL);
  CHECK(s >= 0);
  CHECK_EQ(p2pk_sock_peer_uid(s), (long)geteuid());
  CHECK_EQ(p2pk_sock_peer_uid(c), (long)geteuid());
  CHECK_EQ(p2pk_sock_peer_uid(l), -1); /* a listener has no peer */
  close(s);
  close(c);
  close(l);
}

TEST(peer_uid_of_loopback_connections) {
  peer_uid_case(AF_INET);
  peer_uid_case(AF_INET6);
}

TEST(other_user_refused_job_continues) {
  /* A process of another user presents the right secret and rank 1 first;
   * rank 0 refuses it for its user and the real rank 1 joins later. */
  if (geteuid() != 0) {
    printf("SKIP: other_user_refused_job_continues needs root (to start a process as another "
           "user)\n");
    return;
  }
  who_t w[3] = {rank_(0, 2, "same"), rank_(1, 2, "same"), rank_(1, 2, "same")};
  w[1].uid = 65534;
  w[2].delay_ms = 400;
  report_t rep[3];
  run(w, 3, 8000, 20000, rep);
  if (rep[1].status == -2) {
    printf("SKIP: other_user_refused_job_continues: %s\n", rep[1].msg);
    return;
  }
  CHECK_EQ(rep[1].status, P2PKIT_ERR_REMOTE);
  /* Rank 0 refuses it, or it sees first that rank 0 is not of its user. */
  if (!strstr(rep[1].msg, "another user")) T_FAIL("refusal does not say why: %s", rep[1].msg);
  if (rep[0].status != P2PKIT_SUCCESS || rep[2].status != P2PKIT_SUCCESS)
    T_FAIL("job ranks: %d (%s), %d (%s)", rep[0].status, rep[0].msg, rep[2].status, rep[2].msg);
  CHECK_EQ(rep[0].data_ok, 1);
  CHECK_EQ(rep[2].data_ok, 1);
}

/* --- hostile processes ------------------------------------------------------ */

#ifndef P2PK_BOOT_HANDSHAKE_MS
#define P2PK_BOOT_HANDSHAKE_MS 3000
#endif

/* A TCP connection to addr:port, tried until `limit_ms` pass; -1 if none. */
static int connect_raw(const char *addr, int port, int limit_ms) {
  int64_t end = now_ms() + limit_ms;
  int v6 = strchr(addr, ':') != NULL;
  struct sockaddr_storage a;
  memset(&a, 0, sizeof a);
  socklen_t al;
  if (v6) {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&a;
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons((uint16_t)port);
    inet_pton(AF_INET6, addr, &s6->sin6_addr);
    al = sizeof *s6;
  } else {
    struct sockaddr_in *s4 = (struct sockaddr_in *)&a;
    s4->sin_family = AF_INET;
    s4->sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, addr, &s4->sin_addr);
    al = sizeof *s4;
  }
  while (now_ms() < end) {
    int fd = socket(a.ss_family, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&a, al) == 0) return fd;
    close(fd);
    usleep(10000);
  }
  return -1;
}

/* Reads what arrives until the peer closes, `limit_ms` pass or `cap` bytes
 * are in; *closed_ms: when the peer closed, after the call began (-1: it
 * did not). Returns the byte count. */
static size_t read_until_close(int fd, unsigned char *buf, size_t cap, int limit_ms,
                               int64_t *closed_ms) {
  int64_t t0 = now_ms();
  size_t got = 0;
  *closed_ms = -1;
  while (got < cap) {
    int64_t left = t0 + limit_ms - now_ms();
    struct pollfd pf = {fd, POLLIN, 0};
    if (left <= 0 || poll(&pf, 1, (int)left) <= 0) break;
    ssize_t n = recv(fd, buf + got, cap - got, 0);
    if (n <= 0) {
      *closed_ms = now_ms() - t0;
      break;
    }
    got += (size_t)n;
  }
  return got;
}

static pid_t fork_or_fail(void) {
  fflush(NULL);
  pid_t p = fork();
  if (p < 0) T_FAIL("fork: %s", strerror(errno));
  return p;
}

static void reap(pid_t p) {
  if (p <= 0) return;
  kill(p, SIGKILL);
  waitpid(p, NULL, 0);
}

TEST(idle_connections_do_not_stall_the_job) {
  /* A local process opens 200 connections to rank 0 and sends nothing (the
   * old rendezvous kept 64 and shut out the rest, real ranks too); the real
   * ranks still arrive and join well within the timeout. */
  int port = free_port();
  pid_t idler = fork_or_fail();
  if (idler == 0) {
    int fds[200], n = 0;
    fds[n] = connect_raw("127.0.0.1", port, 5000);
    if (fds[n] >= 0)
      for (n = 1; n < 200; n++) fds[n] = connect_raw("127.0.0.1", port, 1000);
    usleep(10 * 1000 * 1000);
    _exit(0);
  }
  who_t w[3] = {rank_(0, 3, "busy"), rank_(1, 3, "busy"), rank_(2, 3, "busy")};
  w[1].delay_ms = w[2].delay_ms = 1000;
  report_t rep[3];
  run_on(port, w, 3, 8000, 20000, rep);
  reap(idler);
  for (int r = 0; r < 3; r++)
    if (rep[r].status != P2PKIT_SUCCESS) T_FAIL("rank %d: %d %s", r, rep[r].status, rep[r].msg);
  for (int r = 1; r < 3; r++)
    if (rep[r].status == P2PKIT_SUCCESS && rep[r].stage < 3) T_FAIL("rank %d stopped early", r);
}

TEST(silent_connection_is_dropped_at_its_deadline) {
  int port = free_port();
  int pfd[2];
  CHECK_EQ(pipe(pfd), 0);
  pid_t silent = fork_or_fail();
  if (silent == 0) {
    close(pfd[0]);
    int64_t closed = -2;
    int fd = connect_raw("127.0.0.1", port, 5000);
    unsigned char buf[512];
    if (fd >= 0) read_until_close(fd, buf, sizeof buf, 12000, &closed);
    if (write(pfd[1], &closed, sizeof closed) != (ssize_t)sizeof closed) _exit(3);
    _exit(0);
  }
  close(pfd[1]);
  who_t w[1] = {rank_(0, 2, "x")}; /* rank 1 never comes */
  report_t rep[1];
  run_on(port, w, 1, 9000, 20000, rep);
  int64_t closed = -3;
  if (read(pfd[0], &closed, sizeof closed) != (ssize_t)sizeof closed) T_FAIL("no report");
  close(pfd[0]);
  reap(silent);
  CHECK_EQ(rep[0].status, P2PKIT_ERR_TIMEOUT);
  if (closed < 0 || closed > P2PK_BOOT_HANDSHAKE_MS + 1500)
    T_FAIL("a connection that sent nothing was closed after %lld ms (deadline %d ms)",
           (long long)closed, P2PK_BOOT_HANDSHAKE_MS);
}

/* A listening socket on 127.0.0.1:port, or -1. */
static int listen_port(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 8) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

/* A process that took MASTER_PORT first plays rank 0: it records what rank 1
 * sends, answers with `reply`, then (when `reply2` is given) what rank 1
 * sends next with `reply2`, and must neither learn the secret nor be
 * believed. */
static void fake_rank0_case(const unsigned char *reply, size_t rlen, const unsigned char *reply2,
                            size_t rlen2, const char *want) {
  static const char secret[] = "topsecret-4711";
  int port = free_port();
  int lfd = listen_port(port);
  CHECK(lfd >= 0);
  int pfd[2];
  CHECK_EQ(pipe(pfd), 0);
  pid_t fake = fork_or_fail();
  if (fake == 0) {
    close(pfd[0]);
    unsigned char got[4096];
    size_t n = 0;
    int fd = accept(lfd, NULL, NULL);
    if (fd >= 0) {
      /* Everything rank 1 sends before it waits for an answer. */
      int64_t closed;
      n = read_until_close(fd, got, sizeof got, 500, &closed);
      if (send(fd, reply, rlen, MSG_NOSIGNAL) < 0) n = 0;
      if (reply2) {
        n += read_until_close(fd, got + n, sizeof got - n, 500, &closed);
        if (send(fd, reply2, rlen2, MSG_NOSIGNAL) < 0) n = 0;
      }
      n += read_until_close(fd, got + n, sizeof got - n, 3000, &closed);
    }
    if (write(pfd[1], &n, sizeof n) != (ssize_t)sizeof n || write(pfd[1], got, n) != (ssize_t)n) _exit(3);
    _exit(0);
  }
  close(lfd);
  close(pfd[1]);
  who_t w[1] = {rank_(1, 2, secret)};
  report_t rep[1];
  run_on(port, w, 1, 4000, 15000, rep);
  size_t n = 0;
  unsigned char got[4096];
  if (read(pfd[0], &n, sizeof n) != (ssize_t)sizeof n || n > sizeof got ||
      read(pfd[0], got, n) != (ssize_t)n)
    T_FAIL("the fake rank 0 did not report");
  close(pfd[0]);
  reap(fake);
  if (rep[0].status == P2PKIT_SUCCESS) T_FAIL("rank 1 believed a fake rank 0");
  if (!strstr(rep[0].msg, want)) T_FAIL("rank 1's error does not say '%s': %s", want, rep[0].msg);
  if (rep[0].elapsed_ms > 3000) T_FAIL("rank 1 waited %lld ms for the fake", (long long)rep[0].elapsed_ms);
  if (memmem(got, n, secret, sizeof secret - 1)) T_FAIL("the fake rank 0 received the secret");
  if (n == 0) T_FAIL("rank 1 sent nothing: the case tests nothing");
}

TEST(fake_rank0_gets_no_secret_and_is_not_believed) {
  /* An old-style welcome (type 2, no payload); then a challenge (a nonce)
   * and, after rank 1's proof, a proof of random bytes that proves nothing. */
  unsigned char welcome[12] = {0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0};
  fake_rank0_case(welcome, sizeof welcome, NULL, 0, "rank 0");
  unsigned char challenge[12 + 32] = {0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0, 32};
  unsigned char proof[12 + 32] = {0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 32};
  for (size_t i = 12; i < sizeof challenge; i++) challenge[i] = (unsigned char)(i * 37 + 11);
  for (size_t i = 12; i < sizeof proof; i++) proof[i] = (unsigned char)(i * 53 + 5);
  fake_rank0_case(challenge, sizeof challenge, proof, sizeof proof, "prove");
}

/* --- a client that speaks the protocol by hand ------------------------------- */

/* A HELLO of rank 1 of 2 with a secret, protocol `version`, nonce nc. */
static int send_hello(int fd, uint32_t version, const unsigned char nc[P2PK_BOOT_NONCE]) {
  unsigned char msg[P2PK_BOOT_HDR + P2PK_BOOT_HELLO_BYTES];
  p2pk_boot_hello h = {version, 2, 1, (uint32_t)getpid(), P2PK_HELLO_SECRET, {0}};
  memcpy(h.nonce, nc, P2PK_BOOT_NONCE);
  p2pk_boot_hdr_pack(msg, P2PK_MSG_HELLO, 0, P2PK_BOOT_HELLO_BYTES);
  p2pk_boot_hello_pack(&h, msg + P2PK_BOOT_HDR);
  return send(fd, msg, sizeof msg, MSG_NOSIGNAL) == (ssize_t)sizeof msg ? 0 : -1;
}

/* One frame from rank 0, taken as its header says (not checked): type,
 * length and up to `cap` payload bytes. -1 when it did not come whole
 * within limit_ms. */
static int recv_raw(int fd, uint32_t *type, uint32_t *len, unsigned char *payload, size_t cap,
                    int limit_ms) {
  unsigned char h[P2PK_BOOT_HDR];
  int64_t closed;
  if (read_until_close(fd, h, sizeof h, limit_ms, &closed) != sizeof h) return -1;
  *type = p2pk_boot_get32(h);
  *len = p2pk_boot_get32(h + 8);
  if (*len > cap) return -1;
  return read_until_close(fd, payload, *len, limit_ms, &closed) == *len ? 0 : -1;
}

/* What a hand-made client saw of rank 0: the first frame's type, then the
 * type (and REJECT's code and text) of the one after its own next step. */
typedef struct {
  uint32_t first, next, code;
  char text[P2PK_BOOT_VERDICT_MAX];
} raw_report;

static pid_t fork_raw_client(int port, int pfd[2], void (*steps)(int fd, raw_report *r)) {
  pid_t p = fork_or_fail();
  if (p != 0) {
    close(pfd[1]);
    return p;
  }
  close(pfd[0]);
  raw_report r;
  memset(&r, 0, sizeof r);
  int fd = connect_raw("127.0.0.1", port, 5000);
  if (fd >= 0) steps(fd, &r);
  if (write(pfd[1], &r, sizeof r) != (ssize_t)sizeof r) _exit(3);
  _exit(0);
}

static raw_report take_report(int fd, pid_t p) {
  raw_report r;
  memset(&r, 0, sizeof r);
  if (read(fd, &r, sizeof r) != (ssize_t)sizeof r) T_FAIL("the hand-made client did not report");
  close(fd);
  reap(p);
  r.text[sizeof r.text - 1] = '\0';
  return r;
}

/* HELLO, rank 0's CHALLENGE taken as it comes, then a PROOF of made-up
 * bytes sent without checking anything of rank 0's. */
static void made_up_proof(int fd, raw_report *r) {
  unsigned char nc[P2PK_BOOT_NONCE], buf[512], proof[P2PK_BOOT_HDR + P2PK_MAC_BYTES];
  memset(nc, 7, sizeof nc);
  uint32_t len = 0;
  if (send_hello(fd, P2PK_BOOT_VERSION, nc) != 0 ||
      recv_raw(fd, &r->first, &len, buf, sizeof buf, 3000) != 0)
    return;
  p2pk_boot_hdr_pack(proof, P2PK_MSG_PROOF, 0, P2PK_MAC_BYTES);
  memset(proof + P2PK_BOOT_HDR, 0xa5, P2PK_MAC_BYTES);
  if (send(fd, proof, sizeof proof, MSG_NOSIGNAL) != (ssize_t)sizeof proof ||
      recv_raw(fd, &r->next, &len, buf, sizeof buf, 3000) != 0)
    return;
  if (r->next == P2PK_MSG_REJECT)
    p2pk_boot_verdict_parse(buf, len, &r->code, r->text, sizeof r->text);
}

TEST(made_up_proof_is_refused_by_rank0) {
  /* A client that proves nothing is refused by rank 0 itself (not only by
   * its own check of rank 0, which this client never makes), and is not
   * admitted: the real rank 1, coming later, joins. */
  int port = free_port();
  int pfd[2];
  CHECK_EQ(pipe(pfd), 0);
  pid_t liar = fork_raw_client(port, pfd, made_up_proof);
  who_t w[2] = {rank_(0, 2, "job-secret"), rank_(1, 2, "job-secret")};
  w[1].delay_ms = 1000;
  report_t rep[2];
  run_on(port, w, 2, 8000, 20000, rep);
  raw_report r = take_report(pfd[0], liar);
  CHECK_EQ(r.first, (uint32_t)P2PK_MSG_CHALLENGE);
  if (r.next != P2PK_MSG_REJECT || r.code != P2PK_REJ_SECRET)
    T_FAIL("rank 0 answered a made-up proof with message type %u (code %u), not a refusal of "
           "the secret", r.next, r.code);
  for (int k = 0; k < 2; k++)
    if (rep[k].status != P2PKIT_SUCCESS || !rep[k].data_ok)
      T_FAIL("rank %d: %d %s", k, rep[k].status, rep[k].msg);
}

/* Whether `got` holds anything keyed with `guess` over these nonces: either
 * side's proof or the link's key, at any offset. -1 when libcrypto cannot
 * say. */
static int holds_keyed(const unsigned char *got, size_t n, const char *guess,
                       const unsigned char *nc, const unsigned char *ns) {
  unsigned char v[3][P2PK_MAC_BYTES];
  char why[400];
  if (p2pk_crypto_load(why, sizeof why) != 0 ||
      p2pk_boot_proof(guess, P2PK_TO_RANK, nc, ns, 2, 1, v[0]) != 0 ||
      p2pk_boot_proof(guess, P2PK_TO_ROOT, nc, ns, 2, 1, v[1]) != 0 ||
      p2pk_boot_link_key(guess, nc, ns, 2, 1, v[2]) != 0)
    return -1;
  for (int i = 0; i < 3; i++)
    if (memmem(got, n, v[i], P2PK_MAC_BYTES)) return 1;
  return 0;
}

static const char *const GUESSES[] = {"wrong", "100", "none"};

/* HELLO, then everything rank 0 sends before this client has proved
 * anything, kept in r->text's bytes (r->code: how many); then, offline, each
 * of GUESSES tried against them: r->next's bit i set when guess i is
 * confirmed (all bits when libcrypto cannot tell). The guesser loads
 * libcrypto itself, so the ranks forked beside it do not inherit it. */
static void hello_and_guess(int fd, raw_report *r) {
  unsigned char nc[P2PK_BOOT_NONCE];
  memset(nc, 7, sizeof nc);
  int64_t closed;
  if (send_hello(fd, P2PK_BOOT_VERSION, nc) != 0) return;
  const unsigned char *got = (const unsigned char *)r->text;
  const size_t n = read_until_close(fd, (unsigned char *)r->text, sizeof r->text, 1000, &closed);
  r->code = (uint32_t)n;
  if (n < P2PK_BOOT_HDR + P2PK_BOOT_NONCE) return;
  for (size_t i = 0; i < sizeof GUESSES / sizeof GUESSES[0]; i++) {
    const int h = holds_keyed(got, n, GUESSES[i], nc, got + P2PK_BOOT_HDR);
    if (h != 0) r->next |= h > 0 ? 1u << i : ~0u;
  }
}

TEST(nothing_to_test_guesses_against_before_a_proof) {
  /* The case: the job secret is "none". A client that has proved
   * nothing gets rank 0's nonce and nothing else, so holding the right
   * guess it still cannot confirm it offline. */
  int port = free_port();
  int pfd[2];
  CHECK_EQ(pipe(pfd), 0);
  pid_t guesser = fork_raw_client(port, pfd, hello_and_guess);
  who_t w[1] = {rank_(0, 2, "none")}; /* rank 1 never comes */
  report_t rep[1];
  run_on(port, w, 1, 2500, 20000, rep);
  raw_report r = take_report(pfd[0], guesser);
  CHECK_EQ(rep[0].status, P2PKIT_ERR_TIMEOUT);
  const unsigned char *got = (const unsigned char *)r.text;
  const size_t n = r.code;
  if (n != P2PK_BOOT_HDR + P2PK_BOOT_NONCE || p2pk_boot_get32(got) != P2PK_MSG_CHALLENGE ||
      p2pk_boot_get32(got + 8) != P2PK_BOOT_NONCE)
    T_FAIL("before any proof rank 0 sent %zu bytes (type %u, length %u), not a CHALLENGE of "
           "its %d-byte nonce alone", n, n >= 4 ? p2pk_boot_get32(got) : 0,
           n >= 12 ? p2pk_boot_get32(got + 8) : 0, P2PK_BOOT_NONCE);
  if (r.next == ~0u) T_FAIL("the guesser could not load libcrypto to try its guesses");
  else
    for (size_t i = 0; i < sizeof GUESSES / sizeof GUESSES[0]; i++)
      if (r.next >> i & 1)
        T_FAIL("what rank 0 sent before any proof confirms the guess '%s' offline", GUESSES[i]);
}

/* HELLO of protocol version 2 (rank 0 proved itself first), then the answer. */
static void old_hello(int fd, raw_report *r) {
  unsigned char nc[P2PK_BOOT_NONCE], buf[512];
  memset(nc, 7, sizeof nc);
  uint32_t len = 0;
  if (send_hello(fd, 2, nc) == 0 && recv_raw(fd, &r->first, &len, buf, sizeof buf, 3000) == 0 &&
      r->first == P2PK_MSG_REJECT)
    p2pk_boot_verdict_parse(buf, len, &r->code, r->text, sizeof r->text);
}

TEST(old_peer_gets_a_clear_refusal) {
  int port = free_port();
  int pfd[2];
  CHECK_EQ(pipe(pfd), 0);
  pid_t old = fork_raw_client(port, pfd, old_hello);
  who_t w[1] = {rank_(0, 2, "job-secret")};
  report_t rep[1];
  run_on(port, w, 1, 1500, 20000, rep);
  raw_report r = take_report(pfd[0], old);
  CHECK_EQ(r.first, (uint32_t)P2PK_MSG_REJECT);
  CHECK_EQ(r.code, (uint32_t)P2PK_REJ_VERSION);
  if (!strstr(r.text, "got 2, want 3") || !strstr(r.text, "same p2pkit"))
    T_FAIL("the refusal does not say what differs: '%s'", r.text);
}

/* A process of another user, connecting over IPv4 to rank 0 listening on
 * `listen_addr`, is refused as soon as it connects, before it sends a byte;
 * the real rank 1 joins. */
static void other_user_at_accept(const char *listen_addr) {
  int port = free_port();
  int pfd[2];
  CHECK_EQ(pipe(pfd), 0);
  pid_t stranger = fork_or_fail();
  if (stranger == 0) {
    close(pfd[0]);
    char got[600] = "";
    int64_t closed = -1;
    size_t n = 0;
    if (setgid(65534) == 0 && setuid(65534) == 0) {
      int fd = connect_raw("127.0.0.1", port, 5000);
      if (fd >= 0) n = read_until_close(fd, (unsigned char *)got, sizeof got - 1, 2000, &closed);
    }
    for (size_t i = 0; i < n; i++)
      if (!got[i]) got[i] = ' ';
    got[n] = '\0';
    if (write(pfd[1], got, sizeof got) != (ssize_t)sizeof got) _exit(3);
    _exit(0);
  }
  close(pfd[1]);
  /* Off loopback (::) a secret of 128 bits is needed. */
  static const char strong[] = "0123456789abcdef0123456789abcdef";
  who_t w[2] = {rank_(0, 2, strong), rank_(1, 2, strong)};
  w[0].addr = listen_addr;
  w[1].delay_ms = 600;
  report_t rep[2];
  run_on(port, w, 2, 8000, 20000, rep);
  char got[600] = "";
  if (read(pfd[0], got, sizeof got) != (ssize_t)sizeof got) T_FAIL("the stranger did not report");
  got[sizeof got - 1] = '\0';
  close(pfd[0]);
  reap(stranger);
  if (!strstr(got, "another user (uid 65534)"))
    T_FAIL("rank 0 on %s did not refuse the other user at once; it got: '%s'", listen_addr, got);
  for (int r = 0; r < 2; r++)
    if (rep[r].status != P2PKIT_SUCCESS) T_FAIL("rank %d: %d %s", r, rep[r].status, rep[r].msg);
}

TEST(other_user_refused_at_accept_ipv4_and_dual_stack) {
  if (geteuid() != 0) {
    printf("SKIP: other_user_refused_at_accept_ipv4_and_dual_stack needs root\n");
    return;
  }
  other_user_at_accept("127.0.0.1");
  int s = socket(AF_INET6, SOCK_STREAM, 0);
  struct sockaddr_in6 a;
  memset(&a, 0, sizeof a);
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_any;
  int ok = s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0;
  if (s >= 0) close(s);
  if (!ok) {
    printf("note: no IPv6 here: the dual-stack case is not checked\n");
    return;
  }
  other_user_at_accept("::");
}

TEST(peer_uid_of_ipv4_mapped_connection) {
  /* An IPv6 listener on :: takes IPv4 connections as ::ffff:a.b.c.d; their
   * other end is in /proc/net/tcp, not tcp6. */
  int l = socket(AF_INET6, SOCK_STREAM, 0);
  int off = 0;
  struct sockaddr_in6 a;
  memset(&a, 0, sizeof a);
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_any;
  socklen_t al = sizeof a;
  if (l < 0 || setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off) != 0 ||
      bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 1) != 0 ||
      getsockname(l, (struct sockaddr *)&a, &al) != 0) {
    printf("note: no dual-stack IPv6 here: not checked\n");
    if (l >= 0) close(l);
    return;
  }
  int c = connect_raw("127.0.0.1", ntohs(a.sin6_port), 2000);
  CHECK(c >= 0);
  int s = accept(l, NULL, NULL);
  CHECK(s >= 0);
  CHECK_EQ(p2pk_sock_peer_uid(s), (long)geteuid());
  /* And from the IPv4 end: rank 0's socket is an IPv6 one, in tcp6. */
  CHECK_EQ(p2pk_sock_peer_uid(c), (long)geteuid());
  close(s);
  close(c);
  close(l);
}

TEST(no_secret_off_loopback_is_refused) {
  /* 0.0.0.0 takes connections from other hosts: without a secret any of
   * them could join, so neither rank starts. */
  who_t w[2] = {rank_(0, 2, ""), rank_(1, 2, "")};
  w[0].addr = w[1].addr = "0.0.0.0";
  report_t rep[2];
  run(w, 2, 2000, 15000, rep);
  for (int r = 0; r < 2; r++) {
    CHECK_EQ(rep[r].status, P2PKIT_ERR_INVALID_ARGUMENT);
    if (!strstr(rep[r].msg, "P2PKIT_JOB_SECRET")) T_FAIL("rank %d does not say how: %s", r, rep[r].msg);
    CHECK(rep[r].elapsed_ms < 1000);
  }
}

TEST(secret_without_libcrypto_is_one_clear_line) {
  who_t w[2] = {rank_(0, 2, "s"), rank_(1, 2, "s")};
  w[0].env = w[1].env = "P2PKIT_CRYPTO_LIB=/nonexistent/libcrypto.so.3";
  report_t rep[2];
  run(w, 2, 2000, 15000, rep);
  for (int r = 0; r < 2; r++) {
    CHECK_EQ(rep[r].status, P2PKIT_ERR_UNSUPPORTED);
    if (!strstr(rep[r].msg, "libcrypto") || !strstr(rep[r].msg, "P2PKIT_JOB_SECRET") ||
        strchr(rep[r].msg, '\n'))
      T_FAIL("rank %d: %s", r, rep[r].msg);
  }
  /* On loopback without a secret the same-user check needs no libcrypto. */
  who_t v[2] = {rank_(0, 2, ""), rank_(1, 2, "")};
  v[0].env = v[1].env = w[0].env;
  run(v, 2, 5000, 15000, rep);
  for (int r = 0; r < 2; r++)
    if (rep[r].status != P2PKIT_SUCCESS) T_FAIL("rank %d: %d %s", r, rep[r].status, rep[r].msg);
}

T_MAIN(T_CASE(all_ranks_arrive_and_allgather), T_CASE(single_rank_needs_no_network),
       T_CASE(wrong_secret_is_refused), T_CASE(stranger_refused_job_continues),
       T_CASE(missing_rank_times_out), T_CASE(rank0_missing_times_out),
       T_CASE(rank_count_mismatch_fails_fast), T_CASE(duplicate_rank_fails),
       T_CASE(different_collectives_are_detected), T_CASE(dead_peer_fails_fast),
       T_CASE(bad_options), T_CASE(port_in_use_is_a_clear_error),
       T_CASE(peer_uid_of_loopback_connections), T_CASE(other_user_refused_job_continues),
       T_CASE(idle_connections_do_not_stall_the_job),
       T_CASE(silent_connection_is_dropped_at_its_deadline),
       T_CASE(fake_rank0_gets_no_secret_and_is_not_believed),
       T_CASE(made_up_proof_is_refused_by_rank0),
       T_CASE(nothing_to_test_guesses_against_before_a_proof),
       T_CASE(old_peer_gets_a_clear_refusal),
       T_CASE(other_user_refused_at_accept_ipv4_and_dual_stack),
       T_CASE(peer_uid_of_ipv4_mapped_connection), T_CASE(no_secret_off_loopback_is_refused),
       T_CASE(secret_without_libcrypto_is_one_clear_line))
