#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The installed tree as a C user meets it: `cmake --install` to a new prefix,
# then the README's C example (examples/quickstart.c) built both ways a user
# would, with pkg-config and with find_package(p2pkit CONFIG), each linked
# and run (no GPU: it prints the library's version and says it needs two
# GPUs, exit 2; on two GPUs: "ok"), and the README shows its lines. The
# installed `p2pkit` runs from the prefix on the library beside it (one copy
# of the code, not two); the library exports only the public API; the
# command, p2pkit.pc, the CMake package and the library report
# include/p2pkit.h's version. Last, a configure without nvcc stops with one
# line naming it.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$(cd "$2" && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
ver=$(sed -n 's/^#define P2PKIT_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' "$src/include/p2pkit.h" |
      paste -sd.)
[[ $ver =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "no version in include/p2pkit.h ($ver)"
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" > /dev/null
pc=$(find "$prefix" -name p2pkit.pc | head -n 1)
[ -n "$pc" ] || fail "p2pkit.pc not installed"
[ -f "$prefix/include/p2pkit.h" ] || fail "header not installed"
cfg=$(find "$prefix" -name p2pkit-config.cmake | head -n 1)
[ -n "$cfg" ] || fail "p2pkit-config.cmake (the CMake package) not installed"
export PKG_CONFIG_PATH=$(dirname "$pc")
libdir=$(pkg-config --variable=libdir p2pkit)
lib=$libdir/libp2pkit.so
[ "$(pkg-config --modversion p2pkit)" = "$ver" ] || fail "p2pkit.pc says $(pkg-config --modversion p2pkit), the header $ver"

# Only the public API is exported: no internal p2pk_ symbols. (nm's output
# is read whole first: `nm | grep -q` under pipefail fails at random when
# grep exits before nm has written everything.)
syms=$(nm -D --defined-only "$lib")
if grep -q ' p2pk_' <<< "$syms"; then fail "internal symbols exported"; fi
grep -q ' p2pkit_topo_discover' <<< "$syms" || fail "API not exported"

# A sanitizer build's library needs its runtime in the program too.
deps=$(ldd "$lib")
san=; grep -q libasan <<< "$deps" && san="-fsanitize=address,undefined"
export ASAN_OPTIONS=detect_leaks=0 # the CUDA runtime's own allocations are not the point here

# The example's run: its first line the library's version, then exit 2 and
# the reason without two GPUs, or exit 0 and "ok" with them.
run_example() {
  local how=$1 exe=$2 rc=0
  "$exe" > "$tmp/out" 2> "$tmp/err" || rc=$?
  [ "$(head -n 1 "$tmp/out")" = "p2pkit $ver" ] || fail "$how: the example's library says '$(head -n 1 "$tmp/out")', not p2pkit $ver"
  case $rc in
    0) grep -q '^ok: ' "$tmp/out" || fail "$how: exit 0 without ok: $(cat "$tmp/out" "$tmp/err")" ;;
    2) grep -q '^quickstart: needs 2 GPUs' "$tmp/err" || fail "$how: exit 2 without its reason: $(cat "$tmp/err")" ;;
    *) fail "$how: the example exited $rc: $(cat "$tmp/out" "$tmp/err")" ;;
  esac
  echo "ok   $how: built, linked, ran (exit $rc: $(cat "$tmp/out" "$tmp/err" | tail -n 1))"
}

# 1. pkg-config, as README and docs/install.md say (rpaths: p2pkit's and
#    CUDA's runtime, which p2pkit.pc names).
cc $san -std=c11 -Wall -Werror "$src/examples/quickstart.c" $(pkg-config --cflags --libs p2pkit) \
   -Wl,-rpath,"$libdir" -Wl,-rpath,"$(pkg-config --variable=cudalibdir p2pkit)" -o "$tmp/quickstart_pc"
run_example "pkg-config" "$tmp/quickstart_pc"

# 2. find_package(p2pkit VERSION EXACT CONFIG): p2pkit::p2pkit brings the
#    header, the library and CUDA's runtime.
mkdir -p "$tmp/app"
cat > "$tmp/app/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.22)
project(quickstart LANGUAGES C)
find_package(p2pkit $ver EXACT CONFIG REQUIRED)
add_executable(quickstart "$src/examples/quickstart.c")
target_link_libraries(quickstart PRIVATE p2pkit::p2pkit)
EOF
cmake -S "$tmp/app" -B "$tmp/app/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_FLAGS="$san" \
      -DCMAKE_EXE_LINKER_FLAGS="$san" > "$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; fail "find_package(p2pkit $ver EXACT CONFIG)"; }
cmake --build "$tmp/app/build" > "$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "the find_package build"; }
run_example "find_package" "$tmp/app/build/quickstart"
# Another major version is not this one.
next=$(( ${ver%%.*} + 1 )).0.0
sed -i "s/find_package(p2pkit $ver EXACT/find_package(p2pkit $next/" "$tmp/app/CMakeLists.txt"
if cmake -S "$tmp/app" -B "$tmp/app/build2" -DCMAKE_PREFIX_PATH="$prefix" > /dev/null 2>&1; then
  fail "find_package(p2pkit $next) accepted version $ver"
fi

# 3. The installed command: the library's code once (it needs libp2pkit.so,
#    found beside it through its RUNPATH, and defines none of the API), the
#    header's version, a recorded machine read.
cli=$prefix/bin/p2pkit
needed=$(readelf -d "$cli")
grep -q 'NEEDED.*\[libp2pkit\.so' <<< "$needed" || fail "bin/p2pkit does not link libp2pkit.so"
grep -q 'R.*PATH.*\$ORIGIN/' <<< "$needed" || fail "bin/p2pkit has no \$ORIGIN-relative RUNPATH"
own=$(nm -D --defined-only "$cli" 2>/dev/null; nm --defined-only "$cli" 2>/dev/null || true)
if grep -q ' [Tt] p2pkit_topo_discover$' <<< "$own"; then fail "bin/p2pkit carries a copy of the library"; fi
[ "$(env -u LD_LIBRARY_PATH "$cli" --version)" = "p2pkit $ver" ] || fail "bin/p2pkit --version: $("$cli" --version)"
env -u LD_LIBRARY_PATH "$cli" topo --from "$src/tests/data/h200x2.p2pkit" > "$tmp/topo" ||
  fail "bin/p2pkit topo --from h200x2.p2pkit"
grep -q NV18 "$tmp/topo" || fail "bin/p2pkit topo printed no NV18"
echo "ok   installed p2pkit $ver: bin/p2pkit on lib/libp2pkit.so, p2pkit.pc, CMake package agree"

# 4. README's C lines are the example's, in its order (the example is what
#    was just built and run).
mapfile -t want < <(sed -n '/^```c$/,/^```$/p' "$src/README.md" | sed '1d;$d')
mapfile -t have < "$src/examples/quickstart.c"
[ "${#want[@]}" -gt 5 ] || fail "README.md has no C example"
i=0
for w in "${want[@]}"; do
  while [ "$i" -lt "${#have[@]}" ] && [ "${have[$i]}" != "$w" ]; do i=$((i + 1)); done
  [ "$i" -lt "${#have[@]}" ] || fail "README.md's C line is not examples/quickstart.c's (in order): '$w'"
  i=$((i + 1))
done
echo "ok   README.md's C example: ${#want[@]} lines of examples/quickstart.c"

# 5. Without nvcc (not on PATH, no CUDACXX, none in CMake's system paths,
#    which CMAKE_FIND_USE_CMAKE_SYSTEM_PATH=OFF stands for here: a toolkit
#    may sit in /usr/local/bin): the configure stops with one line naming it
#    and how to get it.
path=
IFS=: read -ra dirs <<< "$PATH"
for d in "${dirs[@]}"; do [ -x "$d/nvcc" ] || path=${path:+$path:}$d; done
if ! PATH=$path command -v cc > /dev/null || ! PATH=$path command -v cmake > /dev/null; then
  echo "skip no-nvcc configure: nvcc shares a PATH directory with cc or cmake here"
  exit 0
fi
rc=0
env -u CUDACXX -u CMAKE_CUDA_COMPILER -u CUDA_HOME -u CUDA_PATH PATH="$path" cmake -S "$src" -B "$tmp/nonvcc" \
  -DCMAKE_FIND_USE_CMAKE_SYSTEM_PATH=OFF > "$tmp/nonvcc.log" 2>&1 || rc=$?
[ "$rc" != 0 ] || fail "configure without nvcc succeeded"
line=$(grep 'p2pkit: no CUDA compiler (nvcc) found' "$tmp/nonvcc.log" || true)
[ "$(wc -l <<< "$line")" = 1 ] && [ -n "$line" ] || { cat "$tmp/nonvcc.log"; fail "no one-line nvcc message"; }
grep -q 'CUDACXX' <<< "$line" && grep -q 'PATH' <<< "$line" || fail "the nvcc line says not how: $line"
echo "ok   without nvcc:$line"
