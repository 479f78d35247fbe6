#!/usr/bin/env bash
# Regenerate tests/data/golden/NAME.txt from `p2pkit topo --from` for every
# recorded machine. Review the diff before committing: these are the expected
# classifications.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-build/p2pkit}")
mkdir -p tests/data/golden
for f in tests/data/*.p2pkit tests/data/*.xml; do
  [ -e "$f" ] || continue
  name=$(basename "$f")
  (cd tests/data && "$bin" topo --from "$name" 2>&1) > "tests/data/golden/$name.txt"
  echo "wrote tests/data/golden/$name.txt"
done
