/* SPDX-License-Identifier: BSD-3-Clause */
/* The all-reduce algorithm table, its text format, the choice rules and the
 * scratch layout: all plain C, checked without a GPU. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll/select/algo.h"
#include "coll/paths/ce/ce_common.h"
#include "core/param.h"
#include "test.h"

static p2pk_algo_geom geom2(void) {
  p2pk_algo_geom g = {2, 0, 132, 1 << 20, 56 << 10, P2PK_COLL_MAILBOXES, 512 << 10, 33554520, {0}, 1};
  return g;
}

static const p2pk_algo_force no_force = {-1, -1, 0, 0, 0};

/* geom2 with the default 128 MiB buffer's mailboxes (512 of ~120 KiB). */
static p2pk_algo_geom geom2_default_buffer(void) {
  p2pk_algo_geom g = geom2();
  g.mailboxes = 512;
  g.mailbox = 120 << 10;
  return g;
}

TEST(default_table_two_ranks) {
  p2pk_algo_table t;
  p2pk_algo_table_default(&t);
  CHECK_STR(t.source, "built-in");
  const p2pk_algo_row *r = p2pk_algo_lookup(&t, P2PK_TRANSPORT_P2P, 2, 8);
  CHECK(r && r->algo == P2PK_ALGO_ONESHOT && r->proto == P2PK_PROTO_LL);
  r = p2pk_algo_lookup(&t, P2PK_TRANSPORT_P2P, 2, 128 << 10);
  CHECK(r && r->proto == P2PK_PROTO_LL);
  r = p2pk_algo_lookup(&t, P2PK_TRANSPORT_P2P, 2, (128 << 10) + 1);
  CHECK(r && r->algo == P2PK_ALGO_ONESHOT && r->proto == P2PK_PROTO_LL128 && r->threads == 256);
  r = p2pk_algo_lookup(&t, P2PK_TRANSPORT_P2P, 2, 256 << 10);
  CHECK(r && r->proto == P2PK_PROTO_LL128 && r->threads == 256);
  r = p2pk_algo_lookup(&t, P2PK_TRANSPORT_P2P, 2, (256 << 10) + 1);
  CHECK(r && r->algo == P2PK_ALGO_ONESHOT && r->proto == P2PK_PROTO_LL128 && r->threads == 96);
  r = p2pk_algo_lookup(&t, P2PK_TRANSPORT_P2P, 2, 512 << 10);
  CHECK(r && r->proto == P2PK_PROTO_LL128 && r->threads == 96);
  r = p2pk_algo_lookup(&t, P2PK_TRANSPORT_P2P, 2, (512 << 10) + 1);
  CHECK(r && r->proto == P2PK_PROTO_LL128 && r->threads == 128);
  r = p2pk_algo_lookup(&t, P2PK_TRANSPORT_P2P, 2, 1 << 20);
  CHECK(r && r->proto == P2PK_PROTO_LL128 && r->threads == 128);
  r = p2pk_algo_lookup(&t, P2PK_TRANSPORT_P2P, 2, (1 << 20) + 1);
  CHECK(r && r->proto == P2PK_PROTO_LL128 && r->threads == 256);
  r = p2pk_algo_lookup(&t, P2PK_TRANSPORT_P2P, 2, 16 << 20);
  CHECK(r && r->algo == P2PK_ALGO_ONESHOT && r->proto == P2PK_PROTO_LL128 && r->threads == 256);
  r = p2pk_algo_lookup(&t, P2PK_TRANSPORT_P2P, 2, (16 << 20) + 1);
  CHECK(r && r->algo == P2PK_ALGO_ONESHOT && r->proto == P2PK_PROTO_LL128 && r->threads == 512);
  r = p2pk_algo_lookup(&t, P2PK_TRANSPORT_P2P, 2, 32 << 20);
  CHECK(r && r->algo == P2PK_ALGO_ONESHOT && r->proto == P2PK_PROTO_LL128);
  r = p2pk_algo_lookup(&t, P2PK_TRANSPORT_P2P, 2, (32 << 20) + 1);
  CHECK(r && r->algo == P2PK_ALGO_TWOSHOT && r->proto == P2PK_PROTO_SIMPLE);
  r = p2pk_algo_lookup(&t, P2PK_TRANSPORT_P2P, 2, (size_t)1 << 40);
  CHECK(r && r->algo == P2PK_ALGO_TWOSHOT && r->proto == P2PK_PROTO_SIMPLE);
}

TEST(default_table_more_ranks_and_shm) {
  p2pk_algo_table t;
  p2pk_algo_table_default(&t);
  const p2pk_algo_row *r = p2pk_algo_lookup(&t, P2PK_TRANSPORT_P2P, 4, 64 << 10);
  CHECK(r && r->algo == P2PK_ALGO_ONESHOT && r->proto == P2PK_PROTO_LL);
  /* 3 and 4 ranks (measured on 4 GPUs): LL128 to 2 MiB, then two-shot. */
  for (int n = 3; n <= 4; n++) {
    r = p2pk_algo_lookup(&t, P2PK_TRANSPORT_P2P, n, (64 << 10) + 1);
    CHECK(r && r->algo == P2PK_ALGO_ONESHOT && r->proto == P2PK_PROTO_LL128);
    r = p2pk_algo_lookup(&t, P2PK_TRANSPORT_P2P, n, 2 << 20);
    CHECK(r && r->algo == P2PK_ALGO_ONESHOT && r->proto == P2PK_PROTO_LL128);
    r = p2pk_algo_lookup(&t, P2PK_TRANSPORT_P2P, n, (2 << 20) + 1);
    CHECK(r && r->algo == P2PK_ALGO_TWOSHOT && r->proto == P2PK_PROTO_SIMPLE);
  }
  r = p2pk_algo_lookup(&t, P2PK_TRANSPORT_P2P, 5, (64 << 10) + 1);
  CHECK(r && r->algo == P2PK_ALGO_ONESHOT && r->proto == P2PK_PROTO_SIMPLE);
  r = p2pk_algo_lookup(&t, P2PK_TRANSPORT_P2P, 8, (64 << 10) + 1);
  CHECK(r && r->algo == P2PK_ALGO_ONESHOT && r->proto == P2PK_PROTO_SIMPLE);
  r = p2pk_algo_lookup(&t, P2PK_TRANSPORT_P2P, 8, (512 << 10) + 1);
  CHECK(r && r->algo == P2PK_ALGO_TWOSHOT);
  r = p2pk_algo_lookup(&t, P2PK_TRANSPORT_SHM, 2, 8);
  CHECK(r && r->algo == P2PK_ALGO_STAGED);
  CHECK(p2pk_algo_lookup(&t, P2PK_TRANSPORT_P2P, 1, 8) == NULL);
}

static const char *good =
    "# from a sweep\n"
    "p2pkit-algo-table 1\n"
    "\n"
    "p2p 2 2 64K oneshot ll 16 256 0   # small\n"
    "p2p 2 2 16M twoshot simple 66 512 128K\n"
    "p2p 2 8 inf oneshot simple 0 0 0\n"
    "shm 2 16 inf staged simple 8 512 1M\n";

TEST(parse_good_table) {
  p2pk_algo_table t;
  CHECK_OK(p2pk_algo_table_parse("sweep.txt", good, &t));
  CHECK_EQ(t.nrows, 4);
  CHECK_STR(t.source, "sweep.txt");
  CHECK_EQ(t.rows[0].max_bytes, 64 << 10);
  CHECK_EQ(t.rows[0].blocks, 16);
  CHECK_EQ(t.rows[0].threads, 256);
  CHECK_EQ(t.rows[1].algo, P2PK_ALGO_TWOSHOT);
  CHECK_EQ(t.rows[1].chunk, 128 << 10);
  CHECK(t.rows[2].max_bytes == SIZE_MAX);
  CHECK_EQ(t.rows[2].max_ranks, 8);
  CHECK_EQ(t.rows[3].transport, P2PK_TRANSPORT_SHM);
  const p2pk_algo_row *r = p2pk_algo_lookup(&t, P2PK_TRANSPORT_P2P, 2, 1 << 20);
  CHECK(r == &t.rows[1]);
  r = p2pk_algo_lookup(&t, P2PK_TRANSPORT_P2P, 3, 8);
  CHECK(r == &t.rows[2]);
}

static void expect_parse_error(const char *text, const char *needle) {
  p2pk_algo_table t;
  p2pkit_status_t st = p2pk_algo_table_parse("bad.txt", text, &t);
  CHECK_EQ(st, P2PKIT_ERR_PARSE);
  if (!strstr(p2pkit_last_error(), needle))
    T_FAIL("error '%s' does not mention '%s'", p2pkit_last_error(), needle);
}

TEST(parse_errors_name_the_line) {
  expect_parse_error("", "empty");
  expect_parse_error("p2p 2 2 inf oneshot ll 0 0 0\n", "bad.txt:1: expected the header");
  expect_parse_error("p2pkit-algo-table 2\n", "header");
  expect_parse_error("p2pkit-algo-table 1\n", "no rows");
  expect_parse_error("p2pkit-algo-table 1\nnvl 2 2 inf oneshot ll 0 0 0\n", "bad.txt:2: transport");
  expect_parse_error("p2pkit-algo-table 1\np2p 3 2 inf oneshot ll 0 0 0\n", "rank range");
  expect_parse_error("p2pkit-algo-table 1\np2p 2 2 lots oneshot ll 0 0 0\n", "max_bytes");
  expect_parse_error("p2pkit-algo-table 1\np2p 2 2 inf threeshot ll 0 0 0\n", "algorithm");
  expect_parse_error("p2pkit-algo-table 1\np2p 2 2 inf oneshot ll256 0 0 0\n", "protocol");
  expect_parse_error("p2pkit-algo-table 1\np2p 2 2 inf oneshot ll 0 0\n", "expected 9 fields");
  expect_parse_error("p2pkit-algo-table 1\np2p 2 2 inf oneshot ll 0 0 0 7\n", "found 10");
  expect_parse_error("p2pkit-algo-table 1\np2p 2 2 inf staged simple 0 0 0\n", "staged");
  expect_parse_error("p2pkit-algo-table 1\nshm 2 2 inf oneshot simple 0 0 0\n", "staged");
  expect_parse_error("p2pkit-algo-table 1\np2p 2 2 inf oneshot ll -1 0 0\n", "blocks");
  expect_parse_error("p2pkit-algo-table 1\np2p 2 2 inf oneshot ll 0 2048 0\n", "threads");
  expect_parse_error("p2pkit-algo-table 1\np2p 2 2 inf oneshot ll 0 0 2G\n", "chunk");
}

TEST(write_then_parse_round_trip) {
  p2pk_algo_table t, back;
  CHECK_OK(p2pk_algo_table_parse("sweep.txt", good, &t));
  char path[] = "/tmp/p2pk_algo_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  FILE *f = fdopen(fd, "w");
  CHECK_OK(p2pk_algo_table_write(&t, f));
  fclose(f);
  CHECK_OK(p2pk_algo_table_load(path, &back));
  CHECK_EQ(back.nrows, t.nrows);
  CHECK(p2pk_algo_table_hash(&back) == p2pk_algo_table_hash(&t));
  p2pk_algo_table d;
  p2pk_algo_table_default(&d);
  CHECK(p2pk_algo_table_hash(&d) != p2pk_algo_table_hash(&t));
  unlink(path);
  CHECK_EQ(p2pk_algo_table_load(path, &back), P2PKIT_ERR_IO);
  CHECK(strstr(p2pkit_last_error(), path) != NULL);
}

TEST(choose_fills_automatic_fields) {
  p2pk_algo_table t;
  p2pk_algo_table_default(&t);
  p2pk_algo_geom g = geom2();
  p2pk_algo_choice c;
  p2pk_algo_choose(&t, &no_force, &g, 8, &c);
  CHECK_EQ(c.algo, P2PK_ALGO_ONESHOT);
  CHECK_EQ(c.proto, P2PK_PROTO_LL);
  CHECK_EQ(c.blocks, 1);
  p2pk_algo_choose(&t, &no_force, &g, 64 << 10, &c);
  CHECK_EQ(c.blocks, (64 << 10) / 8 / c.threads);
  /* LL: one 8-byte line per thread, up to four blocks per SM. */
  p2pk_algo_choose(&t, &no_force, &g, 128 << 10, &c);
  CHECK_EQ(c.proto, P2PK_PROTO_LL);
  CHECK_EQ(c.blocks, (128 << 10) / 8 / c.threads);
  /* LL128 from the table's rows (96 threads above 256 KiB to 512 KiB, 128
   * to 1 MiB, 256
   * to 16 MiB, 512 to 32 MiB), one 128-byte line (120 bytes) per 8
   * threads, up to four blocks per SM. */
  p2pk_algo_choose(&t, &no_force, &g, 256 << 10, &c);
  CHECK_EQ(c.proto, P2PK_PROTO_LL128);
  CHECK_EQ(c.threads, 256);
  CHECK_EQ(c.blocks, (int)(((256 << 10) / P2PK_LL128_DATA + 1) * 8 / 256 + 1));
  p2pk_algo_choose(&t, &no_force, &g, 512 << 10, &c);
  CHECK_EQ(c.proto, P2PK_PROTO_LL128);
  CHECK_EQ(c.threads, 96);
  /* 4370 lines, 8 lanes each, 96 a block: 365 blocks, within 4 per SM. */
  CHECK_EQ(c.blocks, (int)((((512 << 10) / P2PK_LL128_DATA + 1) * 8 + 95) / 96));
  CHECK(c.blocks > g.sm_count && c.blocks <= 4 * g.sm_count);
  g.ll128_cap = 32u << 20;
  p2pk_algo_choose(&t, &no_force, &g, 32 << 20, &c);
  CHECK_EQ(c.proto, P2PK_PROTO_LL128);
  CHECK_EQ(c.threads, 512);
  CHECK_EQ(c.blocks, 4 * g.sm_count);
  /* What the GPU holds at once bounds an LL128 grid when it is known. */
  g.ll128_per_sm[512 / 32] = 2;
  p2pk_algo_choose(&t, &no_force, &g, 32 << 20, &c);
  CHECK_EQ(c.blocks, 2 * g.sm_count);
  p2pk_algo_choose(&t, &no_force, &g, 8 << 20, &c); /* 256 threads: not known */
  CHECK_EQ(c.threads, 256);
  CHECK_EQ(c.blocks, 4 * g.sm_count);
  /* Without the LL128 area its rows do not match: the next row (two-shot
   * simple) takes the message, with an automatic grid. */
  g.ll128_cap = 0;
  p2pk_algo_choose(&t, &no_force, &g, 2 << 20, &c);
  CHECK_EQ(c.proto, P2PK_PROTO_SIMPLE);
  CHECK_EQ(c.algo, P2PK_ALGO_TWOSHOT);
  CHECK_EQ(c.threads, 512);
  CHECK(c.blocks >= 1 && c.blocks <= g.sm_count);
  CHECK(c.chunk % 16 == 0 && c.chunk > 0 && c.chunk <= g.mailbox);
  CHECK((uint64_t)c.blocks * c.chunk * 2 >= (2u << 20)); /* one round covers the message */
  CHECK(p2pk_algo_lookup_fit(&t, &g, 2 << 20) == &t.rows[6]);
  CHECK(p2pk_algo_lookup_fit(&t, &g, 8) == &t.rows[0]);
  /* Forced one-shot: simple, one round. */
  p2pk_algo_force f1 = no_force;
  f1.algo = P2PK_ALGO_ONESHOT;
  p2pk_algo_choose(&t, &f1, &g, 2 << 20, &c);
  CHECK_EQ(c.algo, P2PK_ALGO_ONESHOT);
  CHECK_EQ(c.proto, P2PK_PROTO_SIMPLE);
  CHECK((uint64_t)c.blocks * c.chunk >= (2u << 20));
  /* An area smaller than the row: LL128 to what fits, then the next row. */
  g.ll128_cap = 4u << 20;
  p2pk_algo_choose(&t, &no_force, &g, 4 << 20, &c);
  CHECK_EQ(c.proto, P2PK_PROTO_LL128);
  p2pk_algo_choose(&t, &no_force, &g, (4 << 20) + 1, &c);
  CHECK_EQ(c.algo, P2PK_ALGO_TWOSHOT);
  g = geom2();
  p2pk_algo_choose(&t, &no_force, &g, (size_t)1 << 30, &c);
  CHECK_EQ(c.blocks, g.sm_count);
  CHECK_EQ(c.chunk, g.mailbox);
  CHECK_EQ(c.slots, P2PK_COLL_SLOTS);
  CHECK(c.threads % 32 == 0 && c.threads >= 64 && c.threads <= 512);
}

TEST(choose_respects_limits_and_overrides) {
  p2pk_algo_table t;
  p2pk_algo_table_default(&t);
  p2pk_algo_geom g = geom2();
  p2pk_algo_choice c;
  /* LL only fits its area: a forced LL on a large message falls back. */
  p2pk_algo_force f = no_force;
  f.proto = P2PK_PROTO_LL;
  p2pk_algo_choose(&t, &f, &g, (size_t)2 << 20, &c);
  CHECK_EQ(c.proto, P2PK_PROTO_SIMPLE);
  p2pk_algo_choose(&t, &f, &g, 1 << 20, &c);
  CHECK_EQ(c.proto, P2PK_PROTO_LL);
  /* LL128 likewise: up to its area, one 128-byte line per 8 threads, up to
   * four blocks per SM; simple beyond, or when the area is off. One-shot
   * only: above 8 MiB the table's row is two-shot, so force one-shot too. */
  f.proto = P2PK_PROTO_LL128;
  f.algo = P2PK_ALGO_ONESHOT;
  p2pk_algo_choose(&t, &f, &g, g.ll128_cap, &c);
  CHECK_EQ(c.proto, P2PK_PROTO_LL128);
  CHECK_EQ(c.algo, P2PK_ALGO_ONESHOT);
  CHECK_EQ(c.blocks, 4 * g.sm_count);
  p2pk_algo_choose(&t, &f, &g, 1 << 20, &c);
  CHECK_EQ(c.proto, P2PK_PROTO_LL128);
  {
    /* One line per 8 threads (the row's 128 threads here), within the four
     * blocks per SM this geometry allows (it knows no occupancy). */
    int want = (int)((((1 << 20) / P2PK_LL128_DATA + 1) * 8 + c.threads - 1) / c.threads);
    CHECK_EQ(c.blocks, want < 4 * g.sm_count ? want : 4 * g.sm_count);
  }
  p2pk_algo_choose(&t, &f, &g, g.ll128_cap + 1, &c);
  CHECK_EQ(c.proto, P2PK_PROTO_SIMPLE);
  g.ll128_cap = 0;
  p2pk_algo_choose(&t, &f, &g, 8, &c);
  CHECK_EQ(c.proto, P2PK_PROTO_SIMPLE);
  g = geom2();
  f.algo = -1;
  g.ll128_cap = 64u << 20;
  p2pk_algo_choose(&t, &f, &g, (size_t)33 << 20, &c); /* the row's two-shot wins */
  CHECK_EQ(c.proto, P2PK_PROTO_SIMPLE);
  g = geom2();
  /* Forced two-shot never runs LL. */
  f = no_force;
  f.algo = P2PK_ALGO_TWOSHOT;
  p2pk_algo_choose(&t, &f, &g, 8, &c);
  CHECK_EQ(c.algo, P2PK_ALGO_TWOSHOT);
  CHECK_EQ(c.proto, P2PK_PROTO_SIMPLE);
  CHECK(c.chunk >= 16 && c.chunk % 16 == 0);
  /* Blocks: never more than the mailboxes allow; chunk never above a mailbox. */
  f = no_force;
  f.blocks = 1000;
  f.chunk = (size_t)1 << 30;
  p2pk_algo_choose(&t, &f, &g, (size_t)1 << 30, &c);
  CHECK_EQ(c.blocks, P2PK_COLL_MAILBOXES / P2PK_COLL_SLOTS);
  CHECK_EQ(c.chunk, g.mailbox);
  f.chunk = 1000; /* rounded down to 16 */
  f.threads = 100;
  p2pk_algo_choose(&t, &f, &g, (size_t)1 << 30, &c);
  CHECK_EQ(c.chunk, 992);
  CHECK_EQ(c.threads, 96);
  /* A P2P communicator cannot stage; a staged one always does. */
  f = no_force;
  f.algo = P2PK_ALGO_STAGED;
  p2pk_algo_choose(&t, &f, &g, 1 << 20, &c);
  CHECK(c.algo != P2PK_ALGO_STAGED);
  g.staged = 1;
  f.algo = P2PK_ALGO_ONESHOT;
  p2pk_algo_choose(&t, &f, &g, (size_t)128 << 20, &c);
  CHECK_EQ(c.algo, P2PK_ALGO_STAGED);
  CHECK_EQ(c.proto, P2PK_PROTO_SIMPLE);
  CHECK(2 * c.blocks <= g.sm_count);
  CHECK(c.chunk <= g.stage_mailbox);
  CHECK(c.blocks * P2PK_COLL_SLOTS <= P2PK_STAGE_MAILBOXES);
}

/* Issue 8 before any 4/8-GPU machine: for every rank count the communicator
 * supports, both transports and sizes from 1 B to 1 GiB (odd ones too), the
 * built-in choice is one the kernels can run with the layout that rank count
 * gets: LL only where the LL area holds the message, mailbox uses inside the
 * mailboxes, a chunk that fits a mailbox, a grid the GPU can hold; and the
 * table's intent (two-shot for large messages, earlier from 3 ranks on). */
TEST(choice_valid_for_every_rank_count) {
  p2pk_algo_table t;
  p2pk_algo_table_default(&t);
  for (int n = 2; n <= P2PK_COLL_MAX_RANKS; n++)
    for (int staged = 0; staged <= 1; staged++) {
      p2pk_layout l;
      size_t ll = 0;
      CHECK_OK(p2pk_layout_compute(n, 64u << 20, staged, p2pk_mailboxes_for(132), &l, &ll));
      p2pk_algo_geom g = {n, staged, 132, ll, (size_t)l.mailbox, (int)l.nboxes, (size_t)l.stage_mailbox,
                          (size_t)(l.ll128_bytes / P2PK_LL128_LINE * P2PK_LL128_DATA), {0}, 1};
      for (size_t b = 1; b <= ((size_t)1 << 30); b = b < 16 ? b + 1 : b * 2 + (b & 1 ? 0 : 1)) {
        p2pk_algo_choice c;
        p2pk_algo_choose(&t, &no_force, &g, b, &c);
        char what[96];
        snprintf(what, sizeof what, "%d ranks, %s, %zu B", n, staged ? "staged" : "p2p", b);
        t_current = what;
        CHECK(c.threads % 32 == 0 && c.threads >= 32 && c.threads <= 512);
        CHECK(c.blocks >= 1 && c.slots >= 1);
        if (staged) {
          CHECK_EQ(c.algo, P2PK_ALGO_STAGED);
          CHECK(2 * c.blocks <= g.sm_count);
          CHECK(c.blocks * c.slots <= P2PK_STAGE_MAILBOXES);
          CHECK(c.chunk > 0 && c.chunk % 16 == 0 && c.chunk <= g.stage_mailbox);
          continue;
        }
        CHECK(c.algo == P2PK_ALGO_ONESHOT || c.algo == P2PK_ALGO_TWOSHOT);
        if (c.proto == P2PK_PROTO_LL || c.proto == P2PK_PROTO_LL128) {
          CHECK_EQ(c.algo, P2PK_ALGO_ONESHOT);
          CHECK(b <= (c.proto == P2PK_PROTO_LL ? g.ll_cap : g.ll128_cap));
          CHECK(c.blocks <= 4 * g.sm_count && c.blocks <= P2PK_COLL_MAX_BLOCKS);
        } else {
          CHECK(c.blocks <= g.sm_count);
          CHECK(c.blocks * c.slots <= g.mailboxes);
          CHECK(c.chunk > 0 && c.chunk % 16 == 0 && c.chunk <= g.mailbox);
        }
        if ((n == 2 && b > ((size_t)32 << 20)) || (n >= 3 && n <= 4 && b > ((size_t)2 << 20)) ||
            (n >= 5 && b > ((size_t)512 << 10)))
          CHECK_EQ(c.algo, P2PK_ALGO_TWOSHOT);
        if (b <= ((size_t)64 << 10)) CHECK_EQ(c.proto, P2PK_PROTO_LL);
        if (n == 2 && b > ((size_t)128 << 10) && b <= g.ll128_cap) CHECK_EQ(c.proto, P2PK_PROTO_LL128);
      }
    }
  t_current = "choice_valid_for_every_rank_count";
}

TEST(choose_is_deterministic) {
  p2pk_algo_table t;
  p2pk_algo_table_default(&t);
  p2pk_algo_geom g = geom2();
  for (size_t b = 1; b < ((size_t)1 << 31); b = b * 3 + 1) {
    p2pk_algo_choice x, y;
    p2pk_algo_choose(&t, &no_force, &g, b, &x);
    p2pk_algo_choose(&t, &no_force, &g, b, &y);
    CHECK(memcmp(&x, &y, sizeof x) == 0);
    if (x.proto == P2PK_PROTO_SIMPLE) CHECK(x.chunk >= 16 && x.chunk <= g.mailbox);
  }
}

TEST(force_from_environment) {
  p2pk_algo_force f;
  setenv("P2PKIT_ALGO", "twoshot", 1);
  setenv("P2PKIT_PROTO", "simple", 1);
  setenv("P2PKIT_COLL_CHUNK", "64K", 1);
  setenv("P2PKIT_COLL_BLOCKS", "33", 1);
  p2pk_param_reset();
  CHECK_OK(p2pk_algo_force_from_env(&f));
  CHECK_EQ(f.algo, P2PK_ALGO_TWOSHOT);
  CHECK_EQ(f.proto, P2PK_PROTO_SIMPLE);
  CHECK_EQ(f.chunk, 64 << 10);
  CHECK_EQ(f.blocks, 33);
  setenv("P2PKIT_ALGO", "ring", 1);
  p2pk_param_reset();
  CHECK_EQ(p2pk_algo_force_from_env(&f), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "ring") != NULL);
  setenv("P2PKIT_ALGO", "", 1);
  setenv("P2PKIT_COLL_BLOCKS", "5000", 1);
  p2pk_param_reset();
  /* The settings registry refuses it (a communicator checks the settings
   * first); read anyway, it is the default, never 5000 blocks. */
  CHECK_EQ(p2pk_param_check(), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_STR(p2pkit_last_error(), "P2PKIT_COLL_BLOCKS='5000' must be a whole number from 0 to 1024");
  CHECK_OK(p2pk_algo_force_from_env(&f));
  CHECK_EQ(f.blocks, 0);
  unsetenv("P2PKIT_ALGO");
  unsetenv("P2PKIT_PROTO");
  unsetenv("P2PKIT_COLL_CHUNK");
  unsetenv("P2PKIT_COLL_BLOCKS");
  p2pk_param_reset();
  CHECK_OK(p2pk_algo_force_from_env(&f));
  CHECK_EQ(f.algo, -1);
  CHECK_EQ(f.proto, -1);
  CHECK_EQ(f.blocks, 0);
  CHECK_EQ(f.chunk, 0);
}

/* The settings registry's ranges are the kernels' own limits. */
TEST(registry_ranges_are_the_kernels) {
  static const char *const names[] = {"P2PKIT_COLL_BLOCKS", "P2PKIT_MAX_BLOCKS"};
  for (size_t k = 0; k < 2; k++) {
    const p2pk_param_def *d = NULL;
    for (size_t i = 0; i < p2pk_param_count(); i++)
      if (strcmp(p2pk_param_at(i)->name, names[k]) == 0) d = p2pk_param_at(i);
    CHECK(d && d->ranged && d->lo == 0 && d->hi == P2PK_COLL_MAX_BLOCKS);
  }
}

TEST(layout_fits_and_does_not_overlap) {
  for (int n = 2; n <= P2PK_COLL_MAX_RANKS; n++) {
    p2pk_layout l;
    size_t ll = 0;
    CHECK_OK(p2pk_layout_compute(n, 64u << 20, 0, 512, &l, &ll));
    CHECK(l.mailbox >= 4096 && l.mailbox % 4096 == 0);
    CHECK(ll >= (16u << 10) && ll <= (1u << 20) && l.ll_bytes == 2 * ll);
    CHECK(l.ready_off >= sizeof(p2pk_dev_ctrl));
    uint64_t counters = (uint64_t)P2PK_COLL_SETS * n * P2PK_COLL_MAILBOXES * 8;
    CHECK(l.freed_off >= l.ready_off + counters);
    CHECK(l.sent_off >= l.freed_off + counters);
    CHECK(l.recvd_off >= l.sent_off + counters);
    CHECK(l.agtok_off >= l.recvd_off + counters);
    CHECK(l.ll_off >= l.agtok_off + (uint64_t)n * P2PK_COLL_MAILBOXES * 8);
    CHECK(l.p2p_ll_off >= l.ll_off + 2 * (uint64_t)(n - 1) * l.ll_bytes);
    CHECK(l.data_off >= l.p2p_ll_off + 4 * (uint64_t)(n - 1) * P2PK_P2P_LL_MAX);
    /* LL128 on top of the buffer: 32 MiB of messages over all peers. */
    uint64_t buf_end = l.data_off + (uint64_t)P2PK_COLL_SETS * (n - 1) * l.nboxes * l.mailbox;
    CHECK(buf_end <= (64u << 20));
    CHECK(l.ll128_off >= buf_end && l.ll128_off % 4096 == 0);
    CHECK_EQ(l.total, l.ll128_off + 2 * (uint64_t)(n - 1) * l.ll128_bytes);
    uint64_t cap = l.ll128_bytes / P2PK_LL128_LINE * P2PK_LL128_DATA;
    CHECK(cap * (n - 1) >= (32u << 20));
    CHECK(l.ll128_bytes <= ((32u << 20) / (n - 1) / P2PK_LL128_DATA + 1) * P2PK_LL128_LINE + 4095);
    CHECK(l.nboxes >= 16 && l.nboxes <= P2PK_COLL_MAILBOXES);
    CHECK(n > 4 || l.nboxes == P2PK_COLL_MAILBOXES);
    CHECK(l.ll_off % 4096 == 0 && l.data_off % 4096 == 0);
  }
  p2pk_layout l;
  size_t ll;
  CHECK_OK(p2pk_layout_compute(2, 1 << 20, 0, 512, &l, &ll)); /* small: fewer mailboxes */
  CHECK(l.nboxes < P2PK_COLL_MAILBOXES && l.ll128_off <= (1u << 20));
  /* P2PKIT_LL128_MAX=0: no LL128 area; 1M: 1 MiB over the peers. */
  setenv("P2PKIT_LL128_MAX", "0", 1);
  p2pk_param_reset();
  CHECK_OK(p2pk_layout_compute(2, 1 << 20, 0, 512, &l, &ll));
  CHECK(l.ll128_bytes == 0 && l.total <= (1u << 20));
  setenv("P2PKIT_LL128_MAX", "1M", 1);
  p2pk_param_reset();
  CHECK_OK(p2pk_layout_compute(3, 64u << 20, 0, 512, &l, &ll));
  CHECK_EQ(l.ll128_bytes, ((((512u << 10) + P2PK_LL128_DATA - 1) / P2PK_LL128_DATA) * P2PK_LL128_LINE + 4095) & ~4095ULL);
  unsetenv("P2PKIT_LL128_MAX");
  p2pk_param_reset();
  CHECK_EQ(p2pk_layout_compute(2, 256 << 10, 0, 512, &l, &ll), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "P2PKIT_BUFFER_SIZE") != NULL);
  CHECK_EQ(p2pk_layout_compute(0, 64u << 20, 0, 512, &l, &ll), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pk_layout_compute(P2PK_COLL_MAX_RANKS + 1, 64u << 20, 0, 512, &l, &ll),
           P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_OK(p2pk_layout_compute(4, 64u << 20, 1, 512, &l, &ll));
  CHECK_EQ(ll, 0);
  CHECK(l.stage_mailbox >= 4096 && l.stage_mailbox % 4096 == 0);
  CHECK(l.stage_data_off >= sizeof(p2pk_stage_ctrl));
  CHECK_EQ(l.stage_p2p_off, l.stage_data_off + (uint64_t)P2PK_STAGE_MAILBOXES * l.stage_mailbox);
  CHECK(l.stage_p2p_box >= 4096 && l.stage_p2p_box % 4096 == 0 && l.stage_p2p_box <= (128u << 10));
  CHECK_EQ(l.stage_stride, l.stage_p2p_off + 4ULL * P2PK_STAGE_P2P_BOXES * l.stage_p2p_box);
  CHECK(l.stage_stride <= (64u << 20));
  /* Every rank count fits its parts in the buffer, send/recv mailboxes included. */
  for (int n = 2; n <= P2PK_COLL_MAX_RANKS; n++) {
    CHECK_OK(p2pk_layout_compute(n, 64u << 20, 1, 512, &l, &ll));
    CHECK(l.stage_stride <= (64u << 20) && l.stage_mailbox >= (256u << 10));
  }
  CHECK_EQ(l.mailbox, 0);
  CHECK_EQ(p2pk_layout_compute(2, 64 << 10, 1, 512, &l, &ll), P2PKIT_ERR_INVALID_ARGUMENT);
}

/* A 2-rank P2P communicator's selector as its kernel choices see it: the
 * built-in table, no settings, the default buffer's geometry (rank 0). */
static int call_cap; /* the call's grid cap (p2pk_all_reduce_capped) */
static void sel2_default(p2pk_sel *c) {
  p2pk_sel_init(c, 2, 0, 0, 2, NULL, &no_force);
  c->max_blocks = 0;
  c->rooted_min = 0;
  c->geom = geom2_default_buffer();
  call_cap = 0;
}

static void choose(const p2pk_sel *c, int kind, size_t block, p2pk_algo_choice *ch) {
  p2pk_sel_choose(c, kind, block, p2pk_sel_cap(c, call_cap), ch);
}

/* The copy-engine thresholds a communicator resolves, as the tests below
 * name them: one process eagerly (ce_min) or a process per GPU (ce_min,
 * once its slots exist); the landing slots' (cep_min, per kind: process
 * per GPU as eagerly, but the broadcast's under capture; one process
 * under capture); send/recv through the slots (cep_p2p_min) and straight
 * in (cep_direct_p2p_min); under capture at all (cep_cap_ok). */
typedef struct {
  size_t ce_min[P2PK_COLL_KINDS], cep_min[P2PK_COLL_KINDS];
  size_t cep_p2p_min, cep_direct_p2p_min;
  int cep_cap_ok;
} thresholds_t;

static p2pk_sel sel_of(const struct p2pkit_comm *c) {
  p2pk_sel s;
  p2pk_sel_init(&s, c->nranks, c->multiproc, c->staged, 2, NULL, &c->sel.force);
  p2pk_sel_fill(&s, c->lay.cep_slot != 0, c->lay.stage_ce_slot != 0);
  return s;
}

static size_t ce_min_setting(const struct p2pkit_comm *c, int k) {
  p2pk_sel s = sel_of(c);
  return p2pk_sel_setting(&s, k, c->multiproc ? P2PK_FROM_SLOTS : P2PK_FROM_EVENTS);
}

static size_t ce_min(const struct p2pkit_comm *c, int k) {
  p2pk_sel s = sel_of(c);
  return s.from[c->multiproc ? P2PK_FROM_SLOTS : P2PK_FROM_EVENTS][k];
}

static size_t cep_min_setting(const struct p2pkit_comm *c, int k) {
  p2pk_sel s = sel_of(c);
  if (c->staged) return 0;
  const int graph = !c->multiproc || k == P2PK_COLL_BROADCAST;
  return p2pk_sel_setting(&s, k, graph ? P2PK_FROM_GRAPH : P2PK_FROM_SLOTS);
}

static size_t cep_p2p_min(const struct p2pkit_comm *c) {
  p2pk_sel s = sel_of(c);
  return p2pk_sel_setting(&s, P2PK_SENDRECV, c->multiproc ? P2PK_FROM_SLOTS : P2PK_FROM_GRAPH);
}

static int cep_wanted(const struct p2pkit_comm *c) {
  p2pk_sel s = sel_of(c);
  return p2pk_sel_wants_slots(&s);
}

static void ce_min_fill(const struct p2pkit_comm *c, thresholds_t *t) {
  p2pk_sel s = sel_of(c);
  for (int k = 0; k < P2PK_COLL_KINDS; k++) {
    t->ce_min[k] = ce_min(c, k);
    t->cep_min[k] = c->lay.cep_slot ? cep_min_setting(c, k) : 0;
  }
  t->cep_p2p_min = c->lay.cep_slot ? cep_p2p_min(c) : 0;
  t->cep_direct_p2p_min = c->multiproc ? 0 : s.from[P2PK_FROM_DIRECT][P2PK_SENDRECV];
  t->cep_cap_ok = p2pk_sel_waits_ok(&s, 1);
}

/* The grid rule on top of the table (p2pk_sel_choose): two blocks per SM,
 * as far as the mailboxes allow, for all-reduces from 32 MiB and the other
 * chunked collectives' shares from 16 MiB; never for broadcast, staged
 * calls, or when a setting or the table row names a grid. */
TEST(large_calls_get_two_blocks_per_sm) {
  p2pk_sel c;
  sel2_default(&c);
  p2pk_algo_choice ch;
  /* LL128 rows (to 32 MiB on 2 GPUs) keep their own grid. */
  choose(&c, P2PK_COLL_ALL_REDUCE, (size_t)16 << 20, &ch);
  CHECK_EQ(ch.proto, P2PK_PROTO_LL128);
  CHECK_EQ(ch.threads, 256);
  CHECK_EQ(ch.blocks, 4 * 132);
  choose(&c, P2PK_COLL_ALL_REDUCE, (size_t)32 << 20, &ch);
  CHECK_EQ(ch.proto, P2PK_PROTO_LL128);
  CHECK_EQ(ch.threads, 512);
  CHECK_EQ(ch.blocks, 4 * 132);
  choose(&c, P2PK_COLL_ALL_REDUCE, (size_t)64 << 20, &ch);
  CHECK_EQ(ch.algo, P2PK_ALGO_TWOSHOT);
  CHECK_EQ(ch.blocks, 256); /* 512 mailboxes, 2 per block */
  choose(&c, P2PK_COLL_ALL_REDUCE, (size_t)1 << 30, &ch);
  CHECK_EQ(ch.blocks, 256);
  /* Without the LL128 area a 32 MiB all-reduce is two-shot, two per SM. */
  c.geom.ll128_cap = 0;
  choose(&c, P2PK_COLL_ALL_REDUCE, (size_t)32 << 20, &ch);
  CHECK_EQ(ch.proto, P2PK_PROTO_SIMPLE);
  CHECK_EQ(ch.blocks, 256);
  choose(&c, P2PK_COLL_REDUCE_SCATTER, (size_t)16 << 20, &ch);
  CHECK_EQ(ch.algo, P2PK_ALGO_ONESHOT);
  CHECK_EQ(ch.blocks, 256);
  c.geom = geom2_default_buffer();
  choose(&c, P2PK_COLL_REDUCE_SCATTER, (size_t)16 << 20, &ch);
  CHECK_EQ(ch.proto, P2PK_PROTO_LL128);
  choose(&c, P2PK_COLL_ALL_GATHER, (size_t)8 << 20, &ch);
  CHECK_EQ(ch.proto, P2PK_PROTO_LL128); /* the table's one-shot row */
  CHECK_EQ(ch.blocks, 4 * 132);
  choose(&c, P2PK_COLL_ALL_GATHER, (size_t)48 << 20, &ch);
  CHECK_EQ(ch.proto, P2PK_PROTO_SIMPLE);
  CHECK_EQ(ch.blocks, 256);
  /* Reduce: LL128 to 8 MiB, then simple (two per SM from 16 MiB). */
  choose(&c, P2PK_COLL_REDUCE, (size_t)8 << 20, &ch);
  CHECK_EQ(ch.proto, P2PK_PROTO_LL128);
  choose(&c, P2PK_COLL_REDUCE, (size_t)12 << 20, &ch);
  CHECK_EQ(ch.proto, P2PK_PROTO_SIMPLE);
  CHECK_EQ(ch.blocks, 132);
  choose(&c, P2PK_COLL_REDUCE, (size_t)16 << 20, &ch);
  CHECK_EQ(ch.proto, P2PK_PROTO_SIMPLE);
  CHECK_EQ(ch.blocks, 256);
  c.force.proto = P2PK_PROTO_LL128; /* unless a setting says otherwise */
  choose(&c, P2PK_COLL_REDUCE, (size_t)16 << 20, &ch);
  CHECK_EQ(ch.proto, P2PK_PROTO_LL128);
  c.force.proto = -1;
  choose(&c, P2PK_COLL_BROADCAST, (size_t)512 << 20, &ch);
  CHECK_EQ(ch.blocks, 132);
  /* Fewer mailboxes bound it. */
  c.geom.mailboxes = 264;
  choose(&c, P2PK_COLL_ALL_TO_ALL, (size_t)64 << 20, &ch);
  CHECK_EQ(ch.blocks, 132);
  c.geom.mailboxes = 512;
  /* A setting wins. */
  c.force.blocks = 66;
  choose(&c, P2PK_COLL_ALL_REDUCE, (size_t)1 << 30, &ch);
  CHECK_EQ(ch.blocks, 66);
  c.force.blocks = 0;
  /* A table row with a grid wins. */
  p2pk_algo_table t;
  CHECK_OK(p2pk_algo_table_parse("t", "p2pkit-algo-table 1\np2p 2 2 inf twoshot simple 100 0 0\n", &t));
  c.table = t;
  choose(&c, P2PK_COLL_ALL_REDUCE, (size_t)1 << 30, &ch);
  CHECK_EQ(ch.blocks, 100);
  p2pk_algo_table_default(&c.table);
  /* Staged calls keep the staged grid. */
  c.staged = 1;
  c.geom.staged = 1;
  choose(&c, P2PK_COLL_ALL_REDUCE, (size_t)1 << 30, &ch);
  CHECK_EQ(ch.algo, P2PK_ALGO_STAGED);
  CHECK(ch.blocks <= p2pk_algo_staged_blocks_max(&c.geom));
}

/* Broadcast and reduce on more than 2 ranks take the rooted two-shot from
 * P2PKIT_ROOTED_TWOSHOT_MIN (the root's links carry the message once);
 * P2PKIT_ALGO=twoshot forces it at any size and rank count, another forced
 * algorithm rules it out; the other collectives, staged calls and 2 ranks
 * keep their choice. */
TEST(rooted_twoshot_choice) {
  p2pk_sel c;
  sel2_default(&c);
  c.nranks = c.geom.nranks = 4;
  c.rooted_min = (size_t)4 << 20;
  p2pk_algo_choice ch;
  for (int kind = 0; kind < P2PK_COLL_KINDS; kind++) {
    const int rooted = kind == P2PK_COLL_BROADCAST || kind == P2PK_COLL_REDUCE;
    choose(&c, kind, ((size_t)4 << 20) - 16, &ch);
    if (kind != P2PK_COLL_ALL_REDUCE) CHECK_EQ(ch.algo, P2PK_ALGO_ONESHOT);
    CHECK_EQ(p2pk_sel_rooted(&c, kind, (size_t)4 << 20), rooted);
    choose(&c, kind, (size_t)4 << 20, &ch);
    if (rooted) {
      CHECK_EQ(ch.algo, P2PK_ALGO_TWOSHOT);
      CHECK_EQ(ch.proto, P2PK_PROTO_SIMPLE);
      CHECK(ch.chunk % 16 == 0 && ch.chunk <= c.geom.mailbox);
    } else if (kind != P2PK_COLL_ALL_REDUCE) {
      CHECK_EQ(ch.algo, P2PK_ALGO_ONESHOT);
    }
  }
  choose(&c, P2PK_COLL_REDUCE, (size_t)1 << 30, &ch);
  CHECK_EQ(ch.algo, P2PK_ALGO_TWOSHOT);
  c.rooted_min = 0; /* never */
  CHECK_EQ(p2pk_sel_rooted(&c, P2PK_COLL_BROADCAST, (size_t)1 << 30), 0);
  choose(&c, P2PK_COLL_BROADCAST, (size_t)1 << 30, &ch);
  CHECK_EQ(ch.algo, P2PK_ALGO_ONESHOT);
  c.rooted_min = (size_t)4 << 20;
  c.force.algo = P2PK_ALGO_ONESHOT; /* another forced algorithm */
  CHECK_EQ(p2pk_sel_rooted(&c, P2PK_COLL_REDUCE, (size_t)1 << 30), 0);
  c.force.algo = P2PK_ALGO_TWOSHOT; /* forced: any size, any rank count */
  CHECK_EQ(p2pk_sel_rooted(&c, P2PK_COLL_BROADCAST, 1), 1);
  choose(&c, P2PK_COLL_BROADCAST, 8, &ch);
  CHECK_EQ(ch.algo, P2PK_ALGO_TWOSHOT);
  CHECK_EQ(ch.proto, P2PK_PROTO_SIMPLE);
  choose(&c, P2PK_COLL_ALL_GATHER, (size_t)64 << 20, &ch);
  CHECK_EQ(ch.algo, P2PK_ALGO_ONESHOT);
  c.nranks = c.geom.nranks = 2;
  CHECK_EQ(p2pk_sel_rooted(&c, P2PK_COLL_REDUCE, 3), 1);
  c.force.algo = -1; /* 2 ranks: one-shot by default at any size */
  CHECK_EQ(p2pk_sel_rooted(&c, P2PK_COLL_REDUCE, (size_t)1 << 30), 0);
  c.nranks = c.geom.nranks = 4;
  c.staged = c.geom.staged = 1; /* staged: never */
  CHECK_EQ(p2pk_sel_rooted(&c, P2PK_COLL_BROADCAST, (size_t)1 << 30), 0);
  choose(&c, P2PK_COLL_BROADCAST, (size_t)1 << 30, &ch);
  CHECK_EQ(ch.algo, P2PK_ALGO_STAGED);
}

/* LL128's 96- and 128-thread rows (above 256 KiB to 1 MiB) are the all-reduce's; the
 * other collectives take 256 threads there, unless a setting names the
 * threads or another protocol (docs/decisions/allreduce-algorithm-table.md). */
TEST(mid_ll128_threads_by_collective) {
  p2pk_sel c;
  sel2_default(&c);
  p2pk_algo_choice ch;
  static const size_t mid[] = {(256 << 10) + 16, 512 << 10, 1 << 20};
  int others = 0;
  for (size_t i = 0; i < sizeof mid / sizeof mid[0]; i++) {
    choose(&c, P2PK_COLL_ALL_REDUCE, mid[i], &ch);
    CHECK_EQ(ch.proto, P2PK_PROTO_LL128);
    CHECK_EQ(ch.threads, mid[i] <= (512 << 10) ? 96 : 128);
    for (int kind = 0; kind < P2PK_COLL_KINDS; kind++) {
      if (kind == P2PK_COLL_ALL_REDUCE) continue;
      choose(&c, kind, mid[i], &ch);
      if (ch.proto != P2PK_PROTO_LL128) continue;
      others++;
      CHECK_EQ(ch.threads, 256);
      /* One line per 8 threads: the grid follows the threads. */
      CHECK_EQ(ch.blocks, (int)(((mid[i] + P2PK_LL128_DATA - 1) / P2PK_LL128_DATA * 8 + 255) / 256));
    }
  }
  CHECK_EQ(others, 3 * (P2PK_COLL_KINDS - 1)); /* every one took LL128 there */
  /* Either side of the row: 256 threads for every collective. */
  choose(&c, P2PK_COLL_ALL_REDUCE, 256 << 10, &ch);
  CHECK_EQ(ch.threads, 256);
  choose(&c, P2PK_COLL_ALL_REDUCE, (1 << 20) + 16, &ch);
  CHECK_EQ(ch.threads, 256);
  /* A setting wins: threads named, or another protocol. */
  c.force.threads = 128;
  choose(&c, P2PK_COLL_ALL_GATHER, 1 << 20, &ch);
  CHECK_EQ(ch.threads, 128);
  c.force.threads = 0;
  c.force.proto = P2PK_PROTO_SIMPLE;
  choose(&c, P2PK_COLL_ALL_GATHER, 1 << 20, &ch);
  CHECK_EQ(ch.proto, P2PK_PROTO_SIMPLE);
  CHECK_EQ(ch.threads, 512);
  c.force.proto = -1;
  /* Under a cap within one block per SM, LL128 takes 512 threads for
   * every collective, as before. */
  c.max_blocks = 40;
  choose(&c, P2PK_COLL_ALL_GATHER, 1 << 20, &ch);
  CHECK_EQ(ch.proto, P2PK_PROTO_LL128);
  CHECK_EQ(ch.threads, 512);
  CHECK_EQ(ch.blocks, 40);
  choose(&c, P2PK_COLL_ALL_REDUCE, 1 << 20, &ch);
  CHECK_EQ(ch.threads, 512);
}

/* A grid cap (p2pkit_comm_set_max_blocks, or a call's from the gradient
 * sync) bounds every choice; the chunk follows the smaller grid, LL and
 * LL128 take 512 threads a block under it; calls the cap does not reach
 * keep their grid; the staged transport ignores it. */
TEST(grid_cap_bounds_every_choice) {
  p2pk_sel c;
  sel2_default(&c);
  p2pk_algo_choice free_ch, ch;
  static const size_t sizes[] = {8, 4096, 100000, 1 << 20, 16 << 20, 32 << 20, 64 << 20, 1 << 30};
  for (int kind = 0; kind < P2PK_COLL_KINDS; kind++)
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
      c.max_blocks = 0;
      choose(&c, kind, sizes[i], &free_ch);
      c.max_blocks = 40;
      choose(&c, kind, sizes[i], &ch);
      CHECK(ch.blocks >= 1 && ch.blocks <= 40);
      CHECK_EQ(ch.proto, free_ch.proto);
      CHECK_EQ(ch.algo, free_ch.algo);
      /* Uncapped grids work one LL128 pass at a time. */
      CHECK_EQ(free_ch.ll128_x2, 0);
      if (free_ch.blocks <= 40) {
        CHECK_EQ(ch.blocks, free_ch.blocks);
        CHECK_EQ(ch.threads, free_ch.threads);
        CHECK_EQ(ch.chunk, free_ch.chunk);
        CHECK_EQ(ch.ll128_x2, 0);
      } else {
        CHECK_EQ(ch.blocks, 40);
        CHECK_EQ(ch.threads, ch.proto == P2PK_PROTO_SIMPLE ? free_ch.threads : 512);
        if (ch.proto == P2PK_PROTO_SIMPLE) CHECK(ch.chunk >= free_ch.chunk);
        /* Capped LL128 warps have several passes: two an iteration. */
        CHECK_EQ(ch.ll128_x2, ch.proto == P2PK_PROTO_LL128);
      }
    }
  /* LL128 under a cap: two passes an iteration only while a warp has more
   * than one (40 blocks x 512 threads hold 2560 lines of 120 bytes), and
   * not with P2PKIT_LL128_X2=0 (geom.ll128_x2). */
  c.max_blocks = 40;
  choose(&c, P2PK_COLL_ALL_REDUCE, (size_t)2560 * 120, &ch);
  CHECK(ch.proto == P2PK_PROTO_LL128 && ch.blocks == 40 && !ch.ll128_x2);
  choose(&c, P2PK_COLL_ALL_REDUCE, (size_t)2560 * 120 + 1, &ch);
  CHECK(ch.proto == P2PK_PROTO_LL128 && ch.blocks == 40 && ch.ll128_x2);
  c.geom.ll128_x2 = 0;
  choose(&c, P2PK_COLL_ALL_REDUCE, (size_t)4 << 20, &ch);
  CHECK(ch.proto == P2PK_PROTO_LL128 && !ch.ll128_x2);
  c.geom.ll128_x2 = 1;
  /* Above one block per SM the one-pass loop stays. */
  c.max_blocks = 200;
  choose(&c, P2PK_COLL_ALL_REDUCE, (size_t)16 << 20, &ch);
  CHECK(ch.proto == P2PK_PROTO_LL128 && ch.blocks == 200 && !ch.ll128_x2);
  /* The smaller of the call's cap and the communicator's. */
  c.max_blocks = 40;
  call_cap = 24;
  CHECK_EQ(p2pk_sel_cap(&c, call_cap), 24);
  choose(&c, P2PK_COLL_ALL_REDUCE, (size_t)16 << 20, &ch);
  CHECK_EQ(ch.blocks, 24);
  call_cap = 64;
  CHECK_EQ(p2pk_sel_cap(&c, call_cap), 40);
  c.max_blocks = 0;
  CHECK_EQ(p2pk_sel_cap(&c, call_cap), 64);
  call_cap = 0;
  CHECK_EQ(p2pk_sel_cap(&c, call_cap), 0);
  /* A thread count from the settings stays. */
  c.max_blocks = 40;
  c.force.threads = 128;
  choose(&c, P2PK_COLL_ALL_REDUCE, (size_t)1 << 20, &ch);
  CHECK_EQ(ch.threads, 128);
  CHECK_EQ(ch.blocks, 40);
  c.force.threads = 0;
  /* Staged: no cap. */
  c.staged = 1;
  c.geom.staged = 1;
  CHECK_EQ(p2pk_sel_cap(&c, call_cap), 0);
}

TEST(default_buffer_is_128m_p2p_and_64m_staged) {
  /* P2PKIT_BUFFER_SIZE=0: 128 MiB of device scratch over P2P, so 512
   * mailboxes on 2 GPUs keep ~120 KiB each (a 16 MiB two-shot on 132
   * blocks moves 63.5 KiB shards in one step); the staged host part stays
   * what 64 MiB gives. */
  p2pk_layout d, x;
  size_t ll, llx;
  CHECK_OK(p2pk_layout_compute(2, 0, 0, 512, &d, &ll));
  CHECK_OK(p2pk_layout_compute(2, 128u << 20, 0, 512, &x, &llx));
  CHECK_EQ(d.mailbox, x.mailbox);
  CHECK_EQ(d.nboxes, 512);
  CHECK(d.mailbox >= (112u << 10));
  CHECK(d.ll128_off <= (128u << 20)); /* LL128's area comes on top */
  /* More ranks: 128 MiB per peer (at most 512), so 4 ranks keep the
   * mailboxes of 2 GPUs; 8 ranks get 512 MiB. */
  p2pk_layout d4, d8;
  CHECK_OK(p2pk_layout_compute(4, 0, 0, 512, &d4, &ll));
  CHECK_OK(p2pk_layout_compute(4, 384u << 20, 0, 512, &x, &llx));
  CHECK_EQ(d4.mailbox, x.mailbox);
  CHECK(d4.mailbox >= (112u << 10));
  CHECK_OK(p2pk_layout_compute(8, 0, 0, 512, &d8, &ll));
  CHECK_OK(p2pk_layout_compute(8, 512u << 20, 0, 512, &x, &llx));
  CHECK_EQ(d8.mailbox, x.mailbox);
  CHECK_OK(p2pk_layout_compute(4, 0, 1, 512, &d4, &ll)); /* staged: 64 MiB whatever the ranks */
  CHECK_OK(p2pk_layout_compute(4, 64u << 20, 1, 512, &x, &llx));
  CHECK_EQ(d4.stage_stride, x.stage_stride);
  CHECK_OK(p2pk_layout_compute(2, 0, 1, 512, &d, &ll));
  CHECK_OK(p2pk_layout_compute(2, 64u << 20, 1, 512, &x, &llx));
  CHECK_EQ(d.stage_mailbox, x.stage_mailbox);
  CHECK_EQ(d.stage_stride, x.stage_stride);
}

TEST(mailbox_count_follows_the_gpu) {
  unsetenv("P2PKIT_COLL_MAILBOXES");
  p2pk_param_reset();
  CHECK_EQ(p2pk_mailboxes_for(132), 512);
  CHECK_EQ(p2pk_mailboxes_for(4), 16);
  CHECK_EQ(p2pk_mailboxes_for(1000), P2PK_COLL_MAILBOXES);
  setenv("P2PKIT_COLL_MAILBOXES", "100", 1);
  p2pk_param_reset();
  CHECK_EQ(p2pk_mailboxes_for(132), 100);
  setenv("P2PKIT_COLL_MAILBOXES", "16", 1); /* the ends of its range, as given */
  p2pk_param_reset();
  CHECK_EQ(p2pk_mailboxes_for(4), 16);
  setenv("P2PKIT_COLL_MAILBOXES", "512", 1);
  p2pk_param_reset();
  CHECK_EQ(p2pk_mailboxes_for(4), 512);
  static const char *const refused[] = {"-1", "8", "513"}; /* refused, never clamped */
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    setenv("P2PKIT_COLL_MAILBOXES", refused[i], 1);
    p2pk_param_reset();
    CHECK_EQ(p2pk_param_check(), P2PKIT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(p2pkit_last_error(), "must be 0 or a whole number from 16 to 512") != NULL);
  }
  unsetenv("P2PKIT_COLL_MAILBOXES");
  p2pk_param_reset();
  /* Fewer mailboxes, larger ones, same buffer. */
  p2pk_layout a, b;
  size_t ll;
  CHECK_OK(p2pk_layout_compute(2, 64u << 20, 0, 264, &a, &ll));
  CHECK_OK(p2pk_layout_compute(2, 64u << 20, 0, 512, &b, &ll));
  CHECK_EQ(a.nboxes, 264);
  CHECK(a.mailbox >= 2 * b.mailbox - 4096);
  CHECK(a.ll128_off <= (64u << 20));
  /* The grid never needs more mailboxes than there are. */
  p2pk_algo_table t;
  p2pk_algo_table_default(&t);
  p2pk_algo_geom g = geom2();
  g.mailboxes = (int)a.nboxes;
  g.mailbox = a.mailbox;
  p2pk_algo_force f = no_force;
  f.blocks = 264;
  p2pk_algo_choice c;
  p2pk_algo_choose(&t, &f, &g, (size_t)1 << 30, &c);
  CHECK_EQ(c.blocks, 132);
  CHECK_EQ(c.chunk, a.mailbox);
}

TEST(staged_copy_engine_chunks) {
  /* Whole elements in 16-byte multiples, at least one element. */
  CHECK_EQ(p2pk_sce_chunk_elems((size_t)8 << 20, 4), (size_t)2 << 20);
  CHECK_EQ(p2pk_sce_chunk_elems(17, 4), 4);
  CHECK_EQ(p2pk_sce_chunk_elems(15, 8), 1);
  CHECK_EQ(p2pk_sce_chunk_elems(100, 8), 12);
  CHECK_EQ(p2pk_sce_chunk_elems(0, 2), 1);
  /* Host slots of a process-per-GPU communicator: the default chunk, 4 KiB
   * multiples, none when the copy engines are off; past 64 MiB the setting
   * is refused (the registry's range), never cut. */
  p2pk_param_reset();
  CHECK_EQ(p2pk_sce_slot_bytes(), (size_t)4 << 20);
  setenv("P2PKIT_STAGED_CE_CHUNK", "5000", 1);
  p2pk_param_reset();
  CHECK_EQ(p2pk_sce_slot_bytes(), 8192);
  setenv("P2PKIT_STAGED_CE_CHUNK", "64M", 1);
  p2pk_param_reset();
  CHECK_EQ(p2pk_sce_slot_bytes(), (size_t)64 << 20);
  setenv("P2PKIT_STAGED_CE_CHUNK", "1G", 1);
  p2pk_param_reset();
  CHECK_EQ(p2pk_param_check(), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_STR(p2pkit_last_error(), "P2PKIT_STAGED_CE_CHUNK='1G' is out of range: it must be a size from 4K to 64M");
  setenv("P2PKIT_STAGED_CE_MIN", "0", 1);
  p2pk_param_reset();
  CHECK_EQ(p2pk_sce_slot_bytes(), 0);
  unsetenv("P2PKIT_STAGED_CE_CHUNK");
  unsetenv("P2PKIT_STAGED_CE_MIN");
  setenv("P2PKIT_STAGED_CE_DEPTH", "8", 1);
  p2pk_param_reset();
  CHECK_EQ(p2pk_sce_depth(), P2PK_SCE_DEPTH_MAX);
  setenv("P2PKIT_STAGED_CE_DEPTH", "2", 1);
  p2pk_param_reset();
  CHECK_EQ(p2pk_sce_depth(), 2);
  for (int bad = 0; bad < 3; bad++) { /* refused, never clamped */
    setenv("P2PKIT_STAGED_CE_DEPTH", bad == 0 ? "99" : bad == 1 ? "1" : "-1", 1);
    p2pk_param_reset();
    CHECK_EQ(p2pk_param_check(), P2PKIT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(p2pkit_last_error(), "must be a whole number from 2 to 8") != NULL);
  }
  unsetenv("P2PKIT_STAGED_CE_DEPTH");
  p2pk_param_reset();
  CHECK_EQ(p2pk_sce_depth(), 4);
  /* The slots end each rank's part, after the staged kernels' areas. */
  p2pk_layout l;
  size_t cap = 0;
  CHECK_OK(p2pk_layout_compute(2, 0, 1, 64, &l, &cap));
  const uint64_t stride = l.stage_stride, p2p_end = l.stage_p2p_off + 2ULL * P2PK_STAGE_P2P_BOXES * l.stage_p2p_box;
  p2pk_layout_add_ce(&l, 4, 0);
  CHECK_EQ(l.stage_stride, stride);
  CHECK_EQ(l.stage_ce_slot, 0);
  p2pk_layout_add_ce(&l, 4, (size_t)4 << 20);
  CHECK_EQ(l.stage_ce_off, p2p_end);
  CHECK_EQ(l.stage_ce_slot, (uint64_t)4 << 20);
  CHECK_EQ(l.stage_stride, stride + (16ULL << 20));
  CHECK_EQ(l.stage_ce_off % 4096, 0);
}

TEST(copy_engine_shards_and_thresholds) {
  /* All-reduce shards over the copy engines: contiguous, in rank order,
   * covering the message once, starts on 256-byte boundaries, full shards
   * of one length until the message runs out. */
  static const size_t counts[] = {1, 3, 63, 64, 65, 4097, 1000003, (size_t)1 << 28};
  static const size_t sizes[] = {1, 2, 4, 8};
  for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
    for (size_t si = 0; si < 4; si++)
      for (int n = 1; n <= 8; n++) {
        size_t es = sizes[si], count = counts[ci], next = 0, first = 0;
        for (int r = 0; r < n; r++) {
          size_t off = 1, len = 1;
          p2pk_ce_shard(count, n, es, r, &off, &len);
          CHECK_EQ(off, next);
          if (len) CHECK_EQ((off * es) % 256, 0);
          /* Full shards until the message runs out. */
          if (r == 0) first = len;
          else CHECK_EQ(len, count - off < first ? count - off : first);
          next = off + len;
        }
        CHECK_EQ(next, count);
      }
  size_t off = 9, len = 9;
  p2pk_ce_shard(10, 2, 0, 0, &off, &len); /* no element size: nothing */
  CHECK_EQ(len, 0);
  p2pk_ce_shard(10, 2, 4, 2, &off, &len); /* no such rank */
  CHECK_EQ(len, 0);
  p2pk_ce_shard((size_t)1 << 20, 2, 4, 1, &off, &len);
  CHECK_EQ(off, (size_t)1 << 19);
  CHECK_EQ(len, (size_t)1 << 19);
  /* What each rank receives, per collective: the all-reduce's shard, the
   * reduce-scatter's share, the whole message at the reduce's root and at
   * every broadcast receiver; nothing for a rank out of range. */
  size_t o2 = 0, l2 = 0;
  p2pk_ce_owned(P2PK_COLL_ALL_REDUCE, (size_t)1 << 20, 2, 4, 0, 1, &off, &len);
  p2pk_ce_shard((size_t)1 << 20, 2, 4, 1, &o2, &l2);
  CHECK_EQ(off, o2);
  CHECK_EQ(len, l2);
  p2pk_ce_owned(P2PK_COLL_REDUCE_SCATTER, 1000, 4, 2, 0, 3, &off, &len);
  CHECK_EQ(off, 3000);
  CHECK_EQ(len, 1000);
  p2pk_ce_owned(P2PK_COLL_REDUCE, 1000, 4, 2, 2, 2, &off, &len);
  CHECK_EQ(off, 0);
  CHECK_EQ(len, 1000);
  p2pk_ce_owned(P2PK_COLL_REDUCE, 1000, 4, 2, 2, 1, &off, &len);
  CHECK_EQ(len, 0);
  p2pk_ce_owned(P2PK_COLL_BROADCAST, 1000, 4, 2, 2, 2, &off, &len);
  CHECK_EQ(len, 0);
  p2pk_ce_owned(P2PK_COLL_BROADCAST, 1000, 4, 2, 2, 0, &off, &len);
  CHECK_EQ(off, 0);
  CHECK_EQ(len, 1000);
  p2pk_ce_owned(P2PK_COLL_REDUCE_SCATTER, 1000, 4, 2, 0, 4, &off, &len);
  CHECK_EQ(len, 0);
  /* Chunk k's length: whole chunks, then the rest, then nothing. */
  CHECK_EQ(p2pk_ce_part(10, 0, 4), 4);
  CHECK_EQ(p2pk_ce_part(10, 2, 4), 2);
  CHECK_EQ(p2pk_ce_part(10, 3, 4), 0);

  /* Which calls wait in a group for the copy engines: one process only,
   * per collective and transport, not when a kernel setting is forced. */
  struct p2pkit_comm c;
  thresholds_t th;
  memset(&c, 0, sizeof c);
  memset(&th, 0, sizeof th);
  c.nranks = 2;
  c.sel.force.algo = c.sel.force.proto = -1;
  p2pk_param_reset();
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_REDUCE), (size_t)64 << 20);
  CHECK_EQ(ce_min(&c, P2PK_COLL_REDUCE_SCATTER), (size_t)64 << 20);
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_GATHER), (size_t)64 << 20);
  CHECK_EQ(ce_min(&c, P2PK_COLL_BROADCAST), (size_t)32 << 20);
  CHECK_EQ(ce_min(&c, P2PK_COLL_REDUCE), (size_t)64 << 20);
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_TO_ALL), (size_t)32 << 20);
  /* Under capture all-to-all goes straight into the peers' outputs. */
  CHECK_EQ(cep_min_setting(&c, P2PK_COLL_ALL_TO_ALL), (size_t)32 << 20);
  ce_min_fill(&c, &th);
  CHECK_EQ(th.ce_min[P2PK_COLL_ALL_GATHER], (size_t)64 << 20);
  CHECK_EQ(th.ce_min[P2PK_COLL_ALL_TO_ALL], (size_t)32 << 20);
  setenv("P2PKIT_CE_ALLREDUCE_MIN", "1", 1);
  p2pk_param_reset();
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_REDUCE), 1);
  c.sel.force.proto = P2PK_PROTO_SIMPLE;
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_REDUCE), 0);
  CHECK_EQ(ce_min(&c, P2PK_COLL_BROADCAST), (size_t)32 << 20);
  c.sel.force.proto = -1;
  c.sel.force.blocks = 4;
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_GATHER), 0);
  c.sel.force.blocks = 0;
  c.staged = 1; /* no P2P: all-reduce through host memory only */
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_REDUCE), (size_t)16 << 20);
  CHECK_EQ(ce_min(&c, P2PK_COLL_REDUCE_SCATTER), 0);
  CHECK_EQ(ce_min(&c, P2PK_COLL_REDUCE), 0);
  CHECK_EQ(ce_min(&c, P2PK_COLL_BROADCAST), 0);
  c.staged = 0;
  c.multiproc = 1;
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_REDUCE), 0);
  /* All-to-all with a process per GPU: the landing slots from 256 MiB per
   * peer, eagerly and under capture. */
  CHECK_EQ(ce_min_setting(&c, P2PK_COLL_ALL_TO_ALL), (size_t)256 << 20);
  CHECK_EQ(cep_min_setting(&c, P2PK_COLL_ALL_TO_ALL), (size_t)256 << 20);
  c.multiproc = 0;
  c.nranks = 1;
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_REDUCE), 0);
  /* More than 2 ranks over P2P: only when the setting is given (the
   * defaults were measured on 2 GPUs), but for one process eagerly the
   * all-gather and all-to-all from 64 MiB a share (measured on 4); the
   * broadcast only when P2PKIT_BCAST_CE_MIN says so (the root's copy
   * engines would push the message once per peer; the rooted two-shot
   * kernel carries it once). */
  c.nranks = 4;
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_REDUCE), 1); /* P2PKIT_CE_ALLREDUCE_MIN=1 is set */
  CHECK_EQ(ce_min(&c, P2PK_COLL_REDUCE_SCATTER), 0);
  CHECK_EQ(ce_min(&c, P2PK_COLL_REDUCE), 0);
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_GATHER), (size_t)64 << 20);
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_TO_ALL), (size_t)64 << 20);
  CHECK_EQ(ce_min(&c, P2PK_COLL_BROADCAST), 0);
  setenv("P2PKIT_BCAST_CE_MIN", "48M", 1);
  p2pk_param_reset();
  CHECK_EQ(ce_min(&c, P2PK_COLL_BROADCAST), (size_t)48 << 20);
  unsetenv("P2PKIT_BCAST_CE_MIN");
  p2pk_param_reset();
  /* Under capture (the landing slots) and with a process per GPU: off. */
  CHECK_EQ(cep_min_setting(&c, P2PK_COLL_ALL_GATHER), 0);
  c.multiproc = 1;
  CHECK_EQ(ce_min_setting(&c, P2PK_COLL_ALL_GATHER), 0);
  CHECK_EQ(ce_min_setting(&c, P2PK_COLL_ALL_TO_ALL), 0);
  c.multiproc = 0;
  c.staged = 1;
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_REDUCE), (size_t)16 << 20);
  c.staged = 0;
  unsetenv("P2PKIT_CE_ALLREDUCE_MIN");
  setenv("P2PKIT_CE_DEPTH", "2", 1);
  p2pk_param_reset();
  CHECK_EQ(p2pk_ce_depth(), 2);
  setenv("P2PKIT_CE_DEPTH", "8", 1);
  p2pk_param_reset();
  CHECK_EQ(p2pk_ce_depth(), P2PK_SCE_DEPTH_MAX);
  for (int bad = 0; bad < 3; bad++) { /* refused, never clamped */
    setenv("P2PKIT_CE_DEPTH", bad == 0 ? "0" : bad == 1 ? "50" : "-1", 1);
    p2pk_param_reset();
    CHECK_EQ(p2pk_param_check(), P2PKIT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(p2pkit_last_error(), "must be a whole number from 2 to 8") != NULL);
  }
  unsetenv("P2PKIT_CE_DEPTH");
  p2pk_param_reset();
  CHECK_EQ(p2pk_ce_depth(), 3);
  /* Chunks: half the shard within 16..64 MiB, or the setting; the landing
   * slots ((n - 1) x depth chunks) within p2pk_ce_land_max(). */
  CHECK_EQ(p2pk_ce_chunk_bytes((size_t)512 << 20, 2, 3), (size_t)64 << 20);
  CHECK_EQ(p2pk_ce_chunk_bytes((size_t)64 << 20, 2, 3), (size_t)32 << 20);
  CHECK_EQ(p2pk_ce_chunk_bytes((size_t)8 << 20, 2, 3), (size_t)16 << 20);
  CHECK_EQ(p2pk_ce_chunk_bytes((size_t)512 << 20, 8, 3), p2pk_ce_land_max() / 21);
  for (int n = 2; n <= 8; n++)
    for (int d = 2; d <= P2PK_SCE_DEPTH_MAX; d++)
      CHECK(p2pk_ce_chunk_bytes((size_t)1 << 30, n, d) * (size_t)(n - 1) * (size_t)d <= p2pk_ce_land_max());
  setenv("P2PKIT_CE_CHUNK", "1M", 1);
  p2pk_param_reset();
  CHECK_EQ(p2pk_ce_chunk_bytes((size_t)512 << 20, 2, 3), (size_t)1 << 20);
  setenv("P2PKIT_CE_CHUNK", "1G", 1);
  p2pk_param_reset();
  CHECK_EQ(p2pk_ce_chunk_bytes((size_t)512 << 20, 2, 2), p2pk_ce_land_max() / 2);
  unsetenv("P2PKIT_CE_CHUNK");
  p2pk_param_reset();
}

TEST(process_per_gpu_copy_engine_slots_and_thresholds) {
  /* Process per GPU over P2P (path_ce_slots.c): the landing slots end the
   * scratch, 4 KiB aligned, after everything else, and the (n - 1) x depth
   * slots stay within p2pk_ce_land_max(). */
  p2pk_param_reset();
  CHECK_EQ(p2pk_cep_depth(), 2);
  CHECK_EQ(p2pk_cep_slot_bytes(2, 2, 1), (size_t)96 << 20);
  CHECK_EQ(p2pk_cep_slot_bytes(2, 3, 1), (size_t)64 << 20);
  CHECK_EQ(p2pk_cep_slot_bytes(2, 3, 0), 0);
  CHECK_EQ(p2pk_cep_slot_bytes(1, 3, 1), 0);
  CHECK_EQ(p2pk_cep_slot_bytes(8, 3, 1), (p2pk_ce_land_max() / 21 + 4095) & ~(size_t)4095);
  for (int n = 2; n <= 16; n++)
    for (int d = 2; d <= P2PK_SCE_DEPTH_MAX; d++) {
      size_t b = p2pk_cep_slot_bytes(n, d, 1);
      CHECK_EQ(b % 4096, 0);
      CHECK(b >= 4096);
      /* every call's chunk fits a slot */
      CHECK(p2pk_ce_chunk_bytes((size_t)1 << 30, n, d) <= b);
      CHECK(p2pk_ce_chunk_bytes(1000, n, d) <= b);
    }
  setenv("P2PKIT_CE_CHUNK", "100000", 1);
  p2pk_param_reset();
  CHECK_EQ(p2pk_cep_slot_bytes(2, 2, 1), 102400);
  CHECK(p2pk_ce_chunk_bytes((size_t)1 << 30, 2, 2) <= 102400);
  setenv("P2PKIT_CE_CHUNK", "1G", 1); /* never past the cap */
  setenv("P2PKIT_CE_DEPTH", "4", 1);
  p2pk_param_reset();
  CHECK_EQ(p2pk_cep_depth(), 4);
  CHECK_EQ(p2pk_cep_slot_bytes(2, 4, 1), (size_t)48 << 20);
  unsetenv("P2PKIT_CE_DEPTH");
  unsetenv("P2PKIT_CE_CHUNK");
  /* P2PKIT_CE_LAND sets the slots' total, 16 MiB .. 4 GiB; outside, it is
   * refused, never clamped. */
  setenv("P2PKIT_CE_LAND", "384M", 1);
  p2pk_param_reset();
  CHECK_EQ(p2pk_ce_land_max(), (size_t)384 << 20);
  CHECK_EQ(p2pk_cep_slot_bytes(2, 2, 1), (size_t)192 << 20);
  CHECK_EQ(p2pk_ce_chunk_bytes((size_t)1 << 30, 2, 2), (size_t)64 << 20); /* the shard rule's top */
  setenv("P2PKIT_CE_LAND", "16M", 1);
  p2pk_param_reset();
  CHECK_EQ(p2pk_ce_land_max(), (size_t)16 << 20);
  CHECK_EQ(p2pk_cep_slot_bytes(2, 2, 1), (size_t)8 << 20);
  setenv("P2PKIT_CE_LAND", "4G", 1);
  p2pk_param_reset();
  CHECK_EQ(p2pk_ce_land_max(), (size_t)4 << 30);
  for (int bad = 0; bad < 3; bad++) {
    setenv("P2PKIT_CE_LAND", bad == 0 ? "1K" : bad == 1 ? "64G" : "0", 1);
    p2pk_param_reset();
    CHECK_EQ(p2pk_param_check(), P2PKIT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(p2pkit_last_error(), "it must be a size from 16M to 4G") != NULL);
  }
  unsetenv("P2PKIT_CE_LAND");
  p2pk_param_reset();
  CHECK_EQ(p2pk_ce_land_max(), P2PK_CE_LAND_DEFAULT);
  p2pk_layout lay;
  size_t ll_cap = 0;
  CHECK_OK(p2pk_layout_compute(2, 0, 0, 64, &lay, &ll_cap));
  const uint64_t before = lay.total;
  p2pk_layout_add_cep(&lay, 2, 3, (size_t)64 << 20);
  CHECK(lay.cep_off >= before);
  CHECK_EQ(lay.cep_off % 4096, 0);
  CHECK_EQ(lay.cep_depth, 3);
  CHECK_EQ(lay.total, lay.cep_off + 3 * ((uint64_t)64 << 20));
  p2pk_layout_add_cep(&lay, 1, 3, 4096); /* one rank: nothing */
  CHECK_EQ(lay.total, lay.cep_off + 3 * ((uint64_t)64 << 20));

  /* Thresholds with a process per GPU: the process-per-GPU defaults, a
   * setting when given, nothing without landing slots, with a kernel
   * setting forced, with more than 2 ranks unless given, or staged. */
  struct p2pkit_comm c;
  thresholds_t th;
  memset(&c, 0, sizeof c);
  memset(&th, 0, sizeof th);
  c.nranks = 2;
  c.multiproc = 1;
  c.sel.force.algo = c.sel.force.proto = -1;
  CHECK(cep_wanted(&c));
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_REDUCE), 0); /* no slots yet */
  c.lay.cep_slot = (size_t)64 << 20;
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_REDUCE), (size_t)256 << 20);
  CHECK_EQ(ce_min(&c, P2PK_COLL_REDUCE_SCATTER), (size_t)64 << 20);
  CHECK_EQ(ce_min(&c, P2PK_COLL_REDUCE), (size_t)64 << 20);
  CHECK_EQ(ce_min(&c, P2PK_COLL_BROADCAST), (size_t)16 << 20);
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_GATHER), (size_t)256 << 20);
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_TO_ALL), (size_t)256 << 20);
  CHECK_EQ(cep_p2p_min(&c), (size_t)256 << 20);
  ce_min_fill(&c, &th);
  CHECK_EQ(th.cep_p2p_min, (size_t)256 << 20);
  CHECK_EQ(th.cep_direct_p2p_min, 0); /* a peer's buffers are not mapped */
  CHECK_EQ(th.cep_min[P2PK_COLL_BROADCAST], (size_t)128 << 20); /* under capture */
  CHECK_EQ(th.cep_min[P2PK_COLL_ALL_REDUCE], (size_t)256 << 20);
  CHECK_EQ(th.ce_min[P2PK_COLL_BROADCAST], (size_t)16 << 20);
  /* grad sync's default grid cap: half the SMs, rounded down to 8. */
  c.sel.geom.sm_count = 132;
  CHECK_EQ(p2pk_comm_half_grid(&c), 64);
  c.sel.geom.sm_count = 20;
  CHECK_EQ(p2pk_comm_half_grid(&c), 8);
  c.sel.geom.sm_count = 0;
  CHECK_EQ(p2pk_comm_half_grid(&c), 8);
  /* The one-process defaults stay where they were; under capture one
   * process takes the copy engines from its own defaults. */
  c.multiproc = 0;
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_REDUCE), (size_t)64 << 20);
  CHECK_EQ(ce_min(&c, P2PK_COLL_BROADCAST), (size_t)32 << 20);
  CHECK(cep_wanted(&c));
  /* One process: send/recv only straight in under capture (64 MiB). */
  CHECK_EQ(cep_p2p_min(&c), (size_t)64 << 20);
  ce_min_fill(&c, &th);
  CHECK_EQ(th.cep_min[P2PK_COLL_ALL_REDUCE], (size_t)512 << 20);
  CHECK_EQ(th.cep_min[P2PK_COLL_REDUCE_SCATTER], (size_t)128 << 20);
  CHECK_EQ(th.cep_min[P2PK_COLL_REDUCE], (size_t)128 << 20);
  CHECK_EQ(th.cep_min[P2PK_COLL_BROADCAST], (size_t)128 << 20); /* straight into the outputs */
  CHECK_EQ(th.cep_min[P2PK_COLL_ALL_GATHER], (size_t)64 << 20); /* straight into the outputs */
  CHECK_EQ(th.ce_min[P2PK_COLL_ALL_REDUCE], (size_t)64 << 20);
  CHECK_EQ(th.cep_direct_p2p_min, (size_t)64 << 20); /* send/recv straight in, both ends in a group */
  setenv("P2PKIT_BCAST_CE_MIN", "2M", 1); /* a setting given wins under capture too */
  setenv("P2PKIT_CE_REDUCE_MIN", "0", 1);
  p2pk_param_reset();
  ce_min_fill(&c, &th);
  CHECK_EQ(th.cep_min[P2PK_COLL_BROADCAST], (size_t)2 << 20);
  CHECK_EQ(th.cep_min[P2PK_COLL_REDUCE], 0);
  CHECK_EQ(th.ce_min[P2PK_COLL_REDUCE], 0);
  c.sel.force.proto = 1; /* a kernel setting: no copy engines under capture, broadcast too */
  ce_min_fill(&c, &th);
  CHECK_EQ(th.cep_min[P2PK_COLL_BROADCAST], 0);
  CHECK_EQ(th.cep_min[P2PK_COLL_ALL_REDUCE], 0);
  CHECK_EQ(th.cep_direct_p2p_min, 0);
  c.sel.force.proto = -1;
  unsetenv("P2PKIT_BCAST_CE_MIN");
  unsetenv("P2PKIT_CE_REDUCE_MIN");
  p2pk_param_reset();
  c.lay.cep_slot = 0; /* no slots: never */
  ce_min_fill(&c, &th);
  CHECK_EQ(th.cep_min[P2PK_COLL_ALL_REDUCE], 0);
  CHECK_EQ(th.cep_p2p_min, 0);
  c.lay.cep_slot = (size_t)64 << 20;
  c.multiproc = 1;
  setenv("P2PKIT_BCAST_CE_MIN", "1M", 1);
  setenv("P2PKIT_SENDRECV_CE_MIN", "0", 1);
  p2pk_param_reset();
  CHECK_EQ(ce_min(&c, P2PK_COLL_BROADCAST), (size_t)1 << 20);
  CHECK_EQ(cep_p2p_min(&c), 0);
  c.sel.force.blocks = 8; /* a kernel setting: the kernels, broadcast too */
  CHECK_EQ(ce_min(&c, P2PK_COLL_BROADCAST), 0);
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_REDUCE), 0);
  CHECK_EQ(cep_p2p_min(&c), 0);
  c.sel.force.blocks = 0;
  c.nranks = 4; /* only the settings given */
  CHECK_EQ(ce_min(&c, P2PK_COLL_BROADCAST), (size_t)1 << 20);
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_REDUCE), 0);
  c.nranks = 2;
  c.staged = 1; /* no P2P: the all-reduce through host memory, once its slots exist */
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_REDUCE), 0);
  c.lay.stage_ce_slot = 4096;
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_REDUCE), (size_t)16 << 20);
  CHECK_EQ(ce_min(&c, P2PK_COLL_BROADCAST), 0);
  CHECK_EQ(ce_min(&c, P2PK_COLL_REDUCE_SCATTER), 0);
  c.sel.force.blocks = 8; /* the staged path never minded kernel settings */
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_REDUCE), (size_t)16 << 20);
  c.sel.force.blocks = 0;
  c.lay.stage_ce_slot = 0;
  CHECK(!cep_wanted(&c));
  c.staged = 0;
  setenv("P2PKIT_CE_ALLREDUCE_MIN", "0", 1);
  setenv("P2PKIT_CE_REDUCE_SCATTER_MIN", "0", 1);
  setenv("P2PKIT_CE_REDUCE_MIN", "0", 1);
  setenv("P2PKIT_BCAST_CE_MIN", "0", 1);
  setenv("P2PKIT_CE_ALL_TO_ALL_MIN", "0", 1);
  setenv("P2PKIT_CE_ALL_GATHER_MIN", "0", 1);
  p2pk_param_reset();
  CHECK(!cep_wanted(&c)); /* everything off: no landing slots */
  unsetenv("P2PKIT_CE_ALL_GATHER_MIN");
  unsetenv("P2PKIT_CE_ALL_TO_ALL_MIN");
  unsetenv("P2PKIT_CE_ALLREDUCE_MIN");
  unsetenv("P2PKIT_CE_REDUCE_SCATTER_MIN");
  unsetenv("P2PKIT_CE_REDUCE_MIN");
  unsetenv("P2PKIT_BCAST_CE_MIN");
  unsetenv("P2PKIT_SENDRECV_CE_MIN");
  p2pk_param_reset();
}

TEST(copy_engine_paths_need_hardware_queues) {
  /* CUDA_DEVICE_MAX_CONNECTIONS as CUDA reads it: 1..32, else its 8. */
  static const struct { const char *v; int q; } qs[] = {
      {NULL, 8}, {"1", 1}, {"2", 2}, {"32", 32}, {"64", 32}, {"0", 8}, {"-3", 8}, {"", 8}, {"8x", 8}};
  for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
    if (qs[i].v) setenv("CUDA_DEVICE_MAX_CONNECTIONS", qs[i].v, 1);
    else unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
    CHECK_EQ(p2pk_ce_queues(), qs[i].q);
  }
  /* With a process per GPU every path that waits on the peers' flags on
   * several streams needs 8 queues: with fewer the kernels take every
   * size, eagerly and under capture; one process keeps its eager event
   * path (no such waits) but not the landing slots under capture. */
  struct p2pkit_comm c;
  thresholds_t th;
  memset(&c, 0, sizeof c);
  memset(&th, 0, sizeof th);
  c.nranks = 2;
  c.multiproc = 1;
  c.sel.force.algo = c.sel.force.proto = -1;
  c.lay.cep_slot = (size_t)64 << 20;
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", 1);
  p2pk_param_reset();
  CHECK(!cep_wanted(&c));
  ce_min_fill(&c, &th);
  for (int k = 0; k < P2PK_COLL_KINDS; k++) {
    CHECK_EQ(th.ce_min[k], 0);
    CHECK_EQ(th.cep_min[k], 0);
  }
  CHECK_EQ(th.cep_p2p_min, 0);
  CHECK_EQ(th.cep_cap_ok, 0);
  c.staged = 1; /* without P2P: path_ce_staged.c's process-per-GPU half waits the same way */
  c.lay.stage_ce_slot = (size_t)8 << 20;
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_REDUCE), 0);
  c.multiproc = 0; /* one process without P2P: events only */
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_REDUCE), (size_t)16 << 20);
  c.staged = 0;
  CHECK_EQ(ce_min(&c, P2PK_COLL_ALL_REDUCE), (size_t)64 << 20);
  CHECK_EQ(cep_min_setting(&c, P2PK_COLL_ALL_REDUCE), 0);
  CHECK_EQ(cep_p2p_min(&c), 0);
  /* 8 queues: every path on 2 ranks; with more, none under capture
   * (a graph may queue the waits behind one another), whatever the queues. */
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "8", 1);
  setenv("P2PKIT_CE_ALLREDUCE_MIN", "1", 1);
  p2pk_param_reset();
  ce_min_fill(&c, &th);
  CHECK_EQ(th.cep_cap_ok, 1);
  CHECK_EQ(th.cep_min[P2PK_COLL_ALL_REDUCE], 1);
  c.nranks = 4;
  static const char *const many[] = {"8", "32"};
  for (size_t i = 0; i < sizeof many / sizeof many[0]; i++) {
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", many[i], 1);
    c.multiproc = 0;
    ce_min_fill(&c, &th);
    CHECK_EQ(th.cep_cap_ok, 0);
    CHECK_EQ(th.ce_min[P2PK_COLL_ALL_REDUCE], 1);  /* eagerly, by events */
    CHECK_EQ(th.cep_min[P2PK_COLL_ALL_REDUCE], 0); /* under capture: the kernels */
    CHECK_EQ(th.cep_direct_p2p_min, 0);
    c.multiproc = 1;
    ce_min_fill(&c, &th);
    CHECK_EQ(th.ce_min[P2PK_COLL_ALL_REDUCE], 1); /* eagerly; under capture the selector asks p2pk_sel_waits_ok */
    CHECK_EQ(th.cep_cap_ok, 0);
  }
  unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
  unsetenv("P2PKIT_CE_ALLREDUCE_MIN");
  p2pk_param_reset();
}

TEST(names) {
  CHECK_STR(p2pk_algo_name(P2PK_ALGO_TWOSHOT), "twoshot");
  CHECK_STR(p2pk_algo_name(99), "?");
  CHECK_EQ(p2pk_algo_from_name("OneShot"), P2PK_ALGO_ONESHOT);
  CHECK_EQ(p2pk_algo_from_name("ring"), -1);
  CHECK_EQ(p2pk_proto_from_name("LL"), P2PK_PROTO_LL);
  CHECK_EQ(p2pk_proto_from_name("ll128"), P2PK_PROTO_LL128);
  CHECK_STR(p2pk_proto_name(P2PK_PROTO_LL128), "ll128");
  CHECK_EQ(p2pkit_dtype_size(P2PKIT_BFLOAT16), 2);
  CHECK_EQ(p2pkit_dtype_size(P2PKIT_INT64), 8);
  CHECK_EQ(p2pkit_dtype_size((p2pkit_dtype_t)42), 0);
  CHECK_STR(p2pkit_dtype_name(P2PKIT_UINT8), "uint8");
  CHECK_STR(p2pkit_redop_name(P2PKIT_AVG), "avg");
  CHECK_STR(p2pkit_redop_name((p2pkit_redop_t)-1), "invalid");
}

T_MAIN(T_CASE(default_table_two_ranks), T_CASE(default_table_more_ranks_and_shm),
       T_CASE(parse_good_table), T_CASE(parse_errors_name_the_line),
       T_CASE(write_then_parse_round_trip), T_CASE(choose_fills_automatic_fields),
       T_CASE(choose_respects_limits_and_overrides), T_CASE(choose_is_deterministic), T_CASE(choice_valid_for_every_rank_count),
       T_CASE(force_from_environment), T_CASE(registry_ranges_are_the_kernels), T_CASE(layout_fits_and_does_not_overlap),
       T_CASE(mailbox_count_follows_the_gpu), T_CASE(default_buffer_is_128m_p2p_and_64m_staged), T_CASE(large_calls_get_two_blocks_per_sm), T_CASE(rooted_twoshot_choice), T_CASE(mid_ll128_threads_by_collective),
       T_CASE(grid_cap_bounds_every_choice),
       T_CASE(staged_copy_engine_chunks), T_CASE(copy_engine_shards_and_thresholds),
       T_CASE(process_per_gpu_copy_engine_slots_and_thresholds),
       T_CASE(copy_engine_paths_need_hardware_queues), T_CASE(names))
