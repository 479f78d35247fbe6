/* SPDX-License-Identifier: BSD-3-Clause */
/* Loading and saving recorded machines: read the whole file, detect the format
 * from its contents, dispatch to the reader. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/text.h"
#include "topo/topo.h"

#define MAX_TOPO_FILE (64u << 20)

static p2pkit_status_t slurp(const char *path, char **text_p, size_t *len_p) {
  FILE *f = fopen(path, "rb");
  if (!f) return p2pk_fail(P2PKIT_ERR_IO, "cannot open topology file %s: %s", path, strerror(errno));
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap + 1);
  if (!buf) {
    fclose(f);
    return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory reading %s", path);
  }
  size_t n;
  while ((n = fread(buf + len, 1, cap - len, f)) > 0) {
    len += n;
    if (len == cap) {
      if (cap >= MAX_TOPO_FILE) {
        free(buf);
        fclose(f);
        return p2pk_fail(P2PKIT_ERR_PARSE, "%s: larger than %u MiB, not a topology file", path,
                         MAX_TOPO_FILE >> 20);
      }
      char *nb = realloc(buf, cap * 2 + 1);
      if (!nb) {
        free(buf);
        fclose(f);
        return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory reading %s", path);
      }
      buf = nb;
      cap *= 2;
    }
  }
  int err = ferror(f);
  fclose(f);
  if (err) {
    free(buf);
    return p2pk_fail(P2PKIT_ERR_IO, "error reading %s", path);
  }
  buf[len] = '\0';
  *text_p = buf;
  *len_p = len;
  return P2PKIT_SUCCESS;
}

/* Past markup before the root element: <?...?>, <!-- ... -->, <!DOCTYPE ...>
 * (with an internal subset in [...]). NULL when it never ends. */
static const char *skip_prolog_item(const char *p, const char *end) {
  const char *stop = (size_t)(end - p) >= 4 && memcmp(p, "<!--", 4) == 0 ? "-->" : p[1] == '?' ? "?>" : NULL;
  if (stop) {
    size_t n = strlen(stop);
    for (p += 2; (size_t)(end - p) >= n; p++)
      if (memcmp(p, stop, n) == 0) return p + n;
    return NULL;
  }
  int depth = 0;
  for (; p < end; p++) {
    if (*p == '[') depth++;
    else if (*p == ']' && depth > 0) depth--;
    else if (*p == '>' && depth == 0) return p + 1;
  }
  return NULL;
}

static int starts_element(const char *p, const char *end, const char *name) {
  size_t n = strlen(name);
  if ((size_t)(end - p) < n + 1 || p[0] != '<' || memcmp(p + 1, name, n) != 0) return 0;
  if ((size_t)(end - p) == n + 1) return 1;
  char c = p[n + 1];
  return c == '>' || c == '/' || c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

p2pk_topo_format p2pk_topo_detect(const char *text, size_t len) {
  const char *p = text, *end = text + len;
  if (len >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0) p += 3; /* a UTF-8 byte order mark */
  for (;;) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) p++;
    if ((size_t)(end - p) >= 11 && memcmp(p, "p2pkit-topo", 11) == 0) return P2PK_FMT_P2PKIT;
    if (p >= end || *p != '<' || end - p < 2) return P2PK_FMT_UNKNOWN;
    if (p[1] != '?' && p[1] != '!') break;
    if (!(p = skip_prolog_item(p, end))) return P2PK_FMT_UNKNOWN;
  }
  /* Both XML dialects: hwloc's root is <topology>, NCCL's is <system>. */
  if (starts_element(p, end, "topology")) return P2PK_FMT_HWLOC;
  if (starts_element(p, end, "system")) return P2PK_FMT_NCCL;
  return P2PK_FMT_UNKNOWN;
}

p2pkit_status_t p2pk_topo_read_any(const char *name, const char *text, size_t len,
                                   struct p2pkit_topo **t_p) {
  switch (p2pk_topo_detect(text, len)) {
    case P2PK_FMT_P2PKIT: return p2pk_topo_read_file(name, text, len, t_p);
    case P2PK_FMT_HWLOC: return p2pk_topo_read_hwloc_xml(name, text, len, t_p);
    case P2PK_FMT_NCCL: return p2pk_topo_read_nccl(name, text, len, t_p);
    default: break;
  }
  return p2pk_fail(P2PKIT_ERR_PARSE,
                   "%s:1: unknown topology format: expected a p2pkit file ('p2pkit-topo'), an "
                   "hwloc XML export (<topology>) or an NCCL topology dump (<system>)",
                   name);
}

/* Text a file gave (names, bus ids, notes) is printed and written as it is:
 * p2pk_text_printable replaces what a terminal would act on, so a file
 * cannot send an escape sequence through `p2pkit topo`. */
static void scrub_model(struct p2pkit_topo *t) {
#define SCRUB(f) ((f)[sizeof(f) - 1] = 0, p2pk_text_printable(f)) /* fixed arrays, ended */
  SCRUB(t->format), SCRUB(t->source), SCRUB(t->hostname), SCRUB(t->driver), SCRUB(t->nvml_version);
  for (int g = 0; g < t->ngpus; g++) {
    SCRUB(t->gpus[g].name), SCRUB(t->gpus[g].busid), SCRUB(t->gpus[g].uuid);
    for (int k = 0; k < t->gpus[g].ngroups; k++) SCRUB(t->gpus[g].groups[k].peer_busid);
  }
  for (int i = 0; i < t->npci; i++) SCRUB(t->pci[i].busid);
  for (int i = 0; i < t->nnuma; i++) SCRUB(t->numa[i].cpus);
  for (int i = 0; i < t->nnics; i++) SCRUB(t->nics[i].name);
  /* nnotes is checked on read (<= P2PK_MAX_NOTES); the bound again here is
   * what lets GCC's -O2 -Wstringop-overflow see it. */
  for (int i = 0; i < t->nnotes && i < P2PK_MAX_NOTES; i++) SCRUB(t->notes[i]);
#undef SCRUB
}

/* A recorded machine without a GPU is nothing p2pkit can work with: say so
 * in the terms of the source, as discovery does for a live machine. */
static p2pkit_status_t require_gpu(const char *path, const struct p2pkit_topo *t) {
  if (t->ngpus > 0) return P2PKIT_SUCCESS;
  const char *why = strcmp(t->format, "nccl-xml") == 0
                        ? "no <gpu> element and no <pci> of display/3D class (0x03...) from NVIDIA"
                    : strcmp(t->format, "hwloc-xml") == 0
                        ? "no PCI device of display/3D class (0x03...) from NVIDIA (vendor 0x10de); was "
                          "it exported without I/O devices?"
                        : "no gpu record";
  return p2pk_fail(P2PKIT_ERR_NO_DEVICE, "%s: no GPU in this machine (%s)", path, why);
}

p2pkit_status_t p2pkit_topo_load(const char *path, p2pkit_topo_t *topo_p) {
  if (!path || !topo_p) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "path or output is NULL");
  char *text = NULL;
  size_t len = 0;
  P2PK_CHECK(slurp(path, &text, &len));
  struct p2pkit_topo *t = NULL;
  p2pkit_status_t st = p2pk_topo_read_any(path, text, len, &t);
  free(text);
  if (st != P2PKIT_SUCCESS) return st;
  scrub_model(t);
  st = p2pk_topo_validate(t);
  if (st == P2PKIT_SUCCESS) st = require_gpu(path, t);
  if (st != P2PKIT_SUCCESS) {
    p2pkit_topo_destroy(t);
    return st;
  }
  *topo_p = t;
  return P2PKIT_SUCCESS;
}

typedef p2pkit_status_t (*writer_fn)(const struct p2pkit_topo *, FILE *);

static p2pkit_status_t write_to(const char *path, const struct p2pkit_topo *t, writer_fn fn) {
  if (!t || !path) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "topology or path is NULL");
  FILE *f = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
  if (!f) return p2pk_fail(P2PKIT_ERR_IO, "cannot write %s: %s", path, strerror(errno));
  p2pkit_status_t st = fn(t, f);
  int err = ferror(f);
  if (f != stdout) err |= fclose(f);
  else fflush(f);
  if (st == P2PKIT_SUCCESS && err) st = p2pk_fail(P2PKIT_ERR_IO, "error writing %s", path);
  return st;
}

p2pkit_status_t p2pkit_topo_save(p2pkit_topo_t topo, const char *path) {
  return write_to(path, topo, p2pk_topo_write_file);
}

p2pkit_status_t p2pkit_topo_write_nccl(p2pkit_topo_t topo, const char *path) {
  return write_to(path, topo, p2pk_topo_write_nccl);
}
