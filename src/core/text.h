/* SPDX-License-Identifier: BSD-3-Clause */
/* Text from outside (files, logs, peers) made safe to print on a terminal. */
#ifndef P2PK_TEXT_H
#define P2PK_TEXT_H

/* Replaces in place, one '?' a byte, what a terminal would act on instead
 * of showing: control characters (C0, DEL, and C1 as UTF-8 encodes them)
 * and bytes that are not well-formed UTF-8; a tab becomes a space. Returns
 * how many bytes it replaced. */
int p2pk_text_printable(char *s);

#endif
