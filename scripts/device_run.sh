#!/usr/bin/env bash
# One call on the GPU machine: build, GPU tests, topology record, benchmarks.
# Usage (from the repo root): scripts/device_run.sh [stage ...]
#   stages: machine build topo tests cases xfer coll ddp perf doctor   (default: all)
#   (cases: the collective GPU tests one case per process; TESTS_EXCLUDE: a ctest -E regex)
# Everything is logged under $LOG (default /tmp/p2pkit-device) and packed
# into $OUT/device-logs.tgz; a summary goes to $OUT/summary.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
# Never NVLink multicast on these machines (it can take the host's GPUs down).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=$PATH:/usr/local/cuda/bin
OUT=${OUT:-/tmp/p2pkit-out}
LOG=${LOG:-/tmp/p2pkit-device}
BUILD=${BUILD:-build-dev}
mkdir -p "$OUT" "$LOG"
stages=${*:-machine build topo tests cases xfer coll ddp perf doctor}
summary="$LOG/summary.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
run_stage() { # name seconds command...
  local name=$1 secs=$2; shift 2
  local t0=$SECONDS
  timeout --signal=TERM --kill-after=10 "$secs" "$@" > "$LOG/$name.log" 2>&1
  local rc=$?
  note "stage $name: rc=$rc in $((SECONDS - t0)) s"
  tail -n 25 "$LOG/$name.log"
  return $rc
}
has() { [[ " $stages " == *" $1 "* ]]; }

if has machine; then
  {
    date -u +%Y-%m-%dT%H:%M:%SZ; hostname; uname -r
    nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total --format=csv
    nvidia-smi topo -m; for c in r w a n; do nvidia-smi topo -p2p $c; done
    nvidia-smi nvlink -s 2>&1 | head -n 40
    nvcc --version | tail -n 2; cmake --version | head -n 1
    pkg-config --modversion hwloc; ls -l /usr/lib/x86_64-linux-gnu/libnccl.so* 2>&1
  } > "$LOG/machine.txt" 2>&1
  note "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sort | uniq -c | tr -s ' ')"
fi
if has build; then
  # The device's gcc 13 warns where CI's gcc 12 does not: build without
  # -Werror here so a new warning costs a note, not the whole device session.
  run_stage build 400 bash -c "cmake -S . -B $BUILD -DCMAKE_BUILD_TYPE=Release -DP2PKIT_WERROR=OFF && cmake --build $BUILD -j\$(nproc)" \
    || { tar czf "$OUT/device-logs.tgz" -C "$LOG" .; cp "$summary" "$OUT/"; exit 1; }
  note "compiler warnings on the device: $(grep -c 'warning:' "$LOG/build.log")"
  grep 'warning:' "$LOG/build.log" | sort -u | head -n 20 >> "$summary"
fi
if has topo; then
  run_stage topo 60 bash -c "$BUILD/p2pkit topo --save $LOG/h200x2.p2pkit --dump-nccl $LOG/h200x2.p2pkit-nccl.xml \
    --save-hwloc $LOG/h200x2.hwloc.xml > $LOG/topo.txt && $BUILD/p2pkit topo -m > $LOG/topo-m.txt \
    && $BUILD/p2pkit topo --json > $LOG/topo.json && $BUILD/p2pkit topo --from $LOG/h200x2.p2pkit -m > $LOG/topo-from-m.txt \
    && cmp $LOG/topo-m.txt <(head -n \$(wc -l < $LOG/topo-m.txt) $LOG/topo-from-m.txt) && echo 'recorded file prints the same matrix' \
    && P2PKIT_DEBUG=INFO $BUILD/p2pkit topo"
fi
if has tests; then
  run_stage tests "${TEST_SECS:-420}" ctest --test-dir "$BUILD" -L gpu -E "${TESTS_EXCLUDE:-^none$}" --output-on-failure --timeout 300
fi
for part in cases xfer coll ddp perf doctor; do
  if has $part && [ -x scripts/device/$part.sh ]; then
    mkdir -p "$LOG/$part"
    run_stage $part "${PART_SECS:-300}" scripts/device/$part.sh "$BUILD" "$LOG/$part"
  fi
done
tar czf "$OUT/device-logs.tgz" -C "$LOG" .
cp "$summary" "$OUT/summary.txt"
cat "$summary"
