#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Beyond one host and NCCL underneath, on one GPU (nvidia-h200), in one
# device call: ranks share the GPU (P2PKIT_SHARE_GPUS=1), hosts simulated
# with P2PKIT_HOSTID per host and NCCL_HOSTID per rank (NCCL refuses two
# ranks on one GPU of one host id), NCCL between them over loopback sockets.
#   build        test_conformance, two_hosts, the CLI
#   hosts        2 hosts x 2 ranks (hierarchical) and 3 hosts x 1 rank
#                (NCCL): every collective x every type (NCCL's own too) x
#                op x in/out of place x eager/graph against a host
#                reference; split even/odd and per host used at once;
#                explicit rank/size inside a torchrun-style environment of 8
#   abort        a dead peer: abort returns within 3 s (kernels and NCCL);
#                the kernels' survivor fails at once
#   nccl         P2PKIT_NCCL=1 on one host: the same calls, 2-3 ranks
#   two_hosts    examples/two_hosts on 2 simulated hosts of 2 ranks
#   perf_hosts   p2pkit perf --procs 4 --hosts 2: the selector (--explain) and a
#                short all-reduce run with each call's path at INFO
# Usage: RECORD_COMMIT=<sha> scripts/device/multihost.sh LOG_DIR   (e.g. "$OUT")
#   BUDGET_S (default 530), MH_SKIP="nccl hosts ..." leaves parts out.
set -uo pipefail
cd "$(dirname "$0")/../.."
log=${1:?usage: multihost.sh LOG_DIR}
budget=${BUDGET_S:-530}
STEP_TAIL=${STEP_TAIL:-12}
. scripts/device/lib.sh
export P2PKIT_SHARE_GPUS=1 P2PKIT_TIMEOUT=30 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1
want() { [[ " ${MH_SKIP:-} " != *" $1 "* ]]; }
machine_info
t=$build/tests/test_conformance
BUILD_SECS=240 build_tree test_conformance two_hosts p2pkit_cli
# The issue's own checks first, so a short budget loses the extras.
if want hosts; then
  fit hosts 240 "$t" hosts
fi
if want abort; then
  fit abort 90 "$t" abort_dead_peer
fi
if want nccl; then
  fit nccl 150 env P2PKIT_CONF_ONLY=nccl P2PKIT_CONF_RANKS=2-3 "$t" process_per_gpu
fi
if want two_hosts; then
  fit two_hosts 60 bash -c 'export TWO_HOSTS_ID=$('"$build"'/examples/two_hosts --make-id) || exit 1
    for r in 0 1 2 3; do P2PKIT_HOSTID=sim$((r / 2)) NCCL_HOSTID=sim$((r / 2)).r$r \
      '"$build"'/examples/two_hosts --nranks 4 --rank $r --device 0 & done
    rc=0; for j in 1 2 3 4; do wait -n || rc=1; done; exit $rc'
fi
if want perf_hosts; then
  fit perf_explain 60 "$bin" perf all_reduce --procs 4 --hosts 2 --explain -b 1K -e 64M -f 64
  fit perf_hosts 90 env P2PKIT_DEBUG=INFO P2PKIT_DEBUG_SUBSYS=COLL P2PKIT_DEBUG_FILE="$log/perf_hosts.%p.log" \
    "$bin" perf all_reduce --procs 4 --hosts 2 -b 1K -e 16M -f 16 -n 5 -w 2 --repeats 2
  grep -h -o -- '-> [a-z0-9-]* ([^;]*;' "$log"/perf_hosts.*.log 2>/dev/null | sort | uniq -c > "$log/perf_hosts_paths.txt"
  cat "$log/perf_hosts_paths.txt"
fi
step_summary "multi-host on $(nvidia-smi -L 2>/dev/null | wc -l) GPU(s); logs in $log"
exit "$status"
