/* SPDX-License-Identifier: BSD-3-Clause */
/* `p2pkit perf` command line: nccl-tests' flags, defaults, names, the size
 * list, and a one-line error naming the bad value for every bad input. */
#include <stdarg.h>

#include "perf/perf.h"
#include "test.h"

static char errbuf[8192];

/* Parse a NULL-terminated list; `perf` is argv[0]. Error text in errbuf. */
static int parse(perf_args *a, ...) {
  char *argv[64];
  int argc = 0;
  argv[argc++] = "perf";
  va_list ap;
  va_start(ap, a);
  for (char *s; (s = va_arg(ap, char *)) != NULL && argc < 63;) argv[argc++] = s;
  va_end(ap);
  argv[argc] = NULL;
  errbuf[0] = '\0';
  FILE *err = fmemopen(errbuf, sizeof errbuf - 1, "w");
  int r = p2pk_perf_parse(argc, argv, a, err);
  fclose(err);
  return r;
}

static int lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

TEST(defaults_like_nccl_tests) {
  perf_args a;
  CHECK_EQ(parse(&a, "all_reduce", NULL), PERF_PARSE_OK);
  CHECK_STR(a.coll->name, "all_reduce");
  CHECK_EQ(a.min_bytes, 8);
  CHECK_EQ(a.max_bytes, 128 << 20);
  CHECK_EQ(a.step_factor, 2);
  CHECK_EQ(a.iters, 20);
  CHECK_EQ(a.warmup, 5);
  CHECK_EQ(a.check, 1);
  CHECK_EQ(a.graph, 0);
  CHECK_EQ(a.repeats, 5);
  CHECK_EQ(a.dtype, P2PKIT_FLOAT32);
  CHECK_EQ(a.op, P2PKIT_SUM);
  CHECK_EQ(a.ngpus, 0);
  CHECK_EQ(a.nprocs, 0);
  CHECK(!a.vs_nccl && !a.nccl_only && !a.json && !a.reg);
  CHECK(p2pk_perf_uses_p2pkit(&a) && !p2pk_perf_uses_nccl(&a));
  CHECK_STR(errbuf, "");
}

TEST(every_flag) {
  perf_args a;
  CHECK_EQ(parse(&a, "-b", "1K", "-e", "1M", "-f", "4", "-n", "7", "-w", "2", "-c", "0", "-G", "3",
                 "-d", "bfloat16", "-o", "max", "-g", "2", "-R", "1", "--repeats", "9", "all_reduce",
                 "--vs-nccl", "--json", "--json-file", "out.json", "--algo", "oneshot/ll", "--max-blocks",
                 "66", NULL),
           PERF_PARSE_OK);
  CHECK_EQ(a.min_bytes, 1024);
  CHECK_EQ(a.max_bytes, 1 << 20);
  CHECK_EQ(a.step_factor, 4);
  CHECK_EQ(a.iters, 7);
  CHECK_EQ(a.warmup, 2);
  CHECK_EQ(a.check, 0);
  CHECK_EQ(a.graph, 3);
  CHECK_EQ(a.dtype, P2PKIT_BFLOAT16);
  CHECK_EQ(a.op, P2PKIT_MAX);
  CHECK_EQ(a.ngpus, 2);
  CHECK_EQ(a.reg, 1);
  CHECK_EQ(a.repeats, 9);
  CHECK(a.vs_nccl && a.json && p2pk_perf_uses_nccl(&a) && p2pk_perf_uses_p2pkit(&a));
  CHECK_STR(a.json_file, "out.json");
  CHECK_STR(a.algo, "oneshot/ll");
  CHECK_EQ(a.max_blocks, 66);

  /* long forms, --x=v, -xV, -p, sweep */
  CHECK_EQ(parse(&a, "allreduce", "--minbytes=64", "--maxbytes", "4K", "--datatype", "half",
                 "-i256", "--op=avg", "--procs", "2", "--sweep-algos", "oneshot/ll,twoshot/simple",
                 "--algo-table", "t.txt", NULL),
           PERF_PARSE_OK);
  CHECK_STR(a.coll->name, "all_reduce");
  CHECK_EQ(a.min_bytes, 64);
  CHECK_EQ(a.max_bytes, 4096);
  CHECK_EQ(a.step_bytes, 256);
  CHECK_EQ(a.dtype, P2PKIT_FLOAT16);
  CHECK_EQ(a.op, P2PKIT_AVG);
  CHECK_EQ(a.nprocs, 2);
  CHECK_EQ(a.nalgos, 2);
  CHECK_STR(a.algos[0], "oneshot/ll");
  CHECK_STR(a.algos[1], "twoshot/simple");
  CHECK_STR(a.algo_table, "t.txt");

  CHECK_EQ(parse(&a, "broadcast", "--nccl-only", "-r", "1", NULL), PERF_PARSE_OK);
  CHECK(a.nccl_only && !p2pk_perf_uses_p2pkit(&a) && p2pk_perf_uses_nccl(&a));
  CHECK_EQ(a.root, 1);
  CHECK_EQ(p2pk_perf_primary(&a), PERF_LIB_NCCL);

  CHECK_EQ(parse(&a, "all_gather", "--explain", "--procs", "2", NULL), PERF_PARSE_OK);
  CHECK(a.explain && a.nprocs == 2);
  CHECK_EQ(parse(&a, "all_reduce", "--procs", "4", "--hosts", "2", NULL), PERF_PARSE_OK);
  CHECK(a.hosts == 2 && a.nprocs == 4);
}

TEST(dtype_and_op_names) {
  /* Every type nccl-tests names (its test_typenames), in its order. */
  static const struct {
    const char *name;
    p2pkit_dtype_t d;
    size_t size;
  } t[] = {{"int8", P2PKIT_INT8, 1},         {"uint8", P2PKIT_UINT8, 1},
           {"int32", P2PKIT_INT32, 4},       {"uint32", P2PKIT_UINT32, 4},
           {"int64", P2PKIT_INT64, 8},       {"uint64", P2PKIT_UINT64, 8},
           {"half", P2PKIT_FLOAT16, 2},      {"float", P2PKIT_FLOAT32, 4},
           {"double", P2PKIT_FLOAT64, 8},    {"bfloat16", P2PKIT_BFLOAT16, 2},
           {"f8e4m3", P2PKIT_FLOAT8_E4M3, 1}, {"f8e5m2", P2PKIT_FLOAT8_E5M2, 1}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    p2pkit_dtype_t d;
    CHECK_EQ(p2pk_perf_dtype_parse(t[i].name, &d), 0);
    CHECK_EQ(d, t[i].d);
    CHECK_STR(p2pk_perf_dtype_name(d), t[i].name); /* printed as nccl-tests spells it */
    CHECK_EQ(p2pkit_dtype_size(d), t[i].size);
  }
  p2pkit_dtype_t d;
  CHECK_EQ(p2pk_perf_dtype_parse("fp16", &d), 0);
  CHECK_EQ(d, P2PKIT_FLOAT16);
  CHECK_EQ(p2pk_perf_dtype_parse("float8", &d), -1);
  static const char *ops[] = {"sum", "prod", "max", "min", "avg", "mulsum"};
  static const int codes[] = {P2PKIT_SUM, P2PKIT_PROD, P2PKIT_MAX, P2PKIT_MIN, P2PKIT_AVG,
                              PERF_OP_MULSUM};
  for (int i = 0; i < 6; i++) {
    int op;
    CHECK_EQ(p2pk_perf_op_parse(ops[i], &op), 0);
    CHECK_EQ(op, codes[i]);
    CHECK_STR(p2pk_perf_op_name(op), ops[i]);
  }
  int op;
  CHECK_EQ(p2pk_perf_op_parse("mean", &op), -1);
  /* -d all and -o all: nccl-tests' lists, in its order. */
  perf_args a;
  CHECK_EQ(parse(&a, "all_reduce", "-d", "all", "-o", "all", "--vs-nccl", NULL), PERF_PARSE_OK);
  CHECK_EQ(a.ndtypes, 12);
  for (int i = 0; i < 12; i++) CHECK_EQ(a.dtypes[i], t[i].d);
  CHECK_EQ(a.nops, 6);
  for (int i = 0; i < 6; i++) CHECK_EQ(a.ops[i], codes[i]);
  /* Without NCCL, "all" is the five p2pkit has (mulsum is NCCL's alone). */
  CHECK_EQ(parse(&a, "all_reduce", "-o", "all", NULL), PERF_PARSE_OK);
  CHECK_EQ(a.nops, 5);
  for (int i = 0; i < 5; i++) CHECK(a.ops[i] != PERF_OP_MULSUM);
}

/* Each bad input: error, one line naming `needle` (usage follows only for an
 * unknown flag or a missing collective). */
static void bad_case(int line, const char *needle, int want_usage, ...) {
  char *argv[32];
  int argc = 0;
  argv[argc++] = "perf";
  va_list ap;
  va_start(ap, want_usage);
  for (char *s; (s = va_arg(ap, char *)) != NULL && argc < 31;) argv[argc++] = s;
  va_end(ap);
  perf_args a;
  errbuf[0] = '\0';
  FILE *err = fmemopen(errbuf, sizeof errbuf - 1, "w");
  int r = p2pk_perf_parse(argc, argv, &a, err);
  fclose(err);
  if (r != PERF_PARSE_ERROR) T_FAIL("line %d: accepted, wanted an error", line);
  if (strncmp(errbuf, "p2pkit perf: error: ", 20) != 0) T_FAIL("line %d: no error prefix: %s", line, errbuf);
  if (!strstr(errbuf, needle)) T_FAIL("line %d: error does not name '%s': %s", line, needle, errbuf);
  int has_usage = strstr(errbuf, "usage: p2pkit perf") != NULL;
  if (has_usage != want_usage) T_FAIL("line %d: usage %s: %s", line, has_usage ? "printed" : "missing", errbuf);
  if (!want_usage && lines(errbuf) != 1) T_FAIL("line %d: %d lines: %s", line, lines(errbuf), errbuf);
}

TEST(bad_inputs) {
  bad_case(__LINE__, "which collective", 1, NULL);
  bad_case(__LINE__, "unknown collective 'allreduc'", 0, "allreduc", NULL);
  bad_case(__LINE__, "unexpected argument 'extra'", 0, "all_reduce", "extra", NULL);
  bad_case(__LINE__, "unknown option '--bogus'", 1, "all_reduce", "--bogus", NULL);
  bad_case(__LINE__, "unknown option '-q'", 1, "all_reduce", "-q", NULL);
  bad_case(__LINE__, "unknown option '--json=1'", 1, "all_reduce", "--json=1", NULL);
  bad_case(__LINE__, "'float8': unknown data type", 0, "all_reduce", "-d", "float8", NULL);
  bad_case(__LINE__, "'mean': unknown reduction", 0, "all_reduce", "-o", "mean", NULL);
  bad_case(__LINE__, "-b 0: sizes must be at least 1 byte", 0, "all_reduce", "-b", "0", NULL);
  bad_case(__LINE__, "-e 0: sizes must be at least 1 byte", 0, "all_reduce", "-e", "0", NULL);
  bad_case(__LINE__, "'-1': sizes cannot be negative", 0, "all_reduce", "-b", "-1", NULL);
  bad_case(__LINE__, "-b 'abc' is not a size", 0, "all_reduce", "-b", "abc", NULL);
  bad_case(__LINE__, "-e '1X' is not a size", 0, "all_reduce", "-e", "1X", NULL);
  bad_case(__LINE__, "-e '99999999999999999999' is not a size", 0, "all_reduce", "-e",
           "99999999999999999999", NULL);
  bad_case(__LINE__, "-e 4 is smaller than -b 8", 0, "all_reduce", "-e", "4", NULL);
  /* -f: one rule in every message, the range and the step alike. */
  static const char *const factor_rule =
      "the step factor must be 2 to 1048576 (1 only with -i, or with -e equal to -b)";
  char want[160];
  snprintf(want, sizeof want, "-f 1: %s", factor_rule);
  bad_case(__LINE__, want, 0, "all_reduce", "-f", "1", NULL);
  snprintf(want, sizeof want, "-f 0: %s", factor_rule);
  bad_case(__LINE__, want, 0, "all_reduce", "-f", "0", NULL);
  bad_case(__LINE__, want, 0, "all_reduce", "-f", "0", "-i", "8", NULL);
  snprintf(want, sizeof want, "-f 1048577: %s", factor_rule);
  bad_case(__LINE__, want, 0, "all_reduce", "--stepfactor", "1048577", NULL);
  bad_case(__LINE__, "-f 'two' is not a whole number", 0, "all_reduce", "-f", "two", NULL);
  bad_case(__LINE__, "-b '1Q' is not a size (a number of bytes, optionally with K, M, G or T)", 0,
           "all_reduce", "-b", "1Q", NULL);
  bad_case(__LINE__, "more than 256 sizes", 0, "all_reduce", "-b", "1", "-e", "1G", "-i", "1", NULL);
  bad_case(__LINE__, "-n 0 is out of range", 0, "all_reduce", "-n", "0", NULL);
  bad_case(__LINE__, "-n 'x' is not a whole number", 0, "all_reduce", "-n", "x", NULL);
  bad_case(__LINE__, "-c 1001 is out of range", 0, "all_reduce", "-c", "1001", NULL);
  bad_case(__LINE__, "-g 0 is out of range", 0, "all_reduce", "-g", "0", NULL);
  bad_case(__LINE__, "-g 65 is out of range", 0, "all_reduce", "-g", "65", NULL);
  bad_case(__LINE__, "--repeats 0 is out of range", 0, "all_reduce", "--repeats", "0", NULL);
  bad_case(__LINE__, "--max-blocks 0 is out of range", 0, "all_reduce", "--max-blocks", "0", NULL);
  bad_case(__LINE__, "--max-blocks 'many' is not a whole number", 0, "all_reduce", "--max-blocks",
           "many", NULL);
  bad_case(__LINE__, "-g 2 cannot be combined", 0, "all_reduce", "--procs", "2", "-g", "2", NULL);
  bad_case(__LINE__, "-b needs a value", 0, "all_reduce", "-b", NULL);
  bad_case(__LINE__, "--minbytes needs a value", 0, "all_reduce", "--minbytes", NULL);
  bad_case(__LINE__, "-f and -i cannot both be given", 0, "all_reduce", "-f", "2", "-i", "8", NULL);
  bad_case(__LINE__, "--json-file needs a file name", 0, "all_reduce", "--json-file=", NULL);
  bad_case(__LINE__, "exclude each other", 0, "all_reduce", "--vs-nccl", "--nccl-only", NULL);
  bad_case(__LINE__, "two-shot form); not for all_gather", 0, "all_gather", "--algo", "oneshot", NULL);
  bad_case(__LINE__, "sweeps p2pkit's all-reduce algorithms; not for reduce", 0, "reduce",
           "--sweep-algos", "oneshot,twoshot", NULL);
  bad_case(__LINE__, "--algo 'fastest': unknown algorithm", 0, "all_reduce", "--algo", "fastest", NULL);
  bad_case(__LINE__, "'oneshot/xl': unknown algorithm (oneshot, twoshot or staged, optionally /ll, "
           "/ll128 or /simple)", 0, "all_reduce", "--algo", "oneshot/xl", NULL);
  bad_case(__LINE__, "--sweep-algos 'ring/ll128': unknown algorithm (oneshot, twoshot or staged, "
           "optionally /ll, /ll128 or /simple)", 0, "all_reduce", "--sweep-algos",
           "oneshot/ll128,ring/ll128", NULL);
  bad_case(__LINE__, "oneshot is listed twice", 0, "all_reduce", "--sweep-algos", "oneshot,oneshot", NULL);
  bad_case(__LINE__, "'twoshot' has none", 0, "all_reduce", "--sweep-algos", "oneshot/ll,twoshot",
           "--algo-table", "t", NULL);
  bad_case(__LINE__, "--algo-table needs --sweep-algos", 0, "all_reduce", "--algo-table", "t", NULL);
  bad_case(__LINE__, "cannot be combined with --vs-nccl", 0, "all_reduce", "--sweep-algos", "oneshot",
           "--vs-nccl", NULL);
  bad_case(__LINE__, "not with --nccl-only", 0, "all_reduce", "--nccl-only", "--algo", "oneshot", NULL);
  bad_case(__LINE__, "--explain prints p2pkit's selector", 0, "all_reduce", "--explain", "--vs-nccl", NULL);
  bad_case(__LINE__, "--hosts 2 simulates hosts among --procs' processes; give --procs N too", 0,
           "all_reduce", "--hosts", "2", NULL);
  bad_case(__LINE__, "--hosts 3: more hosts than the 2 processes of --procs", 0, "all_reduce",
           "--procs", "2", "--hosts", "3", NULL);
}

TEST(help) {
  perf_args a;
  FILE *saved = stdout;
  char out[8192];
  stdout = fmemopen(out, sizeof out - 1, "w");
  int r = parse(&a, "all_reduce", "--help", NULL);
  fclose(stdout);
  stdout = saved;
  CHECK_EQ(r, PERF_PARSE_HELP);
  CHECK(strstr(out, "usage: p2pkit perf") != NULL);
  CHECK(strstr(out, "--vs-nccl") != NULL);
}

TEST(size_list) {
  perf_args a;
  size_t s[P2PK_PERF_MAX_SIZES];
  CHECK_EQ(parse(&a, "all_reduce", "-b", "8", "-e", "1G", NULL), PERF_PARSE_OK);
  int n = p2pk_perf_sizes(&a, s, P2PK_PERF_MAX_SIZES);
  CHECK_EQ(n, 28);
  CHECK_EQ(s[0], 8);
  CHECK_EQ(s[n - 1], 1 << 30);
  for (int i = 1; i < n; i++) CHECK_EQ(s[i], 2 * s[i - 1]);
  CHECK_EQ(parse(&a, "all_reduce", "-b", "8", "-e", "100", NULL), PERF_PARSE_OK);
  n = p2pk_perf_sizes(&a, s, P2PK_PERF_MAX_SIZES);
  CHECK_EQ(n, 4);
  CHECK_EQ(s[3], 64);
  CHECK_EQ(parse(&a, "all_reduce", "-b", "1", "-e", "35", "-i", "10", NULL), PERF_PARSE_OK);
  n = p2pk_perf_sizes(&a, s, P2PK_PERF_MAX_SIZES);
  CHECK_EQ(n, 4);
  CHECK_EQ(s[1], 11);
  CHECK_EQ(s[3], 31);
  CHECK_EQ(parse(&a, "all_reduce", "-b", "64M", "-e", "64M", "-f", "1", NULL), PERF_PARSE_OK);
  CHECK_EQ(p2pk_perf_sizes(&a, s, P2PK_PERF_MAX_SIZES), 1);
  /* -f and -i exclude each other, as in bench: one says how sizes step. */
  CHECK_EQ(parse(&a, "all_reduce", "-b", "8", "-e", "32", "-i", "8", "-f", "1", NULL),
           PERF_PARSE_ERROR);
  CHECK_EQ(parse(&a, "all_reduce", "-f", "2", "-i", "8", NULL), PERF_PARSE_ERROR);
  /* A value in the same word or the next, short or long: the same. */
  CHECK_EQ(parse(&a, "all_reduce", "-b8", "-e1M", "--stepfactor=4", NULL), PERF_PARSE_OK);
  CHECK_EQ(a.min_bytes, 8);
  CHECK_EQ(a.max_bytes, 1u << 20);
  CHECK_EQ(a.step_factor, 4);
  CHECK_EQ(parse(&a, "--minbytes", "8", "all_reduce", "--maxbytes", "1M", "-f", "4", NULL),
           PERF_PARSE_OK); /* options before the collective too */
  CHECK_EQ(a.min_bytes, 8);
  CHECK(a.coll && strcmp(a.coll->name, "all_reduce") == 0);
  CHECK_EQ(parse(&a, "all_reduce", "-b", "1T", "-e", "1T", NULL), PERF_PARSE_OK);
  CHECK(a.min_bytes == (size_t)1 << 40); /* T, as the size errors say */
  CHECK_EQ(parse(&a, "all_reduce", "--algo", "oneshot/ll128", NULL), PERF_PARSE_OK);
  CHECK_EQ(parse(&a, "all_reduce", "-b", "8", "-e", "1G", "-f", "4", NULL), PERF_PARSE_OK);
  n = p2pk_perf_sizes(&a, s, P2PK_PERF_MAX_SIZES);
  CHECK_EQ(n, 14);
  CHECK_EQ(s[n - 1], 512 << 20); /* 8 * 4^13 */
}

TEST(algo_names) {
  int algo, proto;
  CHECK_EQ(p2pk_perf_algo_split("oneshot", &algo, &proto), 0);
  CHECK(algo >= 0 && proto == -1);
  int oneshot = algo;
  CHECK_EQ(p2pk_perf_algo_split("twoshot/simple", &algo, &proto), 0);
  CHECK(algo >= 0 && algo != oneshot && proto >= 0);
  int simple = proto;
  CHECK_EQ(p2pk_perf_algo_split("oneshot/ll", &algo, &proto), 0);
  CHECK(algo == oneshot && proto >= 0 && proto != simple);
  CHECK_EQ(p2pk_perf_algo_split("staged", &algo, &proto), 0);
  CHECK_EQ(p2pk_perf_algo_split("ring", &algo, &proto), -1);
  CHECK_EQ(p2pk_perf_algo_split("oneshot/", &algo, &proto), -1);
  CHECK_EQ(p2pk_perf_algo_split("/ll", &algo, &proto), -1);
  /* Broadcast and reduce take --algo too (twoshot: their rooted form). */
  perf_args a;
  CHECK_EQ(parse(&a, "broadcast", "--algo", "twoshot/simple", NULL), PERF_PARSE_OK);
  CHECK_STR(a.algo, "twoshot/simple");
  CHECK_EQ(parse(&a, "reduce", "--algo", "oneshot", "-r", "1", NULL), PERF_PARSE_OK);
  CHECK_STR(errbuf, "");
}

TEST(collective_table) {
  static const char *names[] = {"all_reduce", "broadcast", "reduce", "all_gather",
                                "reduce_scatter", "sendrecv", "alltoall", "hypercube",
                                "gather", "scatter"};
  int n = 0;
  for (; p2pk_perf_coll_at(n); n++) {
    const perf_coll *c = p2pk_perf_coll_at(n);
    CHECK_STR(c->name, names[n]);
    CHECK(p2pk_perf_coll(c->name) == c);
    CHECK(c->factor && c->counts && c->nccl_call); /* NCCL's side exists for every one */
  }
  CHECK_EQ(n, 10);
  CHECK_STR(p2pk_perf_coll_at(7)->name, "hypercube");
  CHECK(p2pk_perf_coll("all_reduce")->p2pkit_call != NULL);
  /* p2pkit has every collective (issue 5). */
  for (int i = 0; p2pk_perf_coll_at(i); i++) CHECK(p2pk_perf_coll_at(i)->p2pkit_call != NULL);
  CHECK(p2pk_perf_coll("bcast") == p2pk_perf_coll("broadcast"));
  CHECK(p2pk_perf_coll("all_gather_perf") == p2pk_perf_coll("all_gather"));
  CHECK(p2pk_perf_coll("gather_perf") == p2pk_perf_coll("gather"));
  CHECK(p2pk_perf_coll("scatter_perf") == p2pk_perf_coll("scatter"));
  CHECK(p2pk_perf_coll("alltoallv") == NULL);
  /* gather and scatter: rooted (-r), no operation, an in-place variant */
  for (int i = 0; i < 2; i++) {
    const perf_coll *c = p2pk_perf_coll(i ? "scatter" : "gather");
    CHECK(c->uses_root && !c->uses_op && c->has_inplace && !c->pow2_ranks);
  }
}

/* Whose output is checked: reduce's and gather's only on the root. */
TEST(ranks_holding_a_result) {
  for (int i = 0; p2pk_perf_coll_at(i); i++) {
    const perf_coll *c = p2pk_perf_coll_at(i);
    const int rooted_output = !strcmp(c->name, "reduce") || !strcmp(c->name, "gather");
    for (int root = 0; root < 3; root++)
      for (int rank = 0; rank < 3; rank++)
        CHECK_EQ(p2pk_perf_rank_has_output(c, rank, root), !rooted_output || rank == root);
  }
}

/* gather and scatter parse as nccl-tests' gather_perf and scatter_perf do:
 * -r N and -r all; -o is an operation they do not take. */
TEST(gather_and_scatter_command_lines) {
  perf_args a;
  CHECK_EQ(parse(&a, "gather_perf", "-b", "8", "-e", "128M", "-f", "2", "-g", "8", "-r", "3",
                 NULL), PERF_PARSE_OK);
  CHECK_STR(a.coll->name, "gather");
  CHECK(a.root == 3 && a.ngpus == 8 && a.max_bytes == (size_t)128 << 20);
  CHECK_EQ(parse(&a, "scatter", "-r", "all", NULL), PERF_PARSE_OK);
  CHECK(a.root == -1 && !strcmp(a.coll->name, "scatter"));
}


/* nccl-tests' documented command lines (its README's quick examples and
 * the line every script runs), parsed with nccl-tests' meaning. */
TEST(nccl_tests_command_lines) {
  perf_args a;
  /* README: "Run on single node with 8 GPUs (-g 8), scanning from 8 Bytes to
   * 128MiB, doubling between each test (-f 2)" */
  CHECK_EQ(parse(&a, "all_reduce_perf", "-b", "8", "-e", "128M", "-f", "2", "-g", "8", NULL),
           PERF_PARSE_OK);
  CHECK(a.coll->id == PERF_ALL_REDUCE && a.min_bytes == 8 && a.max_bytes == 128u << 20);
  CHECK(a.step_factor == 2 && a.ngpus == 8 && a.nprocs == 0);
  /* README, the MPI line's flags: 8 B to 8 GiB, one GPU per process */
  CHECK_EQ(parse(&a, "all_reduce", "-b", "8", "-e", "8G", "-f", "2", "-g", "1", NULL), PERF_PARSE_OK);
  CHECK(a.max_bytes == (size_t)8 << 30 && a.ngpus == 1);
  /* The standard line of the issue: every flag with nccl-tests' meaning */
  CHECK_EQ(parse(&a, "all_reduce", "-b", "8", "-e", "128M", "-f", "2", "-g", "1", "-c", "1", "-n",
                 "20", "-w", "5", "-o", "sum", "-d", "float", "-z", "0", "-G", "1", NULL),
           PERF_PARSE_OK);
  CHECK(a.ngpus == 1 && a.check == 1 && a.iters == 20 && a.warmup == 5 && a.blocking == 0);
  CHECK(a.op == P2PKIT_SUM && a.dtype == P2PKIT_FLOAT32 && a.graph == 1);
  CHECK_STR(errbuf, "");
  /* Long forms, as nccl-tests spells them */
  CHECK_EQ(parse(&a, "reduce_scatter", "--nthreads", "1", "--ngpus", "2", "--minbytes", "1K",
                 "--maxbytes", "1M", "--stepfactor", "4", "--iters", "10", "--agg_iters", "2",
                 "--warmup_iters", "3", "--run_cycles", "2", "--parallel_init", "1", "--check", "3",
                 "--op", "max", "--datatype", "bfloat16", "--root", "0", "--blocking", "2",
                 "--stream_null", "0", "--timeout", "30", "--cudagraph", "0", "--report_cputime", "1",
                 "--report_timestamps", "1", "--output_file", "r.json", "--average", "1",
                 "--local_register", "1", "--device_implementation", "0", "--memory", "0",
                 "--unalign", "3", "--per_iter_timing", "0", "--per_iter_skip", "0", NULL),
           PERF_PARSE_OK);
  CHECK(a.nthreads == 1 && a.ngpus == 2 && a.min_bytes == 1024 && a.max_bytes == 1u << 20);
  CHECK(a.step_factor == 4 && a.iters == 10 && a.agg == 2 && a.warmup == 3 && a.cycles == 2);
  CHECK(a.parallel_init == 1 && a.nprocs == 0 && a.check == 3 && a.op == P2PKIT_MAX);
  CHECK(a.dtype == P2PKIT_BFLOAT16 && a.blocking == 2 && a.timeout_s == 30 && a.cputime == 1);
  CHECK(a.timestamps == 1 && a.average == 1 && a.reg == 1 && a.unalign == 3);
  CHECK_STR(a.json_file, "r.json");
  CHECK_STR(errbuf, "");
  /* -p is nccl-tests' parallel init, not a process count: -p 1 runs the
   * same ranks as -p 0 (one thread per process), and forks nothing. */
  CHECK_EQ(parse(&a, "all_reduce", "-p", "1", NULL), PERF_PARSE_OK);
  CHECK(a.parallel_init == 1 && a.nprocs == 0);
  CHECK_EQ(parse(&a, "all_reduce", "-p", "0", "-t", "1", NULL), PERF_PARSE_OK);
  CHECK(a.parallel_init == 0 && a.nthreads == 1);
  CHECK_EQ(parse(&a, "all_reduce", "--procs", "2", NULL), PERF_PARSE_OK);
  CHECK(a.nprocs == 2 && a.parallel_init == 0);
  /* -r all, -N 0 on a table, -J with a .json name in any case, -R 0, -D 0 */
  CHECK_EQ(parse(&a, "broadcast", "-r", "all", "-N", "0", "-J", "OUT.JSON", "-R", "0", "-D", "0",
                 NULL), PERF_PARSE_ERROR); /* -N 0 never finishes -J's document */
  CHECK_EQ(parse(&a, "broadcast", "-r", "all", "-N", "0", "-R", "0", "-D", "0", NULL), PERF_PARSE_OK);
  CHECK(a.root == -1 && a.cycles == 0);
  CHECK_EQ(parse(&a, "broadcast", "-J", "OUT.JSON", NULL), PERF_PARSE_OK);
  CHECK_STR(a.json_file, "OUT.JSON");
  /* The collectives by nccl-tests' binary names, hypercube among them */
  CHECK(p2pk_perf_coll("hypercube_perf") == p2pk_perf_coll("hypercube"));
  CHECK_EQ(parse(&a, "hypercube_perf", "-g", "4", NULL), PERF_PARSE_OK);
  CHECK(a.coll->pow2_ranks && !a.coll->uses_op && !a.coll->uses_root);
}

/* The nccl-tests flags p2pkit cannot honour: one line naming the flag and
 * why, never silently ignored. */
TEST(refused_nccl_tests_flags) {
  bad_case(__LINE__, "-t 2: p2pkit perf drives a process's GPUs from one thread; for 8 ranks give "
           "-g 8 (one process) or --procs 8", 0, "all_reduce", "-t", "2", "-g", "4", NULL);
  bad_case(__LINE__, "-p 2 is out of range (0 to 1)", 0, "all_reduce", "-p", "2", NULL);
  bad_case(__LINE__, "-x: NCCL's CTA policy", 0, "all_reduce", "-x", "1", NULL);
  bad_case(__LINE__, "-D 1: nccl-tests' own device-API kernels", 0, "all_reduce", "-D", "1", NULL);
  bad_case(__LINE__, "-V sets the CTA count of -D's device-API kernels", 0, "all_reduce", "-V", "16", NULL);
  bad_case(__LINE__, "-M 1: p2pkit perf does not report memory use", 0, "all_reduce", "-M", "1", NULL);
  bad_case(__LINE__, "-I 1: p2pkit perf times --repeats regions", 0, "all_reduce", "-I", "1", NULL);
  bad_case(__LINE__, "-K 3 skips samples of -I's per-iteration timing", 0, "all_reduce", "-K", "3", NULL);
  bad_case(__LINE__, "-R 2: symmetric registration", 0, "all_reduce", "-R", "2", NULL);
  bad_case(__LINE__, "-z 1 waits for each call, which a CUDA graph's capture (-G 1) cannot", 0,
           "all_reduce", "-z", "1", "-G", "1", NULL);
  bad_case(__LINE__, "-y 1: the legacy default stream cannot be captured", 0, "all_reduce", "-y", "1",
           "-G", "2", NULL);
  bad_case(__LINE__, "-z 4 is out of range (0 to 3)", 0, "all_reduce", "-z", "4", NULL);
  bad_case(__LINE__, "-a 4 is out of range (0 to 3)", 0, "all_reduce", "-a", "4", NULL);
  bad_case(__LINE__, "-J 'out.txt': only JSON is written", 0, "all_reduce", "-J", "out.txt", NULL);
  bad_case(__LINE__, "-J 'dir.json/x': only JSON is written", 0, "all_reduce", "-J", "dir.json/x", NULL);
  bad_case(__LINE__, "-N 0 runs until killed", 0, "all_reduce", "-N", "0", "--json", NULL);
  bad_case(__LINE__, "-o mulsum is NCCL's pre-multiplied sum", 0, "all_reduce", "-o", "mulsum", NULL);
  bad_case(__LINE__, "-r 'one' is not a whole number", 0, "broadcast", "-r", "one", NULL);
  bad_case(__LINE__, "'fp4': unknown data type (int8, uint8, int32, uint32, int64, uint64, half, "
           "float, double, bfloat16, f8e4m3, f8e5m2 or all)", 0, "all_reduce", "-d", "fp4", NULL);
  bad_case(__LINE__, "rows (sizes x types x operations x -N cycles) are more than the 4096", 0,
           "all_reduce", "-b", "1", "-e", "1G", "-d", "all", "-o", "all", "--vs-nccl", "-N", "2", NULL);
  bad_case(__LINE__, "--from x.p2pkit: a recorded machine has no GPU to measure", 0, "all_reduce",
           "--from", "x.p2pkit", NULL);
  bad_case(__LINE__, "unknown collective 'alltoallv'", 0, "alltoallv", NULL);
  bad_case(__LINE__, "-m 2: hypercube's steps depend on each other", 0, "hypercube", "-m", "2", NULL);
}

/* -d all, -o all, -r all: every combination once, nccl-tests' order
 * (types, then operations, then roots); a collective without an operation
 * or a root has one of each. */
TEST(variants) {
  perf_args a;
  perf_variant v[512];
  CHECK_EQ(parse(&a, "reduce", "-d", "all", "-o", "all", "-r", "all", "--vs-nccl", NULL), PERF_PARSE_OK);
  int n = p2pk_perf_variants(&a, 4, v, 512);
  CHECK_EQ(n, 12 * 6 * 4);
  CHECK(v[0].dtype == P2PKIT_INT8 && v[0].op == P2PKIT_SUM && v[0].root == 0);
  CHECK(v[1].root == 1 && v[3].root == 3 && v[4].op == P2PKIT_PROD && v[4].root == 0);
  CHECK(v[23].op == PERF_OP_MULSUM && v[24].dtype == P2PKIT_UINT8);
  CHECK(v[n - 1].dtype == P2PKIT_FLOAT8_E5M2 && v[n - 1].op == PERF_OP_MULSUM && v[n - 1].root == 3);
  CHECK_EQ(p2pk_perf_variants(&a, 4, v, 10), n); /* the count, even past `max` */
  CHECK(!p2pk_perf_p2pkit_runs(&v[23]) && p2pk_perf_p2pkit_runs(&v[0]));
  CHECK(p2pk_perf_via_nccl(&v[0])); /* int8: p2pkit's NCCL path */
  CHECK_EQ(parse(&a, "all_gather", "-d", "all", "-o", "all", "-r", "all", NULL), PERF_PARSE_OK);
  n = p2pk_perf_variants(&a, 8, v, 512);
  CHECK_EQ(n, 12);
  for (int i = 0; i < n; i++) CHECK(v[i].op == P2PKIT_SUM && v[i].root == -1);
  CHECK_EQ(parse(&a, "broadcast", "-r", "2", NULL), PERF_PARSE_OK);
  CHECK_EQ(p2pk_perf_variants(&a, 4, v, 512), 1);
  CHECK(v[0].root == 2 && v[0].dtype == P2PKIT_FLOAT32);
  /* -a: how the processes' times combine */
  const double t[] = {4, 1, 7, 2};
  CHECK_NEAR(p2pk_perf_combine(t, 4, 0), 4, 0);
  CHECK_NEAR(p2pk_perf_combine(t, 4, 1), 3.5, 1e-12);
  CHECK_NEAR(p2pk_perf_combine(t, 4, 2), 1, 0);
  CHECK_NEAR(p2pk_perf_combine(t, 4, 3), 7, 0);
  CHECK_EQ(parse(&a, "all_reduce", NULL), PERF_PARSE_OK);
  CHECK_EQ(a.average, 3); /* p2pkit's default: the slowest */
}

T_MAIN(T_CASE(defaults_like_nccl_tests), T_CASE(nccl_tests_command_lines),
       T_CASE(refused_nccl_tests_flags), T_CASE(variants), T_CASE(every_flag), T_CASE(dtype_and_op_names),
       T_CASE(bad_inputs), T_CASE(help), T_CASE(size_list), T_CASE(algo_names),
       T_CASE(collective_table), T_CASE(ranks_holding_a_result),
       T_CASE(gather_and_scatter_command_lines))
