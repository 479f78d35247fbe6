#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Install what the build needs when it is missing (Debian/Ubuntu).
set -euo pipefail
need=()
pkg-config --exists hwloc 2>/dev/null || need+=(libhwloc-dev)
command -v cmake >/dev/null || need+=(cmake)
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v clang >/dev/null || need+=(clang)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO=sudo; else SUDO=; fi
  echo "installing: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || {
  echo "error: nvcc not found; install the CUDA toolkit (13.0) and put it on PATH" >&2; exit 2; }
