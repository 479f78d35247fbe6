/* SPDX-License-Identifier: BSD-3-Clause */
/* Gradient bucket plan (src/ddp/plan.c): bucket assignment in reverse
 * registration order, caps, types, padding, lookup, ready counting, in-order
 * launch, and the errors (twice registered, overlapping, twice ready, never
 * ready, unknown address). No GPU: addresses are made up. */
#include <string.h>

#include "ddp/plan.h"
#include "core/param.h"
#include "p2pkit.h"
#include "test.h"

#define FAKE(a) ((const void *)(uintptr_t)(a))

/* 4 float gradients of 100, 200, 300, 400 elements as views; caps in bytes. */
static void four(p2pk_ddp_plan *p, size_t cap, size_t first) {
  p2pk_ddp_plan_init(p, cap, first);
  for (int i = 1; i <= 4; i++) CHECK_OK(p2pk_ddp_plan_add(p, NULL, 100u * i, P2PKIT_FLOAT32));
}

TEST(reverse_order_and_caps) {
  p2pk_ddp_plan p;
  /* first bucket 1700 bytes: gradient 3 (1600 B) alone; then 2000 B: 2 (1200) alone
   * (1200 + 800 > 2000? no: 1200 + 800 = 2000 fits) -> {2, 1}; then {0}. */
  four(&p, 2000, 1700);
  CHECK_OK(p2pk_ddp_plan_layout(&p));
  CHECK_EQ(p.nbuckets, 3);
  CHECK_EQ(p.grads[3].bucket, 0);
  CHECK_EQ(p.grads[2].bucket, 1);
  CHECK_EQ(p.grads[1].bucket, 1);
  CHECK_EQ(p.grads[0].bucket, 2);
  CHECK_EQ(p.grads[2].offset, 0);
  CHECK_EQ(p.grads[1].offset, 1200);
  CHECK_EQ(p.buckets[1].bytes, 2000);
  CHECK_EQ(p.buckets[1].count, 500);
  CHECK_EQ(p.buckets[0].offset, 0);
  CHECK_EQ(p.buckets[1].offset, 1792); /* 1600 rounded up to 256 */
  CHECK_EQ(p.buckets[2].offset, 3840); /* 1792 + 2000 -> 3840 */
  CHECK_EQ(p.arena_bytes, 4352);       /* 3840 + 400 -> 4352 */
  CHECK_EQ(p.members[p.buckets[1].first], 2);
  CHECK_EQ(p.members[p.buckets[1].first + 1], 1);
  p2pk_ddp_plan_free(&p);
}

TEST(oversized_gradient_gets_its_own_bucket) {
  p2pk_ddp_plan p;
  four(&p, 100, 100); /* every gradient exceeds both caps */
  CHECK_OK(p2pk_ddp_plan_layout(&p));
  CHECK_EQ(p.nbuckets, 4);
  for (size_t b = 0; b < 4; b++) CHECK_EQ(p.buckets[b].n, 1);
  p2pk_ddp_plan_free(&p);
}

TEST(one_big_bucket) {
  p2pk_ddp_plan p;
  four(&p, 25u << 20, 1u << 20);
  CHECK_OK(p2pk_ddp_plan_layout(&p));
  CHECK_EQ(p.nbuckets, 1);
  CHECK_EQ(p.buckets[0].n, 4);
  CHECK_EQ(p.buckets[0].bytes, 4000);
  p2pk_ddp_plan_free(&p);
}

TEST(types_split_buckets_and_padding) {
  p2pk_ddp_plan p;
  p2pk_ddp_plan_init(&p, 1 << 20, 1 << 20);
  CHECK_OK(p2pk_ddp_plan_add(&p, NULL, 3, P2PKIT_FLOAT32));  /* 12 B */
  CHECK_OK(p2pk_ddp_plan_add(&p, NULL, 5, P2PKIT_FLOAT32));  /* 20 B */
  CHECK_OK(p2pk_ddp_plan_add(&p, NULL, 7, P2PKIT_FLOAT16));  /* 14 B */
  CHECK_OK(p2pk_ddp_plan_add(&p, NULL, 9, P2PKIT_FLOAT16));  /* 18 B */
  CHECK_OK(p2pk_ddp_plan_layout(&p));
  CHECK_EQ(p.nbuckets, 2);
  CHECK_EQ(p.buckets[0].dtype, P2PKIT_FLOAT16);
  CHECK_EQ(p.grads[3].offset, 0);
  CHECK_EQ(p.grads[2].offset, 32); /* 18 rounded to 16 */
  CHECK_EQ(p.buckets[0].bytes, 46);
  CHECK_EQ(p.buckets[0].count, 23);
  CHECK_EQ(p.buckets[1].dtype, P2PKIT_FLOAT32);
  CHECK_EQ(p.grads[0].offset, 32); /* 20 rounded to 16 */
  CHECK_EQ(p.buckets[1].count, 11);
  p2pk_ddp_plan_free(&p);
}

TEST(register_errors) {
  p2pk_ddp_plan p;
  p2pk_ddp_plan_init(&p, 1 << 20, 1 << 20);
  CHECK_OK(p2pk_ddp_plan_add(&p, FAKE(0x10000), 256, P2PKIT_FLOAT32));
  CHECK_EQ(p2pk_ddp_plan_add(&p, FAKE(0x10000), 256, P2PKIT_FLOAT32), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "registered twice") != NULL);
  CHECK_EQ(p2pk_ddp_plan_add(&p, FAKE(0x10100), 4, P2PKIT_FLOAT32), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "overlaps") != NULL);
  CHECK_EQ(p2pk_ddp_plan_add(&p, FAKE(0x20000), 0, P2PKIT_FLOAT32), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pk_ddp_plan_add(&p, FAKE(0x20000), 4, (p2pkit_dtype_t)99), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pk_ddp_plan_add(&p, FAKE(0x20002), 4, P2PKIT_FLOAT32), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "aligned") != NULL);
  CHECK_OK(p2pk_ddp_plan_add(&p, FAKE(0x10400), 4, P2PKIT_FLOAT32)); /* right after: fine */
  CHECK_EQ(p.ngrads, 2);
  CHECK_OK(p2pk_ddp_plan_layout(&p));
  CHECK_EQ(p2pk_ddp_plan_add(&p, NULL, 4, P2PKIT_FLOAT32), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "after build") != NULL);
  CHECK_EQ(p2pk_ddp_plan_layout(&p), P2PKIT_ERR_INVALID_ARGUMENT);
  p2pk_ddp_plan_free(&p);

  p2pk_ddp_plan_init(&p, 1 << 20, 1 << 20);
  CHECK_EQ(p2pk_ddp_plan_layout(&p), P2PKIT_ERR_INVALID_ARGUMENT); /* nothing registered */
  p2pk_ddp_plan_free(&p);
}

TEST(find_views_and_user_buffers) {
  p2pk_ddp_plan p;
  p2pk_ddp_plan_init(&p, 1 << 20, 1 << 20);
  CHECK_OK(p2pk_ddp_plan_add(&p, NULL, 10, P2PKIT_FLOAT32));
  CHECK_OK(p2pk_ddp_plan_add(&p, FAKE(0x900000), 10, P2PKIT_FLOAT32));
  CHECK_OK(p2pk_ddp_plan_add(&p, NULL, 10, P2PKIT_FLOAT32));
  size_t i = 99;
  CHECK_EQ(p2pk_ddp_plan_find(&p, FAKE(0x900000), &i), P2PKIT_ERR_INVALID_ARGUMENT); /* not built */
  CHECK_OK(p2pk_ddp_plan_layout(&p));
  CHECK_OK(p2pk_ddp_plan_bind(&p, 0x100000));
  CHECK_EQ(p.grads[2].addr, 0x100000); /* last registered, first in bucket 0; the user
                                        * buffer (gradient 1) has its slot at +48 */
  CHECK_EQ(p.grads[0].addr, 0x100000 + 96);
  CHECK_OK(p2pk_ddp_plan_find(&p, FAKE(0x100000), &i));
  CHECK_EQ(i, 2);
  CHECK_OK(p2pk_ddp_plan_find(&p, FAKE(0x100000 + 96), &i));
  CHECK_EQ(i, 0);
  CHECK_OK(p2pk_ddp_plan_find(&p, FAKE(0x900000), &i));
  CHECK_EQ(i, 1);
  CHECK_EQ(p2pk_ddp_plan_find(&p, FAKE(0x900004), &i), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "inside gradient 1") != NULL);
  CHECK_EQ(p2pk_ddp_plan_find(&p, FAKE(0x50), &i), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "not a registered gradient") != NULL);
  CHECK_EQ(p2pk_ddp_plan_find(&p, FAKE(0x9000000), &i), P2PKIT_ERR_INVALID_ARGUMENT);
  p2pk_ddp_plan_free(&p);
}

TEST(user_buffer_inside_arena_is_refused) {
  p2pk_ddp_plan p;
  p2pk_ddp_plan_init(&p, 1 << 20, 1 << 20);
  CHECK_OK(p2pk_ddp_plan_add(&p, NULL, 10, P2PKIT_FLOAT32));
  /* bucket: gradient 1 at +0 (8 B), gradient 0 at +16: the view covers 0x100014 */
  CHECK_OK(p2pk_ddp_plan_add(&p, FAKE(0x100014), 2, P2PKIT_FLOAT32));
  CHECK_OK(p2pk_ddp_plan_layout(&p));
  CHECK_EQ(p2pk_ddp_plan_bind(&p, 0x100000), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "overlap") != NULL);
  p2pk_ddp_plan_free(&p);
}

TEST(ready_counting_and_in_order_launch) {
  p2pk_ddp_plan p;
  four(&p, 2000, 1700); /* buckets {3}, {2, 1}, {0} */
  CHECK_OK(p2pk_ddp_plan_layout(&p));
  CHECK_OK(p2pk_ddp_plan_bind(&p, 0x100000));
  for (int step = 0; step < 3; step++) {
    size_t from = 9, to = 9;
    /* Out of backward order: bucket 2 completes first but must wait. */
    CHECK_OK(p2pk_ddp_plan_mark(&p, 0, &from, &to));
    CHECK_EQ(to - from, 0);
    CHECK_OK(p2pk_ddp_plan_mark(&p, 2, &from, &to));
    CHECK_EQ(to - from, 0);
    CHECK_OK(p2pk_ddp_plan_mark(&p, 3, &from, &to)); /* bucket 0 completes */
    CHECK_EQ(from, 0);
    CHECK_EQ(to, 1);
    CHECK_OK(p2pk_ddp_plan_mark(&p, 1, &from, &to)); /* 1 completes, 2 was waiting */
    CHECK_EQ(from, 1);
    CHECK_EQ(to, 3);
    CHECK_EQ(p.nready, 4);
    CHECK_OK(p2pk_ddp_plan_finish(&p));
    CHECK_EQ(p.step, step + 1);
    CHECK_EQ(p.next_launch, 0);
    CHECK_EQ(p.buckets[1].pending, 2);
  }
  p2pk_ddp_plan_free(&p);
}

TEST(ready_twice_and_never) {
  p2pk_ddp_plan p;
  four(&p, 2000, 1700);
  CHECK_OK(p2pk_ddp_plan_layout(&p));
  size_t from = 0, to = 0;
  CHECK_EQ(p2pk_ddp_plan_mark(&p, 0, &from, &to), P2PKIT_ERR_INVALID_ARGUMENT); /* not bound */
  CHECK_OK(p2pk_ddp_plan_bind(&p, 0x100000));
  CHECK_OK(p2pk_ddp_plan_mark(&p, 2, &from, &to));
  CHECK_EQ(p2pk_ddp_plan_mark(&p, 2, &from, &to), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "marked ready twice") != NULL);
  CHECK_EQ(p.nready, 1);
  CHECK_EQ(p.buckets[1].pending, 1); /* the second mark changed nothing */
  CHECK_EQ(p2pk_ddp_plan_mark(&p, 4, &from, &to), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pk_ddp_plan_finish(&p), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "3 gradient(s) never marked ready") != NULL);
  CHECK(strstr(p2pkit_last_error(), "first gradient 0") != NULL);
  /* The step was reset: a full step works afterwards. */
  CHECK_EQ(p.nready, 0);
  for (size_t i = 0; i < 4; i++) CHECK_OK(p2pk_ddp_plan_mark(&p, i, &from, &to));
  CHECK_EQ(to, 3);
  CHECK_OK(p2pk_ddp_plan_finish(&p));
  p2pk_ddp_plan_free(&p);
}

TEST(settings_registered) {
  CHECK_EQ(p2pk_param_size("P2PKIT_BUCKET_SIZE"), 25u << 20);
  CHECK_EQ(p2pk_param_size("P2PKIT_FIRST_BUCKET_SIZE"), 1u << 20);
}

/* p2pkit_grad_sync_opts_t carries its size and version: the initializer
 * and the init function agree, and p2pkit_grad_sync_create refuses options
 * of another size or version in one line before it touches the
 * communicator (here a stand-in no GPU call would accept). */
TEST(opts_size_and_version) {
  p2pkit_grad_sync_opts_t a = P2PKIT_GRAD_SYNC_OPTS_INIT, b;
  memset(&b, 0x5a, sizeof b);
  p2pkit_grad_sync_opts_init(&b);
  CHECK(a.size == sizeof(p2pkit_grad_sync_opts_t) && a.version == P2PKIT_GRAD_SYNC_OPTS_VERSION);
  CHECK(b.size == a.size && b.version == a.version && b.bucket_bytes == 0);
  CHECK(b.first_bucket_bytes == 0 && b.comm_stream == NULL && b.max_blocks == 0);
  static int stand_in;
  p2pkit_comm_t comm = (p2pkit_comm_t)(void *)&stand_in;
  static const struct {
    size_t size;
    unsigned version;
    const char *want;
  } bad[] = {
      {0, 0, "p2pkit_grad_sync_opts_t: size 0, version 0: fill it with p2pkit_grad_sync_opts_init"},
      {sizeof(p2pkit_grad_sync_opts_t) - 4, 1, "p2pkit_grad_sync_opts_t.size is"},
      {sizeof(p2pkit_grad_sync_opts_t), 7, "p2pkit_grad_sync_opts_t version 7 is newer"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    p2pkit_grad_sync_opts_t o = P2PKIT_GRAD_SYNC_OPTS_INIT;
    o.size = bad[i].size;
    o.version = bad[i].version;
    p2pkit_grad_sync_t gs = NULL;
    CHECK_EQ(p2pkit_grad_sync_create(comm, &o, &gs), P2PKIT_ERR_INVALID_ARGUMENT);
    CHECK(gs == NULL);
    if (!strstr(p2pkit_last_error(), bad[i].want))
      T_FAIL("case %zu: '%s' lacks '%s'", i, p2pkit_last_error(), bad[i].want);
  }
}

T_MAIN(T_CASE(reverse_order_and_caps), T_CASE(oversized_gradient_gets_its_own_bucket),
       T_CASE(one_big_bucket), T_CASE(types_split_buckets_and_padding), T_CASE(register_errors),
       T_CASE(find_views_and_user_buffers), T_CASE(user_buffer_inside_arena_is_refused),
       T_CASE(ready_counting_and_in_order_launch), T_CASE(ready_twice_and_never),
       T_CASE(settings_registered), T_CASE(opts_size_and_version))
