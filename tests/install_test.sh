#!/usr/bin/env bash
# The install target: header, shared library, pkg-config file; a program
# built only from those links and runs.
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > /dev/null
pc=$(find "$tmp/prefix" -name p2pkit.pc | head -n 1)
[ -n "$pc" ] || { echo "FAIL: p2pkit.pc not installed"; exit 1; }
[ -f "$tmp/prefix/include/p2pkit.h" ] || { echo "FAIL: header not installed"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")
lib=$(pkg-config --variable=libdir p2pkit)/libp2pkit.so
deps=$(ldd "$lib")   # read whole: see nm below
san=; grep -q libasan <<< "$deps" && san="-fsanitize=address,undefined"   # sanitizer build
cc $san -std=c11 -Wall -Werror "$src/examples/topo_pairs.c" $(pkg-config --cflags --libs p2pkit) \
   -Wl,-rpath,"$(pkg-config --variable=libdir p2pkit)" -o "$tmp/topo_pairs"
# Only the public API is exported: no internal p2pk_ symbols. (nm's output
# is read whole first: `nm | grep -q` under pipefail fails at random when
# grep exits before nm has written everything.)
syms=$(nm -D --defined-only "$lib")
if grep -q ' p2pk_' <<< "$syms"; then echo "FAIL: internal symbols exported"; exit 1; fi
grep -q ' p2pkit_topo_discover' <<< "$syms" || { echo "FAIL: API not exported"; exit 1; }
rc=0; "$tmp/topo_pairs" > "$tmp/out" 2>&1 || rc=$?
if [ "$rc" != 0 ] && [ "$rc" != 2 ]; then echo "FAIL: example exited $rc"; cat "$tmp/out"; exit 1; fi
echo "ok: installed, built with pkg-config, ran (exit $rc)"
