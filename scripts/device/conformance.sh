#!/usr/bin/env bash
# The collectives' conformance suite (tests/gpu/test_conformance.c) on the
# GPUs of this machine, in one call: build, every path x collective x type
# x op x in/out of place x eager/graph on 1-8 ranks in both modes (one
# process, a process per rank), ranks sharing the GPUs (P2PKIT_SHARE_GPUS=1);
# then compute-sanitizer memcheck and racecheck on a small subset (the
# tools' summary lines are in memcheck.txt and racecheck.txt).
# Usage: scripts/device/conformance.sh LOG_DIR   (e.g. "$OUT")
#   CONF_RANKS (default 1-8), BUDGET_S (default 570: the whole run, lib.sh's
#   fit). Each step's output is LOG_DIR/<step>.txt; a summary ends the run.
set -uo pipefail
log=${1:?usage: conformance.sh LOG_DIR}
mkdir -p "$log"
export NCCL_NVLS_ENABLE=0 PATH=$PATH:/usr/local/cuda/bin
export P2PKIT_SHARE_GPUS=1 P2PKIT_TIMEOUT=${P2PKIT_TIMEOUT:-30} P2PKIT_CONF_RANKS=${CONF_RANKS:-1-8}
build=build-dev
t=$build/tests/test_conformance
budget=${BUDGET_S:-570}
. "$(dirname "$0")/lib.sh"
nvidia-smi -L > "$log/machine.txt" 2>&1
step build 200 bash -c "cmake -S . -B $build -DCMAKE_BUILD_TYPE=Release -DP2PKIT_WERROR=OFF > /dev/null \
  && cmake --build $build -j\$(nproc) --target test_conformance"
[ -x "$t" ] || { step_summary "build failed; logs in $log"; exit 1; }
fit one_process 180 "$t" one_process
fit process_per_gpu 180 "$t" process_per_gpu
# The sanitizer runs one kernel of a process at a time, so only processes
# (one per rank, 2, sharing the GPU) and only the kernels' paths: the
# copy-engine paths' wait kernels spin beside copies (sanitize.sh says more).
cs=${COMPUTE_SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}
sub=(env P2PKIT_CONF_RANKS=2 P2PKIT_CONF_QUICK=1 P2PKIT_TIMEOUT=90)
fit memcheck 60 "${sub[@]}" P2PKIT_CONF_ONLY=kernel-ll128,kernel-simple,kernel-staged \
  "$cs" --tool memcheck --target-processes all --report-api-errors no --error-exitcode 9 \
  "$t" process_per_gpu
fit racecheck 60 "${sub[@]}" P2PKIT_CONF_ONLY=kernel-ll,kernel-twoshot \
  "$cs" --tool racecheck --target-processes all --racecheck-report hazard --error-exitcode 9 \
  "$t" process_per_gpu
step_summary "conformance, logs in $log"
exit "$status"
