/* SPDX-License-Identifier: BSD-3-Clause */
#include "core/outfile.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int p2pk_outfile_open(p2pk_outfile *o, const char *path) {
  struct stat st;
  o->path = path;
  o->created = stat(path, &st) != 0 && errno == ENOENT;
  o->f = fopen(path, "w");
  return o->f ? 0 : -1;
}

int p2pk_outfile_same(const p2pk_outfile *a, const p2pk_outfile *b) {
  struct stat x, y;
  return a->f && b->f && fstat(fileno(a->f), &x) == 0 && fstat(fileno(b->f), &y) == 0 &&
         S_ISREG(x.st_mode) && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

FILE *p2pk_outfile_take(p2pk_outfile *o) {
  FILE *f = o->f;
  o->f = NULL;
  return f;
}

void p2pk_outfile_close(p2pk_outfile *o, int discard) {
  if (!o->f) return;
  fclose(o->f);
  o->f = NULL;
  if (discard && o->created) unlink(o->path);
}

int p2pk_stdout_flush(const char *cmd) {
  errno = 0;
  const int flushed = fflush(stdout) == 0;
  const int e = errno;
  if (flushed && !ferror(stdout)) return 0;
  fprintf(stderr, "p2pkit %s: error: writing standard output failed: %s\n", cmd,
          !flushed && e ? strerror(e) : "an earlier write did not complete");
  return -1;
}
