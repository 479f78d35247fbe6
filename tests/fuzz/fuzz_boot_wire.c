/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: the rendezvous's messages (coll/rdv/bootstrap_wire.c) read
 * from arbitrary bytes as a stream of frames, the way the sockets read them:
 * a header, then only the bytes that header may announce, then (sealed
 * types) a MAC. Beyond "no crash, no leak, no read past the input":
 *  - a hello that parses packs back to the same bytes;
 *  - a verdict's text comes out printable and no longer than what was sent;
 *  - a sealed frame passes its check exactly when its MAC is the one
 *    computed under the fuzzing key (libcrypto loaded; otherwise unchecked). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll/rdv/bootstrap_wire.h"
#include "core/crypto.h"
#include "core/text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_hello(const uint8_t *p, size_t n) {
  p2pk_boot_hello h;
  char why[160];
  if (p2pk_boot_hello_parse(p, n, &h, why, sizeof why) != 0) return;
  unsigned char again[P2PK_BOOT_HELLO_BYTES];
  p2pk_boot_hello_pack(&h, again);
  if (memcmp(again, p, sizeof again) != 0) abort();
}

static void check_verdict(const uint8_t *p, size_t n) {
  uint32_t code;
  char text[P2PK_BOOT_VERDICT_MAX];
  if (p2pk_boot_verdict_parse(p, n, &code, text, sizeof text) != 0) abort(); /* the header allowed it */
  size_t len = strlen(text);
  if (len > n - 4) abort();
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)text[i] < 0x20 || text[i] == 0x7f) abort();
}

static void check_seal(const p2pk_boot_seal *s, int dir, uint64_t seq, const uint8_t *hdr,
                       const uint8_t *p, size_t n) {
  unsigned char want[P2PK_MAC_BYTES];
  if (p2pk_boot_frame_mac(s, dir, seq, hdr, p, n, want) != 0) abort();
  int same = memcmp(want, p + n, sizeof want) == 0;
  int ok = p2pk_boot_frame_ok(s, dir, seq, hdr, p, n, p + n);
  if (s->on && ok != same) abort();
}

static void check_text(const uint8_t *data, size_t size) {
  char *t = malloc(size + 1);
  if (!t) return;
  memcpy(t, data, size);
  t[size] = '\0';
  size_t before = strlen(t);
  p2pk_text_printable(t);
  if (strlen(t) != before) abort();
  free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int crypto = -1;
  if (crypto < 0) {
    char why[400];
    crypto = p2pk_crypto_load(why, sizeof why) == 0;
  }
  p2pk_boot_seal seal = {crypto, {0}, 0, 0};
  memset(seal.key, 0x5a, sizeof seal.key); /* the key the seeds' MACs use */
  size_t at = 0;
  uint64_t seq = 0;
  while (size - at >= P2PK_BOOT_HDR) {
    p2pk_boot_hdr h;
    const uint8_t *hdr = data + at;
    if (p2pk_boot_hdr_parse(hdr, &h) != 0) break;
    at += P2PK_BOOT_HDR;
    const int sealed = p2pk_boot_sealed(h.type);
    if (size - at < (size_t)h.len + (sealed ? P2PK_MAC_BYTES : 0)) break;
    const uint8_t *p = data + at;
    if (h.type == P2PK_MSG_HELLO) check_hello(p, h.len);
    if (h.type == P2PK_MSG_REJECT || h.type == P2PK_MSG_ABORT) check_verdict(p, h.len);
    if (sealed) {
      check_seal(&seal, (int)(seq & 1), seq, hdr, p, h.len);
      seq++;
    }
    at += h.len + (sealed ? P2PK_MAC_BYTES : 0);
  }
  check_text(data, size);
  return 0;
}
