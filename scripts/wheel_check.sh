#!/usr/bin/env bash
# The Python wheel as a user gets it: `pip install .` into a fresh venv (the
# library built by CMake through scikit-build-core), then, from outside the
# source tree: import p2pkit (its own bundled library, no P2PKIT_LIB), the
# `p2pkit` command on PATH, and the torch-free tests of the package against
# the installed copy. Torch is not installed (PyPI's CUDA wheels are
# gigabytes); the backend's torch side runs on a GPU machine
# (scripts/device/torch.sh).
# Usage: scripts/wheel_check.sh [VENV_DIR]   (default: a temporary one)
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
export PATH=$PATH:/usr/local/cuda/bin
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
venv=${1:-$(mktemp -d)/venv}
t0=$SECONDS
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip > /dev/null
"$venv/bin/python" -m pip install -q "$src"
echo "wheel built and installed in $((SECONDS - t0)) s"
cd "$(mktemp -d)"   # away from the source tree: only the installed package is importable
unset P2PKIT_LIB
"$venv/bin/python" - <<'PY'
import os, p2pkit
here = os.path.dirname(p2pkit.__file__)
lib = p2pkit.library_path()
assert "site-packages" in here, here
assert os.path.dirname(lib) == here, f"loaded {lib}, not the wheel's own library in {here}"
print(f"import p2pkit: version {p2pkit.version()}, library {lib}")
built = [n for n in os.listdir(here) if n.startswith("_c10d.")]
print("PyTorch backend:", f"built ({built[0]})" if built else
      "not built (no torch when the wheel was built: pip install --no-build-isolation . with torch)")
try:
    import torch  # noqa: F401
    print("torch present: backend registered:", "P2PKIT" in __import__("torch").distributed.Backend._plugins)
except ImportError:
    assert not built, "a backend built against a torch this venv does not have"
    print("torch absent: p2pkit imports without it (the backend is not registered)")
PY
PATH=$venv/bin:$PATH command -v p2pkit
PATH=$venv/bin:$PATH p2pkit topo --from "$src/tests/data/h200x2.p2pkit" > topo.txt
grep -q NV18 topo.txt && echo "p2pkit topo (from PATH): ok"
cp "$src/python/tests/test_torch_backend_cpu.py" .
sed -i 's|^sys.path.insert.*||' test_torch_backend_cpu.py  # the installed package, not python/
"$venv/bin/python" -m unittest -v test_torch_backend_cpu 2>&1 | tail -n 25
