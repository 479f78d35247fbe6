/* SPDX-License-Identifier: BSD-3-Clause */
/* The rendezvous's messages: see bootstrap_wire.h. */
#include "coll/rdv/bootstrap_wire.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "core/text.h"

#define LABEL "p2pkit rendezvous 3"
enum { ROLE_ROOT_PROOF = 1, ROLE_RANK_PROOF = 2, ROLE_LINK = 3, ROLE_FRAME = 4 };

void p2pk_boot_put32(unsigned char *p, uint32_t v) {
  uint32_t n = htonl(v);
  memcpy(p, &n, 4);
}

uint32_t p2pk_boot_get32(const unsigned char *p) {
  uint32_t n;
  memcpy(&n, p, 4);
  return ntohl(n);
}

void p2pk_boot_hdr_pack(unsigned char out[P2PK_BOOT_HDR], uint32_t type, uint32_t tag, uint32_t len) {
  p2pk_boot_put32(out, type);
  p2pk_boot_put32(out + 4, tag);
  p2pk_boot_put32(out + 8, len);
}

int p2pk_boot_hdr_parse(const unsigned char in[P2PK_BOOT_HDR], p2pk_boot_hdr *h) {
  h->type = p2pk_boot_get32(in);
  h->tag = p2pk_boot_get32(in + 4);
  h->len = p2pk_boot_get32(in + 8);
  switch (h->type) {
    case P2PK_MSG_HELLO: return h->len == P2PK_BOOT_HELLO_BYTES && h->tag == 0 ? 0 : -1;
    case P2PK_MSG_CHALLENGE: return h->len == P2PK_BOOT_CHALLENGE_BYTES && h->tag == 0 ? 0 : -1;
    case P2PK_MSG_PROOF: return h->len == P2PK_MAC_BYTES && h->tag == 0 ? 0 : -1;
    case P2PK_MSG_WELCOME: return h->len == 0 && h->tag == 0 ? 0 : -1;
    case P2PK_MSG_REJECT:
    case P2PK_MSG_ABORT: return h->len >= 4 && h->len <= P2PK_BOOT_VERDICT_MAX && h->tag == 0 ? 0 : -1;
    case P2PK_MSG_DATA: return h->len <= P2PK_BOOT_MAX_PAYLOAD ? 0 : -1;
    default: return -1;
  }
}

int p2pk_boot_sealed(uint32_t type) {
  return type == P2PK_MSG_WELCOME || type == P2PK_MSG_ABORT || type == P2PK_MSG_DATA;
}

void p2pk_boot_hello_pack(const p2pk_boot_hello *h, unsigned char out[P2PK_BOOT_HELLO_BYTES]) {
  memcpy(out, P2PK_BOOT_MAGIC, 8);
  p2pk_boot_put32(out + 8, h->version);
  p2pk_boot_put32(out + 12, h->nranks);
  p2pk_boot_put32(out + 16, h->rank);
  p2pk_boot_put32(out + 20, h->pid);
  p2pk_boot_put32(out + 24, h->flags);
  memcpy(out + 28, h->nonce, P2PK_BOOT_NONCE);
}

int p2pk_boot_hello_parse(const unsigned char *in, size_t len, p2pk_boot_hello *h, char *why,
                          size_t wlen) {
  memset(h, 0, sizeof *h);
  if (len != P2PK_BOOT_HELLO_BYTES || memcmp(in, P2PK_BOOT_MAGIC, 8) != 0) {
    snprintf(why, wlen, "not a p2pkit rendezvous hello");
    return -1;
  }
  h->version = p2pk_boot_get32(in + 8);
  h->nranks = p2pk_boot_get32(in + 12);
  h->rank = p2pk_boot_get32(in + 16);
  h->pid = p2pk_boot_get32(in + 20);
  h->flags = p2pk_boot_get32(in + 24);
  memcpy(h->nonce, in + 28, P2PK_BOOT_NONCE);
  if (h->version != P2PK_BOOT_VERSION) {
    snprintf(why, wlen, "a p2pkit rendezvous of another version (got %u, want %u): every rank "
             "must run the same p2pkit", h->version, P2PK_BOOT_VERSION);
    return -1;
  }
  if (h->flags & ~P2PK_HELLO_SECRET) {
    snprintf(why, wlen, "unknown hello flags 0x%x", h->flags);
    return -1;
  }
  return 0;
}

int p2pk_boot_verdict_parse(const unsigned char *in, size_t len, uint32_t *code, char *text,
                            size_t tlen) {
  if (len < 4 || tlen == 0) return -1;
  *code = p2pk_boot_get32(in);
  size_t n = len - 4 < tlen - 1 ? len - 4 : tlen - 1;
  memcpy(text, in + 4, n);
  text[n] = '\0';
  p2pk_text_printable(text);
  return 0;
}

size_t p2pk_boot_verdict_pack(unsigned char out[P2PK_BOOT_VERDICT_MAX], uint32_t code,
                              const char *text) {
  size_t n = strlen(text);
  if (n > P2PK_BOOT_VERDICT_MAX - 4) n = P2PK_BOOT_VERDICT_MAX - 4;
  p2pk_boot_put32(out, code);
  memcpy(out + 4, text, n);
  return 4 + n;
}

/* HMAC(secret, LABEL, role, nc, ns, nranks, rank). */
static int keyed(const char *secret, unsigned char role, const unsigned char *nc,
                 const unsigned char *ns, uint32_t nranks, uint32_t rank, unsigned char *out) {
  unsigned char nr[8];
  p2pk_boot_put32(nr, nranks);
  p2pk_boot_put32(nr + 4, rank);
  const p2pk_bytes parts[] = {{LABEL, sizeof LABEL}, {&role, 1}, {nc, P2PK_BOOT_NONCE},
                              {ns, P2PK_BOOT_NONCE}, {nr, sizeof nr}};
  return p2pk_hmac_sha256(secret, strlen(secret), parts, 5, out);
}

int p2pk_boot_proof(const char *secret, int dir, const unsigned char nc[P2PK_BOOT_NONCE],
                    const unsigned char ns[P2PK_BOOT_NONCE], uint32_t nranks, uint32_t rank,
                    unsigned char out[P2PK_MAC_BYTES]) {
  return keyed(secret, dir == P2PK_TO_RANK ? ROLE_ROOT_PROOF : ROLE_RANK_PROOF, nc, ns, nranks,
               rank, out);
}

int p2pk_boot_link_key(const char *secret, const unsigned char nc[P2PK_BOOT_NONCE],
                          const unsigned char ns[P2PK_BOOT_NONCE], uint32_t nranks, uint32_t rank,
                          unsigned char key[P2PK_MAC_BYTES]) {
  return keyed(secret, ROLE_LINK, nc, ns, nranks, rank, key);
}

int p2pk_boot_frame_mac(const p2pk_boot_seal *s, int dir, uint64_t seq,
                        const unsigned char hdr[P2PK_BOOT_HDR], const void *payload, size_t len,
                        unsigned char mac[P2PK_MAC_BYTES]) {
  memset(mac, 0, P2PK_MAC_BYTES);
  if (!s->on) return 0;
  unsigned char head[2 + 8];
  head[0] = ROLE_FRAME;
  head[1] = (unsigned char)dir;
  p2pk_boot_put32(head + 2, (uint32_t)(seq >> 32));
  p2pk_boot_put32(head + 6, (uint32_t)seq);
  const p2pk_bytes parts[] = {{head, sizeof head}, {hdr, P2PK_BOOT_HDR}, {payload, len}};
  return p2pk_hmac_sha256(s->key, sizeof s->key, parts, 3, mac);
}

int p2pk_boot_frame_ok(const p2pk_boot_seal *s, int dir, uint64_t seq,
                       const unsigned char hdr[P2PK_BOOT_HDR], const void *payload, size_t len,
                       const unsigned char mac[P2PK_MAC_BYTES]) {
  if (!s->on) return 1;
  unsigned char want[P2PK_MAC_BYTES];
  if (p2pk_boot_frame_mac(s, dir, seq, hdr, payload, len, want) != 0) return 0;
  return p2pk_ct_equal(want, mac, P2PK_MAC_BYTES);
}
