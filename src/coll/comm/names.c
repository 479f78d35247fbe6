/* Names and sizes of the public enumerations, and the options' defaults. */
#include <stddef.h>

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
  if (!o) return;
  o->nranks = o->rank = o->device = -1;
  o->addr = NULL;
  o->port = -1;
  o->secret = NULL;
  o->timeout_s = -1;
}
