#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The parameter sweep: build, then one `p2pkit perf` per line of a spec
# file under each setting of the tuning variables (P2PKIT_COLL_BLOCKS,
# P2PKIT_CE_*_MIN, ...), NCCL timed in the same call where the line says
# --vs-nccl. What the selector's thresholds are chosen from; the figures
# that decide a default go to a record in docs/decisions/.
# Usage: RECORD_COMMIT=<sha> scripts/device/sweep.sh SPEC_FILE LOG_DIR
#   SPEC_FILE: one run per line, NAME | VAR=VALUE ... | perf arguments
#   ("-" for no variables, # comments); see scripts/device/sweeps/.
#   ROUNDS=3 runs the spec three times interleaved (quote the median).
set -uo pipefail
cd "$(dirname "$0")/../.."
spec=${1:?usage: sweep.sh SPEC_FILE LOG_DIR}
log=${2:?usage: sweep.sh SPEC_FILE LOG_DIR}
[ -f "$spec" ] || { echo "sweep.sh: no spec file '$spec'" >&2; exit 2; }
budget=${BUDGET_S:-560}
STEP_TAIL=${STEP_TAIL:-30}
. scripts/device/lib.sh
export -f sweep
machine_info
build_tree
for r in $(seq 1 "${ROUNDS:-1}"); do
  fit "round$r" 500 bash -c 'sweep "$@"' _ "$spec" "$log/round$r"
done
step_summary "$spec; logs in $log"
exit $status
