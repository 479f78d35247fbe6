/* SPDX-License-Identifier: BSD-3-Clause */
/* The `p2pkit` program: the command lives in the library (p2pkit_main), so
 * the program and libp2pkit.so are one copy of the code. */
#include <signal.h>

#include "p2pkit.h"

int main(int argc, char **argv) {
  /* A closed pipe is a write that failed, as a full disk is: exit 1 with one
   * line (docs/cli.md), not a death by SIGPIPE. Children exec'd by the doctor
   * are this program again; perf's ranks are forks: each checks its writes. */
  signal(SIGPIPE, SIG_IGN);
  return p2pkit_main(argc, argv);
}
