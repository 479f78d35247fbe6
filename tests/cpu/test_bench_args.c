/* SPDX-License-Identifier: BSD-3-Clause */
/* `p2pkit bench` arguments: defaults, size sweeps, methods, pairs, bad input
 * (one-line errors), and the checks against a machine's GPU count. */
#include <stdint.h>
#include <string.h>

#include "bench/bench.h"
#include "test.h"

#define MAXARGS 32

/* Parse a space-separated command line (after "bench"). */
static int parse(const char *line, p2pk_bench_opts *o, char *err, size_t len) {
  char buf[1024];
  char *argv[MAXARGS];
  int argc = 0;
  snprintf(buf, sizeof buf, "%s", line);
  argv[argc++] = "bench";
  for (char *tok = strtok(buf, " "); tok && argc < MAXARGS; tok = strtok(NULL, " ")) argv[argc++] = tok;
  p2pk_bench_opts_init(o);
  err[0] = '\0';
  return p2pk_bench_parse(argc, argv, o, err, len);
}

/* want_rc -1: a bad value; -2: an unknown option (the command adds its usage). */
static void expect_error_rc(const char *line, int want_rc, const char *msg) {
  p2pk_bench_opts o;
  char err[512];
  int rc = parse(line, &o, err, sizeof err);
  if (rc != want_rc)
    T_FAIL("'%s' gave rc %d, expected %d and the error \"%s\"", line, rc, want_rc, msg);
  else if (strcmp(err, msg) != 0) T_FAIL("'%s': \"%s\", expected \"%s\"", line, err, msg);
  CHECK(strchr(err, '\n') == NULL);
  p2pk_bench_opts_free(&o);
}

static void expect_error(const char *line, const char *msg) { expect_error_rc(line, -1, msg); }

TEST(defaults) {
  p2pk_bench_opts o;
  char err[512];
  CHECK_EQ(parse("", &o, err, sizeof err), 0);
  CHECK_EQ(o.nsizes, 1);
  CHECK_EQ(o.sizes[0], 256u << 20);
  CHECK_EQ(o.methods, (1u << P2PK_BM_COUNT) - 1);
  CHECK_EQ(o.modes, 1u << P2PK_MODE_ONEWAY);
  CHECK_EQ(o.iters, 20);
  CHECK_EQ(o.warmup, 5);
  CHECK_EQ(o.gate, 1);
  CHECK_EQ(o.anchor, 1);
  CHECK_EQ(o.json, 0);
  CHECK_EQ(o.csv, 0);
  p2pk_bench_opts_free(&o);
  CHECK_EQ(parse("--help", &o, err, sizeof err), 1);
  CHECK_EQ(parse("-b 1M -h", &o, err, sizeof err), 1);
}

TEST(sizes) {
  p2pk_bench_opts o;
  char err[512];
  CHECK_EQ(parse("-b 8 -e 1G -f 8", &o, err, sizeof err), 0);
  CHECK_EQ(o.nsizes, 10);
  for (int i = 0; i < o.nsizes; i++) CHECK_EQ(o.sizes[i], (size_t)8 << (3 * i));
  CHECK_EQ(parse("-b 1K -e 4K -i 1K", &o, err, sizeof err), 0);
  CHECK_EQ(o.nsizes, 4);
  CHECK_EQ(o.sizes[3], 4096);
  CHECK_EQ(parse("--minbytes=1M --maxbytes=4M", &o, err, sizeof err), 0); /* -f 2 implied */
  CHECK_EQ(o.nsizes, 3);
  CHECK_EQ(o.sizes[2], 4u << 20);
  CHECK_EQ(parse("-b 3", &o, err, sizeof err), 0);
  CHECK_EQ(o.nsizes, 1);
  CHECK_EQ(o.sizes[0], 3);
  /* The value in the same word, as perf takes it (one parser for both). */
  CHECK_EQ(parse("-b8 -e32 -i8", &o, err, sizeof err), 0);
  CHECK_EQ(o.nsizes, 4);
  CHECK_EQ(o.sizes[3], 32);
  CHECK_EQ(parse("--minbytes 1M --maxbytes=4M -f4", &o, err, sizeof err), 0);
  CHECK_EQ(o.nsizes, 2);
  CHECK_EQ(parse("-b 1G -e 1G", &o, err, sizeof err), 0);
  CHECK_EQ(o.nsizes, 1);
  CHECK_EQ(parse("-b 1T", &o, err, sizeof err), 0); /* T, as the size errors say */
  CHECK(o.sizes[0] == (size_t)1 << 40);
  /* A step past SIZE_MAX ends the list: 3 x (2^63 + 1) wraps to 2^63 + 3,
   * above where it started. */
  CHECK_EQ(parse("-b 9223372036854775809 -e 18446744073709551615 -f 3", &o, err, sizeof err), 0);
  CHECK_EQ(o.nsizes, 1);
  CHECK_EQ(parse("-b 1 -e 18446744073709551615 -i 9223372036854775807", &o, err, sizeof err), 0);
  CHECK_EQ(o.nsizes, 3);
  CHECK(o.sizes[2] == SIZE_MAX);
}

TEST(bad_sizes) {
  expect_error("-b 0", "-b 0: a size must be at least 1 byte");
  expect_error("-b -5", "-b -5: a size cannot be negative");
  expect_error("-e -1M", "-e -1M: a size cannot be negative");
  expect_error("-b abc",
               "-b 'abc' is not a size (a number of bytes, optionally with K, M, G or T)");
  expect_error("-b 12Q",
               "-b '12Q' is not a size (a number of bytes, optionally with K, M, G or T)");
  expect_error("-b 99999999999999999999", "-b '99999999999999999999' is not a size (a number of "
                                          "bytes, optionally with K, M, G or T)");
  expect_error("-b 1M -e 512K", "-e 524288 is smaller than -b 1048576");
  expect_error("-b 1 -e 1G -f 1", "-f 1 is out of range (2 to 1048576)");
  expect_error("-b 1 -e 1G -f 2 -i 4", "-f and -i cannot both be given");
  expect_error("-b 1 -e 1G -i 1", "more than 64 sizes from -b 1 to -e 1073741824; use a larger step");
  expect_error("-b", "-b needs a value");
  expect_error("-n 0", "-n 0 is out of range (1 to 100000)");
  expect_error("-n ten", "-n 'ten' is not a whole number");
  expect_error("-w -1", "-w -1 is out of range (0 to 10000)");
  expect_error("--lat-bytes 2M", "--lat-bytes 2M: at most 1M");
}

TEST(methods_and_modes) {
  p2pk_bench_opts o;
  char err[512];
  CHECK_EQ(parse("--methods ce,push", &o, err, sizeof err), 0);
  CHECK_EQ(o.methods, (1u << P2PK_BM_CE) | (1u << P2PK_BM_SM_PUSH) | (1u << P2PK_BM_MEMCPY_PEER));
  CHECK_EQ(parse("--methods staged,serial,driver --no-anchor", &o, err, sizeof err), 0);
  CHECK_EQ(o.methods, (1u << P2PK_BM_STAGED) | (1u << P2PK_BM_STAGED_SERIAL) | (1u << P2PK_BM_DRIVER));
  CHECK_EQ(parse("--methods=p2p-sm-pull,staged-pipelined,fallback", &o, err, sizeof err), 0);
  CHECK_EQ(o.methods, (1u << P2PK_BM_SM_PULL) | (1u << P2PK_BM_STAGED) | (1u << P2PK_BM_DRIVER) |
                          (1u << P2PK_BM_MEMCPY_PEER));
  CHECK_EQ(parse("--mode both,all", &o, err, sizeof err), 0);
  CHECK_EQ(o.modes, (1u << P2PK_MODE_BOTH) | (1u << P2PK_MODE_ALL));
  CHECK_EQ(parse("--latency", &o, err, sizeof err), 0);
  CHECK_EQ(o.methods, 0); /* only what was asked for */
  CHECK_EQ(o.latency, 1);
  /* An option only bandwidth runs use asks for them (every method) besides
   * the latency or the sweep; -b is the sweeps' size, so not with a sweep. */
  static const struct {
    const char *line;
    int bandwidth;
  } implied[] = {
      {"--gpus 0,1 --mode oneway,both,all -b 4K -e 1M -f 256 -n 3 -w 1 --latency --lat-iters 50", 1},
      {"--latency --mode both", 1},
      {"--latency -b 4K", 1},
      {"--latency -b 1K -e 4K -i 1K", 1},
      {"--latency --lat-bytes 64 -n 5", 0},
      {"--sm-sweep -b 256M", 0},
      {"--pairs 0:1 --sm-sweep --stage-sweep -b 4M -n 2 -w 1", 0},
      {"--stage-sweep -b 4M -e 16M", 1},
      {"--sm-sweep --latency -b 256M", 0},
      {"--latency --mode all --methods ce", -1},
  };
  for (size_t i = 0; i < sizeof implied / sizeof implied[0]; i++) {
    CHECK_EQ(parse(implied[i].line, &o, err, sizeof err), 0);
    unsigned want = implied[i].bandwidth > 0    ? (1u << P2PK_BM_COUNT) - 1
                    : implied[i].bandwidth == 0 ? 0u
                                                : (1u << P2PK_BM_CE) | (1u << P2PK_BM_MEMCPY_PEER);
    if (o.methods != want) T_FAIL("'%s': methods 0x%x, expected 0x%x", implied[i].line, o.methods, want);
    p2pk_bench_opts_free(&o);
  }
  CHECK_EQ(parse("--sm-sweep", &o, err, sizeof err), 0);
  CHECK_EQ(o.sm_sweep, P2PK_SM_SWEEP_FULL);
  CHECK_EQ(parse("--sm-sweep=full", &o, err, sizeof err), 0);
  CHECK_EQ(o.sm_sweep, P2PK_SM_SWEEP_FULL);
  CHECK_EQ(parse("--sm-sweep=short -b 256M", &o, err, sizeof err), 0);
  CHECK_EQ(o.sm_sweep, P2PK_SM_SWEEP_SHORT);
  CHECK_EQ(o.methods, 0);
  expect_error("--sm-sweep=some", "--sm-sweep=some: expected --sm-sweep, --sm-sweep=short or --sm-sweep=full");
  CHECK_EQ(parse("--sm-sweep --methods ce", &o, err, sizeof err), 0);
  CHECK_EQ(o.methods, (1u << P2PK_BM_CE) | (1u << P2PK_BM_MEMCPY_PEER));
  CHECK_EQ(parse("--sm-config kind=chunk,bps=3", &o, err, sizeof err), 0);
  CHECK_EQ(o.have_sm_config, 1);
  CHECK_EQ(o.sm.blocks_per_sm, 3);
  expect_error("--methods foo", "unknown method 'foo' (expected memcpy-peer, staged-serial, staged, "
               "driver, p2p-ce, p2p-sm-push, p2p-sm-pull or all)");
  expect_error("--methods ce,ce", "method 'ce' is listed twice");
  expect_error("--methods ", "--methods needs a value");
  expect_error("--mode sideways", "unknown mode 'sideways' (expected oneway, both or all)");
  expect_error("--sm-config unroll=5", "--sm-config 'unroll=5': unroll=5: must be 1, 2, 4 or 8");
}

TEST(gpus_and_pairs) {
  p2pk_bench_opts o;
  char err[512];
  CHECK_EQ(parse("--pairs 0:1,1:0,2:3", &o, err, sizeof err), 0);
  CHECK_EQ(o.npairs, 3);
  CHECK_EQ(o.pairs[2][0], 2);
  CHECK_EQ(o.pairs[2][1], 3);
  p2pk_bench_opts_free(&o);
  CHECK_EQ(parse("--gpus 3,1", &o, err, sizeof err), 0);
  CHECK_EQ(o.ngpus, 2);
  p2pk_bench_opts_free(&o);
  expect_error("--pairs 0:1,0:1", "pair 0:1 is given twice");
  expect_error("--pairs 2:2", "--pairs: 2:2 copies a GPU to itself");
  expect_error("--pairs 0-1", "--pairs: '0-1' is not SRC:DST (e.g. 0:1)");
  expect_error("--pairs 0:x", "--pairs: '0:x' is not SRC:DST (e.g. 0:1)");
  expect_error("--pairs 0:-1", "--pairs: '0:-1' is not SRC:DST (e.g. 0:1)");
  expect_error("--gpus 0,0", "GPU 0 is listed twice in '0,0'");
  expect_error("--gpus 0,a", "--gpus '0,a': 'a' is not a GPU index");
  expect_error("--gpus -1", "--gpus '-1': '-1' is not a GPU index");
  expect_error("--gpus 0,1 --pairs 0:1", "give --gpus or --pairs, not both");
}

TEST(outputs) {
  p2pk_bench_opts o;
  char err[512];
  CHECK_EQ(parse("--json", &o, err, sizeof err), 0);
  CHECK_EQ(o.json, 1);
  CHECK_EQ(parse("--json=/tmp/x.json --csv --plot a.svg", &o, err, sizeof err), 0);
  CHECK_EQ(o.json, 2);
  CHECK_STR(o.json_path, "/tmp/x.json");
  CHECK_EQ(o.csv, 1);
  CHECK_STR(o.plot_path, "a.svg");
  expect_error("--json --csv", "only one of --json and --csv can go to stdout");
  expect_error("--json=", "--json= needs a file name");
  expect_error_rc("--jsonx", -2, "unknown option '--jsonx'");
  expect_error_rc("--frobnicate", -2, "unknown option '--frobnicate'");
  expect_error_rc("extra", -2, "unexpected argument 'extra' (bench takes only options)");
  /* The plan is text: an output a dry run would leave unwritten is refused. */
  expect_error("--dry-run --json", "--dry-run prints the plan as text; --json needs a run");
  expect_error("--csv=x.csv --dry-run", "--dry-run prints the plan as text; --csv needs a run");
  expect_error("--dry-run --plot a.svg", "--dry-run prints the plan as text; --plot needs a run");
  expect_error("--from x.p2pkit", "--from plans against a recorded machine: add --dry-run (a run needs the GPUs here)");
}

static int validate(const char *line, int ngpus, p2pk_bench_opts *o, char *err, size_t len) {
  if (parse(line, o, err, len) != 0) {
    T_FAIL("'%s': %s", line, err);
    return -2;
  }
  return p2pk_bench_validate(o, ngpus, err, len);
}

TEST(against_machine) {
  p2pk_bench_opts o;
  char err[512];
  CHECK_EQ(validate("", 2, &o, err, sizeof err), 0);
  CHECK_EQ(o.npairs, 2);
  CHECK(o.pairs[0][0] == 0 && o.pairs[0][1] == 1 && o.pairs[1][0] == 1 && o.pairs[1][1] == 0);
  p2pk_bench_opts_free(&o);
  CHECK_EQ(validate("", 8, &o, err, sizeof err), 0);
  CHECK_EQ(o.npairs, 56);
  p2pk_bench_opts_free(&o);
  CHECK_EQ(validate("--gpus 1,3", 4, &o, err, sizeof err), 0);
  CHECK_EQ(o.npairs, 2);
  CHECK(o.pairs[0][0] == 1 && o.pairs[0][1] == 3);
  p2pk_bench_opts_free(&o);
  CHECK_EQ(validate("--gpus 0,2", 2, &o, err, sizeof err), -1);
  CHECK_STR(err, "GPU 2 does not exist (this machine has 2: 0..1)");
  p2pk_bench_opts_free(&o);
  CHECK_EQ(validate("--pairs 0:1,0:5", 2, &o, err, sizeof err), -1);
  CHECK_STR(err, "pair 0:5: GPU 5 does not exist (this machine has 2: 0..1)");
  p2pk_bench_opts_free(&o);
  CHECK_EQ(validate("", 1, &o, err, sizeof err), -1);
  CHECK_STR(err, "copies between GPUs need at least 2 GPUs (this machine has 1); `p2pkit doctor` "
                 "times a GPU's link to host memory");
  p2pk_bench_opts_free(&o);
  CHECK_EQ(validate("--gpus 1", 4, &o, err, sizeof err), -1);
  CHECK_STR(err, "copies between GPUs need at least 2 GPUs (--gpus names 1)");
  p2pk_bench_opts_free(&o);
  /* Buffers that add up past 2^64 bytes on a GPU: refused, not wrapped. */
  CHECK_EQ(validate("-b 4611686018427387904", 2, &o, err, sizeof err), 0);
  p2pk_bench_opts_free(&o);
  CHECK_EQ(validate("-b 9223372036854775808", 2, &o, err, sizeof err), -1);
  CHECK_STR(err, "size 9223372036854775808 is larger than any GPU (GPU0 would need 2^64 bytes or "
                 "more for its buffers)");
  p2pk_bench_opts_free(&o);
  CHECK_EQ(validate("-b 1M -e 9223372036854775808", 2, &o, err, sizeof err), -1);
  CHECK_STR(err, "size 9223372036854775808 is larger than any GPU (GPU0 would need 2^64 bytes or "
                 "more for its buffers)");
  p2pk_bench_opts_free(&o);
  CHECK_EQ(validate("--pairs 1:0,2:1 -b 9223372036854775808", 3, &o, err, sizeof err), -1);
  CHECK_STR(err, "size 9223372036854775808 is larger than any GPU (GPU1 would need 2^64 bytes or "
                 "more for its buffers)");
  p2pk_bench_opts_free(&o);
}

TEST(names) {
  for (int m = 0; m < P2PK_BM_COUNT; m++) {
    const char *n = p2pk_bench_method_name(m);
    CHECK_EQ(p2pk_bench_method_parse(n, strlen(n)), m);
  }
  CHECK_EQ(p2pk_bench_method_path(P2PK_BM_CE), P2PKIT_PATH_P2P_CE);
  CHECK_EQ(p2pk_bench_method_path(P2PK_BM_STAGED_SERIAL), P2PKIT_PATH_STAGED_SERIAL);
  CHECK_EQ(p2pk_bench_method_path(P2PK_BM_DRIVER), P2PKIT_PATH_DRIVER);
  CHECK_EQ(p2pk_bench_method_p2p(P2PK_BM_MEMCPY_PEER), 1);
  CHECK_EQ(p2pk_bench_method_p2p(P2PK_BM_DRIVER), 0);
  char s[32];
  p2pk_bench_fmt_size(256u << 20, s, sizeof s);
  CHECK_STR(s, "256 MiB");
  p2pk_bench_fmt_size(8, s, sizeof s);
  CHECK_STR(s, "8 B");
  p2pk_bench_fmt_size(1536, s, sizeof s);
  CHECK_STR(s, "1.5 KiB");
  p2pk_bench_fmt_size((1u << 30) + 7, s, sizeof s);
  CHECK_STR(s, "1.0 GiB");
}

T_MAIN(T_CASE(defaults), T_CASE(sizes), T_CASE(bad_sizes), T_CASE(methods_and_modes),
       T_CASE(gpus_and_pairs), T_CASE(outputs), T_CASE(against_machine), T_CASE(names))
