#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# p2pkit topo must agree with nvidia-smi: GPU columns of `topo -m`, CPU and
# NUMA affinity, GPU NUMA ID (where nvidia-smi prints it), and every code of
# `topo -p2p r/w/a/n`.
set -euo pipefail
bin=$1
command -v nvidia-smi >/dev/null || { echo "SKIP: nvidia-smi not found"; exit 77; }
nvidia-smi -L >/dev/null 2>&1 || { echo "SKIP: nvidia-smi sees no GPU"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 needed to compare tables"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
nvidia-smi topo -m > "$tmp/smi_m.txt"
for c in r w a n; do nvidia-smi topo -p2p $c > "$tmp/smi_$c.txt"; done
"$bin" topo -m > "$tmp/p2pkit_m.txt"
"$bin" topo --json > "$tmp/p2pkit.json"
python3 - "$tmp" <<'PY'
import json, re, sys
d = sys.argv[1]
strip = lambda s: re.sub(r'\x1b\[[0-9;]*m', '', s)

def matrix(path):
    """Rows of a nvidia-smi style table: {row label: [cells]} and the header."""
    lines = [strip(l.rstrip('\n')) for l in open(path)]
    head = next(l for l in lines if 'GPU0' in l)
    cols = [c.strip() for c in head.split('\t')]
    rows = {}
    for l in lines:
        cells = [c.strip() for c in l.split('\t')]
        if cells and re.fullmatch(r'GPU\d+', cells[0]):
            rows[cells[0]] = dict(zip(cols[1:], cells[1:]))
            # nvidia-smi puts an empty field before the GPU NUMA ID: the last cell
            if 'GPU NUMA ID' in cols:
                rows[cells[0]]['GPU NUMA ID'] = cells[-1]
    return rows

bad = 0
smi, mine = matrix(f'{d}/smi_m.txt'), matrix(f'{d}/p2pkit_m.txt')
gpus = sorted(k for k in smi)
if sorted(mine) != gpus:
    print(f'GPU rows differ: nvidia-smi {gpus} vs p2pkit {sorted(mine)}'); bad += 1
for g in gpus:
    numa_id = ['GPU NUMA ID'] if 'GPU NUMA ID' in smi[g] else []
    for col in gpus + ['CPU Affinity', 'NUMA Affinity'] + numa_id:
        a, b = smi[g].get(col, '?').strip(), mine.get(g, {}).get(col, '?').strip()
        if a != b:
            print(f'topo -m {g}/{col}: nvidia-smi "{a}" vs p2pkit "{b}"'); bad += 1
        else:
            print(f'topo -m {g}/{col}: {a} (agree)')
js = json.load(open(f'{d}/p2pkit.json'))
key = {'r': 'read', 'w': 'write', 'a': 'atomics', 'n': 'nvlink'}
for c, name in key.items():
    rows = {}
    for l in open(f'{d}/smi_{c}.txt'):
        cells = [x.strip() for x in strip(l).split('\t') if x.strip()]
        if cells and re.fullmatch(r'GPU\d+', cells[0]):
            rows[int(cells[0][3:])] = cells[1:]
    for p in js['pairs']:
        want = rows[p['src']][p['dst']]
        got = p['nvml_p2p'][name]
        if want != got:
            print(f'topo -p2p {c} GPU{p["src"]}->GPU{p["dst"]}: nvidia-smi {want} vs p2pkit {got}'); bad += 1
        else:
            print(f'topo -p2p {c} GPU{p["src"]}->GPU{p["dst"]}: {got} (agree)')
print('mismatches:', bad)
sys.exit(1 if bad else 0)
PY
