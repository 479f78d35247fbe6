#!/usr/bin/env bash
# Fuzz the topology readers (p2pkit files, NCCL XML, hwloc XML, format
# detection) with libFuzzer + ASan + UBSan for SECONDS (default 60). Builds
# tests/fuzz/fuzz_topo_read.c with clang into build-fuzz/ (P2PKIT_FUZZ_BUILD),
# seeds build-fuzz/corpus from tests/data and tests/fuzz/seeds (the corpus
# grows across runs) and fails on any crash, leak, sanitizer report or broken
# round trip; the failing input is left in build-fuzz/crash-*.
# Usage: scripts/fuzz.sh [SECONDS] [extra libFuzzer flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
out=${P2PKIT_FUZZ_BUILD:-build-fuzz}
command -v clang >/dev/null || { echo "fuzz: clang is not installed" >&2; exit 2; }
mkdir -p "$out/corpus"
# Only the plain-C sources the readers need: no CUDA, no NVML.
srcs=(src/core/*.c src/topo/xml.c src/topo/topo_model.c src/topo/topo_load.c src/topo/topo_file.c
      src/topo/topo_nccl.c src/topo/topo_hwloc.c src/topo/topo_print.c)
# shellcheck disable=SC2046
clang -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -fno-omit-frame-pointer -Wall -Wextra -Wno-unused-parameter -Iinclude -Isrc $(pkg-config --cflags hwloc) \
  tests/fuzz/fuzz_topo_read.c "${srcs[@]}" $(pkg-config --libs hwloc) -lpthread -lm \
  -o "$out/fuzz_topo_read"
cp tests/data/*.p2pkit tests/data/*.xml tests/fuzz/seeds/* "$out/corpus/" 2>/dev/null || true
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0
export P2PKIT_DEBUG=NONE
# hwloc's own minimal XML parser: the same on every machine, no libxml2.
export HWLOC_LIBXML_IMPORT=0
echo "fuzz: $secs s over $(ls "$out/corpus" | wc -l) corpus inputs"
"$out/fuzz_topo_read" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -dict=tests/fuzz/topo.dict -artifact_prefix="$out/" -print_final_stats=1 "$@" "$out/corpus" \
  > "$out/fuzz.log" 2>&1 || { tail -60 "$out/fuzz.log"; echo "fuzz: FAILED (log: $out/fuzz.log)" >&2; exit 1; }
grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$out/fuzz.log" | sed 's/^/fuzz: /'
echo "fuzz: ok"
