/* SPDX-License-Identifier: BSD-3-Clause */
// Device helpers shared by the all-reduce kernels: memory operations with the
// ordering they need, bounded waits, element types and reductions, chunk
// copy/reduce loops, and the per-call header exchange.
#ifndef P2PK_KERN_COMMON_CUH
#define P2PK_KERN_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "coll/kernels/coll_dev.h"
#include "p2pkit.h"

namespace p2pk {

// ---------------------------------------------------------------- memory ---

__device__ __forceinline__ uint64_t globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void st_vol_v4(void *p, uint4 v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ uint4 ld_vol_v4(const void *p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}
__device__ __forceinline__ uint64_t ld_acq(const void *p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_rel(void *p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ uint64_t ld_vol_u64(const void *p) {
  uint64_t v;
  asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_vol_u64(void *p, uint64_t v) {
  asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ int32_t ld_vol_i32(const void *p) {
  int32_t v;
  asm volatile("ld.volatile.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_vol_i32(void *p, int32_t v) {
  asm volatile("st.volatile.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// ------------------------------------------------------------- addresses ---

__device__ __forceinline__ p2pk_dev_ctrl *ctrl_of(char *base) { return (p2pk_dev_ctrl *)base; }
__device__ __forceinline__ p2pk_stage_ctrl *stage_ctrl(const p2pk_ar_args &a, int r) {
  return (p2pk_stage_ctrl *)(a.stage + (uint64_t)r * a.lay.stage_stride);
}
// Slot at `dst` that holds data coming from `src`: 0..n-2.
__device__ __forceinline__ int pslot(int src, int dst, int n) { return (src - dst - 1 + n) % n; }
// uint64 counter arrays [set][rank][mailbox] inside a scratch.
__device__ __forceinline__ uint64_t *counter(char *base, uint64_t off, int set, int r, int n, int m) {
  return (uint64_t *)(base + off) + ((uint64_t)set * n + r) * P2PK_COLL_MAILBOXES + m;
}
__device__ __forceinline__ char *mailbox(const p2pk_ar_args &a, char *base, int set, int slot,
                                         int m) {
  uint64_t i = ((uint64_t)set * (a.nranks - 1) + slot) * a.lay.nboxes + m;
  return base + a.lay.data_off + i * a.lay.mailbox;
}
__device__ __forceinline__ char *outbox(const p2pk_ar_args &a, int r, int m) {
  return a.stage + (uint64_t)r * a.lay.stage_stride + a.lay.stage_data_off +
         (uint64_t)m * a.lay.stage_mailbox;
}
// Staged send/recv: mailbox m that rank src fills for rank dst.
__device__ __forceinline__ char *p2p_outbox(const p2pk_ar_args &a, int src, int dst, int m) {
  return a.stage + (uint64_t)src * a.lay.stage_stride + a.lay.stage_p2p_off +
         ((uint64_t)dst * P2PK_STAGE_P2P_BOXES + m) * a.lay.stage_p2p_box;
}

// ---------------------------------------------------------------- errors ---

// Record the first error of this rank where the host sees it, and make every
// waiting thread of this rank give up. On a mismatch the peers are alive, so
// tell them too (a timed-out peer may be gone: leave it alone).
static __device__ __noinline__ void fail(const p2pk_ar_args &a, int code, int peer) {
  p2pk_dev_ctrl *c = ctrl_of(a.local);
  if (atomicCAS(&c->err_code, 0, code) == 0) {
    c->err_peer = peer;
    volatile int32_t *he = a.host_err;
    he[1] = peer;
    __threadfence_system();
    he[0] = code;
    __threadfence_system();
  }
  atomicCAS(&c->abort, 0, 1 + a.rank);
  if (code == P2PK_DERR_MISMATCH) {
    for (int p = 0; p < a.nranks; p++) {
      if (p == a.rank) continue;
      if (a.stage) st_vol_i32(&stage_ctrl(a, p)->abort, 1 + a.rank);
      else st_vol_i32(&ctrl_of(a.peer[p])->abort, 1 + a.rank);
    }
  }
}

// A bounded wait: call poll() in the spin loop; true means give up (the
// timeout passed, or this rank was told to abort).
struct Waiter {
  uint64_t deadline;
  uint32_t spins;
  __device__ __forceinline__ explicit Waiter(uint64_t timeout_ns)
      : deadline(globaltimer() + timeout_ns), spins(0) {}
  __device__ __forceinline__ explicit Waiter(const p2pk_ar_args &a) : Waiter(a.timeout_ns) {}
  __device__ __forceinline__ bool poll(const p2pk_ar_args &a, int peer) {
    if (++spins & 63) return false;
    p2pk_dev_ctrl *c = ctrl_of(a.local);
    int32_t ab = ld_vol_i32(&c->abort);
    if (!ab && a.stage) ab = ld_vol_i32(&stage_ctrl(a, a.rank)->abort);
    if (ab) {
      if (ab != 1 + a.rank) fail(a, P2PK_DERR_ABORTED, ab - 1);
      return true;
    }
    if (globaltimer() > deadline) {
      fail(a, P2PK_DERR_TIMEOUT, peer);
      return true;
    }
    return false;
  }
};

// The first wait of this rank that gave up: which word it was (region: 1
// this rank's scratch, 2 the staged host buffer, 3 + p peer p's scratch,
// byte offset), what it waited for and what it saw, in the host-mapped error
// words 2..9 (the host logs them with the error).
static __device__ __noinline__ void note_wait(const p2pk_ar_args &a, const void *p, uint64_t want,
                                              uint64_t seen) {
  p2pk_dev_ctrl *c = ctrl_of(a.local);
  if (atomicCAS(&c->err_pad, 0, 1) != 0) return;
  const char *q = (const char *)p;
  int32_t region = 0;
  uint64_t off = (uint64_t)(uintptr_t)q;
  if (q >= a.local && q < a.local + a.lay.total) {
    region = 1, off = (uint64_t)(q - a.local);
  } else if (a.stage && q >= a.stage && q < a.stage + a.lay.stage_stride * (uint64_t)a.nranks) {
    region = 2, off = (uint64_t)(q - a.stage);
  } else {
    for (int r = 0; r < a.nranks; r++)
      if (a.peer[r] && q >= a.peer[r] && q < a.peer[r] + a.lay.total) region = 3 + r, off = (uint64_t)(q - a.peer[r]);
  }
  volatile int32_t *he = a.host_err;
  he[2] = region;
  he[3] = (int32_t)blockIdx.x;
  he[4] = (int32_t)(uint32_t)off, he[5] = (int32_t)(uint32_t)(off >> 32);
  he[6] = (int32_t)(uint32_t)want, he[7] = (int32_t)(uint32_t)(want >> 32);
  he[8] = (int32_t)(uint32_t)seen, he[9] = (int32_t)(uint32_t)(seen >> 32);
  __threadfence_system();
}

// Wait until *p >= want (masking `mask` off); false when giving up. ACQ:
// acquire loads, ordering what follows after the word; plain loads where
// nothing read afterwards depends on it (send/recv's LL acknowledgement,
// p2p_ll).
template <bool ACQ = true>
__device__ __forceinline__ bool wait_geq(const p2pk_ar_args &a, Waiter &w, const void *p,
                                         uint64_t want, int peer, uint64_t mask = ~0ULL) {
  while (((ACQ ? ld_acq(p) : ld_vol_u64(p)) & mask) < want)
    if (w.poll(a, peer)) {
      note_wait(a, p, want, (ACQ ? ld_acq(p) : ld_vol_u64(p)) & mask);
      return false;
    }
  return true;
}

// Until the word at p equals want (a flag that one side sets and the other
// clears), with wait_geq's timeout and abort rules.
__device__ __forceinline__ bool wait_eq(const p2pk_ar_args &a, Waiter &w, const void *p,
                                        uint64_t want, int peer) {
  while (ld_acq(p) != want)
    if (w.poll(a, peer)) {
      note_wait(a, p, want, ld_acq(p));
      return false;
    }
  return true;
}

// ---------------------------------------------------------- call prologue ---

// First thing of every kernel: when launched as a programmatic dependent
// launch (P2PKIT_PDL), wait until the stream's previous kernel has finished
// and its memory is visible (a no-op otherwise), then let the stream's next
// kernel be scheduled early: it waits here in turn, so nothing of it runs
// before this grid is done. Blocks of this grid never wait for one another,
// so the next grid's idle blocks cannot starve this one.
__device__ __forceinline__ void pdl_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// A kernel that finds the abort word set exits at once. When a peer set it
// (its header check failed, and it told the peers) and no wait of this
// rank has recorded that yet, record it now: otherwise this rank's host
// would never hear of it, and its calls would return at once with nothing
// done (a sender whose copies had all finished before its receiver's
// mismatch would see no error). The first error recorded stays.
__device__ __forceinline__ void note_abort(const p2pk_ar_args &a, int32_t ab) {
  if (ab && ab != 1 + a.rank) fail(a, P2PK_DERR_ABORTED, ab - 1);
}

// Every kernel starts here: this block's sequence number (all blocks agree;
// each block index keeps its own copy so no block overwrites one another
// still reads), and whether the communicator is already dead.
__device__ __forceinline__ bool prologue_at(const p2pk_ar_args &a, char *local, uint32_t *seq_p) {
  __shared__ uint32_t s_seq;
  __shared__ int32_t s_abort;
  p2pk_dev_ctrl *c = ctrl_of(local);
  if (threadIdx.x == 0) {
    s_abort = ld_vol_i32(&c->abort);
    s_seq = c->seq[blockIdx.x] + 1;
    note_abort(a, s_abort);
  }
  __syncthreads();
  uint32_t seq = s_seq;
  for (uint32_t i = blockIdx.x + threadIdx.x * gridDim.x; i < P2PK_COLL_MAX_BLOCKS;
       i += blockDim.x * gridDim.x)
    c->seq[i] = seq;
  *seq_p = seq;
  return s_abort == 0;
}

__device__ __forceinline__ bool prologue(const p2pk_ar_args &a, uint32_t *seq_p) {
  pdl_start();
  return prologue_at(a, a.local, seq_p);
}

// Keep a value in a register from here on: the compiler may otherwise load
// a kernel argument again where it is used (after the dependency wait, where
// the load's latency is no longer hidden).
template <class V>
__device__ __forceinline__ V pin(V v) {
  static_assert(sizeof(V) == 8 || sizeof(V) == 4, "pin: 4 or 8 bytes");
  if constexpr (sizeof(V) == 8) {
    uint64_t u;
    memcpy(&u, &v, 8);
    asm volatile("" : "+l"(u));
    memcpy(&v, &u, 8);
  } else {
    uint32_t u;
    memcpy(&u, &v, 4);
    asm volatile("" : "+r"(u));
    memcpy(&v, &u, 4);
  }
  return v;
}

// The header: what this call is (count, type, op, algorithm, grid), sent to
// every peer as one LL line tagged with the sequence number; one thread of
// block 0 checks the peers' lines. A mismatch aborts everyone at once instead
// of a hang until the timeout.
// The parts of the header's work that are not arguments come in as values,
// so the LL kernel can pass the ones it read before its dependency wait (and
// nullptr for `stage`: it only runs over P2P). peer[p]: rank p's scratch.
__device__ __forceinline__ void header_send_from(const p2pk_ar_args &a, uint32_t seq,
                                                 char *const *peer, int n, int me,
                                                 uint32_t hdr0, uint32_t hdr1, char *stage) {
  uint4 line = make_uint4(hdr0, seq, hdr1, seq);
  int slot = seq & 1;
  if (stage) {
    st_vol_v4(((p2pk_stage_ctrl *)(stage + (uint64_t)me * a.lay.stage_stride))->hdr[slot], line);
    return;
  }
  for (int p = 0; p < n; p++)
    if (p != me) st_vol_v4(ctrl_of(peer[p])->hdr[slot][me], line);
}

static __device__ __noinline__ void header_send(const p2pk_ar_args &a, uint32_t seq) {
  header_send_from(a, seq, a.peer, a.nranks, a.rank, a.hdr0, a.hdr1, a.stage);
}

// Poll one LL line (16 bytes: data, seq, data, seq) until both flag words
// carry `seq`; if the wait gives up first, the last line read, whose flags
// then do not match.
__device__ __forceinline__ uint4 ll_wait(const p2pk_ar_args &a, Waiter &w, const void *src,
                                         uint32_t seq, int peer) {
  uint4 x;
  for (;;) {
    x = ld_vol_v4(src);
    if (x.y == seq && x.w == seq) break;
    if (w.poll(a, peer)) break;
  }
  return x;
}

__device__ __forceinline__ bool header_check_at(const p2pk_ar_args &a, uint32_t seq, Waiter &w,
                                                int n, int me, char *local, uint32_t hdr0,
                                                uint32_t hdr1, char *stage) {
  int slot = seq & 1;
  for (int p = 0; p < n; p++) {
    if (p == me) continue;
    const void *src =
        stage ? (const void *)((p2pk_stage_ctrl *)(stage + (uint64_t)p * a.lay.stage_stride))->hdr[slot]
              : (const void *)ctrl_of(local)->hdr[slot][p];
    uint4 v = ll_wait(a, w, src, seq, p);
    if (v.y != seq || v.w != seq) return false;
    if (v.x != hdr0 || v.z != hdr1) {
      fail(a, P2PK_DERR_MISMATCH, p);
      return false;
    }
  }
  return true;
}

static __device__ __noinline__ bool header_check(const p2pk_ar_args &a, uint32_t seq, Waiter &w) {
  return header_check_at(a, seq, w, a.nranks, a.rank, a.local, a.hdr0, a.hdr1, a.stage);
}

// Send/recv kernels: the operation of the group whose blocks start at or
// before this block (the block may lie past its end: p2p_op_of checks).
__device__ __forceinline__ int p2p_op_index(const p2pk_p2p_args &pa) {
  int i = 0;
  while (i + 1 < pa.nops && (int)blockIdx.x >= pa.op[i + 1].base) i++;
  return i;
}

// Send/recv kernels: operation i (p2p_op_index) when this block works on
// it, or null when the communicator is already dead or the block has none.
// The verdict has a shared word of its own, not the caller's s_ok, which
// thread 0 writes again at the first wait with no barrier in between.
__device__ __forceinline__ const p2pk_p2p_op *p2p_op_of(const p2pk_p2p_args &pa, int i) {
  __shared__ int s_live;
  pdl_start();
  if (threadIdx.x == 0) {
    const int32_t ab = ld_vol_i32(&ctrl_of(pa.a.local)->abort);
    note_abort(pa.a, ab);
    s_live = ab == 0;
  }
  __syncthreads();
  if (!s_live) return nullptr;
  return (int)blockIdx.x < pa.op[i].base + pa.op[i].blocks ? &pa.op[i] : nullptr;
}

// ------------------------------------------------------------------ types ---

// x / n for AVG. For n a power of two (2, 4, 8 GPUs) a multiply by the exact
// 2^-k: the same bits as the division (both round the same exact value
// once), without the IEEE division's instruction sequence per element
// (on 2x H200, process per GPU, the division made a 16 MiB AVG all-reduce
// 62.8 us against SUM's 58.3).
__device__ __forceinline__ float div_n(float x, int n) {
  if (n > 0 && (n & (n - 1)) == 0) return x * __int_as_float((127 - (__ffs(n) - 1)) << 23);
  return x / (float)n;
}
__device__ __forceinline__ double div_n(double x, int n) {
  if (n > 0 && (n & (n - 1)) == 0)
    return x * __longlong_as_double((long long)(1023 - (__ffs(n) - 1)) << 52);
  return x / (double)n;
}

template <class B, class A>
struct TraitBase {
  typedef B bits;
  typedef A acc;
};
struct TF32 : TraitBase<uint32_t, float> {
  static __device__ __forceinline__ float ld(uint32_t b) { return __uint_as_float(b); }
  static __device__ __forceinline__ uint32_t st(float a) { return __float_as_uint(a); }
  static __device__ __forceinline__ float add(float x, float y) { return x + y; }
  static __device__ __forceinline__ float mul(float x, float y) { return x * y; }
  static __device__ __forceinline__ float div(float x, int n) { return div_n(x, n); }
};
struct TF16 : TraitBase<uint16_t, float> {
  static __device__ __forceinline__ float ld(uint16_t b) { return __half2float(__ushort_as_half(b)); }
  static __device__ __forceinline__ uint16_t st(float a) { return __half_as_ushort(__float2half_rn(a)); }
  static __device__ __forceinline__ float add(float x, float y) { return x + y; }
  static __device__ __forceinline__ float mul(float x, float y) { return x * y; }
  static __device__ __forceinline__ float div(float x, int n) { return div_n(x, n); }
};
struct TBF16 : TraitBase<uint16_t, float> {
  static __device__ __forceinline__ float ld(uint16_t b) {
    return __bfloat162float(__ushort_as_bfloat16(b));
  }
  static __device__ __forceinline__ uint16_t st(float a) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(a));
  }
  static __device__ __forceinline__ float add(float x, float y) { return x + y; }
  static __device__ __forceinline__ float mul(float x, float y) { return x * y; }
  static __device__ __forceinline__ float div(float x, int n) { return div_n(x, n); }
};
struct TF64 : TraitBase<uint64_t, double> {
  static __device__ __forceinline__ double ld(uint64_t b) { return __longlong_as_double((long long)b); }
  static __device__ __forceinline__ uint64_t st(double a) { return (uint64_t)__double_as_longlong(a); }
  static __device__ __forceinline__ double add(double x, double y) { return x + y; }
  static __device__ __forceinline__ double mul(double x, double y) { return x * y; }
  static __device__ __forceinline__ double div(double x, int n) { return div_n(x, n); }
};
// Integers wrap like the hardware does (computed unsigned: no signed overflow).
struct TI32 : TraitBase<uint32_t, int32_t> {
  static __device__ __forceinline__ int32_t ld(uint32_t b) { return (int32_t)b; }
  static __device__ __forceinline__ uint32_t st(int32_t a) { return (uint32_t)a; }
  static __device__ __forceinline__ int32_t add(int32_t x, int32_t y) { return (int32_t)((uint32_t)x + (uint32_t)y); }
  static __device__ __forceinline__ int32_t mul(int32_t x, int32_t y) { return (int32_t)((uint32_t)x * (uint32_t)y); }
  static __device__ __forceinline__ int32_t div(int32_t x, int n) { return x / n; }
};
struct TI64 : TraitBase<uint64_t, int64_t> {
  static __device__ __forceinline__ int64_t ld(uint64_t b) { return (int64_t)b; }
  static __device__ __forceinline__ uint64_t st(int64_t a) { return (uint64_t)a; }
  static __device__ __forceinline__ int64_t add(int64_t x, int64_t y) { return (int64_t)((uint64_t)x + (uint64_t)y); }
  static __device__ __forceinline__ int64_t mul(int64_t x, int64_t y) { return (int64_t)((uint64_t)x * (uint64_t)y); }
  static __device__ __forceinline__ int64_t div(int64_t x, int n) { return x / n; }
};
struct TU8 : TraitBase<uint8_t, uint32_t> {
  static __device__ __forceinline__ uint32_t ld(uint8_t b) { return b; }
  static __device__ __forceinline__ uint8_t st(uint32_t a) { return (uint8_t)a; }
  static __device__ __forceinline__ uint32_t add(uint32_t x, uint32_t y) { return (x + y) & 0xff; }
  static __device__ __forceinline__ uint32_t mul(uint32_t x, uint32_t y) { return (x * y) & 0xff; }
  static __device__ __forceinline__ uint32_t div(uint32_t x, int n) { return x / (uint32_t)n; }
};

template <class T>
__device__ __forceinline__ typename T::acc apply(int op, typename T::acc x, typename T::acc y) {
  switch (op) {
    case P2PKIT_PROD: return T::mul(x, y);
    case P2PKIT_MIN: return y < x ? y : x;
    case P2PKIT_MAX: return y > x ? y : x;
    default: return T::add(x, y); /* SUM, AVG */
  }
}
template <class T>
__device__ __forceinline__ typename T::acc finish(int op, typename T::acc x, int n) {
  return op == P2PKIT_AVG ? T::div(x, n) : x;
}

// A 16-byte or 8-byte vector seen as elements.
template <class T>
union Pack16 {
  enum { N = 16 / sizeof(typename T::bits) };
  uint4 u;
  typename T::bits e[N];
};
template <class T>
union Pack8 {
  enum { N = 8 / sizeof(typename T::bits) };
  uint2 u;
  typename T::bits e[N];
};

// ------------------------------------------------------------ chunk loops ---

enum { UNROLL = 4 };

// Loads of data another GPU wrote. Device memory (our scratch, written over
// NVLink): through L2 only, since L1 is not coherent. Host memory: volatile,
// never cached.
template <bool HOST>
__device__ __forceinline__ uint4 ld16(const char *p) {
  if (HOST) return ld_vol_v4(p);
  return __ldcg((const uint4 *)p);
}
__device__ __forceinline__ uint8_t ld_cg(const uint8_t *p) { return __ldcg((const unsigned char *)p); }
__device__ __forceinline__ uint16_t ld_cg(const uint16_t *p) { return __ldcg((const unsigned short *)p); }
__device__ __forceinline__ uint32_t ld_cg(const uint32_t *p) { return __ldcg((const unsigned int *)p); }
__device__ __forceinline__ uint64_t ld_cg(const uint64_t *p) {
  return __ldcg((const unsigned long long *)p);
}
template <class B, bool HOST>
__device__ __forceinline__ B ld_elem(const char *p) {
  if (HOST) return *(const volatile B *)p;
  return ld_cg((const B *)p);
}

__device__ __forceinline__ bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

// dst[0..len) = src[0..len) by the whole block, and (MULTI) also[k][0..len)
// for k < nalso from the same loads (the rooted broadcast's forward); len a
// multiple of the element size; src in host memory when HOST. 16-byte
// accesses where every side allows, element accesses otherwise. The bits
// are copied as they are.
template <class T, bool HOST, bool MULTI>
__device__ __forceinline__ void copy_core(char *dst, const char *src, char *const *also, int nalso,
                                          uint64_t len) {
  typedef typename T::bits B;
  uint64_t done = 0;
  bool vec = aligned16(dst) && aligned16(src);
  if constexpr (MULTI)
    for (int k = 0; k < nalso; k++) vec = vec && aligned16(also[k]);
  if (vec) {
    const uint64_t nv = len / 16;
    for (uint64_t base = threadIdx.x; base < nv; base += (uint64_t)blockDim.x * UNROLL) {
      uint4 v[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; u++) {
        uint64_t i = base + (uint64_t)u * blockDim.x;
        if (i < nv) v[u] = ld16<HOST>(src + i * 16);
      }
#pragma unroll
      for (int u = 0; u < UNROLL; u++) {
        uint64_t i = base + (uint64_t)u * blockDim.x;
        if (i >= nv) continue;
        *(uint4 *)(dst + i * 16) = v[u];
        if constexpr (MULTI)
          for (int k = 0; k < nalso; k++) *(uint4 *)(also[k] + i * 16) = v[u];
      }
    }
    done = nv * 16;
  }
  for (uint64_t o = done + threadIdx.x * sizeof(B); o < len; o += (uint64_t)blockDim.x * sizeof(B)) {
    const B y = ld_elem<B, HOST>(src + o);
    *(B *)(dst + o) = y;
    if constexpr (MULTI)
      for (int k = 0; k < nalso; k++) *(B *)(also[k] + o) = y;
  }
}

template <class T, bool HOST = false>
__device__ void copy_chunk(char *dst, const char *src, uint64_t len) {
  copy_core<T, HOST, false>(dst, src, nullptr, 0, len);
}

template <class T>
__device__ void copy_multi(char *dst, const char *src, char *const *also, int nalso, uint64_t len) {
  copy_core<T, false, true>(dst, src, also, nalso, len);
}

// out[0..len) = reduce over r = 0..n-1 of src[r][0..len), in rank order, so
// every rank computes the same bits; src[me] is this rank's input (device
// memory), the others are mailboxes (HOST: in host memory). The result also
// goes to also[0..nalso) (remote mailboxes or peers' outputs). PAIR: on 2
// ranks both sources' loads go out together, so an iteration waits out one
// load latency, not two: the copy engines' local reduces under a grid cap
// (p2pk_ce_local_reduce says why not uncapped). The chunked kernels over
// P2P and the staged ones gained nothing from it (on 2x H200, 32 MiB under
// 16 and 64 blocks and uncapped within 1%; it made twoshot_kernel spill).
// The paired loop stays its own copy (the same operations in the same
// order as the other, so the same bits): folded into the loop below it lost
// the whole gain (16 blocks, 256 MiB: 1675 us against 1333.5). The
// function's text is as compact as it is because any change of its
// statements changes its PTX (scripts/ptx_check.sh).
template <class T, bool HOST, bool PAIR = false>
__device__ void reduce_chunk(int op, int n, int me, char *out, const char *const *src,
                             char *const *also, int nalso, uint64_t len) {
  typedef typename T::bits B; typedef typename T::acc A; typedef Pack16<T> P;
  enum { U = P::N >= 8 ? 2 : UNROLL }; /* 1- and 2-byte types: keep the accumulators in registers */
  bool vec = aligned16(out);
  for (int r = 0; r < n; r++) vec = vec && aligned16(src[r]);
  for (int k = 0; k < nalso; k++) vec = vec && aligned16(also[k]);
  uint64_t done = 0;
  if (PAIR && vec && n == 2) {
    const uint64_t nv = len / 16;
    for (uint64_t base = threadIdx.x; base < nv; base += (uint64_t)blockDim.x * U) {
      P v0[U], v1[U];
#pragma unroll
      for (int u = 0; u < U; u++) {
        uint64_t i = base + (uint64_t)u * blockDim.x;
        if (i < nv) v0[u].u = me == 0 ? ld16<false>(src[0] + i * 16) : ld16<HOST>(src[0] + i * 16);
      }
#pragma unroll
      for (int u = 0; u < U; u++) {
        uint64_t i = base + (uint64_t)u * blockDim.x;
        if (i < nv) v1[u].u = me == 1 ? ld16<false>(src[1] + i * 16) : ld16<HOST>(src[1] + i * 16);
      }
#pragma unroll
      for (int u = 0; u < U; u++) {
        uint64_t i = base + (uint64_t)u * blockDim.x;
        if (i >= nv) continue;
#pragma unroll
        for (int e = 0; e < P::N; e++)
          v0[u].e[e] = T::st(finish<T>(op, apply<T>(op, T::ld(v0[u].e[e]), T::ld(v1[u].e[e])), 2));
        *(uint4 *)(out + i * 16) = v0[u].u; for (int k = 0; k < nalso; k++) *(uint4 *)(also[k] + i * 16) = v0[u].u;
      }
    }
    done = nv * 16;
  } else if (vec) {
    const uint64_t nv = len / 16;
    for (uint64_t base = threadIdx.x; base < nv; base += (uint64_t)blockDim.x * U) {
      A acc[U][P::N];
      P v[U];
#pragma unroll
      for (int u = 0; u < U; u++) {
        uint64_t i = base + (uint64_t)u * blockDim.x;
        if (i < nv) v[u].u = me == 0 ? ld16<false>(src[0] + i * 16) : ld16<HOST>(src[0] + i * 16);
      }
#pragma unroll
      for (int u = 0; u < U; u++)
#pragma unroll
        for (int e = 0; e < P::N; e++) acc[u][e] = T::ld(v[u].e[e]);
      for (int r = 1; r < n; r++) {
#pragma unroll
        for (int u = 0; u < U; u++) {
          uint64_t i = base + (uint64_t)u * blockDim.x;
          if (i < nv) v[u].u = r == me ? ld16<false>(src[r] + i * 16) : ld16<HOST>(src[r] + i * 16);
        }
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
          for (int e = 0; e < P::N; e++) acc[u][e] = apply<T>(op, acc[u][e], T::ld(v[u].e[e]));
      }
#pragma unroll
      for (int u = 0; u < U; u++) {
        uint64_t i = base + (uint64_t)u * blockDim.x;
        if (i >= nv) continue;
#pragma unroll
        for (int e = 0; e < P::N; e++) v[u].e[e] = T::st(finish<T>(op, acc[u][e], n));
        *(uint4 *)(out + i * 16) = v[u].u;
        for (int k = 0; k < nalso; k++) *(uint4 *)(also[k] + i * 16) = v[u].u;
      }
    }
    done = nv * 16;
  }
  for (uint64_t o = done + threadIdx.x * sizeof(B); o < len; o += (uint64_t)blockDim.x * sizeof(B)) {
    A x = T::ld(me == 0 ? ld_elem<B, false>(src[0] + o) : ld_elem<B, HOST>(src[0] + o));
    for (int r = 1; r < n; r++)
      x = apply<T>(op, x, T::ld(r == me ? ld_elem<B, false>(src[r] + o) : ld_elem<B, HOST>(src[r] + o)));
    B y = T::st(finish<T>(op, x, n));
    *(B *)(out + o) = y;
    for (int k = 0; k < nalso; k++) *(B *)(also[k] + o) = y;
  }
}

// Dispatch on the element type.
// One launch of KERNEL<T>(arg) on `stream`, returning its status; when the
// arguments say pdl, as a programmatic dependent launch: the grid may be scheduled while the stream's previous
// kernel finishes, and waits for it in pdl_start() (griddepcontrol.wait).
static inline int pdl_of(const p2pk_ar_args &a) { return a.pdl; }
static inline int pdl_of(const p2pk_p2p_args &pa) { return pa.a.pdl; }
static inline int pdl_of(const p2pk_lr_args &) { return 0; } /* between copies: plain */

template <class Arg>
static cudaError_t launch(void (*kernel)(Arg), int blocks, int threads, cudaStream_t stream,
                          const Arg &arg) {
  if (!pdl_of(arg)) {
    kernel<<<blocks, threads, 0, stream>>>(arg);
    return cudaGetLastError();
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)blocks);
  cfg.blockDim = dim3((unsigned)threads);
  cfg.stream = stream;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = at;
  cfg.numAttrs = 1;
  cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, arg);
  cudaGetLastError(); /* the launch's error is returned, not left behind */
  return e;
}

#define P2PK_FOR_DTYPE(dtype, KERNEL, blocks, threads, stream, arg)                               \
  switch (dtype) {                                                                                \
    case P2PKIT_FLOAT32: e = p2pk::launch(KERNEL<p2pk::TF32>, blocks, threads, stream, arg); break; \
    case P2PKIT_FLOAT16: e = p2pk::launch(KERNEL<p2pk::TF16>, blocks, threads, stream, arg); break; \
    case P2PKIT_BFLOAT16: e = p2pk::launch(KERNEL<p2pk::TBF16>, blocks, threads, stream, arg); break; \
    case P2PKIT_FLOAT64: e = p2pk::launch(KERNEL<p2pk::TF64>, blocks, threads, stream, arg); break; \
    case P2PKIT_INT32: e = p2pk::launch(KERNEL<p2pk::TI32>, blocks, threads, stream, arg); break; \
    case P2PKIT_INT64: e = p2pk::launch(KERNEL<p2pk::TI64>, blocks, threads, stream, arg); break; \
    case P2PKIT_UINT8: e = p2pk::launch(KERNEL<p2pk::TU8>, blocks, threads, stream, arg); break; \
    default: return cudaErrorInvalidValue;                                                        \
  }

// Dispatch on the element width of the copy loops (send/recv: 8, 4, 2 or 1).
#define P2PK_FOR_ESIZE(esize, KERNEL, blocks, threads, stream, arg)                               \
  switch (esize) {                                                                                \
    case 8: e = p2pk::launch(KERNEL<p2pk::TI64>, blocks, threads, stream, arg); break; \
    case 4: e = p2pk::launch(KERNEL<p2pk::TI32>, blocks, threads, stream, arg); break; \
    case 2: e = p2pk::launch(KERNEL<p2pk::TF16>, blocks, threads, stream, arg); break; \
    case 1: e = p2pk::launch(KERNEL<p2pk::TU8>, blocks, threads, stream, arg); break; \
    default: return cudaErrorInvalidValue;                                                        \
  }

/* Load every element width's instance of KERNEL (as P2PK_PRELOAD_DTYPES). */
#define P2PK_PRELOAD_ESIZES(KERNEL, err)                                              \
  do {                                                                                \
    cudaFuncAttributes fa_;                                                           \
    if ((err) == cudaSuccess) (err) = cudaFuncGetAttributes(&fa_, KERNEL<p2pk::TI64>); \
    if ((err) == cudaSuccess) (err) = cudaFuncGetAttributes(&fa_, KERNEL<p2pk::TI32>); \
    if ((err) == cudaSuccess) (err) = cudaFuncGetAttributes(&fa_, KERNEL<p2pk::TF16>); \
    if ((err) == cudaSuccess) (err) = cudaFuncGetAttributes(&fa_, KERNEL<p2pk::TU8>);  \
  } while (0)

/* Load every dtype's instance of KERNEL now (cudaFuncGetAttributes forces the
 * module in), so that no first launch happens inside a caller's stream
 * capture: with lazy loading that would load a module mid-capture. */
#define P2PK_PRELOAD_DTYPES(KERNEL, err)                                              \
  do {                                                                                \
    cudaFuncAttributes fa_;                                                           \
    if ((err) == cudaSuccess) (err) = cudaFuncGetAttributes(&fa_, KERNEL<p2pk::TF32>); \
    if ((err) == cudaSuccess) (err) = cudaFuncGetAttributes(&fa_, KERNEL<p2pk::TF16>); \
    if ((err) == cudaSuccess) (err) = cudaFuncGetAttributes(&fa_, KERNEL<p2pk::TBF16>); \
    if ((err) == cudaSuccess) (err) = cudaFuncGetAttributes(&fa_, KERNEL<p2pk::TF64>); \
    if ((err) == cudaSuccess) (err) = cudaFuncGetAttributes(&fa_, KERNEL<p2pk::TI32>); \
    if ((err) == cudaSuccess) (err) = cudaFuncGetAttributes(&fa_, KERNEL<p2pk::TI64>); \
    if ((err) == cudaSuccess) (err) = cudaFuncGetAttributes(&fa_, KERNEL<p2pk::TU8>);  \
  } while (0)

}  // namespace p2pk

#endif
