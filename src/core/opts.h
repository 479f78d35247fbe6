/* SPDX-License-Identifier: BSD-3-Clause */
/* Every subcommand parses its options with getopt_long, so "-b8", "-b 8",
 * "--minbytes=8" and "--minbytes 8" mean the same in all of them; these
 * helpers give its complaints p2pkit's words. */
#ifndef P2PK_OPTS_H
#define P2PK_OPTS_H

#include <getopt.h>
#include <stddef.h>

/* Before a parse: getopt's state reset (a process may parse several
 * command lines), its own messages off, a leading ':' expected in the
 * short options so that a missing value is told from an unknown option. */
void p2pk_opts_begin(void);
/* The sentence for getopt_long's return `c` (':' a value is missing, '?'
 * an option is unknown) about the option it just read from argv:
 * "-b needs a value", "unknown option '--bogus'". */
void p2pk_opts_error(int c, char *const *argv, char *out, size_t len);

#endif
