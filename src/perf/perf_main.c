/* SPDX-License-Identifier: BSD-3-Clause */
/* `p2pkit perf`: parse, then run in this process or fork one per GPU (--procs). */
#include <stdlib.h>
#include <string.h>

#include "core/param.h"
#include "perf/perf.h"
#include "perf/perf_proc.h"

/* A child of -p: the launcher's environment (as torchrun would set it), then
 * the run. No CUDA call happened in the parent. */
static int child_main(void *arg, perf_shared *sh, int proc, int nprocs) {
  const perf_args *a = arg;
  p2pk_proc_launcher_env(sh, proc, nprocs);
  if (a->hosts > 1)
    p2pk_proc_hosts_env(proc, nprocs, a->hosts, p2pk_param_int("P2PKIT_SHARE_GPUS") != 0);
  return p2pk_perf_run(a, sh, proc, nprocs);
}

/* A free port for each pass's rendezvous, all distinct. */
static int pick_ports(perf_shared *sh, int n) {
  for (int i = 0; i < n; i++) {
    int tries = 0;
    do {
      sh->ports[i] = p2pk_perf_free_port();
      if (sh->ports[i] < 0) return -1;
      int dup = 0;
      for (int j = 0; j < i; j++) dup |= sh->ports[j] == sh->ports[i];
      if (!dup) break;
    } while (++tries < 20);
  }
  return 0;
}

int p2pk_perf_main(int argc, char **argv) {
  perf_args a;
  int r = p2pk_perf_parse(argc, argv, &a, stderr);
  if (r == PERF_PARSE_HELP) return P2PK_PERF_EXIT_OK;
  if (r != PERF_PARSE_OK) return P2PK_PERF_EXIT_USAGE;
  /* Settings the flags stand for, before any communicator, so the ranks
   * (forked with --procs) inherit them. */
  char v[16];
  if (a.max_blocks > 0) {
    snprintf(v, sizeof v, "%d", a.max_blocks);
    setenv("P2PKIT_MAX_BLOCKS", v, 1);
    setenv("NCCL_MAX_CTAS", v, 0);
  }
  if (a.timeout_s > 0) { /* -T: nccl-tests' timeout is p2pkit's bound on every wait */
    snprintf(v, sizeof v, "%d", a.timeout_s);
    setenv("P2PKIT_TIMEOUT", v, 1);
  }
  p2pk_param_reset();
  /* A setting the library would refuse is a bad input, found before any
   * process, file or GPU (P2PKIT_TIMEOUT below is read from it). */
  if (p2pk_param_check() != P2PKIT_SUCCESS) {
    fprintf(stderr, "p2pkit perf: error: %s\n", p2pkit_last_error());
    return P2PK_PERF_EXIT_USAGE;
  }
  if (a.from) return p2pk_perf_explain_file(&a, stdout, stderr);
  perf_shared *sh = p2pk_perf_shared_new();
  if (!sh) {
    fprintf(stderr, "p2pkit perf: error: cannot map the region shared by the ranks\n");
    return P2PK_PERF_EXIT_FAIL;
  }
  int rc;
  if (a.nprocs > 0) {
    if (pick_ports(sh, a.nalgos ? a.nalgos : 1) != 0) {
      fprintf(stderr, "p2pkit perf: error: no free TCP port on 127.0.0.1 for the rendezvous\n");
      p2pk_perf_shared_free(sh);
      return P2PK_PERF_EXIT_FAIL;
    }
    p2pk_perf_random_secret(sh->secret, sizeof sh->secret);
    rc = p2pk_perf_spawn(sh, a.nprocs, (int)p2pk_param_int("P2PKIT_TIMEOUT"), child_main, &a,
                         stderr);
  } else {
    rc = p2pk_perf_run(&a, sh, 0, 1);
  }
  p2pk_perf_shared_free(sh);
  return rc;
}
