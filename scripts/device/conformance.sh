#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
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
cd "$(dirname "$0")/../.."
log=${1:?usage: conformance.sh LOG_DIR}
budget=${BUDGET_S:-570}
export P2PKIT_TIMEOUT=${P2PKIT_TIMEOUT:-30}
. scripts/device/lib.sh
export P2PKIT_SHARE_GPUS=1 P2PKIT_CONF_RANKS=${CONF_RANKS:-1-8}
t=$build/tests/test_conformance
machine_info
BUILD_SECS=200 build_tree test_conformance
# One process takes ~50 s for 1-8 ranks on one H200; a process per rank is
# time-sliced, so there the quick matrix (3 types, 2 ops) by default
# (CONF_MP_FULL=1: the whole matrix, ranks as CONF_RANKS says).
fit one_process 180 "$t" one_process
if [ -n "${CONF_MP_FULL:-}" ]; then fit process_per_gpu 300 "$t" process_per_gpu
else fit process_per_gpu 240 env P2PKIT_CONF_QUICK=1 "$t" process_per_gpu; fi
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
