#!/usr/bin/env bash
# Twenty-first session: the default settings of a process-per-GPU job under
# CUDA_DEVICE_MAX_CONNECTIONS=1 (as Megatron-LM sets it) and 2, where the
# copy-engine paths must give way to the kernels, against the default 8:
# `perf all_reduce -p 2 -c 1` over P2P at 64 MiB - 512 MiB (copy engines from
# 256 MiB by default) and without P2P at 4 - 64 MiB (staged copy engines
# from 16 MiB). Every result checked; the INFO lines say which path ran.
# Usage: s22_megatron.sh BUILD LOG_DIR
set -uo pipefail
build=${1:?usage: s22_megatron.sh BUILD LOG_DIR}
log=${2:?usage: s22_megatron.sh BUILD LOG_DIR}
mkdir -p "$log"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export P2PKIT_TIMEOUT=20 P2PKIT_DEBUG=INFO P2PKIT_DEBUG_SUBSYS=COLL
run() { # name QUEUES [ENV=V ...] -- perf args
  local name=$1 q=$2; shift 2
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  local out="$log/$name.txt"
  env CUDA_DEVICE_MAX_CONNECTIONS="$q" "${envs[@]}" timeout --kill-after=5 60 "$build/p2pkit" perf \
    all_reduce -p 2 -n 5 -w 2 "$@" > "$out" 2>&1
  local rc=$?
  printf '%-14s queues=%-2s rc=%-3s rows=%-2s wrong=%-3s copy-engine lines=%s fallback lines=%s\n' "$name" "$q" "$rc" \
    "$(grep -cE '^ +[0-9]+ +[0-9]+ ' "$out")" \
    "$(grep -E '^ +[0-9]+ +[0-9]+ ' "$out" | awk '{w += $9 + $13} END {print w + 0}')" \
    "$(grep -c 'over the copy engines\|uses the copy engines' "$out")" \
    "$(grep -c 'need 8 hardware queues' "$out")"
}
run p2p_q1 1 -- -b 64M -e 512M -f 2
run p2p_q8 8 -- -b 64M -e 512M -f 2
run staged_q2 2 P2PKIT_P2P_DISABLE=1 -- -b 4M -e 64M -f 4
run staged_q8 8 P2PKIT_P2P_DISABLE=1 -- -b 4M -e 64M -f 4
