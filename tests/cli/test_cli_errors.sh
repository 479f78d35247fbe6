#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
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

# Settings: what the library would refuse, `p2pkit env` refuses too (exit 1,
# one line naming it, its value and its range), and each command refuses it
# with the same line (exit 2: a bad input), never clamping it in silence.
while read -r kv want; do
  expect "env with $kv" 1 env "$kv" "$bin" env
  one_line "env with $kv" "$want"
  expect "bench with $kv" 2 env "$kv" "$bin" bench --dry-run --from "$h200"
  one_line "bench with $kv" "$want"
  expect "topo with $kv" 2 env "$kv" "$bin" topo --from "$h200"
  one_line "topo with $kv" "$want"
  expect "perf with $kv" 2 env "$kv" "$bin" perf all_reduce
  one_line "perf with $kv" "$want"
done <<'EOF'
P2PKIT_LAUNCH_SPIN_US=-1 P2PKIT_LAUNCH_SPIN_US='-1' must be a whole number from 0 to
P2PKIT_P2P_LEVEL=garbage P2PKIT_P2P_LEVEL='garbage' is not one of LOC, NVL, PIX, PXB, PHB, SYS
P2PKIT_SM_COPY_CONFIG=garbage P2PKIT_SM_COPY_CONFIG='garbage': 'garbage' is not key=value
P2PKIT_P2P_DISABLE=-1 P2PKIT_P2P_DISABLE='-1' must be a whole number from 0 to 1
P2PKIT_STAGE_DEPTH=-1 P2PKIT_STAGE_DEPTH='-1' must be a whole number from 2 to 16
P2PKIT_COLL_MAILBOXES=-1 P2PKIT_COLL_MAILBOXES='-1' must be 0 or a whole number from 16 to 512
P2PKIT_CE_DEPTH=-1 P2PKIT_CE_DEPTH='-1' must be a whole number from 2 to 8
P2PKIT_STAGED_CE_DEPTH=-1 P2PKIT_STAGED_CE_DEPTH='-1' must be a whole number from 2 to 8
P2PKIT_CE_LAND=1kb P2PKIT_CE_LAND='1kb' is out of range: it must be a size from 16M to 4G
P2PKIT_GRAD_SYNC_BLOCKS=2147483648 P2PKIT_GRAD_SYNC_BLOCKS='2147483648' must be a whole number from -1 to 1024
P2PKIT_STAGE_CHUNK=2G P2PKIT_STAGE_CHUNK='2G' is out of range: it must be a size from 4K to 1G
P2PKIT_DEBUG=bogus P2PKIT_DEBUG='bogus' is not one of NONE, WARN, INFO, TRACE
P2PKIT_TORCH_SAME_STREAM=yes P2PKIT_TORCH_SAME_STREAM='yes' must be a whole number from 0 to 1
EOF
# Every refused value is listed, one line each; the listing shows each range.
expect "env with two refused values" 1 env P2PKIT_CE_DEPTH=9 P2PKIT_CE_LAND=8G "$bin" env
if [ "$(grep -c . "$tmp/err")" != 2 ] || ! grep -q "P2PKIT_CE_DEPTH='9'" "$tmp/err" ||
  ! grep -q "P2PKIT_CE_LAND='8G'" "$tmp/err"; then
  echo "FAIL env does not list both refused values"; cat "$tmp/err"; fail=1
fi
grep -E -q "^P2PKIT_CE_LAND .*\[a size from 16M to 4G\]$" "$tmp/out" ||
  { echo "FAIL env does not show P2PKIT_CE_LAND's range"; fail=1; }
# The Python package's variables are settings: listed, never "not a setting".
expect "env with the Python package's variables" 0 env P2PKIT_LIB=/x/libp2pkit.so \
  P2PKIT_TORCH_SAME_STREAM=1 "$bin" env
[ -s "$tmp/err" ] && { echo "FAIL env warns about the Python package's variables"; cat "$tmp/err"; fail=1; }
for v in P2PKIT_LIB P2PKIT_TORCH_SAME_STREAM; do
  grep -E -q "^$v +[^ ]+ +environment " "$tmp/out" || { echo "FAIL env does not list $v"; fail=1; }
done

# The job secret is never printed: env (text, JSON) and the doctor's
# settings (text, JSON) say only that it is set.
secret=hush-$$-4711
for args in "env" "env --json" "doctor --no-nccl --no-probe" "doctor --no-nccl --no-probe --json"; do
  # shellcheck disable=SC2086
  P2PKIT_JOB_SECRET=$secret timeout 120 "$bin" $args > "$tmp/out" 2> "$tmp/err"
  if grep -q -- "$secret" "$tmp/out" "$tmp/err"; then echo "FAIL $args prints the job secret"; fail=1
  elif [ "$args" = env ] && ! grep -E -q "^P2PKIT_JOB_SECRET +\(set, hidden\) +environment" "$tmp/out"; then
    echo "FAIL env does not say the secret is set"; cat "$tmp/out"; fail=1
  else echo "ok   $args hides the job secret"; fi
done

# doctor: its inputs are checked, what they say is printed safely, and what
# cannot be so is not reported as fine.
mkdir -p "$tmp/logdir"
expect "doctor --nccl-log DIR" 2 "$bin" doctor --from "$h200" --nccl-log "$tmp/logdir"
one_line "doctor --nccl-log DIR" "NCCL log $tmp/logdir is a directory"
printf 'h:1:1 [0] NCCL INFO NCCL version 2.28.3\nh:1:1 [0] NCCL WARN \033]0;pwned\007\033[2J bad\n' > "$tmp/esc.log"
sed 's/^machine host=vm /machine host="\\x1b[31mvm" /' "$h200" > "$tmp/esc.p2pkit"
grep -q 'x1b' "$tmp/esc.p2pkit" || { echo "FAIL could not make the escaped host"; fail=1; }
for json in "" --json; do
  expect "doctor $json with escapes in its inputs" 1 "$bin" doctor --from "$tmp/esc.p2pkit" \
    --nccl-log "$tmp/esc.log" $json
  if LC_ALL=C grep -q $'[\001-\010\013-\037\177]' "$tmp/out"; then
    echo "FAIL doctor $json printed control characters from its inputs"; fail=1
  fi
  grep -q "pwned" "$tmp/out" || { echo "FAIL doctor $json dropped the warning"; fail=1; }
done
# A log naming GPUs this 2-GPU machine lacks: a WARN, not silence.
printf 'h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\nh:1:1 [7] NCCL INFO Channel 00/0 : 7[7] -> 0[0] via P2P/CUMEM/read\n' > "$tmp/gpu7.log"
expect "doctor with a log naming GPU7" 1 "$bin" doctor --from "$h200" --nccl-log "$tmp/gpu7.log"
grep -E -q "^WARN +NCCL +nccl +the NCCL log names rank 7, but this machine has 2 GPUs" "$tmp/out" ||
  { echo "FAIL GPU7 not reported"; cat "$tmp/out"; fail=1; }
awk 'BEGIN { for (i = 0; i < 200000; i++) printf "h:1:1 [0] NCCL INFO Channel 00/0 : %d[0] -> %d[1] via P2P/IPC\n", 100 + i % 7, 200 + i % 5 }' > "$tmp/far.log"
expect "doctor with 200000 connections of nonexistent ranks" 1 "$bin" doctor --from "$h200" --nccl-log "$tmp/far.log"
grep -E -q "^WARN +NCCL +nccl .*200000 of its 200000 connections are between ranks it does not have" "$tmp/out" ||
  { echo "FAIL nonexistent ranks not reported"; cat "$tmp/out"; fail=1; }
expect "doctor --save-nccl-log FILE without a run" 0 "$bin" doctor --from "$h200" --save-nccl-log "$tmp/saved.log"
grep -q "NCCL did not run" "$tmp/saved.log" || { echo "FAIL the saved log does not say why it is empty"; fail=1; }

# One parser (getopt_long) for every subcommand: the same forms everywhere.
expect "bench -b8 (the value in the same word)" 0 "$bin" bench --dry-run --from "$h200" -b8 -e32 -i8
grep -q "8 B" "$tmp/out" || { echo "FAIL bench -b8 plan lacks 8 B"; fail=1; }
expect "perf -f 2 -i 8" 2 "$bin" perf all_reduce -f 2 -i 8
one_line "perf -f 2 -i 8" "-f and -i cannot both be given"
expect "bench -f 2 -i 8" 2 "$bin" bench --dry-run --from "$h200" -f 2 -i 8
one_line "bench -f 2 -i 8" "-f and -i cannot both be given"
for cmd in topo doctor bench; do
  extra=(); [ $cmd = bench ] && extra=(--dry-run)
  expect "$cmd --from ''" 2 "$bin" $cmd "${extra[@]}" --from ''
  one_line "$cmd --from ''" "error: --from needs a file name"
  expect "$cmd --from=" 2 "$bin" $cmd "${extra[@]}" --from=
  one_line "$cmd --from=" "error: --from needs a file name"
done
for cmd in topo doctor env; do
  expect "$cmd with a stray argument" 2 "$bin" $cmd stray
  one_line "$cmd with a stray argument" "unexpected argument 'stray'"
done
expect "topo --from X --save-hwloc Y" 2 "$bin" topo --from "$h200" --save-hwloc "$tmp/hw.xml"
one_line "topo --from X --save-hwloc Y" "--save-hwloc records this machine's hwloc topology"
[ -e "$tmp/hw.xml" ] && { echo "FAIL --save-hwloc wrote this machine's XML for --from"; fail=1; }
# A missing input file and one that does not parse: the same exit code, 2.
printf 'hello world\n' > "$tmp/junk.txt"
for cmd in topo doctor bench; do
  extra=(); [ $cmd = bench ] && extra=(--dry-run)
  expect "$cmd --from a missing file" 2 "$bin" $cmd "${extra[@]}" --from "$tmp/none.p2pkit"
  expect "$cmd --from an unparsable file" 2 "$bin" $cmd "${extra[@]}" --from "$tmp/junk.txt"
  one_line "$cmd --from an unparsable file" "unknown topology format"
done
# Every --help states the exit codes and points at docs/cli.md.
for cmd in topo env bench perf doctor; do
  expect "$cmd --help" 0 "$bin" $cmd --help
  grep -q "^Exit code" "$tmp/out" && grep -q "docs/cli.md" "$tmp/out" ||
    { echo "FAIL $cmd --help does not state the exit codes"; fail=1; }
done

exit $fail
