#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
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
          "      --save-hwloc FILE write this machine's hwloc XML (as lstopo --of xml)\n"
          "  -h, --help          this text\n");
}

int cmd_topo(int argc, char **argv) {
  const char *from = NULL, *save = NULL, *dump = NULL, *save_hwloc = NULL;
  int flags = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int needs = strcmp(a, "--from") == 0 || strcmp(a, "--save") == 0 || strcmp(a, "--dump-nccl") == 0 ||
                strcmp(a, "--save-hwloc") == 0;
    if (needs && i + 1 >= argc) {
      cli_error("topo", "%s needs a file name", a);
      return CLI_EXIT_USAGE;
    }
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return CLI_EXIT_OK;
    } else if (strcmp(a, "--json") == 0) flags |= P2PKIT_PRINT_JSON;
    else if (strcmp(a, "-m") == 0 || strcmp(a, "--matrix") == 0) flags |= P2PKIT_PRINT_MATRIX;
    else if (strcmp(a, "-p") == 0 || strcmp(a, "--p2p") == 0) flags |= P2PKIT_PRINT_P2P;
    else if (strcmp(a, "--paths") == 0) flags |= P2PKIT_PRINT_SENTENCES;
    else if (strcmp(a, "--from") == 0) from = argv[++i];
    else if (strcmp(a, "--save") == 0) save = argv[++i];
    else if (strcmp(a, "--dump-nccl") == 0) dump = argv[++i];
    else if (strcmp(a, "--save-hwloc") == 0) save_hwloc = argv[++i];
    else {
      cli_error("topo", "unknown option '%s'", a);
      usage(stderr);
      return CLI_EXIT_USAGE;
    }
  }
  if (!(flags & ~P2PKIT_PRINT_JSON)) flags |= P2PKIT_PRINT_ALL;
  if (save_hwloc && p2pk_topo_export_hwloc_xml(save_hwloc) != P2PKIT_SUCCESS) {
    cli_error("topo", "%s", p2pkit_last_error());
    return CLI_EXIT_FAIL;
  }
  p2pkit_topo_t topo;
  int rc = cli_get_topo("topo", from, &topo);
  if (rc != CLI_EXIT_OK) return rc;
  if (save && p2pkit_topo_save(topo, save) != P2PKIT_SUCCESS) {
    cli_error("topo", "%s", p2pkit_last_error());
    p2pkit_topo_destroy(topo);
    return CLI_EXIT_FAIL;
  }
  if (dump && p2pkit_topo_write_nccl(topo, dump) != P2PKIT_SUCCESS) {
    cli_error("topo", "%s", p2pkit_last_error());
    p2pkit_topo_destroy(topo);
    return CLI_EXIT_FAIL;
  }
  p2pkit_status_t st = p2pkit_topo_print(topo, stdout, flags);
  p2pkit_topo_destroy(topo);
  if (st != P2PKIT_SUCCESS) {
    cli_error("topo", "%s", p2pkit_last_error());
    return CLI_EXIT_FAIL;
  }
  return CLI_EXIT_OK;
}
