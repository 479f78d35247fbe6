/* SPDX-License-Identifier: BSD-3-Clause */
/* `p2pkit bench --plot-from FILE.json`: a report back from the JSON document
 * --json wrote, enough to draw the plot again (no GPU). The JSON is read by
 * json-c (libjson-c.so.5), loaded at run time with our own declarations of
 * the few calls used, as NVML and NCCL are: a machine without it gets a
 * sentence, not a loader error. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"

typedef struct json_object jobj;
enum { J_NULL = 0, J_BOOL = 1, J_DOUBLE = 2, J_INT = 3, J_OBJECT = 4, J_ARRAY = 5, J_STRING = 6 };

typedef struct {
  jobj *(*from_file)(const char *);
  int (*put)(jobj *);
  int (*get_ex)(const jobj *, const char *, jobj **);
  size_t (*array_length)(const jobj *);
  jobj *(*array_idx)(const jobj *, size_t);
  const char *(*get_string)(jobj *);
  double (*get_double)(const jobj *);
  int64_t (*get_int64)(const jobj *);
  int (*get_boolean)(const jobj *);
  int (*get_type)(const jobj *);
  const char *(*last_err)(void);
} json_api;

static int fail(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, len, fmt, ap);
  va_end(ap);
  return -1;
}

static int load_api(json_api *j, void **lib, char *err, size_t len) {
  static const char *const names[] = {"libjson-c.so.5", "libjson-c.so"};
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !*lib; i++) *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!*lib)
    return fail(err, len, "--plot-from needs json-c to read JSON (libjson-c.so.5; Debian and Ubuntu: "
                "apt-get install libjson-c5): %s", dlerror());
  struct {
    void **slot;
    const char *name;
  } syms[] = {{(void **)&j->from_file, "json_object_from_file"},
              {(void **)&j->put, "json_object_put"},
              {(void **)&j->get_ex, "json_object_object_get_ex"},
              {(void **)&j->array_length, "json_object_array_length"},
              {(void **)&j->array_idx, "json_object_array_get_idx"},
              {(void **)&j->get_string, "json_object_get_string"},
              {(void **)&j->get_double, "json_object_get_double"},
              {(void **)&j->get_int64, "json_object_get_int64"},
              {(void **)&j->get_boolean, "json_object_get_boolean"},
              {(void **)&j->get_type, "json_object_get_type"},
              {(void **)&j->last_err, "json_util_get_last_err"}};
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
    if (!(*syms[i].slot = dlsym(*lib, syms[i].name)))
      return fail(err, len, "json-c lacks %s", syms[i].name);
  return 0;
}

/* Member `key` of object o when it has type `type`; NULL otherwise. */
static jobj *member(const json_api *j, const jobj *o, const char *key, int type) {
  jobj *v = NULL;
  if (!o || !j->get_ex(o, key, &v) || !v) return NULL;
  return j->get_type(v) == type ? v : NULL;
}

static int str_of(const json_api *j, const jobj *o, const char *key, char *out, size_t len) {
  jobj *v = member(j, o, key, J_STRING);
  if (!v) return -1;
  snprintf(out, len, "%s", j->get_string(v));
  return 0;
}

static int int_of(const json_api *j, const jobj *o, const char *key, int64_t *out) {
  jobj *v = member(j, o, key, J_INT);
  if (!v) return -1;
  *out = j->get_int64(v);
  return 0;
}

static int mode_of(const char *name) {
  for (int m = 0; m < P2PK_MODE_COUNT; m++)
    if (strcmp(name, p2pk_bench_mode_name(m)) == 0) return m;
  return -1;
}

static int status_of(const char *name) {
  return strcmp(name, "ok") == 0 ? P2PK_ROW_OK : strcmp(name, "skipped") == 0 ? P2PK_ROW_SKIPPED
         : strcmp(name, "failed") == 0 ? P2PK_ROW_FAILED : -1;
}

/* One element of "results": what the plot draws. */
static int row_of(const json_api *j, const jobj *o, p2pk_bench_row *x, char *why, size_t len) {
  char method[32] = "", mode[16] = "", status[16] = "";
  int64_t src, dst, bytes;
  jobj *total = member(j, o, "total", J_BOOL);
  if (str_of(j, o, "method", method, sizeof method) || str_of(j, o, "mode", mode, sizeof mode) ||
      str_of(j, o, "status", status, sizeof status) || int_of(j, o, "src", &src) ||
      int_of(j, o, "dst", &dst) || int_of(j, o, "bytes", &bytes) || !total)
    return fail(why, len, "a result lacks method, mode, status, src, dst, bytes or total");
  x->method = p2pk_bench_method_parse(method, strlen(method));
  x->mode = mode_of(mode);
  x->status = status_of(status);
  if (x->method < 0 || x->mode < 0 || x->status < 0 || bytes <= 0 || src < -1 || dst < -1 ||
      src >= P2PK_MAX_GPUS || dst >= P2PK_MAX_GPUS)
    return fail(why, len, "a result names method '%s', mode '%s', status '%s' or a GPU or size p2pkit "
                "bench does not write", method, mode, status);
  x->src = (int)src;
  x->dst = (int)dst;
  x->bytes = (size_t)bytes;
  x->total = j->get_boolean(total);
  str_of(j, o, "note", x->note, sizeof x->note); /* why a cell is empty: the plot says it */
  if (x->status != P2PK_ROW_OK) return 0;
  jobj *gbps = member(j, o, "median_gbps", J_DOUBLE), *low = member(j, o, "low", J_BOOL);
  jobj *ver = member(j, o, "verified", J_BOOL);
  if (!gbps) gbps = member(j, o, "median_gbps", J_INT);
  if (!gbps || !low || !ver) return fail(why, len, "an ok result lacks median_gbps, low or verified");
  x->gbps = j->get_double(gbps);
  x->low = j->get_boolean(low);
  x->verified = j->get_boolean(ver);
  if (!(x->gbps >= 0)) return fail(why, len, "a result's median_gbps is negative or not a number");
  return 0;
}

static int report_of(const json_api *j, const jobj *doc, p2pk_bench_report *r, char *why, size_t len) {
  char tool[32] = "";
  if (j->get_type(doc) != J_OBJECT || str_of(j, doc, "tool", tool, sizeof tool) ||
      strcmp(tool, "p2pkit bench") != 0)
    return fail(why, len, "not a p2pkit bench JSON document (its \"tool\" is not \"p2pkit bench\")");
  str_of(j, doc, "date", r->date, sizeof r->date);
  str_of(j, doc, "hostname", r->hostname, sizeof r->hostname);
  jobj *res = member(j, doc, "results", J_ARRAY);
  if (!res) return fail(why, len, "no \"results\" array");
  const size_t n = j->array_length(res);
  for (size_t i = 0; i < n; i++) {
    p2pk_bench_row *x = p2pk_bench_add_row(r);
    if (!x) return fail(why, len, "out of memory at result %zu", i);
    if (row_of(j, j->array_idx(res, i), x, why, len)) {
      char what[256];
      snprintf(what, sizeof what, "%s", why);
      return fail(why, len, "result %zu: %s", i, what);
    }
  }
  return 0;
}

int p2pk_bench_load_json(const char *path, p2pk_bench_report *r, char *err, size_t len) {
  static json_api j; /* filled by load_api on every call, as nvml_dl.c's table */
  void *lib = NULL;
  int rc = load_api(&j, &lib, err, len);
  jobj *doc = rc ? NULL : j.from_file(path);
  if (!rc && !doc) {
    const char *e = j.last_err();
    char why[256];
    snprintf(why, sizeof why, "%s", e && e[0] ? e : "not JSON");
    why[strcspn(why, "\n")] = '\0';
    rc = fail(err, len, "--plot-from %s: %s", path, why);
  }
  char why[384] = "";
  if (!rc && report_of(&j, doc, r, why, sizeof why)) rc = fail(err, len, "--plot-from %s: %s", path, why);
  if (doc) j.put(doc);
  if (lib) dlclose(lib);
  return rc;
}
