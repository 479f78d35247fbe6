// Collective kernels over P2P (NVLink or PCIe peer access). The LL and
// one-shot kernels run every collective but send/recv from the call's plan
// (peer masks, strides, reduce or copy: plan.h); all-reduce is the plan
// "every peer both ways, reduce". p2p_kernel runs a group's sends and
// receives. One launch per call; no host work between steps, so a call can
// be captured in a CUDA graph and replayed: every sequence number and mailbox counter lives in device
// memory and only kernels advance it.
//
//  ll_kernel       one-shot push, LL protocol: each 16-byte store carries 8
//                  bytes of data and the call's sequence number twice, so the
//                  reader polls the data itself (no fence, no flag round trip).
//                  Two LL slots alternate by sequence number: a peer cannot be
//                  two calls ahead, because each call needs everyone's data.
//  oneshot_kernel  push, chunked: block b copies its chunks of the input into
//                  every peer's mailbox (16-byte stores), raises the mailbox's
//                  ready counter, then reduces the peers' chunks from its own
//                  mailboxes in rank order and hands the mailbox back.
//  twoshot_kernel  reduce-scatter then all-gather, chunked: each chunk is cut
//                  in n shards; rank k reduces shard k and pushes the result
//                  to every peer (straight into the peer's output when it
//                  allows, else into an all-gather mailbox the peer copies out).
//                  Its rooted form runs broadcast (scatter, then each owner
//                  forwards its shard) and reduce (reduce-scatter, then each
//                  owner sends its shard to the root) on more than 2 ranks.
#include "coll/kern_common.cuh"

namespace p2pk {

// Phase timestamps of the LL kernel (P2PKIT_KTRACE builds only), per call
// parity; what bench_launch prints (p2pk_ktrace_read). KT_ENTRY .. KT_END:
// block 0, thread 0. KT_PUSH_ALL, KT_DATA_ALL, KT_END_ALL: the latest over
// the grid of a thread's last push, a thread's last line arriving and a
// block's end (atomicMax: calls of one parity follow each other, so the
// maximum is the last call's).
enum { KT_ENTRY, KT_DEP, KT_PROLOGUE, KT_PUSHED, KT_HEADER, KT_DATA, KT_END,
       KT_PUSH_ALL, KT_DATA_ALL, KT_END_ALL, KT_N };
#ifdef P2PK_KTRACE
__device__ unsigned long long ktrace[2][KT_N];
#define KT_MARK(t) ((t) = globaltimer())
#else
#define KT_MARK(t) ((void)0)
#endif

// ---------------------------------------------------------------- LL -------

template <class T>
__device__ __forceinline__ uint2 load_line(const char *in, uint64_t line, uint64_t nbytes) {
  typedef typename T::bits B;
  const uint64_t o = line * 8;
  const char *p = in + o;
  if (o + 8 <= nbytes && ((uintptr_t)p & 7) == 0) return *(const uint2 *)p;
  Pack8<T> v;
  v.u = make_uint2(0, 0);
#pragma unroll
  for (int e = 0; e < Pack8<T>::N; e++)
    if (o + e * sizeof(B) < nbytes) v.e[e] = *(const B *)(p + e * sizeof(B));
  return v.u;
}

template <class T>
__device__ __forceinline__ void store_line(char *out, uint64_t line, uint64_t nbytes, uint2 val) {
  typedef typename T::bits B;
  const uint64_t o = line * 8;
  char *p = out + o;
  if (o + 8 <= nbytes && ((uintptr_t)p & 7) == 0) {
    *(uint2 *)p = val;
    return;
  }
  Pack8<T> v;
  v.u = val;
#pragma unroll
  for (int e = 0; e < Pack8<T>::N; e++)
    if (o + e * sizeof(B) < nbytes) *(B *)(p + e * sizeof(B)) = v.e[e];
}

__device__ __forceinline__ bool has(uint32_t mask, int p) { return (mask >> p) & 1u; }

// The arguments the LL and LL128 kernels use, read into registers (pinned:
// the compiler may not load them again) before the dependency wait, so the
// loads overlap it; each kernel takes them apart with a structured binding.
struct Pinned {
  const char *in;
  char *out, *local;
  uint64_t in_stride, out_stride, timeout_ns;
  uint32_t send_mask, recv_mask, hdr0, hdr1;
  int reduce, self_copy, op;
  __device__ __forceinline__ explicit Pinned(const p2pk_ar_args &a)
      : in(pin((const char *)a.in)), out(pin((char *)a.out)), local(pin(a.local)),
        in_stride(pin(a.in_stride)), out_stride(pin(a.out_stride)), timeout_ns(pin(a.timeout_ns)),
        send_mask(pin(a.send_mask)), recv_mask(pin(a.recv_mask)), hdr0(pin(a.hdr0)),
        hdr1(pin(a.hdr1)), reduce(pin(a.reduce)), self_copy(pin(a.self_copy)), op(pin(a.op)) {}
};

// Every collective except send/recv: push this rank's share for each peer in
// send_mask, then either reduce everyone's lines in rank order (reduce) or
// copy each received line to that peer's output block.
template <class T>
__global__ void __launch_bounds__(512 + 32) ll_kernel(const __grid_constant__ p2pk_ar_args a) {
  typedef typename T::acc A;
  unsigned long long kt[KT_N] = {0};
  (void)kt;
  KT_MARK(kt[KT_ENTRY]);
#ifdef P2PK_KTRACE
  __shared__ unsigned long long s_push, s_data;
  if (threadIdx.x == 0) s_push = s_data = 0; // published by the prologue's barrier
#endif
  // Every argument this kernel uses is read into registers (peers' scratch
  // into shared memory) before it waits for the stream's previous kernel, so
  // those loads overlap the wait (P2PKIT_PDL) instead of each costing a trip
  // to memory on the critical path (P2PKIT_KTRACE runs: ~1.3 us of a 3.4 us
  // 8-byte all-reduce went to loads between the prologue and the first
  // store). The LL kernel only runs over P2P (a.stage is null).
  __shared__ char *s_peer[P2PK_COLL_MAX_RANKS];
  const int n = pin(a.nranks), me = pin(a.rank);
  if ((int)threadIdx.x < n) s_peer[threadIdx.x] = a.peer[threadIdx.x];
  const uint64_t nbytes = pin(a.count) * sizeof(typename T::bits);
  const uint64_t nlines = (nbytes + 7) / 8;
  // Lines go to the first blockDim.x - 32 threads of each block; the extra
  // warp holds none, and its first thread in block 0 sends and checks the
  // header, so that wait runs beside the data waits, never before one (a
  // line on the header thread cost ~1 us in graph replay).
  const unsigned lt = blockDim.x - 32; // threads with lines
  const uint64_t first = threadIdx.x < lt ? (uint64_t)blockIdx.x * lt + threadIdx.x : nlines;
  const uint64_t stride = (uint64_t)gridDim.x * lt;
  const auto [in, out, local, in_stride, out_stride, timeout_ns, send_mask, recv_mask, hdr0, hdr1,
              reduce, self_copy, op] = Pinned(a);
  const uint64_t ll_off = pin(a.lay.ll_off), ll_bytes = pin(a.lay.ll_bytes);
  // This thread's first line of the input (the same for every peer when
  // there are no per-peer shares), loaded right after the wait so its
  // latency overlaps the prologue's; it is pushed and reduced from registers.
  pdl_start();
  KT_MARK(kt[KT_DEP]);
  const bool pre = first < nlines && !in_stride;
  const uint2 v_first = pre ? load_line<T>(in, first, nbytes) : make_uint2(0, 0);
  uint32_t seq;
  if (!prologue_at(a, local, &seq)) return; // its barrier also publishes s_peer
  KT_MARK(kt[KT_PROLOGUE]);
  Waiter w(timeout_ns);
  const uint32_t slot = seq & 1;
  // The header thread (see lt above). A mismatch raises abort, which every
  // other wait sees.
  const bool leader = blockIdx.x == 0 && threadIdx.x == lt;
  if (leader) header_send_from(a, seq, s_peer, n, me, hdr0, hdr1, nullptr);
  for (uint64_t i = first; send_mask && i < nlines; i += stride) {
    uint2 v = pre && i == first ? v_first : load_line<T>(in, i, nbytes);
    for (int k = 1; k < n; k++) {
      int p = me + k < n ? me + k : me + k - n;
      if (!has(send_mask, p)) continue;
      if (in_stride) v = load_line<T>(in + p * in_stride, i, nbytes);
      char *dst = s_peer[p] + ll_off + ((uint64_t)slot * (n - 1) + pslot(me, p, n)) * ll_bytes + i * 16;
      st_vol_v4(dst, make_uint4(v.x, seq, v.y, seq));
    }
  }
  KT_MARK(kt[KT_PUSHED]);
  // Every rank waits for every peer's header, so no rank starts call s + 2
  // (and overwrites this call's slot) before everyone finished call s.
  if (leader) header_check_at(a, seq, w, n, me, local, hdr0, hdr1, nullptr);
  KT_MARK(kt[KT_HEADER]);
  const char *mine = local + ll_off + (uint64_t)slot * (n - 1) * ll_bytes;
  const char *own = in + me * in_stride;
  for (uint64_t i = first; i < nlines; i += stride) {
    if (!reduce) {
      for (int r = 0; r < n; r++) {
        if (!has(recv_mask, r)) continue;
        uint4 x = ll_wait(a, w, mine + (uint64_t)pslot(r, me, n) * ll_bytes + i * 16, seq, r);
        store_line<T>(out + r * out_stride, i, nbytes, make_uint2(x.x, x.z));
      }
      if (self_copy) store_line<T>(out + me * out_stride, i, nbytes, load_line<T>(own, i, nbytes));
      continue;
    }
    if (!recv_mask) break;
    Pack8<T> v;
    A acc[Pack8<T>::N];
    for (int r = 0; r < n; r++) {
      if (r == me) {
        v.u = pre && i == first ? v_first : load_line<T>(own, i, nbytes);
      } else {
        uint4 x = ll_wait(a, w, mine + (uint64_t)pslot(r, me, n) * ll_bytes + i * 16, seq, r);
        v.u = make_uint2(x.x, x.z);
        if (i == first) KT_MARK(kt[KT_DATA]);
        KT_MARK(kt[KT_DATA_ALL]);
      }
#pragma unroll
      for (int e = 0; e < Pack8<T>::N; e++)
        acc[e] = r == 0 ? T::ld(v.e[e]) : apply<T>(op, acc[e], T::ld(v.e[e]));
    }
#pragma unroll
    for (int e = 0; e < Pack8<T>::N; e++) v.e[e] = T::st(finish<T>(op, acc[e], n));
    store_line<T>(out, i, nbytes, v.u);
  }
#ifdef P2PK_KTRACE
  KT_MARK(kt[KT_END]);
  // Thread 0 times the data; the header thread adds when it saw the header.
  __shared__ unsigned long long s_hdr;
  if (leader) s_hdr = kt[KT_HEADER];
  atomicMax(&s_push, kt[KT_PUSHED]);
  atomicMax(&s_data, kt[KT_DATA_ALL]);
  __syncthreads();
  if (threadIdx.x == 0) {
    atomicMax(&ktrace[slot][KT_PUSH_ALL], s_push);
    atomicMax(&ktrace[slot][KT_DATA_ALL], s_data);
    atomicMax(&ktrace[slot][KT_END_ALL], globaltimer());
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    kt[KT_HEADER] = s_hdr;
    for (int k = 0; k < KT_PUSH_ALL; k++) ktrace[slot][k] = kt[k];
  }
#endif
}

// --------------------------------------------------------------- LL128 ---
//
// Mid sizes. A 128-byte line carries 120 payload bytes and an 8-byte flag
// (the call's sequence number twice). Eight consecutive lanes of a warp own a
// line, 16 bytes each; the eighth holds 8 payload bytes and the flag. The
// line is written by one store instruction of the warp (the warp is
// reconverged first) and read by one load instruction, and the protocol
// rests on what NCCL's LL128 rests on: over NVLink such a 128-byte store
// reaches the reader's memory whole, so a reader whose flag lane sees this
// call's number sees the other 120 bytes of this call too. No fence and no
// separate flag: like LL, the data is polled itself, with 94% of each store
// payload instead of 50%. Two slots alternate by sequence number, as in LL,
// in an area of its own (an LL reader could mistake stale LL128 payload for
// its flags). P2PKIT_PROTO=ll or simple, or P2PKIT_LL128_MAX=0, avoid it.

// Bytes [o, o + len) of a buffer of nbytes (len 16, or 8 for the flag lane),
// as two 8-byte halves; past the end reads as zero.
template <class T>
__device__ __forceinline__ uint4 load_part(const char *in, uint64_t o, bool flag_lane,
                                           uint64_t nbytes) {
  const uint2 lo = load_line<T>(in, o / 8, nbytes);
  const uint2 hi = flag_lane ? make_uint2(0, 0) : load_line<T>(in, o / 8 + 1, nbytes);
  return make_uint4(lo.x, lo.y, hi.x, hi.y);
}

template <class T>
__device__ __forceinline__ void store_part(char *out, uint64_t o, bool flag_lane, uint64_t nbytes,
                                           uint4 v) {
  store_line<T>(out, o / 8, nbytes, make_uint2(v.x, v.y));
  if (!flag_lane) store_line<T>(out, o / 8 + 1, nbytes, make_uint2(v.z, v.w));
}

// Warp-collective: every lane of the warp calls it with the same peer. Each
// group of 8 lanes reloads each of its U lines until its flag lane sees
// `seq`; every line's load is issued before any is checked, so one poll
// waits out one load latency, not U. A group with no line (act false) only
// takes part. If the wait gives up, the last data read (the kernel has
// failed; the host reports it).
template <int U>
__device__ __forceinline__ void ll128_wait_n(const p2pk_ar_args &a, Waiter &w,
                                             const char *const (&src)[U], uint32_t seq, int peer,
                                             const bool (&act)[U], bool flag_lane, unsigned gmask,
                                             uint4 (&x)[U]) {
  bool need[U];
#pragma unroll
  for (int u = 0; u < U; u++) need[u] = act[u], x[u] = make_uint4(0, 0, 0, 0);
  for (;;) {
#pragma unroll
    for (int u = 0; u < U; u++)
      if (need[u]) x[u] = ld_vol_v4(src[u]);
    unsigned any = 0;
#pragma unroll
    for (int u = 0; u < U; u++) {
      const bool bad = need[u] && flag_lane && (x[u].z != seq || x[u].w != seq);
      const unsigned m = __ballot_sync(0xffffffffu, bad);
      if (!(m & gmask)) need[u] = false;
      any |= m;
    }
    if (!any) break;
    int give = 0;
    if ((threadIdx.x & 31) == 0) give = w.poll(a, peer);
    if (__shfl_sync(0xffffffffu, give, 0)) break;
  }
}

// Every collective but send/recv, as ll_kernel: push this rank's share to
// each peer in send_mask, then reduce in rank order or copy what arrives.
// A warp owns the same lines for both: 4 lines per pass (one per group of 8
// lanes), passes wstride lines apart. A warp works U passes an iteration:
// it pushes passes j .. j + U - 1 and takes in passes j - U .. j - 1, with
// every load of the iteration (inputs, own shares, polled lines) in flight
// together, so a warp with many passes (a capped grid) is not bound by one
// load latency per pass. Receiving overlaps its
// own and its neighbours' pushing instead of starting when all of them are
// done. Line L of block b only ever waits for block b of the peers, which
// pushes passes j .. j + U - 1 before it waits for j - U .. j - 1: no
// cycle.
template <class T, int U>
__device__ __forceinline__ void ll128_run(const p2pk_ar_args &a) {
  typedef typename T::acc A;
  constexpr int N = Pack8<T>::N;
  // Arguments into registers before the dependency wait (see ll_kernel).
  __shared__ char *s_peer[P2PK_COLL_MAX_RANKS];
  const int n = pin(a.nranks), me = pin(a.rank);
  if ((int)threadIdx.x < n) s_peer[threadIdx.x] = a.peer[threadIdx.x];
  const uint64_t nbytes = pin(a.count) * sizeof(typename T::bits);
  const uint64_t nlines = (nbytes + P2PK_LL128_DATA - 1) / P2PK_LL128_DATA;
  // Warps with lines: all but the last (the header's, as in ll_kernel).
  // Lane `part` of a group holds bytes 16 * part of its line.
  const unsigned lt = blockDim.x - 32, wpb = lt / 32;
  const unsigned lane = threadIdx.x & 31, part = lane & 7, sub = lane >> 3;
  const bool flag_lane = part == 7;
  const unsigned gmask = 0xffu << (sub * 8);
  const uint64_t wfirst = ((uint64_t)blockIdx.x * wpb + threadIdx.x / 32) * 4;
  const uint64_t wstride = (uint64_t)gridDim.x * wpb * 4;
  const bool has_lines = threadIdx.x < lt;
  const uint64_t passes = has_lines && wfirst < nlines ? (nlines - wfirst + wstride - 1) / wstride : 0;
  const uint64_t po = flag_lane ? 112 : part * 16; // payload offset in the line
  const auto [in, out, local, in_stride, out_stride, timeout_ns, send_mask, recv_mask, hdr0, hdr1,
              reduce, self_copy, op] = Pinned(a);
  const uint64_t off = pin(a.lay.ll128_off), lbytes = pin(a.lay.ll128_bytes);
  pdl_start();
  uint32_t seq;
  if (!prologue_at(a, local, &seq)) return; // its barrier also publishes s_peer
  Waiter w(timeout_ns);
  const uint32_t slot = seq & 1;
  const bool leader = blockIdx.x == 0 && threadIdx.x == lt;
  if (leader) {
    header_send_from(a, seq, s_peer, n, me, hdr0, hdr1, nullptr);
    // Every rank waits for every peer's header (see ll_kernel).
    header_check_at(a, seq, w, n, me, local, hdr0, hdr1, nullptr);
  }
  const char *mine = local + off + (uint64_t)slot * (n - 1) * lbytes + part * 16;
  const char *own = in + me * in_stride;
  // Reduce waits for every peer; copy for those in recv_mask (and itself).
  const bool recv_any = reduce ? recv_mask != 0 : (recv_mask || self_copy);
  for (uint64_t j = 0; j < passes + U; j += U) {
    // Loads first (these passes' inputs, the own shares of the passes taken
    // in), so they are in flight together; the stores and polls below are
    // volatile asm, which loads cannot pass.
    uint64_t L[U], R[U];
    bool push[U], take[U];
    uint4 v[U], mv[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      L[u] = wfirst + (j + u) * wstride + sub;
      R[u] = j >= U ? L[u] - U * wstride : nlines;
      push[u] = j + u < passes && L[u] < nlines && send_mask;
      take[u] = R[u] < nlines;
      v[u] = mv[u] = make_uint4(0, 0, 0, 0);
      if (push[u] && !in_stride)
        v[u] = load_part<T>(in, L[u] * P2PK_LL128_DATA + po, flag_lane, nbytes);
      if (take[u] && (reduce || self_copy))
        mv[u] = load_part<T>(own, R[u] * P2PK_LL128_DATA + po, flag_lane, nbytes);
    }
    if (j < passes && send_mask) {
      for (int k = 1; k < n; k++) {
        const int p = me + k < n ? me + k : me + k - n;
        if (!has(send_mask, p)) continue;
        char *base = s_peer[p] + off + ((uint64_t)slot * (n - 1) + pslot(me, p, n)) * lbytes +
                     part * 16;
#pragma unroll
        for (int u = 0; u < U; u++) {
          if (push[u] && in_stride)
            v[u] = load_part<T>(in + p * in_stride, L[u] * P2PK_LL128_DATA + po, flag_lane, nbytes);
          if (flag_lane) v[u].z = v[u].w = seq;
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
          // One store instruction per line: reconverge the warp first (the
          // loads above branch on alignment and on the end of the buffer).
          __syncwarp();
          if (push[u]) st_vol_v4(base + L[u] * P2PK_LL128_LINE, v[u]);
        }
      }
    }
    if (j == 0 || !recv_any) continue;
    if (!reduce) {
      for (int r = 0; r < n; r++) {
        if (!has(recv_mask, r)) continue;
        const char *src[U];
        uint4 x[U];
#pragma unroll
        for (int u = 0; u < U; u++) src[u] = mine + (uint64_t)pslot(r, me, n) * lbytes + R[u] * P2PK_LL128_LINE;
        ll128_wait_n<U>(a, w, src, seq, r, take, flag_lane, gmask, x);
#pragma unroll
        for (int u = 0; u < U; u++)
          if (take[u]) store_part<T>(out + r * out_stride, R[u] * P2PK_LL128_DATA + po, flag_lane, nbytes, x[u]);
      }
#pragma unroll
      for (int u = 0; u < U; u++)
        if (self_copy && take[u])
          store_part<T>(out + me * out_stride, R[u] * P2PK_LL128_DATA + po, flag_lane, nbytes, mv[u]);
      continue;
    }
    A acc[U][2 * N];
    for (int r = 0; r < n; r++) {
      uint4 x[U];
      if (r != me) {
        const char *src[U];
#pragma unroll
        for (int u = 0; u < U; u++) src[u] = mine + (uint64_t)pslot(r, me, n) * lbytes + R[u] * P2PK_LL128_LINE;
        ll128_wait_n<U>(a, w, src, seq, r, take, flag_lane, gmask, x);
      } else {
#pragma unroll
        for (int u = 0; u < U; u++) x[u] = mv[u];
      }
#pragma unroll
      for (int u = 0; u < U; u++) {
        Pack8<T> v0, v1;
        v0.u = make_uint2(x[u].x, x[u].y);
        v1.u = make_uint2(x[u].z, x[u].w);
#pragma unroll
        for (int e = 0; e < N; e++) {
          acc[u][e] = r == 0 ? T::ld(v0.e[e]) : apply<T>(op, acc[u][e], T::ld(v0.e[e]));
          acc[u][N + e] = r == 0 ? T::ld(v1.e[e]) : apply<T>(op, acc[u][N + e], T::ld(v1.e[e]));
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      Pack8<T> v0, v1;
#pragma unroll
      for (int e = 0; e < N; e++) {
        v0.e[e] = T::st(finish<T>(op, acc[u][e], n));
        v1.e[e] = T::st(finish<T>(op, acc[u][N + e], n));
      }
      if (take[u])
        store_part<T>(out, R[u] * P2PK_LL128_DATA + po, flag_lane, nbytes,
                      make_uint4(v0.u.x, v0.u.y, v1.u.x, v1.u.y));
    }
  }
}

// Two instances. One pass an iteration (56 registers, so more blocks fit an
// SM) for grids the GPU holds whole. Two passes, their loads together
// (84 - 96 registers), for grids under a cap (p2pk_coll_choose: within one
// block per SM), where each warp works many passes and one pass's load
// latency bounds it (2x H200, process per GPU:
// 16 blocks, 16 MiB 197 us against 255; 64 blocks 62.3 against 70.3;
// uncapped the two-pass loop was 4 - 16% slower at 1 - 16 MiB).
template <class T>
__global__ void __launch_bounds__(512 + 32) ll128_kernel(const __grid_constant__ p2pk_ar_args a) {
  ll128_run<T, 1>(a);
}
template <class T>
__global__ void __launch_bounds__(512 + 32) ll128x2_kernel(const __grid_constant__ p2pk_ar_args a) {
  ll128_run<T, 2>(a);
}

// ------------------------------------------------------- chunked protocols ---

// What one block knows about its share of the call: which bytes move where
// (from the call's arguments, or from one send/recv operation), and which
// steps are this block's.
struct Plan {
  int n, me, G, b, S;
  uint64_t nbytes, K;
  uint64_t steps; // chunks (one-shot) or chunk groups of n shards (two-shot)
  uint64_t J;     // steps of this block: b, b + G, b + 2G, ...
  const char *in;
  char *out;
  uint32_t send, recv; // peer masks
  uint64_t in_stride, out_stride;
  int reduce, self_copy;
  __device__ void set_steps(uint64_t step_bytes) {
    steps = (nbytes + step_bytes - 1) / step_bytes;
    J = steps > (uint64_t)b ? (steps - 1 - b) / G + 1 : 0;
  }
  __device__ Plan(const p2pk_ar_args &a, uint64_t step_bytes, uint64_t esize) {
    n = a.nranks;
    me = a.rank;
    G = gridDim.x;
    b = blockIdx.x;
    S = a.slots;
    nbytes = a.count * esize;
    K = a.chunk;
    in = (const char *)a.in;
    out = (char *)a.out;
    send = a.send_mask;
    recv = a.recv_mask;
    in_stride = a.in_stride;
    out_stride = a.out_stride;
    reduce = a.reduce;
    self_copy = a.self_copy;
    set_steps(step_bytes);
  }
  // One point-to-point operation on blocks [op.base, op.base + op.blocks).
  __device__ Plan(const p2pk_ar_args &a, const p2pk_p2p_op &op) {
    n = a.nranks;
    me = a.rank;
    G = op.blocks;
    b = (int)blockIdx.x - op.base;
    S = a.slots;
    nbytes = op.bytes;
    K = op.chunk;
    in = op.send ? op.buf : nullptr;
    out = op.send ? nullptr : op.buf;
    send = op.send ? 1u << op.peer : 0u;
    recv = op.send ? 0u : 1u << op.peer;
    in_stride = out_stride = 0;
    reduce = self_copy = 0;
    set_steps(K);
  }
  __device__ int box(uint64_t j) const { return b * S + (int)(j % S); }
  __device__ uint64_t step(uint64_t j) const { return (uint64_t)b + j * G; }
};

__device__ __forceinline__ int peer_k(int me, int k, int n) { return me + k < n ? me + k : me + k - n; }
__device__ __forceinline__ uint64_t *agtok(const p2pk_ar_args &a, char *base, int src, int m) {
  return (uint64_t *)(base + a.lay.agtok_off) + (uint64_t)src * P2PK_COLL_MAILBOXES + m;
}

// Thread 0: wait until every peer drained my previous use of its mailbox m
// of `set`. The block then fills the mailboxes; push_done() raises them.
__device__ bool wait_free(const p2pk_ar_args &a, Waiter &w, const Plan &P, uint32_t mask, int set,
                          int m) {
  for (int k = 1; k < P.n; k++) {
    int p = peer_k(P.me, k, P.n);
    if (!has(mask, p)) continue;
    uint64_t used = *counter(a.local, a.lay.sent_off, set, p, P.n, m);
    if (!wait_geq(a, w, counter(a.local, a.lay.freed_off, set, p, P.n, m), used, p)) return false;
  }
  return true;
}

// Thread 0, after a barrier that follows the block's stores: one more use of
// every peer's mailbox m of `set` is ready (release: covers the whole block's
// stores, ordered by the barrier).
__device__ void push_done(const p2pk_ar_args &a, const Plan &P, uint32_t mask, int set, int m,
                          const int *direct) {
  for (int k = 1; k < P.n; k++) {
    int p = peer_k(P.me, k, P.n);
    if (!has(mask, p)) continue;
    uint64_t *sc = counter(a.local, a.lay.sent_off, set, p, P.n, m);
    uint64_t s = *sc + 1;
    *sc = s;
    st_rel(counter(a.peer[p], a.lay.ready_off, set, P.me, P.n, m),
           s | (direct && direct[p] ? P2PK_READY_DIRECT : 0));
  }
}

// Thread 0: wait for the next use of my mailbox m of `set` from every peer.
// `direct` (optional) receives whether the peer wrote into my output itself.
__device__ bool wait_ready(const p2pk_ar_args &a, Waiter &w, const Plan &P, uint32_t mask, int set,
                           int m, int *direct) {
  for (int k = 1; k < P.n; k++) {
    int p = peer_k(P.me, k, P.n);
    if (!has(mask, p)) continue;
    uint64_t want = *counter(a.local, a.lay.recvd_off, set, p, P.n, m) + 1;
    const uint64_t *rf = counter(a.local, a.lay.ready_off, set, p, P.n, m);
    uint64_t v;
    while (((v = ld_acq(rf)) & ~P2PK_READY_DIRECT) < want)
      if (w.poll(a, p)) return false;
    if (direct) direct[p] = (v & P2PK_READY_DIRECT) != 0;
  }
  return true;
}

// Thread 0, after a barrier that follows the block's reads of mailbox m:
// hand it back to every peer.
__device__ void drain_done(const p2pk_ar_args &a, const Plan &P, uint32_t mask, int set, int m) {
  for (int k = 1; k < P.n; k++) {
    int p = peer_k(P.me, k, P.n);
    if (!has(mask, p)) continue;
    uint64_t *rc = counter(a.local, a.lay.recvd_off, set, p, P.n, m);
    uint64_t r = *rc + 1;
    *rc = r;
    st_rel(counter(a.peer[p], a.lay.freed_off, set, P.me, P.n, m), r);
  }
}

// Block 0 checks the header before anything else; other blocks start at once
// (a mismatch makes block 0 raise abort, which every wait sees). The verdict
// has a shared word of its own: the block's s_ok is written again by thread
// 0 at the first push, with no barrier between that write and the other
// threads' reads of this verdict (compute-sanitizer racecheck found that
// race on s_ok).
__device__ bool start_call(const p2pk_ar_args &a, uint32_t seq, Waiter &w) {
  __shared__ int s_start;
  if (threadIdx.x == 0) {
    s_start = 1;
    if (blockIdx.x == 0) {
      header_send(a, seq);
      s_start = header_check(a, seq, w);
    }
  }
  __syncthreads();
  return s_start != 0;
}

// ------------------------------------------------------------- one-shot ---

// Push this block's chunk j to every peer in P.send (each peer's share of
// the input when in_stride is set).
template <class T>
__device__ bool os_push(const p2pk_ar_args &a, Waiter &w, const Plan &P, uint64_t j, int *s_ok) {
  if (!P.send) return true;
  const uint64_t off = P.step(j) * P.K;
  const uint64_t len = min(P.K, P.nbytes - off);
  const int m = P.box(j);
  if (threadIdx.x == 0) *s_ok = wait_free(a, w, P, P.send, 0, m);
  __syncthreads();
  if (!*s_ok) return false;
  for (int k = 1; k < P.n; k++) {
    int p = peer_k(P.me, k, P.n);
    if (!has(P.send, p)) continue;
    copy_chunk<T>(mailbox(a, a.peer[p], 0, pslot(P.me, p, P.n), m),
                  P.in + p * P.in_stride + off, len);
  }
  __syncthreads();
  if (threadIdx.x == 0) push_done(a, P, P.send, 0, m, nullptr);
  return true;
}

// Chunk j of what arrives: reduced in rank order with this rank's share into
// out, or copied to each sender's output block (plus this rank's own block).
template <class T>
__device__ bool os_reduce(const p2pk_ar_args &a, Waiter &w, const Plan &P, uint64_t j, int *s_ok,
                          const char **s_src) {
  if (!P.recv && !P.self_copy) return true;
  const uint64_t off = P.step(j) * P.K;
  const uint64_t len = min(P.K, P.nbytes - off);
  const int m = P.box(j);
  const char *own = P.in + P.me * P.in_stride + off;
  if (threadIdx.x == 0) {
    *s_ok = wait_ready(a, w, P, P.recv, 0, m, nullptr);
    for (int r = 0; r < P.n; r++)
      s_src[r] = r == P.me ? own : mailbox(a, a.local, 0, pslot(r, P.me, P.n), m);
  }
  __syncthreads();
  if (!*s_ok) return false;
  if (P.reduce) {
    reduce_chunk<T, false>(a.op, P.n, P.me, P.out + off, s_src, nullptr, 0, len);
  } else {
    for (int r = 0; r < P.n; r++)
      if (has(P.recv, r) || (r == P.me && P.self_copy))
        copy_chunk<T>(P.out + r * P.out_stride + off, s_src[r], len);
  }
  __syncthreads();
  if (threadIdx.x == 0) drain_done(a, P, P.recv, 0, m);
  return true;
}

// The pipeline of one block: push chunk j + 1 before taking chunk j in, so
// the peer's data is in flight while this block works.
template <class T>
__device__ void os_run(const p2pk_ar_args &a, Waiter &w, const Plan &P, int *s_ok,
                       const char **s_src) {
  if (P.J > 0 && !os_push<T>(a, w, P, 0, s_ok)) return;
  for (uint64_t j = 0; j < P.J; j++) {
    if (j + 1 < P.J && !os_push<T>(a, w, P, j + 1, s_ok)) return;
    if (!os_reduce<T>(a, w, P, j, s_ok, s_src)) return;
  }
}

template <class T>
__global__ void __launch_bounds__(512) oneshot_kernel(const __grid_constant__ p2pk_ar_args a) {
  __shared__ int s_ok;
  __shared__ const char *s_src[P2PK_COLL_MAX_RANKS];
  uint32_t seq;
  if (!prologue(a, &seq)) return;
  Waiter w(a);
  if (!start_call(a, seq, w)) return;
  const Plan P(a, a.chunk, sizeof(typename T::bits));
  os_run<T>(a, w, P, &s_ok, s_src);
}

// ------------------------------------------------------------- send/recv ---

// A send or receive of at most P2PK_P2P_LL_MAX bytes: LL lines (8 data
// bytes and the message number twice per 16-byte store) into the receiver's
// LL area for this pair. The message is cut in regions of
// P2PK_P2P_LL_PER_BLOCK bytes; region r has lines of its own and its own
// message count on both ends (so the ends agree whatever the grid), and two
// slots alternating by that count; block bb of the operation takes regions
// bb, bb + G, ... The receiver polls the lines themselves (one trip over the
// link) and acknowledges each region in the sender's memory; the sender
// waits for the acknowledgement of use k - 2 before it reuses that slot for
// use k (usually long there: no round trip). The loads a block waits on
// before its first store go out together: the communicator's abort flag
// beside the first region's count, and every thread's first input line
// before the count and the acknowledgement are known.
template <class T>
__device__ void p2p_ll(const p2pk_ar_args &a, Waiter &w, const p2pk_p2p_op &o) {
  __shared__ uint32_t s_k;
  __shared__ int s_good;
  p2pk_dev_ctrl *c = ctrl_of(a.local);
  const int n = a.nranks, me = a.rank, p = o.peer;
  const int src = o.send ? me : p, dst = o.send ? p : me;
  const uint64_t nreg = (o.bytes + P2PK_P2P_LL_PER_BLOCK - 1) / P2PK_P2P_LL_PER_BLOCK;
  char *area = (o.send ? a.peer[p] : a.local) + a.lay.p2p_ll_off +
               (uint64_t)pslot(src, dst, n) * 2 * (2 * (uint64_t)P2PK_P2P_LL_MAX);
  for (uint64_t r = (uint64_t)blockIdx.x - o.base; r < nreg; r += o.blocks) {
    const uint64_t off = r * P2PK_P2P_LL_PER_BLOCK;
    const uint64_t len = min((uint64_t)P2PK_P2P_LL_PER_BLOCK, o.bytes - off);
    const uint64_t nlines = (len + 7) / 8;
    char *buf = o.buf + off;
    const bool pre = o.send && threadIdx.x < nlines;
    const uint2 v_first = pre ? load_line<T>(buf, threadIdx.x, len) : make_uint2(0, 0);
    if (threadIdx.x == 0) {
      const int32_t dead = r == (uint64_t)blockIdx.x - o.base ? ld_vol_i32(&c->abort) : 0;
      note_abort(a, dead);
      uint64_t k = (o.send ? c->p2p_llsent[p][r] : c->p2p_llrecvd[p][r]) + 1;
      s_good = dead == 0;
      /* The acknowledgement: a plain poll (see the receiver's post below). */
      if (s_good && o.send && k > 2) s_good = wait_geq<false>(a, w, &c->p2p_llack[p][r], k - 2, p);
      s_k = (uint32_t)k;
    }
    __syncthreads();
    if (!s_good) return;
    const uint32_t k = s_k;
    char *lines = area + (uint64_t)(k & 1) * (2 * (uint64_t)P2PK_P2P_LL_MAX) + 2 * off;
    if (o.send) {
      for (uint64_t i = threadIdx.x; i < nlines; i += blockDim.x) {
        uint2 v = pre && i == threadIdx.x ? v_first : load_line<T>(buf, i, len);
        st_vol_v4(lines + i * 16, make_uint4(v.x, k, v.y, k));
      }
      if (threadIdx.x == 0) c->p2p_llsent[p][r] = k;
    } else {
      for (uint64_t i = threadIdx.x; i < nlines; i += blockDim.x) {
        uint4 x = ll_wait(a, w, lines + i * 16, k, p);
        if (x.y != k || x.w != k) {
          s_good = 0;
          break;
        }
        store_line<T>(buf, i, len, make_uint2(x.x, x.z));
      }
      __syncthreads();
      if (!s_good) return;
      if (threadIdx.x == 0) {
        c->p2p_llrecvd[p][r] = k;
        /* A plain store, as NCCL's LL posts its head: it only says this
         * region's lines were read, and every thread's loads of them
         * returned before the barrier above (their values went to the
         * buffer), so the sender cannot overwrite a line still being read;
         * the buffer's own stores need no order towards the sender. The
         * sender polls it plainly too: its stores wait on the poll's
         * value. A release store and acquire polls cost 0.6 us a call
         * under a CUDA graph (2x H200, process per GPU: 2.82 against 2.22
         * us at 8 B, 4.09 against 2.93 at 32 KiB). */
        st_vol_u64(&ctrl_of(a.peer[p])->p2p_llack[me][r], k);
      }
    }
    __syncthreads(); /* s_k and s_good are reused for the next region */
  }
}

// Every send and receive of one group on this communicator, each on its own
// blocks. No sequence number, no header: only the two ranks of a pair take
// part, and the pair's counters order its operations (LL and mailbox
// messages each in their own order; both ends pick the protocol by size).
template <class T>
__global__ void __launch_bounds__(512) p2p_kernel(const __grid_constant__ p2pk_p2p_args pa) {
  __shared__ int s_ok;
  __shared__ const char *s_src[P2PK_COLL_MAX_RANKS];
  const p2pk_ar_args &a = pa.a;
  /* LL operations check the abort flag beside their first count (p2p_ll);
   * the others through p2p_op_of. */
  const int i = p2p_op_index(pa);
  if (pa.op[i].bytes <= P2PK_P2P_LL_MAX) {
    pdl_start();
    if ((int)blockIdx.x >= pa.op[i].base + pa.op[i].blocks) return;
    Waiter w(a);
    p2p_ll<T>(a, w, pa.op[i]);
    return;
  }
  const p2pk_p2p_op *op = p2p_op_of(pa, i);
  if (!op) return;
  Waiter w(a);
  const Plan P(a, *op);
  os_run<T>(a, w, P, &s_ok, s_src);
}

// ------------------------------------------------------------- two-shot ---

// What every step of one two-shot call shares, read from the kernel's
// arguments where it is used (constant memory: no registers held across the
// loop, which sits at the 128-register bound): how many shards a step has,
// who owns which (coll_dev.h's p2pk_ts_shard: rank k owns shard k for
// all-reduce; the rooted form's owners are the ranks but the root), and the
// second phase's peers (plan.h's p2pk_coll_plan_twoshot).
struct TwoShot {
  const p2pk_ar_args &a;
  __device__ explicit TwoShot(const p2pk_ar_args &args) : a(args) {}
  __device__ int R() const { return a.ts_root1 - 1; } // the root (-1: all-reduce)
  __device__ int nsh() const { return p2pk_ts_nshards(a.nranks, R()); }
  __device__ int shard(int r) const { return p2pk_ts_shard(a.nranks, R(), r); }
  __device__ int mine() const { return shard(a.rank); } // -1: the root, no shard
  __device__ uint32_t send2() const { return a.send2_mask; }
  __device__ uint32_t recv2() const { return a.recv2_mask; }
  // The owner's result also goes to its own output (a rooted reduce's is the root's alone).
  __device__ bool own_out() const { return !(a.ts_root1 > 0 && a.reduce); }
};

// Step j: nsh shards of at most K bytes each.
struct Shards {
  uint64_t off, L, s;
  __device__ Shards(const Plan &P, int nsh, uint64_t j) {
    off = P.step(j) * P.K * nsh;
    L = min(P.K * nsh, P.nbytes - off);
    s = p2pk_ts_shard_bytes(L, nsh); // <= K: K is a multiple of 16
  }
  __device__ uint64_t at(int k) const { return off + (uint64_t)k * s; }
  __device__ uint64_t len(int k) const {
    uint64_t b = (uint64_t)k * s;
    return b >= L ? 0 : min(s, L - b);
  }
};

// First phase: each peer in P.send gets its shard of step j (in its set-0
// mailbox), with where this rank's output is (agtok), so an owner that
// sends its result back may write it there directly.
template <class T>
__device__ bool ts_push(const p2pk_ar_args &a, Waiter &w, const Plan &P, const TwoShot &ts,
                        uint64_t j, int *s_ok) {
  if (!P.send) return true;
  const Shards sh(P, ts.nsh(), j);
  const int m = P.box(j);
  if (threadIdx.x == 0) *s_ok = wait_free(a, w, P, P.send, 0, m);
  __syncthreads();
  if (!*s_ok) return false;
  for (int k = 1; k < P.n; k++) {
    int p = peer_k(P.me, k, P.n);
    if (!has(P.send, p)) continue;
    const int q = ts.shard(p);
    copy_chunk<T>(mailbox(a, a.peer[p], 0, pslot(P.me, p, P.n), m), P.in + sh.at(q), sh.len(q));
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int k = 1; k < P.n; k++) {
      int p = peer_k(P.me, k, P.n);
      if (has(P.send, p)) st_vol_u64(agtok(a, a.peer[p], P.me, m), a.out_token);
    }
    push_done(a, P, P.send, 0, m, nullptr);
  }
  return true;
}

// Second phase, on the owner of a shard: reduce what arrived in rank order
// with this rank's own shard (or, broadcast, take the root's), into its own
// output and to every peer in send2: straight into a peer's output when that
// peer's first-phase push said where it is, else into its set-1 mailbox. The
// rooted form's root has no shard: it only copies its own buffer (broadcast
// out of place).
template <class T>
__device__ bool ts_reduce(const p2pk_ar_args &a, Waiter &w, const Plan &P, const TwoShot &ts,
                          uint64_t j, int *s_ok, const char **s_src, char **s_also, int *s_nalso,
                          int *s_direct) {
  const Shards sh(P, ts.nsh(), j);
  if (ts.mine() < 0) {
    if (P.self_copy) copy_chunk<T>(P.out + sh.off, P.in + sh.off, sh.L);
    return true;
  }
  const int q = ts.mine();
  const int m = P.box(j);
  if (threadIdx.x == 0) {
    bool ok = wait_ready(a, w, P, P.recv, 0, m, nullptr) && wait_free(a, w, P, ts.send2(), 1, m);
    int na = 0;
    for (int k = 1; k < P.n && ok; k++) {
      int p = peer_k(P.me, k, P.n);
      if (has(P.recv, p)) s_src[p] = mailbox(a, a.local, 0, pslot(p, P.me, P.n), m);
      if (!has(ts.send2(), p)) continue;
      char *dst = nullptr;
      if (has(P.recv, p)) { /* only a peer that pushed to me this step left a token */
        uint64_t tok = ld_vol_u64(agtok(a, a.local, p, m));
        if (a.direct == 1 && tok) dst = (char *)tok + sh.at(q);
        else if (a.direct == 2 && tok && tok == a.out_token && a.peer_out[p]) dst = a.peer_out[p] + sh.at(q);
      }
      s_direct[p] = dst != nullptr;
      s_also[na++] = dst ? dst : mailbox(a, a.peer[p], 1, pslot(P.me, p, P.n), m);
    }
    s_src[P.me] = P.in + sh.at(q);
    *s_nalso = na;
    *s_ok = ok;
  }
  __syncthreads();
  if (!*s_ok) return false;
  const uint64_t len = sh.len(q);
  if (!P.reduce)
    copy_multi<T>(P.out + sh.at(q), s_src[ts.R()], s_also, *s_nalso, len);
  else if (ts.own_out())
    reduce_chunk<T, false>(a.op, P.n, P.me, P.out + sh.at(q), s_src, s_also, *s_nalso, len);
  else if (*s_nalso > 0)
    reduce_chunk<T, false>(a.op, P.n, P.me, s_also[0], s_src, s_also + 1, *s_nalso - 1, len);
  __syncthreads();
  if (threadIdx.x == 0) {
    drain_done(a, P, P.recv, 0, m);
    push_done(a, P, ts.send2(), 1, m, s_direct);
  }
  return true;
}

// Third phase: the other owners' results of step j from my set-1 mailboxes
// (unless they wrote them into my output themselves).
template <class T>
__device__ bool ts_gather(const p2pk_ar_args &a, Waiter &w, const Plan &P, const TwoShot &ts,
                          uint64_t j, int *s_ok, int *s_direct) {
  if (!ts.recv2()) return true;
  const Shards sh(P, ts.nsh(), j);
  const int m = P.box(j);
  if (threadIdx.x == 0) *s_ok = wait_ready(a, w, P, ts.recv2(), 1, m, s_direct);
  __syncthreads();
  if (!*s_ok) return false;
  for (int k = 1; k < P.n; k++) {
    int p = peer_k(P.me, k, P.n);
    if (!has(ts.recv2(), p) || s_direct[p]) continue;
    const int q = ts.shard(p);
    copy_chunk<T>(P.out + sh.at(q), mailbox(a, a.local, 1, pslot(p, P.me, P.n), m), sh.len(q));
  }
  __syncthreads();
  if (threadIdx.x == 0) drain_done(a, P, ts.recv2(), 1, m);
  return true;
}

template <class T>
__global__ void __launch_bounds__(512) twoshot_kernel(const __grid_constant__ p2pk_ar_args a) {
  __shared__ int s_ok, s_nalso;
  __shared__ const char *s_src[P2PK_COLL_MAX_RANKS];
  __shared__ char *s_also[P2PK_COLL_MAX_RANKS];
  __shared__ int s_direct[P2PK_COLL_MAX_RANKS];
  __shared__ int s_gdirect[P2PK_COLL_MAX_RANKS];
  uint32_t seq;
  if (!prologue(a, &seq)) return;
  Waiter w(a);
  if (!start_call(a, seq, w)) return;
  const TwoShot ts(a);
  const Plan P(a, (uint64_t)a.chunk * ts.nsh(), sizeof(typename T::bits));
  if (P.J > 0 && !ts_push<T>(a, w, P, ts, 0, &s_ok)) return;
  for (uint64_t j = 0; j < P.J; j++) {
    if (j + 1 < P.J && !ts_push<T>(a, w, P, ts, j + 1, &s_ok)) return;
    if (!ts_reduce<T>(a, w, P, ts, j, &s_ok, s_src, s_also, &s_nalso, s_direct)) return;
    if (j > 0 && !ts_gather<T>(a, w, P, ts, j - 1, &s_ok, s_gdirect)) return;
  }
  if (P.J > 0) ts_gather<T>(a, w, P, ts, P.J - 1, &s_ok, s_gdirect);
}

// ------------------------------------------------------- local reduce ---

// out = reduce of src[0..n) in rank order; block b takes the b-th 16-byte
// aligned slice, so every pointer keeps its alignment class.
template <class T>
__global__ void __launch_bounds__(512) local_reduce_kernel(const __grid_constant__ p2pk_lr_args a) {
  __shared__ const char *s_src[P2PK_COLL_MAX_RANKS];
  const uint64_t per = ((a.bytes + gridDim.x - 1) / gridDim.x + 15) & ~(uint64_t)15;
  const uint64_t lo = (uint64_t)blockIdx.x * per;
  if (lo >= a.bytes) return;
  const uint64_t len = min(per, a.bytes - lo);
  // One source: a plain copy (the copies out of the landing slots), 16
  // bytes a thread and access, no per-element work. Against the one-source
  // reduce it was (2x H200, process per GPU, same call):
  // all-reduce 1 GiB 2893 against 2929 us, all-to-all 2 GiB 2873 against
  // 2905, broadcast 1 GiB 2773 against 2782, send/recv 512 MiB 1450
  // against 1464 (1 GiB the same).
  if (a.n == 1) {
    copy_chunk<T>(a.out + lo, a.src[0] + lo, len);
    return;
  }
  if ((int)threadIdx.x < a.n) s_src[threadIdx.x] = a.src[threadIdx.x] + lo;
  __syncthreads();
  if (a.pair) reduce_chunk<T, false, true>(a.op, a.n, a.me, a.out + lo, s_src, nullptr, 0, len);
  else reduce_chunk<T, false>(a.op, a.n, a.me, a.out + lo, s_src, nullptr, 0, len);
}

// The copy engines over P2P with a process per GPU (ce_p2p_mp.c): the
// copies run on streams, and the ranks tell each other about them through
// counters in their scratch, written and waited for by one thread here
// (with the collective kernels' timeout and abort rules, so a peer that
// died makes this rank's error words say so and the streams go on).
__global__ void cep_sync_kernel(const __grid_constant__ p2pk_ar_args a,
                                const __grid_constant__ p2pk_cep_steps st) {
  if (threadIdx.x != 0) return;
  Waiter w(a);
  for (int i = 0; i < st.n; i++) {
    const p2pk_cep_step &s = st.s[i];
    if (s.kind == P2PK_CEP_POST) {
      if (s.hdr) st_vol_u64(s.hdr, s.hv);
      st_rel(s.ctr, s.v);
      continue;
    }
    if (s.kind == P2PK_CEP_SET) {
      st_vol_u64(s.ctr, s.v);
      continue;
    }
    if (s.kind == P2PK_CEP_WAIT_EQ) {
      if (!wait_eq(a, w, s.ctr, s.v, s.peer)) return;
    } else if (!wait_geq(a, w, s.ctr, s.v, s.peer)) {
      return;
    }
    if (s.hdr && ld_vol_u64(s.hdr) != s.hv) {
      fail(a, P2PK_DERR_MISMATCH, s.peer);
      return;
    }
  }
}

}  // namespace p2pk

extern "C" cudaError_t p2pk_launch_local_reduce(int dtype, const p2pk_lr_args *a, int blocks,
                                                cudaStream_t stream) {
  cudaError_t e = cudaSuccess;
  P2PK_FOR_DTYPE(dtype, p2pk::local_reduce_kernel, blocks, 512, stream, *a)
  return e;
}

static_assert(sizeof(p2pk_ar_args) + sizeof(p2pk_cep_steps) <= 4000, "cep_sync_kernel's parameters");

extern "C" cudaError_t p2pk_launch_cep_sync(const p2pk_ar_args *a, const p2pk_cep_steps *st,
                                            cudaStream_t stream) {
  p2pk::cep_sync_kernel<<<1, 32, 0, stream>>>(*a, *st);
  return cudaGetLastError();
}

extern "C" cudaError_t p2pk_launch_allreduce_p2p(const p2pk_ar_args *a, int blocks, int threads,
                                                 cudaStream_t stream) {
  cudaError_t e = cudaSuccess;
  if (a->proto == P2PK_PROTO_LL) { // one more warp: the header's (ll_kernel)
    P2PK_FOR_DTYPE(a->dtype, p2pk::ll_kernel, blocks, threads + 32, stream, *a)
  } else if (a->proto == P2PK_PROTO_LL128 && a->ll128_x2) { // likewise
    P2PK_FOR_DTYPE(a->dtype, p2pk::ll128x2_kernel, blocks, threads + 32, stream, *a)
  } else if (a->proto == P2PK_PROTO_LL128) {
    P2PK_FOR_DTYPE(a->dtype, p2pk::ll128_kernel, blocks, threads + 32, stream, *a)
  } else if (a->algo == P2PK_ALGO_TWOSHOT) {
    P2PK_FOR_DTYPE(a->dtype, p2pk::twoshot_kernel, blocks, threads, stream, *a)
  } else {
    P2PK_FOR_DTYPE(a->dtype, p2pk::oneshot_kernel, blocks, threads, stream, *a)
  }
  return e;
}

extern "C" cudaError_t p2pk_launch_p2p(const p2pk_p2p_args *pa, int esize, int blocks, int threads,
                                       cudaStream_t stream) {
  cudaError_t e = cudaSuccess;
  P2PK_FOR_ESIZE(esize, p2pk::p2p_kernel, blocks, threads, stream, *pa)
  return e;
}

extern "C" int p2pk_ktrace_read(unsigned long long out[2][10]) {
#ifdef P2PK_KTRACE
  static_assert(p2pk::KT_N == 10, "p2pk_ktrace_read's shape");
  return cudaMemcpyFromSymbol(out, p2pk::ktrace, sizeof p2pk::ktrace) == cudaSuccess ? 0 : -1;
#else
  (void)out;
  return -1;
#endif
}

// Blocks per SM, the least over data types but uint8 (below).
extern "C" int p2pk_ll128_per_sm(int threads) {
  int best = 1 << 30;
  const int bt = threads + 32; // with the header warp
#define P2PK_OCC_(T)                                                                   \
  do {                                                                                 \
    int nb = 0;                                                                        \
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, p2pk::ll128_kernel<T>, bt, 0) != \
        cudaSuccess) {                                                                 \
      cudaGetLastError();                                                              \
      return 0;                                                                        \
    }                                                                                  \
    if (nb < best) best = nb;                                                          \
  } while (0)
  P2PK_OCC_(p2pk::TF32);
  P2PK_OCC_(p2pk::TF16);
  P2PK_OCC_(p2pk::TBF16);
  P2PK_OCC_(p2pk::TF64);
  P2PK_OCC_(p2pk::TI32);
  P2PK_OCC_(p2pk::TI64);
  // Not uint8: its instance takes 92 registers where the others take 56,
  // which would halve every type's grid (bounding it to 60 instead made
  // float16 and bfloat16 spill). A uint8 grid may run in two waves.
#undef P2PK_OCC_
  return best;
}

extern "C" cudaError_t p2pk_preload_allreduce_p2p(void) {
  cudaError_t e = cudaSuccess;
  P2PK_PRELOAD_ESIZES(p2pk::p2p_kernel, e);
  P2PK_PRELOAD_DTYPES(p2pk::ll_kernel, e);
  P2PK_PRELOAD_DTYPES(p2pk::ll128_kernel, e);
  P2PK_PRELOAD_DTYPES(p2pk::ll128x2_kernel, e);
  P2PK_PRELOAD_DTYPES(p2pk::local_reduce_kernel, e);
  {
    cudaFuncAttributes fa;
    if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, p2pk::cep_sync_kernel);
  }
  P2PK_PRELOAD_DTYPES(p2pk::oneshot_kernel, e);
  P2PK_PRELOAD_DTYPES(p2pk::twoshot_kernel, e);
  return e;
}
