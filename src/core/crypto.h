/* SPDX-License-Identifier: BSD-3-Clause */
/* HMAC-SHA256, random bytes and a constant-time comparison from OpenSSL's
 * libcrypto, loaded at run time (P2PKIT_CRYPTO_LIB; libcrypto.so.3, then
 * libcrypto.so when that setting is not given) with our own prototypes of
 * the few functions used: no build-time or load-time dependency, as for
 * NVML and NCCL. The rendezvous needs it only when a job secret is set. */
#ifndef P2PK_CRYPTO_H
#define P2PK_CRYPTO_H

#include <stddef.h>

#define P2PK_MAC_BYTES 32 /* HMAC-SHA256 */

/* 0 when libcrypto is loaded (at the first call that succeeds; a failure is
 * tried again next time); -1 with one sentence in `why` (what was tried and
 * dlerror's words) otherwise. */
int p2pk_crypto_load(char *why, size_t len);

/* One piece of a message that is MACed as the concatenation of its pieces. */
typedef struct {
  const void *p;
  size_t n;
} p2pk_bytes;

/* HMAC-SHA256 of parts[0] || parts[1] || ... under `key`. 0 ok, -1 when
 * libcrypto is not loaded or a call failed (out is then zeroed). */
int p2pk_hmac_sha256(const void *key, size_t keylen, const p2pk_bytes *parts, int nparts,
                     unsigned char out[P2PK_MAC_BYTES]);
/* n bytes from OpenSSL's generator. 0 ok, -1 when it cannot give them. */
int p2pk_random_bytes(void *buf, size_t n);
/* 1 when a and b hold the same n bytes, in time independent of where they
 * differ (CRYPTO_memcmp); 0 otherwise, and when libcrypto is not loaded. */
int p2pk_ct_equal(const void *a, const void *b, size_t n);

#endif
