/* Settings: one registry (name, default, help), each read from the
 * environment once, on first use, and cached. `p2pkit env` lists them. */
#ifndef P2PK_PARAM_H
#define P2PK_PARAM_H

#include <stddef.h>
#include <stdint.h>

#include "p2pkit.h"

/* What a setting's text must be; p2pk_param_check refuses anything else. */
enum { P2PK_PARAM_STR, P2PK_PARAM_INT, P2PK_PARAM_SIZE };

typedef struct {
  const char *name;
  const char *def;
  const char *help;
  int kind; /* P2PK_PARAM_*: how p2pk_param_int / _size / _str read it */
} p2pk_param_def;

/* Current value (environment or default); never NULL. Aborts on a name not in
 * the registry: that is a bug, not an input. */
const char *p2pk_param_str(const char *name);
/* Integer value; the default when the text is not a number (entry points
 * call p2pk_param_check first, so a malformed value is refused, not
 * replaced). */
int64_t p2pk_param_int(const char *name);
/* Byte size with an optional K/M/G suffix (powers of 1024). */
size_t p2pk_param_size(const char *name);
/* 1 when set in the environment, 0 when the default is in force. */
int p2pk_param_is_set(const char *name);

/* Every setting taken from the environment parses as its kind says:
 * P2PKIT_ERR_INVALID_ARGUMENT naming the first that does not ("P2PKIT_X='yes'
 * is not a whole number"). Copy contexts, communicators and the doctor call
 * it, so P2PKIT_P2P_DISABLE=yes cannot quietly mean 0. */
p2pkit_status_t p2pk_param_check(void);

/* P2PKIT_* names in the environment that are not settings (a typo such as
 * P2PKIT_P2P_DISABLED, which would otherwise be ignored in silence). The
 * build and test scripts' own variables (P2PKIT_LIB, P2PKIT_SANITIZE, ...)
 * are not reported. Writes "NAME (did you mean SETTING?), NAME" into `out`
 * (when not NULL) and returns how many there are. */
int p2pk_param_unknown(char *out, size_t len);
/* Logs one warning per unknown name, once per process (entry points call it). */
void p2pk_param_warn_unknown(void);

size_t p2pk_param_count(void);
const p2pk_param_def *p2pk_param_at(size_t i);
/* Tests: forget cached values. */
void p2pk_param_reset(void);

/* Parse "64", "4K", "1M", "2G" (also KiB/MiB/GiB); 0 on success, -1 if malformed. */
int p2pk_parse_size(const char *text, size_t *bytes_p);

#endif
