#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The scripts users and GPU machines run: every one parses (bash -n), each
# device suite refuses to start without its log folder and says how to call
# it, and every sweep spec line has its three fields (NAME | VARS | ARGS).
# Usage: test_scripts.sh P2PKIT_BIN DATA_DIR (the CLI tests' arguments).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
fail=0
for s in "$root"/scripts/*.sh "$root"/scripts/device/*.sh "$root"/tests/*.sh "$root"/tests/*/*.sh "$root"/.ci/run; do
  bash -n "$s" || { echo "FAIL $s does not parse"; fail=1; }
done
for s in record one_gpu multi sanitize sweep conformance torch multihost desync; do
  f=$root/scripts/device/$s.sh
  [ -x "$f" ] || { echo "FAIL $f missing or not executable"; fail=1; continue; }
  grep -q '^\. scripts/device/lib.sh$' "$f" || { echo "FAIL $s.sh does not source lib.sh"; fail=1; }
  out=$(cd "$(mktemp -d)" && env -i PATH="$PATH" bash "$f" 2>&1); rc=$?
  if [ "$rc" = 0 ] || ! grep -q "usage: $s.sh" <<< "$out"; then
    echo "FAIL $s.sh without arguments: exit $rc, '$out'"; fail=1
  fi
done
for spec in "$root"/scripts/device/sweeps/*.txt; do
  bad=$(grep -v '^#' "$spec" | grep -v '^ *$' | awk -F'|' 'NF != 3 || $1 ~ /^ *$/ || $3 !~ /[a-z]/' )
  [ -z "$bad" ] || { echo "FAIL $spec: lines without NAME | VARS | ARGS:"; echo "$bad"; fail=1; }
done
[ "$fail" = 0 ] && echo "ok   every script parses, suites say their usage, sweep specs well formed"
exit $fail
