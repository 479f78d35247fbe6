#!/usr/bin/env bash
# p2pkit on a machine of one GPU (nvidia-h200), in one call: what a user with
# one GPU meets, and what one GPU can check.
#   topo      `p2pkit topo` (table, JSON, the machine recorded as p2pkit,
#             hwloc and NCCL files) and test_topo_smi.sh against nvidia-smi;
#             NCCL's own topology dump of this machine (one rank)
#   refuse    `p2pkit bench` must refuse, non-zero, with a one-line reason
#   doctor    `p2pkit doctor`, table and JSON
#   ctest     the GPU tests: on one GPU the one-rank cases of the collective
#             tests and perf's one-GPU case run, the rest skip and say why
#             (test_shared_ranks runs below)
#   perf      every collective on a communicator of one rank against NCCL's,
#             8 B - 1 GiB, eager (all-reduce and broadcast under a graph too)
#   ddp       examples/ddp_mlp on every visible GPU (one rank), both backends
#   sanitize  compute-sanitizer memcheck on the one-rank cases
#   shared    ranks sharing the GPU (P2PKIT_SHARE_GPUS=1), results only:
#             the collective tests' process-per-GPU cases through cases.sh
#             (quick_mp on 2 and 3 ranks, test_collectives' whole suite on
#             2, test_allreduce's on 3)
#   kill      the kill cases on 2 ranks sharing the GPU (survivors time out)
#   shared_perf  test_shared_ranks.sh (perf -p N, every collective, P2P,
#             copy engines, staged, graph) on 2 and 4 ranks sharing the GPU
# Usage: scripts/device/one_gpu.sh LOG_DIR
#   ONE_SKIP="topo refuse doctor ctest perf ddp sanitize shared kill
#   shared_perf" leaves parts out;
#   BUDGET_S (default 540) is the whole run's time (lib.sh's fit). The build
#   is build-dev. RECORD_COMMIT names the commit. NVLink multicast stays off.
set -uo pipefail
log=${1:?usage: one_gpu.sh LOG_DIR}
mkdir -p "$log"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export P2PKIT_TIMEOUT=${P2PKIT_TIMEOUT:-20} PATH=$PATH:/usr/local/cuda/bin
build=build-dev
bin=$build/p2pkit
t=$build/tests
budget=${BUDGET_S:-540}
STEP_TAIL=${STEP_TAIL:-6}
. "$(dirname "$0")/lib.sh"
want() { [[ " ${ONE_SKIP:-} " != *" $1 "* ]]; }
{ date -u +%FT%TZ; echo "commit: ${RECORD_COMMIT:-unknown}"
  nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total --format=csv
  nvidia-smi topo -m; nvidia-smi nvlink -s 2>&1 | head -n 20
  pkg-config --modversion hwloc; ls -l /usr/lib/x86_64-linux-gnu/libnccl.so* 2>&1; } > "$log/machine.txt" 2>&1
n=$(nvidia-smi -L | grep -c '^GPU ')
echo "GPUs: $n"
step build 300 env LOG="$log/build-logs" scripts/device_run.sh build
[ -x "$bin" ] || { step_summary "build failed; logs in $log"; exit 1; }

if want topo; then
  fit topo 60 bash -c "$bin topo && $bin topo --json > $log/topo.json && $bin topo --save $log/h200x$n.p2pkit --dump-nccl $log/h200x$n.nccl.xml --save-hwloc $log/h200x$n.hwloc.xml && $bin topo --from $log/h200x$n.p2pkit"
  fit topo_smi 60 bash tests/gpu/test_topo_smi.sh "$bin" tests/data
  fit nccl_dump 60 env NCCL_TOPO_DUMP_FILE="$log/h200x$n.nccl-dump.xml" "$bin" perf all_reduce --nccl-only -g 1 -b 8 -e 8 -n 1 -w 1
fi
if want refuse; then
  # bench copies between GPUs: with one it must say so and exit non-zero
  fit refuse 30 bash -c "$bin bench; rc=\$?; echo \"exit \$rc\"; [ \$rc -ne 0 ] && [ \$rc -lt 128 ]"
  fit refuse_lat 30 bash -c "$bin bench --latency; rc=\$?; echo \"exit \$rc\"; [ \$rc -ne 0 ] && [ \$rc -lt 128 ]"
fi
if want doctor; then
  # exit 0 all OK, 1 a WARN, 2 a FAIL: the table is what counts here
  fit doctor 90 bash -c "$bin doctor; echo \"exit \$?\""
  fit doctor_json 90 bash -c "$bin doctor --json > $log/doctor.json; rc=\$?; python3 -m json.tool $log/doctor.json > /dev/null && echo \"JSON parses; exit \$rc\""
fi
if want ctest; then
  fit ctest 300 ctest --test-dir "$build" -L gpu -E shared_ranks --timeout 280 --output-on-failure -V
fi
if want perf; then
  for c in all_reduce broadcast reduce all_gather reduce_scatter sendrecv alltoall; do
    fit "perf_g1_$c" 40 "$bin" perf "$c" --vs-nccl -g 1 -b 8 -e 1G -f 8 --json-file "$log/perf_g1_$c.json"
  done
  for c in all_reduce broadcast; do
    fit "perf_g1_${c}_graph" 40 "$bin" perf "$c" --vs-nccl -g 1 -G 1 -b 8 -e 1G -f 8 --json-file "$log/perf_g1_${c}_graph.json"
  done
fi
if want ddp; then
  # the data-parallel example on every visible GPU: here one rank
  fit ddp_mlp 90 "$build/examples/ddp_mlp" --backend both
fi
if want sanitize; then
  cs=${COMPUTE_SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}
  # mc_ names: sanitize.sh's, which runs_json.py reads with the tool's summary
  for tc in test_allreduce:one_rank_process test_collectives:one_rank; do
    fit "mc_${tc/:/_}" 150 "$cs" --tool memcheck --leak-check full --report-api-errors no \
      --error-exitcode 9 "$t/${tc%%:*}" "${tc#*:}"
  done
fi
if want shared; then
  # cases.sh tags each line `ranks N` (scripts/results/runs_json.py reads it)
  fit cases 420 bash -c "P2PKIT_SHARE_GPUS=1 P2PKIT_TEST_NRANKS=2 CASE_SECS=240 scripts/device/cases.sh $build $log/cases2 \
      test_allreduce:quick_mp test_collectives:quick_mp test_collectives:process_per_gpu; s=\$?
    P2PKIT_SHARE_GPUS=1 P2PKIT_TEST_NRANKS=3 CASE_SECS=300 scripts/device/cases.sh $build $log/cases3 \
      test_allreduce:quick_mp test_collectives:quick_mp test_allreduce:process_per_gpu || s=1; exit \$s"
fi
if want kill; then
  # a rank killed mid-run on 2 ranks sharing the GPU: the survivor must time
  # out (P2PKIT_TIMEOUT) and leave nothing in /dev/shm, as on 2 GPUs
  fit kill 240 bash -c "P2PKIT_SHARE_GPUS=1 P2PKIT_TEST_NRANKS=2 CASE_SECS=100 scripts/device/cases.sh $build $log/kill \
      test_allreduce:kill_last_rank_survivors_time_out test_allreduce:kill_rank0_survivors_time_out \
      test_collectives:kill_broadcast_root_survivors_time_out test_collectives:kill_sendrecv_peer_survivors_time_out \
      test_collectives:kill_rank0_staged_all_gather_survivors_time_out"
fi
if want shared_perf; then
  fit shared_perf 200 env SHARED_RANKS="2 4" bash tests/gpu/test_shared_ranks.sh "$bin"
fi
step_summary "$n GPU(s); logs in $log"
exit $status
