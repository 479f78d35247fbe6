/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/opts.h"
#include "topo/topo.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: p2pkit topo [options]\n\n"
          "How each GPU pair is joined (nvidia-smi topo -m), whether P2P works\n"
          "(nvidia-smi topo -p2p r/w/a/n), and one sentence per pair on how data travels.\n\n"
          "  -m, --matrix        only the link matrix\n"
          "  -p, --p2p           only the P2P status matrices\n"
          "      --paths         only the per-pair sentences\n"
          "      --json          the whole topology as JSON (schema: docs/topo-json.md)\n"
          "      --from FILE     analyse a recorded machine: a p2pkit file (--save), an hwloc\n"
          "                      XML export (lstopo --of xml) or an NCCL topology dump\n"
          "                      (NCCL_TOPO_DUMP_FILE); works without a GPU\n"
          "      --save FILE     record this machine to FILE (p2pkit format)\n"
          "      --dump-nccl FILE  write NCCL's topology XML, for NCCL_TOPO_FILE\n"
          "      --save-hwloc FILE write this machine's hwloc XML (as lstopo --of xml; not\n"
          "                      with --from)\n"
          "  -h, --help          this text\n\n"
          "Exit codes: 0 done; 1 a file could not be written (--save, --dump-nccl,\n"
          "--save-hwloc, standard output); 2 a bad command line, a --from file missing or\n"
          "unreadable as a topology, or no GPU here (docs/cli.md).\n");
}

typedef struct {
  const char *from, *save, *dump, *save_hwloc;
  int flags;
} topo_opts;

enum { OPT_PATHS = 256, OPT_JSON, OPT_FROM, OPT_SAVE, OPT_DUMP, OPT_SAVE_HWLOC };
static const struct option long_opts[] = {
    {"matrix", no_argument, NULL, 'm'},         {"p2p", no_argument, NULL, 'p'},
    {"paths", no_argument, NULL, OPT_PATHS},    {"json", no_argument, NULL, OPT_JSON},
    {"from", required_argument, NULL, OPT_FROM}, {"save", required_argument, NULL, OPT_SAVE},
    {"dump-nccl", required_argument, NULL, OPT_DUMP},
    {"save-hwloc", required_argument, NULL, OPT_SAVE_HWLOC},
    {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
};

/* Where a file option's value goes, or NULL. */
static const char **file_of(topo_opts *t, int c) {
  return c == OPT_FROM ? &t->from : c == OPT_SAVE ? &t->save : c == OPT_DUMP ? &t->dump
         : c == OPT_SAVE_HWLOC ? &t->save_hwloc : NULL;
}

/* -1: an error (printed), 1: --help, 0: go on. */
static int parse(int argc, char **argv, topo_opts *t) {
  memset(t, 0, sizeof *t);
  p2pk_opts_begin();
  for (int c; (c = getopt_long(argc, argv, ":mph", long_opts, NULL)) != -1;) {
    const char **file = file_of(t, c);
    if (c == 'h') return 1;
    if (c == ':' || c == '?') {
      p2pk_cli_opt_error("topo", c, argv, usage);
      return -1;
    }
    if (file && p2pk_cli_file_arg("topo", long_opts, c, optarg) != 0) return -1;
    if (file) *file = optarg;
    t->flags |= c == 'm' ? P2PKIT_PRINT_MATRIX : c == 'p' ? P2PKIT_PRINT_P2P
                : c == OPT_PATHS ? P2PKIT_PRINT_SENTENCES : c == OPT_JSON ? P2PKIT_PRINT_JSON : 0;
  }
  if (optind < argc) {
    p2pk_cli_error("topo", "unexpected argument '%s'", argv[optind]);
    return -1;
  }
  /* This machine's hwloc XML says nothing about a recorded one. */
  if (t->save_hwloc && t->from) {
    p2pk_cli_error("topo", "--save-hwloc records this machine's hwloc topology, not --from %s's "
              "(run it on that machine, or lstopo --of xml there)", t->from);
    return -1;
  }
  if (!(t->flags & ~P2PKIT_PRINT_JSON)) t->flags |= P2PKIT_PRINT_ALL;
  return 0;
}

int p2pk_cmd_topo(int argc, char **argv) {
  topo_opts t;
  int r = parse(argc, argv, &t);
  if (r > 0) usage(stdout);
  if (r != 0) return r > 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
  const char *from = t.from, *save = t.save, *dump = t.dump, *save_hwloc = t.save_hwloc;
  const int flags = t.flags;
  if (save_hwloc && p2pk_topo_export_hwloc_xml(save_hwloc) != P2PKIT_SUCCESS) {
    p2pk_cli_error("topo", "%s", p2pkit_last_error());
    return CLI_EXIT_FAIL;
  }
  p2pkit_topo_t topo;
  int rc = p2pk_cli_get_topo("topo", from, &topo);
  if (rc != CLI_EXIT_OK) return rc;
  if (save && p2pkit_topo_save(topo, save) != P2PKIT_SUCCESS) {
    p2pk_cli_error("topo", "%s", p2pkit_last_error());
    p2pkit_topo_destroy(topo);
    return CLI_EXIT_FAIL;
  }
  if (dump && p2pkit_topo_write_nccl(topo, dump) != P2PKIT_SUCCESS) {
    p2pk_cli_error("topo", "%s", p2pkit_last_error());
    p2pkit_topo_destroy(topo);
    return CLI_EXIT_FAIL;
  }
  p2pkit_status_t st = p2pkit_topo_print(topo, stdout, flags);
  p2pkit_topo_destroy(topo);
  if (st != P2PKIT_SUCCESS) {
    p2pk_cli_error("topo", "%s", p2pkit_last_error());
    return CLI_EXIT_FAIL;
  }
  return CLI_EXIT_OK;
}
