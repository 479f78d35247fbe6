/* SPDX-License-Identifier: BSD-3-Clause */
/* Data types and reduction operations against NCCL's: the table round-trips,
 * sizes and names are right, p2pkit's own entry points refuse the types only
 * NCCL carries with one line, and what NCCL version each needs. */
#include "coll/coll.h"
#include "nccl/dtype.h"
#include "nccl/nccl_dl.h"
#include "test.h"

TEST(sizes_and_names) {
  static const struct {
    p2pkit_dtype_t d;
    size_t size;
    const char *name;
    int nccl;
  } want[] = {
      {P2PKIT_FLOAT32, 4, "float32", 7},        {P2PKIT_FLOAT16, 2, "float16", 6},
      {P2PKIT_BFLOAT16, 2, "bfloat16", 9},      {P2PKIT_FLOAT64, 8, "float64", 8},
      {P2PKIT_INT32, 4, "int32", 2},            {P2PKIT_INT64, 8, "int64", 4},
      {P2PKIT_UINT8, 1, "uint8", 1},            {P2PKIT_INT8, 1, "int8", 0},
      {P2PKIT_UINT32, 4, "uint32", 3},          {P2PKIT_UINT64, 8, "uint64", 5},
      {P2PKIT_FLOAT8_E4M3, 1, "float8_e4m3fn", 10}, {P2PKIT_FLOAT8_E5M2, 1, "float8_e5m2", 11},
  };
  CHECK_EQ(sizeof want / sizeof want[0], P2PKIT_DTYPE_COUNT);
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    CHECK_EQ(want[i].d, i); /* the enum is append-only: values never move */
    CHECK_EQ(p2pkit_dtype_size(want[i].d), want[i].size);
    CHECK_STR(p2pkit_dtype_name(want[i].d), want[i].name);
    CHECK_EQ(p2pk_nccl_dtype(want[i].d), want[i].nccl);
  }
  CHECK_EQ(p2pkit_dtype_size(P2PKIT_DTYPE_COUNT), 0);
  CHECK_EQ(p2pkit_dtype_size((p2pkit_dtype_t)-1), 0);
  CHECK_STR(p2pkit_dtype_name(P2PKIT_DTYPE_COUNT), "invalid");
  CHECK(p2pk_dtype_info_of(P2PKIT_DTYPE_COUNT) == NULL);
  CHECK(p2pk_redop_info_of(P2PKIT_REDOP_COUNT) == NULL);
}

TEST(table_round_trips) {
  for (int d = 0; d < P2PKIT_DTYPE_COUNT; d++)
    CHECK_EQ(p2pk_dtype_from_nccl(p2pk_nccl_dtype((p2pkit_dtype_t)d)), d);
  for (int n = 0; n < P2PK_NCCL_NUM_TYPES; n++) CHECK_EQ(p2pk_nccl_dtype(p2pk_dtype_from_nccl(n)), n);
  CHECK_EQ(p2pk_dtype_from_nccl(P2PK_NCCL_NUM_TYPES), -1);
  CHECK_EQ(p2pk_dtype_from_nccl(-1), -1);
  for (int op = 0; op < P2PKIT_REDOP_COUNT; op++) {
    CHECK_EQ(p2pk_redop_from_nccl(p2pk_nccl_op((p2pkit_redop_t)op)), op);
    CHECK_STR(p2pk_redop_info_of((p2pkit_redop_t)op)->name, p2pkit_redop_name((p2pkit_redop_t)op));
    CHECK(p2pk_redop_info_of((p2pkit_redop_t)op)->native);
  }
  for (int n = 0; n < P2PK_NCCL_NUM_OPS; n++) CHECK_EQ(p2pk_nccl_op(p2pk_redop_from_nccl(n)), n);
  CHECK_EQ(p2pk_redop_from_nccl(P2PK_NCCL_NUM_OPS), -1);
}

/* p2pkit's own kernels carry the first seven; the GPU tests loop over them. */
TEST(native_types) {
  for (int d = 0; d < P2PKIT_DTYPE_COUNT; d++) {
    CHECK_EQ(p2pk_dtype_native((p2pkit_dtype_t)d), d < P2PK_DTYPE_NATIVE_COUNT);
    CHECK_EQ(p2pk_dtype_check_native("x", 0, (p2pkit_dtype_t)d) == P2PKIT_SUCCESS,
             d < P2PK_DTYPE_NATIVE_COUNT);
  }
  CHECK_EQ(p2pk_dtype_native(P2PKIT_DTYPE_COUNT), 0);
  CHECK_EQ(p2pk_dtype_check_native("p2pkit_all_reduce", 3, P2PKIT_INT8), P2PKIT_ERR_UNSUPPORTED);
  CHECK_STR(p2pkit_last_error(), "p2pkit_all_reduce: rank 3: int8 needs the NCCL path (P2PKIT_NCCL)");
  CHECK_EQ(p2pk_dtype_check_native("send", 0, P2PKIT_DTYPE_COUNT), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_STR(p2pkit_last_error(), "send: rank 0: data type 12 is not a p2pkit_dtype_t");
}

/* Through the public entry points: the argument check refuses before any
 * GPU is touched, so a communicator that is only its rank and size does. */
TEST(entry_points_refuse_nccl_only_types) {
  struct p2pkit_comm *c = calloc(1, sizeof *c);
  c->nranks = 2;
  c->rank = 1;
  void *buf = (void *)(uintptr_t)0x10000;
  for (int d = P2PK_DTYPE_NATIVE_COUNT; d < P2PKIT_DTYPE_COUNT; d++) {
    char want[128];
    snprintf(want, sizeof want, "rank 1: %s needs the NCCL path (P2PKIT_NCCL)",
             p2pkit_dtype_name((p2pkit_dtype_t)d));
    CHECK_EQ(p2pkit_all_reduce(buf, buf, 16, (p2pkit_dtype_t)d, P2PKIT_SUM, c, NULL),
             P2PKIT_ERR_UNSUPPORTED);
    CHECK(strstr(p2pkit_last_error(), want) != NULL);
    CHECK_EQ(p2pkit_all_gather(buf, buf, 16, (p2pkit_dtype_t)d, c, NULL), P2PKIT_ERR_UNSUPPORTED);
    CHECK(strstr(p2pkit_last_error(), want) != NULL);
    CHECK_EQ(p2pkit_send(buf, 16, (p2pkit_dtype_t)d, 0, c, NULL), P2PKIT_ERR_UNSUPPORTED);
    CHECK(strstr(p2pkit_last_error(), "send: rank 1: ") != NULL);
  }
  CHECK_EQ(p2pkit_all_reduce(buf, buf, 16, P2PKIT_DTYPE_COUNT, P2PKIT_SUM, c, NULL),
           P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "data type 12 is not a p2pkit_dtype_t") != NULL);
  free(c);
}

TEST(what_nccl_needs) {
  /* every type and op through a recent NCCL on Hopper, but an fp8 avg */
  for (int d = 0; d < P2PKIT_DTYPE_COUNT; d++)
    for (int op = 0; op < P2PKIT_REDOP_COUNT; op++) {
      const int fp8_avg = (d == P2PKIT_FLOAT8_E4M3 || d == P2PKIT_FLOAT8_E5M2) && op == P2PKIT_AVG;
      CHECK_EQ(p2pk_dtype_check_nccl("all_reduce", (p2pkit_dtype_t)d, 1, (p2pkit_redop_t)op, 22809, 90),
               fp8_avg ? P2PKIT_ERR_UNSUPPORTED : P2PKIT_SUCCESS);
    }
  CHECK_EQ(p2pk_dtype_check_nccl("reduce_scatter", P2PKIT_FLOAT8_E5M2, 1, P2PKIT_AVG, 22809, 90),
           P2PKIT_ERR_UNSUPPORTED);
  CHECK_STR(p2pkit_last_error(), "reduce_scatter: NCCL has no avg for float8_e5m2 (it answers "
            "ncclInvalidArgument): sum, then scale");
  CHECK_OK(p2pk_dtype_check_nccl("all_gather", P2PKIT_FLOAT8_E5M2, 0, P2PKIT_AVG, 22809, 90));
  CHECK_EQ(p2pk_dtype_check_nccl("all_reduce", P2PKIT_FLOAT8_E4M3, 1, P2PKIT_SUM, 22303, 90),
           P2PKIT_ERR_UNSUPPORTED);
  CHECK_STR(p2pkit_last_error(), "all_reduce: float8_e4m3fn needs NCCL 2.24.0 or later; the loaded "
            "NCCL is 2.23.3");
  /* fp8: reductions from sm_90 (NCCL's rule), moves anywhere; cc 0: not known */
  CHECK_EQ(p2pk_dtype_check_nccl("reduce", P2PKIT_FLOAT8_E5M2, 1, P2PKIT_MAX, 22809, 80),
           P2PKIT_ERR_UNSUPPORTED);
  CHECK_STR(p2pkit_last_error(), "reduce: NCCL reduces float8_e5m2 only on sm_90 or later; this GPU "
            "is sm_80");
  CHECK_OK(p2pk_dtype_check_nccl("all_gather", P2PKIT_FLOAT8_E5M2, 0, P2PKIT_SUM, 22809, 80));
  CHECK_OK(p2pk_dtype_check_nccl("reduce", P2PKIT_FLOAT8_E5M2, 1, P2PKIT_MAX, 22809, 0));
  /* avg and bfloat16 came with 2.10 (older codes: X*1000 + Y*100 + Z) */
  CHECK_EQ(p2pk_dtype_check_nccl("all_reduce", P2PKIT_FLOAT32, 1, P2PKIT_AVG, 2708, 0),
           P2PKIT_ERR_UNSUPPORTED);
  CHECK_STR(p2pkit_last_error(), "all_reduce: avg needs NCCL 2.10.0 or later; the loaded NCCL is 2.7.8");
  CHECK_EQ(p2pk_dtype_check_nccl("all_reduce", P2PKIT_BFLOAT16, 1, P2PKIT_SUM, 20906, 0),
           P2PKIT_ERR_UNSUPPORTED);
  CHECK_OK(p2pk_dtype_check_nccl("all_reduce", P2PKIT_INT8, 1, P2PKIT_PROD, 2708, 0));
  CHECK_EQ(p2pk_dtype_check_nccl("x", P2PKIT_DTYPE_COUNT, 0, P2PKIT_SUM, 22809, 0),
           P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_STR(p2pkit_last_error(), "x: data type 12 is not a p2pkit_dtype_t");
  CHECK_EQ(p2pk_dtype_check_nccl("x", P2PKIT_INT8, 1, P2PKIT_REDOP_COUNT, 22809, 0),
           P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_STR(p2pkit_last_error(), "x: operation 5 is not a p2pkit_redop_t");
}

T_MAIN(T_CASE(sizes_and_names), T_CASE(table_round_trips), T_CASE(native_types),
       T_CASE(entry_points_refuse_nccl_only_types), T_CASE(what_nccl_needs))
