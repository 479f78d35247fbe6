/* SPDX-License-Identifier: BSD-3-Clause */
#include "nccl/nccl_dl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/bounded.h"
#include "core/check.h"
#include "core/param.h"

/* NCCL 2.12 is the oldest with ncclSend/ncclRecv, ncclAvg and bfloat16 together. */
#define P2PK_NCCL_MIN_VERSION 21200

/* Every symbol resolved: where it goes, whether the library must have it,
 * and for the optional ones the first release that has it (for the line
 * p2pk_nccl_require writes). */
typedef struct {
  size_t slot; /* offsetof in p2pk_nccl_api */
  const char *name;
  int required;
  int since; /* NCCL_VERSION_CODE */
} sym_row;

#define SYM(field, req, since) {offsetof(p2pk_nccl_api, field), "nccl" #field, req, since}
static const sym_row syms[] = {
    SYM(GetVersion, 1, 0),         SYM(GetUniqueId, 1, 0),
    SYM(CommInitRank, 1, 0),       SYM(CommInitAll, 1, 0),
    SYM(CommDestroy, 1, 0),        SYM(GetErrorString, 1, 0),
    SYM(AllReduce, 1, 0),          SYM(Broadcast, 1, 0),
    SYM(Reduce, 1, 0),             SYM(AllGather, 1, 0),
    SYM(ReduceScatter, 1, 0),      SYM(Send, 1, 0),
    SYM(Recv, 1, 0),               SYM(GroupStart, 1, 0),
    SYM(GroupEnd, 1, 0),           SYM(CommRegister, 0, 21901),
    SYM(CommDeregister, 0, 21901), SYM(CommGetAsyncError, 0, 2402),
    SYM(CommAbort, 0, 2402),       SYM(CommInitRankConfig, 0, 21403),
    SYM(CommFinalize, 0, 21403),   SYM(CommSplit, 0, 21801),
    SYM(RedOpCreatePreMulSum, 0, 21101), SYM(RedOpDestroy, 0, 21101),
};
#undef SYM
#define NSYMS (sizeof syms / sizeof syms[0])

static void **slot_of(p2pk_nccl_api *a, const sym_row *r) { return (void **)((char *)a + r->slot); }

static p2pkit_status_t resolve(void *lib, const char *name, p2pk_nccl_api *a) {
  for (size_t i = 0; i < NSYMS; i++) {
    *slot_of(a, &syms[i]) = dlsym(lib, syms[i].name);
    if (!*slot_of(a, &syms[i]) && syms[i].required)
      return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "NCCL (%s) lacks %s; it is too old", name,
                       syms[i].name);
  }
  if (!a->CommRegister || !a->CommDeregister) a->CommRegister = NULL, a->CommDeregister = NULL;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_nccl_load(p2pk_nccl_api *api, const char *path) {
  memset(api, 0, sizeof *api);
  const char *name = path ? path : p2pk_param_str("P2PKIT_NCCL_LIB");
  void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "cannot load NCCL (%s): %s; set P2PKIT_NCCL_LIB", name,
                     dlerror());
  p2pk_nccl_api a;
  memset(&a, 0, sizeof a);
  p2pkit_status_t st = resolve(lib, name, &a);
  if (st != P2PKIT_SUCCESS) {
    dlclose(lib);
    return st;
  }
  int v = 0;
  if (a.GetVersion(&v) != P2PK_NCCL_SUCCESS || v < P2PK_NCCL_MIN_VERSION) {
    char have[32], want[32];
    p2pk_nccl_version_str(v, have, sizeof have);
    p2pk_nccl_version_str(P2PK_NCCL_MIN_VERSION, want, sizeof want);
    dlclose(lib);
    return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "NCCL (%s) is version %s; p2pkit needs %s or later",
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

p2pkit_status_t p2pk_nccl_require(const p2pk_nccl_api *api, const char *symbol) {
  const sym_row *r = NULL;
  for (size_t i = 0; i < NSYMS && !r; i++)
    if (strcmp(syms[i].name, symbol) == 0) r = &syms[i];
  if (!r) return p2pk_fail(P2PKIT_ERR_INTERNAL, "%s is not an NCCL call p2pkit loads", symbol);
  if (!api || !api->lib)
    return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "%s: NCCL is not loaded", symbol);
  if (*(void *const *)((const char *)api + r->slot)) return P2PKIT_SUCCESS;
  char have[32], want[32];
  p2pk_nccl_version_str(api->version, have, sizeof have);
  p2pk_nccl_version_str(r->since, want, sizeof want);
  return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "NCCL %s (%s) lacks %s; NCCL %s or later has it", have,
                   api->path, symbol, want);
}

void p2pk_nccl_config_init(p2pk_nccl_config *cfg) {
  const int u = P2PK_NCCL_CONFIG_UNDEF_INT;
  memset(cfg, 0, sizeof *cfg);
  cfg->size = sizeof *cfg;
  cfg->magic = P2PK_NCCL_CONFIG_MAGIC;
  cfg->version = P2PK_NCCL_CONFIG_VERSION;
  cfg->blocking = cfg->cga_cluster_size = cfg->min_ctas = cfg->max_ctas = u;
  cfg->split_share = cfg->traffic_class = cfg->collnet_enable = cfg->cta_policy = u;
  cfg->shrink_share = cfg->nvls_ctas = cfg->n_channels_per_net_peer = u;
  cfg->nvlink_centric_sched = u;
  cfg->net_name = cfg->comm_name = NULL;
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

static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static int shared_tried;
static p2pk_nccl_api shared_api;
static char shared_why[400];

p2pkit_status_t p2pk_nccl_shared(const p2pk_nccl_api **api, char *why, size_t len) {
  pthread_mutex_lock(&shared_lock);
  if (!shared_tried) {
    shared_tried = 1;
    if (p2pk_nccl_load(&shared_api, NULL) != P2PKIT_SUCCESS)
      snprintf(shared_why, sizeof shared_why, "%s", p2pkit_last_error());
  }
  const int ok = shared_api.lib != NULL;
  pthread_mutex_unlock(&shared_lock);
  *api = ok ? &shared_api : NULL;
  if (why && len) snprintf(why, len, "%s", ok ? "" : shared_why);
  return ok ? P2PKIT_SUCCESS : p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "%s", shared_why);
}

void p2pk_nccl_shared_set(const p2pk_nccl_api *api) {
  pthread_mutex_lock(&shared_lock);
  shared_tried = 1;
  shared_api = *api;
  pthread_mutex_unlock(&shared_lock);
}

typedef struct {
  const p2pk_nccl_api *api;
  p2pk_nccl_comm_t comm;
} abort_args;

void p2pk_nccl_abort_now(const p2pk_nccl_api *api, p2pk_nccl_comm_t comm) {
  if (api->CommAbort) api->CommAbort(comm);
  else api->CommDestroy(comm);
}

static void abort_now(void *arg) {
  const abort_args *a = arg;
  p2pk_nccl_abort_now(a->api, a->comm);
}

int p2pk_nccl_abort_until(const p2pk_nccl_api *api, p2pk_nccl_comm_t comm, uint64_t until_ns) {
  abort_args a = {api, comm};
  const int r = p2pk_run_until(abort_now, &a, sizeof a, until_ns);
  if (r < 0) abort_now(&a); /* no thread: on the caller's */
  return r;
}
