/* SPDX-License-Identifier: BSD-3-Clause */
/* NCCL, loaded at run time: the baseline of `p2pkit perf`, the doctor's probe
 * and the engine under p2pkit's NCCL path. Our own declarations of what is
 * used (values and layouts as NCCL's nccl.h has them, a stable ABI), so
 * nothing of NCCL is needed to build and a machine without it, or with one
 * too old for a call, gets a sentence naming what is missing. */
#ifndef P2PK_NCCL_DL_H
#define P2PK_NCCL_DL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl/dtype.h"
#include "p2pkit.h"

typedef struct p2pk_nccl_comm *p2pk_nccl_comm_t; /* ncclComm_t */

#define P2PK_NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[P2PK_NCCL_UNIQUE_ID_BYTES];
} p2pk_nccl_id; /* ncclUniqueId */

/* ncclResult_t */
enum {
  P2PK_NCCL_SUCCESS = 0,
  P2PK_NCCL_UNHANDLED_CUDA_ERROR = 1,
  P2PK_NCCL_SYSTEM_ERROR = 2,
  P2PK_NCCL_INTERNAL_ERROR = 3,
  P2PK_NCCL_INVALID_ARGUMENT = 4,
  P2PK_NCCL_INVALID_USAGE = 5,
  P2PK_NCCL_REMOTE_ERROR = 6,
  P2PK_NCCL_IN_PROGRESS = 7,
  P2PK_NCCL_NUM_RESULTS = 8
};

/* ncclDataType_t (the two fp8 types from NCCL 2.24; their reductions need
 * sm_90 or later, NCCL's own rule) */
enum {
  P2PK_NCCL_INT8 = 0,
  P2PK_NCCL_UINT8 = 1,
  P2PK_NCCL_INT32 = 2,
  P2PK_NCCL_UINT32 = 3,
  P2PK_NCCL_INT64 = 4,
  P2PK_NCCL_UINT64 = 5,
  P2PK_NCCL_FLOAT16 = 6,
  P2PK_NCCL_FLOAT32 = 7,
  P2PK_NCCL_FLOAT64 = 8,
  P2PK_NCCL_BFLOAT16 = 9,
  P2PK_NCCL_FLOAT8E4M3 = 10,
  P2PK_NCCL_FLOAT8E5M2 = 11,
  P2PK_NCCL_NUM_TYPES = 12
};

/* ncclRedOp_t (the built-in ones) */
enum {
  P2PK_NCCL_SUM = 0,
  P2PK_NCCL_PROD = 1,
  P2PK_NCCL_MAX = 2,
  P2PK_NCCL_MIN = 3,
  P2PK_NCCL_AVG = 4,
  P2PK_NCCL_NUM_OPS = 5
};

#define P2PK_NCCL_SPLIT_NOCOLOR (-1)     /* NCCL_SPLIT_NOCOLOR */
#define P2PK_NCCL_CONFIG_UNDEF_INT INT_MIN /* NCCL_CONFIG_UNDEF_INT */
#define P2PK_NCCL_CONFIG_MAGIC 0xcafebeefu
/* The layout below is NCCL 2.28's. NCCL reads `size` bytes of a config and
 * takes the fields newer than `version` as unset, and its fields have only
 * ever been appended: an older library reads the prefix it knows, a newer
 * one treats its own later fields as unset. */
#define P2PK_NCCL_CONFIG_VERSION 22800

/* ncclConfig_t, as NCCL 2.28 lays it out (ncclConfig_v22800). Fill it with
 * p2pk_nccl_config_init (NCCL_CONFIG_INITIALIZER's values), then set fields. */
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;            /* 2.14: 0 = calls may return IN_PROGRESS */
  int cga_cluster_size;    /* 2.17 */
  int min_ctas;            /* 2.17 */
  int max_ctas;            /* 2.17 */
  const char *net_name;    /* 2.17 */
  int split_share;         /* 2.18: a split child shares its parent's resources */
  int traffic_class;       /* 2.26 */
  const char *comm_name;   /* 2.27 */
  int collnet_enable;      /* 2.27 */
  int cta_policy;          /* 2.27 */
  int shrink_share;        /* 2.27 */
  int nvls_ctas;           /* 2.27 */
  int n_channels_per_net_peer; /* 2.28 */
  int nvlink_centric_sched;    /* 2.28 */
} p2pk_nccl_config;

void p2pk_nccl_config_init(p2pk_nccl_config *cfg);

typedef int p2pk_nccl_result; /* an enum in nccl.h: int-sized */

typedef struct p2pk_nccl_api_s {
  void *lib;
  int version;           /* NCCL_VERSION_CODE of the loaded library */
  char path[256];        /* what was loaded */
  p2pk_nccl_result (*GetVersion)(int *);
  p2pk_nccl_result (*GetUniqueId)(p2pk_nccl_id *);
  p2pk_nccl_result (*CommInitRank)(p2pk_nccl_comm_t *, int, p2pk_nccl_id, int);
  p2pk_nccl_result (*CommInitAll)(p2pk_nccl_comm_t *, int, const int *);
  p2pk_nccl_result (*CommDestroy)(p2pk_nccl_comm_t);
  const char *(*GetErrorString)(p2pk_nccl_result);
  p2pk_nccl_result (*AllReduce)(const void *, void *, size_t, int, int, p2pk_nccl_comm_t,
                                p2pkit_stream_t);
  p2pk_nccl_result (*Broadcast)(const void *, void *, size_t, int, int, p2pk_nccl_comm_t,
                                p2pkit_stream_t);
  p2pk_nccl_result (*Reduce)(const void *, void *, size_t, int, int, int, p2pk_nccl_comm_t,
                             p2pkit_stream_t);
  p2pk_nccl_result (*AllGather)(const void *, void *, size_t, int, p2pk_nccl_comm_t,
                                p2pkit_stream_t);
  p2pk_nccl_result (*ReduceScatter)(const void *, void *, size_t, int, int, p2pk_nccl_comm_t,
                                    p2pkit_stream_t);
  p2pk_nccl_result (*Send)(const void *, size_t, int, int, p2pk_nccl_comm_t, p2pkit_stream_t);
  p2pk_nccl_result (*Recv)(void *, size_t, int, int, p2pk_nccl_comm_t, p2pkit_stream_t);
  p2pk_nccl_result (*GroupStart)(void);
  p2pk_nccl_result (*GroupEnd)(void);
  /* optional (NULL when the library lacks them): check with p2pk_nccl_require */
  p2pk_nccl_result (*CommRegister)(p2pk_nccl_comm_t, void *, size_t, void **);
  p2pk_nccl_result (*CommDeregister)(p2pk_nccl_comm_t, void *);
  p2pk_nccl_result (*CommGetAsyncError)(p2pk_nccl_comm_t, p2pk_nccl_result *);
  p2pk_nccl_result (*CommAbort)(p2pk_nccl_comm_t);
  p2pk_nccl_result (*CommInitRankConfig)(p2pk_nccl_comm_t *, int, p2pk_nccl_id, int,
                                         p2pk_nccl_config *);
  p2pk_nccl_result (*CommFinalize)(p2pk_nccl_comm_t);
  p2pk_nccl_result (*CommSplit)(p2pk_nccl_comm_t, int, int, p2pk_nccl_comm_t *,
                                p2pk_nccl_config *);
  /* ncclRedOpCreatePreMulSum(op, scalar, datatype, residence, comm) and
   * ncclRedOpDestroy (2.11): the hierarchical average's 1/n. */
  p2pk_nccl_result (*RedOpCreatePreMulSum)(int *, void *, int, int, p2pk_nccl_comm_t);
  p2pk_nccl_result (*RedOpDestroy)(int, p2pk_nccl_comm_t);
} p2pk_nccl_api;

#define P2PK_NCCL_SCALAR_HOST 1 /* ncclScalarHostImmediate */

/* dlopen `path` (NULL: P2PKIT_NCCL_LIB, default libnccl.so.2) and resolve
 * the symbols. P2PKIT_ERR_UNSUPPORTED with the reason (library missing, a
 * required symbol missing, version too old); `api` is left zeroed on
 * failure. A missing optional symbol leaves its slot NULL. */
p2pkit_status_t p2pk_nccl_load(p2pk_nccl_api *api, const char *path);
void p2pk_nccl_unload(p2pk_nccl_api *api);
/* The process's NCCL for p2pkit's NCCL path: loaded on the first call
 * (P2PKIT_NCCL_LIB), kept for the life of the process. *api NULL and the
 * loader's line in `why` (also recorded as the last error) when it cannot
 * be loaded; every later call answers the same. */
p2pkit_status_t p2pk_nccl_shared(const p2pk_nccl_api **api, char *why, size_t len);
/* Tests: `api` (its lib non-NULL) is the process's NCCL from now on, as
 * if loaded: a fake NCCL's calls reach the NCCL path without a library or
 * a GPU. Never called by the library itself. */
void p2pk_nccl_shared_set(const p2pk_nccl_api *api);
/* P2PKIT_SUCCESS when the loaded library has `symbol` (NCCL's name, e.g.
 * "ncclCommSplit"); else P2PKIT_ERR_UNSUPPORTED with one line naming it, the
 * loaded version and the first version that has it. */
p2pkit_status_t p2pk_nccl_require(const p2pk_nccl_api *api, const char *symbol);
/* "2.28.3" from a NCCL_VERSION_CODE (both encodings NCCL has used). */
void p2pk_nccl_version_str(int code, char *buf, size_t len);
/* ncclCommAbort (ncclCommDestroy where the library lacks it) on a thread
 * of its own, waited for until `until_ns` (p2pk_now_ns's clock): 1 when it
 * returned by then, 0 when it is left to finish on its own (the thread
 * holds nothing of the caller's), -1 when no thread could be started (the
 * abort then ran on the caller's). NCCL's abort raises its kernels' abort
 * flag first, then joins its proxy threads, which can stay blocked in a
 * socket's poll (NVIDIA/nccl issue 1777): p2pkit_comm_abort must return. */
int p2pk_nccl_abort_until(const p2pk_nccl_api *api, p2pk_nccl_comm_t comm, uint64_t until_ns);
/* ncclCommAbort (ncclCommDestroy where the library lacks it) on the
 * caller's thread, however long it takes. */
void p2pk_nccl_abort_now(const p2pk_nccl_api *api, p2pk_nccl_comm_t comm);
/* P2PKIT_SUCCESS, or P2PKIT_ERR_REMOTE with "what: NCCL's error string". */
p2pkit_status_t p2pk_nccl_check(const p2pk_nccl_api *api, p2pk_nccl_result r, const char *what);

#endif
