#!/usr/bin/env bash
# Nineteenth session: why the staged all-reduce with a process per GPU
# (P2P off) moves from one process to the next (s18 run 3: 128 MiB in
# 3056 - 3692 us, NCCL 4934 - 4980), and whether copy engines and an SM
# push share a link direction for more than either alone.
#   1. hostmem_probe: D2H and H2D through cudaHostAlloc memory against
#      registered shared-memory and anonymous pages (with and without
#      MADV_HUGEPAGE), several fresh allocations of each.
#   2. linkmix_probe: copy engine and push kernel on one direction at once.
#   3. p2pkit's P2P-off all-reduce, 128 MiB, five fresh processes per GPU
#      and three in one process, three repeats each (no NCCL).
# Usage: scripts/device/probes/s19_hostmem.sh BUILD LOG_DIR
set -uo pipefail
build=${1:?usage: s19_hostmem.sh BUILD LOG_DIR}
log=${2:?usage: s19_hostmem.sh BUILD LOG_DIR}
mkdir -p "$log"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=$PATH:/usr/local/cuda/bin
here=$(dirname "$0")
for f in enabled shmem_enabled defrag; do
  echo "thp $f: $(cat /sys/kernel/mm/transparent_hugepage/$f 2>&1)"
done
grep -E 'Huge|MemTotal|MemFree' /proc/meminfo
echo "numa nodes: $(ls -d /sys/devices/system/node/node* 2>/dev/null | wc -l)"
nvcc -O2 -o "$log/hostmem_probe" "$here/hostmem_probe.cu" || exit 1
nvcc -O2 -arch=sm_90 -o "$log/linkmix_probe" "$here/linkmix_probe.cu" || exit 1
echo "=== hostmem_probe"
timeout 240 "$log/hostmem_probe" 128 4
echo "=== linkmix_probe 264 x 512"
timeout 120 "$log/linkmix_probe" 264 512
echo "=== linkmix_probe 132 x 1024"
timeout 120 "$log/linkmix_probe" 132 1024
rm -f "$log/hostmem_probe" "$log/linkmix_probe"
echo "=== p2pkit P2P off, 128 MiB, p2pkit only"
export P2PKIT_P2P_DISABLE=1
n=0
for mode in "-p 2" "-p 2" "-p 2" "-p 2" "-p 2" "-g 2" "-g 2" "-g 2"; do
  n=$((n + 1))
  timeout 60 "$build/p2pkit" perf all_reduce $mode -b 128M -e 128M -n 10 -w 2 --repeats 3 \
    > "$log/nop2p_$n.txt" 2>&1
  echo "$mode run $n: $(grep -E '^ +134217728' "$log/nop2p_$n.txt" | awk '{printf "%s/%s ", $6, $10}')"
done
