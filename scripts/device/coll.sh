#!/usr/bin/env bash
# Communicator and all-reduce on the 2x H200 device machine: GPU tests, a
# memcheck pass over a small case, the INFO log of the choices made, and a
# sweep of the tuning knobs with NCCL timed side by side in the same run.
#
# Usage: scripts/device/coll.sh BUILD_DIR LOG_DIR
#   BUILD_DIR: a configured and built tree (any build type; Release times best)
#   LOG_DIR:   created if missing; everything is written there, summary last
# About 3-4 minutes of GPU time. Reads the GPUs' state only (never changes
# clocks, never resets). NCCL_NVLS_ENABLE is left as the machine sets it (0);
# the sweep sets it to 0 itself when unset. Never calls cuMulticastCreate.
set -uo pipefail
build=${1:?usage: coll.sh BUILD_DIR LOG_DIR}
logs=${2:?usage: coll.sh BUILD_DIR LOG_DIR}
tests="$build/tests"
[ -x "$tests/test_allreduce" ] || { echo "coll.sh: $tests/test_allreduce not found; build first" >&2; exit 2; }
mkdir -p "$logs"
summary="$logs/summary.txt"
: >"$summary"
status=0

step() { # step NAME LIMIT_S CMD...: stdout -> NAME.txt, stderr -> NAME.err
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$logs/$name.txt" 2>"$logs/$name.err"
  local rc=$?
  printf '%-16s rc=%-3d %4ds  %s\n' "$name" "$rc" $((SECONDS - t0)) "$*" | tee -a "$summary"
  [ "$rc" = 0 ] || { status=1; tail -15 "$logs/$name.err" "$logs/$name.txt" | sed 's/^/    /'; }
  return 0
}

nvidia-smi --query-gpu=index,name,pci.bus_id,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu \
  --format=csv >"$logs/gpus.csv" 2>&1
nvidia-smi topo -m >"$logs/nvidia-smi-topo.txt" 2>&1
echo "NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE-<unset>}" >"$logs/env.txt"
env | grep -E '^(P2PKIT|NCCL)_' >>"$logs/env.txt"

# 1. Correctness: every type x op x in/out-of-place at odd counts, aligned and
#    not, each algorithm, one process and process per GPU, CUDA graphs, P2P
#    disabled, a rank killed; bad input and mismatched calls.
step gpu-tests 900 ctest --test-dir "$build" -L gpu -R allreduce --output-on-failure --timeout 900

# 2. What the communicator chose, per peer and per algorithm (INFO log).
P2PKIT_DEBUG=INFO P2PKIT_DEBUG_SUBSYS=COLL,BOOT step info-log 120 "$tests/test_allreduce" quick_mp

# 3. compute-sanitizer memcheck on small cases. Process per GPU, children
#    included (one process driving both GPUs may serialise kernels under the
#    tool, and these kernels wait for each other: that one is bounded and
#    informative only).
if command -v compute-sanitizer >/dev/null; then
  P2PKIT_TIMEOUT=60 step memcheck-mp 300 compute-sanitizer --tool memcheck --target-processes all \
    --error-exitcode 99 "$tests/test_allreduce" quick_mp
  P2PKIT_TIMEOUT=60 step memcheck-errors 200 compute-sanitizer --tool memcheck --error-exitcode 99 \
    "$tests/test_allreduce_errors" argument_checks mismatched_count_small
  P2PKIT_TIMEOUT=20 step memcheck-1proc 90 compute-sanitizer --tool memcheck --error-exitcode 99 \
    "$tests/test_allreduce" quick
else
  echo "compute-sanitizer: not found" | tee -a "$summary"
fi

# 4. Tuning knobs at 8 B, 64 KiB, 1 MiB, 16 MiB, 256 MiB, 1 GiB, eager and
#    graph, NCCL side by side; writes the eager winners as an algorithm table.
step sweep 420 "$tests/bench_allreduce_sweep" --table "$logs/algo_table_sweep.txt"
# Larger mailboxes (4x the buffer) for the big sizes.
P2PKIT_BUFFER_SIZE=256M step sweep-buf256m 240 "$tests/bench_allreduce_sweep" --sizes 256M,1G \
  --table "$logs/algo_table_buf256m.txt"
# 512 smaller mailboxes: lets the grid use 2 blocks per multiprocessor (256 threads each).
P2PKIT_COLL_MAILBOXES=512 step sweep-box512 240 "$tests/bench_allreduce_sweep" --sizes 16M,1G \
  --table "$logs/algo_table_box512.txt"
# No P2P: host staging against NCCL's SHM transport.
step sweep-nop2p 300 "$tests/bench_allreduce_sweep" --p2p-disable --sizes 8,1M,16M,128M \
  --table "$logs/algo_table_nop2p.txt"

echo
echo "=== summary (logs in $logs)"
cat "$summary"
for f in sweep sweep-buf256m sweep-box512 sweep-nop2p; do
  [ -f "$logs/$f.txt" ] || continue
  echo "--- $f"
  sed -n '/^# summary/,$p' "$logs/$f.txt"
  grep -h "WRONG RESULT" "$logs/$f.txt" | head -5
done
grep -h -E "^(one_process|count_zero|several|process_per|kill_|argument|registration|init_|mismatched)" \
  "$build/Testing/Temporary/LastTest.log" 2>/dev/null | head -40
exit $status
