#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The many-GPU suite (nvidia-h200-x4 / -x8): the topology against
# nvidia-smi, bench over every pair (one way, both ways, all at once), every
# collective against NCCL on every GPU (eager and graph, one process and
# process per GPU), the copy-engine collectives and the rooted two-shot
# against the kernels, the algorithm sweep that regenerates the table, the
# collective cases one process each, the other GPU tests, and
# test_shared_ranks.sh (up to 8 ranks sharing the GPUs).
# Usage: RECORD_COMMIT=<sha> scripts/device/multi.sh LOG_DIR
#   MULTI_SKIP="topo bench perf sweep cases ctest shared" leaves parts out;
#   BUDGET_S (default 540): a step that would not fit in what is left is
#   skipped and named (a device call is 600 s at most: split the parts over
#   two calls). The perf tables feed scripts/baseline.py like record.sh's.
set -uo pipefail
cd "$(dirname "$0")/../.."
log=${1:?usage: multi.sh LOG_DIR}
budget=${BUDGET_S:-540}
STEP_TAIL=${STEP_TAIL:-12}
. scripts/device/lib.sh
want() { [[ " ${MULTI_SKIP:-} " != *" $1 "* ]]; }
machine_info
build_tree
n=$ngpu
if want topo; then
  fit topo 60 bash -c "$bin topo && $bin topo --json > $log/topo.json && $bin topo --save $log/h200x$n.p2pkit --dump-nccl $log/h200x$n.nccl.xml"
  fit topo_smi 60 bash tests/gpu/test_topo_smi.sh "$bin" tests/data
fi
if want bench; then
  fit bench 120 "$bin" bench --methods memcpy-peer,p2p-ce,p2p-sm-push --mode oneway,both,all -b 256M -n 10 -w 3 --json="$log/bench.json"
fi
if want perf; then
  for c in all_reduce broadcast reduce all_gather reduce_scatter sendrecv alltoall; do
    PERF_SECS=90 perf_table "g${n}_$c" -- "$c" --vs-nccl -g "$n" -b 8 -e 1G -f 4
    PERF_SECS=90 perf_table "g${n}_G_$c" -- "$c" --vs-nccl -g "$n" -G 1 -b 8 -e 1G -f 4
  done
  for c in gather scatter; do # rooted, nccl-tests' gather_perf / scatter_perf (NCCL by send/recv)
    PERF_SECS=90 perf_table "g${n}_$c" -- "$c" --vs-nccl -g "$n" -b 8 -e 1G -f 4
  done
  PERF_SECS=90 perf_table "p${n}_all_reduce" -- all_reduce --vs-nccl --procs "$n" -b 8 -e 1G -f 4
  PERF_SECS=90 perf_table "p${n}_G_all_reduce" -- all_reduce --vs-nccl --procs "$n" -G 1 -b 8 -e 1G -f 4
fi
if want sweep; then
  # The copy-engine collectives (off by default beyond 2 ranks except one
  # process's all-gather and all-to-all) against the kernels and NCCL.
  for c in all_reduce reduce_scatter all_gather; do
    PERF_SECS=60 perf_table "g${n}_${c}_ce" P2PKIT_CE_ALLREDUCE_MIN=64M P2PKIT_CE_REDUCE_SCATTER_MIN=64M \
      P2PKIT_CE_ALL_GATHER_MIN=64M -- "$c" --vs-nccl -g "$n" -b 64M -e 1G -f 2
  done
  # Broadcast and reduce: the rooted two-shot against the one-shot push,
  # both against NCCL: where they cross sets P2PKIT_ROOTED_TWOSHOT_MIN.
  for c in broadcast reduce; do
    for a in oneshot twoshot; do
      PERF_SECS=60 perf_table "g${n}_${c}_$a" -- "$c" --vs-nccl -g "$n" -b 256K -e 1G -f 4 --algo "$a"
    done
  done
  fit "sweep_g${n}" 150 "$bin" perf all_reduce -g "$n" -b 8 -e 256M -f 4 -n 10 -w 2 --repeats 3 \
    --sweep-algos oneshot/ll,oneshot/ll128,oneshot/simple,twoshot/simple --algo-table "$log/algo_table_g$n.txt"
fi
if want cases; then
  fit cases 480 env CASE_SECS="${CASE_SECS:-120}" bash -c 'run_cases "$@"' _ "$log/cases" \
    test_allreduce test_allreduce_errors test_collectives
fi
if want ctest; then
  ctest_gpu ctest 150 -L gpu -E 'test_allreduce|test_collectives|shared_ranks' --timeout 120 --output-on-failure
fi
if want shared; then
  fit shared 300 bash tests/gpu/test_shared_ranks.sh "$bin"
fi
step_summary "$n GPUs; logs in $log"
exit $status
