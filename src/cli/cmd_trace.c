/* SPDX-License-Identifier: BSD-3-Clause */
/* p2pkit trace DIR: every rank's desync report in DIR (p2pkit's, and
 * PyTorch's flight recorder dumps), judged in one line, then the detail
 * (src/trace). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "coll/rdv/hosts.h"
#include "coll/call/trace.h"
#include "core/opts.h"
#include "trace/trace.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: p2pkit trace DIR [--json]\n\n"
          "Reads every rank's desync report in DIR (P2PKIT_TRACE_DIR: the files p2pkit writes\n"
          "on a timeout, an error, an abort, p2pkit_comm_dump_trace or P2PKIT_TRACE_SIGNAL;\n"
          "PyTorch's flight recorder dumps, TORCH_FR_DUMP_TEMP_FILE<rank>, too) and says in\n"
          "one line what happened: the first call where the ranks disagree and how, a rank\n"
          "that never arrived at a call the others made, a rank whose process was gone, or\n"
          "that no desync is found. Then each communicator's ranks and the calls there.\n\n"
          "  --json      the same as JSON (docs/desync.md)\n"
          "  -h, --help  this text\n\n"
          "Exit codes: 0 a verdict, whatever it says; 2 a bad command line, DIR unreadable or\n"
          "holding no report, or a report that could not be read (one line each on stderr;\n"
          "the others are judged).\n");
}

/* Is `pid` alive now: only on this machine, in this pid namespace. */
static int probe(void *arg, const char *host, uint64_t pidns, int64_t pid) {
  const char *mine = arg;
  if (strcmp(host, mine) != 0 || (pidns && pidns != p2pk_trace_pidns())) return -1;
  const char a = p2pk_trace_alive(pid);
  return a == 'y' ? 1 : a == 'n' ? 0 : -1;
}

static int judge(const p2pk_tdump *d, size_t n, const p2pk_tbad *bad, size_t nbad, int json) {
  char host[P2PK_HOSTID_MAX];
  if (p2pk_host_id(host, sizeof host) != P2PKIT_SUCCESS) host[0] = '\0';
  p2pk_tjob job;
  if (p2pk_trace_analyze(d, n, host[0] ? probe : NULL, host, &job) != P2PKIT_SUCCESS) {
    p2pk_cli_error("trace", "%s", p2pkit_last_error());
    return CLI_EXIT_USAGE;
  }
  job.bad = bad;
  job.nbad = nbad;
  if (json) p2pk_trace_json(&job, stdout);
  else p2pk_trace_print(&job, stdout);
  p2pk_tjob_free(&job);
  return nbad ? CLI_EXIT_USAGE : CLI_EXIT_OK;
}

static int run(const char *dir, int json) {
  p2pk_tdump *d = NULL;
  p2pk_tbad *bad = NULL;
  size_t n = 0, nbad = 0;
  const p2pkit_status_t st = p2pk_trace_load_dir(dir, &d, &n, &bad, &nbad);
  int rc = CLI_EXIT_USAGE;
  for (size_t i = 0; i < nbad; i++) p2pk_cli_error("trace", "%s", bad[i].why);
  if (st != P2PKIT_SUCCESS) p2pk_cli_error("trace", "%s", p2pkit_last_error());
  else if (!n) p2pk_cli_error("trace", "%s holds no report (p2pkit-trace-*.txt, or a flight recorder "
                         "dump)%s", dir, nbad ? " that could be read" : "");
  else rc = judge(d, n, bad, nbad, json);
  for (size_t i = 0; i < n; i++) p2pk_tdump_free(&d[i]);
  free(d);
  free(bad);
  return rc;
}

int p2pk_cmd_trace(int argc, char **argv) {
  static const struct option long_opts[] = {
      {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  int json = 0;
  p2pk_opts_begin();
  for (int c; (c = getopt_long(argc, argv, ":h", long_opts, NULL)) != -1;) {
    if (c == 'h') {
      usage(stdout);
      return CLI_EXIT_OK;
    }
    if (c != 'j') return p2pk_cli_opt_error("trace", c, argv, usage);
    json = 1;
  }
  if (optind != argc - 1) {
    if (optind < argc - 1) p2pk_cli_error("trace", "unexpected argument '%s'", argv[optind + 1]);
    else p2pk_cli_error("trace", "which directory? (p2pkit trace DIR)");
    usage(stderr);
    return CLI_EXIT_USAGE;
  }
  return run(argv[optind], json);
}
