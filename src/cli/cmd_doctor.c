/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/opts.h"
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
          "Exit code: 0 all OK, 1 a WARN, 2 a FAIL (no driver is one), or the doctor could not\n"
          "run: a bad command line, a --from or --nccl-log file missing or unreadable; 1 too\n"
          "when an output (--dump-nccl, --save-nccl-log, standard output) could not be\n"
          "written, as in every command (docs/cli.md).\n\n"
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

enum { OPT_JSON = 256, OPT_NO_PROBE, OPT_NO_NCCL, OPT_FROM, OPT_NCCL_LOG, OPT_SAVE_LOG, OPT_DUMP,
       OPT_PROBE_SIZE };
static const struct option long_opts[] = {
    {"json", no_argument, NULL, OPT_JSON},
    {"no-probe", no_argument, NULL, OPT_NO_PROBE},
    {"no-nccl", no_argument, NULL, OPT_NO_NCCL},
    {"from", required_argument, NULL, OPT_FROM},
    {"nccl-log", required_argument, NULL, OPT_NCCL_LOG},
    {"save-nccl-log", required_argument, NULL, OPT_SAVE_LOG},
    {"dump-nccl", required_argument, NULL, OPT_DUMP},
    {"probe-size", required_argument, NULL, OPT_PROBE_SIZE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Where a file option's value goes, or NULL. */
static const char **file_of(p2pk_doc_opts *o, int c) {
  return c == OPT_FROM ? &o->from : c == OPT_NCCL_LOG ? &o->nccl_log
         : c == OPT_SAVE_LOG ? &o->save_nccl_log : c == OPT_DUMP ? &o->dump_nccl : NULL;
}

static int probe_size(const char *v, p2pk_doc_opts *o) {
  if (p2pk_cli_parse_size("doctor", "--probe-size", v, &o->probe_bytes) != 0) return -1;
  if (o->probe_bytes >= 4096) return 0;
  p2pk_cli_error("doctor", "--probe-size must be at least 4K");
  return -1;
}

/* -1: an error (printed), 1: --help, 0: go on. */
static int parse(int argc, char **argv, p2pk_doc_opts *o, int *json) {
  memset(o, 0, sizeof *o);
  o->probe = o->nccl = 1;
  p2pk_opts_begin();
  for (int c; (c = getopt_long(argc, argv, ":h", long_opts, NULL)) != -1;) {
    const char **file = file_of(o, c);
    if (c == 'h') return 1;
    if (c == ':' || c == '?') {
      p2pk_cli_opt_error("doctor", c, argv, usage);
      return -1;
    }
    if (file && p2pk_cli_file_arg("doctor", long_opts, c, optarg) != 0) return -1;
    if (file) *file = optarg;
    if (c == OPT_JSON) *json = 1;
    if (c == OPT_NO_PROBE) o->probe = 0;
    if (c == OPT_NO_NCCL) o->nccl = 0;
    if (c == OPT_PROBE_SIZE && probe_size(optarg, o) != 0) return -1;
  }
  if (optind < argc) {
    p2pk_cli_error("doctor", "unexpected argument '%s'", argv[optind]);
    return -1;
  }
  return 0;
}

int p2pk_cmd_doctor(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--nccl-probe") == 0)
    return p2pk_doc_nccl_child(argc - 2, argv + 2); /* a rank of the NCCL run (internal) */
  p2pk_doc_opts o;
  int json = 0;
  const int r = parse(argc, argv, &o, &json);
  if (r > 0) usage(stdout);
  if (r != 0) return r > 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
  p2pk_findings f;
  p2pk_findings_init(&f);
  char title[512] = "";
  int output_failed = 0;
  p2pkit_status_t st = p2pk_doctor_run(&o, &f, title, sizeof title, &output_failed);
  if (st != P2PKIT_SUCCESS) {
    p2pk_cli_error("doctor", "%s", p2pkit_last_error());
    p2pk_findings_free(&f);
    /* A file that could not be written: 1, as in every command; else the
     * doctor could not vouch for anything: 2, as a FAIL. */
    return output_failed ? CLI_EXIT_FAIL : CLI_EXIT_USAGE;
  }
  if (json) p2pk_doctor_print_json(&f, title, stdout);
  else p2pk_doctor_print_text(&f, title, stdout);
  int rc = p2pk_doctor_exit_code(&f);
  p2pk_findings_free(&f);
  return rc;
}
