/* SPDX-License-Identifier: BSD-3-Clause */
/* The uneven all-to-all, gather and scatter refuse bad arguments in one
 * line, before anything is queued or CUDA is asked (a communicator of 4
 * ranks made here, with no GPU behind it); the group they would use is
 * left empty, so a real call after them still pairs up. A send and its
 * receive of one process whose path cannot be chosen fail the group with
 * why. The calls themselves run in tests/gpu/test_vcoll.c. */
#include <stdint.h>

#include "coll/paths/path.h"
#include "test.h"

enum { N = 4 };

/* Rank `rank` of N with no GPU: no error on its error words, so a call
 * that passes every argument check goes on to CUDA's pointer check. */
static int32_t err_words[16];
static struct p2pkit_comm *fake(int rank) {
  struct p2pkit_comm *c = calloc(1, sizeof *c);
  c->rank = rank, c->nranks = N, c->device = 0;
  c->host_err = err_words;
  return c;
}

static void expect(p2pkit_status_t got, const char *needle) {
  CHECK_EQ(got, P2PKIT_ERR_INVALID_ARGUMENT);
  if (!strstr(p2pkit_last_error(), needle))
    T_FAIL("message '%s' lacks '%s'", p2pkit_last_error(), needle);
}

/* A group of the caller's holding all but one call; then emptied without
 * launching anything (the group drops its calls when one too many comes)
 * and ended. */
static void fill_group(struct p2pkit_comm *c) {
  CHECK_OK(p2pkit_group_start());
  int held = 0;
  for (; p2pk_group_room() > 1; held++)
    CHECK_OK(p2pk_post_checked(1, (void *)(uintptr_t)0x300000, 1, P2PKIT_FLOAT32, 4, 2, c, NULL));
  CHECK_EQ(held, 63);
}

static void drain_group(struct p2pkit_comm *c) {
  CHECK_OK(p2pk_post_checked(1, (void *)(uintptr_t)0x300000, 1, P2PKIT_FLOAT32, 4, 2, c, NULL));
  CHECK_EQ(p2pk_post_checked(1, (void *)(uintptr_t)0x300000, 1, P2PKIT_FLOAT32, 4, 2, c, NULL),
           P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pk_group_room(), 64);
  CHECK_OK(p2pkit_group_end());
}

#define SB ((const void *)(uintptr_t)0x100000)
#define RB ((void *)(uintptr_t)0x200000)

TEST(all_to_allv_refused) {
  struct p2pkit_comm *c = fake(1);
  size_t sc[N] = {1, 2, 0, 3}, sd[N] = {0, 1, 3, 3}, rc[N] = {4, 2, 0, 0}, rd[N] = {0, 4, 6, 6};
  expect(p2pkit_all_to_allv(SB, sc, sd, RB, rc, rd, P2PKIT_FLOAT32, NULL, NULL),
         "all_to_allv: communicator is NULL");
  expect(p2pkit_all_to_allv(SB, sc, sd, RB, rc, rd, P2PKIT_DTYPE_COUNT, c, NULL),
         "all_to_allv: rank 1: data type 12 is not a p2pkit_dtype_t");
  expect(p2pkit_all_to_allv(SB, NULL, sd, RB, rc, rd, P2PKIT_FLOAT32, c, NULL),
         "all_to_allv: rank 1: sendcounts is NULL");
  expect(p2pkit_all_to_allv(SB, sc, sd, RB, rc, NULL, P2PKIT_FLOAT32, c, NULL),
         "all_to_allv: rank 1: rdispls is NULL");
  size_t big[N] = {0, 0, (size_t)1 << 41, 0};
  expect(p2pkit_all_to_allv(SB, big, sd, RB, rc, rd, P2PKIT_FLOAT32, c, NULL),
         "all_to_allv: rank 1: the block sent to rank 2 (displacement 3, count 2199023255552) "
         "ends beyond 1099511627776 elements");
  size_t far[N] = {SIZE_MAX - 1, 4, 6, 6};
  expect(p2pkit_all_to_allv(SB, sc, sd, RB, rc, far, P2PKIT_FLOAT32, c, NULL),
         "the block received from rank 0 (displacement 18446744073709551614, count 4) ends beyond");
  far[0] = (size_t)1 << 40;
  expect(p2pkit_all_to_allv(SB, sc, sd, RB, rc, far, P2PKIT_FLOAT32, c, NULL),
         "(displacement 1099511627776, count 4) ends beyond 1099511627776 elements");
  rc[1] = 3;
  expect(p2pkit_all_to_allv(SB, sc, sd, RB, rc, rd, P2PKIT_FLOAT32, c, NULL),
         "all_to_allv: rank 1: sends 2 elements to itself but receives 3");
  rc[1] = 2;
  expect(p2pkit_all_to_allv(NULL, sc, sd, RB, rc, rd, P2PKIT_FLOAT32, c, NULL),
         "all_to_allv: rank 1: sendbuf is NULL");
  expect(p2pkit_all_to_allv(SB, sc, sd, NULL, rc, rd, P2PKIT_FLOAT32, c, NULL),
         "all_to_allv: rank 1: recvbuf is NULL");
  expect(p2pkit_all_to_allv((const char *)SB + 2, sc, sd, RB, rc, rd, P2PKIT_FLOAT32, c, NULL),
         "are not aligned to their 4-byte float32 elements");
  /* In place: rank 1 sends [0,1) [1,3) [3,6) and receives into [0,4) [4,6). */
  expect(p2pkit_all_to_allv(SB, sc, sd, (void *)(uintptr_t)SB, rc, rd, P2PKIT_FLOAT32, c, NULL),
         "all_to_allv: rank 1: the block sent to rank 0 overlaps the block received from rank 0");
  /* Blocks interleaved in one buffer that do not overlap, and an empty
   * block's displacement, are not refused: they reach the next check,
   * which needs a GPU (the communicator's error word), so a group with
   * room for one more call stops them short of it. Sends [0,1) [2,4)
   * [6,9), receives [1,2) [4,6). */
  size_t isd[N] = {0, 2, SIZE_MAX, 6}, ird[N] = {1, 4, SIZE_MAX, 0}, irc[N] = {1, 2, 0, 0};
  fill_group(c);
  expect(p2pkit_all_to_allv(SB, sc, isd, (void *)(uintptr_t)SB, irc, ird, P2PKIT_FLOAT32, c, NULL),
         "all_to_allv: rank 1: 5 sends and receives do not fit in the caller's group (it holds 1 more)");
  drain_group(c);
  free(c);
}

TEST(gather_scatter_refused) {
  struct p2pkit_comm *c = fake(2);
  for (int g = 0; g < 2; g++) {
    p2pkit_status_t (*f)(const void *, void *, size_t, p2pkit_dtype_t, int, p2pkit_comm_t,
                         p2pkit_stream_t) = g ? p2pkit_gather : p2pkit_scatter;
    const char *name = g ? "gather" : "scatter";
    char want[160];
    snprintf(want, sizeof want, "%s: communicator is NULL", name);
    expect(f(SB, RB, 8, P2PKIT_FLOAT32, 0, NULL, NULL), want);
    snprintf(want, sizeof want, "%s: rank 2: root 4 is not a rank of 4", name);
    expect(f(SB, RB, 8, P2PKIT_FLOAT32, 4, c, NULL), want);
    expect(f(SB, RB, 8, P2PKIT_FLOAT32, -1, c, NULL), "root -1 is not a rank of 4");
    snprintf(want, sizeof want, "%s: rank 2: count 2199023255552 is too large", name);
    expect(f(SB, RB, (size_t)1 << 41, P2PKIT_FLOAT32, 0, c, NULL), want);
    /* count 0 is a no-op, whatever the buffers */
    CHECK_OK(f(NULL, NULL, 0, P2PKIT_FLOAT32, 0, c, NULL));
  }
  /* A non-root uses one buffer: gather its sendbuf, scatter its recvbuf. */
  expect(p2pkit_gather(NULL, RB, 8, P2PKIT_FLOAT32, 0, c, NULL), "gather: rank 2: sendbuf is NULL");
  expect(p2pkit_scatter(SB, NULL, 8, P2PKIT_FLOAT32, 0, c, NULL), "scatter: rank 2: recvbuf is NULL");
  /* The root needs both; its own block may be in place, nothing else may overlap. */
  expect(p2pkit_gather(SB, NULL, 8, P2PKIT_FLOAT32, 2, c, NULL), "gather: rank 2: recvbuf is NULL");
  expect(p2pkit_scatter(NULL, RB, 8, P2PKIT_FLOAT32, 2, c, NULL), "scatter: rank 2: sendbuf is NULL");
  char *rb = (char *)RB;
  expect(p2pkit_gather(rb + 8 * 4, RB, 8, P2PKIT_FLOAT32, 2, c, NULL),
         "gather: rank 2: the block sent to rank 2 overlaps the block received from rank 1");
  expect(p2pkit_gather(rb + 17 * 4, RB, 8, P2PKIT_FLOAT32, 2, c, NULL),
         "gather: rank 2: the block sent to rank 2 overlaps the block received from rank 2");
  expect(p2pkit_scatter(RB, rb + 8 * 4, 8, P2PKIT_FLOAT32, 2, c, NULL),
         "scatter: rank 2: the block sent to rank 1 overlaps the block received from rank 2");
  /* In place on the root passes the overlap check (and stops at the group's room). */
  fill_group(c);
  expect(p2pkit_gather(rb + 16 * 4, RB, 8, P2PKIT_FLOAT32, 2, c, NULL),
         "gather: rank 2: 5 sends and receives do not fit in the caller's group (it holds 1 more)");
  expect(p2pkit_scatter(RB, rb + 16 * 4, 8, P2PKIT_FLOAT32, 2, c, NULL),
         "scatter: rank 2: 5 sends and receives do not fit");
  drain_group(c);
  free(c);
}

TEST(a_pair_of_this_process_whose_path_cannot_be_chosen_fails_with_why) {
  /* Ranks 0 and 1 of one process (one p2pk_group), a send and its
   * receive: choosing their path asks CUDA of their streams, which fails
   * here (no GPU); the group's end returns that error and its sentence,
   * not another call's. */
  p2pk_group g;
  memset(&g, 0, sizeof g);
  struct p2pkit_comm *a = fake(0), *b = fake(1);
  g.n = N;
  g.comms[0] = a, g.comms[1] = b;
  a->group = b->group = &g;
  CHECK_OK(p2pkit_group_start());
  CHECK_OK(p2pk_post_checked(1, (void *)(uintptr_t)0x300000, 4, P2PKIT_FLOAT32, 4, 1, a, NULL));
  CHECK_OK(p2pk_post_checked(0, (void *)(uintptr_t)0x400000, 4, P2PKIT_FLOAT32, 4, 0, b, NULL));
  CHECK_EQ(p2pkit_group_end(), P2PKIT_ERR_CUDA);
  const char *want = "send: rank 0: asking CUDA whether stream (nil) of GPU 0 captures failed: ";
  if (strncmp(p2pkit_last_error(), want, strlen(want)) != 0)
    T_FAIL("message '%s' does not start with '%s'", p2pkit_last_error(), want);
  CHECK_EQ(p2pk_group_room(), P2PK_GROUP_OPS);
  free(a);
  free(b);
}

T_MAIN(T_CASE(all_to_allv_refused), T_CASE(gather_scatter_refused),
       T_CASE(a_pair_of_this_process_whose_path_cannot_be_chosen_fails_with_why))
