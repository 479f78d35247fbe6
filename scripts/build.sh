#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Build p2pkit (installing what is missing) and run the main job: `p2pkit topo`.
# Usage: scripts/build.sh [build-dir]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
scripts/deps.sh
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release ${P2PKIT_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j"$(nproc)"
echo "built: $build/p2pkit"
rc=0
"$build/p2pkit" topo || rc=$?
if [ "$rc" = 2 ] && [ -f tests/data/h200x2.p2pkit ]; then
  echo
  echo "(no GPU here: showing the recorded 2x H200 machine instead)"
  "$build/p2pkit" topo --from tests/data/h200x2.p2pkit
  rc=0
fi
exit "$rc"
