#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# p2pkit trace: every recorded job in tests/data/trace against its golden
# output (tests/data/golden/trace/NAME.txt; scripts/golden.sh writes them),
# the JSON; then bad command lines and bad directories: one line each,
# exit 2, no hang on a FIFO, no link followed, the readable reports still
# judged.
set -uo pipefail
bin=$1 data=$2
fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
expect() { # desc want_rc cmd... ; stdout in $tmp/out, stderr in $tmp/err
  local desc=$1 want=$2; shift 2
  "$@" > "$tmp/out" 2> "$tmp/err"; local rc=$?
  if [ "$rc" != "$want" ]; then echo "FAIL $desc: exit $rc, wanted $want"; cat "$tmp/out" "$tmp/err"; fail=1
  else echo "ok   $desc"; fi
}
err_has() { # desc pattern: stderr matches, and is that many lines (3rd arg, default 1)
  grep -q -- "$2" "$tmp/err" && [ "$(grep -c . "$tmp/err")" = "${3:-1}" ] \
    || { echo "FAIL $1: stderr is not ${3:-1} line(s) matching '$2'"; cat "$tmp/err"; fail=1; }
}

bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
for d in "$data"/trace/*/; do
  name=$(basename "$d")
  (cd "$data/trace" && "$bin" trace "$name") > "$tmp/out" 2>&1
  if diff -u "$data/golden/trace/$name.txt" "$tmp/out" > "$tmp/diff"; then echo "ok   trace $name"
  else echo "FAIL trace $name differs from its golden output:"; head -40 "$tmp/diff"; fail=1; fi
done
(cd "$data/trace" && "$bin" trace --json skip) > "$tmp/out" 2>&1
diff -u "$data/golden/trace/skip.json" "$tmp/out" > "$tmp/diff" && echo "ok   trace --json skip" \
  || { echo "FAIL trace --json skip differs:"; head -40 "$tmp/diff"; fail=1; }
if command -v python3 >/dev/null; then
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["schema_version"]==1 and j["verdict"]=="mismatch" and j["comms"][0]["ranks"][1]["culprit"] and j["comms"][0]["seq"]==6' \
    "$tmp/out" && echo "ok   trace --json parses" || { echo "FAIL trace --json"; fail=1; }
fi

expect "trace --help" 0 "$bin" trace --help
grep -q "usage: p2pkit trace DIR" "$tmp/out" || { echo "FAIL help"; fail=1; }
expect "trace without a directory" 2 "$bin" trace
grep -q "which directory" "$tmp/err" || { echo "FAIL no-dir message"; fail=1; }
expect "trace with two directories" 2 "$bin" trace a b
expect "trace unknown flag" 2 "$bin" trace --bogus "$data/trace/ok"
grep -q "unknown option '--bogus'" "$tmp/err" || { echo "FAIL unknown-flag message"; fail=1; }
expect "trace a missing directory" 2 "$bin" trace "$tmp/nope"
err_has "missing directory" "cannot read the directory $tmp/nope"
mkdir "$tmp/empty"; echo "not a report" > "$tmp/empty/notes.txt"
expect "trace a directory of no report" 2 "$bin" trace "$tmp/empty"
err_has "no report" "holds no report"

# What is no report is passed over: a folder, another link, notes.
mkdir "$tmp/good"; cp "$data"/trace/ok/* "$tmp/good/"; mkdir "$tmp/good/sub"
ln -s /etc/passwd "$tmp/good/other"; echo notes > "$tmp/good/README"
expect "trace passes over what is no report" 0 "$bin" trace "$tmp/good"
[ ! -s "$tmp/err" ] || { echo "FAIL stderr not empty"; cat "$tmp/err"; fail=1; }

# Bad files beside good ones: each named in one line, exit 2, the rest judged.
mkdir "$tmp/bad"; cp "$data"/trace/hang/* "$tmp/bad/"
r0=$(ls "$tmp/bad" | head -n 1)
head -c 300 "$tmp/bad/$r0" > "$tmp/bad/p2pkit-trace-cut.txt"
printf 'p2pkit-trace 1\nversion 0.1.0\ncomm 5f3a9c01d2e4b7aa\nrank 0 3\nhost \033]0;owned\007\n' > "$tmp/bad/p2pkit-trace-escape.txt"
printf 'hello\n' > "$tmp/bad/p2pkit-trace-notes.txt"
printf '\x80\x02cos\nsystem\n.' > "$tmp/bad/nccl_trace_rank_1"
printf '\x80\x02}.' > "$tmp/bad/fr_dump_without_rank"
ln -s /etc/passwd "$tmp/bad/p2pkit-trace-link.txt"
mkfifo "$tmp/bad/p2pkit-trace-fifo.txt" 2>/dev/null
expect "trace a directory with bad reports" 2 timeout 20 "$bin" trace "$tmp/bad"
nbad=6; [ -p "$tmp/bad/p2pkit-trace-fifo.txt" ] && nbad=7
err_has "cut report" "p2pkit-trace-cut.txt:.*cut off" $nbad
grep -q "p2pkit-trace-escape.txt:5: control bytes" "$tmp/err" || { echo "FAIL escape"; fail=1; }
grep -q "p2pkit-trace-notes.txt:1: expected a \`p2pkit-trace\` line" "$tmp/err" || { echo "FAIL notes"; fail=1; }
grep -q "nccl_trace_rank_1: byte 2: opcode GLOBAL (0x63) would run code: refused" "$tmp/err" || { echo "FAIL GLOBAL"; fail=1; }
grep -q "fr_dump_without_rank: a pickle whose name does not end with its rank" "$tmp/err" || { echo "FAIL rank name"; fail=1; }
grep -q "a symbolic link: not read" "$tmp/err" || { echo "FAIL link"; fail=1; }
[ "$nbad" = 6 ] || grep -q "p2pkit-trace-fifo.txt.*not a regular file" "$tmp/err" || { echo "FAIL fifo"; fail=1; }
grep -q -P '\x1b' "$tmp/err" "$tmp/out" && { echo "FAIL an escape byte reached the terminal"; fail=1; }
head -n 1 "$tmp/out" | grep -q "^rank 1 never arrived at seq 6" || { echo "FAIL the good reports were not judged"; cat "$tmp/out"; fail=1; }
[ "$fail" = 0 ] && echo "ok   all"
exit $fail
