/* SPDX-License-Identifier: BSD-3-Clause */
#include "core/opts.h"

#include <stdio.h>
#include <string.h>

void p2pk_opts_begin(void) {
  optind = 0; /* glibc: start afresh, whatever was parsed before */
  opterr = 0;
}

void p2pk_opts_error(int c, char *const *argv, char *out, size_t len) {
  /* A long option is named by the word it was given as; a short one by its
   * letter (it may sit in a cluster such as -qb). */
  const char *word = optind > 0 ? argv[optind - 1] : "";
  const int as_long = strncmp(word, "--", 2) == 0 && (c == ':' || optopt == 0 || strchr(word, '='));
  if (c == ':' && as_long) snprintf(out, len, "%s needs a value", word);
  else if (c == ':') snprintf(out, len, "-%c needs a value", optopt);
  else if (as_long) snprintf(out, len, "unknown option '%s'", word);
  else snprintf(out, len, "unknown option '-%c'", optopt);
}
