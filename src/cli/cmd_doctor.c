#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "doctor/doctor.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: p2pkit doctor [options]\n\n"
          "Is this machine moving data between GPUs as fast as it can, and if not, why?\n"
          "Checks, in order: driver and GPUs; VM and IOMMU; per GPU the PCIe link and NVLinks;\n"
          "per pair P2P and, when it is off, the causes (ACS, IOMMU, sockets, VM, GPU model);\n"
          "per GPU its link to host memory, timed each way and both ways at once (what copies\n"
          "staged through host memory get); a short bandwidth probe per pair; what NCCL does\n"
          "(libnccl.so.2, one rank per GPU).\n"
          "Each finding is OK, WARN, FAIL or SKIP with a reason and what to do.\n"
          "Exit code: 0 all OK, 1 a WARN, 2 a FAIL.\n\n"
          "  --json              the findings as JSON\n"
          "  --from FILE         analyse a recorded machine (p2pkit topo --save, hwloc XML or an\n"
          "                      NCCL topology dump); with P2PKIT_SYSFS_ROOT=DIR its /sys and /proc\n"
          "  --nccl-log FILE     read what NCCL did from this NCCL_DEBUG=INFO log instead of\n"
          "                      running NCCL\n"
          "  --save-nccl-log FILE  keep the log of the NCCL run\n"
          "  --dump-nccl FILE    write this machine's topology for NCCL_TOPO_FILE\n"
          "  --no-probe          skip the bandwidth probes (host links and pairs)\n"
          "  --no-nccl           skip the NCCL run\n"
          "  --probe-size SIZE   bytes per probe copy (default 64M)\n"
          "  -h, --help          this text\n");
}

int cmd_doctor(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--nccl-probe") == 0)
    return p2pk_doc_nccl_child(argc - 2, argv + 2); /* a rank of the NCCL run (internal) */
  p2pk_doc_opts o;
  memset(&o, 0, sizeof o);
  o.probe = o.nccl = 1;
  int json = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int needs = strcmp(a, "--from") == 0 || strcmp(a, "--nccl-log") == 0 ||
                strcmp(a, "--save-nccl-log") == 0 || strcmp(a, "--dump-nccl") == 0 ||
                strcmp(a, "--probe-size") == 0;
    if (needs && i + 1 >= argc) {
      cli_error("doctor", "%s needs a value", a);
      return CLI_EXIT_USAGE;
    }
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return CLI_EXIT_OK;
    } else if (strcmp(a, "--json") == 0) json = 1;
    else if (strcmp(a, "--no-probe") == 0) o.probe = 0;
    else if (strcmp(a, "--no-nccl") == 0) o.nccl = 0;
    else if (strcmp(a, "--from") == 0) o.from = argv[++i];
    else if (strcmp(a, "--nccl-log") == 0) o.nccl_log = argv[++i];
    else if (strcmp(a, "--save-nccl-log") == 0) o.save_nccl_log = argv[++i];
    else if (strcmp(a, "--dump-nccl") == 0) o.dump_nccl = argv[++i];
    else if (strcmp(a, "--probe-size") == 0) {
      if (cli_parse_size("doctor", "--probe-size", argv[++i], &o.probe_bytes) != 0)
        return CLI_EXIT_USAGE;
      if (o.probe_bytes < 4096) {
        cli_error("doctor", "--probe-size must be at least 4K");
        return CLI_EXIT_USAGE;
      }
    } else {
      cli_error("doctor", "unknown option '%s'", a);
      usage(stderr);
      return CLI_EXIT_USAGE;
    }
  }
  p2pk_findings f;
  p2pk_findings_init(&f);
  char title[512] = "";
  p2pkit_status_t st = p2pk_doctor_run(&o, &f, title, sizeof title);
  if (st != P2PKIT_SUCCESS) {
    cli_error("doctor", "%s", p2pkit_last_error());
    p2pk_findings_free(&f);
    return 2; /* the doctor could not vouch for anything: as a FAIL */
  }
  if (json) p2pk_doctor_print_json(&f, title, stdout);
  else p2pk_doctor_print_text(&f, title, stdout);
  int rc = p2pk_doctor_exit_code(&f);
  p2pk_findings_free(&f);
  return rc;
}
