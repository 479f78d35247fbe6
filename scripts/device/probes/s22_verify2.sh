#!/usr/bin/env bash
# Twenty-first session, after the landing slots under capture were limited
# to 2 ranks (p2pk_ce_waits_ok): build; the copy-engine cases on 2 ranks;
# the copy-engine cases on 4 ranks sharing the 2 GPUs; test_shared_ranks.sh.
# Usage: scripts/device/probes/s22_verify2.sh LOG_DIR  (RECORD_COMMIT names the commit)
set -uo pipefail
log=${1:?usage: s22_verify2.sh LOG_DIR}
here=$(dirname "$0")
mkdir -p "$log"
"$here/../try.sh" "$log" - > "$log/try.txt" 2>&1 || { tail -n 20 "$log/try.txt"; exit 1; }
ce="test_allreduce:process_per_gpu_copy_engine_p2p test_allreduce:process_per_gpu_few_hardware_queues
  test_allreduce:one_process_copy_engine_p2p test_collectives:process_per_gpu_copy_engine_p2p
  test_collectives:process_per_gpu_copy_engine_p2p_kernel_posts test_collectives:process_per_gpu_sendrecv_straight_in
  test_collectives:process_per_gpu_sendrecv_map test_collectives:one_process_copy_engine_collectives"
echo "=== 2 ranks"
P2PKIT_TIMEOUT=20 CASE_SECS=100 timeout 150 "$here/../cases.sh" build-dev "$log/cases" $ce 2>&1 | tee "$log/cases.txt"
echo "=== 4 ranks"
CASES="test_allreduce:process_per_gpu_copy_engine_p2p test_allreduce:process_per_gpu_few_hardware_queues
  test_collectives:process_per_gpu_copy_engine_p2p test_collectives:process_per_gpu_sendrecv_straight_in" \
  SECS=100 timeout 200 "$here/s20_shared.sh" build-dev "$log/shared" 4 2>&1 | tee "$log/shared.txt"
echo "=== test_shared_ranks"
timeout 240 bash tests/gpu/test_shared_ranks.sh build-dev/p2pkit > "$log/shared_ranks.txt" 2>&1
echo "rc=$?"; grep -v '^ok' "$log/shared_ranks.txt" | head -30
