/* SPDX-License-Identifier: BSD-3-Clause */
/* Sharing memory between the processes of one communicator: CUDA IPC for
 * device memory, POSIX shared memory (pinned and mapped for the GPU) for the
 * host staging region. Segments are created 0600 with O_EXCL under a random
 * name and unlinked as soon as every rank has mapped them. */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "coll/coll.h"
#include "core/check.h"

p2pkit_status_t p2pk_shm_create(size_t bytes, char name[P2PK_SHM_NAME], void **p_out) {
  int fd = -1;
  for (int attempt = 0; attempt < 32 && fd < 0; attempt++) {
    unsigned rnd = 0;
    int ur = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (ur >= 0) {
      if (read(ur, &rnd, sizeof rnd) != (ssize_t)sizeof rnd) rnd = 0;
      close(ur);
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    rnd ^= (unsigned)ts.tv_nsec ^ ((unsigned)attempt << 24);
    snprintf(name, P2PK_SHM_NAME, "/p2pkit-%d-%08x", (int)getpid(), rnd);
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST)
      return p2pk_fail(P2PKIT_ERR_SYSTEM, "shm_open(%s): %s", name, strerror(errno));
  }
  if (fd < 0) return p2pk_fail(P2PKIT_ERR_SYSTEM, "shm_open: no free name after 32 tries");
  p2pkit_status_t st = P2PKIT_SUCCESS;
  if (fchmod(fd, 0600) != 0 || ftruncate(fd, (off_t)bytes) != 0) {
    st = p2pk_fail(P2PKIT_ERR_SYSTEM, "sizing shared memory %s to %zu bytes: %s", name, bytes,
                   strerror(errno));
  } else {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
      st = p2pk_fail(P2PKIT_ERR_SYSTEM, "mapping shared memory %s (%zu bytes): %s", name, bytes,
                     strerror(errno));
    else *p_out = p;
  }
  close(fd);
  if (st != P2PKIT_SUCCESS) shm_unlink(name);
  return st;
}

p2pkit_status_t p2pk_shm_attach(const char *name, size_t bytes, void **p_out) {
  int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
  if (fd < 0)
    return p2pk_fail(P2PKIT_ERR_SYSTEM, "opening shared memory %s: %s", name, strerror(errno));
  struct stat sb;
  p2pkit_status_t st = P2PKIT_SUCCESS;
  if (fstat(fd, &sb) != 0) {
    st = p2pk_fail(P2PKIT_ERR_SYSTEM, "fstat(%s): %s", name, strerror(errno));
  } else if (sb.st_uid != getuid() || (sb.st_mode & 077) != 0) {
    st = p2pk_fail(P2PKIT_ERR_SYSTEM, "shared memory %s belongs to uid %u with mode %o; expected "
                   "uid %u, mode 600", name, (unsigned)sb.st_uid, (unsigned)(sb.st_mode & 0777),
                   (unsigned)getuid());
  } else if ((size_t)sb.st_size < bytes) {
    st = p2pk_fail(P2PKIT_ERR_SYSTEM, "shared memory %s has %lld bytes, expected %zu", name,
                   (long long)sb.st_size, bytes);
  } else {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
      st = p2pk_fail(P2PKIT_ERR_SYSTEM, "mapping shared memory %s: %s", name, strerror(errno));
    else *p_out = p;
  }
  close(fd);
  return st;
}

void p2pk_shm_unlink(const char *name) {
  if (name && name[0]) shm_unlink(name);
}

/* Driver entry points for allocations, loaded once (no link-time driver
 * dependency): cuMemGetAddressRange and cuPointerGetAttribute. */
typedef int (*get_range_fn)(unsigned long long *base, size_t *size, unsigned long long ptr);
typedef int (*ptr_attr_fn)(void *data, int attribute, unsigned long long ptr);
static get_range_fn get_range;
static ptr_attr_fn ptr_attr;
static pthread_once_t entry_once = PTHREAD_ONCE_INIT;

static void *entry(const char *name) {
  void *f = NULL;
  enum cudaDriverEntryPointQueryResult q;
  if (cudaGetDriverEntryPointByVersion(name, &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      !f || q != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return NULL;
  }
  return f;
}

static void entry_load(void) {
  get_range = (get_range_fn)entry("cuMemGetAddressRange");
  ptr_attr = (ptr_attr_fn)entry("cuPointerGetAttribute");
}

int p2pk_alloc_lookup(const void *ptr, char **base_p, size_t *size_p) {
  pthread_once(&entry_once, entry_load);
  if (!get_range) return -1;
  unsigned long long base = 0;
  size_t size = 0;
  const int r = get_range(&base, &size, (unsigned long long)(uintptr_t)ptr);
  if (r != 0) return r;
  *base_p = (char *)(uintptr_t)base;
  *size_p = size;
  return 0;
}

p2pkit_status_t p2pk_alloc_range(const void *ptr, char **base_p, size_t *size_p) {
  const int r = p2pk_alloc_lookup(ptr, base_p, size_p);
  if (r < 0) return p2pk_fail(P2PKIT_ERR_CUDA, "cuMemGetAddressRange is not available from the driver");
  if (r > 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%p is not inside a device allocation (CUresult %d)",
                     ptr, r);
  return P2PKIT_SUCCESS;
}

#define P2PK_CU_POINTER_ATTRIBUTE_BUFFER_ID 7

int p2pk_alloc_id(const void *ptr, unsigned long long *id_p) {
  pthread_once(&entry_once, entry_load);
  *id_p = 0;
  if (!ptr_attr) return -1;
  unsigned long long id = 0;
  const int r = ptr_attr(&id, P2PK_CU_POINTER_ATTRIBUTE_BUFFER_ID, (unsigned long long)(uintptr_t)ptr);
  if (r == 0) *id_p = id;
  return r;
}
