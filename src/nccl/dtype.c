/* SPDX-License-Identifier: BSD-3-Clause */
#include "nccl/dtype.h"

#include <stdio.h>

#include "core/check.h"
#include "nccl/nccl_dl.h"

/* NCCL_VERSION_CODE of the releases that brought a type or an op (codes
 * before 2.9 are X*1000 + Y*100 + Z, later ones X*10000 + Y*100 + Z: both
 * grow with the release, so they compare). */
#define V2_0 2000
#define V2_10 21000
#define V2_24 22400

static const p2pk_dtype_info dtypes[P2PKIT_DTYPE_COUNT] = {
    [P2PKIT_FLOAT32] = {"float32", 4, P2PK_NCCL_FLOAT32, V2_0, 1},
    [P2PKIT_FLOAT16] = {"float16", 2, P2PK_NCCL_FLOAT16, V2_0, 1},
    [P2PKIT_BFLOAT16] = {"bfloat16", 2, P2PK_NCCL_BFLOAT16, V2_10, 1},
    [P2PKIT_FLOAT64] = {"float64", 8, P2PK_NCCL_FLOAT64, V2_0, 1},
    [P2PKIT_INT32] = {"int32", 4, P2PK_NCCL_INT32, V2_0, 1},
    [P2PKIT_INT64] = {"int64", 8, P2PK_NCCL_INT64, V2_0, 1},
    [P2PKIT_UINT8] = {"uint8", 1, P2PK_NCCL_UINT8, V2_0, 1},
    [P2PKIT_INT8] = {"int8", 1, P2PK_NCCL_INT8, V2_0, 0},
    [P2PKIT_UINT32] = {"uint32", 4, P2PK_NCCL_UINT32, V2_0, 0},
    [P2PKIT_UINT64] = {"uint64", 8, P2PK_NCCL_UINT64, V2_0, 0},
    [P2PKIT_FLOAT8_E4M3] = {"float8_e4m3fn", 1, P2PK_NCCL_FLOAT8E4M3, V2_24, 0},
    [P2PKIT_FLOAT8_E5M2] = {"float8_e5m2", 1, P2PK_NCCL_FLOAT8E5M2, V2_24, 0},
};

static const p2pk_redop_info redops[P2PKIT_REDOP_COUNT] = {
    [P2PKIT_SUM] = {"sum", P2PK_NCCL_SUM, V2_0, 1},
    [P2PKIT_PROD] = {"prod", P2PK_NCCL_PROD, V2_0, 1},
    [P2PKIT_MIN] = {"min", P2PK_NCCL_MIN, V2_0, 1},
    [P2PKIT_MAX] = {"max", P2PK_NCCL_MAX, V2_0, 1},
    [P2PKIT_AVG] = {"avg", P2PK_NCCL_AVG, V2_10, 1},
};

const p2pk_dtype_info *p2pk_dtype_info_of(p2pkit_dtype_t d) {
  return (int)d >= 0 && d < P2PKIT_DTYPE_COUNT ? &dtypes[d] : NULL;
}

const p2pk_redop_info *p2pk_redop_info_of(p2pkit_redop_t op) {
  return (int)op >= 0 && op < P2PKIT_REDOP_COUNT ? &redops[op] : NULL;
}

size_t p2pkit_dtype_size(p2pkit_dtype_t d) {
  const p2pk_dtype_info *i = p2pk_dtype_info_of(d);
  return i ? i->size : 0;
}

const char *p2pkit_dtype_name(p2pkit_dtype_t d) {
  const p2pk_dtype_info *i = p2pk_dtype_info_of(d);
  return i ? i->name : "invalid";
}

const char *p2pkit_redop_name(p2pkit_redop_t op) {
  const p2pk_redop_info *i = p2pk_redop_info_of(op);
  return i ? i->name : "invalid";
}

int p2pk_dtype_native(p2pkit_dtype_t d) {
  const p2pk_dtype_info *i = p2pk_dtype_info_of(d);
  return i && i->native;
}

int p2pk_nccl_dtype(p2pkit_dtype_t d) {
  const p2pk_dtype_info *i = p2pk_dtype_info_of(d);
  return i ? i->nccl : -1;
}

int p2pk_nccl_op(p2pkit_redop_t op) {
  const p2pk_redop_info *i = p2pk_redop_info_of(op);
  return i ? i->nccl : -1;
}

int p2pk_dtype_from_nccl(int nccl) {
  for (int d = 0; d < P2PKIT_DTYPE_COUNT; d++)
    if (dtypes[d].nccl == nccl) return d;
  return -1;
}

int p2pk_redop_from_nccl(int nccl) {
  for (int op = 0; op < P2PKIT_REDOP_COUNT; op++)
    if (redops[op].nccl == nccl) return op;
  return -1;
}

p2pkit_status_t p2pk_dtype_check_native(const char *who, int rank, p2pkit_dtype_t d) {
  const p2pk_dtype_info *i = p2pk_dtype_info_of(d);
  if (!i)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: data type %d is not a "
                     "p2pkit_dtype_t", who, rank, (int)d);
  if (!i->native)
    return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "%s: rank %d: %s needs the NCCL path (P2PKIT_NCCL)",
                     who, rank, i->name);
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_dtype_check_nccl(const char *who, p2pkit_dtype_t d, int has_op,
                                      p2pkit_redop_t op, int nccl_version, int cc) {
  const p2pk_dtype_info *di = p2pk_dtype_info_of(d);
  const p2pk_redop_info *oi = has_op ? p2pk_redop_info_of(op) : NULL;
  if (!di || (has_op && !oi))
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: %s %d is not a p2pkit_%s_t", who,
                     di ? "operation" : "data type", di ? (int)op : (int)d, di ? "redop" : "dtype");
  char have[32], want[32];
  p2pk_nccl_version_str(nccl_version, have, sizeof have);
  const int op_later = oi && oi->nccl_since > di->nccl_since;
  const int since = op_later ? oi->nccl_since : di->nccl_since;
  if (nccl_version < since) {
    p2pk_nccl_version_str(since, want, sizeof want);
    const char *what = op_later ? oi->name : di->name;
    return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "%s: %s needs NCCL %s or later; the loaded NCCL is %s",
                     who, what, want, have);
  }
  int fp8 = d == P2PKIT_FLOAT8_E4M3 || d == P2PKIT_FLOAT8_E5M2;
  if (fp8 && has_op && cc > 0 && cc < 90)
    return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "%s: NCCL reduces %s only on sm_90 or later; this GPU "
                     "is sm_%d", who, di->name, cc);
  /* NCCL's avg is a sum pre-multiplied by 1/n in the type itself, which
   * it makes for half, bfloat16, float and double only: an fp8 avg is
   * ncclInvalidArgument (NCCL 2.28.3 on one H100, p2pkit perf -d all -o all). */
  if (fp8 && has_op && op == P2PKIT_AVG)
    return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "%s: NCCL has no avg for %s (it answers "
                     "ncclInvalidArgument): sum, then scale", who, di->name);
  return P2PKIT_SUCCESS;
}
