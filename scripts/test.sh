#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The whole test suite: builds with ASan+UBSan in build-san/, runs every CTest
# test (CPU tests; GPU tests skip with their reason when there is no GPU), the
# threaded host code's tests again under ThreadSanitizer, then (when clang is
# present) its static analyzer and a short fuzz run of the topology readers.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/cuda/bin
scripts/deps.sh
build=${P2PKIT_TEST_BUILD:-build-san}
san=${P2PKIT_SANITIZE:-ON}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DP2PKIT_SANITIZE="$san" ${P2PKIT_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j"$(nproc)"
rc=0
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" ${CTEST_ARGS:-} || rc=$?
# Say why GPU tests were skipped (CTest only says that they were).
if grep -q "SKIP:" "$build/Testing/Temporary/LastTest.log" 2>/dev/null; then
  echo "skipped tests and why:"
  grep -h "SKIP:" "$build/Testing/Temporary/LastTest.log" | sort -u | sed 's/^/  /'
fi
# The host code that runs threads or forks ranks (the launch pool, the
# mailbox rings against a racing receiver, the bootstrap, perf's ranks),
# again under ThreadSanitizer in build-tsan/ (P2PKIT_NO_TSAN=1 skips it).
if [ "$rc" = 0 ] && [ -z "${P2PKIT_NO_TSAN:-}" ]; then
  tsan=(test_launch_pool test_dmbox test_bootstrap test_perf_proc test_comm_split test_comm_timeout test_trace_ring)
  probe=$(mktemp -d)
  echo 'int main(void) { return 0; }' > "$probe/t.c"
  if cc -fsanitize=thread "$probe/t.c" -o "$probe/t" 2>/dev/null && "$probe/t" 2>/dev/null; then
    cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DP2PKIT_SANITIZE=thread >/dev/null
    cmake --build build-tsan -j"$(nproc)" --target "${tsan[@]}"
    ctest --test-dir build-tsan --output-on-failure -j"$(nproc)" \
      -R "^($(IFS='|'; echo "${tsan[*]}"))\$" || rc=$?
  else
    echo "ThreadSanitizer: skipped (cc -fsanitize=thread does not build and run a program here)"
  fi
  rm -rf "$probe"
fi
# clang's static analyzer over the host C code; every warning fixed or
# listed with its reason (scripts/analyze.py; P2PKIT_NO_ANALYZE=1 skips it).
if [ "$rc" = 0 ] && command -v clang >/dev/null && command -v python3 >/dev/null &&
  [ -z "${P2PKIT_NO_ANALYZE:-}" ]; then
  python3 scripts/analyze.py "$build" || rc=$? # the compile commands of the tree above
fi
if [ "$rc" = 0 ] && command -v clang >/dev/null && [ -d tests/fuzz ] && [ -z "${P2PKIT_NO_FUZZ:-}" ]; then
  scripts/fuzz.sh 20 || rc=$?
fi
exit "$rc"
