/* SPDX-License-Identifier: BSD-3-Clause */
/* NCCL loaded at run time: a missing or wrong library fails cleanly with a
 * message naming it; the real one (when this machine has it) resolves; a
 * call the loaded library lacks is named with its version; our own
 * declarations agree with NCCL's header wherever this machine has one;
 * an abort that NCCL does not end is left behind at its deadline. On a
 * fake NCCL (p2pk_nccl_shared_set) without a GPU, the NCCL path whose
 * in-place all-to-all scratch could not be made: a later such call tries
 * again and says why, never copying through NULL; adopting the caller's
 * communicator then changes nothing; one NCCL group refuses each state's
 * second in-place all-to-all however many states it holds. */
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<nccl.h>)
#include <nccl.h>
#define HAVE_NCCL_H 1
#endif
#endif

#include "coll/paths/path.h"
#include "core/clock.h"
#include "core/param.h"
#include "nccl/nccl_dl.h"
#include "test.h"

static int zeroed(const p2pk_nccl_api *api) {
  return !api->lib && !api->version && !api->AllReduce && !api->GroupEnd && !api->GetErrorString;
}

TEST(missing_library) {
  p2pk_nccl_api api;
  memset(&api, 0x5a, sizeof api);
  CHECK_EQ(p2pk_nccl_load(&api, "/nonexistent/libnccl.so.2"), P2PKIT_ERR_UNSUPPORTED);
  CHECK(strstr(p2pkit_last_error(), "cannot load NCCL (/nonexistent/libnccl.so.2)") != NULL);
  CHECK(strstr(p2pkit_last_error(), "P2PKIT_NCCL_LIB") != NULL);
  CHECK(zeroed(&api));
}

TEST(setting_names_the_library) {
  setenv("P2PKIT_NCCL_LIB", "/nonexistent/other-nccl.so", 1);
  p2pk_param_reset();
  p2pk_nccl_api api;
  CHECK_EQ(p2pk_nccl_load(&api, NULL), P2PKIT_ERR_UNSUPPORTED);
  CHECK(strstr(p2pkit_last_error(), "/nonexistent/other-nccl.so") != NULL);
  unsetenv("P2PKIT_NCCL_LIB");
  p2pk_param_reset();
}

TEST(library_that_is_not_nccl) {
  p2pk_nccl_api api;
  CHECK_EQ(p2pk_nccl_load(&api, "libm.so.6"), P2PKIT_ERR_UNSUPPORTED);
  CHECK(strstr(p2pkit_last_error(), "lacks ncclGetVersion") != NULL);
  CHECK(zeroed(&api));
}

TEST(version_strings) {
  char v[32];
  p2pk_nccl_version_str(22803, v, sizeof v);
  CHECK_STR(v, "2.28.3");
  p2pk_nccl_version_str(21903, v, sizeof v);
  CHECK_STR(v, "2.19.3");
  p2pk_nccl_version_str(2708, v, sizeof v); /* the encoding before 2.9 */
  CHECK_STR(v, "2.7.8");
  p2pk_nccl_version_str(0, v, sizeof v);
  CHECK_STR(v, "unknown");
}

TEST(type_and_op_mapping) {
  /* Every p2pkit dtype and op has an NCCL value, and no two share one. */
  int seen[16] = {0};
  for (int d = 0; d < P2PKIT_DTYPE_COUNT; d++) {
    int v = p2pk_nccl_dtype((p2pkit_dtype_t)d);
    CHECK(v >= 0 && v < P2PK_NCCL_NUM_TYPES);
    if (v >= 0 && v < 16) CHECK_EQ(seen[v]++, 0);
  }
  /* nccl.h's values for the common ones */
  CHECK_EQ(p2pk_nccl_dtype(P2PKIT_FLOAT32), 7);
  CHECK_EQ(p2pk_nccl_dtype(P2PKIT_FLOAT16), 6);
  CHECK_EQ(p2pk_nccl_dtype(P2PKIT_BFLOAT16), 9);
  CHECK_EQ(p2pk_nccl_dtype(P2PKIT_UINT8), 1);
  CHECK_EQ(p2pk_nccl_dtype(P2PKIT_INT8), 0);
  CHECK_EQ(p2pk_nccl_dtype(P2PKIT_FLOAT8_E5M2), 11);
  CHECK_EQ(p2pk_nccl_op(P2PKIT_SUM), 0);
  CHECK_EQ(p2pk_nccl_op(P2PKIT_MAX), 2);
  CHECK_EQ(p2pk_nccl_op(P2PKIT_MIN), 3);
  CHECK_EQ(p2pk_nccl_op(P2PKIT_AVG), 4);
  CHECK_EQ(p2pk_nccl_dtype(P2PKIT_DTYPE_COUNT), -1);
  CHECK_EQ(p2pk_nccl_op(P2PKIT_REDOP_COUNT), -1);
}

/* A library without an optional call (as an older NCCL): the line names the
 * call, the loaded version and the first one that has it. */
TEST(missing_optional_call_is_named) {
  p2pk_nccl_api api;
  memset(&api, 0, sizeof api);
  CHECK_EQ(p2pk_nccl_require(&api, "ncclCommSplit"), P2PKIT_ERR_UNSUPPORTED);
  CHECK_STR(p2pkit_last_error(), "ncclCommSplit: NCCL is not loaded");
  api.lib = &api; /* any non-NULL handle: nothing is called */
  api.version = 21703;
  snprintf(api.path, sizeof api.path, "/opt/old/libnccl.so.2");
  CHECK_EQ(p2pk_nccl_require(&api, "ncclCommSplit"), P2PKIT_ERR_UNSUPPORTED);
  CHECK_STR(p2pkit_last_error(),
            "NCCL 2.17.3 (/opt/old/libnccl.so.2) lacks ncclCommSplit; NCCL 2.18.1 or later has it");
  CHECK_EQ(p2pk_nccl_require(&api, "ncclCommInitRankConfig"), P2PKIT_ERR_UNSUPPORTED);
  CHECK(strstr(p2pkit_last_error(), "NCCL 2.14.3 or later") != NULL);
  CHECK_EQ(p2pk_nccl_require(&api, "ncclCommAbort"), P2PKIT_ERR_UNSUPPORTED);
  CHECK(strstr(p2pkit_last_error(), "lacks ncclCommAbort; NCCL 2.4.2 or later") != NULL);
  CHECK_EQ(p2pk_nccl_require(&api, "ncclCommFinalize"), P2PKIT_ERR_UNSUPPORTED);
  CHECK_EQ(p2pk_nccl_require(&api, "ncclCommGetAsyncError"), P2PKIT_ERR_UNSUPPORTED);
  CHECK_EQ(p2pk_nccl_require(&api, "ncclCommRegister"), P2PKIT_ERR_UNSUPPORTED);
  api.CommSplit = (p2pk_nccl_result(*)(p2pk_nccl_comm_t, int, int, p2pk_nccl_comm_t *,
                                       p2pk_nccl_config *))(void (*)(void))abort;
  CHECK_OK(p2pk_nccl_require(&api, "ncclCommSplit"));
  CHECK_EQ(p2pk_nccl_require(&api, "ncclCommShrink"), P2PKIT_ERR_INTERNAL);
  CHECK(strstr(p2pkit_last_error(), "ncclCommShrink is not an NCCL call p2pkit loads") != NULL);
}

/* Fake NCCL aborts: one that returns at once, one that blocks until the
 * test lets it go (as NCCL's joining a proxy thread stuck in poll). */
static int fake_release; /* __atomic */
static int fake_calls;   /* __atomic */
static p2pk_nccl_result fake_quick(p2pk_nccl_comm_t comm) {
  (void)comm;
  __atomic_add_fetch(&fake_calls, 1, __ATOMIC_ACQ_REL);
  return P2PK_NCCL_SUCCESS;
}
static p2pk_nccl_result fake_stuck(p2pk_nccl_comm_t comm) {
  (void)comm;
  while (!__atomic_load_n(&fake_release, __ATOMIC_ACQUIRE)) usleep(1000);
  __atomic_add_fetch(&fake_calls, 1, __ATOMIC_ACQ_REL);
  return P2PK_NCCL_SUCCESS;
}

TEST(abort_is_bounded) {
  p2pk_nccl_api api;
  memset(&api, 0, sizeof api);
  p2pk_nccl_comm_t comm = (p2pk_nccl_comm_t)&api; /* never dereferenced */
  /* One that returns: waited for, whole. */
  api.CommAbort = fake_quick;
  CHECK_EQ(p2pk_nccl_abort_until(&api, comm, p2pk_now_ns() + 5000000000u), 1);
  CHECK_EQ(__atomic_load_n(&fake_calls, __ATOMIC_ACQUIRE), 1);
  /* No ncclCommAbort (before NCCL 2.4.2): ncclCommDestroy in its place. */
  api.CommAbort = NULL;
  api.CommDestroy = fake_quick;
  CHECK_EQ(p2pk_nccl_abort_until(&api, comm, p2pk_now_ns() + 5000000000u), 1);
  CHECK_EQ(__atomic_load_n(&fake_calls, __ATOMIC_ACQUIRE), 2);
  /* One that does not return: left at the deadline, not waited for. */
  api.CommAbort = fake_stuck;
  const uint64_t t0 = p2pk_now_ns();
  CHECK_EQ(p2pk_nccl_abort_until(&api, comm, t0 + 100000000u), 0);
  const double waited = (double)(p2pk_now_ns() - t0) / 1e9;
  CHECK(waited >= 0.1 && waited < 30);
  CHECK_EQ(__atomic_load_n(&fake_calls, __ATOMIC_ACQUIRE), 2);
  /* Let it go: it ends on its own thread, the job freed there (ASan). */
  __atomic_store_n(&fake_release, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < 5000 && __atomic_load_n(&fake_calls, __ATOMIC_ACQUIRE) < 3; i++) usleep(1000);
  CHECK_EQ(__atomic_load_n(&fake_calls, __ATOMIC_ACQUIRE), 3);
  usleep(20000); /* its last step, the job's release, after the count */
}

TEST(config_initializer) {
  p2pk_nccl_config c;
  memset(&c, 0x5a, sizeof c);
  p2pk_nccl_config_init(&c);
  CHECK_EQ(c.size, sizeof c);
  CHECK_EQ(c.magic, 0xcafebeefu);
  CHECK_EQ(c.version, 22800);
  CHECK_EQ(c.blocking, INT_MIN);
  CHECK_EQ(c.split_share, INT_MIN);
  CHECK_EQ(c.nvlink_centric_sched, INT_MIN);
  CHECK(c.net_name == NULL && c.comm_name == NULL);
  /* NCCL 2.28's layout on an LP64 machine: size_t, 2 unsigned, 2 pointers, 12 int */
  CHECK_EQ(offsetof(p2pk_nccl_config, blocking), 16);
  CHECK_EQ(offsetof(p2pk_nccl_config, net_name), 32);
  CHECK_EQ(offsetof(p2pk_nccl_config, comm_name), 48);
  CHECK_EQ(sizeof c, 80);
}

#ifdef HAVE_NCCL_H
#define SAME_FIELD(ours, theirs)                                                  \
  CHECK_EQ(offsetof(p2pk_nccl_config, ours), offsetof(ncclConfig_t, theirs));    \
  CHECK_EQ(sizeof(((p2pk_nccl_config *)0)->ours), sizeof(((ncclConfig_t *)0)->theirs))
#endif

#ifdef HAVE_NCCL_H
/* Every field both layouts have sits at the same offset with the same size;
 * our initializer agrees with NCCL_CONFIG_INITIALIZER. */
static void config_matches_header(void) {
#if NCCL_VERSION_CODE >= 21400
  SAME_FIELD(size, size);
  SAME_FIELD(magic, magic);
  SAME_FIELD(version, version);
  SAME_FIELD(blocking, blocking);
#endif
#if NCCL_VERSION_CODE >= 21700
  SAME_FIELD(cga_cluster_size, cgaClusterSize);
  SAME_FIELD(min_ctas, minCTAs);
  SAME_FIELD(max_ctas, maxCTAs);
  SAME_FIELD(net_name, netName);
#endif
#if NCCL_VERSION_CODE >= 21800
  SAME_FIELD(split_share, splitShare);
#endif
#if NCCL_VERSION_CODE >= 22700
  SAME_FIELD(traffic_class, trafficClass);
  SAME_FIELD(comm_name, commName);
  SAME_FIELD(collnet_enable, collnetEnable);
  SAME_FIELD(cta_policy, CTAPolicy);
  SAME_FIELD(shrink_share, shrinkShare);
  SAME_FIELD(nvls_ctas, nvlsCTAs);
#endif
#if NCCL_VERSION_CODE >= 22800
  SAME_FIELD(n_channels_per_net_peer, nChannelsPerNetPeer);
  SAME_FIELD(nvlink_centric_sched, nvlinkCentricSched);
  CHECK(sizeof(p2pk_nccl_config) <= sizeof(ncclConfig_t));
  ncclConfig_t ref = NCCL_CONFIG_INITIALIZER;
  p2pk_nccl_config c;
  p2pk_nccl_config_init(&c);
  CHECK_EQ(c.magic, ref.magic);
  CHECK(c.version <= ref.version);
  /* the ints after `version`, up to the end of our layout: all unset */
  for (size_t off = offsetof(p2pk_nccl_config, blocking); off < sizeof c; off += sizeof(int)) {
    if (off == offsetof(p2pk_nccl_config, net_name) || off == offsetof(p2pk_nccl_config, comm_name)) {
      off += sizeof(void *) - sizeof(int);
      continue;
    }
    int a, b;
    memcpy(&a, (const char *)&c + off, sizeof a);
    memcpy(&b, (const char *)&ref + off, sizeof b);
    if (a != b) T_FAIL("config int at offset %zu: ours %d, NCCL_CONFIG_INITIALIZER's %d", off, a, b);
  }
#endif
#if NCCL_MAJOR == 2 && NCCL_MINOR == 28
  CHECK_EQ(sizeof(p2pk_nccl_config), sizeof(ncclConfig_t));
#endif
}
#endif

/* Our declarations against the nccl.h of this machine, when it has one. */
TEST(declarations_match_nccl_h) {
#ifndef HAVE_NCCL_H
  printf("note: no nccl.h here; declarations checked against recorded values only\n");
#else
  printf("note: comparing with nccl.h of NCCL %d.%d.%d\n", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
  CHECK_EQ(sizeof(p2pk_nccl_id), sizeof(ncclUniqueId));
  CHECK_EQ(P2PK_NCCL_SUCCESS, ncclSuccess);
  CHECK_EQ(P2PK_NCCL_INVALID_ARGUMENT, ncclInvalidArgument);
  CHECK_EQ(P2PK_NCCL_REMOTE_ERROR, ncclRemoteError);
  CHECK_EQ(P2PK_NCCL_IN_PROGRESS, ncclInProgress);
  CHECK_EQ(P2PK_NCCL_NUM_RESULTS, ncclNumResults);
  static const int ours[] = {P2PK_NCCL_INT8,    P2PK_NCCL_UINT8,   P2PK_NCCL_INT32,
                             P2PK_NCCL_UINT32,  P2PK_NCCL_INT64,   P2PK_NCCL_UINT64,
                             P2PK_NCCL_FLOAT16, P2PK_NCCL_FLOAT32, P2PK_NCCL_FLOAT64,
                             P2PK_NCCL_BFLOAT16};
  static const int theirs[] = {ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32, ncclInt64,
                               ncclUint64,  ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16};
  for (size_t i = 0; i < sizeof ours / sizeof ours[0]; i++) CHECK_EQ(ours[i], theirs[i]);
#if NCCL_VERSION_CODE >= 22400
  CHECK_EQ(P2PK_NCCL_FLOAT8E4M3, ncclFloat8e4m3);
  CHECK_EQ(P2PK_NCCL_FLOAT8E5M2, ncclFloat8e5m2);
  CHECK_EQ(P2PK_NCCL_NUM_TYPES, ncclNumTypes);
#endif
  CHECK_EQ(P2PK_NCCL_SUM, ncclSum);
  CHECK_EQ(P2PK_NCCL_PROD, ncclProd);
  CHECK_EQ(P2PK_NCCL_MAX, ncclMax);
  CHECK_EQ(P2PK_NCCL_MIN, ncclMin);
  CHECK_EQ(P2PK_NCCL_AVG, ncclAvg);
  CHECK_EQ(P2PK_NCCL_NUM_OPS, ncclNumOps);
  CHECK_EQ(P2PK_NCCL_SPLIT_NOCOLOR, NCCL_SPLIT_NOCOLOR);
  CHECK_EQ(P2PK_NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT);
  config_matches_header();
#endif
}

TEST(real_nccl_when_present) {
  p2pk_nccl_api api;
  if (p2pk_nccl_load(&api, NULL) != P2PKIT_SUCCESS) {
    printf("note: no NCCL here (%s); only the failure paths were tested\n", p2pkit_last_error());
    return;
  }
  CHECK(api.version >= 21200);
  CHECK(api.lib && api.GetUniqueId && api.CommInitRank && api.CommInitAll && api.CommDestroy &&
        api.AllReduce && api.Broadcast && api.Reduce && api.AllGather && api.ReduceScatter &&
        api.Send && api.Recv && api.GroupStart && api.GroupEnd && api.GetErrorString);
  CHECK_STR(api.path, "libnccl.so.2");
  int v = 0;
  CHECK_EQ(api.GetVersion(&v), 0);
  CHECK_EQ(v, api.version);
  CHECK(strlen(api.GetErrorString(4)) > 0);
  CHECK_EQ(p2pk_nccl_check(&api, 4, "ncclAllReduce"), P2PKIT_ERR_REMOTE);
  CHECK(strstr(p2pkit_last_error(), "ncclAllReduce failed: ") != NULL);
  char ver[32];
  p2pk_nccl_version_str(api.version, ver, sizeof ver);
  printf("note: loaded NCCL %s\n", ver);
  p2pk_nccl_unload(&api);
  CHECK(zeroed(&api));
}

/* -------------------------------------- the NCCL path on a fake NCCL -- */

/* A fake NCCL: communicators are numbered addresses, every call succeeds,
 * each ncclCommDestroy is counted with the communicator it took. */
static char fake_comms[256];
static int fake_next, fake_destroyed;
static p2pk_nccl_comm_t fake_last_destroyed;
static p2pk_nccl_result ok_void(void) { return P2PK_NCCL_SUCCESS; }
static const char *fake_error(p2pk_nccl_result r) { return r ? "fake error" : "no error"; }
static p2pk_nccl_result fake_init_all(p2pk_nccl_comm_t *comms, int n, const int *devs) {
  (void)devs;
  for (int i = 0; i < n; i++) comms[i] = (p2pk_nccl_comm_t)(void *)&fake_comms[fake_next++];
  return P2PK_NCCL_SUCCESS;
}
static p2pk_nccl_result fake_destroy(p2pk_nccl_comm_t comm) {
  fake_destroyed++;
  fake_last_destroyed = comm;
  return P2PK_NCCL_SUCCESS;
}
static p2pk_nccl_result fake_send(const void *b, size_t n, int t, int p, p2pk_nccl_comm_t c,
                                  p2pkit_stream_t s) {
  (void)b, (void)n, (void)t, (void)p, (void)c, (void)s;
  return P2PK_NCCL_SUCCESS;
}
static p2pk_nccl_result fake_recv(void *b, size_t n, int t, int p, p2pk_nccl_comm_t c,
                                  p2pkit_stream_t s) {
  (void)b, (void)n, (void)t, (void)p, (void)c, (void)s;
  return P2PK_NCCL_SUCCESS;
}

enum { SETS = 24, SET_N = 3 }; /* 72 states: more than one group's old bound of 64 */

/* One process's communicator set of SET_N ranks, NCCL on, no GPU. */
static void fake_set(p2pk_group *g, struct p2pkit_comm *c) {
  memset(g, 0, sizeof *g);
  pthread_mutex_init(&g->lock, NULL);
  g->n = SET_N;
  for (int r = 0; r < SET_N; r++) {
    memset(&c[r], 0, sizeof c[r]);
    c[r].rank = r, c[r].nranks = SET_N, c[r].device = 0;
    c[r].nccl_mode = P2PK_NCCL_AUTO;
    c[r].group = g;
    g->comms[r] = &c[r];
  }
}

/* Rank c's in-place all-to-all of 4 floats a rank through the NCCL path. */
static p2pkit_status_t a2a_in_place(struct p2pkit_comm *c) {
  p2pk_call k;
  memset(&k, 0, sizeof k);
  k.c = c, k.kind = P2PK_COLL_ALL_TO_ALL, k.dtype = P2PKIT_FLOAT32, k.esize = 4;
  k.count = 4, k.bytes = 16, k.capture = -1;
  k.send = k.recv = (void *)(uintptr_t)0x300000;
  return p2pk_paths[P2PK_PATH_NCCL]->launch(&k);
}

TEST(the_nccl_path_without_its_scratch) {
  /* No GPU here: every NCCL communicator is made (the fake's), and every
   * scratch of the in-place all-to-all fails to be made. */
  p2pk_nccl_api api;
  memset(&api, 0, sizeof api);
  api.lib = &api, api.version = 22803;
  snprintf(api.path, sizeof api.path, "fake");
  api.CommInitAll = fake_init_all, api.CommDestroy = fake_destroy;
  api.GetErrorString = fake_error, api.GroupStart = ok_void, api.GroupEnd = ok_void;
  api.Send = fake_send, api.Recv = fake_recv;
  p2pk_nccl_shared_set(&api);
  static p2pk_group g[SETS];
  static struct p2pkit_comm c[SETS][SET_N];
  const p2pk_path *nccl = p2pk_paths[P2PK_PATH_NCCL];
  for (int i = 0; i < SETS; i++) {
    fake_set(&g[i], c[i]);
    /* 3 ranks: NCCL's communicators made at init, their scratch not. */
    CHECK_EQ(nccl->init(&c[i][0]), P2PKIT_ERR_CUDA);
    CHECK(strstr(p2pkit_last_error(), "the NCCL path's 33554432 bytes of scratch on GPU 0") != NULL);
  }
  CHECK_EQ(fake_next, SETS * SET_N);
  /* A later in-place all-to-all makes the scratch it lacks (and says why it
   * cannot), never copying through a NULL one. */
  CHECK_EQ(a2a_in_place(&c[0][1]), P2PKIT_ERR_CUDA);
  CHECK(strstr(p2pkit_last_error(), "rank 1: the NCCL path's 33554432 bytes of scratch") != NULL);
  /* In one NCCL group, each state's second in-place all-to-all is refused,
   * however many states the group holds; the next group takes them again. */
  for (int round = 0; round < 2; round++) {
    nccl->group_open();
    for (int i = 0; i < SETS; i++)
      for (int r = 0; r < SET_N; r++) {
        CHECK(a2a_in_place(&c[i][r]) != P2PKIT_SUCCESS);
        CHECK(strstr(p2pkit_last_error(), "a second in this group") == NULL);
        CHECK_EQ(a2a_in_place(&c[i][r]), P2PKIT_ERR_UNSUPPORTED);
        if (!strstr(p2pkit_last_error(), "a second in this group"))
          T_FAIL("set %d rank %d, round %d: a second in-place all-to-all not refused: %s", i, r,
                 round, p2pkit_last_error());
      }
    CHECK_OK(nccl->group_close());
  }
  /* Adopting the caller's communicator when the scratch cannot be made:
   * refused, and nothing changed (p2pkit's own kept, destroyed at fini). */
  p2pk_nccl_comm_t callers = (p2pk_nccl_comm_t)(void *)&fake_comms[200];
  CHECK_EQ(p2pkit_comm_adopt_nccl(&c[0][0], callers), P2PKIT_ERR_CUDA);
  CHECK_EQ(fake_destroyed, 0);
  nccl->fini(&c[0][0]);
  CHECK_EQ(fake_destroyed, 1);
  CHECK(fake_last_destroyed == (p2pk_nccl_comm_t)(void *)&fake_comms[0]);
  for (int i = 0; i < SETS; i++)
    for (int r = 0; r < SET_N; r++) nccl->fini(&c[i][r]);
  CHECK_EQ(fake_destroyed, SETS * SET_N);
  for (int i = 0; i < SETS; i++) pthread_mutex_destroy(&g[i].lock);
}

T_MAIN(T_CASE(missing_library), T_CASE(setting_names_the_library), T_CASE(library_that_is_not_nccl),
       T_CASE(version_strings), T_CASE(type_and_op_mapping), T_CASE(missing_optional_call_is_named),
       T_CASE(config_initializer), T_CASE(abort_is_bounded), T_CASE(declarations_match_nccl_h),
       T_CASE(real_nccl_when_present), T_CASE(the_nccl_path_without_its_scratch))
