#include "perf/nccl_dl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "core/check.h"
#include "core/param.h"

/* NCCL 2.12 is the oldest with ncclSend/ncclRecv, ncclAvg and bfloat16 together. */
#define P2PK_NCCL_MIN_VERSION 21200

p2pkit_status_t p2pk_nccl_load(p2pk_nccl_api *api, const char *path) {
  memset(api, 0, sizeof *api);
  const char *name = path ? path : p2pk_param_str("P2PKIT_NCCL_LIB");
  void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "cannot load NCCL (%s): %s; set P2PKIT_NCCL_LIB", name,
                     dlerror());
  p2pk_nccl_api a;
  memset(&a, 0, sizeof a);
  struct {
    void **slot;
    const char *name;
    int required;
  } table[] = {
      {(void **)&a.GetVersion, "ncclGetVersion", 1},
      {(void **)&a.GetUniqueId, "ncclGetUniqueId", 1},
      {(void **)&a.CommInitRank, "ncclCommInitRank", 1},
      {(void **)&a.CommInitAll, "ncclCommInitAll", 1},
      {(void **)&a.CommDestroy, "ncclCommDestroy", 1},
      {(void **)&a.GetErrorString, "ncclGetErrorString", 1},
      {(void **)&a.AllReduce, "ncclAllReduce", 1},
      {(void **)&a.Broadcast, "ncclBroadcast", 1},
      {(void **)&a.Reduce, "ncclReduce", 1},
      {(void **)&a.AllGather, "ncclAllGather", 1},
      {(void **)&a.ReduceScatter, "ncclReduceScatter", 1},
      {(void **)&a.Send, "ncclSend", 1},
      {(void **)&a.Recv, "ncclRecv", 1},
      {(void **)&a.GroupStart, "ncclGroupStart", 1},
      {(void **)&a.GroupEnd, "ncclGroupEnd", 1},
      {(void **)&a.CommRegister, "ncclCommRegister", 0},
      {(void **)&a.CommDeregister, "ncclCommDeregister", 0},
      {(void **)&a.CommGetAsyncError, "ncclCommGetAsyncError", 0},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    *table[i].slot = dlsym(lib, table[i].name);
    if (!*table[i].slot && table[i].required) {
      dlclose(lib);
      return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "NCCL (%s) lacks %s; it is too old", name,
                       table[i].name);
    }
  }
  if (!a.CommRegister || !a.CommDeregister) a.CommRegister = NULL, a.CommDeregister = NULL;
  int v = 0;
  if (a.GetVersion(&v) != P2PK_NCCL_SUCCESS || v < P2PK_NCCL_MIN_VERSION) {
    char have[32], want[32];
    p2pk_nccl_version_str(v, have, sizeof have);
    p2pk_nccl_version_str(P2PK_NCCL_MIN_VERSION, want, sizeof want);
    dlclose(lib);
    return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "NCCL (%s) is version %s; p2pkit perf needs %s or later",
                     name, have, want);
  }
  a.lib = lib;
  a.version = v;
  snprintf(a.path, sizeof a.path, "%s", name);
  *api = a;
  return P2PKIT_SUCCESS;
}

void p2pk_nccl_unload(p2pk_nccl_api *api) {
  /* NCCL keeps threads and atexit state; unmapping it under them is unsafe,
   * so the library stays loaded for the life of the process. */
  memset(api, 0, sizeof *api);
}

int p2pk_nccl_dtype(p2pkit_dtype_t dtype) {
  switch (dtype) {
    case P2PKIT_FLOAT32: return P2PK_NCCL_FLOAT32;
    case P2PKIT_FLOAT16: return P2PK_NCCL_FLOAT16;
    case P2PKIT_BFLOAT16: return P2PK_NCCL_BFLOAT16;
    case P2PKIT_FLOAT64: return P2PK_NCCL_FLOAT64;
    case P2PKIT_INT32: return P2PK_NCCL_INT32;
    case P2PKIT_INT64: return P2PK_NCCL_INT64;
    case P2PKIT_UINT8: return P2PK_NCCL_UINT8;
    default: return -1;
  }
}

int p2pk_nccl_op(p2pkit_redop_t op) {
  switch (op) {
    case P2PKIT_SUM: return P2PK_NCCL_SUM;
    case P2PKIT_PROD: return P2PK_NCCL_PROD;
    case P2PKIT_MIN: return P2PK_NCCL_MIN;
    case P2PKIT_MAX: return P2PK_NCCL_MAX;
    case P2PKIT_AVG: return P2PK_NCCL_AVG;
    default: return -1;
  }
}

void p2pk_nccl_version_str(int code, char *buf, size_t len) {
  if (code >= 10000) /* 2.9 and later: X*10000 + Y*100 + Z */
    snprintf(buf, len, "%d.%d.%d", code / 10000, code / 100 % 100, code % 100);
  else if (code > 0) /* up to 2.8: X*1000 + Y*100 + Z */
    snprintf(buf, len, "%d.%d.%d", code / 1000, code / 100 % 10, code % 100);
  else
    snprintf(buf, len, "unknown");
}

p2pkit_status_t p2pk_nccl_check(const p2pk_nccl_api *api, p2pk_nccl_result r, const char *what) {
  if (r == P2PK_NCCL_SUCCESS) return P2PKIT_SUCCESS;
  return p2pk_fail(P2PKIT_ERR_REMOTE, "%s failed: %s (NCCL error %d)", what,
                   api->GetErrorString ? api->GetErrorString(r) : "?", r);
}
