#!/usr/bin/env bash
# Twenty-second session: compute-sanitizer over the GPU tests' paths changed
# since its last runs (s18: the map and straight-in cases; before that s9),
# each a step of its own with a limit: memcheck (every process, device leaks
# too) on the process-per-GPU collectives (slots, copy engines with few
# hardware queues, staged), the one-process graph cases, argument errors and
# the copies; racecheck and synccheck on the small process-per-GPU matrix;
# initcheck on the same. A step that runs out of time says so (rc 124); the
# tool's own summary line ("ERROR SUMMARY: N errors") is what counts.
# SET "races" (second call, after racecheck found the first run's race on
# s_ok): racecheck over every collective kernel family (the all-reduce's
# P2P kernels, every collective and send/recv per GPU, the staged kernels),
# synccheck and memcheck on every collective per GPU, racecheck on copies.
# Usage: s22_sanitize.sh LOG_DIR [first|races]  (RECORD_COMMIT names the commit)
set -uo pipefail
log=${1:?usage: s22_sanitize.sh LOG_DIR [first|races]}
set=${2:-first}
here=$(dirname "$0")
mkdir -p "$log"
# PRE_CASES: test:case items run plainly first (try.sh), each with its result.
# shellcheck disable=SC2086
"$here/../try.sh" "$log" - ${PRE_CASES:-} > "$log/try.txt" 2>&1
grep -E '^(build|case)' "$log/try.txt" | tail -n 20
[ -x build-dev/tests/test_allreduce ] || { tail -n 20 "$log/try.txt"; exit 1; }
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export P2PKIT_TIMEOUT=90
cs=/usr/local/cuda/bin/compute-sanitizer
t=build-dev/tests
budget=${BUDGET_S:-540}
san() { # name limit tool [tool args] -- test case...
  local name=$1 limit=$2 tool=$3; shift 3
  local targs=()
  while [ "$1" != -- ]; do targs+=("$1"); shift; done
  shift
  if [ $((SECONDS + 15)) -ge "$budget" ]; then echo "$name: skipped (call budget)"; return; fi
  [ $((SECONDS + limit)) -le "$budget" ] || limit=$((budget - SECONDS))
  local t0=$SECONDS
  timeout --kill-after=5 "$limit" "$cs" --tool "$tool" --target-processes all --error-exitcode 99 \
    "${targs[@]}" "$@" > "$log/$name.txt" 2>&1
  local rc=$?
  printf '%-34s rc=%-3s %4ss  %s\n' "$name" "$rc" "$((SECONDS - t0))" \
    "$(grep -h 'ERROR SUMMARY' "$log/$name.txt" | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
}
if [ "$set" = first ]; then
  san mc_quick_mp 120 memcheck --leak-check full -- "$t/test_allreduce" quick_mp
  san mc_fewq 60 memcheck --leak-check full -- "$t/test_allreduce" process_per_gpu_few_hardware_queues
  san mc_ar_cep 90 memcheck -- "$t/test_allreduce" process_per_gpu_copy_engine_p2p
  san mc_coll_cep 90 memcheck -- "$t/test_collectives" process_per_gpu_copy_engine_p2p
  san sc_quick_mp 90 synccheck -- "$t/test_allreduce" quick_mp
  san rc_quick_mp 120 racecheck -- "$t/test_allreduce" quick_mp
  san mc_ar_staged_ce 90 memcheck -- "$t/test_allreduce" process_per_gpu_p2p_disabled_copy_engine
  san mc_errors 60 memcheck -- "$t/test_allreduce_errors" argument_checks mismatched_count_small mismatched_dtype
  san mc_bcast_own 60 memcheck -- "$t/test_collectives" one_process_graph_broadcast_own_copy
  san mc_1p_graph 60 memcheck -- "$t/test_allreduce" one_process_graph_replay
  san mc_copy 90 memcheck -- "$t/test_copy"
  san ic_quick_mp 90 initcheck -- "$t/test_allreduce" quick_mp
else
  san rc_quick_mp 90 racecheck -- "$t/test_allreduce" quick_mp
  san rc_coll_mp 150 racecheck -- "$t/test_collectives" process_per_gpu
  san rc_staged_ar 120 racecheck -- "$t/test_allreduce" process_per_gpu_p2p_disabled
  san rc_staged_coll 120 racecheck -- "$t/test_collectives" process_per_gpu_p2p_disabled
  san sc_coll_mp 120 synccheck -- "$t/test_collectives" process_per_gpu
  san mc_coll_mp 150 memcheck -- "$t/test_collectives" process_per_gpu
  san rc_copy 150 racecheck -- "$t/test_copy"
fi
echo "done at ${SECONDS}s"
