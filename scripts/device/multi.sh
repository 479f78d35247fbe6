#!/usr/bin/env bash
# Issue 8 on a machine with more than 2 GPUs (nvidia-h200-x4 / -x8): the
# topology against nvidia-smi, the GPU tests on every GPU (the collective
# cases one process each: cases.sh; the other GPU tests through ctest), bench
# over every pair (one way, both ways, all at once), perf of every
# collective against NCCL on every GPU, eager and graph, one process and
# process per GPU, the algorithm sweep that regenerates the table, then the
# GPU tests and test_shared_ranks.sh (up to 8 ranks sharing the GPUs).
# Usage: scripts/device/multi.sh BUILD_DIR LOG_DIR
#   MULTI_SKIP="topo bench perf sweep cases ctest shared" leaves parts out; MULTI_BUDGET_S
#   (default 540) is the whole run's time: a step that would not fit in what
#   is left is skipped and named as skipped (a device call is 600 s at most,
#   so the parts may go in two calls).
# NVLink multicast stays off.
set -uo pipefail
build=${1:?usage: multi.sh BUILD_DIR LOG_DIR}
log=${2:?usage: multi.sh BUILD_DIR LOG_DIR}
mkdir -p "$log"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export P2PKIT_TIMEOUT=${P2PKIT_TIMEOUT:-20}
bin=$build/p2pkit
n=$(nvidia-smi -L | wc -l)
budget=${MULTI_BUDGET_S:-540}
STEP_TAIL=${STEP_TAIL:-12}
. "$(dirname "$0")/lib.sh"
want() { [[ " ${MULTI_SKIP:-} " != *" $1 "* ]]; }
{ date -u +%FT%TZ; echo "commit: ${RECORD_COMMIT:-unknown}"
  nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv
  nvidia-smi topo -m; } > "$log/machine.txt" 2>&1
if want topo; then
  fit topo 60 bash -c "$bin topo && $bin topo --json > $log/topo.json && $bin topo --save $log/h200x$n.p2pkit --dump-nccl $log/h200x$n.nccl.xml"
  fit topo_smi 60 bash tests/gpu/test_topo_smi.sh "$bin" tests/data
fi
if want bench; then
  fit bench 120 "$bin" bench --methods memcpy-peer,p2p-ce,p2p-sm-push --mode oneway,both,all -b 256M -n 10 -w 3 --json="$log/bench.json"
fi
if want perf; then
  for c in all_reduce broadcast reduce all_gather reduce_scatter sendrecv alltoall; do
    fit "perf_g${n}_$c" 90 "$bin" perf "$c" --vs-nccl -g "$n" -b 8 -e 1G -f 4 --json-file "$log/perf_g${n}_$c.json"
    fit "perf_g${n}_${c}_graph" 90 "$bin" perf "$c" --vs-nccl -g "$n" -G 1 -b 8 -e 1G -f 4 --json-file "$log/perf_g${n}_${c}_graph.json"
  done
  fit "perf_p${n}_all_reduce" 90 "$bin" perf all_reduce --vs-nccl -p "$n" -b 8 -e 1G -f 4 --json-file "$log/perf_p${n}_all_reduce.json"
  fit "perf_p${n}_all_reduce_graph" 90 "$bin" perf all_reduce --vs-nccl -p "$n" -G 1 -b 8 -e 1G -f 4 --json-file "$log/perf_p${n}_all_reduce_graph.json"
fi
if want sweep; then
  # The copy-engine collectives over P2P (ce_p2p.c): with more than 2 GPUs
  # on by default for one process's all-gather and all-to-all only; measure
  # them here against the kernels (the runs above) and NCCL.
  for c in all_reduce reduce_scatter all_gather; do
    fit "perf_g${n}_${c}_ce" 60 env P2PKIT_CE_ALLREDUCE_MIN=64M P2PKIT_CE_REDUCE_SCATTER_MIN=64M \
      P2PKIT_CE_ALL_GATHER_MIN=64M "$bin" perf "$c" --vs-nccl -g "$n" -b 64M -e 1G -f 2 \
      --json-file "$log/perf_g${n}_${c}_ce.json"
  done
  # Broadcast and reduce: the rooted two-shot (default from
  # P2PKIT_ROOTED_TWOSHOT_MIN, 4 MiB, a guess) against the one-shot push,
  # both against NCCL, 256 KiB - 1 GiB: where they cross sets the threshold.
  for c in broadcast reduce; do
    for a in oneshot twoshot; do
      fit "perf_g${n}_${c}_$a" 60 "$bin" perf "$c" --vs-nccl -g "$n" -b 256K -e 1G -f 4 --algo "$a" \
        --json-file "$log/perf_g${n}_${c}_$a.json"
    done
  done
  fit "sweep_g${n}" 150 "$bin" perf all_reduce -g "$n" -b 8 -e 256M -f 4 -n 10 -w 2 --repeats 3 \
    --sweep-algos oneshot/ll,oneshot/ll128,oneshot/simple,twoshot/simple --algo-table "$log/algo_table_g$n.txt"
fi
if want cases; then
  CASE_SECS=${CASE_SECS:-120} fit cases 480 scripts/device/cases.sh "$build" "$log/cases"
fi
if want ctest; then
  fit ctest 150 ctest --test-dir "$build" -L gpu -E 'test_allreduce|test_collectives|shared_ranks' --timeout 120 --output-on-failure
fi
if want shared; then
  fit shared 300 bash tests/gpu/test_shared_ranks.sh "$bin"
fi
step_summary "$n GPUs; logs in $log"
exit $status
