/* SPDX-License-Identifier: BSD-3-Clause */
/* The desync report's files: P2PKIT_TRACE_DIR checked and opened, each
 * dump created there whole or not at all, and what a dump says about the
 * processes of this machine. Assumes a hostile local user: the directory
 * must be this user's (not world-writable unless sticky), the default one
 * is made 0700 and never followed through a symbolic link, every file is
 * new (O_EXCL), 0600, never a link, never a FIFO that would block. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coll/call/trace.h"
#include "core/param.h"

/* The directory as a descriptor: 0 or more; -1 with why; -2 when dumps are
 * off (P2PKIT_TRACE_DIR=off). Its name into path. */
int p2pk_trace_dir_open(char *path, size_t plen, char *why, size_t wlen) {
  const char *v = p2pk_param_str("P2PKIT_TRACE_DIR");
  if (strcmp(v, "off") == 0) return -2;
  int fd = -1;
  if (!v[0]) {
    snprintf(path, plen, "/tmp/p2pkit-trace-%u", (unsigned)geteuid());
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
      snprintf(why, wlen, "cannot make %s: %s", path, strerror(errno));
      return -1;
    }
    fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  } else {
    snprintf(path, plen, "%s", v);
    fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && mkdir(path, 0700) == 0) /* one level, the user's name */
      fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    snprintf(why, wlen, "cannot open the directory %s: %s", path,
             errno == ELOOP ? "it is a symbolic link" : strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  const char *bad = st.st_uid != geteuid() ? "belongs to another user"
                    : (st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)
                        ? "is writable by every user and not sticky"
                        : NULL;
  if (bad) {
    snprintf(why, wlen, "the directory %s %s (uid %u, mode %03o): p2pkit writes its reports only "
             "into a directory of this user", path, bad, (unsigned)st.st_uid,
             (unsigned)(st.st_mode & 07777));
    close(fd);
    return -1;
  }
  return fd;
}

int p2pk_trace_file_write(int dirfd, const char *name, const char *buf, size_t len, char *why,
                          size_t wlen) {
  const int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                        0600);
  if (fd < 0) {
    snprintf(why, wlen, "cannot create %s: %s", name, strerror(errno));
    return -1;
  }
  struct stat st;
  int err = fstat(fd, &st) != 0 ? errno : !S_ISREG(st.st_mode) ? EINVAL : 0;
  for (size_t done = 0; !err && done < len;) {
    const ssize_t n = write(fd, buf + done, len - done);
    if (n > 0) done += (size_t)n;
    else if (n < 0 && errno != EINTR) err = errno;
    else if (n == 0) err = EIO;
  }
  if (close(fd) != 0 && !err) err = errno;
  if (!err) return 0;
  snprintf(why, wlen, "writing %s failed: %s", name, strerror(err));
  unlinkat(dirfd, name, 0);
  return -1;
}

/* 'n' when /proc says the process is a zombie or dead, else 'y'. */
static char proc_state(int64_t pid) {
  char p[64], buf[512];
  snprintf(p, sizeof p, "/proc/%lld/stat", (long long)pid);
  const int fd = open(p, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? 'n' : 'y';
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 'y';
  buf[n] = '\0';
  const char *rp = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
  return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X') ? 'n' : 'y';
}

char p2pk_trace_alive(int64_t pid) {
  if (pid <= 0) return '-';
  if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) return 'n';
  return proc_state(pid);
}

uint64_t p2pk_trace_pidns(void) {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}
