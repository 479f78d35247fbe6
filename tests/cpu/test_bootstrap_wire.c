/* SPDX-License-Identifier: BSD-3-Clause */
/* The rendezvous's messages without sockets (coll/rdv/bootstrap_wire.c): which
 * headers a receiver may read past, the hello's round trip, verdict text
 * made printable, and the proofs and MACs under libcrypto (loaded at run
 * time; the cases that need it say so and stop where it is missing). */
#include <string.h>

#include "coll/rdv/bootstrap_wire.h"
#include "core/crypto.h"
#include "test.h"

static int have_crypto(void) {
  char why[400];
  if (p2pk_crypto_load(why, sizeof why) == 0) return 1;
  printf("SKIP: %s: %s\n", t_current, why);
  return 0;
}

static int hdr_ok(uint32_t type, uint32_t tag, uint32_t len) {
  unsigned char h[P2PK_BOOT_HDR];
  p2pk_boot_hdr_pack(h, type, tag, len);
  p2pk_boot_hdr hd;
  int rc = p2pk_boot_hdr_parse(h, &hd);
  if (rc == 0 && (hd.type != type || hd.tag != tag || hd.len != len)) T_FAIL("header round trip");
  return rc == 0;
}

TEST(headers_bound_what_follows) {
  CHECK(hdr_ok(P2PK_MSG_HELLO, 0, P2PK_BOOT_HELLO_BYTES));
  CHECK(!hdr_ok(P2PK_MSG_HELLO, 0, P2PK_BOOT_HELLO_BYTES + 1));
  CHECK(!hdr_ok(P2PK_MSG_HELLO, 1, P2PK_BOOT_HELLO_BYTES));
  CHECK(hdr_ok(P2PK_MSG_CHALLENGE, 0, P2PK_BOOT_CHALLENGE_BYTES));
  CHECK(!hdr_ok(P2PK_MSG_CHALLENGE, 0, 0));
  CHECK_EQ(P2PK_BOOT_CHALLENGE_BYTES, P2PK_BOOT_NONCE); /* a nonce, nothing keyed */
  CHECK(!hdr_ok(P2PK_MSG_CHALLENGE, 0, P2PK_BOOT_NONCE + P2PK_MAC_BYTES)); /* version 2's */
  CHECK(hdr_ok(P2PK_MSG_PROOF, 0, P2PK_MAC_BYTES));
  CHECK(!hdr_ok(P2PK_MSG_PROOF, 0, 1u << 30));
  CHECK(hdr_ok(P2PK_MSG_WELCOME, 0, 0));
  CHECK(!hdr_ok(P2PK_MSG_WELCOME, 0, 4));
  CHECK(hdr_ok(P2PK_MSG_REJECT, 0, 4));
  CHECK(hdr_ok(P2PK_MSG_ABORT, 0, P2PK_BOOT_VERDICT_MAX));
  CHECK(!hdr_ok(P2PK_MSG_ABORT, 0, P2PK_BOOT_VERDICT_MAX + 1));
  CHECK(!hdr_ok(P2PK_MSG_REJECT, 0, 3));
  CHECK(hdr_ok(P2PK_MSG_DATA, 77, P2PK_BOOT_MAX_PAYLOAD));
  CHECK(!hdr_ok(P2PK_MSG_DATA, 77, P2PK_BOOT_MAX_PAYLOAD + 1));
  CHECK(!hdr_ok(0, 0, 0));
  CHECK(!hdr_ok(8, 0, 0));
  CHECK(p2pk_boot_sealed(P2PK_MSG_DATA) && p2pk_boot_sealed(P2PK_MSG_WELCOME) &&
        p2pk_boot_sealed(P2PK_MSG_ABORT));
  CHECK(!p2pk_boot_sealed(P2PK_MSG_HELLO) && !p2pk_boot_sealed(P2PK_MSG_REJECT));
}

TEST(hello_round_trip_and_refusals) {
  p2pk_boot_hello h = {P2PK_BOOT_VERSION, 4, 3, 4242, P2PK_HELLO_SECRET, {0}};
  for (int i = 0; i < P2PK_BOOT_NONCE; i++) h.nonce[i] = (unsigned char)(i * 7);
  unsigned char b[P2PK_BOOT_HELLO_BYTES];
  p2pk_boot_hello_pack(&h, b);
  p2pk_boot_hello g;
  char why[160];
  CHECK_EQ(p2pk_boot_hello_parse(b, sizeof b, &g, why, sizeof why), 0);
  CHECK(memcmp(&g, &h, sizeof h) == 0);
  CHECK_EQ(p2pk_boot_hello_parse(b, sizeof b - 1, &g, why, sizeof why), -1);
  b[8 + 3] = 2; /* version 2: rank 0 proved itself first */
  CHECK_EQ(p2pk_boot_hello_parse(b, sizeof b, &g, why, sizeof why), -1);
  CHECK(strstr(why, "got 2, want 3") != NULL);
  p2pk_boot_hello_pack(&h, b);
  b[24] = 0x80; /* an unknown flag */
  CHECK_EQ(p2pk_boot_hello_parse(b, sizeof b, &g, why, sizeof why), -1);
  p2pk_boot_hello_pack(&h, b);
  b[0] = 'X';
  CHECK_EQ(p2pk_boot_hello_parse(b, sizeof b, &g, why, sizeof why), -1);
}

TEST(verdict_text_is_printable) {
  unsigned char v[P2PK_BOOT_VERDICT_MAX];
  size_t n = p2pk_boot_verdict_pack(v, P2PK_REJ_USER, "no \x1b[31mred\x1b[0m\n\x07here \xc3\xa9");
  uint32_t code = 0;
  char text[300];
  CHECK_EQ(p2pk_boot_verdict_parse(v, n, &code, text, sizeof text), 0);
  CHECK_EQ(code, P2PK_REJ_USER);
  CHECK_STR(text, "no ?[31mred?[0m??here \xc3\xa9");
  CHECK_EQ(p2pk_boot_verdict_parse(v, 3, &code, text, sizeof text), -1);
  char longer[400];
  memset(longer, 'a', sizeof longer - 1);
  longer[sizeof longer - 1] = '\0';
  CHECK_EQ(p2pk_boot_verdict_pack(v, 1, longer), (size_t)P2PK_BOOT_VERDICT_MAX);
  char small[8];
  CHECK_EQ(p2pk_boot_verdict_parse(v, P2PK_BOOT_VERDICT_MAX, &code, small, sizeof small), 0);
  CHECK_STR(small, "aaaaaaa");
}

TEST(hmac_sha256_known_answer) {
  if (!have_crypto()) return;
  /* RFC 4231, test case 2. */
  const p2pk_bytes parts[] = {{"what do ya ", 11}, {"want for nothing?", 17}};
  unsigned char mac[P2PK_MAC_BYTES];
  CHECK_EQ(p2pk_hmac_sha256("Jefe", 4, parts, 2, mac), 0);
  static const unsigned char want[] = {0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24,
                                       0x26, 0x08, 0x95, 0x75, 0xc7, 0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27,
                                       0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43};
  CHECK(memcmp(mac, want, sizeof want) == 0);
  CHECK(p2pk_ct_equal(mac, want, sizeof want));
  mac[31] ^= 1;
  CHECK(!p2pk_ct_equal(mac, want, sizeof want));
  unsigned char r1[32], r2[32];
  CHECK_EQ(p2pk_random_bytes(r1, sizeof r1), 0);
  CHECK_EQ(p2pk_random_bytes(r2, sizeof r2), 0);
  CHECK(memcmp(r1, r2, sizeof r1) != 0);
}

TEST(proofs_bind_direction_rank_and_secret) {
  if (!have_crypto()) return;
  unsigned char nc[P2PK_BOOT_NONCE], ns[P2PK_BOOT_NONCE];
  memset(nc, 1, sizeof nc);
  memset(ns, 2, sizeof ns);
  unsigned char root[32], rank[32], other[32], key[32];
  CHECK_EQ(p2pk_boot_proof("s", P2PK_TO_RANK, nc, ns, 4, 1, root), 0);
  CHECK_EQ(p2pk_boot_proof("s", P2PK_TO_ROOT, nc, ns, 4, 1, rank), 0);
  CHECK(memcmp(root, rank, 32) != 0); /* a proof sent back is not the other side's */
  CHECK_EQ(p2pk_boot_proof("s", P2PK_TO_RANK, nc, ns, 4, 2, other), 0);
  CHECK(memcmp(root, other, 32) != 0);
  CHECK_EQ(p2pk_boot_proof("s", P2PK_TO_RANK, nc, ns, 5, 1, other), 0);
  CHECK(memcmp(root, other, 32) != 0);
  CHECK_EQ(p2pk_boot_proof("t", P2PK_TO_RANK, nc, ns, 4, 1, other), 0);
  CHECK(memcmp(root, other, 32) != 0);
  CHECK_EQ(p2pk_boot_proof("s", P2PK_TO_RANK, ns, nc, 4, 1, other), 0); /* nonces swapped */
  CHECK(memcmp(root, other, 32) != 0);
  CHECK_EQ(p2pk_boot_proof("s", P2PK_TO_RANK, nc, ns, 4, 1, other), 0);
  CHECK(memcmp(root, other, 32) == 0);
  CHECK_EQ(p2pk_boot_link_key("s", nc, ns, 4, 1, key), 0);
  CHECK(memcmp(key, root, 32) != 0 && memcmp(key, rank, 32) != 0);
}

TEST(sealed_frames_detect_changes) {
  if (!have_crypto()) return;
  p2pk_boot_seal s = {1, {0}, 0, 0};
  memset(s.key, 9, sizeof s.key);
  unsigned char h[P2PK_BOOT_HDR], mac[P2PK_MAC_BYTES];
  char data[] = "ipc handles";
  p2pk_boot_hdr_pack(h, P2PK_MSG_DATA, 5, sizeof data);
  CHECK_EQ(p2pk_boot_frame_mac(&s, P2PK_TO_ROOT, 7, h, data, sizeof data, mac), 0);
  CHECK(p2pk_boot_frame_ok(&s, P2PK_TO_ROOT, 7, h, data, sizeof data, mac));
  CHECK(!p2pk_boot_frame_ok(&s, P2PK_TO_RANK, 7, h, data, sizeof data, mac)); /* reflected */
  CHECK(!p2pk_boot_frame_ok(&s, P2PK_TO_ROOT, 8, h, data, sizeof data, mac)); /* replayed */
  data[0] ^= 1;
  CHECK(!p2pk_boot_frame_ok(&s, P2PK_TO_ROOT, 7, h, data, sizeof data, mac));
  data[0] ^= 1;
  h[7] ^= 1; /* the tag */
  CHECK(!p2pk_boot_frame_ok(&s, P2PK_TO_ROOT, 7, h, data, sizeof data, mac));
  h[7] ^= 1;
  s.key[0] ^= 1;
  CHECK(!p2pk_boot_frame_ok(&s, P2PK_TO_ROOT, 7, h, data, sizeof data, mac));
  /* Without a secret the seal is off: a zeroed MAC, nothing checked. */
  p2pk_boot_seal off = {0, {0}, 0, 0};
  CHECK_EQ(p2pk_boot_frame_mac(&off, P2PK_TO_ROOT, 0, h, data, sizeof data, mac), 0);
  unsigned char zero[P2PK_MAC_BYTES] = {0};
  CHECK(memcmp(mac, zero, sizeof zero) == 0);
  CHECK(p2pk_boot_frame_ok(&off, P2PK_TO_ROOT, 3, h, data, sizeof data, mac));
}

T_MAIN(T_CASE(headers_bound_what_follows), T_CASE(hello_round_trip_and_refusals),
       T_CASE(verdict_text_is_printable), T_CASE(hmac_sha256_known_answer),
       T_CASE(proofs_bind_direction_rank_and_secret), T_CASE(sealed_frames_detect_changes))
