#!/usr/bin/env bash
# compute-sanitizer over the GPU tests, each tool and case a step of its own
# with a limit, every process of a case followed (--target-processes all).
# The tool's summary line is what counts ("ERROR SUMMARY: 0 errors",
# "RACECHECK SUMMARY: 0 hazards"); a step that runs out of time says rc 124.
#   mem   memcheck (device leaks too on the small matrix) on the all-reduce
#         matrix per GPU, the hardware-queue fallback, the staged copy
#         engines, argument and mismatch errors, one-process graphs, every
#         collective per GPU and the copies; synccheck and initcheck on the
#         matrix and the collectives (~2.5 min)
#   race  racecheck on the collective kernels the tests run (the
#         all-reduce's P2P kernels, every collective and send/recv per
#         GPU, the staged kernels) and the copy kernels (~6 min)
#   all   both (one device call: ~9 min with the build)
# Not here: the copy-engine cases over P2P (`*_copy_engine_p2p`). Their
# one-thread wait kernels spin beside copies and other kernels, and the tool
# runs one kernel at a time, so every call times out (s22 run 2); sanitize
# those paths' kernels with the thresholds at 0, as the cases above do.
# CUDA API errors are not reported (--report-api-errors no): the library
# meets some on purpose and handles them (peer access already enabled, s22
# run 2: the only "errors" memcheck counted there), and the tests check
# every status the library returns.
# Usage: scripts/device/sanitize.sh LOG_DIR [mem|race|all]
#   PRE_CASES: test:case items run plainly first (try.sh), each with its result
#   BUDGET_S: seconds for the whole script (540); steps that would pass it are
#   shortened, then skipped. RECORD_COMMIT names the commit.
set -uo pipefail
log=${1:?usage: sanitize.sh LOG_DIR [mem|race|all]}
which=${2:-all}
case $which in mem | race | all) ;; *) echo "sanitize.sh: set '$which' is not mem, race or all" >&2; exit 2 ;; esac
here=$(dirname "$0")
mkdir -p "$log"
# shellcheck disable=SC2086
"$here/try.sh" "$log" - ${PRE_CASES:-} > "$log/try.txt" 2>&1
grep -E '^(build|case)' "$log/try.txt" | tail -n 20
[ -x build-dev/tests/test_allreduce ] || { tail -n 20 "$log/try.txt"; exit 1; }
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export P2PKIT_TIMEOUT=90
cs=${COMPUTE_SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}
t=build-dev/tests
budget=${BUDGET_S:-540}
status=0
san() { # name limit tool [tool args] -- test case...
  local name=$1 limit=$2 tool=$3; shift 3
  local targs=()
  while [ "$1" != -- ]; do targs+=("$1"); shift; done
  shift
  if [ $((SECONDS + 15)) -ge "$budget" ]; then echo "$name: skipped (BUDGET_S)"; status=1; return; fi
  [ $((SECONDS + limit)) -le "$budget" ] || limit=$((budget - SECONDS))
  local t0=$SECONDS
  timeout --kill-after=5 "$limit" "$cs" --tool "$tool" --target-processes all --report-api-errors no \
    --error-exitcode 99 "${targs[@]}" "$@" > "$log/$name.txt" 2>&1
  local rc=$?
  [ "$rc" = 0 ] || status=1
  printf '%-18s rc=%-3s %4ss  %s\n' "$name" "$rc" "$((SECONDS - t0))" \
    "$(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$log/$name.txt" | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
}
if [ "$which" != race ]; then
  san mc_quick_mp 120 memcheck --leak-check full -- "$t/test_allreduce" quick_mp
  san mc_fewq 60 memcheck --leak-check full -- "$t/test_allreduce" process_per_gpu_few_hardware_queues
  san mc_ar_staged_ce 60 memcheck -- "$t/test_allreduce" process_per_gpu_p2p_disabled_copy_engine
  san mc_errors 60 memcheck -- "$t/test_allreduce_errors" argument_checks mismatched_count_small mismatched_dtype
  san mc_bcast_own 60 memcheck -- "$t/test_collectives" one_process_graph_broadcast_own_copy
  san mc_1p_graph 60 memcheck -- "$t/test_allreduce" one_process_graph_replay
  san mc_coll_mp 90 memcheck -- "$t/test_collectives" process_per_gpu
  san mc_copy 120 memcheck -- "$t/test_copy"
  san sc_quick_mp 60 synccheck -- "$t/test_allreduce" quick_mp
  san sc_coll_mp 90 synccheck -- "$t/test_collectives" process_per_gpu
  san ic_quick_mp 60 initcheck -- "$t/test_allreduce" quick_mp
fi
if [ "$which" != mem ]; then
  san rc_quick_mp 90 racecheck -- "$t/test_allreduce" quick_mp
  san rc_coll_mp 180 racecheck -- "$t/test_collectives" process_per_gpu
  san rc_staged_ar 120 racecheck -- "$t/test_allreduce" process_per_gpu_p2p_disabled
  san rc_staged_coll 150 racecheck -- "$t/test_collectives" process_per_gpu_p2p_disabled
  san rc_copy 150 racecheck -- "$t/test_copy"
fi
echo "done at ${SECONDS}s"
exit $status
