/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: the desync report's readers (src/trace) on arbitrary
 * bytes, as `p2pkit trace` meets them in a directory: p2pkit's text format
 * and PyTorch's flight recorder pickles. Beyond "no crash, no leak, no
 * hang" (a pickle's list may contain itself), what a reader accepts must
 * hold together:
 *  - a text dump it accepts writes back, reads again, and writes to the
 *    same bytes;
 *  - whatever either reader accepts is judged, printed and written as JSON
 *    (a verdict line, never an empty one). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void judge(const p2pk_tdump *d, size_t n) {
  p2pk_tjob job;
  if (p2pk_trace_analyze(d, n, NULL, NULL, &job) != P2PKIT_SUCCESS) return;
  for (size_t i = 0; i < job.ncomms; i++)
    if (!job.comms[i].line[0]) {
      fprintf(stderr, "a communicator judged without a verdict line\n");
      abort();
    }
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) abort();
  p2pk_trace_print(&job, f);
  p2pk_trace_json(&job, f);
  fclose(f);
  free(buf);
  p2pk_tjob_free(&job);
}

static char *written(const p2pk_tdump *d, size_t *len) {
  const size_t cap = p2pk_tdump_max_bytes(d->nranks, d->ncalls);
  char *buf = malloc(cap);
  if (!buf) abort();
  *len = p2pk_tdump_write(d, buf, cap);
  if (!*len) {
    fprintf(stderr, "an accepted dump does not fit its own bound\n");
    abort();
  }
  return buf;
}

static void text(const uint8_t *data, size_t size) {
  p2pk_tdump d, again;
  if (p2pk_tdump_parse("fuzz", (const char *)data, size, &d) != P2PKIT_SUCCESS) {
    p2pk_tdump_free(&d);
    return;
  }
  size_t l1 = 0, l2 = 0;
  char *first = written(&d, &l1);
  if (p2pk_tdump_parse("again", first, l1, &again) != P2PKIT_SUCCESS) {
    fprintf(stderr, "written dump does not read back: %s\n%s\n", p2pkit_last_error(), first);
    abort();
  }
  char *second = written(&again, &l2);
  if (l1 != l2 || memcmp(first, second, l1) != 0) {
    fprintf(stderr, "writing is not a fixed point:\n%s\n---\n%s\n", first, second);
    abort();
  }
  judge(&d, 1);
  free(first);
  free(second);
  p2pk_tdump_free(&again);
  p2pk_tdump_free(&d);
}

static void pickle(const uint8_t *data, size_t size) {
  p2pk_tdump *d = NULL;
  size_t n = 0;
  if (p2pk_fr_read("fuzz", data, size, 1, &d, &n) == P2PKIT_SUCCESS) judge(d, n);
  for (size_t i = 0; i < n; i++) p2pk_tdump_free(&d[i]);
  free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  text(data, size);
  pickle(data, size);
  return 0;
}
