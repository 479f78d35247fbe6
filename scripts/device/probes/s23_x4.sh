#!/usr/bin/env bash
# Twenty-third session: the first 4-GPU machine (issue 8). Build, then
# scripts/device/multi.sh for one part of its work (a device call is 600 s):
#   tests: topology against nvidia-smi, bench over every pair, every case of
#          the collective GPU tests on 4 ranks;
#   perf:  the other GPU tests, every collective against NCCL (eager and graph), process per GPU,
#          the copy-engine collectives and the algorithm sweep;
#   final: perf as above, then every GPU test (the last commit's defaults).
# Usage: scripts/device/probes/s23_x4.sh tests|perf|final LOG_DIR  (RECORD_COMMIT names the commit)
set -uo pipefail
part=${1:?usage: s23_x4.sh tests|perf|final LOG_DIR}
log=${2:?usage: s23_x4.sh tests|perf|final LOG_DIR}
here=$(dirname "$0")
. "$here/build.sh"
grep -E 'stage build' "$log/build-logs/summary.txt" 2>/dev/null
case $part in
  tests) skip="ctest perf sweep shared" ;;
  perf) skip="topo bench cases shared" ;;
  final) skip="topo bench shared" ;;
  *) echo "s23_x4.sh: unknown part '$part' (tests, perf or final)"; exit 2 ;;
esac
MULTI_SKIP=$skip MULTI_BUDGET_S=$((570 - SECONDS)) "$here/../multi.sh" build-dev "$log/multi"
