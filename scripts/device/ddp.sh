#!/usr/bin/env bash
# Data-parallel training on the GPU machine (issue 7): the gradient-sync GPU
# test, the Python binding, DDP hook and collectives tests, the torchrun example with and
# without the hook, and the cuBLAS MLP example (checks, then p2pkit vs NCCL).
# Usage: scripts/device/ddp.sh BUILD_DIR LOG_DIR     (about 2-3 minutes)
# NCCL_NVLS_ENABLE / TORCH_SYMM_MEM_DISABLE_MULTICAST are forced off here.
set -uo pipefail
build=${1:?usage: ddp.sh BUILD_DIR LOG_DIR}
log=${2:?usage: ddp.sh BUILD_DIR LOG_DIR}
mkdir -p "$log"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export P2PKIT_LIB=$PWD/$build/libp2pkit.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
STEP_TAIL=30
. "$(dirname "$0")/lib.sh"
python3 -c 'import torch; print("torch", torch.__version__, "gpus", torch.cuda.device_count())' > "$log/torch.txt" 2>&1
step grad_sync_test 240 "$build/tests/test_ddp_grad_sync"
step py_binding 120 python3 python/tests/test_binding.py -v
step py_ddp_hook 300 python3 python/tests/test_ddp_hook.py -v
step py_collectives 300 python3 python/tests/test_collectives_mp.py -v
step ddp_torch_p2pkit 180 python3 -m torch.distributed.run --standalone --nproc_per_node="$ngpu" examples/ddp_torch.py
step ddp_torch_nccl 180 python3 -m torch.distributed.run --standalone --nproc_per_node="$ngpu" examples/ddp_torch.py --no-p2pkit
if [ -x "$build/examples/ddp_mlp" ]; then
  step mlp_smoke 120 "$build/examples/ddp_mlp" -p "$ngpu" --steps 10 --width 512 --layers 4 --backend p2pkit
  step mlp_both 300 "$build/examples/ddp_mlp" -p "$ngpu" --backend both
else
  summary+=("ddp_mlp not built (no cuBLAS?)"); status=1
fi
step_summary "logs in $log"
exit $status
