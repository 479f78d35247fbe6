#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Collectives with more ranks than the machine has GPUs: `p2pkit perf -p N`
# with P2PKIT_SHARE_GPUS=1 (rank p on GPU p % GPUs) for every collective, 3,
# 4 and 8 ranks, over P2P (the kernels; all-reduce also with every algorithm
# and protocol forced in turn), over the copy engines (every threshold at
# 1 MiB, so the 16 MiB row takes them on 8 ranks too: 2 MiB a share; the log
# must say so; under a graph the kernels, and the log says that) and staged
# (P2P off), eagerly and under a CUDA graph. perf checks every result
# (-c 1): every row must say #wrong 0. On a 2-GPU machine this is how the
# 3- to 8-rank code paths run at all (the rooted two-shot broadcast and
# reduce too); kernels of processes that share a GPU
# take turns on it, so no time here means anything.
# Usage: test_shared_ranks.sh P2PKIT_BIN [DATA_DIR]
#   SHARED_RANKS overrides the rank counts (default "3 4 8"); SHARED_ONLY, a
#   bash regular expression, runs only the checks whose names match it.
set -uo pipefail
bin=${1:?usage: test_shared_ranks.sh P2PKIT_BIN}
command -v nvidia-smi >/dev/null || { echo "SKIP: nvidia-smi not found"; exit 77; }
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
[ "$ngpu" -ge 1 ] || { echo "SKIP: nvidia-smi sees no GPU"; exit 77; }
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export P2PKIT_SHARE_GPUS=1 P2PKIT_TIMEOUT=${P2PKIT_TIMEOUT:-20}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ce=(P2PKIT_DEBUG=INFO P2PKIT_DEBUG_SUBSYS=COLL P2PKIT_CE_ALLREDUCE_MIN=1M
    P2PKIT_CE_REDUCE_SCATTER_MIN=1M P2PKIT_CE_ALL_GATHER_MIN=1M P2PKIT_CE_ALL_TO_ALL_MIN=1M
    P2PKIT_CE_REDUCE_MIN=1M P2PKIT_BCAST_CE_MIN=1M P2PKIT_SENDRECV_CE_MIN=1M)
sizes=(-b 8 -e 16M -f 8) expect_rows=8 # 8 B .. 16 MiB by 8x: every run's rows
fails=0 runs=0

# check NAME N [ENV=V ...] -- PERF_ARGS...: one perf run; it must exit 0,
# print every size's row, and every row must have #wrong 0 in both columns.
check() {
  local name=$1 n=$2; shift 2
  [[ -n ${SHARED_ONLY:-} && ! $name =~ $SHARED_ONLY ]] && return 0
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  local out="$tmp/$name.txt" rc
  runs=$((runs + 1))
  env "${envs[@]}" timeout --kill-after=5 120 "$bin" perf "$@" -p "$n" -n 2 -w 1 --repeats 1 \
    > "$out" 2>&1
  rc=$?
  # rows: size count type redop root time algbw busbw #wrong [time algbw busbw #wrong]
  local rows bad
  rows=$(grep -cE '^ +[0-9]+ +[0-9]+ ' "$out")
  bad=$(grep -E '^ +[0-9]+ +[0-9]+ ' "$out" | awk '$9 != 0 || (NF >= 13 && $13 != 0)' | wc -l)
  local want=$((n > ngpu ? 1 : 0)) warned ce_lines=1
  warned=$(grep -c 'shares GPU' "$out")
  # the copy-engine runs must say (INFO) that they took the copy engines
  # (under a graph, with more than 2 ranks, that they did not)
  if [[ " ${envs[*]} " == *P2PKIT_CE_ALLREDUCE_MIN* ]]; then
    if [[ " $* " == *" -G 1 "* ]] && [ "$n" -gt 2 ]; then
      ce_lines=$(grep -c 'more than 2 ranks are off' "$out")
    else
      ce_lines=$(grep -c 'uses the copy engines over P2P' "$out")
    fi
  fi
  if [ "$rc" != 0 ] || [ "$rows" -lt "$expect_rows" ] || [ "$bad" != 0 ] ||
     { [ "$want" = 1 ] && [ "$warned" = 0 ]; } || [ "$ce_lines" = 0 ]; then
    echo "FAIL $name: exit $rc, $rows rows (want $expect_rows), $bad with #wrong, sharing warned $warned times, copy-engine lines $ce_lines"
    grep -vE 'shares GPU|^#|INFO' "$out" | tail -n 8 | sed 's/^/    /'
    fails=$((fails + 1))
  else
    echo "ok   $name ($rows sizes checked)"
  fi
}

colls="all_reduce broadcast reduce all_gather reduce_scatter sendrecv alltoall"
for n in ${SHARED_RANKS:-3 4 8}; do
  for c in $colls; do
    check "n${n}_p2p_$c" "$n" -- "$c" "${sizes[@]}"
    check "n${n}_ce_$c" "$n" "${ce[@]}" -- "$c" "${sizes[@]}"
    check "n${n}_staged_$c" "$n" P2PKIT_P2P_DISABLE=1 -- "$c" "${sizes[@]}"
  done
  # Each all-reduce algorithm and protocol forced over P2P (LL128 included,
  # which the table does not pick above 2 ranks), and the graph mode.
  for a in oneshot/ll oneshot/ll128 oneshot/simple twoshot/simple; do
    check "n${n}_allreduce_${a/\//_}" "$n" -- all_reduce "${sizes[@]}" --algo "$a"
  done
  check "n${n}_p2p_graph" "$n" -- all_reduce "${sizes[@]}" -G 1
  # Under a graph more than 2 ranks take the kernels even with the
  # copy-engine thresholds set (p2pk_ce_waits_ok); the log says so.
  check "n${n}_ce_graph_reduce_scatter" "$n" "${ce[@]}" -- reduce_scatter "${sizes[@]}" -G 1
  check "n${n}_ce_graph_all_reduce" "$n" "${ce[@]}" -- all_reduce "${sizes[@]}" -G 1
  check "n${n}_staged_graph" "$n" P2PKIT_P2P_DISABLE=1 -- all_reduce "${sizes[@]}" -G 1
  # Broadcast and reduce in their rooted two-shot form at every size (the
  # default runs above take it at 16 MiB only: P2PKIT_ROOTED_TWOSHOT_MIN),
  # also under a graph, and every root (perf's root is 0; -r picks another).
  for c in broadcast reduce; do
    check "n${n}_twoshot_$c" "$n" -- "$c" "${sizes[@]}" --algo twoshot/simple
    check "n${n}_twoshot_${c}_graph" "$n" -- "$c" "${sizes[@]}" --algo twoshot/simple -G 1
    check "n${n}_twoshot_${c}_root_last" "$n" -- "$c" "${sizes[@]}" --algo twoshot/simple -r $((n - 1))
  done
done
echo "$runs runs, $fails failed (ranks ${SHARED_RANKS:-3 4 8} on $ngpu GPU(s))"
[ "$fails" = 0 ]
