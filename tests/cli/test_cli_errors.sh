#!/usr/bin/env bash
# Every subcommand: output that did not arrive is a failure; exit codes and
# one-line errors as docs/cli.md lists them. No GPU needed.
set -uo pipefail
bin=$1 data=$2
fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
expect() { # desc want_rc cmd... ; stdout in $tmp/out, stderr in $tmp/err
  local desc=$1 want=$2; shift 2
  timeout 120 "$@" > "$tmp/out" 2> "$tmp/err"; local rc=$?
  if [ "$rc" != "$want" ]; then echo "FAIL $desc: exit $rc, wanted $want"; cat "$tmp/err"; fail=1
  else echo "ok   $desc"; fi
}
one_line() { # desc pattern: stderr is exactly one line and matches
  if [ "$(grep -c . "$tmp/err")" != 1 ] || ! grep -q -- "$2" "$tmp/err"; then
    echo "FAIL $1: wanted one line matching '$2'"; cat "$tmp/err"; fail=1
  fi
}
h200=$data/h200x2.p2pkit

# Standard output on a full disk: exit 1 and one line, never a truncated success.
full() { # desc cmd...
  local desc=$1; shift
  timeout 120 "$@" > /dev/full 2> "$tmp/err"; local rc=$?
  if [ "$rc" != 1 ]; then echo "FAIL $desc > /dev/full: exit $rc, wanted 1"; cat "$tmp/err"; fail=1
  else echo "ok   $desc > /dev/full"; fi
  grep -q "error: writing standard output failed: No space left on device" "$tmp/err" ||
    { echo "FAIL $desc > /dev/full does not say so"; cat "$tmp/err"; fail=1; }
}
if [ -w /dev/full ]; then
  full "topo --json" "$bin" topo --json --from "$h200"
  full "topo" "$bin" topo --from "$h200"
  full "env" "$bin" env
  full "env --json" "$bin" env --json
  full "bench --dry-run" "$bin" bench --dry-run --from "$h200"
  full "doctor" "$bin" doctor --from "$h200" --no-nccl
  full "perf --help" "$bin" perf --help
  full "--help" "$bin" --help
fi

exit $fail
