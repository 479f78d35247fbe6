#!/usr/bin/env bash
# Twenty-second session's check of its final commit (the collective kernels'
# start-of-call verdicts moved to shared words of their own): build; every
# case of the three collective GPU tests on 2 ranks; the six other GPU tests;
# test_shared_ranks.sh (3, 4 and 8 ranks: the one-shot and two-shot simple
# kernels carry most of their calls); then scripts/device/sanitize.sh mem
# for what time is left (its first steps: the script itself checked).
# Usage: scripts/device/probes/s22_check.sh LOG_DIR  (RECORD_COMMIT names the commit)
set -uo pipefail
log=${1:?usage: s22_check.sh LOG_DIR}
here=$(dirname "$0")
mkdir -p "$log"
"$here/../try.sh" "$log" - > "$log/try.txt" 2>&1 || { tail -n 20 "$log/try.txt"; exit 1; }
echo "=== 2 ranks, every case"
P2PKIT_TIMEOUT=20 CASE_SECS=150 timeout 300 "$here/../cases.sh" build-dev "$log/cases" 2>&1 > "$log/cases.txt"
echo "cases.sh rc=$?; $(grep -c 'rc=0 ' "$log/cases.txt") pass, not passing:"; grep -v 'rc=0 ' "$log/cases.txt"
echo "=== the other GPU tests"
NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 timeout 150 \
  ctest --test-dir build-dev -L gpu -E 'test_allreduce|test_collectives|shared_ranks' --timeout 120 \
  --output-on-failure > "$log/ctest.txt" 2>&1
echo "ctest rc=$?"; grep -E 'Test +#|tests passed' "$log/ctest.txt"
echo "=== test_shared_ranks"
NCCL_NVLS_ENABLE=0 timeout 200 bash tests/gpu/test_shared_ranks.sh build-dev/p2pkit > "$log/shared_ranks.txt" 2>&1
echo "rc=$?"; grep -v '^ok' "$log/shared_ranks.txt" | tail -n 8
left=$((560 - SECONDS))
echo "=== sanitize.sh mem, ${left}s"
[ "$left" -gt 40 ] && BUDGET_S=$left "$here/../sanitize.sh" "$log/sanitize" mem 2>&1 | tail -n 14
