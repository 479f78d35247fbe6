/* SPDX-License-Identifier: BSD-3-Clause */
#include "core/json.h"

#include <math.h>

void p2pk_json_init(p2pk_json *j, FILE *out) {
  j->out = out;
  j->depth = 0;
  j->count[0] = 0;
}

void p2pk_json_quote(FILE *out, const char *s) {
  fputc('"', out);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
      case '"': fputs("\\\"", out); break;
      case '\\': fputs("\\\\", out); break;
      case '\n': fputs("\\n", out); break;
      case '\r': fputs("\\r", out); break;
      case '\t': fputs("\\t", out); break;
      default:
        if (*p < 0x20) fprintf(out, "\\u%04x", *p);
        else fputc(*p, out);
    }
  }
  fputc('"', out);
}

static void member(p2pk_json *j, const char *key) {
  if (j->count[j->depth]++ > 0) fputc(',', j->out);
  if (j->depth > 0) {
    fputc('\n', j->out);
    for (int i = 0; i < j->depth; i++) fputs("  ", j->out);
  }
  if (key) {
    p2pk_json_quote(j->out, key);
    fputs(": ", j->out);
  }
}

static void open(p2pk_json *j, const char *key, char c) {
  member(j, key);
  fputc(c, j->out);
  if (j->depth + 1 < P2PK_JSON_MAX_DEPTH) j->depth++;
  j->count[j->depth] = 0;
}

static void close_(p2pk_json *j, char c) {
  int had = j->count[j->depth];
  if (j->depth > 0) j->depth--;
  if (had) {
    fputc('\n', j->out);
    for (int i = 0; i < j->depth; i++) fputs("  ", j->out);
  }
  fputc(c, j->out);
}

void p2pk_json_obj(p2pk_json *j, const char *key) { open(j, key, '{'); }
void p2pk_json_obj_end(p2pk_json *j) { close_(j, '}'); }
void p2pk_json_arr(p2pk_json *j, const char *key) { open(j, key, '['); }
void p2pk_json_arr_end(p2pk_json *j) { close_(j, ']'); }

void p2pk_json_str(p2pk_json *j, const char *key, const char *val) {
  member(j, key);
  if (val) p2pk_json_quote(j->out, val);
  else fputs("null", j->out);
}

void p2pk_json_int(p2pk_json *j, const char *key, int64_t val) {
  member(j, key);
  fprintf(j->out, "%lld", (long long)val);
}

void p2pk_json_num(p2pk_json *j, const char *key, double val) {
  member(j, key);
  if (isfinite(val)) fprintf(j->out, "%.6g", val);
  else fputs("null", j->out);
}

void p2pk_json_bool(p2pk_json *j, const char *key, int val) {
  member(j, key);
  fputs(val ? "true" : "false", j->out);
}

void p2pk_json_null(p2pk_json *j, const char *key) {
  member(j, key);
  fputs("null", j->out);
}

void p2pk_json_finish(p2pk_json *j) { fputc('\n', j->out); }
