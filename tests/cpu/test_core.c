/* SPDX-License-Identifier: BSD-3-Clause */
/* core: status names, size parsing, the settings registry, log subsystem
 * parsing, the JSON writer. */
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/json.h"
#include "core/log.h"
#include "core/param.h"
#include "core/text.h"
#include "p2pkit.h"
#include "test.h"

TEST(strerror_names_every_status) {
  for (int s = 0; s < P2PKIT_STATUS_COUNT; s++) {
    const char *n = p2pkit_strerror((p2pkit_status_t)s);
    CHECK(n != NULL && n[0] != '\0');
    CHECK(strcmp(n, "unknown status") != 0);
  }
  CHECK_STR(p2pkit_strerror((p2pkit_status_t)999), "unknown status");
  CHECK_STR(p2pkit_strerror((p2pkit_status_t)-1), "unknown status");
  CHECK_EQ(p2pkit_version(), P2PKIT_VERSION_CODE);
}

TEST(parse_size_accepts_suffixes) {
  size_t v = 0;
  CHECK_EQ(p2pk_parse_size("0", &v), 0);
  CHECK_EQ(v, 0);
  CHECK_EQ(p2pk_parse_size("4097", &v), 0);
  CHECK_EQ(v, 4097);
  CHECK_EQ(p2pk_parse_size("4K", &v), 0);
  CHECK_EQ(v, 4096);
  CHECK_EQ(p2pk_parse_size("256M", &v), 0);
  CHECK_EQ(v, 256u << 20);
  CHECK_EQ(p2pk_parse_size("1G", &v), 0);
  CHECK_EQ(v, 1u << 30);
  CHECK_EQ(p2pk_parse_size("8MiB", &v), 0);
  CHECK_EQ(v, 8u << 20);
  CHECK_EQ(p2pk_parse_size("2gb", &v), 0);
  CHECK_EQ(v, 2ull << 30);
  CHECK_EQ(p2pk_parse_size("16B", &v), 0);
  CHECK_EQ(v, 16);
}

TEST(parse_size_rejects_garbage) {
  size_t v = 12345;
  const char *bad[] = {"", "-1", "+3", "abc", "12x", "1.5G", "4KK", "99999999999999999999",
                       "20000000000000000G", " "};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    if (p2pk_parse_size(bad[i], &v) != -1) T_FAIL("accepted '%s'", bad[i]);
  }
  CHECK_EQ(v, 12345); /* untouched on failure */
}

TEST(settings_come_from_env_or_default) {
  unsetenv("P2PKIT_STAGE_DEPTH");
  unsetenv("P2PKIT_STAGE_CHUNK");
  p2pk_param_reset();
  CHECK_EQ(p2pk_param_is_set("P2PKIT_STAGE_DEPTH"), 0);
  CHECK_EQ(p2pk_param_int("P2PKIT_STAGE_DEPTH"), 4);
  CHECK_EQ(p2pk_param_size("P2PKIT_STAGE_CHUNK"), 8u << 20);
  setenv("P2PKIT_STAGE_DEPTH", "3", 1);
  setenv("P2PKIT_STAGE_CHUNK", "2M", 1);
  /* Read once: a change after the first read is not seen until a reset. */
  CHECK_EQ(p2pk_param_int("P2PKIT_STAGE_DEPTH"), 4);
  p2pk_param_reset();
  CHECK_EQ(p2pk_param_is_set("P2PKIT_STAGE_DEPTH"), 1);
  CHECK_EQ(p2pk_param_int("P2PKIT_STAGE_DEPTH"), 3);
  CHECK_EQ(p2pk_param_size("P2PKIT_STAGE_CHUNK"), 2u << 20);
  setenv("P2PKIT_STAGE_DEPTH", "lots", 1);
  p2pk_param_reset();
  CHECK_EQ(p2pk_param_int("P2PKIT_STAGE_DEPTH"), 4); /* not a number: the default */
  unsetenv("P2PKIT_STAGE_DEPTH");
  unsetenv("P2PKIT_STAGE_CHUNK");
  p2pk_param_reset();
}

TEST(registry_entries_are_complete_and_unique) {
  size_t n = p2pk_param_count();
  CHECK(n >= 10);
  for (size_t i = 0; i < n; i++) {
    const p2pk_param_def *d = p2pk_param_at(i);
    CHECK(d && d->name && strncmp(d->name, "P2PKIT_", 7) == 0);
    CHECK(d->def != NULL);
    CHECK(d->help && strlen(d->help) > 10);
    for (size_t j = 0; j < i; j++)
      if (strcmp(p2pk_param_at(j)->name, d->name) == 0) T_FAIL("%s listed twice", d->name);
  }
  CHECK(p2pk_param_at(n) == NULL);
}

/* Each default parses as its kind, and p2pk_param_check refuses a value set
 * in the environment that does not, naming it; unset and string settings
 * never fail it. */
TEST(settings_check_refuses_malformed_values) {
  for (size_t i = 0; i < p2pk_param_count(); i++) {
    const p2pk_param_def *d = p2pk_param_at(i);
    CHECK(d->kind == P2PK_PARAM_STR || d->kind == P2PK_PARAM_INT || d->kind == P2PK_PARAM_SIZE);
    if (d->kind == P2PK_PARAM_INT) {
      char *end = NULL;
      (void)strtoll(d->def, &end, 10);
      if (end == d->def || *end) T_FAIL("%s: default '%s' is not a whole number", d->name, d->def);
    } else if (d->kind == P2PK_PARAM_SIZE) {
      size_t b = 0;
      if (p2pk_parse_size(d->def, &b) != 0) T_FAIL("%s: default '%s' is not a size", d->name, d->def);
    }
  }
  p2pk_param_reset();
  CHECK_EQ(p2pk_param_check(), P2PKIT_SUCCESS);
  static const struct { const char *name, *value, *want; } bad[] = {
      {"P2PKIT_P2P_DISABLE", "yes", "P2PKIT_P2P_DISABLE='yes' must be a whole number from 0 to 1"},
      {"P2PKIT_TIMEOUT", "abc", "P2PKIT_TIMEOUT='abc' must be a whole number from 1 to 86400"},
      {"P2PKIT_TIMEOUT", "30s", "P2PKIT_TIMEOUT='30s' must be a whole number from 1 to 86400"},
      {"P2PKIT_BUFFER_SIZE", "64Q", "P2PKIT_BUFFER_SIZE='64Q' is not a size (bytes, with K, M, G or T): it must be a size from 0 to 16G"},
      {"P2PKIT_CE_ALLREDUCE_MIN", "-1", "P2PKIT_CE_ALLREDUCE_MIN='-1' is not a size"},
      {"P2PKIT_PDL", "on", "P2PKIT_PDL='on' must be a whole number from 0 to 1"},
      /* Values the library's readers refuse (or misread) are refused here,
       * for `p2pkit env` and every entry point alike. */
      {"P2PKIT_LAUNCH_SPIN_US", "-1", "P2PKIT_LAUNCH_SPIN_US='-1' must be a whole number from 0 to 3600000000"},
      {"P2PKIT_P2P_DISABLE", "-1", "P2PKIT_P2P_DISABLE='-1' must be a whole number from 0 to 1"},
      {"P2PKIT_STAGE_DEPTH", "-1", "P2PKIT_STAGE_DEPTH='-1' must be a whole number from 2 to 16"},
      {"P2PKIT_STAGE_CHUNK", "1K", "P2PKIT_STAGE_CHUNK='1K' is out of range: it must be a size from 4K to 1G"},
      {"P2PKIT_P2P_LEVEL", "garbage", "P2PKIT_P2P_LEVEL='garbage' is not one of LOC, NVL, PIX, PXB, PHB, SYS"},
      {"P2PKIT_SM_COPY_CONFIG", "garbage", "P2PKIT_SM_COPY_CONFIG='garbage': 'garbage' is not key=value"},
      {"P2PKIT_ALGO", "ring", "P2PKIT_ALGO='ring' is not one of oneshot, twoshot, staged"},
      {"P2PKIT_PROTO", "LL64", "P2PKIT_PROTO='LL64' is not one of ll, ll128, simple"},
      {"P2PKIT_MAX_BLOCKS", "-3", "P2PKIT_MAX_BLOCKS='-3' must be a whole number from 0 to 1024"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv(bad[i].name, bad[i].value, 1);
    p2pk_param_reset();
    CHECK_EQ(p2pk_param_check(), P2PKIT_ERR_INVALID_ARGUMENT);
    if (!strstr(p2pkit_last_error(), bad[i].want)) T_FAIL("%s: said '%s'", bad[i].name, p2pkit_last_error());
    unsetenv(bad[i].name);
  }
  setenv("P2PKIT_P2P_DISABLE", "1", 1);
  setenv("P2PKIT_BUFFER_SIZE", "64M", 1);
  setenv("P2PKIT_P2P_LEVEL", "pxb", 1); /* words in any case */
  setenv("P2PKIT_ALGO", "", 1);         /* empty: the default */
  setenv("P2PKIT_SM_COPY_CONFIG", "kind=tma,bps=1", 1);
  setenv("P2PKIT_TOPO_FILE", "anything at all", 1); /* a path: checked where it is opened */
  p2pk_param_reset();
  CHECK_EQ(p2pk_param_check(), P2PKIT_SUCCESS);
  unsetenv("P2PKIT_P2P_DISABLE");
  unsetenv("P2PKIT_BUFFER_SIZE");
  unsetenv("P2PKIT_P2P_LEVEL");
  unsetenv("P2PKIT_ALGO");
  unsetenv("P2PKIT_SM_COPY_CONFIG");
  unsetenv("P2PKIT_TOPO_FILE");
  p2pk_param_reset();
}

/* A value the check refuses reads as the default, never as itself: a launch
 * thread given P2PKIT_LAUNCH_SPIN_US=-1 spins 1 ms, not for ever. Entry
 * points refuse such a value first; a reader that runs before any check is
 * told, once per setting, on the log. */
TEST(refused_values_read_as_the_default) {
  char errpath[] = "/tmp/p2pkit_stderrXXXXXX";
  const int efd = mkstemp(errpath), saved = dup(2);
  fflush(stderr);
  dup2(efd, 2);
  setenv("P2PKIT_LAUNCH_SPIN_US", "-1", 1);
  setenv("P2PKIT_STAGE_CHUNK", "1K", 1);
  setenv("P2PKIT_TIMEOUT", "0", 1);
  p2pk_param_reset();
  CHECK_EQ(p2pk_param_int("P2PKIT_LAUNCH_SPIN_US"), 1000);
  CHECK_EQ(p2pk_param_int("P2PKIT_LAUNCH_SPIN_US"), 1000);
  CHECK_EQ(p2pk_param_size("P2PKIT_STAGE_CHUNK"), 8u << 20);
  const char *tdef = NULL;
  for (size_t i = 0; i < p2pk_param_count(); i++)
    if (strcmp(p2pk_param_at(i)->name, "P2PKIT_TIMEOUT") == 0) tdef = p2pk_param_at(i)->def;
  CHECK_EQ(p2pk_param_int("P2PKIT_TIMEOUT"), tdef ? strtoll(tdef, NULL, 10) : -1);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  char log[4096] = "";
  const ssize_t got = pread(efd, log, sizeof log - 1, 0);
  log[got > 0 ? got : 0] = '\0';
  close(efd);
  unlink(errpath);
  const char *w = "p2pkit WARN P2PKIT_LAUNCH_SPIN_US='-1' must be a whole number from 0 to "
                  "3600000000; read as its default, 1000\n";
  CHECK(strstr(log, w) != NULL);
  CHECK(strstr(strstr(log, w) ? strstr(log, w) + 1 : log, w) == NULL); /* once */
  CHECK(strstr(log, "P2PKIT_STAGE_CHUNK='1K' is out of range: it must be a size from 4K to 1G; "
                    "read as its default, 8M") != NULL);
  setenv("P2PKIT_LAUNCH_SPIN_US", "0", 1);
  p2pk_param_reset();
  CHECK_EQ(p2pk_param_int("P2PKIT_LAUNCH_SPIN_US"), 0);
  unsetenv("P2PKIT_LAUNCH_SPIN_US");
  unsetenv("P2PKIT_STAGE_CHUNK");
  unsetenv("P2PKIT_TIMEOUT");
  p2pk_param_reset();
}

/* A P2PKIT_* name that is not a setting is reported, with the setting it is
 * most likely a typo of; settings and the scripts' own variables are not. */
TEST(unknown_setting_names_are_reported) {
  char list[512];
  CHECK_EQ(p2pk_param_unknown(list, sizeof list), 0);
  CHECK_STR(list, "");
  setenv("P2PKIT_P2P_DISABLE", "1", 1);
  setenv("P2PKIT_LIB", "/x/libp2pkit.so", 1);
  setenv("P2PKIT_P2P_DISABLED", "1", 1);
  setenv("P2PKIT_TIMEOT", "5", 1);
  setenv("P2PKIT_SOMETHING_ELSE", "1", 1);
  CHECK_EQ(p2pk_param_unknown(list, sizeof list), 3);
  CHECK(strstr(list, "P2PKIT_P2P_DISABLED (did you mean P2PKIT_P2P_DISABLE?)") != NULL);
  CHECK(strstr(list, "P2PKIT_TIMEOT (did you mean P2PKIT_TIMEOUT?)") != NULL);
  CHECK(strstr(list, "P2PKIT_SOMETHING_ELSE") != NULL);
  CHECK(strstr(list, "P2PKIT_SOMETHING_ELSE (") == NULL); /* nothing close */
  CHECK(strstr(list, "P2PKIT_LIB") == NULL);
  /* A short buffer is cut, never overrun; the count stays whole. */
  char tiny[8];
  CHECK_EQ(p2pk_param_unknown(tiny, sizeof tiny), 3);
  CHECK_EQ(strlen(tiny), 7u);
  CHECK_EQ(p2pk_param_unknown(NULL, 0), 3);
  unsetenv("P2PKIT_P2P_DISABLE");
  unsetenv("P2PKIT_LIB");
  unsetenv("P2PKIT_P2P_DISABLED");
  unsetenv("P2PKIT_TIMEOT");
  unsetenv("P2PKIT_SOMETHING_ELSE");
  CHECK_EQ(p2pk_param_unknown(list, sizeof list), 0);
  p2pk_param_reset();
}

TEST(log_subsystems_parse) {
  CHECK_EQ(p2pk_log_parse_subsys("ALL"), P2PK_LOG_ALL);
  CHECK_EQ(p2pk_log_parse_subsys("TOPO,xfer"), P2PK_LOG_TOPO | P2PK_LOG_XFER);
  CHECK_EQ(p2pk_log_parse_subsys("^COLL"), P2PK_LOG_ALL & ~P2PK_LOG_COLL);
  CHECK_EQ(p2pk_log_parse_subsys("TOPO,NOPE"), -1);
  /* The registry checks P2PKIT_DEBUG_SUBSYS against its words (param.c,
   * which logs nothing); the log parses it with its own table: the two
   * name the same subsystems, each one a bit of its own. */
  const p2pk_param_def *d = p2pk_param_def_of("P2PKIT_DEBUG_SUBSYS");
  CHECK(d->list && d->words);
  int seen = 0, n = 0;
  for (const char *w = d->words; w && *w; n++) {
    char word[32];
    const size_t len = strcspn(w, "|");
    snprintf(word, sizeof word, "%.*s", (int)len, w);
    const int bit = p2pk_log_parse_subsys(word);
    if (bit <= 0) T_FAIL("the registry's subsystem %s is not the log's", word);
    if (bit > 0 && bit != P2PK_LOG_ALL) {
      CHECK_EQ(seen & bit, 0);
      seen |= bit;
    }
    char why[256];
    CHECK_EQ(p2pk_param_valid(d, word, why, sizeof why), 0);
    w += len + (w[len] == '|');
  }
  CHECK_EQ(n, 8);
  CHECK_EQ(seen, P2PK_LOG_INIT | P2PK_LOG_TOPO | P2PK_LOG_XFER | P2PK_LOG_COLL | P2PK_LOG_BOOT |
                     P2PK_LOG_BENCH | P2PK_LOG_ENV);
  char why[256];
  CHECK_EQ(p2pk_param_valid(d, "^coll,Topo", why, sizeof why), 0);
  CHECK_EQ(p2pk_param_valid(d, "TOPO,NOPE", why, sizeof why), -1);
  CHECK(strstr(why, "P2PKIT_DEBUG_SUBSYS='TOPO,NOPE': not a list of INIT, TOPO, XFER, COLL, BOOT, "
                    "BENCH, ENV, ALL (comma separated, a leading ^ excludes)") != NULL);
}

TEST(log_level_and_file) {
  char path[] = "/tmp/p2pkit_logXXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  setenv("P2PKIT_DEBUG", "INFO", 1);
  setenv("P2PKIT_DEBUG_SUBSYS", "TOPO", 1);
  setenv("P2PKIT_DEBUG_FILE", path, 1);
  p2pk_param_reset();
  p2pk_log_reset();
  P2PK_INFO(P2PK_LOG_TOPO, "topo line %d", 42);
  P2PK_INFO(P2PK_LOG_COLL, "coll line filtered");
  P2PK_TRACE(P2PK_LOG_TOPO, "trace line filtered");
  P2PK_WARN("warn line %s", "always");
  p2pk_log_reset();
  FILE *f = fopen(path, "r");
  char buf[4096] = "";
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  buf[n] = '\0';
  if (f) fclose(f);
  CHECK(strstr(buf, "p2pkit INFO topo line 42") != NULL);
  CHECK(strstr(buf, "p2pkit WARN warn line always") != NULL);
  CHECK(strstr(buf, "coll line filtered") == NULL);
  CHECK(strstr(buf, "trace line filtered") == NULL);
  unlink(path);
  close(fd);
  unsetenv("P2PKIT_DEBUG");
  unsetenv("P2PKIT_DEBUG_SUBSYS");
  unsetenv("P2PKIT_DEBUG_FILE");
  p2pk_param_reset();
  p2pk_log_reset();
}

/* --- P2PKIT_DEBUG_FILE: exactly the file named, or a word on stderr ---- */

static char log_dir[] = "/tmp/p2pkit_logdirXXXXXX";

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

static void remove_log_dir(void) { nftw(log_dir, remove_one, 16, FTW_DEPTH | FTW_PHYS); }

/* The cases' directory, made once, removed at exit. */
static void need_log_dir(void) {
  static int made;
  if (made++) return;
  if (!mkdtemp(log_dir)) T_FAIL("mkdtemp: cannot make %s", log_dir);
  else atexit(remove_log_dir);
}

/* Logs one WARN line with P2PKIT_DEBUG_FILE=pattern; what went to stderr
 * lands in `err`. */
static void log_with_file(const char *pattern, char *err, size_t len) {
  need_log_dir();
  char errpath[sizeof log_dir + 16];
  snprintf(errpath, sizeof errpath, "%s/stderr", log_dir);
  fflush(stderr);
  int saved = dup(2), fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  dup2(fd, 2);
  close(fd);
  setenv("P2PKIT_DEBUG_FILE", pattern, 1);
  p2pk_param_reset();
  p2pk_log_reset();
  P2PK_WARN("a line for the log file");
  p2pk_log_reset();
  unsetenv("P2PKIT_DEBUG_FILE");
  p2pk_param_reset();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  FILE *f = fopen(errpath, "r");
  size_t n = f ? fread(err, 1, len - 1, f) : 0;
  err[n] = '\0';
  if (f) fclose(f);
}

static size_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (size_t)st.st_size : 0;
}

TEST(debug_file_long_path_is_used_whole) {
  /* A path of ~600 bytes: written there, not cut short somewhere else. */
  char path[1024], err[4096];
  need_log_dir();
  int o = snprintf(path, sizeof path, "%s", log_dir);
  for (int d = 0; d < 3; d++) {
    o += snprintf(path + o, sizeof path - (size_t)o, "/%0180d", d);
    CHECK_EQ(mkdir(path, 0700), 0);
  }
  snprintf(path + o, sizeof path - (size_t)o, "/p2pkit.log");
  CHECK(strlen(path) > 560);
  log_with_file(path, err, sizeof err);
  CHECK(file_size(path) > 0);
  if (err[0]) T_FAIL("stderr: %s", err);
  /* Past PATH_MAX the setting is refused, naming it. */
  char huge[PATH_MAX + 16];
  memset(huge, 'a', sizeof huge - 1);
  huge[0] = '/';
  huge[sizeof huge - 1] = '\0';
  setenv("P2PKIT_DEBUG_FILE", huge, 1);
  p2pk_param_reset();
  CHECK_EQ(p2pk_param_check(), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "P2PKIT_DEBUG_FILE=") != NULL);
  CHECK(strstr(p2pkit_last_error(), "longer than") != NULL);
  unsetenv("P2PKIT_DEBUG_FILE");
  p2pk_param_reset();
}

TEST(debug_file_that_cannot_be_opened_says_so) {
  char err[4096];
  log_with_file("/nonexistent-p2pkit-dir/x.log", err, sizeof err);
  CHECK(strstr(err, "P2PKIT_DEBUG_FILE='/nonexistent-p2pkit-dir/x.log': cannot open") != NULL);
  CHECK(strstr(err, "No such file or directory") != NULL);
  CHECK(strstr(err, "a line for the log file") != NULL); /* the line itself still shows */
}

TEST(debug_file_is_private_and_never_a_link) {
  char path[256], target[256], lnk[256], hard[256], err[4096];
  need_log_dir();
  snprintf(path, sizeof path, "%s/new.log", log_dir);
  log_with_file(path, err, sizeof err);
  struct stat st;
  CHECK_EQ(stat(path, &st), 0);
  CHECK_EQ(st.st_mode & 0777, 0600);
  /* A symbolic link planted where the log goes: the file it names stays untouched. */
  snprintf(target, sizeof target, "%s/target", log_dir);
  snprintf(lnk, sizeof lnk, "%s/link.log", log_dir);
  int fd = open(target, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  CHECK(fd >= 0);
  close(fd);
  CHECK_EQ(symlink(target, lnk), 0);
  log_with_file(lnk, err, sizeof err);
  CHECK_EQ(file_size(target), 0);
  CHECK(strstr(err, "symbolic link") != NULL);
  /* Nor a hard link to another file. */
  snprintf(hard, sizeof hard, "%s/hard.log", log_dir);
  CHECK_EQ(link(target, hard), 0);
  log_with_file(hard, err, sizeof err);
  CHECK_EQ(file_size(target), 0);
  CHECK(strstr(err, "hard links") != NULL);
}

/* A new file, `name` in the cases' directory, of this mode (umask aside). */
static void make_file(const char *name, mode_t mode, char *path, size_t len) {
  need_log_dir();
  snprintf(path, len, "%s/%s", log_dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0 || fchmod(fd, mode) != 0) T_FAIL("cannot make %s", path);
  if (fd >= 0) close(fd);
}

/* `err` says the file was refused for `why`, and the line went to stderr. */
static void want_refused(const char *err, const char *why) {
  if (!strstr(err, why) || !strstr(err, "logging to stderr instead") ||
      !strstr(err, "a line for the log file"))
    T_FAIL("wanted '%s' and the line on stderr; stderr: %s", why, err);
}

/* An existing file is appended to only when it is this user's, private and
 * a regular file: one another user planted (0666, so that they read our
 * log), or one of ours that others may read, gets nothing, and the log goes
 * to stderr with one line saying why. */
TEST(debug_file_planted_or_shared_is_refused) {
  char path[256], err[4096];
  make_file("ours.log", 0600, path, sizeof path);
  log_with_file(path, err, sizeof err);
  CHECK(file_size(path) > 0); /* ours and private: appended to */
  if (err[0]) T_FAIL("stderr: %s", err);
  make_file("shared.log", 0666, path, sizeof path);
  log_with_file(path, err, sizeof err);
  CHECK_EQ(file_size(path), 0);
  want_refused(err, "may be read or written by others (mode 0666)");
  make_file("group.log", 0640, path, sizeof path);
  log_with_file(path, err, sizeof err);
  CHECK_EQ(file_size(path), 0);
  want_refused(err, "(mode 0640)");
  /* Another user's: only root can make one here (chown). */
  make_file("planted.log", 0666, path, sizeof path);
  if (geteuid() != 0) {
    printf("  (not root: the case of another user's file needs chown, not run)\n");
  } else {
    CHECK_EQ(chown(path, 65534, 65534), 0);
    log_with_file(path, err, sizeof err);
    CHECK_EQ(file_size(path), 0);
    want_refused(err, "belongs to another user (uid 65534)");
  }
  /* Not a file at all. */
  snprintf(path, sizeof path, "%s/dir.log", log_dir);
  CHECK_EQ(mkdir(path, 0700), 0);
  log_with_file(path, err, sizeof err);
  want_refused(err, "dir.log");
}

/* A FIFO planted at the path never blocks the thread that logs (and every
 * other thread behind the log's lock): without a reader the open would wait
 * for one, with one the writes would wait once it stops reading. Refused at
 * once either way; each case runs in a child given 10 s. */
TEST(debug_file_fifo_never_blocks) {
  char path[256];
  need_log_dir();
  snprintf(path, sizeof path, "%s/fifo.log", log_dir);
  CHECK_EQ(mkfifo(path, 0600), 0);
  for (int reader = 0; reader < 2; reader++) {
    const int rfd = reader ? open(path, O_RDONLY | O_NONBLOCK) : -1;
    fflush(NULL);
    const pid_t pid = fork();
    if (pid == 0) {
      char err[4096];
      log_with_file(path, err, sizeof err);
      _exit(strstr(err, "FIFO") && strstr(err, "logging to stderr instead") ? 0 : 3);
    }
    int status = 0, done = 0;
    for (int ms = 0; pid > 0 && ms < 10000 && !done; ms += 10)
      if (!(done = waitpid(pid, &status, WNOHANG) == pid)) usleep(10000);
    if (pid > 0 && !done) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      T_FAIL("logging to a FIFO %s a reader blocked for 10 s", reader ? "with" : "without");
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      T_FAIL("logging to a FIFO %s a reader was not refused (child status %d)",
             reader ? "with" : "without", status);
    }
    if (rfd >= 0) {
      char buf[256];
      CHECK(read(rfd, buf, sizeof buf) <= 0); /* nothing reached the reader */
      close(rfd);
    }
  }
}

/* Text from files, logs and peers loses what a terminal would act on. */
TEST(text_made_printable) {
  static const struct { const char *in, *out; int replaced; } cases[] = {
      {"plain ascii", "plain ascii", 0},
      {"a\x1b[31mb\x1b]0;t\x07", "a?[31mb?]0;t?", 3},
      {"tab\there\nnl\r\x7f", "tab here?nl??", 3},
      {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 0},
      {"c1 \xc2\x9b" "2J", "c1 ??2J", 2},            /* CSI as UTF-8 */
      {"bad \xff\xfe", "bad ??", 2},
      {"overlong \xc0\xaf", "overlong ??", 2},
      {"surrogate \xed\xa0\x80", "surrogate ???", 3},
      {"past \xf4\x90\x80\x80", "past ????", 4},
      {"cut \xe2\x82", "cut ??", 2},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char buf[64];
    snprintf(buf, sizeof buf, "%s", cases[i].in);
    CHECK_EQ(p2pk_text_printable(buf), cases[i].replaced);
    CHECK_STR(buf, cases[i].out);
  }
}

TEST(json_writer_quotes_and_nests) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  p2pk_json j;
  p2pk_json_init(&j, f);
  p2pk_json_obj(&j, NULL);
  p2pk_json_str(&j, "s", "a\"b\\c\n\x01");
  p2pk_json_int(&j, "i", -7);
  p2pk_json_num(&j, "x", 0.5);
  p2pk_json_num(&j, "nan", NAN);
  p2pk_json_bool(&j, "t", 1);
  p2pk_json_arr(&j, "empty");
  p2pk_json_arr_end(&j);
  p2pk_json_arr(&j, "a");
  p2pk_json_int(&j, NULL, 1);
  p2pk_json_str(&j, NULL, NULL);
  p2pk_json_arr_end(&j);
  p2pk_json_obj_end(&j);
  p2pk_json_finish(&j);
  fclose(f);
  const char *want =
      "{\n  \"s\": \"a\\\"b\\\\c\\n\\u0001\",\n  \"i\": -7,\n  \"x\": 0.5,\n  \"nan\": null,\n"
      "  \"t\": true,\n  \"empty\": [],\n  \"a\": [\n    1,\n    null\n  ]\n}\n";
  CHECK_STR(buf, want);
  free(buf);
}

T_MAIN(T_CASE(strerror_names_every_status), T_CASE(parse_size_accepts_suffixes),
       T_CASE(parse_size_rejects_garbage), T_CASE(settings_come_from_env_or_default),
       T_CASE(registry_entries_are_complete_and_unique),
       T_CASE(settings_check_refuses_malformed_values),
       T_CASE(refused_values_read_as_the_default), T_CASE(unknown_setting_names_are_reported),
       T_CASE(log_subsystems_parse),
       T_CASE(log_level_and_file), T_CASE(debug_file_long_path_is_used_whole),
       T_CASE(debug_file_that_cannot_be_opened_says_so),
       T_CASE(debug_file_is_private_and_never_a_link),
       T_CASE(debug_file_planted_or_shared_is_refused), T_CASE(debug_file_fifo_never_blocks),
       T_CASE(text_made_printable),
       T_CASE(json_writer_quotes_and_nests))
