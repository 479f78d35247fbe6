/* SPDX-License-Identifier: BSD-3-Clause */
/* A small streaming JSON writer: every --json output goes through it, so
 * quoting and commas are right in one place. */
#ifndef P2PK_JSON_H
#define P2PK_JSON_H

#include <stdint.h>
#include <stdio.h>

#define P2PK_JSON_MAX_DEPTH 32

typedef struct {
  FILE *out;
  int depth;
  int count[P2PK_JSON_MAX_DEPTH]; /* members written at each level */
} p2pk_json;

void p2pk_json_init(p2pk_json *j, FILE *out);
/* `key` is the member name inside an object, NULL inside an array or at top. */
void p2pk_json_obj(p2pk_json *j, const char *key);
void p2pk_json_obj_end(p2pk_json *j);
void p2pk_json_arr(p2pk_json *j, const char *key);
void p2pk_json_arr_end(p2pk_json *j);
void p2pk_json_str(p2pk_json *j, const char *key, const char *val); /* NULL writes null */
void p2pk_json_int(p2pk_json *j, const char *key, int64_t val);
void p2pk_json_num(p2pk_json *j, const char *key, double val);      /* NaN/inf write null */
void p2pk_json_bool(p2pk_json *j, const char *key, int val);
void p2pk_json_null(p2pk_json *j, const char *key);
/* Ends the document with a newline. */
void p2pk_json_finish(p2pk_json *j);
/* Write `s` as a quoted JSON string. */
void p2pk_json_quote(FILE *out, const char *s);

#endif
