/* SPDX-License-Identifier: BSD-3-Clause */
/* The rendezvous's messages, packed and parsed without sockets (so a fuzzer
 * and the unit tests reach every parser): a 12-byte header (type, tag,
 * payload length; network byte order), the payload, and for the sealed
 * types a 32-byte HMAC-SHA256 of the frame under the link's key.
 * docs/rendezvous.md describes the exchange. */
#ifndef P2PK_BOOTSTRAP_WIRE_H
#define P2PK_BOOTSTRAP_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "core/crypto.h"

#define P2PK_BOOT_MAGIC "P2PKBOOT"
#define P2PK_BOOT_VERSION 3u
#define P2PK_BOOT_HDR 12
#define P2PK_BOOT_NONCE 32
#define P2PK_BOOT_HELLO_BYTES (8 + 5 * 4 + P2PK_BOOT_NONCE)
#define P2PK_BOOT_CHALLENGE_BYTES P2PK_BOOT_NONCE /* rank 0's nonce, nothing else */
#define P2PK_BOOT_VERDICT_MAX (4 + 255)
#define P2PK_BOOT_MAX_PAYLOAD (64u << 20)

/* Unsealed: HELLO (rank -> rank 0), CHALLENGE (rank 0 -> rank: a nonce),
 * PROOF (the rank's, then rank 0's once it has checked the rank's), REJECT
 * (rank 0 -> rank, before it admits it). Sealed, once a rank is admitted:
 * WELCOME, ABORT, DATA. */
enum {
  P2PK_MSG_HELLO = 1,
  P2PK_MSG_WELCOME = 2,
  P2PK_MSG_REJECT = 3,
  P2PK_MSG_ABORT = 4,
  P2PK_MSG_DATA = 5,
  P2PK_MSG_CHALLENGE = 6,
  P2PK_MSG_PROOF = 7,
};
/* Why rank 0 refused a connection (REJECT's code). */
enum { P2PK_REJ_VERSION = 1, P2PK_REJ_SECRET = 2, P2PK_REJ_NRANKS = 3, P2PK_REJ_RANK = 4,
       P2PK_REJ_DUP = 5, P2PK_REJ_USER = 6 };
/* Which way a message goes; part of every MAC, so none can be sent back. */
enum { P2PK_TO_RANK = 0, P2PK_TO_ROOT = 1 };
#define P2PK_HELLO_SECRET 1u /* HELLO flag: this rank has a job secret */

typedef struct {
  uint32_t type, tag, len;
} p2pk_boot_hdr;

typedef struct {
  uint32_t version, nranks, rank, pid, flags;
  unsigned char nonce[P2PK_BOOT_NONCE];
} p2pk_boot_hello;

void p2pk_boot_put32(unsigned char *p, uint32_t v);
uint32_t p2pk_boot_get32(const unsigned char *p);

void p2pk_boot_hdr_pack(unsigned char out[P2PK_BOOT_HDR], uint32_t type, uint32_t tag, uint32_t len);
/* 0 when the header names a known type with a length that type may have
 * (HELLO, CHALLENGE, PROOF exactly theirs; a verdict at most
 * P2PK_BOOT_VERDICT_MAX; WELCOME none; DATA at most P2PK_BOOT_MAX_PAYLOAD),
 * else -1: the receiver must not read a length it did not expect. */
int p2pk_boot_hdr_parse(const unsigned char in[P2PK_BOOT_HDR], p2pk_boot_hdr *h);
/* 1 for the types that carry a MAC after the payload. */
int p2pk_boot_sealed(uint32_t type);

void p2pk_boot_hello_pack(const p2pk_boot_hello *h, unsigned char out[P2PK_BOOT_HELLO_BYTES]);
/* 0 when `in` is a hello of this protocol's version; else -1 with the
 * reason in `why`. */
int p2pk_boot_hello_parse(const unsigned char *in, size_t len, p2pk_boot_hello *h, char *why,
                          size_t wlen);

/* A REJECT or ABORT payload: the code and the sentence (made printable:
 * it comes from the network). -1 when shorter than the code. */
int p2pk_boot_verdict_parse(const unsigned char *in, size_t len, uint32_t *code, char *text,
                            size_t tlen);
/* Packs code and text (cut at 255 bytes); returns the payload's length. */
size_t p2pk_boot_verdict_pack(unsigned char out[P2PK_BOOT_VERDICT_MAX], uint32_t code,
                              const char *text);

/* What rank 0 (P2PK_TO_RANK) or a rank (P2PK_TO_ROOT) proves with the job
 * secret: HMAC(secret, label, direction, the two nonces, the rank count and
 * the rank). And the key of the link the exchange opened. 0 ok, -1
 * when libcrypto cannot compute it. */
int p2pk_boot_proof(const char *secret, int dir, const unsigned char nc[P2PK_BOOT_NONCE],
                    const unsigned char ns[P2PK_BOOT_NONCE], uint32_t nranks, uint32_t rank,
                    unsigned char out[P2PK_MAC_BYTES]);
int p2pk_boot_link_key(const char *secret, const unsigned char nc[P2PK_BOOT_NONCE],
                          const unsigned char ns[P2PK_BOOT_NONCE], uint32_t nranks, uint32_t rank,
                          unsigned char key[P2PK_MAC_BYTES]);

/* One link's seal: the link key and each direction's message count. */
typedef struct {
  int on; /* 0: no secret, no MACs (the frames still carry a zeroed one) */
  unsigned char key[P2PK_MAC_BYTES];
  uint64_t sent, received;
} p2pk_boot_seal;

/* The MAC of a sealed frame: HMAC(key, direction, sequence number, header,
 * payload). Zeroes when the seal is off. 0 ok, -1 when it cannot. */
int p2pk_boot_frame_mac(const p2pk_boot_seal *s, int dir, uint64_t seq,
                        const unsigned char hdr[P2PK_BOOT_HDR], const void *payload, size_t len,
                        unsigned char mac[P2PK_MAC_BYTES]);
/* 1 when `mac` is the frame's (always 1 with the seal off), compared in
 * constant time. */
int p2pk_boot_frame_ok(const p2pk_boot_seal *s, int dir, uint64_t seq,
                       const unsigned char hdr[P2PK_BOOT_HDR], const void *payload, size_t len,
                       const unsigned char mac[P2PK_MAC_BYTES]);

#endif
