/* SPDX-License-Identifier: BSD-3-Clause */
/* The p2pkit command, inside libp2pkit (p2pkit_main in cli_main.c; main.c
 * is the program around it): one file per subcommand, each `int
 * p2pk_cmd_x(argc, argv)` returning the process exit code (0 ok, 1 failure,
 * 2 usage or no GPU); cli_util.c holds what they share. */
#ifndef P2PK_CLI_H
#define P2PK_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "p2pkit.h"

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

int p2pk_cmd_topo(int argc, char **argv);
int p2pk_cmd_env(int argc, char **argv);
int p2pk_cmd_bench(int argc, char **argv);
int p2pk_cmd_perf(int argc, char **argv);
int p2pk_cmd_doctor(int argc, char **argv);
int p2pk_cmd_trace(int argc, char **argv);

/* "p2pkit CMD: error: ..." on stderr, one line. */
void p2pk_cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The one-line explanation for a discovery failure (no driver, no GPU),
 * pointing at --from; returns the exit code to use. */
int p2pk_cli_discovery_error(const char *cmd, p2pkit_status_t st);
/* Size with a K/M/G/T suffix; 0 ok, -1 error (message printed, naming `what`). */
int p2pk_cli_parse_size(const char *cmd, const char *what, const char *text, size_t *out);
/* Check the settings (p2pk_param_check), then load the topology from --from
 * FILE (when `from` is set), else P2PKIT_TOPO_FILE, else discover. Prints
 * the error and returns the exit code (0 on success; 2 for a setting p2pkit
 * refuses, and for a file missing, unreadable or unparsable alike). */
int p2pk_cli_get_topo(const char *cmd, const char *from, p2pkit_topo_t *topo_p);
/* getopt_long's complaint as one error line (the usage after an unknown
 * option); returns CLI_EXIT_USAGE. */
int p2pk_cli_opt_error(const char *cmd, int c, char *const *argv, void (*usage)(FILE *));
/* A file-name option's value (option `c` of `longs`): "" is an error, one
 * line naming the option. 0 ok, -1 not. */
struct option;
int p2pk_cli_file_arg(const char *cmd, const struct option *longs, int c, const char *v);

#endif
