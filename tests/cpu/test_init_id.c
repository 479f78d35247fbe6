/* SPDX-License-Identifier: BSD-3-Clause */
/* Communicator creation from a unique id (src/coll/rdv/init_id.c): the id's
 * encoding both ways, damaged ids refused with one line, the config's size
 * and version checks, the id's settings winning over a launcher's
 * environment, and a real rendezvous of forked ranks on loopback through an
 * id (the part of p2pkit_comm_init_rank_config before the GPU: decode, the
 * options, the socket p2pkit_get_unique_id keeps, the bootstrap). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coll/rdv/bootstrap.h"
#include "coll/coll.h"
#include "coll/rdv/init_id.h"
#include "core/param.h"
#include "test.h"
#include "test_net.h"

/* The status and the last error's line contain `want` (and no newline). */
static void refused_with(p2pkit_status_t got, p2pkit_status_t want_st, const char *want) {
  CHECK_EQ(got, want_st);
  const char *e = p2pkit_last_error();
  if (!strstr(e, want)) T_FAIL("error '%s' lacks '%s'", e, want);
  if (strchr(e, '\n')) T_FAIL("error is more than one line: '%s'", e);
}

static p2pk_uid sample(int family) {
  p2pk_uid u;
  memset(&u, 0, sizeof u);
  u.family = family;
  snprintf(u.addr, sizeof u.addr, "%s", family == AF_INET6 ? "fd00::1:2" : "10.1.2.3");
  u.port = 40123;
  for (int i = 0; i < P2PK_UID_SECRET_BYTES; i++) u.secret[i] = (unsigned char)(i * 37 + 5);
  u.pid = 4242;
  return u;
}

TEST(encoding_round_trip) {
  int fams[2] = {AF_INET, AF_INET6};
  for (int f = 0; f < 2; f++) {
    p2pk_uid u = sample(fams[f]), v;
    p2pkit_unique_id_t id;
    CHECK_OK(p2pk_uid_encode(&u, &id));
    CHECK_OK(p2pk_uid_decode(&id, &v));
    CHECK_EQ(v.version, P2PK_UID_VERSION);
    CHECK_EQ(v.family, fams[f]);
    CHECK_STR(v.addr, u.addr);
    CHECK_EQ(v.port, 40123);
    CHECK_EQ(v.pid, 4242);
    CHECK(memcmp(v.secret, u.secret, sizeof u.secret) == 0);
    CHECK_EQ(strlen(v.secret_hex), 2 * P2PK_UID_SECRET_BYTES);
    CHECK(strncmp(v.secret_hex, "052a4f", 6) == 0); /* 5, 42, 79 */
  }
  CHECK_EQ(sizeof(p2pkit_unique_id_t), P2PKIT_UNIQUE_ID_BYTES);
  p2pk_uid u = sample(AF_INET);
  p2pkit_unique_id_t id;
  snprintf(u.addr, sizeof u.addr, "host.example");
  refused_with(p2pk_uid_encode(&u, &id), P2PKIT_ERR_INVALID_ARGUMENT, "not a numeric IPv4");
  u = sample(AF_INET);
  u.port = 0;
  refused_with(p2pk_uid_encode(&u, &id), P2PKIT_ERR_INVALID_ARGUMENT, "port 0");
}

TEST(damaged_or_short_ids_are_refused) {
  p2pk_uid u = sample(AF_INET), v;
  p2pkit_unique_id_t good, id;
  CHECK_OK(p2pk_uid_encode(&u, &good));
  /* Every single changed byte is caught (a checksum over all of it). */
  for (int i = 0; i < P2PKIT_UNIQUE_ID_BYTES; i++) {
    id = good;
    id.internal[i] ^= 0x10;
    if (p2pk_uid_decode(&id, &v) == P2PKIT_SUCCESS) T_FAIL("byte %d changed, still accepted", i);
  }
  id = good;
  id.internal[40] ^= 1;
  refused_with(p2pk_uid_decode(&id, &v), P2PKIT_ERR_INVALID_ARGUMENT, "damaged");
  /* A short copy: the first 64 bytes, the rest zeros. */
  memset(&id, 0, sizeof id);
  memcpy(&id, &good, 64);
  refused_with(p2pk_uid_decode(&id, &v), P2PKIT_ERR_INVALID_ARGUMENT, "damaged");
  memset(&id, 0, sizeof id);
  refused_with(p2pk_uid_decode(&id, &v), P2PKIT_ERR_INVALID_ARGUMENT, "not a p2pkit unique id");
  id = good;
  id.internal[4] = 9;
  refused_with(p2pk_uid_decode(&id, &v), P2PKIT_ERR_INVALID_ARGUMENT, "version 9");
  /* The public call refuses it before anything else. */
  p2pkit_comm_t c = NULL;
  id = good;
  id.internal[100] = 1;
  refused_with(p2pkit_comm_init_rank_config(&c, 2, &id, 0, NULL), P2PKIT_ERR_INVALID_ARGUMENT,
               "damaged");
  CHECK(c == NULL);
}

TEST(config_size_and_version) {
  p2pkit_config_t out, in = P2PKIT_CONFIG_INIT;
  CHECK_OK(p2pk_config_check(NULL, &out));
  CHECK_EQ(out.size, sizeof(p2pkit_config_t));
  CHECK_EQ(out.device, -1);
  CHECK_EQ(out.timeout_s, -1);
  CHECK_EQ(out.max_blocks, -1);
  in.device = 3;
  in.timeout_s = 12;
  in.max_blocks = 16;
  CHECK_OK(p2pk_config_check(&in, &out));
  CHECK_EQ(out.device, 3);
  CHECK_EQ(out.timeout_s, 12);
  CHECK_EQ(out.max_blocks, 16);
  p2pkit_config_t bad = P2PKIT_CONFIG_INIT;
  bad.size = sizeof bad - 4;
  refused_with(p2pk_config_check(&bad, &out), P2PKIT_ERR_INVALID_ARGUMENT, "P2PKIT_CONFIG_INIT");
  bad = (p2pkit_config_t)P2PKIT_CONFIG_INIT;
  bad.version = P2PKIT_CONFIG_VERSION + 1;
  refused_with(p2pk_config_check(&bad, &out), P2PKIT_ERR_INVALID_ARGUMENT, "newer than this library");
  memset(&bad, 0, sizeof bad); /* zeroed, not initialized */
  refused_with(p2pk_config_check(&bad, &out), P2PKIT_ERR_INVALID_ARGUMENT, "P2PKIT_CONFIG_INIT");
  bad = (p2pkit_config_t)P2PKIT_CONFIG_INIT;
  bad.reserved[2] = 7;
  refused_with(p2pk_config_check(&bad, &out), P2PKIT_ERR_INVALID_ARGUMENT, "reserved[2]");
  bad = (p2pkit_config_t)P2PKIT_CONFIG_INIT;
  bad.timeout_s = 0;
  refused_with(p2pk_config_check(&bad, &out), P2PKIT_ERR_INVALID_ARGUMENT, "timeout_s 0");
  bad = (p2pkit_config_t)P2PKIT_CONFIG_INIT;
  bad.max_blocks = 5000;
  refused_with(p2pk_config_check(&bad, &out), P2PKIT_ERR_INVALID_ARGUMENT, "max_blocks 5000");
  bad = (p2pkit_config_t)P2PKIT_CONFIG_INIT;
  bad.device = -2;
  refused_with(p2pk_config_check(&bad, &out), P2PKIT_ERR_INVALID_ARGUMENT, "device -2");
}

TEST(init_argument_checks) {
  p2pk_uid u = sample(AF_INET);
  p2pkit_unique_id_t id;
  CHECK_OK(p2pk_uid_encode(&u, &id));
  p2pkit_comm_t c = NULL;
  refused_with(p2pkit_comm_init_rank_config(NULL, 2, &id, 0, NULL), P2PKIT_ERR_INVALID_ARGUMENT,
               "comm is NULL");
  refused_with(p2pkit_comm_init_rank_config(&c, 2, NULL, 0, NULL), P2PKIT_ERR_INVALID_ARGUMENT,
               "id is NULL");
  refused_with(p2pkit_comm_init_rank_config(&c, 2, &id, 2, NULL), P2PKIT_ERR_INVALID_ARGUMENT,
               "rank 2 of 2");
  refused_with(p2pkit_comm_init_rank_config(&c, 0, &id, 0, NULL), P2PKIT_ERR_INVALID_ARGUMENT,
               "rank 0 of 0");
  p2pkit_config_t cfg = P2PKIT_CONFIG_INIT;
  cfg.version = 0;
  refused_with(p2pkit_comm_init_rank_config(&c, 2, &id, 0, &cfg), P2PKIT_ERR_INVALID_ARGUMENT,
               "P2PKIT_CONFIG_INIT");
  CHECK(c == NULL);
  refused_with(p2pkit_get_unique_id(NULL), P2PKIT_ERR_INVALID_ARGUMENT, "id is NULL");
}

/* The launcher says rank 5 of 8 at 10.0.0.7:1234 with its own secret; the
 * id's communicator is rank 1 of 2 elsewhere: nothing comes from the
 * launcher. */
TEST(the_id_wins_over_the_launcher) {
  setenv("RANK", "5", 1);
  setenv("WORLD_SIZE", "8", 1);
  setenv("MASTER_ADDR", "10.0.0.7", 1);
  setenv("MASTER_PORT", "1234", 1);
  setenv("P2PKIT_JOB_SECRET", "launcher-secret", 1);
  setenv("TORCHELASTIC_RUN_ID", "run-1", 1);
  p2pk_param_reset();
  p2pk_uid made = sample(AF_INET), u;
  p2pkit_unique_id_t id;
  CHECK_OK(p2pk_uid_encode(&made, &id));
  CHECK_OK(p2pk_uid_decode(&id, &u));
  p2pkit_config_t cfg = P2PKIT_CONFIG_INIT;
  cfg.device = 0;
  p2pkit_comm_opts_t o;
  CHECK_OK(p2pk_uid_comm_opts(&u, 2, 1, &cfg, &o));
  p2pk_rank_opts r;
  memset(&r, 0x5a, sizeof r);
  CHECK_OK(p2pk_resolve_opts(&o, &r));
  CHECK_EQ(r.nranks, 2);
  CHECK_EQ(r.rank, 1);
  CHECK_EQ(r.device, 0);
  CHECK_STR(r.addr, "10.1.2.3");
  CHECK_EQ(r.port, 40123);
  CHECK_EQ(strlen(r.secret), 2 * P2PK_UID_SECRET_BYTES);
  CHECK_STR(r.secret, u.secret_hex);
  const char *vars[] = {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "P2PKIT_JOB_SECRET",
                        "TORCHELASTIC_RUN_ID"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
  p2pk_param_reset();
}

TEST(get_unique_id_listens_at_once) {
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  p2pkit_unique_id_t a, b;
  int before = p2pk_uid_open_count();
  CHECK_OK(p2pkit_get_unique_id(&a));
  CHECK_OK(p2pkit_get_unique_id(&b));
  CHECK_EQ(p2pk_uid_open_count(), before + 2);
  p2pk_uid ua, ub;
  CHECK_OK(p2pk_uid_decode(&a, &ua));
  CHECK_OK(p2pk_uid_decode(&b, &ub));
  CHECK_STR(ua.addr, "127.0.0.1");
  CHECK(ua.port > 0 && ub.port > 0 && ua.port != ub.port);
  CHECK(memcmp(ua.secret, ub.secret, sizeof ua.secret) != 0);
  CHECK_EQ(ua.pid, (uint32_t)getpid());
  /* The port is taken already: a connection is queued before any init. */
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)ua.port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK_EQ(connect(s, (struct sockaddr *)&sa, sizeof sa), 0);
  close(s);
  int fa = p2pk_uid_take_listen_fd(&ua), fb = p2pk_uid_take_listen_fd(&ub);
  CHECK(fa > 2 && fb > 2);
  CHECK_EQ(p2pk_uid_take_listen_fd(&ua), -1); /* taken once */
  CHECK_EQ(p2pk_uid_open_count(), before);
  close(fa);
  close(fb);
  /* MASTER_ADDR that is not this host: the next address that binds. */
  setenv("MASTER_ADDR", "no-such-host.invalid", 1);
  CHECK_OK(p2pkit_get_unique_id(&a));
  CHECK_OK(p2pk_uid_decode(&a, &ua));
  CHECK(ua.port > 0);
  int f = p2pk_uid_take_listen_fd(&ua);
  CHECK(f > 2);
  close(f);
  unsetenv("MASTER_ADDR");
}

/* --- ranks through an id, as processes ------------------------------------- */

typedef struct {
  int status, data_ok, used_kept_socket;
  char msg[256];
} report_t;

/* One rank: what p2pkit_comm_init_rank_config does up to the GPU, then an
 * all-gather and a barrier over the rendezvous. */
static void rank_child(const p2pkit_unique_id_t *id, int rank, int nranks, int delay_ms, int out) {
  report_t rep;
  memset(&rep, 0, sizeof rep);
  if (delay_ms) usleep((useconds_t)delay_ms * 1000);
  /* A launcher's environment of another job: it must not matter. */
  setenv("RANK", "7", 1);
  setenv("WORLD_SIZE", "9", 1);
  setenv("MASTER_PORT", "1", 1);
  p2pk_uid u;
  p2pkit_config_t cfg;
  p2pkit_comm_opts_t o;
  p2pk_rank_opts r;
  p2pk_boot *b = NULL;
  memset(&r, 0, sizeof r);
  rep.status = p2pk_uid_decode(id, &u);
  if (!rep.status) rep.status = p2pk_config_check(NULL, &cfg);
  if (!rep.status) rep.status = p2pk_uid_comm_opts(&u, nranks, rank, &cfg, &o);
  if (!rep.status) rep.status = p2pk_resolve_opts(&o, &r);
  int lfd = rank == 0 ? p2pk_uid_take_listen_fd(&u) : -1;
  rep.used_kept_socket = lfd > 0;
  if (!rep.status) {
    p2pk_boot_opts bo = {r.rank, r.nranks, r.addr, r.port, r.secret, 10000, lfd > 0 ? lfd : 0};
    rep.status = p2pk_boot_init(&bo, &b);
  }
  if (lfd > 0) close(lfd);
  if (!rep.status) {
    int mine = 100 + rank, all[8] = {0};
    rep.status = p2pk_boot_allgather(b, 3, &mine, all, sizeof mine);
    rep.data_ok = 1;
    for (int i = 0; i < nranks; i++)
      if (all[i] != 100 + i) rep.data_ok = 0;
    if (!rep.status) rep.status = p2pk_boot_barrier(b, 4);
    p2pk_boot_destroy(b);
  }
  snprintf(rep.msg, sizeof rep.msg, "%s", p2pkit_last_error());
  if (write(out, &rep, sizeof rep) != (ssize_t)sizeof rep) _exit(3);
  _exit(0);
}

typedef struct {
  const p2pkit_unique_id_t *id;
  int nranks;
  const int *delay_ms;
} ranks_arg;

static void run_rank_child(int k, void *arg, int fd) {
  const ranks_arg *a = arg;
  rank_child(a->id, k, a->nranks, a->delay_ms[k], fd);
}

static void run_ranks(const p2pkit_unique_id_t *id, int nranks, const int *delay_ms, report_t *rep) {
  ranks_arg a = {id, nranks, delay_ms};
  const long long missing = t_run_children(nranks, run_rank_child, &a, rep, sizeof *rep, 20000);
  CHECK(missing >= 0);
  for (int i = 0; i < nranks; i++)
    if (missing > 0 && (missing >> i & 1)) {
      rep[i].status = -1;
      T_FAIL("rank %d did not report within 20 s: a hang", i);
    }
}

TEST(ranks_meet_through_an_id) {
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  p2pkit_unique_id_t id;
  CHECK_OK(p2pkit_get_unique_id(&id));
  unsetenv("MASTER_ADDR");
  /* Rank 0 comes last: the others wait in the kept socket's backlog. */
  const int delay[3] = {400, 0, 0};
  report_t rep[3];
  run_ranks(&id, 3, delay, rep);
  for (int r = 0; r < 3; r++) {
    if (rep[r].status != P2PKIT_SUCCESS) T_FAIL("rank %d: %d %s", r, rep[r].status, rep[r].msg);
    CHECK_EQ(rep[r].data_ok, 1);
  }
  CHECK_EQ(rep[0].used_kept_socket, 1);
  p2pk_uid u;
  CHECK_OK(p2pk_uid_decode(&id, &u));
  int fd = p2pk_uid_take_listen_fd(&u); /* this process's copy of it */
  if (fd > 0) close(fd);
}

TEST(id_from_a_process_that_exited) {
  /* Another process makes the id and exits: rank 0 binds the port itself. */
  int p[2];
  CHECK_EQ(pipe(p), 0);
  fflush(NULL);
  pid_t maker = fork();
  if (maker == 0) {
    p2pkit_unique_id_t made;
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    if (p2pkit_get_unique_id(&made) != P2PKIT_SUCCESS) _exit(2);
    if (write(p[1], &made, sizeof made) != (ssize_t)sizeof made) _exit(3);
    _exit(0);
  }
  close(p[1]);
  p2pkit_unique_id_t id;
  CHECK_EQ(read(p[0], &id, sizeof id), (ssize_t)sizeof id);
  close(p[0]);
  int st = 0;
  waitpid(maker, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  const int delay[2] = {0, 0};
  report_t rep[2];
  run_ranks(&id, 2, delay, rep);
  for (int r = 0; r < 2; r++)
    if (rep[r].status != P2PKIT_SUCCESS) T_FAIL("rank %d: %d %s", r, rep[r].status, rep[r].msg);
  CHECK_EQ(rep[0].used_kept_socket, 0);
}

TEST(init_without_a_gpu_fails_cleanly) {
  /* One rank: no rendezvous; with no GPU a clear CUDA-side error, with one
   * a communicator. Either way no hang and no leak. */
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  p2pkit_unique_id_t id;
  CHECK_OK(p2pkit_get_unique_id(&id));
  unsetenv("MASTER_ADDR");
  int open_before = p2pk_uid_open_count();
  p2pkit_comm_t c = NULL;
  p2pkit_status_t st = p2pkit_comm_init_rank_config(&c, 1, &id, 0, NULL);
  if (st == P2PKIT_SUCCESS) {
    CHECK(c != NULL);
    CHECK_EQ(p2pkit_comm_size(c), 1);
    CHECK_OK(p2pkit_comm_destroy(c));
    CHECK_EQ(p2pk_uid_open_count(), open_before - 1); /* rank 0 took its socket */
  } else {
    CHECK(c == NULL);
    CHECK(st == P2PKIT_ERR_NO_DRIVER || st == P2PKIT_ERR_NO_DEVICE || st == P2PKIT_ERR_CUDA);
    printf("  (no GPU: %s: %s)\n", p2pkit_strerror(st), p2pkit_last_error());
    /* Failed before the rendezvous: the id keeps its socket for a retry. */
    CHECK_EQ(p2pk_uid_open_count(), open_before);
    p2pk_uid u;
    CHECK_OK(p2pk_uid_decode(&id, &u));
    int fd = p2pk_uid_take_listen_fd(&u);
    CHECK(fd > 2);
    if (fd > 2) close(fd);
  }
}

T_MAIN(T_CASE(encoding_round_trip), T_CASE(damaged_or_short_ids_are_refused),
       T_CASE(config_size_and_version), T_CASE(init_argument_checks),
       T_CASE(the_id_wins_over_the_launcher), T_CASE(get_unique_id_listens_at_once),
       T_CASE(ranks_meet_through_an_id), T_CASE(id_from_a_process_that_exited),
       T_CASE(init_without_a_gpu_fails_cleanly))
