/* SPDX-License-Identifier: BSD-3-Clause */
/* One logging channel. P2PKIT_DEBUG=WARN|INFO|TRACE (WARN by default; NONE
 * silences), P2PKIT_DEBUG_SUBSYS=TOPO,XFER,COLL,... (ALL by default; a leading
 * ^ excludes), P2PKIT_DEBUG_FILE=path (%h host, %p pid expanded; stderr by
 * default). Read once, on first use. */
#ifndef P2PK_LOG_H
#define P2PK_LOG_H

#include <stddef.h>

enum { P2PK_LEVEL_NONE = 0, P2PK_LEVEL_WARN = 1, P2PK_LEVEL_INFO = 2, P2PK_LEVEL_TRACE = 3 };

enum {
  P2PK_LOG_INIT = 1 << 0,
  P2PK_LOG_TOPO = 1 << 1,
  P2PK_LOG_XFER = 1 << 2,
  P2PK_LOG_COLL = 1 << 3,
  P2PK_LOG_BOOT = 1 << 4, /* rendezvous, process bootstrap */
  P2PK_LOG_BENCH = 1 << 5,
  P2PK_LOG_ENV = 1 << 6,
  P2PK_LOG_ALL = 0x7fffffff
};

extern int p2pk_log_level_cached; /* -1 until initialised */

void p2pk_log(int level, int subsys, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
int p2pk_log_enabled(int level, int subsys);
/* Parse a subsystem list ("TOPO,XFER", "^COLL", "ALL"); -1 on an unknown name. */
int p2pk_log_parse_subsys(const char *list);
/* P2PKIT_DEBUG_FILE is opened at the first log line, never blocking:
 * created 0600, or appended to when it is a regular file of this user's,
 * mode 0600 or stricter, with no other name; never through a symbolic
 * link. When it cannot be, one line on stderr says why and the log goes to
 * stderr. (The registry checks both settings' grammar: param.c.) */
/* Tests: forget the cached settings so the next log call reads them again. */
void p2pk_log_reset(void);

#define P2PK_WARN(...) p2pk_log(P2PK_LEVEL_WARN, P2PK_LOG_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define P2PK_INFO(sub, ...)                                        \
  do {                                                             \
    if (p2pk_log_level_cached != P2PK_LEVEL_NONE &&                \
        (p2pk_log_level_cached < 0 || p2pk_log_level_cached >= P2PK_LEVEL_INFO)) \
      p2pk_log(P2PK_LEVEL_INFO, (sub), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define P2PK_TRACE(sub, ...)                                       \
  do {                                                             \
    if (p2pk_log_level_cached < 0 || p2pk_log_level_cached >= P2PK_LEVEL_TRACE) \
      p2pk_log(P2PK_LEVEL_TRACE, (sub), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#endif
