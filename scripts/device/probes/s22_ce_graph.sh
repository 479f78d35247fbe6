#!/usr/bin/env bash
# Twenty-first session: the copy-engine all-reduce under a CUDA graph hung
# on 4 ranks sharing 2 GPUs in test_allreduce (64 KiB slots, depth 2, so
# each slot turns many times a call) but not in s21_ce_graph.sh's perf runs
# (default chunks: one or two per call). Each step is one `p2pkit perf
# all_reduce -G 1` (results checked) with the test's 64 KiB / depth 2,
# varying one thing; a step that hangs gives up after P2PKIT_TIMEOUT and
# logs the flags each rank still holds (p2pk_cep_log_flags).
#   n2 / share2 / n3 / n4   ranks (share2: 2 ranks on GPU 0 alone)
#   n4_eager                no graph
#   n4_conn32 / n2_conn2    CUDA_DEVICE_MAX_CONNECTIONS (hardware queues a
#                           graph's branches map onto)
#   n2_conn2_eager          the same eagerly
#   n4_d4                   4 slots a pair
# Usage: s22_ce_graph.sh BUILD LOG_DIR
set -uo pipefail
build=${1:?usage: s22_ce_graph.sh BUILD LOG_DIR}
log=${2:?usage: s22_ce_graph.sh BUILD LOG_DIR}
mkdir -p "$log"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export P2PKIT_SHARE_GPUS=1 P2PKIT_TIMEOUT=10 P2PKIT_DEBUG=INFO P2PKIT_DEBUG_SUBSYS=COLL
export P2PKIT_CE_ALLREDUCE_MIN=1 P2PKIT_CE_CHUNK=64K P2PKIT_CE_DEPTH=2
PERF_STEP_SECS=45
. "$(dirname "$0")/perf_step.sh"
perf_step n2 2 -- -b 1M -e 4M -f 4 -G 1
perf_step share2 2 CUDA_VISIBLE_DEVICES=0 -- -b 1M -e 4M -f 4 -G 1
perf_step n3 3 -- -b 1M -e 4M -f 4 -G 1
perf_step n4 4 -- -b 1M -e 4M -f 4 -G 1
perf_step n4_eager 4 -- -b 1M -e 4M -f 4
perf_step n4_conn32 4 CUDA_DEVICE_MAX_CONNECTIONS=32 -- -b 1M -e 4M -f 4 -G 1
perf_step n2_conn2 2 CUDA_DEVICE_MAX_CONNECTIONS=2 -- -b 1M -e 4M -f 4 -G 1
perf_step n2_conn2_eager 2 CUDA_DEVICE_MAX_CONNECTIONS=2 -- -b 1M -e 4M -f 4
perf_step n4_d4 4 P2PKIT_CE_DEPTH=4 -- -b 1M -e 4M -f 4 -G 1
