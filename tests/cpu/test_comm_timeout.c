/* SPDX-License-Identifier: BSD-3-Clause */
/* A communicator's timeout, without a GPU: 600 s when P2PKIT_TIMEOUT is
 * unset (PyTorch's default for NCCL), the setting when set, the caller's
 * timeout_s over both, a split's from its parent unless its config says;
 * ranks as processes on 127.0.0.1 going the way p2pkit_comm_init_rank_config
 * goes up to the GPU, with a 4 s timeout in their config and P2PKIT_TIMEOUT=1
 * in their environment: a rank 2 s late (at the rendezvous, or at an
 * exchange after it) is waited for, one 6 s late fails the others at 4 s;
 * ncclCommInitRank (a fake NCCL) waited for until a deadline, and what it
 * makes after that aborted. */
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "coll/coll.h"
#include "coll/rdv/init_id.h"
#include "core/clock.h"
#include "core/param.h"
#include "test.h"
#include "test_net.h"

static void timeout_env(const char *v) {
  if (v) setenv("P2PKIT_TIMEOUT", v, 1);
  else unsetenv("P2PKIT_TIMEOUT");
  p2pk_param_reset();
}

static int resolved(int asked) {
  int s = -7;
  CHECK_OK(p2pk_comm_timeout_s(asked, "opts.timeout_s", &s));
  return s;
}

TEST(default_setting_and_caller) {
  timeout_env(NULL);
  CHECK_EQ(resolved(-1), 600);
  CHECK_EQ(resolved(45), 45);
  timeout_env("7");
  CHECK_EQ(resolved(-1), 7);
  CHECK_EQ(resolved(4), 4); /* the caller's wins over the setting */
  CHECK_EQ(resolved(86400), 86400);
  static const int bad[] = {0, -2, 86401};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int s = -7;
    CHECK_EQ(p2pk_comm_timeout_s(bad[i], "opts.timeout_s", &s), P2PKIT_ERR_INVALID_ARGUMENT);
    CHECK_EQ(s, -7); /* untouched */
    char want[128];
    snprintf(want, sizeof want, "opts.timeout_s %d: expected -1 (P2PKIT_TIMEOUT, else 600 s) or "
             "1..86400 seconds", bad[i]);
    CHECK_STR(p2pkit_last_error(), want);
  }
  timeout_env(NULL);
}

/* The options' and the config's timeout_s reach the communicator's. */
TEST(options_and_config_carry_it) {
  timeout_env("9");
  p2pkit_comm_opts_t o;
  p2pkit_comm_opts_init(&o);
  o.nranks = 2, o.rank = 1, o.secret = "a job's secret";
  p2pk_rank_opts r;
  memset(&r, 0, sizeof r);
  CHECK_OK(p2pk_resolve_opts(&o, &r));
  CHECK_EQ(resolved(r.timeout_s), 9);
  o.timeout_s = 3;
  CHECK_OK(p2pk_resolve_opts(&o, &r));
  CHECK_EQ(resolved(r.timeout_s), 3);
  p2pk_uid u;
  memset(&u, 0, sizeof u);
  u.version = P2PK_UID_VERSION, u.family = AF_INET, u.port = 4242;
  snprintf(u.addr, sizeof u.addr, "127.0.0.1");
  p2pkit_config_t in = P2PKIT_CONFIG_INIT, cfg;
  for (int t = -1; t <= 5; t += 6) {
    in.timeout_s = t;
    CHECK_OK(p2pk_config_check(&in, &cfg));
    CHECK_OK(p2pk_uid_comm_opts(&u, 2, 0, &cfg, &o));
    CHECK_OK(p2pk_resolve_opts(&o, &r));
    CHECK_EQ(resolved(r.timeout_s), t < 0 ? 9 : 5);
  }
  timeout_env(NULL);
}

/* A split's new communicator: its config's timeout, else its parent's (not
 * P2PKIT_TIMEOUT, which may have changed since the parent was made). */
TEST(split_takes_the_parents) {
  timeout_env("9");
  struct p2pkit_comm *parent = calloc(1, sizeof *parent);
  CHECK(parent != NULL);
  if (!parent) return;
  parent->timeout_ns = 7000000000ULL;
  p2pkit_config_t cfg = P2PKIT_CONFIG_INIT;
  CHECK_EQ(p2pk_split_timeout_s(parent, NULL), 7);
  CHECK_EQ(p2pk_split_timeout_s(parent, &cfg), 7);
  cfg.timeout_s = 3;
  CHECK_EQ(p2pk_split_timeout_s(parent, &cfg), 3);
  free(parent);
  timeout_env(NULL);
}

/* --- late ranks, as processes ------------------------------------------------ */

#define LATE_TIMEOUT_S 4

typedef struct {
  int status, timeout_s, step; /* step: 1 the rendezvous, 2 the all-gather after it */
  long long waited_ms[3];      /* how long each step took */
  char msg[256];
} report_t;

typedef struct {
  const p2pkit_unique_id_t *id;
  int init_late_ms[2], step_late_ms[2]; /* each rank's delay before each step */
} late_arg;

static long long ms_since(uint64_t t0) { return (long long)((p2pk_now_ns() - t0) / 1000000u); }

/* Rank k: what p2pkit_comm_init_rank_config does up to the GPU (config
 * timeout_s LATE_TIMEOUT_S, P2PKIT_TIMEOUT=1 in the environment), late by
 * init_late_ms; then, late by step_late_ms, an all-gather. */
static void late_rank(int k, void *arg, int fd) {
  const late_arg *a = arg;
  report_t rep;
  memset(&rep, 0, sizeof rep);
  timeout_env("1");
  p2pk_uid u;
  p2pkit_config_t in = P2PKIT_CONFIG_INIT, cfg;
  in.timeout_s = LATE_TIMEOUT_S;
  p2pkit_comm_opts_t o;
  p2pk_rank_opts r;
  memset(&r, 0, sizeof r);
  p2pk_boot *b = NULL;
  rep.status = p2pk_uid_decode(a->id, &u);
  if (!rep.status) rep.status = p2pk_config_check(&in, &cfg);
  if (!rep.status) rep.status = p2pk_uid_comm_opts(&u, 2, k, &cfg, &o);
  if (!rep.status) rep.status = p2pk_resolve_opts(&o, &r);
  if (!rep.status) rep.status = p2pk_comm_timeout_s(r.timeout_s, "config.timeout_s", &rep.timeout_s);
  const int lfd = k == 0 ? p2pk_uid_take_listen_fd(&u) : -1;
  usleep((useconds_t)a->init_late_ms[k] * 1000);
  uint64_t t0 = p2pk_now_ns();
  if (!rep.status) {
    rep.step = 1;
    rep.status = p2pk_rank_boot(&r, rep.timeout_s, lfd > 0 ? lfd : 0, &b);
    rep.waited_ms[1] = ms_since(t0);
  }
  if (lfd > 0) close(lfd);
  if (!rep.status) {
    usleep((useconds_t)a->step_late_ms[k] * 1000);
    int mine = 10 + k, all[2] = {0};
    t0 = p2pk_now_ns();
    rep.step = 2;
    rep.status = p2pk_boot_allgather(b, 1, &mine, all, sizeof mine);
    rep.waited_ms[2] = ms_since(t0);
    if (!rep.status && (all[0] != 10 || all[1] != 11)) rep.status = -2;
  }
  p2pk_boot_destroy(b);
  snprintf(rep.msg, sizeof rep.msg, "%s", p2pkit_last_error());
  if (write(fd, &rep, sizeof rep) != (ssize_t)sizeof rep) _exit(3);
  _exit(0);
}

static void run_late(const int *init_late_ms, const int *step_late_ms, report_t *rep) {
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  p2pkit_unique_id_t id;
  CHECK_OK(p2pkit_get_unique_id(&id));
  unsetenv("MASTER_ADDR");
  late_arg a = {&id, {init_late_ms[0], init_late_ms[1]}, {step_late_ms[0], step_late_ms[1]}};
  const long long missing = t_run_children(2, late_rank, &a, rep, sizeof *rep, 25000);
  CHECK_EQ(missing, 0);
  p2pk_uid u;
  CHECK_OK(p2pk_uid_decode(&id, &u));
  int lfd = p2pk_uid_take_listen_fd(&u); /* this process's copy */
  if (lfd > 0) close(lfd);
  for (int k = 0; k < 2; k++) {
    printf("  rank %d: step %d, status %d after %lld ms: %s\n", k, rep[k].step, rep[k].status,
           rep[k].waited_ms[rep[k].step], rep[k].status ? rep[k].msg : "ok");
    CHECK_EQ(rep[k].timeout_s, LATE_TIMEOUT_S); /* the config's, over P2PKIT_TIMEOUT=1 */
  }
}

/* Rank 0 gave up on `what` at its timeout, not before, not much after. */
static void late_bound(long long waited_ms, const char *what) {
  if (waited_ms < LATE_TIMEOUT_S * 1000 - 100 || waited_ms > LATE_TIMEOUT_S * 1000 + 1500)
    T_FAIL("rank 0: %s gave up after %lld ms; timeout %d s", what, waited_ms, LATE_TIMEOUT_S);
}

/* Half the timeout late, past what P2PKIT_TIMEOUT=1 would allow: rank 1 at
 * the rendezvous, then rank 0 at the all-gather; both are waited for. */
TEST(rank_late_within_the_timeout_is_waited_for) {
  const int init_late[2] = {0, 2000}, step_late[2] = {2000, 0};
  report_t rep[2];
  run_late(init_late, step_late, rep);
  for (int k = 0; k < 2; k++) {
    if (rep[k].status != P2PKIT_SUCCESS) T_FAIL("rank %d: %d %s", k, rep[k].status, rep[k].msg);
    CHECK_EQ(rep[k].step, 2);
  }
  CHECK(rep[0].waited_ms[1] >= 1800); /* rank 0's rendezvous waited for rank 1 */
  CHECK(rep[1].waited_ms[2] >= 1800); /* rank 1's all-gather waited for rank 0 */
}

/* Rank 0 3.5 s late: rank 1 waits in its socket's backlog for the
 * challenge (past P2PKIT_TIMEOUT=1 and the 2 s a rank waits beyond it). */
TEST(root_late_within_the_timeout_is_waited_for) {
  const int init_late[2] = {3500, 0}, step_late[2] = {0, 0};
  report_t rep[2];
  run_late(init_late, step_late, rep);
  for (int k = 0; k < 2; k++)
    if (rep[k].status != P2PKIT_SUCCESS) T_FAIL("rank %d: %d %s", k, rep[k].status, rep[k].msg);
  CHECK(rep[1].waited_ms[1] >= 3300);
}

/* 6 s late at the rendezvous: rank 0 gives up at 4 s; rank 1, coming
 * after, finds nobody. */
TEST(rank_late_past_the_timeout_fails_the_rendezvous) {
  const int init_late[2] = {0, 6000}, step_late[2] = {0, 0};
  report_t rep[2];
  run_late(init_late, step_late, rep);
  CHECK_EQ(rep[0].step, 1);
  CHECK_EQ(rep[0].status, P2PKIT_ERR_TIMEOUT);
  late_bound(rep[0].waited_ms[1], "its rendezvous");
  CHECK(rep[1].status != P2PKIT_SUCCESS);
}

/* 6 s late at an exchange after the rendezvous: the same bound. */
TEST(rank_late_past_the_timeout_fails_an_exchange) {
  const int init_late[2] = {0, 0}, step_late[2] = {0, 6000};
  report_t rep[2];
  run_late(init_late, step_late, rep);
  CHECK_EQ(rep[0].step, 2);
  CHECK_EQ(rep[0].status, P2PKIT_ERR_TIMEOUT);
  late_bound(rep[0].waited_ms[2], "its all-gather");
  CHECK(rep[1].status != P2PKIT_SUCCESS);
}

/* --- ncclCommInitRank, bounded -------------------------------------------------- */

/* A fake NCCL: an init that returns at once, one that fails, one that
 * blocks until the test lets it go (a member that never joins); aborts
 * counted with the communicator they were given. */
static int fake_release, fake_aborts; /* __atomic */
static p2pk_nccl_comm_t fake_aborted; /* __atomic */
static char fake_made;                /* its address: the communicator made */

static p2pk_nccl_result fake_init_quick(p2pk_nccl_comm_t *comm, int n, p2pk_nccl_id id, int rank) {
  (void)n, (void)id, (void)rank;
  *comm = (p2pk_nccl_comm_t)(void *)&fake_made;
  return P2PK_NCCL_SUCCESS;
}
static p2pk_nccl_result fake_init_fails(p2pk_nccl_comm_t *comm, int n, p2pk_nccl_id id, int rank) {
  (void)comm, (void)n, (void)id, (void)rank;
  return P2PK_NCCL_SYSTEM_ERROR;
}
static p2pk_nccl_result fake_init_stuck(p2pk_nccl_comm_t *comm, int n, p2pk_nccl_id id, int rank) {
  while (!__atomic_load_n(&fake_release, __ATOMIC_ACQUIRE)) usleep(1000);
  return fake_init_quick(comm, n, id, rank);
}
static p2pk_nccl_result fake_abort(p2pk_nccl_comm_t comm) {
  __atomic_store_n(&fake_aborted, comm, __ATOMIC_RELEASE);
  __atomic_add_fetch(&fake_aborts, 1, __ATOMIC_ACQ_REL);
  return P2PK_NCCL_SUCCESS;
}

TEST(nccl_init_is_bounded) {
  p2pk_nccl_api api;
  memset(&api, 0, sizeof api);
  api.CommAbort = fake_abort;
  p2pk_nccl_id id;
  memset(&id, 7, sizeof id);
  p2pk_nccl_comm_t comm = NULL;
  p2pk_nccl_result r = -1;
  const uint64_t far = p2pk_now_ns() + 30000000000ULL;
  api.CommInitRank = fake_init_quick;
  CHECK_OK(p2pk_nccl_init_rank_until(&api, -1, 2, &id, 1, far, &comm, &r));
  CHECK_EQ(r, P2PK_NCCL_SUCCESS);
  CHECK(comm == (p2pk_nccl_comm_t)(void *)&fake_made);
  api.CommInitRank = fake_init_fails;
  CHECK_OK(p2pk_nccl_init_rank_until(&api, -1, 2, &id, 1, far, &comm, &r));
  CHECK_EQ(r, P2PK_NCCL_SYSTEM_ERROR);
  /* A member that never joins: given up at the deadline, nothing set. */
  api.CommInitRank = fake_init_stuck;
  comm = NULL, r = -1;
  const uint64_t t0 = p2pk_now_ns();
  CHECK_EQ(p2pk_nccl_init_rank_until(&api, -1, 2, &id, 1, t0 + 300000000u, &comm, &r),
           P2PKIT_ERR_TIMEOUT);
  const double waited = (double)(p2pk_now_ns() - t0) / 1e9;
  CHECK(waited >= 0.3 && waited < 10);
  CHECK(comm == NULL);
  CHECK_EQ(r, -1);
  CHECK_EQ(__atomic_load_n(&fake_aborts, __ATOMIC_ACQUIRE), 0);
  /* It joins after all: what it made is aborted on its thread, nobody
   * being left to use it, and the job freed there (ASan). */
  __atomic_store_n(&fake_release, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < 5000 && __atomic_load_n(&fake_aborts, __ATOMIC_ACQUIRE) < 1; i++) usleep(1000);
  CHECK_EQ(__atomic_load_n(&fake_aborts, __ATOMIC_ACQUIRE), 1);
  CHECK(__atomic_load_n(&fake_aborted, __ATOMIC_ACQUIRE) == (p2pk_nccl_comm_t)(void *)&fake_made);
  usleep(20000); /* its last steps, the frees, after the count */
}

T_MAIN(T_CASE(default_setting_and_caller), T_CASE(options_and_config_carry_it),
       T_CASE(split_takes_the_parents), T_CASE(rank_late_within_the_timeout_is_waited_for),
       T_CASE(root_late_within_the_timeout_is_waited_for),
       T_CASE(rank_late_past_the_timeout_fails_the_rendezvous),
       T_CASE(rank_late_past_the_timeout_fails_an_exchange), T_CASE(nccl_init_is_bounded))
