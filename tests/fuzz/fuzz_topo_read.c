/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: every topology reader (format detection, p2pkit files,
 * NCCL XML, hwloc XML) on arbitrary bytes. Beyond "no crash, no leak", what
 * a reader accepts must hold together:
 *  - the model passes its own checks, every pair classifies (GPUs and
 *    NICs) and the model prints, as text and as JSON;
 *  - what the p2pkit and NCCL readers accept saves as a p2pkit file, which
 *    reads back and writes again to the same bytes;
 *  - NCCL XML written from any model reads back, and from the second round
 *    on writing is a fixed point. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo.h"
#include "topo/xml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef p2pkit_status_t (*writer_fn)(const struct p2pkit_topo *, FILE *);
typedef p2pkit_status_t (*reader_fn)(const char *, const char *, size_t, struct p2pkit_topo **);

/* What `fn` writes (NULL when it refuses the model). */
static char *written(writer_fn fn, const struct p2pkit_topo *t, size_t *len) {
  char *buf = NULL;
  FILE *f = open_memstream(&buf, len);
  if (!f) abort();
  p2pkit_status_t st = fn(t, f);
  fclose(f);
  if (st == P2PKIT_SUCCESS) return buf;
  free(buf);
  return NULL;
}

/* Write, read back (must work), write again: returns the second text. */
static char *round_trip(writer_fn wr, reader_fn rd, const struct p2pkit_topo *t, char **first, size_t *len1,
                        size_t *len2) {
  *first = written(wr, t, len1);
  if (!*first) return NULL;
  struct p2pkit_topo *r = NULL;
  if (rd("again", *first, *len1, &r) != P2PKIT_SUCCESS) {
    fprintf(stderr, "written text does not read back: %s\n%s\n", p2pkit_last_error(), *first);
    abort();
  }
  char *second = written(wr, r, len2);
  p2pkit_topo_destroy(r);
  if (!second) abort();
  return second;
}

static void check_p2pkit(const struct p2pkit_topo *t) {
  char *a = NULL, *b;
  size_t na = 0, nb = 0;
  b = round_trip(p2pk_topo_write_file, p2pk_topo_read_file, t, &a, &na, &nb);
  /* Whatever our own readers accept, --save can record. */
  if (!a && strcmp(t->format, "hwloc-xml") != 0) {
    fprintf(stderr, "a %s model cannot be saved: %s\n", t->format, p2pkit_last_error());
    abort();
  }
  if (a && (na != nb || memcmp(a, b, na) != 0)) abort();
  free(a);
  free(b);
}

static void check_nccl(const struct p2pkit_topo *t) {
  char *x1 = NULL, *x2 = NULL, *x3 = NULL;
  size_t n1 = 0, n2 = 0, n3 = 0;
  x2 = round_trip(p2pk_topo_write_nccl, p2pk_topo_read_nccl, t, &x1, &n1, &n2);
  if (x2) {
    struct p2pkit_topo *r = NULL;
    if (p2pk_topo_read_nccl("again", x2, n2, &r) != P2PKIT_SUCCESS) abort();
    x3 = written(p2pk_topo_write_nccl, r, &n3);
    p2pkit_topo_destroy(r);
    if (!x3 || n3 != n2 || memcmp(x2, x3, n2) != 0) {
      fprintf(stderr, "NCCL XML not a fixed point:\n%s---\n%s", x2, x3 ? x3 : "(refused)");
      abort();
    }
  }
  free(x1);
  free(x2);
  free(x3);
}

/* Everything `p2pkit topo` and `--json` print. */
static void print_all(struct p2pkit_topo *t) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) abort();
  if (p2pkit_topo_print(t, f, P2PKIT_PRINT_ALL) != P2PKIT_SUCCESS) abort();
  if (p2pkit_topo_print(t, f, P2PKIT_PRINT_JSON) != P2PKIT_SUCCESS) abort();
  fclose(f);
  free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* Readers take a length; the NUL after the copy is for hwloc's loader,
   * which wants one inside the buffer it is given. */
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  struct p2pkit_topo *t = NULL;
#ifndef FUZZ_HWLOC_LOADER
  /* libhwloc's XML importer itself crashes on malformed files (an assert in
   * hwloc_bitmap_sscanf, a NULL dereference in hwloc_bitmap_compare_first):
   * fuzzing it finds hwloc's bugs, not ours. Our pre-check still runs;
   * build with -DFUZZ_HWLOC_LOADER to fuzz through hwloc anyway. */
  if (p2pk_topo_detect(text, size) == P2PK_FMT_HWLOC) {
    p2pk_xml_check_hwloc("fuzz", text, size, NULL, NULL);
    free(text);
    return 0;
  }
#endif
  if (p2pk_topo_read_any("fuzz", text, size, &t) == P2PKIT_SUCCESS) {
    if (p2pk_topo_validate(t) != P2PKIT_SUCCESS) abort();
    for (int a = 0; a < t->ngpus; a++)
      for (int b = 0; b < t->ngpus; b++) {
        p2pkit_pair_t p;
        p2pk_pair_info(t, a, b, &p);
      }
    char sentence[512];
    for (int g = 0; g < t->ngpus; g++) {
      p2pk_nic_sentence(t, g, sentence, sizeof sentence);
      for (int n = 0; n < t->nnics; n++) (void)p2pk_gpu_nic_link(t, g, n);
    }
    for (int a = 0; a < t->nnics; a++)
      for (int b = 0; b < t->nnics; b++) (void)p2pk_nic_nic_link(t, a, b);
    print_all(t);
    check_p2pkit(t);
    check_nccl(t);
    p2pkit_topo_destroy(t);
  }
  free(text);
  return 0;
}
