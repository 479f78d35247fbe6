#!/usr/bin/env bash
# Twentieth session: every collective with 3 and 4 ranks on the 2-GPU
# machine (P2PKIT_SHARE_GPUS=1: process p on GPU p % 2), through `p2pkit
# perf -p N`, whose -c 1 checks every result; sizes 8 B - 128 MiB by 8x,
# over P2P (kernels), over P2P with every copy-engine threshold at 4 MiB,
# and staged (P2P off). Results only: two processes' kernels take turns on
# a GPU, so the times mean nothing. Usage: s20_shared_perf.sh BUILD LOG_DIR
#   RANKS (default "4 3"), SECS per run (default 40), MAXB (default 128M).
set -uo pipefail
build=${1:?usage: s20_shared_perf.sh BUILD LOG_DIR}
log=${2:?usage: s20_shared_perf.sh BUILD LOG_DIR}
mkdir -p "$log"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export P2PKIT_SHARE_GPUS=1 P2PKIT_TIMEOUT=${P2PKIT_TIMEOUT:-15}
ce="P2PKIT_CE_ALLREDUCE_MIN=4M P2PKIT_CE_REDUCE_SCATTER_MIN=4M P2PKIT_CE_ALL_GATHER_MIN=4M
    P2PKIT_CE_ALL_TO_ALL_MIN=4M P2PKIT_CE_REDUCE_MIN=4M P2PKIT_BCAST_CE_MIN=4M P2PKIT_SENDRECV_CE_MIN=4M"
status=0
for n in ${RANKS:-4 3}; do
  for mode in p2p ce staged; do
    case $mode in
      p2p) envs=() ;;
      ce) read -r -a envs <<< "$(echo $ce)" ;;
      staged) envs=(P2PKIT_P2P_DISABLE=1) ;;
    esac
    for coll in all_reduce broadcast reduce all_gather reduce_scatter sendrecv alltoall; do
      f="$log/n${n}_${mode}_$coll.txt"
      t0=$SECONDS
      env "${envs[@]}" timeout --kill-after=5 "${SECS:-40}" "$build/p2pkit" perf "$coll" -p "$n" \
        -b 8 -e "${MAXB:-128M}" -f 8 -n 2 -w 1 --repeats 1 > "$f" 2>&1
      rc=$?
      # rows: size count type redop root time algbw busbw #wrong (out) time algbw busbw #wrong (in)
      rows=$(grep -cE '^ +[0-9]+ +[0-9]+ ' "$f")
      wrong=$(grep -E '^ +[0-9]+ +[0-9]+ ' "$f" | awk '{w += $9 + $13} END {print w + 0}')
      printf 'ranks %d %-6s %-15s rc=%-3s rows=%-2s wrong=%-3s %3ss\n' "$n" "$mode" "$coll" "$rc" "$rows" "$wrong" "$((SECONDS - t0))"
      if [ "$rc" != 0 ] || [ "$wrong" != 0 ]; then status=1; grep -vE 'WARN rank|^#' "$f" | tail -n 6 | sed 's/^/    /'; fi
    done
  done
done
exit $status
