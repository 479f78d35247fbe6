/* SPDX-License-Identifier: BSD-3-Clause */
#include "core/text.h"

/* Length of the well-formed UTF-8 sequence at s (a printable one: not a C1
 * control), or 0. */
static int utf8_len(const unsigned char *s) {
  const unsigned char c = s[0];
  int n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
  if (!n) return 0;
  /* The second byte's range excludes overlong forms, surrogates and code
   * points past U+10FFFF; C2 80..9F is a C1 control. */
  unsigned lo = 0x80, hi = 0xbf;
  if (c == 0xc2) lo = 0xa0;
  else if (c == 0xe0) lo = 0xa0;
  else if (c == 0xed) hi = 0x9f;
  else if (c == 0xf0) lo = 0x90;
  else if (c == 0xf4) hi = 0x8f;
  if (s[1] < lo || s[1] > hi) return 0;
  for (int i = 2; i < n; i++)
    if (s[i] < 0x80 || s[i] > 0xbf) return 0;
  return n;
}

int p2pk_text_printable(char *text) {
  int replaced = 0;
  unsigned char *s = (unsigned char *)text;
  while (*s) {
    if (*s == '\t') {
      *s++ = ' ';
    } else if (*s < 0x20 || *s == 0x7f) {
      *s++ = '?';
      replaced++;
    } else if (*s < 0x80) {
      s++;
    } else {
      const int n = utf8_len(s);
      if (n) {
        s += n;
      } else {
        *s++ = '?';
        replaced++;
      }
    }
  }
  return replaced;
}
