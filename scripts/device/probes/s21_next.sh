#!/usr/bin/env bash
# What the twentieth session left to run on the GPUs: the bisection of the copy-engine all-reduce
# under a graph on 4 shared ranks, the 4-rank cases changed or not finished
# in s20 run 5, and test_shared_ranks.sh as it now stands (1 MiB
# copy-engine thresholds, INFO check). Every step has its own limit; all
# three can pass 600 s, a call's limit, so STEPS picks (default "graph cases";
# then STEPS=shared in a second call).
# Usage: scripts/device/probes/s21_next.sh LOG_DIR   (RECORD_COMMIT names the commit)
set -uo pipefail
log=${1:?usage: s21_next.sh LOG_DIR}
here=$(dirname "$0")
mkdir -p "$log"
"$here/../try.sh" "$log" - > "$log/try.txt" 2>&1 || { tail -n 20 "$log/try.txt"; exit 1; }
steps=" ${STEPS:-graph cases} "
if [[ $steps == *" graph "* ]]; then
echo "=== s21_ce_graph"
timeout 330 "$here/s21_ce_graph.sh" build-dev "$log/ce_graph" 2>&1 | tee "$log/ce_graph.txt"
fi
if [[ $steps == *" cases "* ]]; then
echo "=== 4-rank cases"
CASES="test_collectives:kill_sendrecv_peer_survivors_time_out test_collectives:kill_staged_sendrecv_peer_survivors_time_out test_allreduce:process_per_gpu_copy_engine_p2p" \
  SECS=120 timeout 200 "$here/s20_shared.sh" build-dev "$log/shared" 4 2>&1 | tee "$log/shared.txt"
fi
if [[ $steps == *" shared "* ]]; then
echo "=== test_shared_ranks"
timeout 300 bash tests/gpu/test_shared_ranks.sh build-dev/p2pkit > "$log/shared_ranks.txt" 2>&1
echo "rc=$?"; grep -v '^ok' "$log/shared_ranks.txt" | head -30
fi
