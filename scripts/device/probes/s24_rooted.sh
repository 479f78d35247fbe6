#!/usr/bin/env bash
# Twenty-fourth session, 2x H200: the rooted two-shot broadcast and reduce
# (twoshot_kernel's rooted form) and the two-shot kernel it changed.
#   check: build; every collective GPU case on 2 ranks (cases.sh default
#          set: test_collectives' suites now force the rooted form at every
#          size too); test_collectives' process-per-GPU suite on 3 and 4
#          ranks sharing the 2 GPUs; test_shared_ranks.sh's broadcast and
#          reduce checks on 3, 4 and 8 ranks; memcheck over the
#          process-per-GPU suite.
#   perf:  build; test_shared_ranks.sh's forced rooted two-shot checks on
#          3, 4 and 8 ranks; 2 GPUs against NCCL in one call: the all-reduce
#          where the table takes two-shot (32 MiB - 1 GiB, both modes,
#          eager and graph), broadcast and reduce by default and with the
#          rooted form forced (1 MiB - 1 GiB), then racecheck over the
#          process-per-GPU suite with what time is left.
#   final: build; test_shared_ranks.sh's all-reduce checks on 3, 4, 8 ranks
#          and test_allreduce's process-per-GPU suite on 4 ranks sharing
#          the GPUs (the two-shot kernel's all-reduce form after the change).
# Usage: scripts/device/probes/s24_rooted.sh check|perf|final LOG_DIR
#   (RECORD_COMMIT names the commit; BUDGET_S, default 560, bounds the call)
set -uo pipefail
what=${1:?usage: s24_rooted.sh check|perf|final LOG_DIR}
log=${2:?usage: s24_rooted.sh check|perf|final LOG_DIR}
here=$(dirname "$0")
budget=${BUDGET_S:-560}
. "$here/build.sh"
export P2PKIT_TIMEOUT=20
b=build-dev
left() { echo $((budget - SECONDS)); }
# fit NEED_S NAME: say so and return 1 when NAME would not fit the budget
fit() {
  if [ "$(left)" -lt "$1" ]; then echo "=== $2: skipped, $(left) s left (needs $1)"; return 1; fi
}

perf_run() { # NAME ARGS...: one perf call into $log/NAME.txt, its rows shown
  local name=$1; shift
  timeout --kill-after=5 150 "$b/p2pkit" perf "$@" -c 1 --vs-nccl --json-file "$log/$name.json" \
    > "$log/$name.txt" 2>&1
  echo "=== $name: rc=$? ($*)"
  grep -E '^ +[0-9]+ ' "$log/$name.txt" | awk '{printf "  %11s %9s %9s %5s w%s | %9s %9s %5s w%s\n",$1,$6,$10,$12,$9,$13,$17,$19,$16}'
}

shared() { # TITLE REGEX LIMIT_S: test_shared_ranks.sh's checks matching REGEX, 3, 4 and 8 ranks
  echo "=== test_shared_ranks.sh, $1"
  SHARED_ONLY=$2 timeout "$3" bash tests/gpu/test_shared_ranks.sh $b/p2pkit > "$log/shared_ranks.txt" 2>&1
  echo "rc=$? in $SECONDS s"; grep -v '^ok' "$log/shared_ranks.txt" | tail -n 12; grep -c '^ok' "$log/shared_ranks.txt"
}
sanitize() { # TOOL: compute-sanitizer over test_collectives' process-per-GPU suite
  echo "=== $1, test_collectives process_per_gpu"
  timeout $(( $(left) - 5 )) compute-sanitizer --tool "$1" --report-api-errors no \
    --target-processes all $b/tests/test_collectives process_per_gpu > "$log/$1.txt" 2>&1
  echo "rc=$?"; grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed|FAIL' "$log/$1.txt" | sort | uniq -c | head
}

case $what in
  check)
    fit 200 cases2 && { echo "=== cases, 2 ranks"
      CASE_SECS=150 "$here/../cases.sh" $b "$log/cases2" 2>&1 | cut -c1-200; }
    for n in 3 4; do
      fit 120 "cases$n" && { echo "=== test_collectives process_per_gpu, $n ranks on 2 GPUs"
        P2PKIT_SHARE_GPUS=1 P2PKIT_TEST_NRANKS=$n CASE_SECS=$(( $(left) < 200 ? $(left) - 20 : 180 )) \
          "$here/../cases.sh" $b "$log/cases$n" test_collectives:process_per_gpu 2>&1 | cut -c1-200; }
    done
    fit 60 shared && shared "broadcast and reduce" 'twoshot|p2p_broadcast|p2p_reduce$' $(( $(left) - 40 ))
    fit 40 memcheck && sanitize memcheck
    ;;
  perf)
    fit 120 shared && shared "the forced rooted two-shot" 'twoshot_(broadcast|reduce)' 200
    perf_run ar_1p all_reduce -g 2 -b 32M -e 1G -f 2 -n 20 -w 5
    perf_run ar_mp all_reduce -p 2 -b 32M -e 1G -f 2 -n 20 -w 5
    perf_run ar_1p_graph all_reduce -g 2 -b 256M -e 1G -f 2 -n 20 -w 5 -G 1
    for c in broadcast reduce; do
      perf_run "${c}_1p" "$c" -g 2 -b 1M -e 1G -f 4 -n 20 -w 5
      P2PKIT_BCAST_CE_MIN=0 perf_run "${c}_1p_twoshot" "$c" -g 2 -b 1M -e 1G -f 4 -n 20 -w 5 --algo twoshot/simple
      perf_run "${c}_mp_twoshot" "$c" -p 2 -b 1M -e 1G -f 4 -n 20 -w 5 --algo twoshot/simple
    done
    fit 90 racecheck && sanitize racecheck
    ;;
  final)
    fit 90 shared && shared "the all-reduce checks (two-shot kernel changed)" 'p2p_all_reduce|p2p_graph|allreduce_' 150
    fit 60 cases4 && { echo "=== test_allreduce process_per_gpu, 4 ranks on 2 GPUs"
      P2PKIT_SHARE_GPUS=1 P2PKIT_TEST_NRANKS=4 CASE_SECS=$(( $(left) - 10 )) \
        "$here/../cases.sh" $b "$log/cases4" test_allreduce:process_per_gpu 2>&1 | cut -c1-200; }
    ;;
  *) echo "s24_rooted.sh: '$what' is not check, perf or final" >&2; exit 2 ;;
esac
echo "=== done in $SECONDS s"
