/* SPDX-License-Identifier: BSD-3-Clause */
#include "cli/cli.h"
#include "perf/perf.h"

/* The harness lives in src/perf (library-internal, so its parsers and
 * formatters are unit-tested); this is only the entry point. */
int cmd_perf(int argc, char **argv) { return p2pk_perf_main(argc, argv); }
