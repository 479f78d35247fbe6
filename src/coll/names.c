/* SPDX-License-Identifier: BSD-3-Clause */
/* Names and sizes of the public enumerations, and the options' defaults and
 * check. */
#include <stddef.h>

#include "coll/coll.h"
#include "core/check.h"
#include "nccl/dtype.h"
#include "p2pkit.h"

size_t p2pkit_dtype_size(p2pkit_dtype_t d) {
  const p2pk_dtype_info *i = p2pk_dtype_info_of(d);
  return i ? i->size : 0;
}

const char *p2pkit_dtype_name(p2pkit_dtype_t d) {
  const p2pk_dtype_info *i = p2pk_dtype_info_of(d);
  return i ? i->name : "invalid";
}

const char *p2pkit_redop_name(p2pkit_redop_t op) {
  static const char *const names[P2PKIT_REDOP_COUNT] = {"sum", "prod", "min", "max", "avg"};
  return (int)op >= 0 && op < P2PKIT_REDOP_COUNT ? names[op] : "invalid";
}

void p2pkit_comm_opts_init(p2pkit_comm_opts_t *o) {
  const p2pkit_comm_opts_t defaults = P2PKIT_COMM_OPTS_INIT;
  if (o) *o = defaults;
}

/* The caller's options as this library knows them: filled by
 * P2PKIT_COMM_OPTS_INIT or p2pkit_comm_opts_init with this header's size
 * and version (the only ones version 1 has). */
p2pkit_status_t p2pk_comm_opts_check(const p2pkit_comm_opts_t *o) {
  if (o->size == 0 || o->version == 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "p2pkit_comm_opts_t: size %zu, version %u: fill "
                     "it with p2pkit_comm_opts_init or P2PKIT_COMM_OPTS_INIT", o->size, o->version);
  if (o->version > P2PKIT_COMM_OPTS_VERSION)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "p2pkit_comm_opts_t version %u is newer than this "
                     "library's (%d): the caller was built against a newer p2pkit.h", o->version,
                     P2PKIT_COMM_OPTS_VERSION);
  if (o->size != sizeof *o)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "p2pkit_comm_opts_t.size is %zu, but a version %u "
                     "one has %zu bytes: fill it with p2pkit_comm_opts_init or "
                     "P2PKIT_COMM_OPTS_INIT", o->size, o->version, sizeof *o);
  return P2PKIT_SUCCESS;
}
