#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# p2pkit bench from the command line, without a GPU: bad input gets one line
# on stderr and exit code 2; plans (--dry-run) against recorded machines.
# Usage: test_bench.sh P2PKIT_BINARY TESTS_DATA_DIR
set -u
bin=$1
data=$2
fails=0
out=$(mktemp)
err=$(mktemp)
dir=$(mktemp -d)
trap 'rm -f "$out" "$err"; rm -rf "$dir"' EXIT

fail() {
  echo "FAIL: $*" >&2
  fails=$((fails + 1))
}

# expect_error "message part" args...: exit 2 (EXPECT_RC=1: 1), exactly one line
# on stderr, naming it.
expect_error() {
  local want=$1 want_rc=${EXPECT_RC:-2}
  shift
  "$bin" bench "$@" >"$out" 2>"$err"
  local rc=$?
  local lines
  lines=$(wc -l <"$err")
  [ "$rc" = "$want_rc" ] || fail "bench $*: exit $rc, expected $want_rc ($(cat "$err"))"
  [ "$lines" = 1 ] || fail "bench $*: $lines lines on stderr, expected 1: $(cat "$err")"
  grep -qF -- "$want" "$err" || fail "bench $*: stderr lacks '$want': $(cat "$err")"
  grep -q '^p2pkit bench: error: ' "$err" || fail "bench $*: not a p2pkit error line: $(cat "$err")"
  [ -s "$out" ] && fail "bench $*: wrote to stdout on error: $(head -c 200 "$out")"
}

expect_ok() {
  "$bin" bench "$@" >"$out" 2>"$err"
  local rc=$?
  [ "$rc" = 0 ] || fail "bench $*: exit $rc: $(cat "$err")"
}

# --- arguments, no machine needed ---
expect_ok --help
grep -q -- '--methods LIST' "$out" || fail "--help lacks --methods"
grep -q -- '-b, --minbytes SIZE' "$out" || fail "--help lacks -b"
expect_error "-b 0: a size must be at least 1 byte" -b 0
expect_error "-b -5: a size cannot be negative" -b -5
expect_error "-b 'many' is not a size" -b many
expect_error "-e 'x1' is not a size" -b 1M -e x1
expect_error "is smaller than -b" -b 4M -e 1M
expect_error "unknown method 'teleport'" --methods ce,teleport
expect_error "pair 0:1 is given twice" --pairs 0:1,1:0,0:1
expect_error "GPU 1 is listed twice" --gpus 1,0,1
# An unknown option: the line, then the usage on stderr (as topo, perf, env, doctor).
"$bin" bench --fast >"$out" 2>"$err"
rc=$?
[ "$rc" = 2 ] || fail "bench --fast: exit $rc, expected 2"
[ "$(head -1 "$err")" = "p2pkit bench: error: unknown option '--fast'" ] ||
  fail "bench --fast: first line: $(head -1 "$err")"
grep -q '^usage: p2pkit bench' "$err" || fail "bench --fast: no usage on stderr: $(cat "$err")"
grep -q -- '--methods LIST' "$err" || fail "bench --fast: usage lacks the options"
[ -s "$out" ] && fail "bench --fast: wrote to stdout: $(head -c 200 "$out")"
expect_error "-n needs a value" -n
expect_error "unknown mode 'diagonal'" --mode diagonal
expect_error "only one of --json and --csv" --json --csv
expect_error "--sm-sweep=fast: expected --sm-sweep, --sm-sweep=short or --sm-sweep=full" --sm-sweep=fast

# --- plans against recorded machines (works without a GPU) ---
if [ -f "$data/nvswitch8.p2pkit" ]; then
  expect_ok --from "$data/nvswitch8.p2pkit" --dry-run -b 8 -e 1G -f 8
  grep -q '^plan: 10 sizes (8 B .. 1 GiB), 56 pairs' "$out" || fail "nvswitch8 plan header: $(head -1 "$out")"
  grep -q '0->7   NV18' "$out" || fail "nvswitch8 plan lacks 0->7 NV18"
  grep -q 'P2P/NVLink/SM / P2P/NVLink/CE' "$out" || fail "nvswitch8: AUTO should go SM small, CE large"
  grep -q 'GPU7 14 GiB$' "$out" || fail "nvswitch8: memory plan (7 pairs x 2 x 1 GiB on each GPU): $(tail -1 "$out")"
  # Buffers past 2^64 bytes are refused, not wrapped into a plan of 0 bytes.
  expect_error "size 9223372036854775808 is larger than any GPU (GPU0 would need 2^64 bytes" --from "$data/nvswitch8.p2pkit" --dry-run -b 9223372036854775808
  expect_error "size 18446744073709551615 is larger than any GPU" --from "$data/nvswitch8.p2pkit" --dry-run --pairs 0:1 -b 18446744073709551615
  expect_error "GPU 8 does not exist (this machine has 8: 0..7)" --from "$data/nvswitch8.p2pkit" --dry-run --gpus 0,8
  expect_error "pair 9:0: GPU 9 does not exist" --from "$data/nvswitch8.p2pkit" --dry-run --pairs 0:1,9:0
  P2PKIT_P2P_DISABLE=1 "$bin" bench --from "$data/nvswitch8.p2pkit" --dry-run --pairs 0:1 >"$out" 2>"$err" ||
    fail "dry run with P2P disabled: $(cat "$err")"
  grep -q 'STAGED/host (P2P disabled by P2PKIT_P2P_DISABLE)' "$out" || fail "P2P disabled: not staged: $(cat "$out")"
  P2PKIT_P2P_LEVEL=NEAR "$bin" bench --from "$data/nvswitch8.p2pkit" --dry-run >"$out" 2>"$err"
  rc=$?
  [ "$rc" = 2 ] || fail "P2PKIT_P2P_LEVEL=NEAR: exit $rc"
  grep -qF "P2PKIT_P2P_LEVEL='NEAR' is not one of LOC, NVL, PIX, PXB, PHB, SYS" "$err" || fail "P2PKIT_P2P_LEVEL=NEAR: $(cat "$err")"
else
  echo "note: $data/nvswitch8.p2pkit missing; plan checks skipped"
fi
if [ -f "$data/sys.p2pkit" ]; then
  expect_ok --from "$data/sys.p2pkit" --dry-run
  grep -q 'STAGED/host (no peer access' "$out" || fail "sys: no peer access should stage: $(cat "$out")"
fi
if [ -f "$data/pxb.p2pkit" ]; then
  P2PKIT_P2P_LEVEL=PIX "$bin" bench --from "$data/pxb.p2pkit" --dry-run -b 8 -e 1M >"$out" 2>"$err" || fail "pxb plan: $(cat "$err")"
  grep -q 'PXB .*STAGED/host (path PXB is beyond P2PKIT_P2P_LEVEL=PIX)' "$out" || fail "pxb with level PIX: $(cat "$out")"
  grep -q 'PIX .*P2P/PCIe/SM / P2P/PCIe/CE' "$out" || fail "pxb: PIX pairs keep P2P: $(cat "$out")"
fi
expect_error "cannot open topology file" --from /nonexistent/machine.p2pkit --dry-run
# A dry run prints the plan as text; outputs that need results are refused, not skipped.
expect_error "--dry-run prints the plan as text; --json needs a run" --dry-run --json
expect_error "--dry-run prints the plan as text; --csv needs a run" --dry-run --csv=plan.csv
expect_error "--dry-run prints the plan as text; --plot needs a run" --dry-run --plot plan.svg

# --- output files are opened before any GPU is looked at: a bad path fails at once,
# exit 1 as every write that fails (docs/cli.md); naming one file twice is exit 2 ---
EXPECT_RC=1 expect_error "cannot write /nonexistent/dir/x.json: No such file or directory" --json=/nonexistent/dir/x.json
EXPECT_RC=1 expect_error "cannot write /nonexistent/dir/x.csv: No such file or directory" -q --csv=/nonexistent/dir/x.csv
EXPECT_RC=1 expect_error "cannot write /nonexistent/dir/x.svg: No such file or directory" --plot /nonexistent/dir/x.svg
EXPECT_RC=1 expect_error "cannot write $dir: Is a directory" --json="$dir"
expect_error "$dir/r.json and $dir/./r.json name the same file" --json="$dir/r.json" --csv="$dir/./r.json"
[ -e "$dir/r.json" ] && fail "a refused run left $dir/r.json behind"

# --- --plot-from: a saved run's plot again, no GPU ---
expect_error "--plot-from redraws a saved run's plot: give --plot FILE.svg" --plot-from "$dir/r.json"
expect_error "--plot-from redraws a saved run's plot" --plot-from "$dir/r.json" --plot "$dir/p.svg" --json
expect_error "--plot-from $dir/none.json" --plot-from "$dir/none.json" --plot "$dir/p.svg"
[ -e "$dir/p.svg" ] && fail "a refused --plot-from left $dir/p.svg behind"
cat > "$dir/run.json" <<'JSON'
{"schema_version": 1, "tool": "p2pkit bench", "date": "2026-11-29T12:00:00Z", "hostname": "h200",
 "results": [
  {"method": "p2p-ce", "mode": "oneway", "src": 0, "dst": 1, "total": false, "pairs": 1, "bytes": 1048576,
   "status": "ok", "median_gbps": 120.5, "low": false, "verified": true},
  {"method": "p2p-ce", "mode": "oneway", "src": 0, "dst": 1, "total": false, "pairs": 1, "bytes": 268435456,
   "status": "ok", "median_gbps": 390.25, "low": false, "verified": true},
  {"method": "staged", "mode": "oneway", "src": 0, "dst": 1, "total": false, "pairs": 1, "bytes": 268435456,
   "status": "skipped", "note": "P2P only"}]}
JSON
"$bin" bench --plot-from "$dir/run.json" --plot "$dir/p.svg" >"$out" 2>"$err"
rc=$?
if grep -q "needs json-c" "$err"; then echo "skip --plot-from: $(cat "$err")"
else
  [ "$rc" = 0 ] || fail "bench --plot-from: exit $rc: $(cat "$err")"
  grep -q '<polyline class="method"' "$dir/p.svg" && grep -q "h200" "$dir/p.svg" \
    || fail "bench --plot-from: no plot of the saved run in $dir/p.svg"
  printf '{"tool": "p2pkit perf"}' > "$dir/perf.json"
  expect_error "not a p2pkit bench JSON document" --plot-from "$dir/perf.json" --plot "$dir/q.svg"
  [ -e "$dir/q.svg" ] && fail "a refused --plot-from left $dir/q.svg behind"
fi

# --- no GPU here: a run says so in one line ---
if ! command -v nvidia-smi >/dev/null 2>&1; then
  "$bin" bench -b 1M >"$out" 2>"$err"
  rc=$?
  [ "$rc" = 2 ] || fail "bench without a GPU: exit $rc"
  [ "$(wc -l <"$err")" = 1 ] || fail "bench without a GPU: not one line: $(cat "$err")"
  grep -qE 'no NVIDIA driver|no usable GPU' "$err" || fail "bench without a GPU: $(cat "$err")"
  # The outputs were opened first, and a run that measured nothing removes those it created.
  expect_error "to analyse a recorded machine" --json="$dir/r.json" --plot "$dir/r.svg" -b 1M
  [ -e "$dir/r.json" ] || [ -e "$dir/r.svg" ] && fail "a failed run left its empty outputs behind"
fi

if [ "$fails" -gt 0 ]; then
  echo "$fails check(s) failed"
  exit 1
fi
echo "test_bench.sh: all checks passed"
