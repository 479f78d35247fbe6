#!/usr/bin/env bash
# The data-parallel example (examples/ddp_mlp, both backends, process per
# GPU) once per setting, to compare a gradient-sync knob in one call.
# Usage: scripts/device/mlp_env.sh BUILD_DIR LOG_DIR "NAME VAR=V ..." ...
#   (NAME alone: the defaults; MLP_ARGS: more ddp_mlp arguments for every
#   run, e.g. "--width 4096 --layers 8 --batch 512"). Prints each run's
#   step-time table.
set -uo pipefail
build=${1:?usage: mlp_env.sh BUILD_DIR LOG_DIR "NAME [VAR=VALUE ...]" ...}
log=${2:?usage: mlp_env.sh BUILD_DIR LOG_DIR "NAME [VAR=VALUE ...]" ...}
shift 2
mkdir -p "$log"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
status=0
for run in "$@"; do
  read -r name vars <<< "$run"
  # shellcheck disable=SC2086
  timeout 120 env $vars "$build/examples/ddp_mlp" -p 2 --backend both ${MLP_ARGS:-} > "$log/$name.txt" 2>&1
  rc=$?
  [ "$rc" = 0 ] || status=1
  echo "=== $name ($vars) rc=$rc"
  sed -n '/^time per step/,/^all-reduce alone/p' "$log/$name.txt"
done
exit $status
