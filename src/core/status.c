/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdarg.h>
#include <stdio.h>

#include "core/check.h"
#include "p2pkit.h"

static _Thread_local char last_error[1024];

static const char *const status_names[P2PKIT_STATUS_COUNT] = {
    [P2PKIT_SUCCESS] = "success",
    [P2PKIT_ERR_INVALID_ARGUMENT] = "invalid argument",
    [P2PKIT_ERR_NO_MEMORY] = "out of memory",
    [P2PKIT_ERR_NO_DRIVER] = "no NVIDIA driver",
    [P2PKIT_ERR_NO_DEVICE] = "no usable GPU",
    [P2PKIT_ERR_CUDA] = "CUDA error",
    [P2PKIT_ERR_NVML] = "NVML error",
    [P2PKIT_ERR_IO] = "I/O error",
    [P2PKIT_ERR_PARSE] = "malformed input",
    [P2PKIT_ERR_UNSUPPORTED] = "not supported",
    [P2PKIT_ERR_SYSTEM] = "system error",
    [P2PKIT_ERR_TIMEOUT] = "timed out",
    [P2PKIT_ERR_REMOTE] = "remote peer failed",
    [P2PKIT_ERR_INTERNAL] = "internal error",
};

const char *p2pkit_strerror(p2pkit_status_t status) {
  if ((int)status < 0 || status >= P2PKIT_STATUS_COUNT) return "unknown status";
  return status_names[status];
}

const char *p2pkit_last_error(void) { return last_error; }

int p2pkit_version(void) { return P2PKIT_VERSION_CODE; }

p2pkit_status_t(p2pk_fail)(p2pkit_status_t status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  /* The caller decides whether the user sees it; the log keeps the trail. */
  P2PK_INFO(P2PK_LOG_ALL, "error: %s", last_error);
  return status;
}
