/* SPDX-License-Identifier: BSD-3-Clause */
/* Every report in a directory: p2pkit's (their first line says
 * p2pkit-trace) and PyTorch's flight recorder dumps (a pickle, the rank at
 * the end of the file's name), read whole, within their bounds, never
 * through a link, never blocking on a FIFO. A file that is neither is not
 * a report and is passed over, unless its name says it is p2pkit's. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/check.h"
#include "trace/trace.h"

#define MAX_FILES 100000 /* entries of the directory looked at */
#define PREFIX "p2pkit-trace-"

typedef struct {
  p2pk_tdump *d;
  size_t n, cap;
  p2pk_tbad *bad;
  size_t nbad, capbad;
} loaded;

static int more(void **arr, size_t n, size_t *cap, size_t size) {
  if (n < *cap) return 0;
  const size_t c = *cap ? *cap * 2 : 16;
  void *a = realloc(*arr, c * size);
  if (!a) return -1;
  *arr = a;
  *cap = c;
  return 0;
}

static void add_bad(loaded *l, const char *file, const char *why) {
  if (more((void **)&l->bad, l->nbad, &l->capbad, sizeof *l->bad)) return;
  p2pk_tbad *b = &l->bad[l->nbad++];
  snprintf(b->file, sizeof b->file, "%s", file);
  snprintf(b->why, sizeof b->why, "%s", why);
}

/* The file `name` of dirfd, whole, up to `most` bytes: its bytes (and
 * length), or NULL with why; NULL and why "" when it is no report (not
 * named as p2pkit's, and not a regular file, or one whose first bytes are
 * neither p2pkit's nor a pickle's). */
static char *slurp(int dirfd, const char *name, int ours, size_t most, size_t *len, char *why,
                   size_t wlen) {
  const int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (ours)
      snprintf(why, wlen, "%s", fd < 0 && errno == ELOOP ? "a symbolic link: not read"
                                : fd < 0 ? strerror(errno) : "not a regular file: not read");
    else why[0] = '\0'; /* a link, a folder, ... of another name: not a report */
    if (fd >= 0) close(fd);
    return NULL;
  }
  char head[16] = "";
  const ssize_t h = pread(fd, head, sizeof head, 0);
  if (!ours && (h < 1 || ((unsigned char)head[0] != 0x80 &&
                          (h < 13 || memcmp(head, P2PK_TRACE_MAGIC " ", 13) != 0)))) {
    why[0] = '\0';
    close(fd);
    return NULL;
  }
  char *buf = malloc(most + 2);
  size_t n = 0;
  while (buf && n <= most) {
    const ssize_t k = read(fd, buf + n, most + 1 - n);
    if (k > 0) n += (size_t)k;
    else if (k == 0 || errno != EINTR) break;
  }
  close(fd);
  if (!buf || n > most) {
    snprintf(why, wlen, buf ? "larger than the %zu MiB a report may be" : "out of memory", most >> 20);
    free(buf);
    return NULL;
  }
  buf[n] = '\0';
  *len = n;
  return buf;
}

static p2pkit_status_t add_dumps(loaded *l, const p2pk_tdump *d, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (more((void **)&l->d, l->n, &l->cap, sizeof *l->d))
      return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "trace: out of memory");
    l->d[l->n++] = d[i];
  }
  return P2PKIT_SUCCESS;
}

/* One file: its dumps, a bad file's line, or nothing (not a report). */
static p2pkit_status_t one_file(loaded *l, int dirfd, const char *dir, const char *name) {
  char path[4096 + 256], why[512];
  const size_t dl = strlen(dir); /* "DIR/" as given: one slash between */
  snprintf(path, sizeof path, "%s%s%s", dir, dl && dir[dl - 1] == '/' ? "" : "/", name);
  const int ours = strncmp(name, PREFIX, strlen(PREFIX)) == 0;
  size_t len = 0;
  char *buf = slurp(dirfd, name, ours, P2PK_TRACE_MAX_FR_FILE, &len, why, sizeof why);
  if (!buf) {
    char msg[sizeof path + sizeof why];
    snprintf(msg, sizeof msg, "%s: %s", path, why);
    if (ours || why[0]) add_bad(l, path, msg);
    return P2PKIT_SUCCESS;
  }
  p2pkit_status_t st = P2PKIT_SUCCESS;
  const int text = strncmp(buf, P2PK_TRACE_MAGIC " ", strlen(P2PK_TRACE_MAGIC) + 1) == 0;
  if ((text || ours) && len > P2PK_TRACE_MAX_FILE) {
    st = p2pk_fail(P2PKIT_ERR_PARSE, "%s: larger than the %u MiB a p2pkit report may be", path,
                   P2PK_TRACE_MAX_FILE >> 20);
  } else if (text || ours) {
    p2pk_tdump d;
    st = p2pk_tdump_parse(path, buf, len, &d);
    if (st == P2PKIT_SUCCESS) st = add_dumps(l, &d, 1);
    if (st != P2PKIT_SUCCESS) p2pk_tdump_free(&d);
  } else if (len && (unsigned char)buf[0] == 0x80) {
    const int rank = p2pk_fr_rank_of(name);
    p2pk_tdump *d = NULL;
    size_t n = 0;
    st = rank < 0 ? p2pk_fail(P2PKIT_ERR_PARSE, "%s: a pickle whose name does not end with its "
                              "rank, as the flight recorder names its dumps", path)
                  : p2pk_fr_read(path, (const unsigned char *)buf, len, rank, &d, &n);
    if (st == P2PKIT_SUCCESS) st = add_dumps(l, d, n);
    else for (size_t i = 0; i < n; i++) p2pk_tdump_free(&d[i]);
    free(d);
  }
  free(buf);
  if (st == P2PKIT_ERR_NO_MEMORY) return st;
  if (st != P2PKIT_SUCCESS) add_bad(l, path, p2pkit_last_error());
  return P2PKIT_SUCCESS;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The directory's entries but hidden ones, sorted (so the order of
 * reading, and of messages, is the same everywhere). */
static char **names_of(DIR *dp, size_t *n) {
  char **names = NULL;
  size_t cap = 0;
  *n = 0;
  for (struct dirent *e; (e = readdir(dp)) && *n < MAX_FILES;) {
    if (e->d_name[0] == '.') continue;
    char *s = strdup(e->d_name);
    if (!s || more((void **)&names, *n, &cap, sizeof *names)) {
      free(s);
      break;
    }
    names[(*n)++] = s;
  }
  if (*n) qsort(names, *n, sizeof *names, by_name);
  return names;
}

p2pkit_status_t p2pk_trace_load_dir(const char *dir, p2pk_tdump **dumps, size_t *n,
                                    p2pk_tbad **bad, size_t *nbad) {
  DIR *dp = opendir(dir);
  if (!dp) return p2pk_fail(P2PKIT_ERR_IO, "cannot read the directory %s: %s", dir, strerror(errno));
  loaded l;
  memset(&l, 0, sizeof l);
  size_t nn = 0;
  char **names = names_of(dp, &nn);
  p2pkit_status_t st = P2PKIT_SUCCESS;
  for (size_t i = 0; i < nn; i++) {
    if (st == P2PKIT_SUCCESS) st = one_file(&l, dirfd(dp), dir, names[i]);
    free(names[i]);
  }
  free(names);
  closedir(dp);
  *dumps = l.d;
  *n = l.n;
  *bad = l.bad;
  *nbad = l.nbad;
  return st;
}
