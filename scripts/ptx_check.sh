#!/usr/bin/env bash
# The PTX of every kernel (and device function) in src/coll/*.cu, compared
# per function with a recorded list (tests/data/ptx_kernels.txt: name and
# hash of each function's normalized PTX), so kernels that only moved
# between files are proven to compile to the same code.
#   scripts/ptx_check.sh            compare with tests/data/ptx_kernels.txt
#   scripts/ptx_check.sh --record   rewrite it (after an intended change)
#   scripts/ptx_check.sh --ref REV  compare with the PTX of commit REV's
#                                   src/coll (built in a temporary tree)
# Normalized: comments (callseq numbers), .file/.loc lines and blank lines dropped; the
# file-specific parts of internal names (_INTERNAL_<hash>_<file>_<hash>),
# local depots' and basic blocks' function numbers replaced. Built with
# and without P2PK_KTRACE, for compute_90 (CUDA_ARCH to change it).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/cuda/bin
list=tests/data/ptx_kernels.txt
arch=${CUDA_ARCH:-90}
mode=check
ref=
case "${1:-}" in
  --record) mode=record ;;
  --ref) mode=ref; ref=${2:?--ref needs a revision} ;;
  "") ;;
  *) echo "usage: $0 [--record | --ref REV]" >&2; exit 2 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The normalized functions of the tree at $1, as "name hash" lines in $2.
functions() {
  local root=$1 out=$2 n=0 pids=()
  mkdir -p "$tmp/ptx.$n"
  for f in "$root"/src/coll/*.cu; do
    for kt in 0 1; do
      local def=() tag=plain
      if [ "$kt" = 1 ]; then def=(-DP2PK_KTRACE); tag=ktrace; fi
      nvcc -ptx -arch=compute_$arch -std=c++17 -DP2PKIT_BUILDING -D_GNU_SOURCE "${def[@]}" \
        -I"$root/src" -I"$root/include" "$f" -o "$tmp/ptx.$n/$tag.$(basename "$f").ptx" &
      pids+=($!)
      if [ "${#pids[@]}" -ge "${PTX_JOBS:-2}" ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
    done
  done
  for p in "${pids[@]}"; do wait "$p"; done
  python3 - "$tmp/ptx.$n" > "$out" <<'PY'
import hashlib, os, re, sys
d = sys.argv[1]
internal = re.compile(r'_ZN(\d+)_INTERNAL_[0-9a-f]+_(\d+)_')
def norm_names(s):
    # _ZN<len>_INTERNAL_<hash>_<flen>_<file>_<hash><rest>: drop the file part.
    out, i = [], 0
    for m in internal.finditer(s):
        if m.start() < i: continue
        flen = int(m.group(2))
        j = m.end() + flen
        h = re.match(r'_[0-9a-f]+', s[j:])
        if not h: continue
        out.append(s[i:m.start()] + '_ZN_INTERNAL_')
        i = j + h.end()
    out.append(s[i:])
    return ''.join(out)
seen = {}
for fn in sorted(os.listdir(d)):
    tag = fn.split('.')[0]
    lines = open(os.path.join(d, fn)).read().split('\n')
    i = 0
    while i < len(lines):
        l = lines[i]
        if re.match(r'^(\.visible |\.weak |\.extern )*\.(entry|func)\b', l):
            body, j = [], i
            while j < len(lines) and lines[j] != '}' and lines[j] != ';':
                body.append(lines[j]); j += 1
            end = lines[j] if j < len(lines) else ''
            i = j + 1
            if end != '}': continue  # a declaration
            text = []
            for b in body:
                s = re.sub(r'//.*', '', b).strip()  # comments (callseq numbers count per file)
                if not s or s.startswith('.loc') or s.startswith('.file'): continue
                s = norm_names(s)
                s = re.sub(r'__local_depot\d+', '__local_depot', s)
                s = re.sub(r'\$L__BB\d+_', '$L__BB_', s)
                text.append(s)
            hd = re.sub(r'\(\s*\.param[^)]*\)', ' ', l)  # a return value
            m = re.search(r'([A-Za-z_$][\w$]*)\s*\(?\s*$', hd.split('(')[0].strip())
            name = norm_names(m.group(1) if m else hd)
            h = hashlib.sha256('\n'.join(text).encode()).hexdigest()[:16]
            seen.setdefault(tag + ':' + name, set()).add(h)
        else:
            i += 1
for k in sorted(seen):
    for h in sorted(seen[k]):
        print(k, h)
PY
}

functions . "$tmp/now.txt"
case $mode in
  record)
    cp "$tmp/now.txt" "$list"
    echo "recorded $(wc -l < "$list") functions in $list"
    exit 0 ;;
  ref)
    mkdir -p "$tmp/ref"
    git archive "$ref" src include | tar -x -C "$tmp/ref"
    functions "$tmp/ref" "$tmp/was.txt" ;;
  check) cp "$list" "$tmp/was.txt" ;;
esac
if diff -u "$tmp/was.txt" "$tmp/now.txt" > "$tmp/diff"; then
  echo "PTX: $(grep -c ':' "$tmp/now.txt") functions, each the same as before"
else
  echo "PTX differs (- before, + now):"
  grep '^[-+][a-z]' "$tmp/diff" || true
  exit 1
fi
