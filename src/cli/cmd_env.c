#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/json.h"
#include "core/param.h"

static const char *kind_name(int kind) {
  return kind == P2PK_PARAM_INT ? "int" : kind == P2PK_PARAM_SIZE ? "size" : "string";
}

/* After the listing: a value p2pkit would refuse, named on stderr. */
static int verdict(void) {
  char list[512];
  int n = p2pk_param_unknown(list, sizeof list);
  if (n)
    fprintf(stderr, "p2pkit env: warning: not %s: %s\n",
            n == 1 ? "a p2pkit setting, so ignored" : "p2pkit settings, so ignored", list);
  if (p2pk_param_check() == P2PKIT_SUCCESS) return CLI_EXIT_OK;
  cli_error("env", "%s", p2pkit_last_error());
  return CLI_EXIT_FAIL;
}

int cmd_env(int argc, char **argv) {
  int json = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) json = 1;
    else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf("usage: p2pkit env [--json]\n\nLists every P2PKIT_* setting: its value now, whether "
             "it came from the environment or the default, and what it does. Exits 1, naming it, "
             "when a value set is one p2pkit would refuse (not its kind, out of its range, not "
             "one of its words). A secret setting shows only that it is set.\n");
      return CLI_EXIT_OK;
    } else {
      cli_error("env", "unknown option '%s'", argv[i]);
      fprintf(stderr, "usage: p2pkit env [--json]\n");
      return CLI_EXIT_USAGE;
    }
  }
  if (json) {
    p2pk_json j;
    pj_init(&j, stdout);
    pj_obj(&j, NULL);
    pj_int(&j, "schema_version", 1);
    pj_arr(&j, "settings");
    for (size_t i = 0; i < p2pk_param_count(); i++) {
      const p2pk_param_def *d = p2pk_param_at(i);
      pj_obj(&j, NULL);
      pj_str(&j, "name", d->name);
      pj_str(&j, "value", p2pk_param_shown(d->name));
      pj_str(&j, "default", d->def);
      pj_str(&j, "source", p2pk_param_is_set(d->name) ? "environment" : "default");
      pj_str(&j, "kind", kind_name(d->kind));
      pj_str(&j, "help", d->help);
      pj_obj_end(&j);
    }
    pj_arr_end(&j);
    pj_obj_end(&j);
    pj_finish(&j);
    return verdict();
  }
  printf("%-24s %-20s %-11s %s\n", "setting", "value", "from", "meaning");
  for (size_t i = 0; i < p2pk_param_count(); i++) {
    const p2pk_param_def *d = p2pk_param_at(i);
    const char *v = p2pk_param_shown(d->name);
    printf("%-24s %-20s %-11s %s\n", d->name, v[0] ? v : "(empty)",
           p2pk_param_is_set(d->name) ? "environment" : "default", d->help);
  }
  return verdict();
}
