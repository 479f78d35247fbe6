/* SPDX-License-Identifier: BSD-3-Clause */
// p2p_kernel: every send and receive of one group on one communicator over
// P2P, each operation on its own blocks: LL up to P2PK_P2P_LL_MAX bytes,
// the one-shot mailbox pipeline (prim_simple.cuh) above.
#include "coll/kernels/prim_simple.cuh"

namespace p2pk {

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
}  // namespace p2pk

extern "C" cudaError_t p2pk_launch_p2p(const p2pk_p2p_args *pa, int esize, int blocks, int threads,
                                       cudaStream_t stream) {
  cudaError_t e = cudaSuccess;
  P2PK_FOR_ESIZE(esize, p2pk::p2p_kernel, blocks, threads, stream, *pa)
  return e;
}
extern "C" cudaError_t p2pk_preload_sendrecv(void) {
  cudaError_t e = cudaSuccess;
  P2PK_PRELOAD_ESIZES(p2pk::p2p_kernel, e);
  return e;
}
