#!/usr/bin/env bash
# Twenty-first session, after the hardware-queue rule (p2pk_ce_queues_ok):
# build; every case of the three collective GPU tests on 2 ranks (the
# library's regression check, the new few-hardware-queues case among them);
# s22_ce_graph.sh's once-hanging steps again (now the kernels where queues
# are short; the copy engines with 32); the copy-engine all-reduce case and
# the new one on 4 ranks sharing the 2 GPUs.
# Usage: scripts/device/probes/s22_verify.sh LOG_DIR  (RECORD_COMMIT names the commit)
set -uo pipefail
log=${1:?usage: s22_verify.sh LOG_DIR}
here=$(dirname "$0")
mkdir -p "$log"
"$here/../try.sh" "$log" - > "$log/try.txt" 2>&1 || { tail -n 20 "$log/try.txt"; exit 1; }
echo "=== 2 ranks, every case"
P2PKIT_TIMEOUT=20 CASE_SECS=150 timeout 280 "$here/../cases.sh" build-dev "$log/cases" 2>&1 | tee "$log/cases.txt"
echo "=== s22_ce_graph"
timeout 150 "$here/s22_ce_graph.sh" build-dev "$log/ce_graph" 2>&1 | tee "$log/ce_graph.txt"
echo "=== 4 ranks"
CASES="test_allreduce:process_per_gpu_copy_engine_p2p test_allreduce:process_per_gpu_few_hardware_queues" \
  SECS=110 timeout 240 "$here/s20_shared.sh" build-dev "$log/shared" 4 2>&1 | tee "$log/shared.txt"
