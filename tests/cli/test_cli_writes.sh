#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A write that fails is exit 1 and one line in every subcommand (docs/cli.md):
# standard output into a closed pipe (never death by SIGPIPE, shell 141) or a
# full disk, and every file an option names. No GPU needed.
set -uo pipefail
bin=$1 data=$2
fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
h200=$data/h200x2.p2pkit
command -v python3 >/dev/null || { echo "SKIP: python3 makes the closed pipe"; exit 77; }

# Runs the command with standard output on a pipe whose reader is already
# gone, so the first write fails (EPIPE, or SIGPIPE when not ignored); the
# child starts with SIGPIPE's default action, as from a shell. Prints the
# exit status (negative: killed by that signal) and leaves stderr in $tmp/err.
closed_pipe() {
  python3 - "$@" 2> "$tmp/err" <<'EOF'
import os, subprocess, sys
r, w = os.pipe()
os.close(r)
p = subprocess.run(sys.argv[1:], stdout=w, stderr=subprocess.PIPE, timeout=120)
sys.stderr.write(p.stderr.decode(errors="replace"))
print(p.returncode)
EOF
}
one_line() { # desc pattern: stderr is exactly one line and matches
  if [ "$(grep -c . "$tmp/err")" != 1 ] || ! grep -q -- "$2" "$tmp/err"; then
    echo "FAIL $1: wanted one line matching '$2'"; cat "$tmp/err"; fail=1
  fi
}
while read -r desc; do
  # shellcheck disable=SC2086
  rc=$(closed_pipe "$bin" $desc)
  if [ "$rc" != 1 ]; then echo "FAIL $desc | (closed): exit $rc, wanted 1"; cat "$tmp/err"; fail=1
  else echo "ok   $desc | (closed): exit 1"; fi
  one_line "$desc | (closed)" "error: writing standard output failed: Broken pipe"
done <<EOF
topo --from $h200
topo --json --from $h200
topo -m --from $h200
env
env --json
env --new-secret
bench --dry-run --from $h200
doctor --from $h200 --no-nccl
doctor --from $h200 --no-nccl --json
perf --help
--help
--version
EOF
# The shell's own view: the status of p2pkit in `p2pkit ... | head -c1` when
# its output outlives the reader is 1, not 141 (128 + SIGPIPE). The reader
# exits before p2pkit starts writing, so the write fails every time.
mkfifo "$tmp/fifo"
( exec 3< "$tmp/fifo"; head -c1 <&3 > /dev/null; exec 3<&- ) &
reader=$!
exec 4> "$tmp/fifo"; printf x >&4; wait "$reader"
"$bin" topo --from "$h200" >&4 2> "$tmp/err"; rc=$?
exec 4>&-
if [ "$rc" != 1 ]; then echo "FAIL topo | head -c1: exit $rc, wanted 1"; cat "$tmp/err"; fail=1
else echo "ok   topo | head -c1: exit 1"; fi

# Files named by an option: a full disk, or a path that cannot be opened.
expect() { # desc want_rc cmd...; stderr in $tmp/err
  local desc=$1 want=$2; shift 2
  timeout 120 "$@" > "$tmp/out" 2> "$tmp/err"; local rc=$?
  if [ "$rc" != "$want" ]; then echo "FAIL $desc: exit $rc, wanted $want"; cat "$tmp/err"; fail=1
  else echo "ok   $desc"; fi
}
if [ -w /dev/full ]; then
  expect "topo --save /dev/full" 1 "$bin" topo --from "$h200" --save /dev/full
  one_line "topo --save /dev/full" "error writing /dev/full"
  expect "topo --dump-nccl /dev/full" 1 "$bin" topo --from "$h200" --dump-nccl /dev/full
  one_line "topo --dump-nccl /dev/full" "error writing /dev/full"
  expect "doctor --dump-nccl /dev/full" 1 "$bin" doctor --from "$h200" --dump-nccl /dev/full
  one_line "doctor --dump-nccl /dev/full" "error writing /dev/full"
  expect "doctor --save-nccl-log /dev/full" 1 "$bin" doctor --from "$h200" --save-nccl-log /dev/full
  one_line "doctor --save-nccl-log /dev/full" "writing /dev/full failed: No space left on device"
  # This machine's hwloc XML (hwloc's own export leaks in its plugins here,
  # which LeakSanitizer would report as exit 1 too: leaks are not checked).
  expect "topo --save-hwloc /dev/full" 1 env ASAN_OPTIONS=detect_leaks=0 "$bin" topo --save-hwloc /dev/full
  one_line "topo --save-hwloc /dev/full" "cannot write hwloc XML to /dev/full"
fi
nodir=$tmp/no-such-dir/out
for args in "topo --from $h200 --save $nodir" "topo --from $h200 --dump-nccl $nodir" \
  "doctor --from $h200 --dump-nccl $nodir" "doctor --from $h200 --save-nccl-log $nodir" \
  "bench --json=$nodir" "bench --csv=$nodir" "bench --plot $nodir" \
  "perf all_reduce --json-file $nodir"; do
  # shellcheck disable=SC2086
  expect "$args (no such directory)" 1 "$bin" $args
  grep -q "$nodir" "$tmp/err" || { echo "FAIL $args does not name the file"; cat "$tmp/err"; fail=1; }
  [ "$(grep -c . "$tmp/err")" = 1 ] || { echo "FAIL $args: more than one line"; cat "$tmp/err"; fail=1; }
done

exit $fail
