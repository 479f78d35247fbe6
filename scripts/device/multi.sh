#!/usr/bin/env bash
# Issue 8 on a machine with more than 2 GPUs (nvidia-h200-x4 / -x8), in one
# call: the topology against nvidia-smi, the collective GPU tests on every GPU
# (one process and process per GPU, each case alone: cases.sh), bench over
# every pair (one way, both ways, all at once), and perf of every collective
# against NCCL on every GPU, eager and graph.
# Usage: scripts/device/multi.sh BUILD_DIR LOG_DIR        (about 5 minutes)
# MULTI_SKIP="tests bench ..." leaves parts out. NVLink multicast stays off.
set -uo pipefail
build=${1:?usage: multi.sh BUILD_DIR LOG_DIR}
log=${2:?usage: multi.sh BUILD_DIR LOG_DIR}
mkdir -p "$log"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
bin=$build/p2pkit
n=$(nvidia-smi -L | wc -l)
STEP_TAIL=12
. "$(dirname "$0")/lib.sh"
want() { [[ " ${MULTI_SKIP:-} " != *" $1 "* ]]; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv
  nvidia-smi topo -m; } > "$log/machine.txt" 2>&1
if want topo; then
  step topo 60 bash -c "$bin topo && $bin topo --json > $log/topo.json && $bin topo --save $log/h200x$n.p2pkit --dump-nccl $log/h200x$n.nccl.xml"
  step topo_smi 60 bash tests/gpu/test_topo_smi.sh "$bin" tests/data
fi
if want tests; then
  CASE_SECS=${CASE_SECS:-120} step cases 300 scripts/device/cases.sh "$build" "$log/cases"
fi
if want bench; then
  step bench 120 "$bin" bench --methods memcpy-peer,p2p-ce,p2p-sm-push --mode oneway,both,all -b 256M -n 10 -w 3 --json="$log/bench.json"
fi
if want perf; then
  for c in all_reduce broadcast reduce all_gather reduce_scatter sendrecv alltoall; do
    step "perf_g${n}_$c" 90 "$bin" perf "$c" --vs-nccl -g "$n" -b 8 -e 1G -f 4 --json-file "$log/perf_g${n}_$c.json"
  done
  step "perf_g${n}_all_reduce_graph" 90 "$bin" perf all_reduce --vs-nccl -g "$n" -G 1 -b 8 -e 1G -f 4 --json-file "$log/perf_g${n}_all_reduce_graph.json"
  step "perf_p${n}_all_reduce" 90 "$bin" perf all_reduce --vs-nccl -p "$n" -b 8 -e 1G -f 4 --json-file "$log/perf_p${n}_all_reduce.json"
  # The copy-engine collectives over P2P (ce_p2p.c) run by default on 2 GPUs
  # only: measure them here against the kernels (the runs above) and NCCL.
  for c in all_reduce reduce_scatter all_gather; do
    step "perf_g${n}_${c}_ce" 90 env P2PKIT_CE_ALLREDUCE_MIN=64M P2PKIT_CE_REDUCE_SCATTER_MIN=64M \
      P2PKIT_CE_ALL_GATHER_MIN=64M "$bin" perf "$c" --vs-nccl -g "$n" -b 64M -e 1G -f 2 \
      --json-file "$log/perf_g${n}_${c}_ce.json"
  done
  step "sweep_g${n}" 120 "$bin" perf all_reduce -g "$n" -b 8 -e 256M -f 4 -n 10 -w 2 --repeats 3 \
    --sweep-algos oneshot/ll,oneshot/simple,twoshot/simple --algo-table "$log/algo_table_g$n.txt"
fi
step_summary "$n GPUs; logs in $log"
exit $status
