/* NCCL loaded at run time: a missing or wrong library fails cleanly with a
 * message naming it; the real one (when this machine has it) resolves. */
#include <stdlib.h>

#include "core/param.h"
#include "perf/nccl_dl.h"
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
    CHECK(v >= 0 && v < 16);
    if (v >= 0 && v < 16) CHECK_EQ(seen[v]++, 0);
  }
  /* nccl.h's values for the common ones */
  CHECK_EQ(p2pk_nccl_dtype(P2PKIT_FLOAT32), 7);
  CHECK_EQ(p2pk_nccl_dtype(P2PKIT_FLOAT16), 6);
  CHECK_EQ(p2pk_nccl_dtype(P2PKIT_BFLOAT16), 9);
  CHECK_EQ(p2pk_nccl_dtype(P2PKIT_UINT8), 1);
  CHECK_EQ(p2pk_nccl_op(P2PKIT_SUM), 0);
  CHECK_EQ(p2pk_nccl_op(P2PKIT_MAX), 2);
  CHECK_EQ(p2pk_nccl_op(P2PKIT_MIN), 3);
  CHECK_EQ(p2pk_nccl_op(P2PKIT_AVG), 4);
  CHECK_EQ(p2pk_nccl_dtype(P2PKIT_DTYPE_COUNT), -1);
  CHECK_EQ(p2pk_nccl_op(P2PKIT_REDOP_COUNT), -1);
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

T_MAIN(T_CASE(missing_library), T_CASE(setting_names_the_library), T_CASE(library_that_is_not_nccl),
       T_CASE(version_strings), T_CASE(type_and_op_mapping), T_CASE(real_nccl_when_present))
