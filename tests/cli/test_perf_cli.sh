#!/usr/bin/env bash
# p2pkit perf: exit codes and one-line errors for bad input; on a machine
# without a GPU, one clear line and exit 2 in every mode (nothing hangs).
set -uo pipefail
bin=$1
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
# with -p only process 0 (the one that writes them) opens them, and the others never start.
# A file that cannot be written: exit 1, as every write that fails (docs/cli.md).
expect "bad --json-file" 1 "$bin" perf all_reduce --json-file /nonexistent/dir/x.json
one_line "bad --json-file" "cannot write /nonexistent/dir/x.json: No such file or directory"
expect "bad --json-file, -p 3" 1 "$bin" perf all_reduce -p 3 --json-file /nonexistent/dir/x.json
one_line "bad --json-file, -p 3" "^p2pkit perf: error: rank 0: cannot write /nonexistent/dir/x.json"
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

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  # No GPU: one line, exit 2, in each mode.
  expect "no GPU" 2 "$bin" perf all_reduce
  one_line "no GPU" "no usable GPU"
  expect "no GPU, -g 2 graph json" 2 "$bin" perf all_reduce -g 2 -G 1 --json
  one_line "no GPU, -g 2" "no usable GPU"
  [ -s "$tmp/out" ] && { echo "FAIL no-GPU run wrote to stdout"; fail=1; }
  expect "no GPU, -p 2" 2 "$bin" perf all_reduce -p 2
  one_line "no GPU, -p 2" "rank [01]: no usable GPU"
  expect "no GPU, NCCL only -p 3" 2 "$bin" perf all_gather --nccl-only -p 3
  one_line "no GPU, NCCL only -p 3" "no usable GPU"
  # The file was opened before the GPUs were looked for; the run wrote nothing, so it is gone.
  expect "no GPU, --json-file" 2 "$bin" perf all_reduce --json-file "$tmp/r.json"
  one_line "no GPU, --json-file" "no usable GPU"
  expect "no GPU, -p 2 --json-file" 2 "$bin" perf all_reduce -p 2 --json-file "$tmp/r.json"
  one_line "no GPU, -p 2 --json-file" "no usable GPU"
  [ -e "$tmp/r.json" ] && { echo "FAIL a failed run left an empty $tmp/r.json"; fail=1; }
else
  # A GPU: -g beyond the machine, and a size beyond its memory, are caught before allocating.
  n=$(nvidia-smi -L | grep -c '^GPU')
  expect "-g beyond the GPUs" 2 "$bin" perf all_reduce -g $((n + 1))
  one_line "-g beyond the GPUs" "this machine has $n GPU"
  expect "-p beyond the GPUs" 2 "$bin" perf all_reduce -p $((n + 1))
  one_line "-p beyond the GPUs" "needs $((n + 1)) GPUs"
  expect "size beyond memory" 2 "$bin" perf all_reduce -b 4T -e 4T -g 1
  one_line "size beyond memory" "free"
fi
exit $fail
