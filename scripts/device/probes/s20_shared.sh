#!/usr/bin/env bash
# Twentieth session: the collective GPU tests' process-per-GPU cases with
# more ranks than GPUs (P2PKIT_SHARE_GPUS=1: ranks r and r + 2 share GPU
# r % 2), so the 3- and 4-rank code paths run on the 2-GPU machine. Results
# only: kernels of two processes on one GPU take turns, so no time here
# means anything. Usage: s20_shared.sh BUILD LOG_DIR [RANKS...] (default 4 3)
#   CASES overrides the list (test:case ...); SECS the limit per case (60).
set -uo pipefail
build=${1:?usage: s20_shared.sh BUILD LOG_DIR [RANKS...]}
log=${2:?usage: s20_shared.sh BUILD LOG_DIR [RANKS...]}
shift 2
ranks=${*:-4 3}
mkdir -p "$log"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export P2PKIT_SHARE_GPUS=1 P2PKIT_TIMEOUT=${P2PKIT_TIMEOUT:-15}
nvidia-smi --query-gpu=index,compute_mode --format=csv,noheader
cases=${CASES:-test_collectives:process_per_gpu test_allreduce:process_per_gpu
  test_collectives:process_per_gpu_p2p_disabled test_allreduce:process_per_gpu_p2p_disabled
  test_collectives:process_per_gpu_copy_engine_p2p test_allreduce:process_per_gpu_copy_engine_p2p
  test_allreduce:process_per_gpu_p2p_disabled_copy_engine test_allreduce:kill_last_rank_survivors_time_out}
status=0
for n in $ranks; do
  P2PKIT_TEST_NRANKS=$n CASE_SECS=${SECS:-60} "$(dirname "$0")/../cases.sh" "$build" "$log/n$n" $cases |
    sed "s/^/ranks $n  /"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
done
exit $status
