/* SPDX-License-Identifier: BSD-3-Clause */
/* The registry's integer settings for code outside the library (the
 * PyTorch backend): read, validated and cached as the library reads its
 * own, so a setting means one thing wherever it is read. */
#include <string.h>

#include "core/check.h"
#include "core/param.h"

p2pkit_status_t p2pkit_setting_int(const char *name, int64_t *value_p, int *is_set_p) {
  if (!name || !value_p)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "setting_int: name or value_p is NULL");
  const p2pk_param_def *d = NULL;
  for (size_t i = 0; i < p2pk_param_count() && !d; i++)
    if (strcmp(p2pk_param_at(i)->name, name) == 0) d = p2pk_param_at(i);
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
