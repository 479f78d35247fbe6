#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
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
# p2pkit trace on every recorded job (tests/data/trace/NAME: each rank's
# desync report), from the folder above them so the files print as NAME/...
mkdir -p tests/data/golden/trace
for d in tests/data/trace/*/; do
  name=$(basename "$d")
  (cd tests/data/trace && "$bin" trace "$name" 2>&1) > "tests/data/golden/trace/$name.txt"
  echo "wrote tests/data/golden/trace/$name.txt"
done
(cd tests/data/trace && "$bin" trace --json skip) > tests/data/golden/trace/skip.json
echo "wrote tests/data/golden/trace/skip.json"
