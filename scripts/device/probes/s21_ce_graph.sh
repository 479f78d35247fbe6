#!/usr/bin/env bash
# For the next session: why a copy-engine all-reduce captured in a CUDA
# graph times out on 4 ranks sharing 2 GPUs (s20 run 5: test_allreduce
# process_per_gpu_copy_engine_p2p, graph_replay_auto; eager passes, 2 ranks
# pass, other copy-engine collectives pass under graphs on 4). Each step is
# one `p2pkit perf all_reduce -p N -G 1` with every copy-engine threshold at
# 1 MiB (results checked), varying one thing:
#   base                  4 ranks (the failing shape)
#   ranks3                3 ranks
#   conn32                CUDA_DEVICE_MAX_CONNECTIONS=32 (a spinning wait
#                         node ahead of a post on one hardware queue?)
#   memops0 / memops1     P2PKIT_CEP_MEMOPS off / on
#   eager                 the same without a graph (passes in s20)
#   onesize               one size only (4 MiB): one call a graph
#   share2                2 ranks on GPU 0 alone (sharing with 2 ranks: if
#                         this passes, the rank count, not sharing, matters)
# Usage: s21_ce_graph.sh BUILD LOG_DIR    (about 2-4 minutes)
set -uo pipefail
build=${1:?usage: s21_ce_graph.sh BUILD LOG_DIR}
log=${2:?usage: s21_ce_graph.sh BUILD LOG_DIR}
mkdir -p "$log"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export P2PKIT_SHARE_GPUS=1 P2PKIT_TIMEOUT=10 P2PKIT_DEBUG=INFO P2PKIT_DEBUG_SUBSYS=COLL
export P2PKIT_CE_ALLREDUCE_MIN=1M P2PKIT_CE_REDUCE_SCATTER_MIN=1M P2PKIT_CE_REDUCE_MIN=1M
. "$(dirname "$0")/perf_step.sh"
perf_step base 4 -- -b 1M -e 16M -f 4 -G 1
perf_step ranks3 3 -- -b 1M -e 16M -f 4 -G 1
perf_step conn32 4 CUDA_DEVICE_MAX_CONNECTIONS=32 -- -b 1M -e 16M -f 4 -G 1
perf_step memops0 4 P2PKIT_CEP_MEMOPS=0 -- -b 1M -e 16M -f 4 -G 1
perf_step memops1 4 P2PKIT_CEP_MEMOPS=1 -- -b 1M -e 16M -f 4 -G 1
perf_step eager 4 -- -b 1M -e 16M -f 4
perf_step onesize 4 -- -b 4M -e 4M -G 1
perf_step share2 2 CUDA_VISIBLE_DEVICES=0 -- -b 1M -e 16M -f 4 -G 1
