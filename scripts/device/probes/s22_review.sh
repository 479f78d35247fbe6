#!/usr/bin/env bash
# Twenty-second session, first call: (1) the GPU test cases the twenty-first
# session's review edited but could not run (2 ranks, then 4 ranks sharing
# the 2 GPUs); (2) a question for issue 4's 16 MiB goal: does an all-reduce
# whose bytes go by copy engine (P2PKIT_CE_ALLREDUCE_MIN forced down, in
# chunks) beat the LL128 kernel at 8 - 32 MiB? One round, NCCL in the same
# call, every result checked. Expected no: each chunk's copies cost ~8 us
# of link time (ce_p2p.c, seventh session).
# Usage: s22_review.sh LOG_DIR  (RECORD_COMMIT names the commit)
set -uo pipefail
log=${1:?usage: s22_review.sh LOG_DIR}
here=$(dirname "$0")
mkdir -p "$log"
changed="test_collectives:process_per_gpu_copy_engine_p2p test_collectives:process_per_gpu_copy_engine_p2p_kernel_posts
  test_allreduce:process_per_gpu_few_hardware_queues test_allreduce:process_per_gpu_copy_engine_p2p"
CASE_SECS=100 "$here/../try.sh" "$log" - $changed 2>&1 | tail -n 12
echo "=== 4 ranks sharing the GPUs"
CASES="test_allreduce:process_per_gpu_few_hardware_queues test_collectives:process_per_gpu_copy_engine_p2p" \
  SECS=100 timeout 220 "$here/s20_shared.sh" build-dev "$log/shared" 4 2>&1 | tee "$log/shared.txt"
echo "=== 16 MiB: kernels against copy engines"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 P2PKIT_TIMEOUT=20
pf() { # name mode-args [ENV=V ...]
  local name=$1 mode=$2; shift 2
  env "$@" P2PKIT_DEBUG=INFO P2PKIT_DEBUG_SUBSYS=COLL timeout --kill-after=5 60 build-dev/p2pkit perf all_reduce $mode \
    -b 8M -e 32M -f 2 -n 40 -w 10 --repeats 5 --vs-nccl > "$log/ce16/$name.txt" 2>&1
  echo "--- $name rc=$? ($*) ce-lines=$(grep -c 'copy engines' "$log/ce16/$name.txt")"
  grep -E '^ +[0-9]+ +[0-9]+ ' "$log/ce16/$name.txt"
}
mkdir -p "$log/ce16"
pf pg_default "-p 2"
pf pg_ce_c4m "-p 2" P2PKIT_CE_ALLREDUCE_MIN=8M P2PKIT_CE_CHUNK=4M
pf pg_ce_c8m "-p 2" P2PKIT_CE_ALLREDUCE_MIN=8M P2PKIT_CE_CHUNK=8M
pf op_ce_c4m "-g 2" P2PKIT_CE_ALLREDUCE_MIN=8M P2PKIT_CE_CHUNK=4M
