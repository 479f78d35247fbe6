#!/usr/bin/env bash
# Each case of the collective GPU tests as its own process, with its own time
# limit and log, so a hang names its case (ctest shows nothing of a test it
# had to kill). Usage: scripts/device/cases.sh BUILD_DIR LOG_DIR [test ...]
#   default tests: test_allreduce test_allreduce_errors test_collectives
#   CASE_SECS (default 150): limit per case; P2PKIT_TIMEOUT is passed through.
set -uo pipefail
build=${1:?usage: gpu_cases.sh BUILD_DIR LOG_DIR [test ...]}
log=${2:?usage: gpu_cases.sh BUILD_DIR LOG_DIR [test ...]}
shift 2
tests=${*:-test_allreduce test_allreduce_errors test_collectives}
mkdir -p "$log"
status=0
for t in $tests; do
  src=tests/gpu/$t.c
  cases=$(grep -o 'T_CASE([a-z0-9_]*)' "$src" | sed 's/T_CASE(\(.*\))/\1/' | grep -v '^quick')
  # a test without named cases runs whole
  [ -n "$cases" ] || cases=ALL
  for c in $cases; do
    t0=$SECONDS
    if [ "$c" = ALL ]; then args=(); else args=("$c"); fi
    timeout --kill-after=5 "${CASE_SECS:-150}" "$build/tests/$t" "${args[@]}" > "$log/$t.$c.txt" 2>&1
    rc=$?
    printf '%-24s %-36s rc=%-3s %4ss\n' "$t" "$c" "$rc" "$((SECONDS - t0))"
    if [ "$rc" != 0 ]; then status=1; tail -n 15 "$log/$t.$c.txt" | sed 's/^/    /'; fi
  done
done
exit $status
