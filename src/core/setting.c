/* SPDX-License-Identifier: BSD-3-Clause */
/* Reading the registry's numbers, the entry points' checks of every
 * setting and of unknown names, and the integer settings for code outside
 * the library (the PyTorch backend): read, validated and cached as the
 * library reads its own, so a setting means one thing wherever it is read.
 * Above param.c and the log: the registry itself logs nothing. */
#include <pthread.h>
#include <stdlib.h>

#include "core/check.h"
#include "core/log.h"
#include "core/param.h"

/* The value's text when it is valid, else the default's. */
static const char *valid_or_default(const char *name, int kind) {
  const p2pk_param_def *d = p2pk_param_def_of(name);
  if (d->kind != kind) { /* a typed read of a setting registered as another kind is a bug */
    fprintf(stderr, "p2pkit: internal error: setting %s read as the wrong kind\n", name);
    abort();
  }
  const char *v = p2pk_param_str(name);
  char why[400];
  if (p2pk_param_valid(d, v, why, sizeof why) == 0) return v;
  /* Every entry point checks the settings first (p2pk_param_check), so only
   * a reader that ran before any check gets here: it is told, once. */
  if (p2pk_param_first_refusal(name)) P2PK_WARN("%s; read as its default, %s", why, d->def);
  return d->def;
}

int64_t p2pk_param_int(const char *name) {
  long long x = 0;
  p2pk_parse_int(valid_or_default(name, P2PK_PARAM_INT), &x);
  return (int64_t)x;
}

size_t p2pk_param_size(const char *name) {
  size_t bytes = 0;
  p2pk_parse_size(valid_or_default(name, P2PK_PARAM_SIZE), &bytes);
  return bytes;
}

p2pkit_status_t p2pk_param_check(void) {
  for (size_t i = 0; i < p2pk_param_count(); i++) {
    const p2pk_param_def *d = p2pk_param_at(i);
    if (!p2pk_param_is_set(d->name)) continue;
    char why[400];
    if (p2pk_param_valid(d, p2pk_param_str(d->name), why, sizeof why) != 0)
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s", why);
  }
  return P2PKIT_SUCCESS;
}

static void warn_unknown_once(void) {
  char list[512];
  int n = p2pk_param_unknown(list, sizeof list);
  if (n)
    P2PK_WARN("%d P2PKIT_* variable%s in the environment %s ignored: %s (`p2pkit env` lists "
              "the settings)", n, n == 1 ? "" : "s",
              n == 1 ? "is not a p2pkit setting and is" : "are not p2pkit settings and are", list);
}

void p2pk_param_warn_unknown(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, warn_unknown_once);
}

p2pkit_status_t p2pkit_setting_int(const char *name, int64_t *value_p, int *is_set_p) {
  if (!name || !value_p)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "setting_int: name or value_p is NULL");
  const p2pk_param_def *d = p2pk_param_find(name);
  if (!d || d->kind != P2PK_PARAM_INT)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "setting_int: %.80s is not an integer setting "
                     "of p2pkit (`p2pkit env` lists them)", name);
  char why[400];
  if (p2pk_param_is_set(name) && p2pk_param_valid(d, p2pk_param_str(name), why, sizeof why) != 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s", why);
  *value_p = p2pk_param_int(name);
  if (is_set_p) *is_set_p = p2pk_param_is_set(name);
  return P2PKIT_SUCCESS;
}
