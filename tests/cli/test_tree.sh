#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The repository holds the product: no file dates itself to the project's
# own history (which sitting or which recording), nothing under bench/ but
# the curated baselines, and the documents within their size. Skips
# outside a git checkout (a release tarball).
# Every source file carries its license's SPDX line in its first three
# lines (LICENSE holds the text).
# Usage: test_tree.sh P2PKIT_BIN DATA_DIR (the CLI tests' arguments)
#        test_tree.sh --add-spdx   adds the SPDX line where it is missing: a
#        C-family file's first line, a script's first (second after #!)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
git rev-parse --git-dir > /dev/null 2>&1 || { echo "SKIP: not a git checkout"; exit 77; }
fail=0
all=$(git ls-files --cached --others --exclude-standard)
files=$(echo "$all" | grep -v '^tests/data/')
spdx='SPDX-License-Identifier: BSD-3-Clause'
sources=$(echo "$files" | grep -E '\.(c|h|cu|cuh|cpp|hpp|py|sh)$|(^|/)CMakeLists\.txt$|\.cmake$|^\.ci/run$|^pyproject\.toml$')
missing=$(for f in $sources; do [ -f "$f" ] && ! head -n 3 "$f" | grep -qF "$spdx" && echo "$f"; done)
if [ "${1:-}" = --add-spdx ]; then
  for f in $missing; do
    case $f in
      *.c | *.h | *.cu | *.cuh | *.cpp | *.hpp) sed -i "1i /* $spdx */" "$f" ;;
      *) if head -n 1 "$f" | grep -q '^#!'; then sed -i "1a # $spdx" "$f"; else sed -i "1i # $spdx" "$f"; fi ;;
    esac
  done
  echo "added the SPDX line to $(echo "$missing" | grep -c .) files"
  exit 0
fi
[ -z "$missing" ] || { echo "FAIL source files without '$spdx' (tests/cli/test_tree.sh --add-spdx adds it):"; echo "$missing" | head -n 20; fail=1; }
# Words that date a line to the project's history; each pattern has a
# bracketed letter so that it does not match its own text here.
hits=$(grep -niE '[s]ession|\bs[0-9]{1,2}\b r[u]n|\br[u]n [0-9]+\b|bench/r[e]sults' $files 2>/dev/null)
[ -z "$hits" ] || { echo "FAIL lines citing the project's history:"; echo "$hits" | head -n 20; fail=1; }
names=$(echo "$files" | grep -E '(^|/)s[0-9]{1,2}[_-]|r[u]n[0-9]+|[s]ession')
[ -z "$names" ] || { echo "FAIL file names citing the project's history:"; echo "$names"; fail=1; }
others=$(echo "$files" | grep '^bench/' | grep -v '^bench/baselines/')
[ -z "$others" ] || { echo "FAIL under bench/ only baselines belong:"; echo "$others" | head; fail=1; }
n=$(echo "$all" | wc -l)
[ "$n" -lt 500 ] || { echo "FAIL $n files (limit 500)"; fail=1; }
kb=$(echo "$all" | tr '\n' '\0' | xargs -0 du -ck 2>/dev/null | tail -n 1 | cut -f1)
[ "$kb" -lt 5120 ] || { echo "FAIL the tree holds $kb KiB (limit 5 MiB)"; fail=1; }
r=$(wc -l < README.md); a=$(wc -l < docs/ARCHITECTURE.md)
[ "$r" -le 120 ] || { echo "FAIL README.md has $r lines (limit 120)"; fail=1; }
[ "$a" -le 300 ] || { echo "FAIL docs/ARCHITECTURE.md has $a lines (limit 300)"; fail=1; }
[ "$fail" = 0 ] && echo "ok   $n files ($kb KiB), README $r lines, ARCHITECTURE $a lines, no history in the tree, $(echo "$sources" | wc -l) source files under $spdx"
exit $fail
