/* SPDX-License-Identifier: BSD-3-Clause */
#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/param.h"

int p2pk_log_level_cached = -1;
static int log_subsys = P2PK_LOG_ALL;
static FILE *log_file;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char pending[256]; /* a word on P2PKIT_DEBUG or _SUBSYS for the first line logged */
static const struct { const char *name; int bit; } subsys_names[] = {
    {"INIT", P2PK_LOG_INIT}, {"TOPO", P2PK_LOG_TOPO}, {"XFER", P2PK_LOG_XFER},
    {"COLL", P2PK_LOG_COLL}, {"BOOT", P2PK_LOG_BOOT}, {"BENCH", P2PK_LOG_BENCH},
    {"ENV", P2PK_LOG_ENV},   {"ALL", P2PK_LOG_ALL},
};

int p2pk_log_parse_subsys(const char *list) {
  int invert = 0, mask = 0;
  if (list[0] == '^') {
    invert = 1;
    list++;
  }
  char buf[256];
  snprintf(buf, sizeof buf, "%s", list);
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    size_t i, n = sizeof subsys_names / sizeof subsys_names[0];
    for (i = 0; i < n; i++)
      if (strcasecmp(tok, subsys_names[i].name) == 0) break;
    if (i == n) return -1;
    mask |= subsys_names[i].bit;
  }
  return invert ? (P2PK_LOG_ALL & ~mask) : mask;
}

/* Why the file open on `fd` (named `path`) is not one p2pkit appends its
 * log to, or NULL when it is: a regular file (a FIFO would block every
 * thread that logs, a device is no log), this user's (another's file, made
 * 0666 for us to write into, is theirs to read), that no one else may read
 * or write (one who can may already hold it open: fixing the mode now
 * would not stop them), with no other name (a hard link planted to make us
 * write elsewhere). */
static const char *refusal(int fd, const char *path, char *why, size_t len) {
  struct stat st;
  if (fstat(fd, &st) != 0)
    snprintf(why, len, "cannot inspect %s: %s", path, strerror(errno));
  else if (!S_ISREG(st.st_mode))
    snprintf(why, len, "%s is not a regular file (a %s); p2pkit logs only to a file", path,
             S_ISFIFO(st.st_mode) ? "FIFO" : S_ISDIR(st.st_mode) ? "directory"
             : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "device" : "socket or special file");
  else if (st.st_uid != geteuid())
    snprintf(why, len, "%s belongs to another user (uid %u); p2pkit does not append to it",
             path, (unsigned)st.st_uid);
  else if (st.st_nlink > 1)
    snprintf(why, len, "%s has other names (hard links); p2pkit does not append to it", path);
  else if (st.st_mode & 077)
    snprintf(why, len, "%s may be read or written by others (mode %04o); p2pkit's log is "
             "private: chmod 600 it, or remove it", path, (unsigned)(st.st_mode & 07777));
  else
    return NULL;
  return why;
}

/* The log file, opened to append without ever blocking: created new (0600,
 * O_EXCL), or an existing file refusal() accepts; never through a symbolic
 * link. NULL with the reason in `why`. */
static FILE *open_log_file(const char *pattern, char *why, size_t len) {
  char path[PATH_MAX];
  if (p2pk_param_path(pattern, path, sizeof path) != 0) {
    snprintf(why, len, "the path is longer than %d bytes once %%h and %%p are expanded", PATH_MAX - 1);
    return NULL;
  }
  const int flags = O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
  int fd = open(path, flags | O_CREAT | O_EXCL, 0600);
  if (fd < 0 && errno == EEXIST) fd = open(path, flags); /* O_NONBLOCK: a FIFO never waits */
  if (fd < 0) {
    snprintf(why, len, "cannot open %s: %s", path,
             errno == ELOOP ? "it is a symbolic link, which p2pkit does not follow"
             : errno == ENXIO ? "it is a FIFO or socket (p2pkit logs only to a file)"
                              : strerror(errno));
    return NULL;
  }
  FILE *f = NULL;
  if (!refusal(fd, path, why, len) &&
      (fcntl(fd, F_SETFL, O_APPEND) != 0 || !(f = fdopen(fd, "a")))) /* blocking again */
    snprintf(why, len, "cannot open %s: %s", path, strerror(errno));
  if (!f) {
    close(fd);
    return NULL;
  }
  setvbuf(f, NULL, _IOLBF, 0);
  return f;
}

/* Caller holds log_lock. */
static void log_init_locked(void) {
  if (p2pk_log_level_cached >= 0) return;
  const char *lvl = p2pk_param_str("P2PKIT_DEBUG");
  int level = P2PK_LEVEL_WARN;
  if (strcasecmp(lvl, "NONE") == 0) level = P2PK_LEVEL_NONE;
  else if (strcasecmp(lvl, "INFO") == 0) level = P2PK_LEVEL_INFO;
  else if (strcasecmp(lvl, "TRACE") == 0) level = P2PK_LEVEL_TRACE;
  int mask = p2pk_log_parse_subsys(p2pk_param_str("P2PKIT_DEBUG_SUBSYS"));
  log_subsys = mask < 0 ? P2PK_LOG_ALL : mask;
  const char *file = p2pk_param_str("P2PKIT_DEBUG_FILE");
  char why[PATH_MAX + 128];
  log_file = NULL;
  if (file[0] && !(log_file = open_log_file(file, why, sizeof why)))
    fprintf(stderr, "p2pkit WARN P2PKIT_DEBUG_FILE='%.300s': %s; logging to stderr instead\n", file, why);
  p2pk_log_level_cached = level;
  /* Said with the first line logged: an entry point refuses these values
   * itself (the settings registry), and its error must stay one line. */
  pending[0] = '\0';
  if (strcasecmp(lvl, "WARN") != 0 && level == P2PK_LEVEL_WARN)
    snprintf(pending, sizeof pending, "p2pkit WARN P2PKIT_DEBUG=%.64s is not one of NONE, WARN, "
             "INFO, TRACE; using WARN\n", lvl);
  if (mask < 0)
    snprintf(pending + strlen(pending), sizeof pending - strlen(pending),
             "p2pkit WARN P2PKIT_DEBUG_SUBSYS has an unknown name; logging ALL\n");
}

void p2pk_log_reset(void) {
  pthread_mutex_lock(&log_lock);
  if (log_file) fclose(log_file);
  log_file = NULL;
  p2pk_log_level_cached = -1;
  pending[0] = '\0';
  pthread_mutex_unlock(&log_lock);
}

int p2pk_log_enabled(int level, int subsys) {
  pthread_mutex_lock(&log_lock);
  log_init_locked();
  int on = level <= p2pk_log_level_cached && (level == P2PK_LEVEL_WARN || (subsys & log_subsys));
  pthread_mutex_unlock(&log_lock);
  return on;
}

void p2pk_log(int level, int subsys, const char *file, int line, const char *fmt, ...) {
  if (!p2pk_log_enabled(level, subsys)) return;
  static const char *names[] = {"NONE", "WARN", "INFO", "TRACE"};
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  char *dot = strchr(host, '.');
  if (dot) *dot = '\0';
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&log_lock);
  FILE *out = log_file ? log_file : stderr;
  if (pending[0]) fputs(pending, out);
  pending[0] = '\0';
  if (level == P2PK_LEVEL_TRACE) {
    const char *base = strrchr(file, '/');
    fprintf(out, "%s:%d:%ld p2pkit TRACE %s:%d %s\n", host, (int)getpid(),
            (long)syscall(SYS_gettid), base ? base + 1 : file, line, msg);
  } else {
    fprintf(out, "%s:%d:%ld p2pkit %s %s\n", host, (int)getpid(), (long)syscall(SYS_gettid),
            names[level], msg);
  }
  fflush(out);
  pthread_mutex_unlock(&log_lock);
}
