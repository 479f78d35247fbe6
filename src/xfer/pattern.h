/* SPDX-License-Identifier: BSD-3-Clause */
/* The data pattern every test and benchmark writes and checks: a hash of
 * (seed, iteration, offset), so a stale or shifted byte never matches and
 * no buffer is ever all zeros. The same code runs on the host and the GPU. */
#ifndef P2PK_PATTERN_H
#define P2PK_PATTERN_H

#include <stdint.h>

#ifdef __CUDACC__
#define P2PK_HD __host__ __device__ __forceinline__
#else
#define P2PK_HD static inline
#endif

P2PK_HD uint32_t p2pk_pattern_word(uint64_t seed, uint32_t iter, uint64_t word) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ULL ^ ((uint64_t)iter << 40) ^ word;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return (uint32_t)x;
}

P2PK_HD unsigned char p2pk_pattern_byte(uint64_t seed, uint32_t iter, uint64_t offset) {
  return (unsigned char)(p2pk_pattern_word(seed, iter, offset >> 2) >> (8 * (offset & 3)));
}

#endif
