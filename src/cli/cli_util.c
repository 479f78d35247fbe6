/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/opts.h"
#include "core/outfile.h"
#include "core/param.h"

void p2pk_cli_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "p2pkit %s: error: ", cmd);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

int p2pk_cli_discovery_error(const char *cmd, p2pkit_status_t st) {
  const char *detail = p2pkit_last_error();
  if (st == P2PKIT_ERR_NO_DRIVER || st == P2PKIT_ERR_NO_DEVICE) {
    p2pk_cli_error(cmd, "%s (%s); to analyse a recorded machine: p2pkit %s --from FILE",
              st == P2PKIT_ERR_NO_DRIVER ? "no NVIDIA driver on this machine" : "no usable GPU found",
              detail[0] ? detail : p2pkit_strerror(st), cmd);
    return CLI_EXIT_USAGE;
  }
  p2pk_cli_error(cmd, "%s", detail[0] ? detail : p2pkit_strerror(st));
  return CLI_EXIT_FAIL;
}

int p2pk_cli_parse_size(const char *cmd, const char *what, const char *text, size_t *out) {
  if (!text || p2pk_parse_size(text, out) != 0) {
    p2pk_cli_error(cmd, "%s '%s' is not a size (use a number of bytes, optionally with K, M, G or T)",
              what, text ? text : "");
    return -1;
  }
  return 0;
}

int p2pk_cli_get_topo(const char *cmd, const char *from, p2pkit_topo_t *topo_p) {
  /* A setting the library would refuse is a bad input here too, before the
   * first one is read. */
  if (p2pk_param_check() != P2PKIT_SUCCESS) {
    p2pk_cli_error(cmd, "%s", p2pkit_last_error());
    return CLI_EXIT_USAGE;
  }
  const char *file = from ? from : p2pk_param_str("P2PKIT_TOPO_FILE");
  p2pkit_status_t st;
  if (file && file[0]) {
    st = p2pkit_topo_load(file, topo_p);
    if (st != P2PKIT_SUCCESS) {
      /* Missing or malformed: the input named is wrong either way. */
      p2pk_cli_error(cmd, "%s", p2pkit_last_error());
      return st == P2PKIT_ERR_NO_MEMORY ? CLI_EXIT_FAIL : CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
  }
  st = p2pkit_topo_discover(topo_p);
  if (st != P2PKIT_SUCCESS) return p2pk_cli_discovery_error(cmd, st);
  return CLI_EXIT_OK;
}

int p2pk_cli_opt_error(const char *cmd, int c, char *const *argv, void (*usage)(FILE *)) {
  char why[200];
  p2pk_opts_error(c, argv, why, sizeof why);
  p2pk_cli_error(cmd, "%s", why);
  if (c == '?' && usage) usage(stderr);
  return CLI_EXIT_USAGE;
}

int p2pk_cli_file_arg(const char *cmd, const struct option *longs, int c, const char *v) {
  if (v && v[0]) return 0;
  const char *name = "?";
  for (const struct option *o = longs; o->name; o++)
    if (o->val == c) name = o->name;
  p2pk_cli_error(cmd, "--%s needs a file name", name);
  return -1;
}
