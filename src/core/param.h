/* SPDX-License-Identifier: BSD-3-Clause */
/* Settings: one registry (name, default, help), each read from the
 * environment once, on first use, and cached. `p2pkit env` lists them. */
#ifndef P2PK_PARAM_H
#define P2PK_PARAM_H

#include <stddef.h>
#include <stdint.h>

#include "p2pkit.h"

/* What a setting's text must be; p2pk_param_check refuses anything else. */
enum { P2PK_PARAM_STR, P2PK_PARAM_INT, P2PK_PARAM_SIZE };

/* A string setting's grammar: 0 when `text` is valid, else -1 and the reason. */
typedef int (*p2pk_param_valid_fn)(const char *text, char *why, size_t len);

typedef struct {
  const char *name;
  const char *def;
  const char *help;
  int kind;         /* P2PK_PARAM_*: how p2pk_param_int / _size / _str read it */
  int ranged;       /* INT, SIZE: the value must lie in lo..hi */
  int64_t lo, hi;
  int or_zero;      /* ranged: 0 (its "auto" or "never") is allowed too */
  const char *words; /* STR: the values allowed besides "" (the default), '|' apart, any case */
  p2pk_param_valid_fn valid; /* STR: its grammar, or NULL */
  int list;         /* STR: a comma-separated list of the words, a leading ^ excluding them */
  int secret;       /* never shown: `p2pkit env` and the doctor say only whether it is set */
} p2pk_param_def;

/* The registry itself logs nothing and reports no error (param.c); the
 * typed reads and the checks that do are setting.c's, above the log. */

/* Current value (environment or default); never NULL. Aborts on a name not in
 * the registry: that is a bug, not an input. */
const char *p2pk_param_str(const char *name);
/* Integer value; the default when the text is not a number or out of the
 * setting's range, with a warning logged once (entry points call
 * p2pk_param_check first, so such a value is refused there, never read). */
int64_t p2pk_param_int(const char *name);
/* Byte size with an optional K/M/G suffix (powers of 1024); the default as
 * p2pk_param_int says. */
size_t p2pk_param_size(const char *name);
/* The value to print: the value, or "(set, hidden)" for a secret. */
const char *p2pk_param_shown(const char *name);
/* 1 when set in the environment, 0 when the default is in force. */
int p2pk_param_is_set(const char *name);

/* Every setting taken from the environment is valid: it parses as its kind
 * says, lies in its range, is one of its words or follows its grammar.
 * P2PKIT_ERR_INVALID_ARGUMENT naming the first that is not
 * ("P2PKIT_P2P_DISABLE='-1' must be a whole number from 0 to 1"). The one
 * check: `p2pkit env`, copy contexts, communicators and the commands all
 * call it, so what one accepts the others do. */
p2pkit_status_t p2pk_param_check(void);
/* The same check of one setting's text: 0, or -1 with the sentence in `why`. */
int p2pk_param_valid(const p2pk_param_def *d, const char *text, char *why, size_t len);
/* An INT or SIZE setting's range as its messages say it ("0 or a whole
 * number from 16 to 512", "a size from 16M to 4G"); "" for the others. */
void p2pk_param_range_text(const p2pk_param_def *d, char *buf, size_t len);

/* P2PKIT_* names in the environment that are not settings (a typo such as
 * P2PKIT_P2P_DISABLED, which would otherwise be ignored in silence). The
 * build and test scripts' own variables (P2PKIT_LIB, P2PKIT_SANITIZE, ...)
 * are not reported. Writes "NAME (did you mean SETTING?), NAME" into `out`
 * (when not NULL) and returns how many there are. */
int p2pk_param_unknown(char *out, size_t len);
/* Logs one warning per unknown name, once per process (entry points call it). */
void p2pk_param_warn_unknown(void);

/* `name`'s entry (a name not in the registry aborts: a bug). */
const p2pk_param_def *p2pk_param_def_of(const char *name);
/* `name`'s entry, or NULL when it is not a setting (a name from outside). */
const p2pk_param_def *p2pk_param_find(const char *name);
/* 1 the first time a refused value of `name` is read (as its default, with
 * a warning: setting.c), 0 after. */
int p2pk_param_first_refusal(const char *name);
size_t p2pk_param_count(void);
const p2pk_param_def *p2pk_param_at(size_t i);
/* Tests: forget cached values. */
void p2pk_param_reset(void);

/* Parse "64", "4K", "1M", "2G" (also KiB/MiB/GiB); 0 on success, -1 if malformed. */
int p2pk_parse_size(const char *text, size_t *bytes_p);
/* A whole number and nothing else (no suffix, within int64); 0 on success. */
int p2pk_parse_int(const char *text, long long *out);
/* `pattern` with %h (this host) and %p (this process) expanded into `path`;
 * -1 when the result does not fit (P2PKIT_DEBUG_FILE, the log's file). */
int p2pk_param_path(const char *pattern, char *path, size_t len);

#endif
