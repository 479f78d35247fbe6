#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The recording suite, in one device call on a machine of 2 or more GPUs:
# what bench/baselines/<machine>.json is made of. Build; the collective GPU
# cases one per process; every collective against NCCL (one process and a
# process per GPU, eager and under a graph, P2P and P2P off); the copy bench
# against cudaMemcpyPeerAsync and the driver's fallback; the data-parallel
# example with both backends; PyTorch's symmetric-memory all-reduces and the
# training example (DDP, FSDP2) against NCCL. Over 9 minutes on 2 GPUs: split
# it over two calls with RECORD_SKIP.
# Usage: RECORD_COMMIT=<sha> scripts/device/record.sh LOG_DIR
#   then: scripts/baseline.py --machine h200x2 LOG_DIR > bench/baselines/h200x2.json
#   RECORD_SKIP="cases perf graph nop2p bench ddp torch" leaves parts out;
#   BUDGET_S (default 560) is the whole suite's time.
set -uo pipefail
cd "$(dirname "$0")/../.."
log=${1:?usage: record.sh LOG_DIR}
budget=${BUDGET_S:-560}
STEP_TAIL=${STEP_TAIL:-4}
. scripts/device/lib.sh
want() { [[ " ${RECORD_SKIP:-} " != *" $1 "* ]]; }
machine_info
[ "$ngpu" -ge 2 ] || echo "warning: $ngpu GPU(s): the tables of 2 ranks need 2 GPUs"
build_tree
n=$ngpu
colls="all_reduce broadcast reduce all_gather reduce_scatter sendrecv alltoall"
if want cases; then
  fit cases 200 env CASE_SECS=100 bash -c 'run_cases "$@"' _ "$log/cases" test_collectives test_allreduce
fi
if want perf; then
  for c in $colls; do
    perf_table "g${n}_$c" -- "$c" --vs-nccl -g "$n" -b 8 -e 1G -f 2
    perf_table "p${n}_$c" -- "$c" --vs-nccl --procs "$n" -b 8 -e 1G -f 2
  done
fi
if want graph; then
  for c in $colls; do
    perf_table "g${n}_G_$c" -- "$c" --vs-nccl -g "$n" -G 1 -b 8 -e 1G -f 4 -n 20 -w 5
    perf_table "p${n}_G_$c" -- "$c" --vs-nccl --procs "$n" -G 1 -b 8 -e 1G -f 4 -n 20 -w 5
  done
fi
if want nop2p; then
  # p2pkit stages through host memory, NCCL uses its SHM transport
  for c in all_reduce all_gather reduce_scatter; do
    perf_table "g${n}_nop2p_$c" P2PKIT_P2P_DISABLE=1 NCCL_P2P_DISABLE=1 -- \
      "$c" --vs-nccl -g "$n" -b 1M -e 256M -f 4 -n 10 -w 2
  done
  perf_table "p${n}_nop2p_all_reduce" P2PKIT_P2P_DISABLE=1 NCCL_P2P_DISABLE=1 -- \
    all_reduce --vs-nccl --procs "$n" -b 1M -e 256M -f 4 -n 10 -w 2
fi
if want bench; then
  fit bench 120 "$bin" bench --methods all --mode oneway,both -b 256M -n 20 -w 5 --json="$log/bench.json"
  fit bench_nop2p 90 env P2PKIT_P2P_DISABLE=1 "$bin" bench --methods staged,driver,staged-serial \
    -b 256M -n 20 -w 5 --json="$log/bench_nop2p.json"
  fit bench_latency 60 "$bin" bench --latency --lat-bytes 8 --lat-iters 1000 -n 20 --json="$log/bench_latency.json"
fi
if want ddp && [ -x "$build/examples/ddp_mlp" ]; then
  fit mlp 150 "$build/examples/ddp_mlp" --procs "$n" --backend both
fi
if want torch && [ "$n" -ge 2 ]; then
  export P2PKIT_LIB=$PWD/$build/libp2pkit.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
  fit symm_mem 150 python3 -m torch.distributed.run --standalone --nproc_per_node="$n" \
    examples/allreduce_vs_symm_mem.py --json "$log/symm_mem.json"
  fit train 300 python3 -m torch.distributed.run --standalone --nproc_per_node="$n" \
    examples/train.py --backend both --config both
fi
step_summary "$n GPUs; logs in $log"
exit $status
