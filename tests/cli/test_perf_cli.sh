#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# p2pkit perf: exit codes and one-line errors for bad input; on a machine
# without a GPU, one clear line and exit 2 in every mode (nothing hangs).
set -uo pipefail
bin=$1 data=${2:-}
fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
expect() { # desc want_rc cmd... ; stdout in $tmp/out, stderr in $tmp/err
  local desc=$1 want=$2; shift 2
  timeout 120 "$@" > "$tmp/out" 2> "$tmp/err"; local rc=$?
  if [ "$rc" != "$want" ]; then echo "FAIL $desc: exit $rc, wanted $want"; cat "$tmp/err"; fail=1
  else echo "ok   $desc"; fi
}
err_lines() { grep -c . "$tmp/err"; }
one_line() { # desc pattern: stderr is exactly one line and matches
  if [ "$(err_lines)" != 1 ] || ! grep -q -- "$2" "$tmp/err"; then
    echo "FAIL $1: wanted one line matching '$2'"; cat "$tmp/err"; fail=1
  fi
}

expect "p2pkit --help lists perf" 0 "$bin" --help
grep -q "^  perf " "$tmp/out" || { echo "FAIL --help lists no perf"; fail=1; }
expect "perf --help" 0 "$bin" perf --help
grep -q "usage: p2pkit perf" "$tmp/out" && grep -q -- "--vs-nccl" "$tmp/out" \
  || { echo "FAIL perf --help text"; fail=1; }
[ -s "$tmp/err" ] && { echo "FAIL perf --help wrote to stderr"; fail=1; }

expect "no collective" 2 "$bin" perf
grep -q "which collective" "$tmp/err" && grep -q "usage: p2pkit perf" "$tmp/err" || { echo "FAIL no-collective usage"; fail=1; }
expect "unknown flag" 2 "$bin" perf all_reduce --bogus
grep -q "unknown option '--bogus'" "$tmp/err" && grep -q "usage: p2pkit perf" "$tmp/err" \
  || { echo "FAIL usage on an unknown flag"; fail=1; }
[ -s "$tmp/out" ] && { echo "FAIL usage went to stdout"; fail=1; }

expect "unknown collective" 2 "$bin" perf allreduc
one_line "unknown collective" "unknown collective 'allreduc'"
expect "bad dtype" 2 "$bin" perf all_reduce -d float8
one_line "bad dtype" "-d 'float8': unknown data type"
expect "bad op" 2 "$bin" perf all_reduce -o mean
one_line "bad op" "-o 'mean': unknown reduction"
expect "size 0" 2 "$bin" perf all_reduce -b 0
one_line "size 0" "-b 0: sizes must be at least 1 byte"
expect "negative size" 2 "$bin" perf all_reduce -e -4K
one_line "negative size" "-e '-4K': sizes cannot be negative"
expect "non-numeric size" 2 "$bin" perf all_reduce -e lots
one_line "non-numeric size" "-e 'lots' is not a size"
expect "-g 0" 2 "$bin" perf all_reduce -g 0
one_line "-g 0" "-g 0 is out of range"
expect "--algo with all_gather" 2 "$bin" perf all_gather --algo oneshot
one_line "--algo with all_gather" "two-shot form); not for all_gather"
expect "unknown algorithm" 2 "$bin" perf all_reduce --algo ring
one_line "unknown algorithm" "--algo 'ring': unknown algorithm"

# NCCL missing: named, exit 2, before any GPU is touched.
expect "missing NCCL" 2 env P2PKIT_NCCL_LIB="$tmp/libnccl-missing.so" "$bin" perf all_reduce --vs-nccl
one_line "missing NCCL" "cannot load NCCL ($tmp/libnccl-missing.so)"

# Output files are opened before NCCL and any GPU: a bad path fails at once, named, exit 2;
# with --procs only process 0 (the one that writes them) opens them, and the others never start.
# A file that cannot be written: exit 1, as every write that fails (docs/cli.md).
expect "bad --json-file" 1 "$bin" perf all_reduce --json-file /nonexistent/dir/x.json
one_line "bad --json-file" "cannot write /nonexistent/dir/x.json: No such file or directory"
expect "bad --json-file, --procs 3" 1 "$bin" perf all_reduce --procs 3 --json-file /nonexistent/dir/x.json
one_line "bad --json-file, --procs 3" "^p2pkit perf: error: rank 0: cannot write /nonexistent/dir/x.json"
expect "bad --algo-table" 1 "$bin" perf all_reduce --sweep-algos oneshot/ll,twoshot/simple \
  --algo-table /nonexistent/dir/t.txt
one_line "bad --algo-table" "cannot write /nonexistent/dir/t.txt: No such file or directory"
expect "--json-file before NCCL" 1 env P2PKIT_NCCL_LIB="$tmp/libnccl-missing.so" "$bin" perf \
  all_reduce --vs-nccl --json-file "$tmp"
one_line "--json-file before NCCL" "cannot write $tmp: Is a directory"
expect "one file twice" 2 "$bin" perf all_reduce --sweep-algos oneshot/ll,twoshot/simple \
  --algo-table "$tmp/same" --json-file "$tmp/./same"
one_line "one file twice" "--algo-table $tmp/same and --json-file $tmp/./same name the same file"
[ -e "$tmp/same" ] && { echo "FAIL a refused run left $tmp/same behind"; fail=1; }

# nccl-tests' -p is parallel init (0 or 1), not a process count.
expect "-p 2" 2 "$bin" perf all_reduce -p 2
one_line "-p 2" "-p 2 is out of range (0 to 1)"

# --explain --from: a recorded machine's selector, no GPU needed, the same
# text a live run prints after its first line.
expect "--explain --from h200x4" 0 "$bin" perf all_reduce --explain --from "$data/h200x4.p2pkit" \
  -b 1K -e 64M -f 64
grep -q "^# p2pkit perf --explain for .*h200x4.p2pkit (p2pkit): 4 ranks of NVIDIA H200, one process, 132 multiprocessors, over P2P" "$tmp/out" \
  && grep -q "^decisions for all_reduce, eager" "$tmp/out" && grep -q "^selector: 4 ranks, one process, P2P" "$tmp/out" \
  || { echo "FAIL --explain --from text"; cat "$tmp/out"; fail=1; }
[ "$(grep -c '^ *[0-9]\+  ' "$tmp/out")" -ge 3 ] || { echo "FAIL --explain --from: no decision rows"; fail=1; }
expect "--explain --from, a process per GPU, 2 hosts" 0 "$bin" perf all_reduce --explain \
  --from "$data/h200x4.p2pkit" --procs 4 --hosts 2 -b 1M -e 1M
grep -q "a process per GPU" "$tmp/out" && grep -q "2 hosts" "$tmp/out" \
  || { echo "FAIL --explain --from --hosts"; cat "$tmp/out"; fail=1; }
expect "--explain --from, staged" 0 env P2PKIT_P2P_DISABLE=1 "$bin" perf all_reduce --explain \
  --from "$data/h200x2.p2pkit" -b 1M -e 1M
grep -q "staged through host memory: P2PKIT_P2P_DISABLE=1" "$tmp/out" || { echo "FAIL --explain --from staged"; cat "$tmp/out"; fail=1; }
# The same selector test_decisions builds for H200s (its --explain): the file's
# GPUs, SMs and P2P give what its simulated communicator has, NCCL absent and
# present, one process and a process per GPU on two hosts.
dec=$(dirname "$bin")/tests/test_decisions
if [ -x "$dec" ]; then
  for m in "one|" "per-gpu|--procs 4 --hosts 2|--nccl --hosts 2"; do
    IFS='|' read -r mode perf_flags dec_flags <<< "$m"
    lib=/nonexistent/libnccl.so; [ -n "$dec_flags" ] && lib=${P2PKIT_NCCL_LIB:-libnccl.so.2}
    # shellcheck disable=SC2086
    P2PKIT_NCCL_LIB=$lib "$bin" perf all_reduce --explain --from "$data/h200x4.p2pkit" -b 1 -e 4G -f 8 \
      -d uint8 $perf_flags | tail -n +2 > "$tmp/from.txt"
    # shellcheck disable=SC2086
    "$dec" --explain 4 "$mode" all_reduce $dec_flags > "$tmp/sim.txt"
    if grep -q "NCCL not loadable" <("$bin" perf all_reduce --explain --from "$data/h200x2.p2pkit" -b 8 -e 8 2>&1) \
       && [ -n "$dec_flags" ]; then echo "skip --explain --from vs test_decisions ($mode): no NCCL here"; continue; fi
    if diff -u "$tmp/sim.txt" "$tmp/from.txt"; then echo "ok   --explain --from equals test_decisions --explain ($mode)"
    else echo "FAIL --explain --from differs from test_decisions --explain ($mode)"; fail=1; fi
  done
fi
expect "--explain --from, more ranks than GPUs" 2 "$bin" perf all_reduce --explain --from "$data/h200x2.p2pkit" -g 4
one_line "--explain --from -g 4" "-g 4: .*h200x2.p2pkit records 2 GPUs"
expect "--explain --from, a missing file" 2 "$bin" perf all_reduce --explain --from "$tmp/none.p2pkit"
one_line "--explain --from missing" "none.p2pkit"
expect "--explain --from, hwloc (no P2P status)" 2 "$bin" perf all_reduce --explain --from "$data/hwloc_3gpu.xml"
one_line "--explain --from hwloc" "does not record whether GPU0 may reach GPU1 over P2P"
expect "--explain --from > /dev/full" 1 sh -c "'$bin' perf all_reduce --explain --from '$data/h200x2.p2pkit' > /dev/full"

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  # No GPU: one line, exit 2, in each mode.
  expect "no GPU" 2 "$bin" perf all_reduce
  one_line "no GPU" "no usable GPU"
  expect "no GPU, -g 2 graph json" 2 "$bin" perf all_reduce -g 2 -G 1 --json
  one_line "no GPU, -g 2" "no usable GPU"
  [ -s "$tmp/out" ] && { echo "FAIL no-GPU run wrote to stdout"; fail=1; }
  expect "no GPU, --procs 2" 2 "$bin" perf all_reduce --procs 2
  one_line "no GPU, --procs 2" "rank [01]: no usable GPU"
  expect "no GPU, NCCL only --procs 3" 2 "$bin" perf all_gather --nccl-only --procs 3
  one_line "no GPU, NCCL only --procs 3" "no usable GPU"
  # nccl-tests' standard line is taken whole; only the missing GPU stops it.
  expect "no GPU, nccl-tests' line" 2 "$bin" perf all_reduce -b 8 -e 128M -f 2 -g 1 -c 1 -n 20 -w 5 \
    -o sum -d float -z 0 -G 1
  one_line "no GPU, nccl-tests' line" "no usable GPU"
  # The file was opened before the GPUs were looked for; the run wrote nothing, so it is gone.
  expect "no GPU, --json-file" 2 "$bin" perf all_reduce --json-file "$tmp/r.json"
  one_line "no GPU, --json-file" "no usable GPU"
  expect "no GPU, --procs 2 --json-file" 2 "$bin" perf all_reduce --procs 2 --json-file "$tmp/r.json"
  one_line "no GPU, --procs 2 --json-file" "no usable GPU"
  [ -e "$tmp/r.json" ] && { echo "FAIL a failed run left an empty $tmp/r.json"; fail=1; }
else
  # A GPU: -g beyond the machine, and a size beyond its memory, are caught before allocating.
  n=$(nvidia-smi -L | grep -c '^GPU')
  expect "-g beyond the GPUs" 2 "$bin" perf all_reduce -g $((n + 1))
  one_line "-g beyond the GPUs" "this machine has $n GPU"
  expect "--procs beyond the GPUs" 2 "$bin" perf all_reduce --procs $((n + 1))
  one_line "--procs beyond the GPUs" "needs $((n + 1)) GPUs"
  expect "size beyond memory" 2 "$bin" perf all_reduce -b 4T -e 4T -g 1
  one_line "size beyond memory" "free"
fi
exit $fail
