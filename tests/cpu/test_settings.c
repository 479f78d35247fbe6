/* SPDX-License-Identifier: BSD-3-Clause */
/* The settings registry's ranges: every number setting has one, both ends
 * of it are held (a value past either is refused, naming the setting, the
 * value and the range, by p2pk_param_check and by the library's entry
 * points), the readers' own limits agree with it, and every variable the
 * Python package reads is a setting. p2pkit_setting_int, the registry's
 * integer settings for code built on p2pkit (the PyTorch backend reads
 * P2PKIT_TORCH_ASYNC_ERROR_HANDLING and whether P2PKIT_TIMEOUT is set
 * through it): the value in force, whether the environment set it, the
 * registry's own refusals. */
#include <dirent.h>
#include <stdlib.h>

#include "coll/kernels/coll_dev.h"
#include "core/param.h"
#include "p2pkit.h"
#include "test.h"
#include "xfer/xfer.h"

static const p2pk_param_def *def_of(const char *name) {
  for (size_t i = 0; i < p2pk_param_count(); i++)
    if (strcmp(p2pk_param_at(i)->name, name) == 0) return p2pk_param_at(i);
  T_FAIL("%s is not in the registry", name);
  return NULL;
}

/* p2pk_param_check with only `name`=`value` set: 0 accepted, -1 refused
 * (the error then in p2pkit_last_error()). */
static int check_one(const char *name, const char *value) {
  setenv(name, value, 1);
  p2pk_param_reset();
  const p2pkit_status_t st = p2pk_param_check();
  unsetenv(name);
  p2pk_param_reset();
  if (st != P2PKIT_SUCCESS && st != P2PKIT_ERR_INVALID_ARGUMENT)
    T_FAIL("%s=%s: p2pk_param_check returned %s", name, value, p2pkit_strerror(st));
  return st == P2PKIT_SUCCESS ? 0 : -1;
}

/* Refused, and the sentence names the setting, the value and the range. */
static void want_refused(const p2pk_param_def *d, const char *value) {
  if (check_one(d->name, value) == 0) {
    T_FAIL("%s='%s' was accepted", d->name, value);
    return;
  }
  char head[200], range[96];
  snprintf(head, sizeof head, "%s='%s' ", d->name, value);
  p2pk_param_range_text(d, range, sizeof range);
  const char *e = p2pkit_last_error();
  if (strncmp(e, head, strlen(head)) != 0 || !range[0] || !strstr(e, range))
    T_FAIL("%s='%s': said '%s' (wanted it to start '%s' and name '%s')", d->name, value, e, head,
           range);
}

static void want_accepted(const p2pk_param_def *d, const char *value) {
  if (check_one(d->name, value) != 0)
    T_FAIL("%s='%s' refused: %s", d->name, value, p2pkit_last_error());
}

static void number_text(int64_t v, char *buf, size_t len) {
  snprintf(buf, len, "%lld", (long long)v);
}

/* Every INT and SIZE setting states its range, and its default lies in it. */
TEST(every_number_setting_has_a_range) {
  for (size_t i = 0; i < p2pk_param_count(); i++) {
    const p2pk_param_def *d = p2pk_param_at(i);
    if (d->kind == P2PK_PARAM_STR) {
      CHECK(!d->ranged);
      continue;
    }
    if (!d->ranged || d->lo > d->hi) {
      T_FAIL("%s has no range (or lo > hi): every number setting states one", d->name);
      continue;
    }
    if (d->kind == P2PK_PARAM_SIZE && d->lo < 0) T_FAIL("%s: a size from %lld", d->name, (long long)d->lo);
    want_accepted(d, d->def);
  }
}

/* Both ends of every range, and one past each: the upper bound of every size
 * setting too (P2PKIT_STAGE_CHUNK=2G was once accepted with its bound gone). */
TEST(every_range_is_held_at_both_ends) {
  for (size_t i = 0; i < p2pk_param_count(); i++) {
    const p2pk_param_def *d = p2pk_param_at(i);
    if (d->kind == P2PK_PARAM_STR || !d->ranged) continue;
    char v[32];
    number_text(d->lo, v, sizeof v);
    want_accepted(d, v);
    number_text(d->hi, v, sizeof v);
    want_accepted(d, v);
    number_text(d->hi + 1, v, sizeof v);
    want_refused(d, v);
    if (!(d->or_zero && d->lo - 1 == 0)) { /* a size's -1 is refused as no size at all */
      number_text(d->lo - 1, v, sizeof v);
      want_refused(d, v);
    }
    if (d->or_zero) want_accepted(d, "0");
    else if (d->lo > 0) want_refused(d, "0");
  }
}

/* The values the issue found accepted and then clamped in silence, each
 * refused now with its own sentence. */
TEST(out_of_range_values_are_refused_with_their_range) {
  static const struct { const char *name, *value, *want; } bad[] = {
      {"P2PKIT_COLL_MAILBOXES", "-1", "P2PKIT_COLL_MAILBOXES='-1' must be 0 or a whole number from 16 to 512"},
      {"P2PKIT_COLL_MAILBOXES", "600", "P2PKIT_COLL_MAILBOXES='600' must be 0 or a whole number from 16 to 512"},
      {"P2PKIT_CE_DEPTH", "-1", "P2PKIT_CE_DEPTH='-1' must be a whole number from 2 to 8"},
      {"P2PKIT_STAGED_CE_DEPTH", "-1", "P2PKIT_STAGED_CE_DEPTH='-1' must be a whole number from 2 to 8"},
      {"P2PKIT_CE_LAND", "1kb", "P2PKIT_CE_LAND='1kb' is out of range: it must be a size from 16M to 4G"},
      {"P2PKIT_GRAD_SYNC_BLOCKS", "2147483648", "P2PKIT_GRAD_SYNC_BLOCKS='2147483648' must be a whole number from -1 to 1024"},
      {"P2PKIT_STAGE_CHUNK", "2G", "P2PKIT_STAGE_CHUNK='2G' is out of range: it must be a size from 4K to 1G"},
      {"P2PKIT_LL128_MAX", "2G", "P2PKIT_LL128_MAX='2G' is out of range: it must be a size from 0 to 1G"},
      {"P2PKIT_COLL_THREADS", "1024", "P2PKIT_COLL_THREADS='1024' must be 0 or a whole number from 64 to 512"},
      {"P2PKIT_DEBUG", "bogus", "P2PKIT_DEBUG='bogus' is not one of NONE, WARN, INFO, TRACE"},
      {"P2PKIT_DEBUG_SUBSYS", "TOPO,NOPE", "P2PKIT_DEBUG_SUBSYS='TOPO,NOPE': not a list of INIT, TOPO"},
      {"P2PKIT_TORCH_SAME_STREAM", "yes", "P2PKIT_TORCH_SAME_STREAM='yes' must be a whole number from 0 to 1"},
      {"P2PKIT_SENDRECV_DIRECT_WAIT_US", "-5", "P2PKIT_SENDRECV_DIRECT_WAIT_US='-5' must be a whole number from 0 to 1000000"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    if (check_one(bad[i].name, bad[i].value) == 0) T_FAIL("%s=%s accepted", bad[i].name, bad[i].value);
    else if (strncmp(p2pkit_last_error(), bad[i].want, strlen(bad[i].want)) != 0)
      T_FAIL("%s: said '%s'", bad[i].name, p2pkit_last_error());
  }
  /* Words in any case; a list of subsystems. */
  CHECK_EQ(check_one("P2PKIT_DEBUG", "info"), 0);
  CHECK_EQ(check_one("P2PKIT_DEBUG_SUBSYS", "^COLL,boot"), 0);
  CHECK_EQ(check_one("P2PKIT_GRAD_SYNC_BLOCKS", "-1"), 0); /* -1: no cap, as documented */
}

/* A value past its range fails the library's own calls, naming it: a copy
 * context and a communicator refuse it before any GPU is looked for. */
TEST(library_calls_refuse_out_of_range_settings) {
  setenv("P2PKIT_STAGE_CHUNK", "2G", 1);
  p2pk_param_reset();
  p2pkit_ctx_t ctx = NULL;
  CHECK_EQ(p2pkit_ctx_create(NULL, &ctx), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(ctx == NULL);
  CHECK_STR(p2pkit_last_error(), "P2PKIT_STAGE_CHUNK='2G' is out of range: it must be a size from 4K to 1G");
  unsetenv("P2PKIT_STAGE_CHUNK");
  setenv("P2PKIT_COLL_MAILBOXES", "-1", 1);
  p2pk_param_reset();
  p2pkit_comm_t comm = NULL;
  CHECK_EQ(p2pkit_comm_init_all(&comm, 1, NULL), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(comm == NULL);
  CHECK_STR(p2pkit_last_error(), "P2PKIT_COLL_MAILBOXES='-1' must be 0 or a whole number from 16 to 512");
  unsetenv("P2PKIT_COLL_MAILBOXES");
  p2pk_param_reset();
}

/* The registry's ranges are the readers' limits: what it accepts, they use
 * as given (no reader clamps), and they can use all of it. */
TEST(ranges_match_the_readers_limits) {
  CHECK_EQ(def_of("P2PKIT_COLL_MAILBOXES")->hi, P2PK_COLL_MAILBOXES);
  CHECK_EQ(def_of("P2PKIT_CE_DEPTH")->hi, P2PK_SCE_DEPTH_MAX);
  CHECK_EQ(def_of("P2PKIT_STAGED_CE_DEPTH")->hi, P2PK_SCE_DEPTH_MAX);
  CHECK_EQ(def_of("P2PKIT_STAGE_DEPTH")->hi, P2PK_STAGE_MAX_DEPTH);
  CHECK_EQ(def_of("P2PKIT_STAGE_CHUNK")->lo, P2PK_STAGE_MIN_CHUNK);
  CHECK_EQ(def_of("P2PKIT_STAGE_CHUNK")->hi, P2PK_STAGE_MAX_CHUNK);
  CHECK_EQ(def_of("P2PKIT_COLL_BLOCKS")->hi, P2PK_COLL_MAX_BLOCKS);
  CHECK_EQ(def_of("P2PKIT_MAX_BLOCKS")->hi, P2PK_COLL_MAX_BLOCKS);
  CHECK_EQ(def_of("P2PKIT_GRAD_SYNC_BLOCKS")->hi, P2PK_COLL_MAX_BLOCKS);
}

/* Every P2PKIT_* name the Python package reads from the environment is in
 * the registry, so `p2pkit env` lists it and never calls it unknown. */
TEST(python_variables_are_settings) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/../../python/p2pkit", P2PK_TEST_DATA);
  DIR *dp = opendir(dir);
  if (!dp) {
    T_FAIL("cannot read %s", dir);
    return;
  }
  int found = 0;
  for (struct dirent *e; (e = readdir(dp));) {
    const size_t n = strlen(e->d_name);
    if (n < 4 || strcmp(e->d_name + n - 3, ".py") != 0) continue;
    char path[800], line[1024];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f)) {
      if (!strstr(line, "environ")) continue;
      for (char *p = strstr(line, "\"P2PKIT_"); p; p = strstr(p + 1, "\"P2PKIT_")) {
        char name[96];
        size_t k = strspn(p + 1, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
        if (k >= sizeof name) continue;
        memcpy(name, p + 1, k);
        name[k] = '\0';
        found++;
        if (!def_of(name)) T_FAIL("%s (read in %s) is not a setting", name, e->d_name);
      }
    }
    if (f) fclose(f);
  }
  closedir(dp);
  CHECK(found >= 1); /* P2PKIT_LIB at least (the C++ backend reads its through the registry) */
  setenv("P2PKIT_TORCH_SAME_STREAM", "1", 1);
  setenv("P2PKIT_LIB", "/x/libp2pkit.so", 1);
  CHECK_EQ(p2pk_param_unknown(NULL, 0), 0);
  unsetenv("P2PKIT_TORCH_SAME_STREAM");
  unsetenv("P2PKIT_LIB");
}

static const char *const H = "P2PKIT_TORCH_ASYNC_ERROR_HANDLING";

TEST(setting_int_default_and_set) {
  unsetenv(H);
  p2pk_param_reset();
  int64_t v = -9;
  int set = -1;
  CHECK_OK(p2pkit_setting_int(H, &v, &set));
  CHECK_EQ(v, 2);
  CHECK_EQ(set, 0);
  setenv(H, "0", 1);
  p2pk_param_reset();
  CHECK_OK(p2pkit_setting_int(H, &v, &set));
  CHECK_EQ(v, 0);
  CHECK_EQ(set, 1);
  CHECK_OK(p2pkit_setting_int("P2PKIT_TIMEOUT", &v, NULL)); /* is_set_p may be NULL */
  unsetenv(H);
  p2pk_param_reset();
}

TEST(setting_int_refused) {
  int64_t v = 77;
  CHECK_EQ(p2pkit_setting_int("P2PKIT_NO_SUCH", &v, NULL), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_STR(p2pkit_last_error(), "setting_int: P2PKIT_NO_SUCH is not an integer setting of "
                                 "p2pkit (`p2pkit env` lists them)");
  CHECK_EQ(p2pkit_setting_int("P2PKIT_NCCL", &v, NULL), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pkit_setting_int(NULL, &v, NULL), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pkit_setting_int(H, NULL, NULL), P2PKIT_ERR_INVALID_ARGUMENT);
  setenv(H, "4", 1);
  p2pk_param_reset();
  CHECK_EQ(p2pkit_setting_int(H, &v, NULL), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_STR(p2pkit_last_error(), "P2PKIT_TORCH_ASYNC_ERROR_HANDLING='4' must be a whole number "
                                 "from 0 to 3");
  CHECK_EQ(v, 77); /* outputs set only on success */
  unsetenv(H);
  p2pk_param_reset();
}

T_MAIN(T_CASE(every_number_setting_has_a_range), T_CASE(every_range_is_held_at_both_ends),
       T_CASE(out_of_range_values_are_refused_with_their_range),
       T_CASE(library_calls_refuse_out_of_range_settings), T_CASE(ranges_match_the_readers_limits),
       T_CASE(python_variables_are_settings), T_CASE(setting_int_default_and_set),
       T_CASE(setting_int_refused))
