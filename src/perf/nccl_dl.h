/* NCCL, loaded at run time as the baseline of `p2pkit perf`: our own copies
 * of the few declarations used (values as in nccl.h, a stable ABI), so nothing
 * of NCCL is needed to build and a machine without it gets an explanation. */
#ifndef P2PK_NCCL_DL_H
#define P2PK_NCCL_DL_H

#include <stddef.h>

#include "p2pkit.h"

typedef struct p2pk_nccl_comm *p2pk_nccl_comm_t; /* ncclComm_t */

#define P2PK_NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[P2PK_NCCL_UNIQUE_ID_BYTES];
} p2pk_nccl_id; /* ncclUniqueId */

/* ncclResult_t */
enum { P2PK_NCCL_SUCCESS = 0, P2PK_NCCL_IN_PROGRESS = 7 };

/* ncclDataType_t */
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
  P2PK_NCCL_BFLOAT16 = 9
};

/* ncclRedOp_t */
enum { P2PK_NCCL_SUM = 0, P2PK_NCCL_PROD = 1, P2PK_NCCL_MAX = 2, P2PK_NCCL_MIN = 3, P2PK_NCCL_AVG = 4 };

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
  /* optional (NULL when the library lacks them) */
  p2pk_nccl_result (*CommRegister)(p2pk_nccl_comm_t, void *, size_t, void **);
  p2pk_nccl_result (*CommDeregister)(p2pk_nccl_comm_t, void *);
  p2pk_nccl_result (*CommGetAsyncError)(p2pk_nccl_comm_t, p2pk_nccl_result *);
} p2pk_nccl_api;

/* dlopen `path` (NULL: P2PKIT_NCCL_LIB, default libnccl.so.2) and resolve
 * the symbols. P2PKIT_ERR_UNSUPPORTED with the reason (library missing, a
 * symbol missing, version too old); `api` is left zeroed on failure. */
p2pkit_status_t p2pk_nccl_load(p2pk_nccl_api *api, const char *path);
void p2pk_nccl_unload(p2pk_nccl_api *api);
/* NCCL's value for a p2pkit dtype / op, -1 when there is none. */
int p2pk_nccl_dtype(p2pkit_dtype_t dtype);
int p2pk_nccl_op(p2pkit_redop_t op);
/* "2.28.3" from a NCCL_VERSION_CODE (both encodings NCCL has used). */
void p2pk_nccl_version_str(int code, char *buf, size_t len);
/* P2PKIT_SUCCESS, or P2PKIT_ERR_REMOTE with "what: NCCL's error string". */
p2pkit_status_t p2pk_nccl_check(const p2pk_nccl_api *api, p2pk_nccl_result r, const char *what);

#endif
