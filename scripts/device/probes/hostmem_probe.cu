// Nineteenth session probe: does the kind of pinned host memory change how
// fast the copy engines move data through it, and does it change from one
// allocation to the next? The staged all-reduce with a process per GPU
// (coll/ce_staged.c) registers a POSIX shared-memory file with
// cudaHostRegister; one process allocates with cudaHostAlloc. s18 run 3 saw
// the per-GPU form take 3056 - 3692 us for 128 MiB from one process to the
// next while NCCL stayed at 4934 - 4980.
//
// For each kind of memory, several fresh allocations; for each, both GPUs
// copy at once as the staged all-reduce does: GPU 0 D2H into A while GPU 1
// reads A (H2D), and GPU 1 D2H into B while GPU 0 reads B. Median of 7
// timed rounds after 2 warm-ups, CUDA events per stream.
//
// Build: nvcc -O2 -o hostmem_probe hostmem_probe.cu
// Usage: hostmem_probe [MiB per copy (128)] [allocations per kind (4)]
#include <cuda_runtime.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "probe.h"

enum { K_HOSTALLOC, K_SHM, K_SHM_THP, K_ANON, K_ANON_THP, K_COUNT };
static const char *kind_name[K_COUNT] = {"cudaHostAlloc", "shm+register", "shm+THP+register",
                                         "anon+register", "anon+THP+register"};

typedef struct {
  void *p;
  size_t bytes;
  int kind;
} hbuf;

static int hb_alloc(hbuf *h, int kind, size_t bytes) {
  h->kind = kind;
  h->bytes = bytes;
  h->p = NULL;
  if (kind == K_HOSTALLOC) {
    CK(cudaHostAlloc(&h->p, bytes, cudaHostAllocPortable | cudaHostAllocMapped));
    return 0;
  }
  void *p = MAP_FAILED;
  if (kind == K_SHM || kind == K_SHM_THP) {
    char name[64];
    snprintf(name, sizeof name, "/p2pkit-probe-%d", (int)getpid());
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
      perror("shm_open");
      return -1;
    }
    shm_unlink(name);
    if (ftruncate(fd, (off_t)bytes) != 0) {
      perror("ftruncate");
      close(fd);
      return -1;
    }
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
  } else {
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  }
  if (p == MAP_FAILED) {
    perror("mmap");
    return -1;
  }
  if (kind == K_SHM_THP || kind == K_ANON_THP)
    if (madvise(p, bytes, MADV_HUGEPAGE) != 0) printf("  madvise(MADV_HUGEPAGE): %s\n", strerror(errno));
  CK(cudaHostRegister(p, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
  h->p = p;
  return 0;
}

static void hb_free(hbuf *h) {
  if (!h->p) return;
  if (h->kind == K_HOSTALLOC) {
    CK(cudaFreeHost(h->p));
  } else {
    CK(cudaHostUnregister(h->p));
    munmap(h->p, h->bytes);
  }
  h->p = NULL;
}

// AnonHugePages / ShmemHugePages from /proc/meminfo, kB.
static void meminfo_huge(long *anon, long *shmem) {
  *anon = *shmem = -1;
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f) return;
  char line[256];
  while (fgets(line, sizeof line, f)) {
    long v;
    if (sscanf(line, "AnonHugePages: %ld", &v) == 1) *anon = v;
    if (sscanf(line, "ShmemHugePages: %ld", &v) == 1) *shmem = v;
  }
  fclose(f);
}

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 128;
  int allocs = argc > 2 ? atoi(argv[2]) : 4;
  size_t bytes = mib << 20;
  int ngpu = 0;
  CK(cudaGetDeviceCount(&ngpu));
  if (ngpu < 2) {
    printf("needs 2 GPUs, found %d\n", ngpu);
    return 1;
  }
  void *dsrc[2], *ddst[2];
  cudaStream_t sd[2], su[2];
  cudaEvent_t ev[2][4];
  for (int g = 0; g < 2; g++) {
    CK(cudaSetDevice(g));
    CK(cudaMalloc(&dsrc[g], bytes));
    CK(cudaMalloc(&ddst[g], bytes));
    CK(cudaMemset(dsrc[g], 0x5a + g, bytes));
    CK(cudaStreamCreateWithFlags(&sd[g], cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&su[g], cudaStreamNonBlocking));
    for (int i = 0; i < 4; i++) CK(cudaEventCreate(&ev[g][i]));
  }
  enum { WARM = 2, ROUNDS = 7 };
  printf("%zu MiB a copy, %d allocations a kind, median of %d rounds (GB/s: GPU0 D2H, GPU0 H2D, "
         "GPU1 D2H, GPU1 H2D; then each alone)\n",
         mib, allocs, ROUNDS);
  for (int kind = 0; kind < K_COUNT; kind++) {
    for (int a = 0; a < allocs; a++) {
      long an0, sh0, an1, sh1;
      meminfo_huge(&an0, &sh0);
      hbuf A, B;
      if (hb_alloc(&A, kind, bytes) || hb_alloc(&B, kind, bytes)) {
        printf("%-18s alloc %d: failed\n", kind_name[kind], a);
        continue;
      }
      meminfo_huge(&an1, &sh1);
      float t[4][ROUNDS];
      // Both directions on both GPUs at once.
      for (int r = 0; r < WARM + ROUNDS; r++) {
        probe_sync_all(2);
        for (int g = 0; g < 2; g++) {
          CK(cudaSetDevice(g));
          void *out = g == 0 ? A.p : B.p, *in = g == 0 ? B.p : A.p;
          CK(cudaEventRecord(ev[g][0], sd[g]));
          CK(cudaMemcpyAsync(out, dsrc[g], bytes, cudaMemcpyDeviceToHost, sd[g]));
          CK(cudaEventRecord(ev[g][1], sd[g]));
          CK(cudaEventRecord(ev[g][2], su[g]));
          CK(cudaMemcpyAsync(ddst[g], in, bytes, cudaMemcpyHostToDevice, su[g]));
          CK(cudaEventRecord(ev[g][3], su[g]));
        }
        probe_sync_all(2);
        if (r < WARM) continue;
        for (int g = 0; g < 2; g++) {
          CK(cudaEventElapsedTime(&t[2 * g][r - WARM], ev[g][0], ev[g][1]));
          CK(cudaEventElapsedTime(&t[2 * g + 1][r - WARM], ev[g][2], ev[g][3]));
        }
      }
      float med[4];
      for (int i = 0; i < 4; i++) {
        probe_sort(t[i], ROUNDS);
        med[i] = (float)bytes / (t[i][ROUNDS / 2] * 1e-3f) / 1e9f;
      }
      // Each direction alone on GPU 0.
      float alone[2];
      for (int dir = 0; dir < 2; dir++) {
        float ts[ROUNDS];
        CK(cudaSetDevice(0));
        for (int r = 0; r < WARM + ROUNDS; r++) {
          CK(cudaEventRecord(ev[0][0], sd[0]));
          if (dir == 0) CK(cudaMemcpyAsync(A.p, dsrc[0], bytes, cudaMemcpyDeviceToHost, sd[0]));
          else CK(cudaMemcpyAsync(ddst[0], A.p, bytes, cudaMemcpyHostToDevice, sd[0]));
          CK(cudaEventRecord(ev[0][1], sd[0]));
          CK(cudaEventSynchronize(ev[0][1]));
          if (r >= WARM) CK(cudaEventElapsedTime(&ts[r - WARM], ev[0][0], ev[0][1]));
        }
        probe_sort(ts, ROUNDS);
        alone[dir] = (float)bytes / (ts[ROUNDS / 2] * 1e-3f) / 1e9f;
      }
      printf("%-18s alloc %d: both %6.1f %6.1f %6.1f %6.1f  alone D2H %6.1f H2D %6.1f  "
             "(huge pages kB: anon %+ld, shmem %+ld)\n",
             kind_name[kind], a, med[0], med[1], med[2], med[3], alone[0], alone[1], an1 - an0,
             sh1 - sh0);
      fflush(stdout);
      hb_free(&A);
      hb_free(&B);
    }
  }
  return 0;
}
