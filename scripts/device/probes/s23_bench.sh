#!/usr/bin/env bash
# Twenty-third session, last call (2x H200): build; test_copy_bench (its
# small run now checks every group row against its copies); bench both
# ways and every pair at once at 256 MiB with the group's time its slowest
# copy's (issue 3's 760 GB/s both ways).
# Usage: scripts/device/probes/s23_bench.sh LOG_DIR  (RECORD_COMMIT names the commit)
set -uo pipefail
log=${1:?usage: s23_bench.sh LOG_DIR}
here=$(dirname "$0")
. "$here/build.sh"
timeout 60 build-dev/tests/test_copy_bench small_run > "$log/test_copy_bench.txt" 2>&1
echo "test_copy_bench small_run rc=$?"; tail -n 3 "$log/test_copy_bench.txt"
timeout 60 build-dev/p2pkit bench --methods memcpy-peer,p2p-ce,p2p-sm-push --mode oneway,both,all -b 256M \
  -n 10 -w 3 --json="$log/bench.json" > "$log/bench.txt" 2>&1
echo "bench rc=$?"; grep -E '<->|together|same run' "$log/bench.txt"
