/* SPDX-License-Identifier: BSD-3-Clause */
/* How fast the copy engines move data between GPUs and host memory of each
 * kind the staged transport could use: the question behind the copy-engine
 * staged all-reduce running ~45 GB/s per direction with one process
 * (cudaHostAlloc'ed staging) and ~37 with a process per GPU (POSIX shared
 * memory, cudaHostRegister'ed). Not a test: run on the device machine.
 *
 *   bench_hostmem [--iters N]
 *
 * For each kind of host memory, every GPU at once copies 64 MiB in 4 MiB
 * chunks device -> its host area (D2H) and the other GPU's host area ->
 * device (H2D), on two streams; then D2H alone and H2D alone. Then the
 * staged all-reduce's own pattern without its reduce ("pipelined"): every
 * 4 MiB chunk a GPU copies to a ring of 4 host slots is copied on by the
 * other GPU as soon as an event says it is there, and a slot is refilled once
 * the other GPU has read it; "+ kernels" adds a one-thread kernel after each
 * copy on both copy streams, as the process-per-GPU path's sync kernels do.
 * Prints GB/s per GPU and direction (median of 5). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "coll/coll.h"
#include "coll_util.h"
#include "xfer/xfer_kernels.h"

#define AREA ((size_t)64 << 20)
#define CHUNK ((size_t)4 << 20)
#define NG 2
#define REPS 5
#define DEPTH 4

enum { HOSTALLOC, SHM_REG, SHM_REG_THP, ANON_REG, KINDS };
static const char *kind_name[KINDS] = {"cudaHostAlloc", "shm+register", "shm+THP+register",
                                       "anon+register"};

static void show_file(const char *path) {
  FILE *f = fopen(path, "r");
  char line[256];
  if (f && fgets(line, sizeof line, f)) printf("%s: %s", path, line);
  else printf("%s: (unreadable)\n", path);
  if (f) fclose(f);
}

static char *host_area(int kind, size_t bytes, char *name) {
  void *p = NULL;
  name[0] = 0;
  if (kind == HOSTALLOC) {
    if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped) != cudaSuccess) return NULL;
    memset(p, 1, bytes);
    return p;
  }
  if (kind == ANON_REG) {
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
  } else {
    if (p2pk_shm_create(bytes, name, &p) != P2PKIT_SUCCESS) return NULL;
    if (kind == SHM_REG_THP && madvise(p, bytes, MADV_HUGEPAGE) != 0) perror("  madvise(MADV_HUGEPAGE)");
  }
  memset(p, 1, bytes);
  if (cudaHostRegister(p, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped) != cudaSuccess) {
    printf("  cudaHostRegister failed: %s\n", cudaGetErrorString(cudaGetLastError()));
    munmap(p, bytes);
    if (name[0]) p2pk_shm_unlink(name);
    return NULL;
  }
  return p;
}

static void free_area(int kind, char *p, size_t bytes, const char *name) {
  if (kind == HOSTALLOC) {
    cudaFreeHost(p);
    return;
  }
  cudaHostUnregister(p);
  munmap(p, bytes);
  if (name[0]) p2pk_shm_unlink(name);
}

/* GB/s per GPU and direction over `iters` rounds; d2h / h2d select the
 * directions that run. */
static double run(char *host, char *dsrc[NG], char *ddst[NG], cudaStream_t s[NG][2], int iters,
                  int d2h, int h2d) {
  double t0 = cu_now();
  for (int it = 0; it < iters; it++)
    for (size_t off = 0; off < AREA; off += CHUNK)
      for (int g = 0; g < NG; g++) {
        cudaSetDevice(g);
        if (d2h)
          cudaMemcpyAsync(host + (size_t)g * AREA + off, dsrc[g] + off, CHUNK,
                          cudaMemcpyDeviceToHost, s[g][0]);
        if (h2d)
          cudaMemcpyAsync(ddst[g] + off, host + (size_t)((g + 1) % NG) * AREA + off, CHUNK,
                          cudaMemcpyHostToDevice, s[g][1]);
      }
  for (int g = 0; g < NG; g++) {
    cudaSetDevice(g);
    cudaDeviceSynchronize();
  }
  double t = cu_now() - t0;
  return (double)iters * (double)AREA / t / 1e9;
}

/* The pipelined pattern (see the head); turn: a tiny kernel after each copy. */
static double pipe_run(char *host, char *dsrc[NG], char *ddst[NG], cudaStream_t s[NG][2],
                       cudaEvent_t ev[NG][2][DEPTH], char *tiny[NG], int iters, int turn) {
  double t0 = cu_now();
  unsigned q = 0;
  for (int it = 0; it < iters; it++)
    for (size_t off = 0; off < AREA; off += CHUNK, q++) {
      int slot = (int)(q % DEPTH);
      for (int g = 0; g < NG; g++) {
        int peer = (g + 1) % NG;
        cudaSetDevice(g);
        if (q >= DEPTH) cudaStreamWaitEvent(s[g][0], ev[peer][1][slot], 0);
        cudaMemcpyAsync(host + (size_t)g * AREA + (size_t)slot * CHUNK, dsrc[g] + off, CHUNK,
                        cudaMemcpyDeviceToHost, s[g][0]);
        if (turn) p2pk_launch_fill(tiny[g], 16, 1, 0, s[g][0]);
        cudaEventRecord(ev[g][0][slot], s[g][0]);
      }
      for (int g = 0; g < NG; g++) {
        int peer = (g + 1) % NG;
        cudaSetDevice(g);
        cudaStreamWaitEvent(s[g][1], ev[peer][0][slot], 0);
        if (turn) p2pk_launch_fill(tiny[g], 16, 1, 0, s[g][1]);
        cudaMemcpyAsync(ddst[g] + off, host + (size_t)peer * AREA + (size_t)slot * CHUNK, CHUNK,
                        cudaMemcpyHostToDevice, s[g][1]);
        if (turn) p2pk_launch_fill(tiny[g], 16, 1, 0, s[g][1]);
        cudaEventRecord(ev[g][1][slot], s[g][1]);
      }
    }
  for (int g = 0; g < NG; g++) {
    cudaSetDevice(g);
    cudaDeviceSynchronize();
  }
  return (double)iters * (double)AREA / (cu_now() - t0) / 1e9;
}

int main(int argc, char **argv) {
  int iters = argc > 2 && strcmp(argv[1], "--iters") == 0 ? atoi(argv[2]) : 8;
  int ng = 0;
  if (cudaGetDeviceCount(&ng) != cudaSuccess || ng < NG) {
    printf("SKIP: bench_hostmem needs %d GPUs\n", NG);
    return 77;
  }
  show_file("/sys/kernel/mm/transparent_hugepage/enabled");
  show_file("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  char *dsrc[NG], *ddst[NG], *tiny[NG];
  cudaStream_t s[NG][2];
  cudaEvent_t ev[NG][2][DEPTH];
  for (int g = 0; g < NG; g++) {
    cudaSetDevice(g);
    if (cudaMalloc((void **)&dsrc[g], AREA) != cudaSuccess || cudaMalloc((void **)&ddst[g], AREA) != cudaSuccess) {
      printf("cudaMalloc failed\n");
      return 1;
    }
    cudaMemset(dsrc[g], 7, AREA);
    cudaStreamCreateWithFlags(&s[g][0], cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&s[g][1], cudaStreamNonBlocking);
    if (cudaMalloc((void **)&tiny[g], 4096) != cudaSuccess) return 1;
    for (int d = 0; d < 2; d++)
      for (int k = 0; k < DEPTH; k++) cudaEventCreateWithFlags(&ev[g][d][k], cudaEventDisableTiming);
  }
  printf("%-18s %12s %12s %12s %12s %12s   (GB/s per GPU and direction, median of %d x %d rounds "
         "of 64 MiB in 4 MiB copies)\n", "host memory", "duplex each", "D2H alone", "H2D alone",
         "pipelined", "+ kernels", REPS, iters);
  for (int k = 0; k < KINDS; k++) {
    char name[P2PK_SHM_NAME];
    char *host = host_area(k, NG * AREA, name);
    if (!host) {
      printf("%-18s unavailable\n", kind_name[k]);
      continue;
    }
    double r[5][REPS];
    run(host, dsrc, ddst, s, 1, 1, 1); /* warm */
    pipe_run(host, dsrc, ddst, s, ev, tiny, 1, 1);
    for (int i = 0; i < REPS; i++) {
      r[0][i] = run(host, dsrc, ddst, s, iters, 1, 1);
      r[1][i] = run(host, dsrc, ddst, s, iters, 1, 0);
      r[2][i] = run(host, dsrc, ddst, s, iters, 0, 1);
      r[3][i] = pipe_run(host, dsrc, ddst, s, ev, tiny, iters, 0);
      r[4][i] = pipe_run(host, dsrc, ddst, s, ev, tiny, iters, 1);
    }
    for (int j = 0; j < 5; j++) qsort(r[j], REPS, sizeof r[j][0], cu_cmp_double);
    printf("%-18s %12.1f %12.1f %12.1f %12.1f %12.1f\n", kind_name[k], r[0][REPS / 2],
           r[1][REPS / 2], r[2][REPS / 2], r[3][REPS / 2], r[4][REPS / 2]);
    free_area(k, host, NG * AREA, name);
  }
  return 0;
}
