#!/usr/bin/env bash
# p2pkit perf against NCCL on the 2-GPU machine: all-reduce in every mode, then
# each other collective (issue 5) eager, one process and one process per GPU.
# Usage: scripts/device/perf.sh BUILD_DIR LOG_DIR
# Writes LOG_DIR/<run>.txt (the nccl-tests style table) and LOG_DIR/<run>.json
# for each run, then a summary. About 3-5 minutes of GPU time in all.
# The caller's NCCL_NVLS_ENABLE is left as it is (never unset here).
set -uo pipefail
build=${1:?usage: perf.sh BUILD_DIR LOG_DIR}
log=${2:?usage: perf.sh BUILD_DIR LOG_DIR}
bin=$build/p2pkit
mkdir -p "$log"
[ -x "$bin" ] || { echo "error: $bin not found; build first" >&2; exit 2; }

{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=index,name,driver_version,memory.used,memory.total --format=csv 2>&1
  echo "NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE-<unset>}"
  "$bin" env 2>&1
} > "$log/machine.txt"

status=0
summary=()
# run NAME [VAR=VALUE ...] -- ARGS...
# PERF_RUNS="g2_eager g2_broadcast ..." runs only those (default: all).
run() {
  local name=$1; shift
  if [ -n "${PERF_RUNS:-}" ] && [[ " $PERF_RUNS " != *" $name "* ]]; then return 0; fi
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  echo "=== $name: ${envs[*]-} p2pkit perf $*"
  local t0=$SECONDS rc=0
  env ${envs[@]+"${envs[@]}"} timeout 420 "$bin" perf "$@" --json-file "$log/$name.json" \
    > "$log/$name.txt" 2> "$log/$name.err" || rc=$?
  cat "$log/$name.txt"
  [ -s "$log/$name.err" ] && sed 's/^/  stderr: /' "$log/$name.err"
  summary+=("$(printf '%-22s exit %-3s %4ss  %s' "$name" "$rc" "$((SECONDS - t0))" \
    "$(grep -h -E '^# (Avg bus bandwidth|Speedup|Out of bounds)' "$log/$name.txt" | tr '\n' ' ')")")
  [ "$rc" = 0 ] || status=1
}

# Fill and check kernels first: if these fail, nothing below means anything.
if [ -x "$build/tests/test_perf_kernels" ]; then
  rc=0
  "$build/tests/test_perf_kernels" > "$log/test_perf_kernels.txt" 2>&1 || rc=$?
  case $rc in
    0) echo "test_perf_kernels: ok" ;;
    77) echo "test_perf_kernels: skipped: $(grep SKIP "$log/test_perf_kernels.txt")" ;;
    *) echo "test_perf_kernels FAILED"; cat "$log/test_perf_kernels.txt"; status=1 ;;
  esac
fi

sweep="-b 8 -e 1G -f 2"
run g2_eager  -- all_reduce --vs-nccl -g 2 $sweep
run g2_graph  -- all_reduce --vs-nccl -g 2 -G 1 $sweep
run p2_eager  -- all_reduce --vs-nccl -p 2 $sweep
# No P2P: p2pkit stages through host memory, NCCL uses its SHM transport (~27 GB/s):
# fewer calls per point.
run g2_nop2p P2PKIT_P2P_DISABLE=1 NCCL_P2P_DISABLE=1 -- \
    all_reduce --vs-nccl -g 2 -b 64M -e 256M -f 2 -n 10 -w 2 --repeats 3
run p2_nop2p P2PKIT_P2P_DISABLE=1 NCCL_P2P_DISABLE=1 -- \
    all_reduce --vs-nccl -p 2 -b 64M -e 256M -f 2 -n 10 -w 2 --repeats 3
# Algorithm sweep, one process eager, written as a table for P2PKIT_ALGO_TABLE.
run g2_sweep -- all_reduce -g 2 -b 8 -e 256M -f 4 -n 10 -w 2 --repeats 3 \
    --sweep-algos oneshot/ll,oneshot/simple,twoshot/simple --algo-table "$log/algo_table.txt"
# The other collectives (issue 5): 8 B - 1 GiB, x2 steps, eager, checked
# (-c 1 is the default), against NCCL in the same run; one process, then
# one process per GPU.
for coll in broadcast reduce all_gather reduce_scatter sendrecv alltoall; do
  run "g2_$coll" -- $coll --vs-nccl -g 2 -b 8 -e 1G -f 2 -c 1
done
for coll in broadcast reduce all_gather reduce_scatter sendrecv alltoall; do
  run "p2_$coll" -- $coll --vs-nccl -p 2 -b 8 -e 1G -f 2 -c 1
done
# Send/recv per GPU into registered buffers (both libraries register):
# from 256 MiB the receives take the copy straight in.
run p2_R_sendrecv -- sendrecv --vs-nccl -p 2 -R 1 -b 8 -e 1G -f 2 -c 1
# All-gather per GPU into registered outputs: from 256 MiB shares each
# block goes straight in (sixteenth session).
run p2_R_all_gather -- all_gather --vs-nccl -p 2 -R 1 -b 8 -e 1G -f 2 -c 1

# Every collective under a CUDA graph at 64 MiB - 1 GiB (where the copy
# engines run), one process and one process per GPU, against NCCL under a
# graph in the same mode.
for coll in all_reduce broadcast reduce all_gather reduce_scatter sendrecv alltoall; do
  run "g2_G_$coll" -- $coll --vs-nccl -g 2 -G 1 -b 64M -e 1G -f 2 -n 20 -w 5
done
for coll in all_reduce broadcast reduce all_gather reduce_scatter sendrecv alltoall; do
  run "p2_G_$coll" -- $coll --vs-nccl -p 2 -G 1 -b 64M -e 1G -f 2 -n 20 -w 5
done

# The same without P2P: p2pkit stages through host memory, NCCL uses SHM.
for coll in broadcast reduce all_gather reduce_scatter sendrecv alltoall; do
  run "g2_nop2p_$coll" P2PKIT_P2P_DISABLE=1 NCCL_P2P_DISABLE=1 -- \
    $coll --vs-nccl -g 2 -b 8 -e 128M -f 4 -n 10 -w 2 --repeats 3
done

echo
echo "=== summary (logs in $log)"
printf '%s\n' "${summary[@]}"
exit $status
