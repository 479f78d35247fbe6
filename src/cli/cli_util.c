/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/opts.h"
#include "core/outfile.h"
#include "core/param.h"

void cli_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "p2pkit %s: error: ", cmd);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

int cli_discovery_error(const char *cmd, p2pkit_status_t st) {
  const char *detail = p2pkit_last_error();
  if (st == P2PKIT_ERR_NO_DRIVER || st == P2PKIT_ERR_NO_DEVICE) {
    cli_error(cmd, "%s (%s); to analyse a recorded machine: p2pkit %s --from FILE",
              st == P2PKIT_ERR_NO_DRIVER ? "no NVIDIA driver on this machine" : "no usable GPU found",
              detail[0] ? detail : p2pkit_strerror(st), cmd);
    return CLI_EXIT_USAGE;
  }
  cli_error(cmd, "%s", detail[0] ? detail : p2pkit_strerror(st));
  return CLI_EXIT_FAIL;
}

int cli_parse_size(const char *cmd, const char *what, const char *text, size_t *out) {
  if (!text || p2pk_parse_size(text, out) != 0) {
    cli_error(cmd, "%s '%s' is not a size (use a number of bytes, optionally with K, M, G or T)",
              what, text ? text : "");
    return -1;
  }
  return 0;
}

int cli_get_topo(const char *cmd, const char *from, p2pkit_topo_t *topo_p) {
  /* A setting the library would refuse is a bad input here too, before the
   * first one is read. */
  if (p2pk_param_check() != P2PKIT_SUCCESS) {
    cli_error(cmd, "%s", p2pkit_last_error());
    return CLI_EXIT_USAGE;
  }
  const char *file = from ? from : p2pk_param_str("P2PKIT_TOPO_FILE");
  p2pkit_status_t st;
  if (file && file[0]) {
    st = p2pkit_topo_load(file, topo_p);
    if (st != P2PKIT_SUCCESS) {
      /* Missing or malformed: the input named is wrong either way. */
      cli_error(cmd, "%s", p2pkit_last_error());
      return st == P2PKIT_ERR_NO_MEMORY ? CLI_EXIT_FAIL : CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
  }
  st = p2pkit_topo_discover(topo_p);
  if (st != P2PKIT_SUCCESS) return cli_discovery_error(cmd, st);
  return CLI_EXIT_OK;
}

int cli_opt_error(const char *cmd, int c, char *const *argv, void (*usage)(FILE *)) {
  char why[200];
  p2pk_opts_error(c, argv, why, sizeof why);
  cli_error(cmd, "%s", why);
  if (c == '?' && usage) usage(stderr);
  return CLI_EXIT_USAGE;
}

int cli_file_arg(const char *cmd, const struct option *longs, int c, const char *v) {
  if (v && v[0]) return 0;
  const char *name = "?";
  for (const struct option *o = longs; o->name; o++)
    if (o->val == c) name = o->name;
  cli_error(cmd, "--%s needs a file name", name);
  return -1;
}

/* ---- the command ------------------------------------------------------ */

typedef struct {
  const char *name;
  int (*fn)(int, char **);
  const char *help;
} command;

static const command commands[] = {
    {"topo", cmd_topo, "how each GPU pair is joined and whether P2P works (nvidia-smi topo -m)"},
    {"env", cmd_env, "list p2pkit's settings, their values and where each came from"},
    {"bench", cmd_bench, "measure copies between GPUs: every method and pair, verified"},
    {"perf", cmd_perf, "time a collective like nccl-tests, checked, optionally against NCCL"},
    {"doctor", cmd_doctor, "is data moving between the GPUs as fast as it can, and if not, why"},
    {"trace", cmd_trace, "a failed or hung job: which rank and which call went wrong"},
};

static void usage(FILE *out) {
  fprintf(out,
          "usage: p2pkit <command> [options]\n"
          "       p2pkit <command> --help\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].help);
  fprintf(out, "\np2pkit %d.%d.%d; settings: P2PKIT_* (see `p2pkit env`)\n", P2PKIT_VERSION_MAJOR,
          P2PKIT_VERSION_MINOR, P2PKIT_VERSION_PATCH);
}

int p2pkit_main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return CLI_EXIT_USAGE;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
    usage(stdout);
    return p2pk_stdout_flush("--help") ? CLI_EXIT_FAIL : CLI_EXIT_OK;
  }
  if (strcmp(argv[1], "--version") == 0) {
    int v = p2pkit_version();
    printf("p2pkit %d.%d.%d\n", v / 10000, v / 100 % 100, v % 100);
    return p2pk_stdout_flush("--version") ? CLI_EXIT_FAIL : CLI_EXIT_OK;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(argv[1], commands[i].name) == 0) {
      const int rc = commands[i].fn(argc - 1, argv + 1);
      /* Output that did not arrive is exit 1 in every command, whatever the
       * command found (the doctor's verdict included: it was not delivered). */
      return p2pk_stdout_flush(commands[i].name) != 0 ? CLI_EXIT_FAIL : rc;
    }
  fprintf(stderr, "p2pkit: error: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return CLI_EXIT_USAGE;
}
