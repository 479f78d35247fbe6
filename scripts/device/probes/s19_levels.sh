#!/usr/bin/env bash
# Nineteenth session: P2PKIT_P2P_LEVEL read by one parser for copies and
# communicators, and malformed settings refused. On the 2x H200 (NV18):
# unset, NVL, PIX, PHB and SYS keep P2P; LOC takes the staged path; the
# communicator's INFO line says which. P2PKIT_P2P_DISABLE=yes and
# P2PKIT_P2P_LEVEL=NODE must be refused with one line, not run.
# Usage: scripts/device/probes/s19_levels.sh BUILD LOG_DIR
set -uo pipefail
build=${1:?usage: s19_levels.sh BUILD LOG_DIR}
log=${2:?usage: s19_levels.sh BUILD LOG_DIR}
mkdir -p "$log"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
bin=$build/p2pkit
for lv in unset NVL PIX PHB SYS LOC; do
  for mode in "-p 2" "-g 2"; do
    f="$log/level_${lv}_${mode// /}.txt"
    if [ $lv = unset ]; then env -u P2PKIT_P2P_LEVEL P2PKIT_DEBUG=INFO P2PKIT_DEBUG_SUBSYS=COLL \
      timeout 60 "$bin" perf all_reduce $mode -b 1M -e 1M -n 5 -w 1 > "$f" 2>&1
    else P2PKIT_P2P_LEVEL=$lv P2PKIT_DEBUG=INFO P2PKIT_DEBUG_SUBSYS=COLL \
      timeout 60 "$bin" perf all_reduce $mode -b 1M -e 1M -n 5 -w 1 > "$f" 2>&1
    fi
    echo "level $lv $mode: rc=$?"
    grep -o -E 'comm rank 0/2 [^;]*' "$f" | sort -u | sed 's/^/    /'
    grep -E '^ +1048576' "$f" | sed 's/^/    /'
  done
done
for bad in "P2PKIT_P2P_DISABLE=yes" "P2PKIT_P2P_LEVEL=NODE" "P2PKIT_TIMEOUT=30s"; do
  env "$bad" timeout 60 "$bin" perf all_reduce -p 2 -b 1M -e 1M -n 5 -w 1 > "$log/bad.txt" 2>&1
  echo "$bad: rc=$? $(grep -c . "$log/bad.txt") line(s): $(head -3 "$log/bad.txt" | tr '\n' '|')"
  env "$bad" timeout 60 "$bin" bench -b 1M -e 1M > "$log/bad_bench.txt" 2>&1
  echo "$bad bench: rc=$? $(head -2 "$log/bad_bench.txt" | tr '\n' '|')"
done
P2PKIT_P2P_LEVEL=LOC timeout 120 "$bin" doctor > "$log/doctor_loc.txt" 2>&1
echo "doctor with LOC: rc=$?"; grep -i 'settings' "$log/doctor_loc.txt" | head -4
