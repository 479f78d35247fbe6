/* SPDX-License-Identifier: BSD-3-Clause */
/* The launches of the collective kernels over P2P, by protocol and
 * algorithm, and the preload of every kernel instance over P2P. */
#include "coll/coll_dev.h"

cudaError_t p2pk_launch_allreduce_p2p(const p2pk_ar_args *a, int blocks, int threads,
                                      cudaStream_t stream) {
  if (a->proto == P2PK_PROTO_LL) return p2pk_launch_ll(a, blocks, threads, stream);
  if (a->proto == P2PK_PROTO_LL128) return p2pk_launch_ll128(a, blocks, threads, stream);
  if (a->algo == P2PK_ALGO_TWOSHOT) return p2pk_launch_twoshot(a, blocks, threads, stream);
  return p2pk_launch_oneshot(a, blocks, threads, stream);
}

cudaError_t p2pk_preload_allreduce_p2p(void) {
  cudaError_t e = p2pk_preload_sendrecv();
  if (e == cudaSuccess) e = p2pk_preload_ll();
  if (e == cudaSuccess) e = p2pk_preload_ll128();
  if (e == cudaSuccess) e = p2pk_preload_reduce();
  if (e == cudaSuccess) e = p2pk_preload_oneshot();
  if (e == cudaSuccess) e = p2pk_preload_twoshot();
  return e;
}
