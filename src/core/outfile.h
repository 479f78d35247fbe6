/* SPDX-License-Identifier: BSD-3-Clause */
/* Output files a command opens before the work whose results they will
 * hold (bench's --json=FILE, --csv=FILE, --plot FILE; perf's --json-file and
 * --algo-table): a path that cannot be written fails in a second, not after
 * a run of minutes whose results would then be lost; a file the run created
 * but never wrote is removed again. */
#ifndef P2PK_OUTFILE_H
#define P2PK_OUTFILE_H

#include <stdio.h>

typedef struct {
  FILE *f;          /* open until written (p2pk_outfile_take) or closed */
  const char *path;
  int created;      /* did not exist before the open */
} p2pk_outfile;

/* Opens `path` for writing (created or truncated): 0, or -1 with errno set. */
int p2pk_outfile_open(p2pk_outfile *o, const char *path);
/* 1 when both are open on the same regular file (they would overwrite each
 * other from offset 0). */
int p2pk_outfile_same(const p2pk_outfile *a, const p2pk_outfile *b);
/* The open stream, handed to the writer, who closes it; NULL if none. */
FILE *p2pk_outfile_take(p2pk_outfile *o);
/* Closes a file still open; with `discard`, removes it if the open created it. */
void p2pk_outfile_close(p2pk_outfile *o, int discard);

/* Flushes standard output and tells whether all a command wrote there
 * arrived: 0, or -1 after one line on stderr ("p2pkit CMD: error: writing
 * standard output failed: No space left on device") when a write failed
 * (a full disk, a closed pipe), so truncated output never exits 0. */
int p2pk_stdout_flush(const char *cmd);

#endif
