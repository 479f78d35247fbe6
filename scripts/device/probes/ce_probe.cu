// Copy-engine probe (a measurement tool for the device machine, not part of
// the library): where a process-per-GPU send/recv's copy-engine pipeline
// loses against one cudaMemcpyPeerAsync of the whole message. One-way GPU 0
// -> GPU 1, peer access on, times from CUDA events over back-to-back calls
// after a warm-up; every case checks the bytes that arrived.
//
//   ce_probe local BYTES ITERS   in-process destination (cudaMalloc on GPU 1)
//   ce_probe ipc BYTES ITERS     destination in a child process, mapped here
//                                through CUDA IPC (as the landing slots are)
//
// Cases (each prints one line: name, us per call, GB/s):
//   single        one copy of BYTES per call
//   chunksK       BYTES as copies of K MiB on one stream
//   hopK          as chunksK on a side stream that waits for the caller's
//                 stream at each call and that the caller's stream waits for
//                 at its end (the library's pattern)
//   twoK          chunks of K MiB alternating between two streams
//   pull          one copy per call issued on GPU 1 (local only)
//   ce+smF        the copy engine moves all but F% while an SM kernel stores
//                 the rest on another stream (can the link carry more?)
// Build: nvcc -O2 -arch=sm_90 -o ce_probe ce_probe.cu
#include <cuda_runtime.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe.h"

__global__ void fill(uint32_t *p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = (uint32_t)(i * 2654435761u) ^ seed;
}

__global__ void count_bad(const uint32_t *p, size_t n, uint32_t seed, unsigned long long *bad) {
  unsigned long long b = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    b += p[i] != ((uint32_t)(i * 2654435761u) ^ seed);
  if (b) atomicAdd(bad, b);
}

__global__ void sm_push(int4 *__restrict__ d, const int4 *__restrict__ s, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    d[i] = s[i];
}

static size_t parse_size(const char *s) {
  char *e;
  double v = strtod(s, &e);
  if (*e == 'K' || *e == 'k') v *= 1 << 10;
  else if (*e == 'M' || *e == 'm') v *= 1 << 20;
  else if (*e == 'G' || *e == 'g') v *= 1 << 30;
  return (size_t)v;
}

typedef struct {
  char *src, *dst; /* src on GPU 0, dst on GPU 1 (or mapped) */
  size_t bytes;
  int iters;
  cudaStream_t s, side, s2, s1; /* s1: on GPU 1 (local only) */
  cudaEvent_t t0, t1, a, b, b1; /* b1: on GPU 1, for s1 */
  unsigned long long *bad; /* on GPU 1 when local, else NULL */
  int sms;
} ctx;

enum { SINGLE, CHUNKS, HOP, TWO, CESM, PULL };

static void one_call(ctx *c, int kind, size_t K, double frac) {
  size_t off = 0;
  switch (kind) {
  case SINGLE:
    CK(cudaMemcpyPeerAsync(c->dst, 1, c->src, 0, c->bytes, c->s));
    break;
  case PULL: /* the receiving GPU's copy engine reads */
    CK(cudaEventRecord(c->a, c->s));
    CK(cudaStreamWaitEvent(c->s1, c->a, 0));
    CK(cudaMemcpyPeerAsync(c->dst, 1, c->src, 0, c->bytes, c->s1));
    CK(cudaEventRecord(c->b1, c->s1));
    CK(cudaStreamWaitEvent(c->s, c->b1, 0));
    break;
  case CHUNKS:
    for (off = 0; off < c->bytes; off += K)
      CK(cudaMemcpyAsync(c->dst + off, c->src + off, off + K < c->bytes ? K : c->bytes - off,
                         cudaMemcpyDefault, c->s));
    break;
  case HOP:
    CK(cudaEventRecord(c->a, c->s));
    CK(cudaStreamWaitEvent(c->side, c->a, 0));
    for (off = 0; off < c->bytes; off += K)
      CK(cudaMemcpyAsync(c->dst + off, c->src + off, off + K < c->bytes ? K : c->bytes - off,
                         cudaMemcpyDefault, c->side));
    CK(cudaEventRecord(c->b, c->side));
    CK(cudaStreamWaitEvent(c->s, c->b, 0));
    break;
  case TWO: {
    CK(cudaEventRecord(c->a, c->s));
    CK(cudaStreamWaitEvent(c->s2, c->a, 0));
    int i = 0;
    for (off = 0; off < c->bytes; off += K, i++)
      CK(cudaMemcpyAsync(c->dst + off, c->src + off, off + K < c->bytes ? K : c->bytes - off,
                         cudaMemcpyDefault, i % 2 ? c->s2 : c->s));
    CK(cudaEventRecord(c->b, c->s2));
    CK(cudaStreamWaitEvent(c->s, c->b, 0));
    break;
  }
  case CESM: {
    size_t smb = ((size_t)(c->bytes * frac) + 4095) & ~(size_t)4095;
    size_t ceb = c->bytes - smb;
    CK(cudaEventRecord(c->a, c->s));
    CK(cudaStreamWaitEvent(c->s2, c->a, 0));
    CK(cudaMemcpyAsync(c->dst, c->src, ceb, cudaMemcpyDefault, c->s));
    sm_push<<<c->sms, 512, 0, c->s2>>>((int4 *)(c->dst + ceb), (const int4 *)(c->src + ceb), smb / 16);
    CK(cudaGetLastError());
    CK(cudaEventRecord(c->b, c->s2));
    CK(cudaStreamWaitEvent(c->s, c->b, 0));
    break;
  }
  }
}

static void run_case(ctx *c, const char *name, int kind, size_t K, double frac) {
  CK(cudaSetDevice(0));
  /* Poison the destination, then the calls. */
  CK(cudaMemsetAsync(c->dst, 0xA5, c->bytes, c->s));
  for (int i = 0; i < 3; i++) one_call(c, kind, K, frac);
  CK(cudaEventRecord(c->t0, c->s));
  for (int i = 0; i < c->iters; i++) one_call(c, kind, K, frac);
  CK(cudaEventRecord(c->t1, c->s));
  CK(cudaEventSynchronize(c->t1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, c->t0, c->t1));
  double us = ms * 1e3 / c->iters;
  /* Check on GPU 0 through the mapping (works for both destinations). */
  unsigned long long *bad, hbad = 0;
  CK(cudaMalloc(&bad, sizeof *bad));
  CK(cudaMemset(bad, 0, sizeof *bad));
  count_bad<<<1024, 256, 0, c->s>>>((const uint32_t *)c->dst, c->bytes / 4, 0x5eed, bad);
  CK(cudaMemcpyAsync(&hbad, bad, sizeof hbad, cudaMemcpyDeviceToHost, c->s));
  CK(cudaStreamSynchronize(c->s));
  CK(cudaFree(bad));
  printf("%-14s %10.1f us %8.1f GB/s  wrong words %llu\n", name, us, c->bytes / us / 1e3, hbad);
  fflush(stdout);
}

static void run_all(ctx *c) {
  char name[64];
  CK(cudaSetDevice(0));
  CK(cudaDeviceGetAttribute(&c->sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaStreamCreateWithFlags(&c->s, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&c->side, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&c->s2, cudaStreamNonBlocking));
  CK(cudaEventCreate(&c->t0));
  CK(cudaEventCreate(&c->t1));
  CK(cudaEventCreateWithFlags(&c->a, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&c->b, cudaEventDisableTiming));
  fill<<<1024, 256, 0, c->s>>>((uint32_t *)c->src, c->bytes / 4, 0x5eed);
  CK(cudaStreamSynchronize(c->s));
  run_case(c, "single", SINGLE, 0, 0);
  const size_t Ks[] = {96, 48, 24, 192};
  for (int i = 0; i < 4; i++) {
    size_t K = Ks[i] << 20;
    snprintf(name, sizeof name, "chunks%zu", Ks[i]);
    run_case(c, name, CHUNKS, K, 0);
  }
  for (int i = 0; i < 2; i++) {
    size_t K = Ks[i] << 20;
    snprintf(name, sizeof name, "hop%zu", Ks[i]);
    run_case(c, name, HOP, K, 0);
  }
  for (int i = 0; i < 2; i++) {
    size_t K = Ks[i] << 20;
    snprintf(name, sizeof name, "two%zu", Ks[i]);
    run_case(c, name, TWO, K, 0);
  }
  const double fr[] = {0.03, 0.06, 0.10, 0.20};
  for (int i = 0; i < 4; i++) {
    snprintf(name, sizeof name, "ce+sm%.0f", fr[i] * 100);
    run_case(c, name, CESM, 0, fr[i]);
  }
  if (c->s1) run_case(c, "pull", PULL, 0, 0);
  run_case(c, "single", SINGLE, 0, 0);
}

int main(int argc, char **argv) {
  if (argc != 4 || (strcmp(argv[1], "local") && strcmp(argv[1], "ipc"))) {
    fprintf(stderr, "usage: ce_probe local|ipc BYTES ITERS\n");
    return 2;
  }
  ctx c;
  memset(&c, 0, sizeof c);
  c.bytes = parse_size(argv[2]) & ~(size_t)4095;
  c.iters = atoi(argv[3]);
  if (!c.bytes || c.iters <= 0) {
    fprintf(stderr, "ce_probe: bad size or iteration count\n");
    return 2;
  }
  if (strcmp(argv[1], "ipc") == 0) {
    int to_parent[2], to_child[2];
    if (pipe(to_parent) || pipe(to_child)) return perror("pipe"), 1;
    pid_t pid = fork();
    if (pid < 0) return perror("fork"), 1;
    if (pid == 0) {
      /* Child: the destination on GPU 1, exported; wait for the parent. */
      char *d;
      CK(cudaSetDevice(1));
      CK(cudaMalloc(&d, c.bytes));
      cudaIpcMemHandle_t h;
      CK(cudaIpcGetMemHandle(&h, d));
      if (write(to_parent[1], &h, sizeof h) != (ssize_t)sizeof h) _exit(1);
      char x;
      if (read(to_child[0], &x, 1) != 1) _exit(1);
      CK(cudaFree(d));
      _exit(0);
    }
    cudaIpcMemHandle_t h;
    if (read(to_parent[0], &h, sizeof h) != (ssize_t)sizeof h) return fprintf(stderr, "no handle\n"), 1;
    CK(cudaSetDevice(0));
    CK(cudaMalloc(&c.src, c.bytes));
    CK(cudaIpcOpenMemHandle((void **)&c.dst, h, cudaIpcMemLazyEnablePeerAccess));
    printf("ce_probe ipc: %zu B, %d calls a case\n", c.bytes, c.iters);
    run_all(&c);
    CK(cudaIpcCloseMemHandle(c.dst));
    char x = 1;
    if (write(to_child[1], &x, 1) != 1) return 1;
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
  }
  CK(cudaSetDevice(1));
  CK(cudaMalloc(&c.dst, c.bytes));
  CK(cudaDeviceEnablePeerAccess(0, 0));
  CK(cudaStreamCreateWithFlags(&c.s1, cudaStreamNonBlocking));
  CK(cudaEventCreateWithFlags(&c.b1, cudaEventDisableTiming));
  CK(cudaSetDevice(0));
  CK(cudaDeviceEnablePeerAccess(1, 0));
  CK(cudaMalloc(&c.src, c.bytes));
  printf("ce_probe local: %zu B, %d calls a case\n", c.bytes, c.iters);
  run_all(&c);
  return 0;
}
