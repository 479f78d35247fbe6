#!/usr/bin/env bash
# Each case of the collective GPU tests as its own process, with its own time
# limit and log, so a hang names its case (ctest shows nothing of a test it
# had to kill). Usage: scripts/device/cases.sh BUILD_DIR LOG_DIR [ITEM ...]
#   ITEM: a test (every case of it) or test:case (that case alone);
#   default: test_allreduce test_allreduce_errors test_collectives
#   CASE_SECS (default 150): limit per case; P2PKIT_TIMEOUT and
#   P2PKIT_TEST_NRANKS are passed through.
set -uo pipefail
build=${1:?usage: cases.sh BUILD_DIR LOG_DIR [test | test:case ...]}
log=${2:?usage: cases.sh BUILD_DIR LOG_DIR [test | test:case ...]}
shift 2
items=${*:-test_allreduce test_allreduce_errors test_collectives}
mkdir -p "$log"
status=0
for item in $items; do
  t=${item%%:*}
  if [ "$item" != "$t" ]; then
    cases=${item#*:}
  else
    src=tests/gpu/$t.c
    cases=$(grep -o 'T_CASE([a-z0-9_]*)' "$src" | sed 's/T_CASE(\(.*\))/\1/' | grep -v '^quick')
    # a test without named cases runs whole
    [ -n "$cases" ] || cases=ALL
  fi
  for c in $cases; do
    t0=$SECONDS
    if [ "$c" = ALL ]; then args=(); else args=("$c"); fi
    timeout --kill-after=5 "${CASE_SECS:-150}" "$build/tests/$t" "${args[@]}" > "$log/$t.$c.txt" 2>&1
    rc=$?
    # More ranks than the usual 2 (P2PKIT_TEST_NRANKS): the line says so, as
    # scripts/results/runs_json.py reads it.
    [ -n "${P2PKIT_TEST_NRANKS:-}" ] && printf 'ranks %s ' "$P2PKIT_TEST_NRANKS"
    printf '%-24s %-36s rc=%-3s %4ss\n' "$t" "$c" "$rc" "$((SECONDS - t0))"
    # 77: the machine lacks what the case needs (the test said which): not a failure
    if [ "$rc" = 77 ]; then grep -m1 'SKIP' "$log/$t.$c.txt" | sed 's/^/    /'
    elif [ "$rc" != 0 ]; then status=1; tail -n 15 "$log/$t.$c.txt" | sed 's/^/    /'; fi
  done
done
exit $status
