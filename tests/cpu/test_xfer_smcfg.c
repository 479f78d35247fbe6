/* SPDX-License-Identifier: BSD-3-Clause */
/* SM copy kernel configurations: parse, format, round trip, errors. */
#include <string.h>

#include "test.h"
#include "xfer/pattern.h"
#include "xfer/xfer.h"

static int same(const p2pk_sm_config *a, const p2pk_sm_config *b) {
  return a->kind == b->kind && a->hint == b->hint && a->blocks_per_sm == b->blocks_per_sm &&
         a->threads == b->threads && a->unroll == b->unroll && a->tile_kib == b->tile_kib &&
         a->stages == b->stages;
}

TEST(defaults) {
  p2pk_sm_config d, c;
  char err[160];
  p2pk_sm_config_default(&d);
  CHECK_EQ(p2pk_sm_config_parse("", &c, err, sizeof err), 0);
  CHECK(same(&c, &d));
  CHECK_EQ(p2pk_sm_config_parse(NULL, &c, err, sizeof err), 0);
  CHECK(same(&c, &d));
}

TEST(keys) {
  p2pk_sm_config c;
  char err[160];
  CHECK_EQ(p2pk_sm_config_parse("kind=chunk,hint=nc,bps=3,threads=256,unroll=8", &c, err, sizeof err), 0);
  CHECK_EQ(c.kind, P2PK_SMK_CHUNK);
  CHECK_EQ(c.hint, P2PK_HINT_NC);
  CHECK_EQ(c.blocks_per_sm, 3);
  CHECK_EQ(c.threads, 256);
  CHECK_EQ(c.unroll, 8);
  CHECK_EQ(p2pk_sm_config_parse("KIND=TMA,tile=32K,stages=6", &c, err, sizeof err), 0);
  CHECK_EQ(c.kind, P2PK_SMK_TMA);
  CHECK_EQ(c.tile_kib, 32);
  CHECK_EQ(c.stages, 6);
  CHECK_EQ(p2pk_sm_config_parse("kind=stride,hint=plain", &c, err, sizeof err), 0);
  CHECK_EQ(c.kind, P2PK_SMK_STRIDE);
  CHECK_EQ(c.hint, P2PK_HINT_PLAIN);
}

TEST(round_trip) {
  static const char *const texts[] = {
      "kind=chunk,hint=cs,bps=2,threads=512,unroll=4,tile=16K,stages=4",
      "kind=stride,hint=plain,bps=1,threads=1024,unroll=1,tile=8K,stages=2",
      "kind=tma,hint=nc,bps=4,threads=32,unroll=2,tile=64K,stages=3",
  };
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
    p2pk_sm_config a, b;
    char err[160], out[160];
    CHECK_EQ(p2pk_sm_config_parse(texts[i], &a, err, sizeof err), 0);
    p2pk_sm_config_format(&a, out, sizeof out);
    CHECK_STR(out, texts[i]);
    CHECK_EQ(p2pk_sm_config_parse(out, &b, err, sizeof err), 0);
    CHECK(same(&a, &b));
  }
}

TEST(errors) {
  static const struct {
    const char *text, *msg;
  } bad[] = {
      {"kind=warp", "kind 'warp' is not stride, chunk or tma"},
      {"hint=fast", "hint 'fast' is not plain, cs or nc"},
      {"threads=33", "threads=33: must be a multiple of 32 from 32 to 1024"},
      {"threads=2048", "threads=2048: must be a multiple of 32 from 32 to 1024"},
      {"unroll=3", "unroll=3: must be 1, 2, 4 or 8"},
      {"bps=0", "bps=0: blocks per SM must be 1 to 32"},
      {"tile=100K", "tile=100K: must be 1K to 64K"},
      {"stages=9", "stages=9: must be 1 to 8"},
      {"tile=64K,stages=4", "tile x stages = 256 KiB of shared memory per block; at most 200"},
      {"threads=abc", "'threads=abc' is not a number"},
      {"threads=", "'threads=' is not a number"},
      {"speed=11", "unknown key 'speed' (expected kind, hint, bps, threads, unroll, tile, stages)"},
      {"chunk", "'chunk' is not key=value"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    p2pk_sm_config c, before;
    p2pk_sm_config_default(&c);
    c.blocks_per_sm = 7;
    before = c;
    char err[160] = "";
    CHECK_EQ(p2pk_sm_config_parse(bad[i].text, &c, err, sizeof err), -1);
    CHECK_STR(err, bad[i].msg);
    CHECK(same(&c, &before)); /* output untouched on error */
  }
}

/* The verification pattern: deterministic, depends on seed, iteration and
 * offset, and is not all zeros. */
TEST(pattern) {
  int zeros = 0, diff_seed = 0, diff_iter = 0;
  for (uint64_t o = 0; o < 4096; o++) {
    unsigned char v = p2pk_pattern_byte(1, 7, o);
    CHECK_EQ(v, p2pk_pattern_byte(1, 7, o));
    zeros += v == 0;
    diff_seed += v != p2pk_pattern_byte(2, 7, o);
    diff_iter += v != p2pk_pattern_byte(1, 8, o);
  }
  CHECK(zeros < 64);
  CHECK(diff_seed > 4000);
  CHECK(diff_iter > 4000);
  /* A shifted copy does not match. */
  int same_shift = 0;
  for (uint64_t o = 0; o < 4096; o++) same_shift += p2pk_pattern_byte(1, 7, o) == p2pk_pattern_byte(1, 7, o + 1);
  CHECK(same_shift < 64);
}

T_MAIN(T_CASE(defaults), T_CASE(keys), T_CASE(round_trip), T_CASE(errors), T_CASE(pattern))
