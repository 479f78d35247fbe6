#!/usr/bin/env bash
# Eighteenth session: where a rooted copy-engine call with a process per GPU
# loses 12-23 us under a graph (run 3: reduce 64 MiB 195.7 us against 180.9
# eagerly). nsys GPU traces of a 64 MiB broadcast and reduce, eager and
# under a graph (every copy, kernel and memset with its start and end), and
# the graph's time per call at 1, 5 and 20 calls a graph.
# Usage: scripts/device/probes/s18_rooted_graph.sh BUILD LOG_DIR
set -uo pipefail
build=${1:?usage: s18_rooted_graph.sh BUILD LOG_DIR}
log=${2:?usage: s18_rooted_graph.sh BUILD LOG_DIR}
mkdir -p "$log"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=$PATH:/usr/local/cuda/bin
bin=$build/p2pkit
for coll in broadcast reduce; do
  for n in 1 5 20; do
    timeout 60 "$bin" perf $coll -p 2 -G 1 -b 64M -e 64M -n $n -w 2 > "$log/$coll.G.n$n.txt" 2>&1
    echo "$coll graph, $n a graph: $(grep -E '^ +67108864' "$log/$coll.G.n$n.txt" | awk '{print $6, $10}')"
  done
  timeout 60 "$bin" perf $coll -p 2 -b 64M -e 64M -n 20 -w 2 > "$log/$coll.eager.txt" 2>&1
  echo "$coll eager: $(grep -E '^ +67108864' "$log/$coll.eager.txt" | awk '{print $6, $10}')"
done
if ! command -v nsys > /dev/null; then
  echo "nsys not found: no traces"
  exit 0
fi
nsys --version
for coll in broadcast reduce; do
  for mode in eager G; do
    g=; [ $mode = G ] && g="-G 1"
    out=$log/nsys_${coll}_$mode
    timeout 120 nsys profile --trace=cuda --cuda-graph-trace=node --trace-fork-before-exec=true \
      --force-overwrite=true --output="$out" "$bin" perf $coll -p 2 $g -b 64M -e 64M -n 5 -w 1 -c 0 \
      > "$out.log" 2>&1 || echo "nsys profile $coll $mode: exit $?"
    timeout 120 nsys stats --report cuda_gpu_trace --format csv --output "$out" "$out.nsys-rep" \
      > "$out.stats.log" 2>&1 || echo "nsys stats $coll $mode: exit $?"
    rm -f "$out.sqlite" "$out.nsys-rep"
    ls -la "$out"* | awk '{print $5, $9}'
  done
done
