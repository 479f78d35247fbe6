#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The torch.distributed backend "p2pkit" (the C++ backend) on a GPU machine,
# in one device call (< 10 min on the one-GPU nvidia-h100-x1 or nvidia-h200;
# ranks share the GPU there with P2PKIT_SHARE_GPUS=1, and NCCL, which cannot
# share one, runs as one simulated host per rank: NCCL_HOSTID, loopback).
# Steps, in order of importance (each with its limit; what no longer fits
# the budget is skipped and said so), with the time each is expected to take
# on a fresh 16-core machine:
#   env      torch, CUDA, NCCL, scikit-build-core as the machine has them     5 s
#   wheel    pip install --no-build-isolation . into a venv that sees the
#            machine's torch: libp2pkit and the backend built against it  ~200 s
#   import   from outside the tree: the wheel's own library, the backend
#            built and registered, a group of one rank made and an
#            all-reduce on it, `p2pkit` on PATH; the C++ compiler and the
#            backend's libstdc++ (failing: cuda-gdb's backtrace)           10 s
#   cpu      python/tests/test_torch_backend_cpu.py against the wheel        15 s
#   bench    scripts/device/torch_host_time.py: host time per call against
#            ProcessGroupNCCL, world sizes 1 and 2 -> $log/torch_host_time.json 50 s
#   matrix   1, 2, 3 and 4 ranks: every op x type x in/out of place x async,
#            a CUDA graph (and its nodes against the C API's), uneven
#            all-to-all, sends and receives, sequence numbers             ~150 s
#   two      2 ranks: split_group and new_group, finished calls' tensors let
#            go on the caller's thread, functional collectives and
#            torch.compile, DDP and FSDP2 against references, the watchdog
#            on an asynchronous error and on a timeout                    ~80 s
#   example  examples/train.py --backend both --config small under torchrun:
#            p2pkit's DDP and FSDP2 losses against NCCL's                  ~60 s
#   mesh     4 ranks: a 2x2 DeviceMesh, new_group([1, 3])                  ~35 s
#   binding     python/tests/test_binding.py with its GPU case              15 s
#   binding_mp  python/tests/test_collectives_mp.py: every collective of the
#               ctypes binding against torch's arithmetic, 2 ranks         ~40 s
#   ddp_hook    python/tests/test_ddp_hook.py: DDP with p2pkit.ddp_comm_hook
#               on a Comm of its own against DDP on NCCL, 2 ranks          ~40 s
#               (binding, binding_mp, ddp_hook: a case that skips fails)
# On a cold machine the whole run is about 9-10 minutes (TORCH_SKIP: a
# second call finds the wheel's build warm).
# Usage: RECORD_COMMIT=<sha> scripts/device/torch.sh LOG_DIR
#   TORCH_SKIP="example mesh ..." leaves parts out; BUDGET_S (default 570).
# Every step's whole output is LOG_DIR/<step>.txt; the summary at the end has
# one line per step (rc=0 passed; rc=124 ran out of time).
set -uo pipefail
cd "$(dirname "$0")/../.."
log=${1:?usage: torch.sh LOG_DIR}
budget=${BUDGET_S:-570}
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
      '| scikit-build-core', s.__version__)" && nvcc --version | tail -n 1
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
fit wheel 330 bash -c "make_venv && \
  $py -m pip install --no-build-isolation --no-deps -C build-dir=build-wheel -v . && ls -l $venv/bin/p2pkit"
grep -E "PyTorch backend|torch not found|is built for CUDA" "$log/wheel.txt" | head -n 3
[ -x "$venv/bin/p2pkit" ] || { step_summary "the wheel did not install; see $log/wheel.txt"; exit 1; }
cp python/tests/test_torch_backend_cpu.py python/tests/test_torch_backend.py python/tests/test_binding.py \
  python/tests/test_collectives_mp.py python/tests/test_ddp_hook.py python/tests/torchrun_case.py "$work/"
cat > "$work/import_check.py" <<'EOF'
import os, sys, p2pkit, torch, torch.distributed as d
from p2pkit import torch_backend as tb
lib = p2pkit.library_path()
print('package', os.path.dirname(p2pkit.__file__), '| library', lib)
assert os.path.dirname(lib) == os.path.dirname(p2pkit.__file__), 'not the bundled library'
assert 'P2PKIT' in d.Backend._plugins, 'backend not registered'
assert tb.available(), tb.why_unavailable()
print('backend:', tb.ProcessGroupP2PKit, 'registered:', d.Backend._plugins['P2PKIT'])
d.init_process_group('cpu:gloo,cuda:p2pkit', rank=0, world_size=1,
                     init_method='tcp://127.0.0.1:' + sys.argv[1])
t = torch.full((5,), 3.0, device='cuda'); d.all_reduce(t); torch.cuda.synchronize()
assert t.tolist() == [3.0] * 5, t.tolist()
print('a group of one rank made, an all-reduce right'); d.destroy_process_group()
EOF
fit import 60 bash -c "cd $work && $py import_check.py 29531 && PATH=$venv/bin:\$PATH p2pkit topo"
# Where it died (cuda-gdb: the machine has no gdb).
if ! grep -q 'all-reduce right' "$log/import.txt" && command -v cuda-gdb > /dev/null; then
  fit import_bt 90 bash -c "cd $work && cuda-gdb -batch -ex run -ex bt --args $py import_check.py 29532 2>&1 | tail -n 40"
fi
# The C++ compiler the backend was built with, and whether the backend
# carries a libstdc++ of its own (a compiler without a shared one).
echo "c++: $(c++ --version | head -n 1); its libstdc++.so: $(c++ -print-file-name=libstdc++.so)"
readelf -d "$venv"/lib/python3*/site-packages/p2pkit/_c10d*.so 2>/dev/null | grep -E 'NEEDED.*stdc' || echo "the backend needs no libstdc++.so: it carries its own"
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
if want bench; then
  fit bench 150 "$py" scripts/device/torch_host_time.py --json "$log/torch_host_time.json"
fi
t() { (cd "$work" && "$py" -m unittest -v "test_torch_backend.$1"); }
export -f t; export work
want matrix && fit matrix 240 bash -c 't OneToFourRanks.test_matrix'
want two && fit two 200 bash -c 't TwoRanks.test_groups_training_watchdog'
if want example; then
  n=2; [ "$ngpu" -ge 2 ] && n=$ngpu
  fit example 150 bash -c "cd $work && $py -m torch.distributed.run --standalone --nproc_per_node=$n \
    $repo/examples/train.py --backend both --config small --steps 12 --warmup 3"
fi
want mesh && fit mesh 120 bash -c 't FourRanks.test_device_mesh_2x2'
want binding && unit binding 90 test_binding
want binding_mp && unit binding_mp 200 test_collectives_mp
want ddp_hook && unit ddp_hook 150 test_ddp_hook
step_summary "$ngpu GPU(s); logs in $log"
[ "$status" = 0 ] && echo "ALL PASSED" || echo "SOME STEPS FAILED: read $log/<step>.txt (each case prints CASE <name> rank <r>: PASS/FAIL and why)"
exit $status
