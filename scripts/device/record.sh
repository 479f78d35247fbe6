#!/usr/bin/env bash
# The recording run of a session, in one call on the 2-GPU machine: build,
# the collective GPU tests one case per process, the perf tables against
# NCCL (PERF_RUNS picks; default: all-reduce in three modes, P2P off, and
# every other collective over P2P), the small-message floors (graph 8 B -
# 64 KiB), the all-reduce under a grid cap against NCCL capped alike, and the
# data-parallel example with both backends, then the noisiest goals in
# three interleaved rounds (specs/rounds.txt). About 7 minutes.
# Usage: scripts/device/record.sh LOG_DIR   (then tar LOG_DIR into $OUT)
set -uo pipefail
log=${1:?usage: record.sh LOG_DIR}
mkdir -p "$log"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export P2PKIT_TIMEOUT=${P2PKIT_TIMEOUT:-20} PATH=$PATH:/usr/local/cuda/bin
build=build-dev
STEP_TAIL=4
. "$(dirname "$0")/lib.sh"
# The device's copy of the tree may carry a stale .git: the caller names the
# commit it sent (RECORD_COMMIT).
{ date -u +%FT%TZ; echo "commit: ${RECORD_COMMIT:-unknown}"; nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > "$log/machine.txt" 2>&1
step build 300 env LOG="$log/build-logs" scripts/device_run.sh build
step cases 260 env CASE_SECS=100 scripts/device/cases.sh "$build" "$log/cases" ${RECORD_TESTS:-test_collectives test_allreduce}
step ddp_grad_sync 90 "$build/tests/test_ddp_grad_sync"
export PERF_RUNS=${PERF_RUNS:-"g2_eager g2_graph p2_eager g2_nop2p p2_nop2p g2_broadcast g2_reduce g2_all_gather g2_reduce_scatter g2_sendrecv g2_alltoall p2_broadcast p2_reduce p2_all_gather p2_reduce_scatter p2_sendrecv p2_R_sendrecv p2_R_all_gather p2_alltoall g2_G_all_reduce g2_G_broadcast g2_G_reduce g2_G_all_gather g2_G_reduce_scatter g2_G_sendrecv g2_G_alltoall p2_G_all_reduce p2_G_broadcast p2_G_reduce p2_G_all_gather p2_G_reduce_scatter p2_G_sendrecv p2_G_alltoall"}
step perf 480 scripts/device/perf.sh "$build" "$log/perf"
step graph_n200 60 "$build/p2pkit" perf all_reduce -g 2 -G 1 -n 200 -b 8 -e 64K -f 2 --vs-nccl --json-file "$log/graph_n200.json"
step capped 120 scripts/device/tune.sh "$build" "$log/capped" scripts/device/specs/capped.txt
step launch 60 "$build/tests/bench_launch"
step mlp 120 "$build/examples/ddp_mlp" -p 2 --backend both
# The goals NCCL's spread decides, in interleaved rounds (ROUNDS_SPEC=- skips).
rounds=${ROUNDS_SPEC:-scripts/device/specs/rounds.txt}
[ "$rounds" = - ] || step rounds 240 scripts/device/tune.sh "$build" "$log/rounds" "$rounds"
step_summary "logs in $log"
exit $status
