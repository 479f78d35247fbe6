#!/usr/bin/env bash
# Twenty-first session's last check of its final commit: build; every case
# of the three collective GPU tests on 2 ranks; the straight-in send/recv
# case on 4 ranks sharing the 2 GPUs (its graph part changed); doctor with
# the default hardware queues and with CUDA_DEVICE_MAX_CONNECTIONS=1.
# Usage: scripts/device/probes/s22_final.sh LOG_DIR  (RECORD_COMMIT names the commit)
set -uo pipefail
log=${1:?usage: s22_final.sh LOG_DIR}
here=$(dirname "$0")
mkdir -p "$log"
"$here/../try.sh" "$log" - > "$log/try.txt" 2>&1 || { tail -n 20 "$log/try.txt"; exit 1; }
echo "=== 2 ranks, every case"
P2PKIT_TIMEOUT=20 CASE_SECS=150 timeout 300 "$here/../cases.sh" build-dev "$log/cases" 2>&1 | tee "$log/cases.txt"
echo "=== 4 ranks"
CASES="test_collectives:process_per_gpu_sendrecv_straight_in" SECS=100 timeout 120 \
  "$here/s20_shared.sh" build-dev "$log/shared" 4 2>&1 | tee "$log/shared.txt"
echo "=== doctor"
timeout 60 build-dev/p2pkit doctor > "$log/doctor.txt" 2>&1; echo "doctor rc=$?"
CUDA_DEVICE_MAX_CONNECTIONS=1 timeout 60 build-dev/p2pkit doctor > "$log/doctor_q1.txt" 2>&1; echo "doctor q1 rc=$?"
grep -h "hardware queues\|CUDA_DEVICE" "$log/doctor.txt" "$log/doctor_q1.txt" | cut -c1-300
