#!/usr/bin/env bash
# An A/B run on the GPU machine in one call: build-dev (the tree as sent)
# with its GPU test cases and tune spec A, then build-b (the same tree with
# extra CUDA flags B_FLAGS and C flags B_CFLAGS, the p2pkit CLI only, or the
# targets B_TARGETS)
# with tune spec B. With C_FLAGS, a third build (build-c) runs spec B too;
# with A_AGAIN=1, spec A runs once more at the end (how far the machine
# drifted during the call).
# Usage: B_FLAGS=-DX=0 scripts/device/ab_build.sh LOG_DIR SPEC_A SPEC_B [test:case ...]
# RECORD_COMMIT names the commit in machine.txt (the device's .git is stale).
set -uo pipefail
log=${1:?usage: ab_build.sh LOG_DIR SPEC_A SPEC_B [test:case ...]}
spec_a=${2:?usage: ab_build.sh LOG_DIR SPEC_A SPEC_B [test:case ...]}
spec_b=${3:?usage: ab_build.sh LOG_DIR SPEC_A SPEC_B [test:case ...]}
shift 3
: "${B_FLAGS:?B_FLAGS: the CUDA flags of build-b}"
mkdir -p "$log/cases"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export P2PKIT_TIMEOUT=${P2PKIT_TIMEOUT:-20} PATH=$PATH:/usr/local/cuda/bin
STEP_TAIL=${STEP_TAIL:-4}
. "$(dirname "$0")/lib.sh"
{ date -u +%FT%TZ; echo "commit: ${RECORD_COMMIT:-unknown}"; echo "build-b: $B_FLAGS"; echo "build-c: ${C_FLAGS:-}";
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > "$log/machine.txt" 2>&1
step build 300 env LOG="$log/build-logs" scripts/device_run.sh build
# variant DIR CUDA_FLAGS C_FLAGS: a Release build of B_TARGETS with extra flags.
variant() {
  step "$1" 300 bash -c "cmake -S . -B $1 -DCMAKE_BUILD_TYPE=Release -DP2PKIT_WERROR=OFF \
  -DCMAKE_CUDA_FLAGS='$2' -DCMAKE_C_FLAGS='$3' > /dev/null && cmake --build $1 -j\$(nproc) --target ${B_TARGETS:-p2pkit_cli}"
}
variant build-b "$B_FLAGS" "${B_CFLAGS:-}"
[ -n "${C_FLAGS:-}" ] && variant build-c "$C_FLAGS" ""
for tc in "$@"; do
  step "case.${tc/:/.}" "${CASE_SECS:-120}" build-dev/tests/"${tc%%:*}" "${tc#*:}"
done
step tune-a 300 scripts/device/tune.sh build-dev "$log/tune-a" "$spec_a"
step tune-b 300 scripts/device/tune.sh build-b "$log/tune-b" "$spec_b"
[ -n "${C_FLAGS:-}" ] && step tune-c 300 scripts/device/tune.sh build-c "$log/tune-c" "$spec_b"
[ "${A_AGAIN:-0}" = 1 ] && step tune-a2 300 scripts/device/tune.sh build-dev "$log/tune-a2" "$spec_a"
step_summary "logs in $log"
exit $status
