/* SPDX-License-Identifier: BSD-3-Clause */
/* Memory shared between the processes of a communicator (see ipc.c). */
#ifndef P2PK_IPC_H
#define P2PK_IPC_H

#include <stddef.h>

#include "p2pkit.h"

#define P2PK_SHM_NAME 64

/* Create a fresh POSIX shared-memory segment of `bytes` (mode 0600, O_EXCL,
 * random name written to `name`) and map it. The caller unlinks it once every
 * rank has it mapped. */
p2pkit_status_t p2pk_shm_create(size_t bytes, char name[P2PK_SHM_NAME], void **p_out);
/* Map a segment another rank created; refuses one of another user or mode. */
p2pkit_status_t p2pk_shm_attach(const char *name, size_t bytes, void **p_out);
void p2pk_shm_unlink(const char *name);
/* Base and size of the device allocation that holds `ptr`. */
p2pkit_status_t p2pk_alloc_range(const void *ptr, char **base_p, size_t *size_p);
/* The same, recording no error: 0, -1 when the driver lacks the call, or
 * the driver's CUresult. */
int p2pk_alloc_lookup(const void *ptr, char **base_p, size_t *size_p);
/* cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_BUFFER_ID): a process-wide id
 * of the allocation holding `ptr`, never reused, so a buffer freed (and
 * maybe another allocated at its address) is noticed. 0, -1 when the
 * driver lacks the call, or the driver's CUresult; *id_p 0 on failure. */
int p2pk_alloc_id(const void *ptr, unsigned long long *id_p);

#endif
