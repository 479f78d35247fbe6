/* SPDX-License-Identifier: BSD-3-Clause */
// SM copy kernels (push: run on the source GPU and write the peer; pull: run
// on the destination GPU and read the peer), the pattern fill/verify kernels,
// and their extern "C" launchers.
//
// A copy is split into a head (bytes until dst is 16-byte aligned), a body of
// 16-byte vectors and a tail (< 16 bytes). Head and tail are copied bytewise by
// block 0. The body takes the fastest path the source alignment allows:
//   src also 16-aligned   -> 16-byte loads/stores (stride, chunk or TMA kernel)
//   src 4-aligned         -> four 4-byte loads, one 16-byte store
//   otherwise             -> five aligned 4-byte loads joined by funnel shifts
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>

#include "xfer/pattern.h"
#include "xfer/xfer_kernels.h"

namespace {

struct edges {
  unsigned char *hd;
  const unsigned char *hs;
  unsigned hn;
  unsigned char *td;
  const unsigned char *ts;
  unsigned tn;
};

__device__ __forceinline__ void copy_edges(const edges &e) {
  if (blockIdx.x == 0) {
    unsigned t = threadIdx.x;
    if (t < e.hn) e.hd[t] = e.hs[t];
    if (t < e.tn) e.td[t] = e.ts[t];
  }
}

template <int H>
__device__ __forceinline__ int4 ld16(const int4 *p) {
  if constexpr (H == P2PK_HINT_CS) return __ldcs(p);
  else if constexpr (H == P2PK_HINT_NC) return __ldg(p);
  else return *p;
}

template <int H>
__device__ __forceinline__ void st16(int4 *p, int4 v) {
  if constexpr (H == P2PK_HINT_PLAIN) *p = v;
  else __stcs(p, v);
}

// One tile: U vectors per thread, all loads issued before the first store.
template <int U, int H>
__device__ __forceinline__ void copy_tile(int4 *__restrict__ d, const int4 *__restrict__ s,
                                          size_t i, size_t end) {
  const size_t bd = blockDim.x, t = threadIdx.x;
  int4 r[U];
  if (i + U * bd <= end) {
#pragma unroll
    for (int k = 0; k < U; k++) r[k] = ld16<H>(s + i + k * bd + t);
#pragma unroll
    for (int k = 0; k < U; k++) st16<H>(d + i + k * bd + t, r[k]);
  } else {
#pragma unroll
    for (int k = 0; k < U; k++) {
      size_t j = i + k * bd + t;
      r[k] = j < end ? ld16<H>(s + j) : make_int4(0, 0, 0, 0);
    }
#pragma unroll
    for (int k = 0; k < U; k++) {
      size_t j = i + k * bd + t;
      if (j < end) st16<H>(d + j, r[k]);
    }
  }
}

template <int KIND, int U, int H>
__global__ void __launch_bounds__(1024) k_copy16(int4 *__restrict__ d, const int4 *__restrict__ s,
                                                 size_t nvec, edges e) {
  copy_edges(e);
  const size_t step = (size_t)U * blockDim.x;
  if constexpr (KIND == P2PK_SMK_CHUNK) {
    // Contiguous chunks of whole tiles, one per block.
    const size_t tiles = (nvec + step - 1) / step;
    const size_t per = (tiles + gridDim.x - 1) / gridDim.x;
    const size_t beg = (size_t)blockIdx.x * per * step;
    const size_t end = beg + per * step < nvec ? beg + per * step : nvec;
    for (size_t i = beg; i < end; i += step) copy_tile<U, H>(d, s, i, end);
  } else {
    for (size_t i = (size_t)blockIdx.x * step; i < nvec; i += (size_t)gridDim.x * step)
      copy_tile<U, H>(d, s, i, nvec);
  }
}

// Source 4-byte aligned (but not 16): four word loads, one vector store.
__global__ void __launch_bounds__(1024) k_copy_w4(int4 *__restrict__ d,
                                                  const uint32_t *__restrict__ s, size_t nvec,
                                                  edges e) {
  copy_edges(e);
  for (size_t v = (size_t)blockIdx.x * blockDim.x + threadIdx.x; v < nvec;
       v += (size_t)gridDim.x * blockDim.x) {
    const uint32_t *w = s + 4 * v;
    d[v] = make_int4((int)w[0], (int)w[1], (int)w[2], (int)w[3]);
  }
}

// Source misaligned by 1-3 bytes: load the five aligned words that cover the
// 16 source bytes (each holds at least one byte of the copy, so no load leaves
// the source's allocation) and shift them into place (little endian).
__global__ void __launch_bounds__(1024) k_copy_funnel(int4 *__restrict__ d,
                                                      const uint32_t *__restrict__ s_al,
                                                      unsigned shift, size_t nvec, edges e) {
  copy_edges(e);
  for (size_t v = (size_t)blockIdx.x * blockDim.x + threadIdx.x; v < nvec;
       v += (size_t)gridDim.x * blockDim.x) {
    const uint32_t *w = s_al + 4 * v;
    uint32_t w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4];
    d[v] = make_int4((int)__funnelshift_r(w0, w1, shift), (int)__funnelshift_r(w1, w2, shift),
                     (int)__funnelshift_r(w2, w3, shift), (int)__funnelshift_r(w3, w4, shift));
  }
}

// --- bulk copies through shared memory (sm_90 cp.async.bulk) -----------------
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
}

__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  }
}

__device__ __forceinline__ void bulk_load(void *smem, const void *gsrc, uint32_t bytes,
                                          uint64_t *bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
      ::"r"(smem_addr(smem)), "l"(gsrc), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

__device__ __forceinline__ void bulk_store(void *gdst, const void *smem, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gdst),
               "r"(smem_addr(smem)), "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// Wait until at most n committed bulk stores are still reading shared memory.
__device__ __forceinline__ void bulk_wait_read(int n) {
  switch (n) {
    case 0: asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.bulk.wait_group.read 2;" ::: "memory"); break;
    default: asm volatile("cp.async.bulk.wait_group.read 3;" ::: "memory"); break;
  }
}

#endif

// One thread per block streams the block's contiguous run of tiles:
// global -> shared (completing on a per-stage mbarrier) -> global. `stages`
// shared buffers; up to `lag` stores in flight, the rest of the stages loading.
__global__ void __launch_bounds__(32) k_copy_tma(unsigned char *d, const unsigned char *s,
                                                 size_t bytes, unsigned tile, int stages,
                                                 edges e) {
  copy_edges(e);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  // Built for an older GPU (bulk copies need sm_90): a plain vector copy.
  for (size_t v = (size_t)blockIdx.x * blockDim.x + threadIdx.x; v < bytes / 16;
       v += (size_t)gridDim.x * blockDim.x)
    ((int4 *)d)[v] = ((const int4 *)s)[v];
  (void)tile;
  (void)stages;
#else
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) uint64_t bars[P2PK_SM_MAX_STAGES];
  const size_t ntiles = (bytes + tile - 1) / tile;
  const size_t per = (ntiles + gridDim.x - 1) / gridDim.x;
  const size_t t0 = (size_t)blockIdx.x * per;
  const size_t t1 = t0 + per < ntiles ? t0 + per : ntiles;
  if (threadIdx.x != 0 || t0 >= t1) return;
  for (int i = 0; i < stages; i++) mbar_init(&bars[i], 1);
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");

  const size_t n = t1 - t0;
  const size_t S = (size_t)stages;
  const size_t lag = S / 2 > 0 ? S / 2 : 1;  // stores in flight; S - lag loads ahead
  auto load = [&](size_t j) {
    const size_t off = (t0 + j) * tile;
    const uint32_t nb = (uint32_t)(bytes - off < tile ? bytes - off : tile);
    uint64_t *bar = &bars[j % S];
    mbar_expect_tx(bar, nb);
    bulk_load(smem + (j % S) * tile, s + off, nb, bar);
  };
  for (size_t j = 0; j < n && j < S; j++) load(j);
  for (size_t i = 0; i < n; i++) {
    // Refill the stage the store of tile i-lag read from, once it has.
    if (i >= lag && i - lag + S < n) {
      bulk_wait_read((int)lag - 1);
      load(i - lag + S);
    }
    mbar_wait(&bars[i % S], (uint32_t)((i / S) & 1));
    const size_t off = (t0 + i) * tile;
    const uint32_t nb = (uint32_t)(bytes - off < tile ? bytes - off : tile);
    bulk_store(d + off, smem + (i % S) * tile, nb);
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}

// --- pattern ------------------------------------------------------------------

__global__ void k_fill(unsigned char *p, size_t n, uint64_t seed, uint32_t iter) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    p[i] = p2pk_pattern_byte(seed, iter, i);
}

__global__ void k_verify(const unsigned char *p, size_t n, uint64_t seed, uint32_t iter,
                         unsigned long long *count) {
  unsigned long long bad = 0;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    bad += p[i] != p2pk_pattern_byte(seed, iter, i);
  if (bad) atomicAdd(count, bad);
}

__global__ void k_count_ne(const unsigned char *p, size_t n, unsigned char v,
                           unsigned long long *count) {
  unsigned long long bad = 0;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    bad += p[i] != v;
  if (bad) atomicAdd(count, bad);
}

typedef void (*copy16_fn)(int4 *, const int4 *, size_t, edges);

// [kind][log2 unroll][hint]
#define P2PK_K16(K, U) {k_copy16<K, U, 0>, k_copy16<K, U, 1>, k_copy16<K, U, 2>}
const copy16_fn copy16_table[2][4][P2PK_HINT_COUNT] = {
    {P2PK_K16(0, 1), P2PK_K16(0, 2), P2PK_K16(0, 4), P2PK_K16(0, 8)},
    {P2PK_K16(1, 1), P2PK_K16(1, 2), P2PK_K16(1, 4), P2PK_K16(1, 8)},
};
#undef P2PK_K16

int log2_unroll(int u) { return u >= 8 ? 3 : u >= 4 ? 2 : u >= 2 ? 1 : 0; }

unsigned grid_for(size_t items, size_t per_block, int blocks_per_sm, int sm_count) {
  size_t want = (items + per_block - 1) / per_block;
  size_t cap = (size_t)blocks_per_sm * (size_t)(sm_count > 0 ? sm_count : 1);
  if (want > cap) want = cap;
  return want ? (unsigned)want : 1u;
}

unsigned pattern_grid(size_t n) {
  size_t b = (n + 255) / 256;
  return b > 4096 ? 4096u : b ? (unsigned)b : 1u;
}

// The TMA kernel's shared memory: its static part (the mbarriers) plus the
// dynamic stages must fit what the function may use. Beyond 48 KiB in all a
// launch needs cudaFuncAttributeMaxDynamicSharedMemorySize raised first (on
// each device: the attribute belongs to the device's context). Per device,
// under one lock: the static size (asked once) and the dynamic size the
// attribute was last raised to (0: never, the 48 KiB default).
#define TMA_MAX_DEVS 64
struct tma_smem_state {
  int known;
  size_t static_bytes;
  size_t dyn_set;
};
pthread_mutex_t tma_smem_lock = PTHREAD_MUTEX_INITIALIZER;
tma_smem_state tma_smem[TMA_MAX_DEVS];
const size_t default_smem_limit = 48u << 10;

// Let k_copy_tma launch with `dynamic` bytes of dynamic shared memory on the
// current device. `forget`: the cached state may be stale (a launch was
// refused, e.g. after cudaDeviceReset); ask again.
cudaError_t tma_smem_allow(size_t dynamic, int forget) {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  tma_smem_state scratch = {0, 0, 0};
  pthread_mutex_lock(&tma_smem_lock);
  tma_smem_state *t = dev >= 0 && dev < TMA_MAX_DEVS ? &tma_smem[dev] : &scratch;
  // Never lower the limit: another thread may be about to launch with it.
  size_t want = dynamic > t->dyn_set ? dynamic : t->dyn_set;
  if (forget) *t = scratch;
  if (!t->known) {
    cudaFuncAttributes a;
    e = cudaFuncGetAttributes(&a, k_copy_tma);
    if (e == cudaSuccess) {
      t->static_bytes = a.sharedSizeBytes;
      t->known = 1;
    }
  }
  if (e == cudaSuccess && t->static_bytes + dynamic > default_smem_limit && dynamic > t->dyn_set) {
    e = cudaFuncSetAttribute(k_copy_tma, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)want);
    if (e == cudaSuccess) t->dyn_set = want;
  }
  pthread_mutex_unlock(&tma_smem_lock);
  return e;
}

cudaError_t launch_tma(unsigned char *d, const unsigned char *s, size_t body,
                       const p2pk_sm_config *cfg, int sm_count, edges e, cudaStream_t st) {
  const unsigned tile = (unsigned)cfg->tile_kib << 10;
  const size_t smem = (size_t)tile * (size_t)cfg->stages;
  const unsigned grid = grid_for(body, tile, cfg->blocks_per_sm, sm_count);
  cudaError_t err = cudaSuccess;
  for (int attempt = 0; attempt < 2; attempt++) {
    err = tma_smem_allow(smem, attempt);
    if (err != cudaSuccess) return err;
    k_copy_tma<<<grid, 32, smem, st>>>(d, s, body, tile, cfg->stages, e);
    err = cudaGetLastError();
    // Refused: the cached attribute may be stale; ask again, once.
    if (err != cudaErrorInvalidValue) break;
  }
  return err;
}

}  // namespace

extern "C" cudaError_t p2pk_launch_sm_copy(void *dst, const void *src, size_t bytes,
                                           const p2pk_sm_config *cfg, int sm_count,
                                           cudaStream_t st) {
  if (bytes == 0) return cudaSuccess;
  unsigned char *d = (unsigned char *)dst;
  const unsigned char *s = (const unsigned char *)src;
  size_t head = (16 - ((uintptr_t)d & 15)) & 15;
  if (head > bytes) head = bytes;
  const size_t body = (bytes - head) & ~(size_t)15;
  const size_t tail = bytes - head - body;
  edges e = {d, s, (unsigned)head, d + head + body, s + head + body, (unsigned)tail};
  unsigned char *db = d + head;
  const unsigned char *sb = s + head;
  const size_t nvec = body / 16;
  const unsigned mis = (unsigned)((uintptr_t)sb & 15);
  const int threads = cfg->threads;

  if (mis == 0 && cfg->kind == P2PK_SMK_TMA && body >= P2PK_SM_TMA_MIN_BYTES)
    return launch_tma(db, sb, body, cfg, sm_count, e, st);
  if (mis == 0 || nvec == 0) {
    const int kind = cfg->kind == P2PK_SMK_STRIDE ? 0 : 1;
    const size_t step = (size_t)threads * (size_t)cfg->unroll;
    unsigned grid = grid_for(nvec, step, cfg->blocks_per_sm, sm_count);
    copy16_fn fn = copy16_table[kind][log2_unroll(cfg->unroll)][cfg->hint % P2PK_HINT_COUNT];
    fn<<<grid, threads, 0, st>>>((int4 *)db, (const int4 *)sb, nvec, e);
    return cudaGetLastError();
  }
  unsigned grid = grid_for(nvec, (size_t)threads, cfg->blocks_per_sm, sm_count);
  if (mis % 4 == 0) {
    k_copy_w4<<<grid, threads, 0, st>>>((int4 *)db, (const uint32_t *)sb, nvec, e);
  } else {
    const uint32_t *al = (const uint32_t *)((uintptr_t)sb & ~(uintptr_t)3);
    k_copy_funnel<<<grid, threads, 0, st>>>((int4 *)db, al, 8u * (unsigned)((uintptr_t)sb & 3),
                                            nvec, e);
  }
  return cudaGetLastError();
}

extern "C" cudaError_t p2pk_launch_fill(void *p, size_t bytes, uint64_t seed, uint32_t iter,
                                        cudaStream_t st) {
  if (bytes == 0) return cudaSuccess;
  k_fill<<<pattern_grid(bytes), 256, 0, st>>>((unsigned char *)p, bytes, seed, iter);
  return cudaGetLastError();
}

extern "C" cudaError_t p2pk_launch_verify(const void *p, size_t bytes, uint64_t seed,
                                          uint32_t iter, unsigned long long *count,
                                          cudaStream_t st) {
  if (bytes == 0) return cudaSuccess;
  k_verify<<<pattern_grid(bytes), 256, 0, st>>>((const unsigned char *)p, bytes, seed, iter, count);
  return cudaGetLastError();
}

extern "C" cudaError_t p2pk_launch_count_ne(const void *p, size_t bytes, unsigned char value,
                                            unsigned long long *count, cudaStream_t st) {
  if (bytes == 0) return cudaSuccess;
  k_count_ne<<<pattern_grid(bytes), 256, 0, st>>>((const unsigned char *)p, bytes, value, count);
  return cudaGetLastError();
}
