#!/usr/bin/env bash
# The torch.distributed backend "p2pkit" on a GPU machine, in one device call
# (<= 9 min on the one-GPU nvidia-h200; ranks share the GPU there, with
# P2PKIT_SHARE_GPUS=1, and NCCL, which cannot share one, runs as one
# simulated host per rank: NCCL_HOSTID, loopback sockets).
#   env        torch, CUDA, scikit-build-core, NCCL as this machine has them
#   wheel      pip install . (no network: --no-build-isolation) into a venv
#              made with --system-site-packages (torch from the machine)
#   import     from outside the tree: the wheel's own libp2pkit.so, the
#              backend registered, `p2pkit` on PATH
#   cpu        python/tests/test_torch_backend_cpu.py against the wheel
#   binding    python/tests/test_binding.py against the wheel, with its GPU
#              case (a one-rank communicator's abort)
#   binding_mp python/tests/test_collectives_mp.py: every collective of the
#              Python binding against torch's arithmetic, 2 ranks
#   ddp_hook   python/tests/test_ddp_hook.py: DDP with p2pkit.ddp_comm_hook
#              on a Comm of its own against DDP on NCCL, 2 ranks
#              (binding, binding_mp, ddp_hook: a case that skips fails)
#   ops        every op x dtype x async_op against gloo on CPU copies
#   misc       NCCL fallback (int8, uneven all-to-all), functional
#              collectives eager and under torch.compile, CUDA graph capture
#              of an all-reduce
#   train      DDP and FSDP2 for 5 steps: DDP as DDP on gloo/CPU, FSDP2 as one
#              process on the whole batch (losses and parameters)
#   async      ranks disagree: work.wait() and the next call raise, naming it
#   mesh       4 ranks: a 2x2 DeviceMesh's sub-groups, new_group([1, 3])
#   example    examples/train.py under torchrun, p2pkit and NCCL, both models
# Usage: RECORD_COMMIT=<sha> scripts/device/torch.sh LOG_DIR
#   TORCH_SKIP="train example ..." leaves parts out; BUDGET_S (default 530).
# Every step's whole output is LOG_DIR/<step>.txt; the summary at the end has
# one line per step (rc=0 passed; rc=124 ran out of time).
set -uo pipefail
cd "$(dirname "$0")/../.."
log=${1:?usage: torch.sh LOG_DIR}
budget=${BUDGET_S:-530}
STEP_TAIL=${STEP_TAIL:-12}
. scripts/device/lib.sh
want() { [[ " ${TORCH_SKIP:-} " != *" $1 "* ]]; }
machine_info
log=$(cd "$log" && pwd)
venv=/tmp/p2pkit-torch-venv
py=$venv/bin/python
work=$(mktemp -d) # tests run from here: only the installed package is importable
export CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
unset P2PKIT_LIB
repo=$PWD
fit env 60 python3 -c "import sys, torch, torch.distributed as d, scikit_build_core as s
print('python', sys.version.split()[0], '| torch', torch.__version__, '| CUDA', torch.version.cuda,
      '| GPUs', torch.cuda.device_count(), '| NCCL', torch.cuda.nccl.version(), '| gloo', d.is_gloo_available(),
      '| scikit-build-core', s.__version__)"
# A venv that sees the machine's torch: --system-site-packages, and where the
# machine's python3 is itself a venv (torch in its site-packages, which a
# venv made from it does not see), a .pth naming that folder.
make_venv() {
  rm -rf "$venv" && python3 -m venv --system-site-packages "$venv" || return 1
  local theirs ours
  theirs=$(python3 -c "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))")
  ours=$("$py" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  echo "$theirs" > "$ours/machine-site-packages.pth"
  "$py" -c "import torch, scikit_build_core; print('venv sees torch', torch.__version__)"
}
export -f make_venv; export venv py
fit wheel 300 bash -c "make_venv && \
  $py -m pip install --no-build-isolation --no-deps -C build-dir=build-wheel -v . && ls -l $venv/bin/p2pkit"
[ -x "$venv/bin/p2pkit" ] || { step_summary "the wheel did not install; see $log/wheel.txt"; exit 1; }
cp python/tests/test_torch_backend_cpu.py python/tests/test_torch_backend.py python/tests/test_binding.py \
  python/tests/test_collectives_mp.py python/tests/test_ddp_hook.py python/tests/torchrun_case.py "$work/"
fit import 60 bash -c "cd $work && $py -c \"
import os, p2pkit, torch.distributed as d
lib = p2pkit.library_path()
print('package', os.path.dirname(p2pkit.__file__)); print('library', lib)
assert os.path.dirname(lib) == os.path.dirname(p2pkit.__file__), 'not the bundled library'
assert 'P2PKIT' in d.Backend._plugins, 'backend not registered'
print('backend registered:', d.Backend._plugins['P2PKIT'])\" && PATH=$venv/bin:\$PATH p2pkit topo"
# unit NAME LIMIT MODULE: its unittest cases against the wheel; on this
# machine (torch, a GPU) a case that skips fails the step.
unit() {
  fit "$1" "$2" bash -c "cd $work && $py -m unittest -v $3" || return
  if grep -E -- '\.\.\. skipped|\(skipped=' "$log/$1.txt"; then
    summary+=("$(printf '%-26s a case skipped (this machine has torch and %s GPU(s))' "$1" "$ngpu")")
    status=1
  fi
}
fit cpu 60 bash -c "cd $work && $py -m unittest -v test_torch_backend_cpu"  # its source-tree case skips here
want binding && unit binding 90 test_binding
want binding_mp && unit binding_mp 200 test_collectives_mp
want ddp_hook && unit ddp_hook 150 test_ddp_hook
t() { (cd "$work" && "$py" -m unittest -v "test_torch_backend.$1"); }
export -f t; export work
want ops && fit ops 300 bash -c 't TwoRanks.test_ops_against_gloo'
want misc && fit misc 150 bash -c 't TwoRanks.test_nccl_fallback_funcol_graph'
want train && fit train 180 bash -c 't TwoRanks.test_ddp_and_fsdp2'
want async && fit async 120 bash -c 't TwoRanks.test_async_error'
want mesh && fit mesh 150 bash -c 't FourRanks.test_device_mesh_2x2'
if want example; then
  n=2; [ "$ngpu" -ge 2 ] && n=$ngpu
  fit example 150 bash -c "cd $work && $py -m torch.distributed.run --standalone --nproc_per_node=$n \
    $repo/examples/train.py --backend both --config small --steps 12 --warmup 3"
fi
step_summary "$ngpu GPU(s); logs in $log"
[ "$status" = 0 ] && echo "ALL PASSED" || echo "SOME STEPS FAILED: read $log/<step>.txt (each case prints CASE <name> rank <r>: PASS/FAIL and why)"
exit $status
