/* SPDX-License-Identifier: BSD-3-Clause */
// LL primitives (8 data bytes and the call's sequence number twice per
// 16-byte store, so the reader polls the data itself): one 8-byte line of a
// buffer in and out, a peer mask's bit, and the arguments the LL and LL128
// kernels pin in registers before their dependency wait.
#ifndef P2PK_PRIM_LL_CUH
#define P2PK_PRIM_LL_CUH

#include "coll/kernels/kern_common.cuh"

namespace p2pk {

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

}  // namespace p2pk

#endif
