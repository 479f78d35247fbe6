/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "coll/rdv/init_id.h"
#include "core/json.h"
#include "core/opts.h"
#include "core/param.h"

static const char *kind_name(int kind) {
  return kind == P2PK_PARAM_INT ? "int" : kind == P2PK_PARAM_SIZE ? "size" : "string";
}

/* After the listing: every value p2pkit would refuse, one line each on
 * stderr (the same sentences as p2pk_param_check's). */
static int verdict(void) {
  char list[512];
  int n = p2pk_param_unknown(list, sizeof list);
  if (n)
    fprintf(stderr, "p2pkit env: warning: not %s: %s\n",
            n == 1 ? "a p2pkit setting, so ignored" : "p2pkit settings, so ignored", list);
  int bad = 0;
  for (size_t i = 0; i < p2pk_param_count(); i++) {
    const p2pk_param_def *d = p2pk_param_at(i);
    char why[400];
    if (p2pk_param_is_set(d->name) &&
        p2pk_param_valid(d, p2pk_param_str(d->name), why, sizeof why) != 0) {
      p2pk_cli_error("env", "%s", why);
      bad++;
    }
  }
  return bad ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

static void usage(FILE *out) {
  fprintf(out,
          "usage: p2pkit env [--json | --new-secret]\n\nLists every P2PKIT_* setting: its value "
          "now, whether it came from the\nenvironment or the default, and what it does. A secret "
          "setting shows only that\nit is set.\n\n"
          "  --json        the list as JSON\n"
          "  --new-secret  print a fresh job secret (32 hex digits, 128 bits) for\n"
          "                P2PKIT_JOB_SECRET instead\n"
          "  -h, --help    this text\n\n"
          "Exit codes: 0 every setting given is valid; 1 one is a value p2pkit would refuse\n"
          "(not its kind, out of its range, not one of its words), each named on stderr, or\n"
          "the list could not be written; 2 a bad command line (docs/cli.md).\n");
}

int p2pk_cmd_env(int argc, char **argv) {
  static const struct option long_opts[] = {
      {"json", no_argument, NULL, 'j'}, {"new-secret", no_argument, NULL, 's'},
      {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  int json = 0, secret = 0;
  p2pk_opts_begin();
  for (int c; (c = getopt_long(argc, argv, ":h", long_opts, NULL)) != -1;) {
    if (c == 'h') {
      usage(stdout);
      return CLI_EXIT_OK;
    }
    if (c != 'j' && c != 's') return p2pk_cli_opt_error("env", c, argv, usage);
    *(c == 'j' ? &json : &secret) = 1;
  }
  if (optind < argc) {
    p2pk_cli_error("env", "unexpected argument '%s'", argv[optind]);
    return CLI_EXIT_USAGE;
  }
  if (json && secret) {
    p2pk_cli_error("env", "--json and --new-secret: one or the other");
    return CLI_EXIT_USAGE;
  }
  if (secret) {
    char hex[P2PK_SECRET_HEX + 1];
    if (p2pk_secret_new(hex) != P2PKIT_SUCCESS) {
      p2pk_cli_error("env", "%s", p2pkit_last_error());
      return CLI_EXIT_FAIL;
    }
    printf("%s\n", hex);
    return CLI_EXIT_OK;
  }
  /* The listing leaves in one write at the end, where a failure is seen
   * with its cause: glibc drops a failed write's cause when the buffer
   * fills up between two prints. */
  static char whole[1 << 16];
  setvbuf(stdout, whole, _IOFBF, sizeof whole);
  if (json) {
    p2pk_json j;
    p2pk_json_init(&j, stdout);
    p2pk_json_obj(&j, NULL);
    p2pk_json_int(&j, "schema_version", 1);
    p2pk_json_arr(&j, "settings");
    for (size_t i = 0; i < p2pk_param_count(); i++) {
      const p2pk_param_def *d = p2pk_param_at(i);
      p2pk_json_obj(&j, NULL);
      p2pk_json_str(&j, "name", d->name);
      p2pk_json_str(&j, "value", p2pk_param_shown(d->name));
      p2pk_json_str(&j, "default", d->def);
      p2pk_json_str(&j, "source", p2pk_param_is_set(d->name) ? "environment" : "default");
      p2pk_json_str(&j, "kind", kind_name(d->kind));
      char range[96];
      p2pk_param_range_text(d, range, sizeof range);
      if (range[0]) p2pk_json_str(&j, "range", range);
      p2pk_json_str(&j, "help", d->help);
      p2pk_json_obj_end(&j);
    }
    p2pk_json_arr_end(&j);
    p2pk_json_obj_end(&j);
    p2pk_json_finish(&j);
    return verdict();
  }
  printf("%-24s %-20s %-11s %s\n", "setting", "value", "from", "meaning");
  for (size_t i = 0; i < p2pk_param_count(); i++) {
    const p2pk_param_def *d = p2pk_param_at(i);
    const char *v = p2pk_param_shown(d->name);
    char range[96];
    p2pk_param_range_text(d, range, sizeof range);
    printf("%-24s %-20s %-11s %s%s%s%s\n", d->name, v[0] ? v : "(empty)",
           p2pk_param_is_set(d->name) ? "environment" : "default", d->help,
           range[0] ? " [" : "", range, range[0] ? "]" : "");
  }
  return verdict();
}
