/* Names and sizes of the public enumerations, and the options' defaults. */
#include <stddef.h>

#include "p2pkit.h"

size_t p2pkit_dtype_size(p2pkit_dtype_t d) {
  switch (d) {
    case P2PKIT_FLOAT32: case P2PKIT_INT32: return 4;
    case P2PKIT_FLOAT16: case P2PKIT_BFLOAT16: return 2;
    case P2PKIT_FLOAT64: case P2PKIT_INT64: return 8;
    case P2PKIT_UINT8: return 1;
    default: return 0;
  }
}

const char *p2pkit_dtype_name(p2pkit_dtype_t d) {
  static const char *const names[P2PKIT_DTYPE_COUNT] = {"float32", "float16", "bfloat16",
                                                        "float64", "int32",   "int64", "uint8"};
  return (int)d >= 0 && d < P2PKIT_DTYPE_COUNT ? names[d] : "invalid";
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
