/* SPDX-License-Identifier: BSD-3-Clause */
/* A rank's rendezvous settings (p2pk_resolve_opts, src/coll/comm/comm_rank.c): from
 * torchrun's and mpirun's environments, the caller's options over them
 * (always: the launcher fills only what is unset), the defaults, the
 * secret's sources (never a launcher's run id), and a clear error for a rank or count that is
 * unknown or out of range. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "core/param.h"
#include "test.h"

static const char *const VARS[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "P2PKIT_JOB_SECRET", "TORCHELASTIC_RUN_ID",
    "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"};

/* A clean environment, then NAME=VALUE pairs (NULL-terminated). */
static void env(const char *first, ...) {
  for (size_t i = 0; i < sizeof VARS / sizeof VARS[0]; i++) unsetenv(VARS[i]);
  va_list ap;
  va_start(ap, first);
  for (const char *k = first; k; k = va_arg(ap, const char *)) setenv(k, va_arg(ap, const char *), 1);
  va_end(ap);
  p2pk_param_reset(); /* P2PKIT_JOB_SECRET is read through the settings cache */
}

static p2pkit_status_t resolve(const p2pkit_comm_opts_t *o, p2pk_rank_opts *r) {
  memset(r, 0x5a, sizeof *r); /* poisoned: every field must be written */
  p2pkit_comm_opts_t d;
  p2pkit_comm_opts_init(&d);
  return p2pk_resolve_opts(o ? o : &d, r);
}

TEST(torchrun_environment) {
  env("RANK", "3", "WORLD_SIZE", "4", "LOCAL_RANK", "1", "MASTER_ADDR", "10.0.0.7", "MASTER_PORT",
      "29555", "TORCHELASTIC_RUN_ID", "run-17", NULL);
  p2pk_rank_opts r;
  CHECK_OK(resolve(NULL, &r));
  CHECK_EQ(r.nranks, 4);
  CHECK_EQ(r.rank, 3);
  CHECK_EQ(r.device, 1);
  CHECK_STR(r.addr, "10.0.0.7");
  CHECK_EQ(r.port, 29555);
  CHECK_STR(r.secret, ""); /* a run id is not a secret */
  CHECK_EQ(r.timeout_s, -1);
}

TEST(mpirun_environment_and_defaults) {
  env("OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "2", "OMPI_COMM_WORLD_LOCAL_RANK", "0",
      "OMPI_MCA_ess_base_jobid", "4242", NULL);
  p2pk_rank_opts r;
  CHECK_OK(resolve(NULL, &r));
  CHECK_EQ(r.nranks, 2);
  CHECK_EQ(r.rank, 1);
  CHECK_EQ(r.device, 0);
  CHECK_STR(r.addr, "127.0.0.1");
  CHECK_EQ(r.port, 29500);
  CHECK_STR(r.secret, ""); /* nor is a job id */
  /* torchrun's variables win where both launchers' are set; an empty
   * MASTER_ADDR counts as unset; without LOCAL_RANK the device is left to
   * init (-1). */
  env("RANK", "0", "WORLD_SIZE", "3", "OMPI_COMM_WORLD_RANK", "2", "OMPI_COMM_WORLD_SIZE", "5",
      "MASTER_ADDR", "", NULL);
  CHECK_OK(resolve(NULL, &r));
  CHECK_EQ(r.nranks, 3);
  CHECK_EQ(r.rank, 0);
  CHECK_EQ(r.device, -1);
  CHECK_STR(r.addr, "127.0.0.1");
}

TEST(options_over_the_environment) {
  env("RANK", "1", "WORLD_SIZE", "2", "LOCAL_RANK", "1", "MASTER_ADDR", "10.0.0.7", "MASTER_PORT", "1234",
      "P2PKIT_JOB_SECRET", "from-env", NULL);
  p2pkit_comm_opts_t o;
  p2pkit_comm_opts_init(&o);
  o.nranks = 2; /* agreeing with the launcher is fine */
  o.rank = 1;
  o.device = 0;
  o.addr = "192.168.1.2";
  o.port = 40000;
  o.secret = "from-opts";
  o.timeout_s = 7;
  p2pk_rank_opts r;
  CHECK_OK(resolve(&o, &r));
  CHECK_EQ(r.device, 0);
  CHECK_STR(r.addr, "192.168.1.2");
  CHECK_EQ(r.port, 40000);
  CHECK_STR(r.secret, "from-opts");
  CHECK_EQ(r.timeout_s, 7);
  /* No launcher at all: the options alone. */
  env(NULL);
  p2pkit_comm_opts_init(&o);
  o.nranks = 1;
  o.rank = 0;
  CHECK_OK(resolve(&o, &r));
  CHECK_EQ(r.nranks, 1);
  CHECK_STR(r.secret, ""); /* one rank: no secret needed */
}

TEST(secret_sources_in_order) {
  /* The options, else P2PKIT_JOB_SECRET; a launcher's run id never
   * (test_bootstrap_secret: what the rendezvous then accepts where). */
  p2pk_rank_opts r;
  env("RANK", "0", "WORLD_SIZE", "2", "P2PKIT_JOB_SECRET", "a", "TORCHELASTIC_RUN_ID", "b", "PMIX_NAMESPACE",
      "c", "OMPI_MCA_ess_base_jobid", "d", NULL);
  CHECK_OK(resolve(NULL, &r));
  CHECK_STR(r.secret, "a");
  env("RANK", "0", "WORLD_SIZE", "2", "TORCHELASTIC_RUN_ID", "b", "PMIX_NAMESPACE", "c",
      "OMPI_MCA_ess_base_jobid", "d", NULL);
  CHECK_OK(resolve(NULL, &r));
  CHECK_STR(r.secret, ""); /* none: loopback only */
}

/* The call fails with INVALID_ARGUMENT and the last error contains `want`. */
static void refused(const p2pkit_comm_opts_t *o, const char *want) {
  p2pk_rank_opts r;
  CHECK_EQ(resolve(o, &r), P2PKIT_ERR_INVALID_ARGUMENT);
  if (!strstr(p2pkit_last_error(), want)) T_FAIL("error '%s' lacks '%s'", p2pkit_last_error(), want);
}

TEST(unknown_out_of_range_or_disagreeing) {
  p2pkit_comm_opts_t o;
  env(NULL);
  refused(NULL, "rank and rank count unknown");
  env("RANK", "abc", "WORLD_SIZE", "2", NULL);
  refused(NULL, "RANK='abc' (from the launcher) must be a whole number from 0 to 999999");
  env("RANK", "2", "WORLD_SIZE", "2", NULL);
  refused(NULL, "rank 2 of 2: expected 0 <= rank < ranks");
  env("RANK", "0", "WORLD_SIZE", "0", NULL);
  refused(NULL, "WORLD_SIZE='0' (from the launcher) must be a whole number from 1 to");
  char big[16];
  snprintf(big, sizeof big, "%d", P2PK_COLL_MAX_RANKS + 1);
  env("RANK", "0", "WORLD_SIZE", big, NULL);
  refused(NULL, "ranks <=");
  /* A count of the caller's that is not the launcher's, and no rank: the
   * launcher's RANK belongs to another communicator. */
  env("RANK", "5", "WORLD_SIZE", "8", NULL);
  p2pkit_comm_opts_init(&o);
  o.nranks = 2;
  refused(&o, "opts.nranks=2 is not the launcher's 8 ranks, so its RANK=5");
}

/* A communicator of some of a job's ranks (as Comm(rank=1, world_size=2)
 * inside an 8-rank torchrun job): the caller's values win, the launcher
 * fills the rest. */
TEST(caller_wins_over_the_launcher) {
  env("RANK", "5", "WORLD_SIZE", "8", "LOCAL_RANK", "5", "MASTER_ADDR", "10.0.0.7", "MASTER_PORT",
      "29500", "TORCHELASTIC_RUN_ID", "run-3", NULL);
  p2pkit_comm_opts_t o;
  p2pkit_comm_opts_init(&o);
  o.nranks = 2;
  o.rank = 1;
  p2pk_rank_opts r;
  CHECK_OK(resolve(&o, &r));
  CHECK_EQ(r.nranks, 2);
  CHECK_EQ(r.rank, 1);
  CHECK_EQ(r.device, 5);           /* unset: LOCAL_RANK */
  CHECK_STR(r.addr, "10.0.0.7");   /* unset: MASTER_ADDR */
  CHECK_EQ(r.port, 29500);
  CHECK_STR(r.secret, "");
  /* Only the rank set: the launcher's count. */
  p2pkit_comm_opts_init(&o);
  o.rank = 3;
  CHECK_OK(resolve(&o, &r));
  CHECK_EQ(r.nranks, 8);
  CHECK_EQ(r.rank, 3);
  /* The launcher's count given again: its rank fills in. */
  p2pkit_comm_opts_init(&o);
  o.nranks = 8;
  CHECK_OK(resolve(&o, &r));
  CHECK_EQ(r.rank, 5);
  /* Out of range is still refused, whoever set it. */
  p2pkit_comm_opts_init(&o);
  o.nranks = 2;
  o.rank = 2;
  refused(&o, "rank 2 of 2");
}

/* A launcher variable that is set but not a number in range is named in
 * one error, never taken for unset (a default port, "rank unknown", any GPU). */
TEST(malformed_launcher_variables_are_named) {
  static const char *const cases[][3] = {
      {"MASTER_PORT", "abc", "MASTER_PORT='abc' (from the launcher) must be a whole number from 1 to 65535"},
      {"MASTER_PORT", "70000", "MASTER_PORT='70000'"},
      {"WORLD_SIZE", "2x", "WORLD_SIZE='2x' (from the launcher) must be a whole number from 1 to"},
      {"WORLD_SIZE", "0", "WORLD_SIZE='0'"},
      {"RANK", "-1", "RANK='-1' (from the launcher) must be a whole number from 0 to"},
      {"LOCAL_RANK", "gpu0", "LOCAL_RANK='gpu0' (from the launcher) must be a whole number from 0 to"},
      {"OMPI_COMM_WORLD_LOCAL_RANK", "x", "OMPI_COMM_WORLD_LOCAL_RANK='x'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    env("RANK", "1", "WORLD_SIZE", "2", "LOCAL_RANK", "1", "MASTER_PORT", "29555", NULL);
    setenv(cases[i][0], cases[i][1], 1);
    if (strcmp(cases[i][0], "OMPI_COMM_WORLD_LOCAL_RANK") == 0) unsetenv("LOCAL_RANK");
    refused(NULL, cases[i][2]);
  }
  /* Given in the options, the launcher's value is not needed. */
  env("RANK", "1", "WORLD_SIZE", "2", "LOCAL_RANK", "gpu0", "MASTER_PORT", "abc", NULL);
  p2pkit_comm_opts_t o;
  p2pkit_comm_opts_init(&o);
  o.device = 0;
  o.port = 40000;
  p2pk_rank_opts r;
  CHECK_OK(resolve(&o, &r));
  CHECK_EQ(r.port, 40000);
  env(NULL);
}

/* p2pkit_comm_opts_t carries its size and version (p2pkit.h's ABI note):
 * the initializer and the init function agree, and p2pkit_comm_init_rank
 * refuses options of another size or version in one line, before reading
 * a field or starting a rendezvous. */
TEST(size_and_version) {
  env("RANK", "0", "WORLD_SIZE", "2", NULL);
  p2pkit_comm_opts_t a = P2PKIT_COMM_OPTS_INIT, b;
  memset(&b, 0x5a, sizeof b);
  p2pkit_comm_opts_init(&b);
  CHECK_EQ(a.size, sizeof(p2pkit_comm_opts_t));
  CHECK_EQ(a.version, P2PKIT_COMM_OPTS_VERSION);
  CHECK(b.size == a.size && b.version == a.version && b.nranks == -1 && b.rank == -1);
  CHECK(b.device == -1 && b.addr == NULL && b.port == -1 && b.secret == NULL && b.timeout_s == -1);
  CHECK_OK(p2pk_comm_opts_check(&a));
  static const struct {
    size_t size;
    unsigned version;
    const char *want;
  } bad[] = {
      {0, 0, "p2pkit_comm_opts_t: size 0, version 0: fill it with p2pkit_comm_opts_init"},
      {sizeof(p2pkit_comm_opts_t), 0, "version 0: fill it with p2pkit_comm_opts_init"},
      {sizeof(p2pkit_comm_opts_t) - 8, 1, "p2pkit_comm_opts_t.size is"},
      {sizeof(p2pkit_comm_opts_t) + 8, 1, "p2pkit_comm_opts_t.size is"},
      {sizeof(p2pkit_comm_opts_t) + 8, 2, "p2pkit_comm_opts_t version 2 is newer than this library's"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    p2pkit_comm_opts_t o = P2PKIT_COMM_OPTS_INIT;
    o.size = bad[i].size;
    o.version = bad[i].version;
    p2pkit_comm_t c = NULL;
    CHECK_EQ(p2pkit_comm_init_rank(&o, &c), P2PKIT_ERR_INVALID_ARGUMENT);
    CHECK(c == NULL);
    if (!strstr(p2pkit_last_error(), bad[i].want))
      T_FAIL("case %zu: '%s' lacks '%s'", i, p2pkit_last_error(), bad[i].want);
    if (strchr(p2pkit_last_error(), '\n')) T_FAIL("case %zu: more than one line", i);
  }
  env(NULL);
}

T_MAIN(T_CASE(torchrun_environment), T_CASE(mpirun_environment_and_defaults),
       T_CASE(options_over_the_environment), T_CASE(secret_sources_in_order),
       T_CASE(unknown_out_of_range_or_disagreeing), T_CASE(caller_wins_over_the_launcher),
       T_CASE(malformed_launcher_variables_are_named), T_CASE(size_and_version))
