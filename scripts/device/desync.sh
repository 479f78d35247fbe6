#!/usr/bin/env bash
# Desync reports on one GPU (nvidia-h200 or -h100), in one device call:
#   build     test_desync, bench_trace, the CLI
#   jobs      tests/gpu/test_desync: three ranks sharing the GPU
#             (P2PKIT_SHARE_GPUS=1), a process each; a rank skips a call, one
#             passes another count, one dies, one hangs and a signal dumps
#             them; each job's reports judged by the library and by
#             `p2pkit trace`, which must name the rank and the call; each
#             case its own process and log (run_cases: a skip is judged)
#   verdicts  `p2pkit trace` on each job's reports (kept under LOG_DIR/jobs:
#             recordings of real dumps to replace tests/data/trace's)
#   cost      bench_trace: the host time per 8-byte all-reduce (two ranks
#             sharing the GPU, one process) with the ring of last calls on
#             and off in turns, one run, and p2pk_trace_record alone
# Usage: RECORD_COMMIT=<sha> scripts/device/desync.sh LOG_DIR   (e.g. "$OUT")
#   BUDGET_S (default 500), DS_SKIP="jobs cost ..." leaves parts out.
set -uo pipefail
cd "$(dirname "$0")/../.."
log=${1:?usage: desync.sh LOG_DIR}
budget=${BUDGET_S:-500}
STEP_TAIL=${STEP_TAIL:-12}
. scripts/device/lib.sh
export P2PKIT_SHARE_GPUS=1
want() { [[ " ${DS_SKIP:-} " != *" $1 "* ]]; }
machine_info
BUILD_SECS=300 build_tree test_desync bench_trace p2pkit_cli
if want jobs; then
  rm -rf "$log/jobs"
  fit jobs 240 env DESYNC_KEEP_DIR="$log/jobs" CASE_SECS=100 bash -c 'run_cases "$@"' _ "$log/cases" \
    test_desync
fi
if want verdicts; then
  for j in skip count die hang; do
    [ -d "$log/jobs/$j" ] && fit "verdict.$j" 20 "$bin" trace "$log/jobs/$j"
  done
fi
if want cost; then
  fit cost 90 "$build/tests/bench_trace" --iters 200 --reps 21
fi
step_summary "desync reports on $(nvidia-smi -L 2>/dev/null | wc -l) GPU(s); logs in $log"
exit "$status"
