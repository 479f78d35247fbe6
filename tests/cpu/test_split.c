/* SPDX-License-Identifier: BSD-3-Clause */
/* p2pkit_comm_split's arithmetic, NCCL's semantics: same color, one new
 * communicator, ordered by key then old rank; NOCOLOR joins none; and
 * whether a new communicator sits on one host or spans several. */
#include "coll/rdv/init_id.h"
#include "test.h"

#define N 8

/* Checks out[] and every rank's member list against `want_rank` / `want_size`
 * (digits per old rank, '-' for NOCOLOR). */
static void check_split(const p2pk_split_in *in, int n, const char *want_rank,
                        const char *want_size) {
  p2pk_split_out out[N];
  memset(out, 0x5a, sizeof out);
  CHECK_OK(p2pk_split_compute(in, n, out));
  for (int r = 0; r < n; r++) {
    int wr = want_rank[r] == '-' ? -1 : want_rank[r] - '0';
    int ws = want_size[r] == '-' ? 0 : want_size[r] - '0';
    if (out[r].rank != wr || out[r].size != ws)
      T_FAIL("old rank %d: new rank %d of %d, want %d of %d", r, out[r].rank, out[r].size, wr, ws);
    int members[N];
    int m = p2pk_split_members(in, n, r, members);
    CHECK_EQ(m, ws);
    for (int i = 0; i < m; i++) {
      CHECK_EQ(in[members[i]].color, in[r].color);
      CHECK_EQ(out[members[i]].rank, i);
    }
    if (wr >= 0) CHECK_EQ(members[wr], r);
  }
}

TEST(even_odd) {
  p2pk_split_in in[N];
  for (int r = 0; r < N; r++) in[r] = (p2pk_split_in){r % 2, r};
  check_split(in, N, "00112233", "44444444");
}

TEST(per_host) {
  /* 2 hosts x 4: color = host, key = local rank */
  p2pk_split_in in[N];
  for (int r = 0; r < N; r++) in[r] = (p2pk_split_in){r / 4, r % 4};
  check_split(in, N, "01230123", "44444444");
}

TEST(nocolor) {
  p2pk_split_in in[N];
  for (int r = 0; r < N; r++) in[r] = (p2pk_split_in){r < 3 ? P2PKIT_SPLIT_NOCOLOR : 7, 0};
  check_split(in, N, "---01234", "---55555");
  for (int r = 0; r < N; r++) in[r].color = P2PKIT_SPLIT_NOCOLOR;
  check_split(in, N, "--------", "--------");
}

TEST(equal_keys_keep_old_order) {
  p2pk_split_in in[N];
  for (int r = 0; r < N; r++) in[r] = (p2pk_split_in){0, 5};
  check_split(in, N, "01234567", "88888888");
  /* keys tie in pairs: (key, old rank) */
  for (int r = 0; r < N; r++) in[r] = (p2pk_split_in){0, (N - 1 - r) / 2};
  check_split(in, N, "67452301", "88888888");
}

TEST(reversed_keys) {
  p2pk_split_in in[N];
  for (int r = 0; r < N; r++) in[r] = (p2pk_split_in){r % 2, -r};
  check_split(in, N, "33221100", "44444444");
  /* colors in any order and of any size, keys negative and large */
  p2pk_split_in mixed[6] = {{9, 100}, {2, -4}, {9, -100}, {0, 0}, {2, -4}, {9, 0}};
  check_split(mixed, 6, "200011", "323123");
}

TEST(bad_color) {
  p2pk_split_in in[3] = {{0, 0}, {-2, 0}, {1, 0}};
  p2pk_split_out out[3];
  CHECK_EQ(p2pk_split_compute(in, 3, out), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_STR(p2pkit_last_error(), "p2pkit_comm_split: rank 1 gave color -2; a color is 0 or "
            "more, or P2PKIT_SPLIT_NOCOLOR (-1)");
  int members[3];
  CHECK_EQ(p2pk_split_members(in, 3, 5, members), 0);
}

TEST(one_host_or_spanning) {
  const char *ids[N] = {"A", "A", "A", "A", "B", "B", "B", "B"};
  p2pk_hosts h;
  CHECK_OK(p2pk_hosts_group(ids, N, 0, &h));
  p2pk_split_in in[N];
  int members[N];
  /* per host: one host each */
  for (int r = 0; r < N; r++) in[r] = (p2pk_split_in){r / 4, r};
  for (int r = 0; r < N; r++) {
    int m = p2pk_split_members(in, N, r, members);
    CHECK_EQ(p2pk_split_host_count(&h, members, m), 1);
  }
  /* even/odd: each spans both hosts */
  for (int r = 0; r < N; r++) in[r] = (p2pk_split_in){r % 2, r};
  int m = p2pk_split_members(in, N, 3, members);
  CHECK_EQ(p2pk_split_host_count(&h, members, m), 2);
  /* same local index across hosts: the hierarchical all-reduce's cross group */
  for (int r = 0; r < N; r++) in[r] = (p2pk_split_in){r % 4, r / 4};
  m = p2pk_split_members(in, N, 6, members);
  CHECK_EQ(m, 2);
  CHECK_EQ(members[0], 2);
  CHECK_EQ(members[1], 6);
  CHECK_EQ(p2pk_split_host_count(&h, members, m), 2);
  CHECK_EQ(p2pk_split_host_count(&h, members, 0), 0);
  p2pk_hosts_free(&h);
}

T_MAIN(T_CASE(even_odd), T_CASE(per_host), T_CASE(nocolor), T_CASE(equal_keys_keep_old_order),
       T_CASE(reversed_keys), T_CASE(bad_color), T_CASE(one_host_or_spanning))
