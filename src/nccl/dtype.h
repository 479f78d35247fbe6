/* SPDX-License-Identifier: BSD-3-Clause */
/* p2pkit's data types and reduction operations against NCCL's: one table,
 * pure data. Which ones p2pkit's own kernels carry, which NCCL value each
 * maps to and from which NCCL version. p2pkit_dtype_size / _name read it. */
#ifndef P2PK_NCCL_DTYPE_H
#define P2PK_NCCL_DTYPE_H

#include <stddef.h>

#include "p2pkit.h"

/* p2pkit's own kernels carry the dtypes below this (float32 .. uint8); the
 * later ones (int8, uint32, uint64, fp8) go through NCCL only. Tests that
 * loop over the types p2pkit reduces use it; p2pk_dtype_native is the rule. */
#define P2PK_DTYPE_NATIVE_COUNT 7

typedef struct {
  const char *name; /* p2pkit_dtype_name: torch's name for the type */
  size_t size;      /* bytes per element */
  int nccl;         /* ncclDataType_t */
  int nccl_since;   /* first NCCL_VERSION_CODE that has the type */
  int native;       /* p2pkit's own kernels (P2P, copy engine, staged) carry it */
} p2pk_dtype_info;

typedef struct {
  const char *name; /* p2pkit_redop_name */
  int nccl;         /* ncclRedOp_t */
  int nccl_since;   /* first NCCL_VERSION_CODE that has the op */
  int native;       /* p2pkit's own kernels apply it (to every native dtype) */
} p2pk_redop_info;

/* The row of a dtype / op; NULL when it is not a p2pkit_dtype_t / _redop_t. */
const p2pk_dtype_info *p2pk_dtype_info_of(p2pkit_dtype_t dtype);
const p2pk_redop_info *p2pk_redop_info_of(p2pkit_redop_t op);
/* 1 when p2pkit's own kernels carry `dtype`. */
int p2pk_dtype_native(p2pkit_dtype_t dtype);
/* NCCL's value for a p2pkit dtype / op, -1 when there is none. */
int p2pk_nccl_dtype(p2pkit_dtype_t dtype);
int p2pk_nccl_op(p2pkit_redop_t op);
/* The p2pkit dtype / op with NCCL's value `nccl`; -1 when none maps to it. */
int p2pk_dtype_from_nccl(int nccl);
int p2pk_redop_from_nccl(int nccl);

/* P2PKIT_SUCCESS when p2pkit's own paths carry `dtype` (a valid one); else
 * P2PKIT_ERR_UNSUPPORTED: "`who`: rank R: int8 needs the NCCL path
 * (P2PKIT_NCCL)". */
p2pkit_status_t p2pk_dtype_check_native(const char *who, int rank, p2pkit_dtype_t dtype);
/* Whether NCCL `nccl_version` (NCCL_VERSION_CODE) on GPUs of compute
 * capability `cc` (major * 10 + minor; 0: not known, not checked) carries
 * `dtype` (with `op` when has_op). P2PKIT_ERR_UNSUPPORTED naming the type or
 * op, the version that has it and the loaded one; fp8 reductions need sm_90
 * (NCCL's rule; fp8 all-gather and broadcast do not). */
p2pkit_status_t p2pk_dtype_check_nccl(const char *who, p2pkit_dtype_t dtype, int has_op,
                                      p2pkit_redop_t op, int nccl_version, int cc);

#endif
