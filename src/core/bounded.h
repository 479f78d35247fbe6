/* SPDX-License-Identifier: BSD-3-Clause */
/* Work that may never end (NCCL's abort joining a blocked proxy thread,
 * a wait for a GPU that does not quiesce) on a thread of its own, waited
 * for until a deadline and left to finish on its own past it: what
 * p2pkit_comm_abort needs to return whatever its peers and NCCL do. */
#ifndef P2PK_BOUNDED_H
#define P2PK_BOUNDED_H

#include <stddef.h>
#include <stdint.h>

/* fn(a copy of the `bytes` at `arg`) on a detached thread, waited for
 * until `until_ns` (p2pk_now_ns's clock). 1: it returned by then; 0: it is
 * left running (the copy is its own, freed when it returns); -1: no thread
 * could be started, fn did not run. */
int p2pk_run_until(void (*fn)(void *), const void *arg, size_t bytes, uint64_t until_ns);

#endif
