/* SPDX-License-Identifier: BSD-3-Clause */
/* Error propagation, NCCL style: the frame that finds an error logs it once
 * (in words naming the device, file or value); each frame it passes through
 * adds a TRACE line "-> status", a cheap backtrace when P2PKIT_DEBUG=TRACE. */
#ifndef P2PK_CHECK_H
#define P2PK_CHECK_H

#include "core/log.h"
#include "p2pkit.h"

/* Record the detail of an error where it is found, for p2pkit_last_error(),
 * and log it at INFO. Returns `status`: `return p2pk_fail(...)`. */
p2pkit_status_t p2pk_fail(p2pkit_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
#ifdef __clang_analyzer__
/* The static analyzer (scripts/analyze.py) cannot see into status.c: show it
 * that a failure returns its own (non-zero) status, as the function does. */
#define p2pk_fail(status, ...) ((void)p2pk_fail((status), __VA_ARGS__), (p2pkit_status_t)(status))
#endif

#define P2PK_CHECK(call)                                                     \
  do {                                                                       \
    p2pkit_status_t p2pk_s_ = (call);                                        \
    if (p2pk_s_ != P2PKIT_SUCCESS) {                                         \
      P2PK_TRACE(P2PK_LOG_ALL, "%s:%d -> %d", __FILE__, __LINE__, p2pk_s_);  \
      return p2pk_s_;                                                        \
    }                                                                        \
  } while (0)

#define P2PK_CHECK_GOTO(call, st, label)                                     \
  do {                                                                       \
    (st) = (call);                                                           \
    if ((st) != P2PKIT_SUCCESS) {                                            \
      P2PK_TRACE(P2PK_LOG_ALL, "%s:%d -> %d", __FILE__, __LINE__, (st));     \
      goto label;                                                            \
    }                                                                        \
  } while (0)

/* CUDA runtime calls (include cuda_runtime_api.h before using). */
#define P2PK_CUDA_CHECK(call)                                                \
  do {                                                                       \
    cudaError_t p2pk_e_ = (call);                                            \
    if (p2pk_e_ != cudaSuccess)                                              \
      return p2pk_fail(P2PKIT_ERR_CUDA, "%s failed: %s (%s:%d)", #call,      \
                       cudaGetErrorString(p2pk_e_), __FILE__, __LINE__);     \
  } while (0)

#define P2PK_CUDA_CHECK_GOTO(call, st, label)                                \
  do {                                                                       \
    cudaError_t p2pk_e_ = (call);                                            \
    if (p2pk_e_ != cudaSuccess) {                                            \
      (st) = p2pk_fail(P2PKIT_ERR_CUDA, "%s failed: %s (%s:%d)", #call,      \
                       cudaGetErrorString(p2pk_e_), __FILE__, __LINE__);     \
      goto label;                                                            \
    }                                                                        \
  } while (0)

/* System calls returning -1 and setting errno. */
#define P2PK_SYS_CHECK(call, what)                                           \
  do {                                                                       \
    if ((call) == -1)                                                        \
      return p2pk_fail(P2PKIT_ERR_SYSTEM, "%s: %s", (what), strerror(errno)); \
  } while (0)

#endif
