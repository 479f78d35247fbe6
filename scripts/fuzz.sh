#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Fuzz with libFuzzer + ASan + UBSan for SECONDS in all (default 60): the
# topology readers (p2pkit files, NCCL XML, hwloc XML, format detection;
# tests/fuzz/fuzz_topo_read.c) for half of it, the rendezvous's messages
# (tests/fuzz/fuzz_boot_wire.c) and the desync report's readers (p2pkit's
# text, PyTorch's flight recorder pickles; tests/fuzz/fuzz_trace_read.c) a
# quarter each. Builds them with clang into build-fuzz/ (P2PKIT_FUZZ_BUILD),
# seeds build-fuzz/corpus (from tests/data and tests/fuzz/seeds),
# build-fuzz/corpus-boot (from tests/fuzz/seeds_boot) and
# build-fuzz/corpus-trace (from tests/data/trace); the corpora grow across
# runs. Fails on any crash,
# leak, sanitizer report or broken invariant; the failing input is left in
# build-fuzz/crash-*.
# Usage: scripts/fuzz.sh [SECONDS] [extra libFuzzer flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
out=${P2PKIT_FUZZ_BUILD:-build-fuzz}
command -v clang >/dev/null || { echo "fuzz: clang is not installed" >&2; exit 2; }
mkdir -p "$out/corpus" "$out/corpus-boot" "$out/corpus-trace"
flags=(-std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -fno-omit-frame-pointer -Wall -Wextra -Wno-unused-parameter -Iinclude -Isrc)
# Only the plain-C sources each target needs: no CUDA, no NVML (the settings
# registry in core checks P2PKIT_SM_COPY_CONFIG with xfer/smcfg.c).
core=(src/core/*.c src/xfer/smcfg.c)
topo=(src/topo/xml.c src/topo/topo_model.c src/topo/topo_load.c src/topo/topo_file.c
      src/topo/topo_nccl.c src/topo/topo_hwloc.c src/topo/topo_print.c)
# shellcheck disable=SC2046
clang "${flags[@]}" $(pkg-config --cflags hwloc) tests/fuzz/fuzz_topo_read.c "${core[@]}" "${topo[@]}" \
  $(pkg-config --libs hwloc) -lpthread -lm -ldl -o "$out/fuzz_topo_read"
clang "${flags[@]}" tests/fuzz/fuzz_boot_wire.c "${core[@]}" src/coll/rdv/bootstrap_wire.c \
  -lpthread -lm -ldl -o "$out/fuzz_boot_wire"
clang "${flags[@]}" tests/fuzz/fuzz_trace_read.c "${core[@]}" src/trace/*.c \
  -lpthread -lm -ldl -o "$out/fuzz_trace_read"
cp tests/data/*.p2pkit tests/data/*.xml tests/fuzz/seeds/* "$out/corpus/" 2>/dev/null || true
cp tests/fuzz/seeds_boot/* "$out/corpus-boot/"
for d in tests/data/trace/*/; do # the same names in several jobs: keep each
  for f in "$d"*; do cp "$f" "$out/corpus-trace/$(basename "$d")-$(basename "$f")"; done
done
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0
export P2PKIT_DEBUG=NONE
# hwloc's own minimal XML parser: the same on every machine, no libxml2.
export HWLOC_LIBXML_IMPORT=0
# run NAME SECONDS CORPUS [flags...]
run() {
  local name=$1 t=$2 corpus=$3; shift 3
  echo "fuzz: $name, $t s over $(ls "$corpus" | wc -l) corpus inputs"
  "$out/$name" -max_total_time="$t" -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$out/" \
    -print_final_stats=1 "$@" "$corpus" > "$out/$name.log" 2>&1 ||
    { tail -60 "$out/$name.log"; echo "fuzz: $name FAILED (log: $out/$name.log)" >&2; exit 1; }
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$out/$name.log" | sed "s/^/fuzz: $name: /"
}
quarter=$((secs / 4 > 0 ? secs / 4 : 1))
run fuzz_topo_read $((secs - 2 * quarter > 0 ? secs - 2 * quarter : 1)) "$out/corpus" -max_len=65536 \
  -dict=tests/fuzz/topo.dict "$@"
run fuzz_boot_wire "$quarter" "$out/corpus-boot" -max_len=4096 -dict=tests/fuzz/boot.dict "$@"
run fuzz_trace_read "$quarter" "$out/corpus-trace" -max_len=16384 -dict=tests/fuzz/trace.dict "$@"
echo "fuzz: ok"
