/* SPDX-License-Identifier: BSD-3-Clause */
/* Where a job secret comes from and which the rendezvous accepts where
 * (coll/rdv/bootstrap_secret.c, p2pk_resolve_opts in coll/comm/comm_rank.c): a launcher's
 * run id is never a secret; off loopback a secret must count 128 bits (32
 * hex digits, 22 other characters). Nothing here touches a network: the
 * address off loopback is 192.0.2.1 (TEST-NET-1, a documentation address),
 * only resolved as a number, or bound by rank 0, which fails or listens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coll/rdv/bootstrap.h"
#include "coll/coll.h"
#include "coll/rdv/init_id.h"
#include "core/param.h"
#include "test.h"

#define OFF_HOST "192.0.2.1"
#define HEX32 "00112233445566778899aabbccddeeff"

static const char *const VARS[] = {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                                   "P2PKIT_JOB_SECRET", "TORCHELASTIC_RUN_ID", "PMIX_NAMESPACE",
                                   "OMPI_MCA_ess_base_jobid"};

/* A clean environment, then NAME=VALUE pairs (NULL-terminated). */
static void env(const char *const *kv) {
  for (size_t i = 0; i < sizeof VARS / sizeof VARS[0]; i++) unsetenv(VARS[i]);
  for (; kv && kv[0]; kv += 2) setenv(kv[0], kv[1], 1);
  p2pk_param_reset(); /* P2PKIT_JOB_SECRET is read through the settings cache */
}

/* `st` is INVALID_ARGUMENT and the last error, one line, holds every `want`. */
static void refused(p2pkit_status_t st, const char *const *want) {
  CHECK_EQ(st, P2PKIT_ERR_INVALID_ARGUMENT);
  const char *e = p2pkit_last_error();
  if (strchr(e, '\n')) T_FAIL("the refusal is not one line: %s", e);
  for (; *want; want++)
    if (!strstr(e, *want)) T_FAIL("the refusal lacks '%s': %s", *want, e);
}

TEST(secret_bits_by_length_and_alphabet) {
  static const struct {
    const char *secret;
    int bits;
  } cases[] = {
      {NULL, 0},
      {"", 0},
      {"none", 24},                            /* torchrun's default run id */
      {"100", 12},                             /* a common --rdzv-id */
      {"123456", 24},                          /* hex digits: 4 bits each */
      {"0123456789abcdef0123456789abcde", 124}, /* 31 hex digits */
      {HEX32, 128},
      {"00112233445566778899AABBCCDDEEFF", 128},
      {"abcdefghijklmnopqrstu", 126},    /* 21 base64 characters */
      {"abcdefghijklmnopqrstuv", 132},   /* 22 */
      {"ABCDEFGHIJKLMNOPQRST+==", 126}, /* padding counts nothing */
      {"q83vEjRWeJq83vEjRWeJqw==", 132}, /* `openssl rand -base64 16`'s shape */
      {"====", 0},
      {"slurm.pmix.4242.0", 102}, /* a PMIx namespace */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const int got = p2pk_boot_secret_bits(cases[i].secret);
    if (got != cases[i].bits)
      T_FAIL("'%s' counts %d bits, want %d", cases[i].secret ? cases[i].secret : "(null)", got,
             cases[i].bits);
  }
}

TEST(off_loopback_needs_a_secret_of_128_bits) {
  static const char *const how[] = {"P2PKIT_JOB_SECRET", "openssl rand -hex 16",
                                    "p2pkit env --new-secret", NULL};
  static const char *const weak[] = {"none", "100", "123456", "0123456789abcdef0123456789abcde",
                                     "abcdefghijklmnopqrstu", "slurm.pmix.4242.0"};
  const char *const off[] = {OFF_HOST, "0.0.0.0", "2001:db8::1"};
  for (size_t a = 0; a < sizeof off / sizeof off[0]; a++) {
    refused(p2pk_boot_judge_secret(off[a], NULL), how);
    refused(p2pk_boot_judge_secret(off[a], ""), how);
    for (size_t i = 0; i < sizeof weak / sizeof weak[0]; i++) {
      refused(p2pk_boot_judge_secret(off[a], weak[i]), how);
      if (strstr(p2pkit_last_error(), weak[i])) T_FAIL("the refusal shows the secret: %s", p2pkit_last_error());
    }
    CHECK_OK(p2pk_boot_judge_secret(off[a], HEX32));
    CHECK_OK(p2pk_boot_judge_secret(off[a], "abcdefghijklmnopqrstuv"));
  }
  /* On loopback the same-user check stands in: any secret, or none. */
  const char *const loop[] = {"127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"};
  for (size_t a = 0; a < sizeof loop / sizeof loop[0]; a++) {
    CHECK_OK(p2pk_boot_judge_secret(loop[a], ""));
    CHECK_OK(p2pk_boot_judge_secret(loop[a], "none"));
  }
  CHECK_EQ(p2pk_boot_judge_secret("no-such-host.invalid", HEX32), P2PKIT_ERR_INVALID_ARGUMENT);
}

/* Rank 0 of 2 at OFF_HOST with what p2pk_resolve_opts made of the
 * environment: its status (the address is not this machine's, so a rank 0
 * allowed to start fails to listen; were it, it would wait 300 ms). */
static p2pkit_status_t rank0_off_host(const p2pk_rank_opts *r) {
  p2pk_boot_opts o = {0, 2, r->addr, r->port, r->secret, 300, 0};
  p2pk_boot *b = NULL;
  p2pkit_status_t st = p2pk_boot_init(&o, &b);
  p2pk_boot_destroy(b);
  return st;
}

TEST(launcher_run_ids_are_not_secrets) {
  /* torchrun --nnodes=2 --master-addr=<host> without --rdzv-id exports
   * TORCHELASTIC_RUN_ID=none; PMIx and Open MPI export job ids. */
  static const char *const ids[][2] = {{"TORCHELASTIC_RUN_ID", "none"},
                                       {"TORCHELASTIC_RUN_ID", "0123456789abcdef0123456789abcdef"},
                                       {"PMIX_NAMESPACE", "slurm.pmix.4242.0"},
                                       {"OMPI_MCA_ess_base_jobid", "100"}};
  static const char *const how[] = {"P2PKIT_JOB_SECRET", "not a loopback address",
                                    "p2pkit env --new-secret", NULL};
  for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
    const char *kv[] = {"RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", OFF_HOST, "MASTER_PORT",
                        "29500", ids[i][0], ids[i][1], NULL};
    env(kv);
    p2pkit_comm_opts_t o;
    p2pkit_comm_opts_init(&o);
    p2pk_rank_opts r;
    memset(&r, 0, sizeof r);
    CHECK_OK(p2pk_resolve_opts(&o, &r));
    if (strcmp(r.secret, "") != 0) T_FAIL("%s=%s became the secret '%s'", ids[i][0], ids[i][1], r.secret);
    refused(p2pk_boot_judge_secret(r.addr, r.secret), how);
    refused(rank0_off_host(&r), how);
  }
  env(NULL);
}

TEST(job_secret_is_judged_off_loopback) {
  /* Short: refused before rank 0 listens, naming the count. */
  const char *kv[] = {"RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", OFF_HOST, "P2PKIT_JOB_SECRET",
                      "123456", "TORCHELASTIC_RUN_ID", HEX32, NULL};
  env(kv);
  p2pkit_comm_opts_t o;
  p2pkit_comm_opts_init(&o);
  p2pk_rank_opts r;
  memset(&r, 0, sizeof r);
  CHECK_OK(p2pk_resolve_opts(&o, &r));
  CHECK_STR(r.secret, "123456");
  static const char *const weak[] = {"counts 24 bits, fewer than 128", "P2PKIT_JOB_SECRET", NULL};
  refused(rank0_off_host(&r), weak);
  /* 32 hex digits: accepted; rank 0 goes on to listen (and fails to, at
   * an address that is not this machine's). */
  kv[7] = HEX32;
  env(kv);
  CHECK_OK(p2pk_resolve_opts(&o, &r));
  CHECK_STR(r.secret, HEX32);
  CHECK_OK(p2pk_boot_judge_secret(r.addr, r.secret));
  const p2pkit_status_t st = rank0_off_host(&r);
  if (st == P2PKIT_ERR_INVALID_ARGUMENT) T_FAIL("a 32-hex-digit secret was refused: %s", p2pkit_last_error());
  /* The caller's secret wins over the environment's, and is judged too. */
  o.secret = "short";
  CHECK_OK(p2pk_resolve_opts(&o, &r));
  CHECK_STR(r.secret, "short");
  refused(rank0_off_host(&r), weak + 1);
  env(NULL);
}

/* `p2pkit env ARGS`'s first line of output into out; its exit code. */
static int run_env(const char *args, char *out, size_t len) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "'%s' env %s 2>/dev/null", P2PK_CLI, args);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  out[0] = '\0';
  if (!fgets(out, (int)len, p)) out[0] = '\0';
  int rc = pclose(p);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void check_new_secret(const char *s) {
  CHECK_EQ(strlen(s), (size_t)P2PK_SECRET_HEX);
  CHECK_EQ(strspn(s, "0123456789abcdef"), (size_t)P2PK_SECRET_HEX);
  CHECK_EQ(p2pk_boot_secret_bits(s), P2PK_BOOT_SECRET_MIN_BITS);
  CHECK_OK(p2pk_boot_judge_secret(OFF_HOST, s));
}

TEST(new_secret_is_fresh_and_enough) {
  char a[P2PK_SECRET_HEX + 1], b[P2PK_SECRET_HEX + 1];
  CHECK_OK(p2pk_secret_new(a));
  CHECK_OK(p2pk_secret_new(b));
  check_new_secret(a);
  check_new_secret(b);
  CHECK(strcmp(a, b) != 0);
  if (access(P2PK_CLI, X_OK) != 0) {
    printf("SKIP: %s not built: `p2pkit env --new-secret` not run\n", P2PK_CLI);
    return;
  }
  char x[128], y[128];
  CHECK_EQ(run_env("--new-secret", x, sizeof x), 0);
  CHECK_EQ(run_env("--new-secret", y, sizeof y), 0);
  x[strcspn(x, "\n")] = y[strcspn(y, "\n")] = '\0';
  check_new_secret(x);
  check_new_secret(y);
  CHECK(strcmp(x, y) != 0);
  CHECK_EQ(run_env("--new-secret --json", x, sizeof x), 2);
}

T_MAIN(T_CASE(secret_bits_by_length_and_alphabet), T_CASE(off_loopback_needs_a_secret_of_128_bits),
       T_CASE(launcher_run_ids_are_not_secrets), T_CASE(job_secret_is_judged_off_loopback),
       T_CASE(new_secret_is_fresh_and_enough))
