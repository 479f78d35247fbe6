#!/usr/bin/env bash
# A work run on the GPU machine in one call: build, the named GPU test cases
# (each its own process and log), then the knob runs of a tune.sh spec.
# Usage: scripts/device/try.sh LOG_DIR SPEC_FILE [test:case ...]
#   e.g. scripts/device/try.sh $OUT/run1 scripts/device/specs/ce_p2p.txt \
#          test_allreduce:one_process_copy_engine_p2p
# RECORD_COMMIT names the commit in machine.txt (the device's .git is stale).
set -uo pipefail
log=${1:?usage: try.sh LOG_DIR SPEC_FILE [test:case ...]}
spec=${2:?usage: try.sh LOG_DIR SPEC_FILE [test:case ...]}
shift 2
mkdir -p "$log/cases"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export P2PKIT_TIMEOUT=${P2PKIT_TIMEOUT:-20} PATH=$PATH:/usr/local/cuda/bin
build=build-dev
STEP_TAIL=${STEP_TAIL:-4}
. "$(dirname "$0")/lib.sh"
{ date -u +%FT%TZ; echo "commit: ${RECORD_COMMIT:-unknown}"; nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > "$log/machine.txt" 2>&1
step build 300 env LOG="$log/build-logs" scripts/device_run.sh build
for tc in "$@"; do
  step "case.${tc/:/.}" "${CASE_SECS:-120}" "$build/tests/${tc%%:*}" "${tc#*:}"
done
[ "$spec" = - ] || step tune 480 scripts/device/tune.sh "$build" "$log/tune" "$spec"
step_summary "logs in $log"
exit $status
