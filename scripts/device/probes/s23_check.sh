#!/usr/bin/env bash
# Twenty-third session, 4x H200, after run 1-2: build; the six collective
# cases that failed on 4 ranks (their tests now expect what more than 2
# ranks do), on 4 ranks and on 2 (P2PKIT_TEST_NRANKS=2); bench's every-pair
# mode (its group rate now from one start to the last end); the knob runs
# of specs/s23_x4.txt; test_shared_ranks.sh with what time is left.
# Usage: scripts/device/probes/s23_check.sh LOG_DIR  (RECORD_COMMIT names the commit)
set -uo pipefail
log=${1:?usage: s23_check.sh LOG_DIR}
here=$(dirname "$0")
. "$here/build.sh"
export P2PKIT_TIMEOUT=20
six="test_allreduce:one_process_copy_engine_p2p test_collectives:one_process_sendrecv_copy_engine
 test_collectives:one_process_broadcast_copy_engine test_collectives:one_process_copy_engine_collectives
 test_collectives:process_per_gpu_sendrecv_straight_in_mismatch test_collectives:process_per_gpu_sendrecv_map"
echo "=== six cases, 4 ranks"
CASE_SECS=100 "$here/../cases.sh" build-dev "$log/cases4" $six 2>&1 | cut -c1-200
echo "=== six cases, 2 ranks"
P2PKIT_TEST_NRANKS=2 CASE_SECS=100 "$here/../cases.sh" build-dev "$log/cases2" $six 2>&1 | cut -c1-200
echo "=== bench, every pair at once"
timeout 120 build-dev/p2pkit bench --methods memcpy-peer,p2p-ce,p2p-sm-push --mode all,both -b 256M -n 10 -w 3 \
  --json="$log/bench.json" > "$log/bench.txt" 2>&1; echo "rc=$?"; grep -E 'together|same run' "$log/bench.txt"
echo "=== knobs"
timeout 300 "$here/../tune.sh" build-dev "$log/tune" scripts/device/specs/s23_x4.txt > "$log/tune.txt" 2>&1
echo "rc=$?"; grep -E '^=== |^ +[0-9]' "$log/tune.txt" | awk '/^===/{print substr($0,1,90); next} {printf "  %11s %9s %9s %6s\n",$1,$6,$10,$12}'
left=$((565 - SECONDS))
echo "=== test_shared_ranks, ${left}s"
[ "$left" -gt 30 ] && timeout "$left" bash tests/gpu/test_shared_ranks.sh build-dev/p2pkit > "$log/shared_ranks.txt" 2>&1
echo "rc=$?"; grep -v '^ok' "$log/shared_ranks.txt" | tail -n 8; grep -c '^ok' "$log/shared_ranks.txt"
