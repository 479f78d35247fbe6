/* SPDX-License-Identifier: BSD-3-Clause */
/* p2pkit_comm_split and p2pkit_comm_abort without a GPU: the arguments
 * refused in one line; a split's rendezvous arranged over its parent's
 * (p2pk_split_rendezvous), with processes on 127.0.0.1: every child's
 * ranks meet through the id their leader made, in key order, NOCOLOR
 * joining none, each child on a port of its own (not the parent's); and an
 * abort that returns at once beside a dead peer while a survivor waiting in
 * the rendezvous fails at once too, long before its timeout. */
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coll/coll.h"
#include "coll/rdv/init_id.h"
#include "core/param.h"
#include "nccl/nccl_dl.h"
#include "test.h"
#include "test_net.h"

#define MAXP 6

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

TEST(arguments_refused) {
  CHECK_EQ(P2PKIT_SPLIT_NOCOLOR, -1);
  CHECK_EQ(P2PKIT_SPLIT_NOCOLOR, P2PK_NCCL_SPLIT_NOCOLOR);
  p2pkit_comm_t out = (p2pkit_comm_t)0x1;
  CHECK_EQ(p2pkit_comm_split(NULL, 0, 0, NULL, &out), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_STR(p2pkit_last_error(), "comm_split: comm is NULL");
  CHECK(out == (p2pkit_comm_t)0x1); /* untouched on failure */
  struct p2pkit_comm *c = calloc(1, sizeof *c);
  c->rank = 3, c->nranks = 4, c->device = 1;
  CHECK_EQ(p2pkit_comm_split(c, 0, 0, NULL, NULL), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_STR(p2pkit_last_error(), "comm_split: newcomm is NULL");
  CHECK_EQ(p2pkit_comm_split(c, -2, 0, NULL, &out), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_STR(p2pkit_last_error(), "comm_split: rank 3: color -2: expected 0 or more, or "
            "P2PKIT_SPLIT_NOCOLOR (-1)");
  p2pkit_config_t cfg = P2PKIT_CONFIG_INIT;
  cfg.device = 0;
  CHECK_EQ(p2pkit_comm_split(c, 0, 0, &cfg, &out), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "a split stays on the parent's GPU (1)") != NULL);
  cfg.device = -1;
  cfg.version = 99;
  CHECK_EQ(p2pkit_comm_split(c, 0, 0, &cfg, &out), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "config version 99 is newer") != NULL);
  free(c);
  CHECK_EQ(p2pkit_comm_abort(NULL), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_STR(p2pkit_last_error(), "comm_abort: communicator is NULL");
  CHECK_EQ(p2pkit_comm_adopt_nccl(NULL, (void *)0x1), P2PKIT_ERR_INVALID_ARGUMENT);
}

/* --- a split's rendezvous, as processes ----------------------------------------- */

typedef struct {
  int status, new_rank, new_size, leader, port;
  int order[MAXP]; /* the child's parent ranks, as its all-gather says */
  char msg[256];
} report_t;

static p2pk_boot *parent_boot(int rank, int n, int port) {
  p2pk_boot_opts o = {rank, n, "127.0.0.1", port, "split-test-secret", 10000, 0};
  p2pk_boot *b = NULL;
  return p2pk_boot_init(&o, &b) == P2PKIT_SUCCESS ? b : NULL;
}

/* The child's rendezvous and one all-gather in it. */
static void join_child(const p2pk_split_rdv *rdv, int parent_rank, report_t *rep) {
  p2pk_uid u;
  p2pkit_config_t cfg = P2PKIT_CONFIG_INIT;
  p2pkit_comm_opts_t o;
  p2pk_rank_opts r;
  memset(&r, 0, sizeof r);
  rep->status = p2pk_uid_decode(&rdv->id, &u);
  rep->port = u.port;
  if (!rep->status) rep->status = p2pk_uid_comm_opts(&u, rdv->nranks, rdv->rank, &cfg, &o);
  if (!rep->status) rep->status = p2pk_resolve_opts(&o, &r);
  p2pk_boot *cb = NULL;
  if (!rep->status) {
    p2pk_boot_opts bo = {r.rank, r.nranks, r.addr, r.port, r.secret, 10000,
                         rdv->listen_fd > 0 ? rdv->listen_fd : 0};
    rep->status = p2pk_boot_init(&bo, &cb);
  }
  if (!rep->status) rep->status = p2pk_boot_allgather(cb, 1, &parent_rank, rep->order, sizeof(int));
  p2pk_boot_destroy(cb);
}

static void split_child(int rank, int n, int port, int color, int key, int out) {
  report_t rep;
  memset(&rep, 0, sizeof rep);
  rep.new_rank = -2;
  setenv("MASTER_PORT", "1", 1); /* a launcher's: it must not matter */
  p2pk_boot *b = parent_boot(rank, n, port);
  p2pk_split_rdv rdv;
  rep.status = b ? (int)p2pk_split_rendezvous(b, color, key, NULL, &rdv) : -1;
  if (!rep.status) {
    rep.new_rank = rdv.rank, rep.new_size = rdv.nranks, rep.leader = rdv.leader;
    if (rdv.rank >= 0) join_child(&rdv, rank, &rep);
    if (rdv.listen_fd >= 0) close(rdv.listen_fd);
  }
  p2pk_boot_destroy(b);
  snprintf(rep.msg, sizeof rep.msg, "%s", p2pkit_last_error());
  if (write(out, &rep, sizeof rep) != (ssize_t)sizeof rep) _exit(3);
  _exit(0);
}

typedef struct {
  int n, port;
  const int *color, *key;
} split_arg;

static void run_split_child(int k, void *arg, int fd) {
  const split_arg *a = arg;
  split_child(k, a->n, a->port, a->color[k], a->key[k], fd);
}

static void run_split(int n, const int *color, const int *key, int port, report_t *rep) {
  split_arg a = {n, port, color, key};
  const long long missing = t_run_children(n, run_split_child, &a, rep, sizeof *rep, 20000);
  CHECK(missing >= 0);
  for (int i = 0; i < n; i++)
    if (missing > 0 && (missing >> i & 1)) {
      rep[i].status = -1;
      T_FAIL("rank %d did not report within 20 s: a hang", i);
    }
}

TEST(split_meets_over_the_parent) {
  /* 5 ranks: even / odd, keys reversed (so the odd child's leader is rank
   * 3, not its lowest), rank 4 NOCOLOR. */
  const int n = 5, color[] = {0, 1, 0, 1, P2PKIT_SPLIT_NOCOLOR}, key[] = {5, 4, 3, 2, 1};
  const int port = free_port();
  report_t rep[MAXP];
  run_split(n, color, key, port, rep);
  const int want_rank[] = {1, 1, 0, 0, -1}, want_leader[] = {2, 3, 2, 3, -1};
  for (int r = 0; r < n; r++) {
    if (rep[r].status != P2PKIT_SUCCESS) T_FAIL("rank %d: %d %s", r, rep[r].status, rep[r].msg);
    CHECK_EQ(rep[r].new_rank, want_rank[r]);
    CHECK_EQ(rep[r].leader, want_leader[r]);
    CHECK_EQ(rep[r].new_size, r == 4 ? 0 : 2);
    if (r == 4) continue;
    CHECK(rep[r].port != port && rep[r].port > 0); /* a port of the child's, not the parent's */
    CHECK_EQ(rep[r].order[0], r % 2 == 0 ? 2 : 3); /* new rank 0: the lower key */
    CHECK_EQ(rep[r].order[1], r % 2 == 0 ? 0 : 1);
  }
  CHECK(rep[0].port == rep[2].port && rep[1].port == rep[3].port && rep[0].port != rep[1].port);
}

TEST(split_by_host) {
  /* What a spanning communicator does at init: color = host, key = rank. */
  const int n = 4, color[] = {0, 0, 1, 1}, key[] = {0, 1, 2, 3};
  report_t rep[MAXP];
  run_split(n, color, key, free_port(), rep);
  for (int r = 0; r < n; r++) {
    if (rep[r].status != P2PKIT_SUCCESS) T_FAIL("rank %d: %d %s", r, rep[r].status, rep[r].msg);
    CHECK_EQ(rep[r].new_rank, r % 2);
    CHECK_EQ(rep[r].order[0], r < 2 ? 0 : 2);
    CHECK_EQ(rep[r].order[1], r < 2 ? 1 : 3);
  }
}

TEST(bad_color_fails_every_rank) {
  /* A negative color that is not NOCOLOR on one rank: every rank fails
   * after the exchange (none waits for a child that never forms). */
  const int n = 3, color[] = {0, -5, 0}, key[] = {0, 0, 0};
  report_t rep[MAXP];
  run_split(n, color, key, free_port(), rep);
  for (int r = 0; r < n; r++) {
    CHECK_EQ(rep[r].status, P2PKIT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(rep[r].msg, "rank 1") != NULL);
  }
}

/* --- abort beside a dead peer -------------------------------------------------- */

TEST(abort_with_a_dead_peer_returns_at_once) {
  /* Rank 2 dies after the rendezvous, rank 1 waits in an all-gather with
   * rank 0, rank 0 aborts: abort returns at once, and rank 1 fails at once
   * (its socket to rank 0 closed), long before the 30 s timeout. */
  const int n = 3, port = free_port();
  int p[2];
  CHECK_EQ(pipe(p), 0);
  pid_t pid[3];
  for (int r = 1; r < n; r++) {
    fflush(NULL);
    pid[r] = fork();
    if (pid[r] == 0) {
      close(p[0]);
      p2pk_boot_opts o = {r, n, "127.0.0.1", port, "split-test-secret", 30000, 0};
      p2pk_boot *b = NULL;
      if (p2pk_boot_init(&o, &b) != P2PKIT_SUCCESS) _exit(2);
      if (r == 2) _exit(0); /* dead */
      const int64_t t0 = now_ms();
      int mine = r, all[3];
      const p2pkit_status_t st = p2pk_boot_allgather(b, 9, &mine, all, sizeof mine);
      int64_t rep[2] = {st, now_ms() - t0};
      if (write(p[1], rep, sizeof rep) != (ssize_t)sizeof rep) _exit(3);
      _exit(0);
    }
  }
  close(p[1]);
  struct p2pkit_comm *c = calloc(1, sizeof *c);
  c->nranks = n;
  c->multiproc = 1;
  p2pk_boot_opts o = {0, n, "127.0.0.1", port, "split-test-secret", 30000, 0};
  CHECK_OK(p2pk_boot_init(&o, &c->boot));
  usleep(300 * 1000); /* rank 2 is gone, rank 1 waits in its all-gather */
  const int64_t t0 = now_ms();
  CHECK_OK(p2pkit_comm_abort(c)); /* frees c */
  const int64_t took = now_ms() - t0;
  if (took > 2000) T_FAIL("abort took %lld ms", (long long)took);
  int64_t rep[2] = {-1, -1};
  struct pollfd pf = {p[0], POLLIN, 0};
  CHECK(poll(&pf, 1, 10000) == 1 && read(p[0], rep, sizeof rep) == sizeof rep);
  CHECK(rep[0] != P2PKIT_SUCCESS);
  if (rep[1] > 5000) T_FAIL("the survivor failed only after %lld ms", (long long)rep[1]);
  close(p[0]);
  for (int r = 1; r < n; r++) waitpid(pid[r], NULL, 0);
}

T_MAIN(T_CASE(arguments_refused), T_CASE(split_meets_over_the_parent), T_CASE(split_by_host),
       T_CASE(bad_color_fails_every_rank), T_CASE(abort_with_a_dead_peer_returns_at_once))
