#!/usr/bin/env bash
# Twenty-fourth session, 2x H200: is the P2P-off all-reduce's 128 MiB time
# (run 3: 4170-5670 us a call, NCCL 5055-5340; s19: ~3100) the machine or a
# change since s19's record (2a683a2)? Builds the tree as sent (build-dev)
# and the s19 tree (ab_old/, a `git archive` of 2a683a2 sent beside it,
# build-old, CLI only), then alternates them in three rounds, both modes,
# NCCL in every run, and times host memory (bench_hostmem).
# Usage: scripts/device/probes/s24_ab_staged.sh LOG_DIR  (RECORD_COMMIT names the commit)
set -uo pipefail
log=${1:?usage: s24_ab_staged.sh LOG_DIR}
here=$(dirname "$0")
. "$here/build.sh"
export P2PKIT_TIMEOUT=20
t0=$SECONDS
{ cmake -S ab_old -B build-old -DCMAKE_BUILD_TYPE=Release -DP2PKIT_WERROR=OFF > /dev/null &&
  cmake --build build-old -j"$(nproc)" --target p2pkit_cli; } > "$log/build-old.txt" 2>&1
echo "build-old: rc=$? in $((SECONDS - t0)) s"
for r in 1 2 3; do
  for v in dev old; do
    for m in "-p 2" "-g 2"; do
      name="r${r}_${v}_${m// /}"
      P2PKIT_P2P_DISABLE=1 NCCL_P2P_DISABLE=1 timeout 60 build-$v/p2pkit perf all_reduce $m \
        -b 128M -e 128M -n 10 -w 2 --vs-nccl > "$log/$name.txt" 2>&1
      echo "$name rc=$? $(grep -E '^ +[0-9]+ ' "$log/$name.txt" | awk '{print "p2pkit",$6,"nccl",$10,"x",$12," | ip",$13,"nccl",$17,"x",$19}')"
    done
  done
done
timeout 90 build-dev/tests/bench_hostmem > "$log/hostmem.txt" 2>&1; echo "hostmem rc=$?"; tail -n 25 "$log/hostmem.txt"
echo "=== done in $SECONDS s"
