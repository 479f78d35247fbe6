#!/usr/bin/env bash
# Where a small all-reduce's time goes, on the GPU machine: a
# P2PKIT_KTRACE build (build-kt, bench_launch only) and bench_launch at each
# count of float32s given, eager and under a CUDA graph, with the LL
# kernel's phases (block 0 and the whole grid) after each.
# Usage: scripts/device/ktrace.sh LOG_DIR COUNT...   (e.g. 2 1024 8192 16384)
set -uo pipefail
log=${1:?usage: ktrace.sh LOG_DIR COUNT...}
shift
mkdir -p "$log"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=$PATH:/usr/local/cuda/bin
STEP_TAIL=${STEP_TAIL:-14}
. "$(dirname "$0")/lib.sh"
step ktrace-build 400 bash -c "cmake -S . -B build-kt -DCMAKE_BUILD_TYPE=Release -DP2PKIT_WERROR=OFF \
  -DP2PKIT_KTRACE=ON > /dev/null && cmake --build build-kt -j\$(nproc) --target bench_launch"
for n in "$@"; do
  step "ktrace.$n" 120 build-kt/tests/bench_launch --count "$n"
done
step_summary "logs in $log"
exit $status
