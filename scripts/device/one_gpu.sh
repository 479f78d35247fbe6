#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The one-GPU suite (nvidia-h200), in one device call: what a user with one
# GPU meets, and what one GPU can check.
#   topo      `p2pkit topo` (table, JSON, the machine recorded as p2pkit,
#             hwloc and NCCL files) and test_topo_smi.sh against nvidia-smi
#   refuse    `p2pkit bench` must refuse, non-zero, with a one-line reason
#   doctor    `p2pkit doctor`, table and JSON
#   ctest     the GPU tests; a case that skips fails unless it needs more
#             GPUs than one (scripts/device/skips.py judges each SKIP line)
#   perf      every collective on a communicator of one rank against NCCL's
#   ddp       examples/ddp_mlp on one rank, both backends
#   sanitize  compute-sanitizer memcheck on the one-rank cases
#   shared    ranks sharing the GPU (P2PKIT_SHARE_GPUS=1), results only:
#             the process-per-GPU cases on 2 and 3 ranks; the uneven
#             all-to-all, gather and scatter on 2, 3 and 4 ranks
#   kill      the kill cases on 2 ranks sharing the GPU (survivors time out)
#   shared_perf  tests/gpu/test_shared_ranks.sh on 2 and 4 ranks
#   late      only when ONE_ONLY names it (over 3 minutes): 2 ranks sharing
#             the GPU under the default timeouts, each 90 s late once
#             (tests/gpu/test_timeouts.c)
# Usage: RECORD_COMMIT=<sha> scripts/device/one_gpu.sh LOG_DIR
#   ONE_SKIP="topo refuse ..." leaves parts out; ONE_ONLY="late ..." runs only
#   those; BUDGET_S (default 540).
set -uo pipefail
cd "$(dirname "$0")/../.."
log=${1:?usage: one_gpu.sh LOG_DIR}
budget=${BUDGET_S:-540}
STEP_TAIL=${STEP_TAIL:-6}
. scripts/device/lib.sh
named() { [[ " ${ONE_ONLY:-} " == *" $1 "* ]]; }
want() { [[ " ${ONE_SKIP:-} " != *" $1 "* ]] && { [ -z "${ONE_ONLY:-}" ] || named "$1"; }; }
machine_info
if [ "${ONE_ONLY:-}" = late ]; then build_tree test_timeouts; else build_tree; fi
t=$build/tests
n=$ngpu
if want topo; then
  fit topo 60 bash -c "$bin topo && $bin topo --json > $log/topo.json && $bin topo --save $log/h200x$n.p2pkit \
    --dump-nccl $log/h200x$n.nccl.xml --save-hwloc $log/h200x$n.hwloc.xml && $bin topo --from $log/h200x$n.p2pkit"
  fit topo_smi 60 bash tests/gpu/test_topo_smi.sh "$bin" tests/data
fi
if want refuse; then
  fit refuse 30 bash -c "$bin bench; rc=\$?; echo \"exit \$rc\"; [ \$rc -ne 0 ] && [ \$rc -lt 128 ]"
fi
if want doctor; then
  # exit 0 all OK, 1 a WARN, 2 a FAIL: the table is what counts here
  fit doctor 90 bash -c "$bin doctor; echo \"exit \$?\""
  fit doctor_json 90 bash -c "$bin doctor --json > $log/doctor.json; rc=\$?; python3 -m json.tool $log/doctor.json > /dev/null && echo \"JSON parses; exit \$rc\""
fi
if want ctest; then
  ctest_gpu ctest 300 -L gpu -E shared_ranks --timeout 280 --output-on-failure
fi
if want perf; then
  for c in all_reduce broadcast reduce all_gather reduce_scatter sendrecv alltoall; do
    PERF_SECS=40 perf_table "g1_$c" -- "$c" --vs-nccl -g 1 -b 8 -e 1G -f 8
  done
fi
if want ddp && [ -x "$build/examples/ddp_mlp" ]; then
  fit ddp_mlp 90 "$build/examples/ddp_mlp" --backend both
fi
if want sanitize; then
  for tc in test_allreduce:one_rank_process test_collectives:one_rank; do
    fit "memcheck.${tc/:/.}" 150 compute-sanitizer --tool memcheck --leak-check full --report-api-errors no \
      --error-exitcode 9 "$t/${tc%%:*}" "${tc#*:}"
  done
fi
if want shared; then
  fit shared2 200 env P2PKIT_SHARE_GPUS=1 P2PKIT_TEST_NRANKS=2 CASE_SECS=240 bash -c 'run_cases "$@"' _ "$log/shared2" \
    test_allreduce:quick_mp test_collectives:quick_mp test_collectives:process_per_gpu
  fit shared3 220 env P2PKIT_SHARE_GPUS=1 P2PKIT_TEST_NRANKS=3 CASE_SECS=300 bash -c 'run_cases "$@"' _ "$log/shared3" \
    test_allreduce:quick_mp test_collectives:quick_mp test_allreduce:process_per_gpu
  fit shared_v 200 env P2PKIT_SHARE_GPUS=1 CASE_SECS=200 bash -c 'run_cases "$@"' _ "$log/shared_v" \
    test_alltoallv_rooted:ranks_2_to_4
fi
if want kill; then
  fit kill 240 env P2PKIT_SHARE_GPUS=1 P2PKIT_TEST_NRANKS=2 CASE_SECS=100 bash -c 'run_cases "$@"' _ "$log/kill" \
    test_allreduce:kill_last_rank_survivors_time_out test_allreduce:kill_rank0_survivors_time_out \
    test_collectives:kill_broadcast_root_survivors_time_out test_collectives:kill_sendrecv_peer_survivors_time_out \
    test_collectives:kill_rank0_staged_all_gather_survivors_time_out
fi
if want shared_perf; then
  fit shared_perf 200 env SHARED_RANKS="2 4" bash tests/gpu/test_shared_ranks.sh "$bin"
fi
if named late; then
  fit late 300 env -u P2PKIT_TIMEOUT P2PKIT_SHARE_GPUS=1 "$t/test_timeouts" late_ranks_under_default_timeouts
fi
step_summary "$n GPU(s); logs in $log"
exit $status
