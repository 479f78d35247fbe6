#!/usr/bin/env bash
# The copy-engine probe (scripts/device/probes/ce_probe.cu) on the GPU
# machine: built with nvcc, run with its destination in this process and
# in another one (CUDA IPC), at the sizes given (default 1G 512M).
# Usage: scripts/device/probe.sh LOG_DIR [SIZE ...]
set -uo pipefail
log=${1:?usage: probe.sh LOG_DIR [SIZE ...]}
shift
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1G 512M)
mkdir -p "$log"
export PATH=$PATH:/usr/local/cuda/bin
bin=$log/ce_probe
nvcc -O2 -arch=sm_90 -o "$bin" "$(dirname "$0")/probes/ce_probe.cu" || exit 1
rc=0
for s in "${sizes[@]}"; do
  for mode in local ipc; do
    echo "=== ce_probe $mode $s"
    timeout 120 "$bin" "$mode" "$s" 10 | tee "$log/ce_probe.$mode.$s.txt" || rc=1
  done
done
rm -f "$bin"
exit $rc
