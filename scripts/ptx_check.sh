#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The PTX of every kernel (and device function) in src/coll's .cu files, compared
# per function with a recorded list (tests/data/ptx_kernels.txt: name and
# hash of each function's normalized PTX), so kernels that only moved
# between files are proven to compile to the same code.
#   scripts/ptx_check.sh            compare with tests/data/ptx_kernels.txt
#   scripts/ptx_check.sh --record   rewrite it (after an intended change)
#   scripts/ptx_check.sh --ref REV  compare with the PTX of commit REV's
#                                   src/coll (built in a temporary tree)
# Normalized: comments (callseq numbers), .file/.loc lines and blank lines dropped; the
# file-specific parts of internal names (_INTERNAL_<hash>_<file>_<hash>),
# local depots' and basic blocks' function numbers replaced. Each function
# has three hashes, from strict to loose: its PTX so normalized; the same
# with its virtual registers renamed in order of first use (the same code
# up to a consistent renaming); and with the registers' numbers erased (the
# same instructions in the same order, registers possibly assigned
# otherwise, as when two independent moves of a loop-carried pair swap).
# Cutting a kernel into inlined helpers can move a function from the first
# to the second or third; each such function is listed. Built with and without
# P2PK_KTRACE, for compute_90 (CUDA_ARCH to change it).
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
  for f in $(find "$root/src/coll" -name '*.cu' | sort); do
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
            # Registers renamed in order of first use, per class: the
            # same code up to a consistent renaming of its registers.
            ren, cnt = {}, {}
            def rename(m):
                if m.group(0) not in ren:
                    c = cnt[m.group(1)] = cnt.get(m.group(1), 0) + 1
                    ren[m.group(0)] = '%%%s_%d' % (m.group(1), c)
                return ren[m.group(0)]
            loose = [re.sub(r'%([a-z]+)\d+', rename, t) for t in text if not t.startswith('.reg')]
            h2 = hashlib.sha256('\n'.join(loose).encode()).hexdigest()[:16]
            # Weaker: the registers' numbers erased (the same instructions
            # in the same order, their registers possibly assigned otherwise).
            erased = [re.sub(r'%([a-z]+)_\d+', r'%\1', t) for t in loose]
            h3 = hashlib.sha256('\n'.join(erased).encode()).hexdigest()[:16]
            seen.setdefault(tag + ':' + name, set()).add(h + ' ' + h2 + ' ' + h3)
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
python3 - "$tmp/was.txt" "$tmp/now.txt" <<'PY'
import sys
def load(p):
    d = {}
    for l in open(p):
        f = l.split()
        d.setdefault(f[0], set()).add(tuple(f[1:]))
    return d
was, now = load(sys.argv[1]), load(sys.argv[2])
kinds = ["the same", "the same up to register names", "the same instructions, registers assigned otherwise"]
count = [0, 0, 0]
bad = []
for k in sorted(set(was) | set(now)):
    a, b = was.get(k), now.get(k)
    level = None
    for lv in range(3):
        if a and b and {x[lv] for x in a} == {x[lv] for x in b}:
            level = lv
            break
    if level is None:
        bad.append(k)
        continue
    count[level] += 1
    if level:
        print(kinds[level] + ":", k)
for k in bad:
    print("differs:" if k in was and k in now else "only before:" if k in was else "only now:", k)
print("PTX: %d functions %s as before, %d %s, %d %s, %d differ"
      % (count[0], kinds[0], count[1], kinds[1], count[2], kinds[2], len(bad)))
sys.exit(1 if bad else 0)
PY
