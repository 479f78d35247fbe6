#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# `p2pkit topo --json` for every recorded machine in tests/data that has a
# golden text output: the fields docs/topo-json.md promises, with their types
# and codes, every ordered pair once, and the same answers as the text
# outputs of the same file (each pair's link as `-m` prints it, its sentence
# as `--paths` prints it, each GPU's CPU and NUMA affinity as `-m` has them;
# each NIC's class to every GPU as its column and row in `-m`, each GPU's
# nearest NIC as `--paths` says it).
set -uo pipefail
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") data=$2
command -v python3 >/dev/null || { echo "SKIP: python3 not found (it checks the JSON)"; exit 77; }
fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
n=0
for g in "$data"/golden/*.txt; do
  name=$(basename "$g" .txt)
  [ -f "$data/$name" ] || continue
  (cd "$data" && "$bin" topo --from "$name" --json) > "$tmp/t.json" 2> "$tmp/err" &&
    (cd "$data" && "$bin" topo --from "$name" -m) > "$tmp/m.txt" 2>> "$tmp/err" &&
    (cd "$data" && "$bin" topo --from "$name" --paths) > "$tmp/p.txt" 2>> "$tmp/err" ||
    { echo "FAIL $name: p2pkit topo failed"; cat "$tmp/err"; fail=1; continue; }
  if python3 - "$name" "$tmp/t.json" "$tmp/m.txt" "$tmp/p.txt" <<'EOF'; then
import json, re, sys

name, tj, mt, pt = sys.argv[1:]
d = json.load(open(tj))
errs = []


def need(cond, what):
    if not cond:
        errs.append(what)


need(d.get("schema") == "p2pkit-topo" and d.get("schema_version") == 1, "schema and version")
need(d["source"]["format"] in ("p2pkit", "hwloc-xml", "nccl-xml") and d["source"]["name"] == name,
     f"source {d['source']}")
for k in ("hostname", "driver", "nvml_version"):
    need(d[k] is None or isinstance(d[k], str), f"{k} is a string or null")
need(isinstance(d["cuda_driver"], int) and isinstance(d["cuda_runtime"], int), "CUDA versions are ints")
need(isinstance(d["notes"], list) and all(isinstance(x, str) for x in d["notes"]), "notes are strings")
for nn in d["numa_nodes"]:
    need(isinstance(nn["os_index"], int) and isinstance(nn["cpus"], str), f"numa node {nn}")
gpus = d["gpus"]
ng = len(gpus)
need(ng >= 1 and [g["index"] for g in gpus] == list(range(ng)), "GPUs indexed 0..n-1 in order")
for g in gpus:
    need(g["busid"] is None or re.fullmatch(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", g["busid"]),
         f"GPU{g['index']} busid {g['busid']}")
    need(g["compute_capability"] is None or re.fullmatch(r"\d+\.\d+", g["compute_capability"]),
         f"GPU{g['index']} compute capability")
    need(all(isinstance(g["pcie"][k], int) and g["pcie"][k] >= 0
             for k in ("gen", "width", "max_gen", "max_width")), f"GPU{g['index']} pcie")
    nv = g["nvlink"]
    need(isinstance(nv["present"], int) and isinstance(nv["active"], int) and
         (nv["present"] < 0 or nv["active"] <= nv["present"]), f"GPU{g['index']} nvlink counts {nv}")
    need(all(x["peer"] in ("gpu", "switch", "cpu", "unknown") and x["count"] >= 1 for x in nv["groups"]),
         f"GPU{g['index']} nvlink groups")
    need(sum(x["count"] for x in nv["groups"]) <= max(nv["present"], 0) or nv["present"] < 0,
         f"GPU{g['index']}: more links in groups than present")

nics = d["nics"]
nn = len(nics)
need([x["index"] for x in nics] == list(range(nn)), "NICs indexed 0..n-1 in order")
classes = {"PIX", "PXB", "PHB", "NODE", "SYS", "?"}
for x in nics:
    need(x["name"] is None or (isinstance(x["name"], str) and x["name"]), f"NIC{x['index']} name")
    need(isinstance(x["label"], str) and x["label"] == (x["name"] or x["busid"] or x["label"]),
         f"NIC{x['index']} label {x['label']}")
    need(x["busid"] is None or re.fullmatch(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", x["busid"]),
         f"NIC{x['index']} busid {x['busid']}")
    need(x["numa"] is None or isinstance(x["numa"], int), f"NIC{x['index']} numa")
    need(isinstance(x["speed_mbps"], int) and x["nccl_gdr"] in (True, False, None), f"NIC{x['index']} fields")
    need(len(x["gpu_links"]) == ng and set(x["gpu_links"]) <= classes, f"NIC{x['index']} gpu_links")

# -m: the matrix rows "GPUi<TAB>cell...<TAB>CPU affinity<TAB>NUMA affinity",
# GPU cells then NIC cells; NIC rows "NICn<TAB>cell..." with no affinity.
rows, nic_rows = {}, {}
for ln in open(mt):
    f = ln.rstrip("\n").split("\t")
    if re.fullmatch(r"GPU\d+", f[0]) and len(f) >= ng + nn + 1:
        rows[int(f[0][3:])] = [x.strip() for x in f[1:]]
    if re.fullmatch(r"NIC\d+", f[0]):
        nic_rows[int(f[0][3:])] = [x.strip() for x in f[1:]]
need(sorted(rows) == list(range(ng)), "-m has a row per GPU")
need(sorted(nic_rows) == list(range(nn)), "-m has a row per NIC")
for x in nics:
    n = x["index"]
    for g in range(ng):
        if g in rows:
            need(rows[g][ng + n] == x["gpu_links"][g], f"GPU{g}-NIC{n}: -m column says {rows[g][ng + n]}")
        if n in nic_rows:
            need(nic_rows[n][g] == x["gpu_links"][g], f"NIC{n}-GPU{g}: -m row says {nic_rows[n][g]}")
    if n in nic_rows:
        need(len(nic_rows[n]) == ng + nn and nic_rows[n][ng + n] == "X", f"NIC{n} row cells {nic_rows[n]}")
paths, nearest = {}, {}
for ln in open(pt):
    m = re.match(r"\s*GPU(\d+) -> GPU(\d+): ", ln)
    if m:
        paths[(int(m.group(1)), int(m.group(2)))] = ln.strip()
    m = re.match(r"\s*GPU(\d+) -> NIC(\d+) ", ln)
    if m:
        nearest[int(m.group(1))] = ln.strip()
for g in gpus:
    nic = g["nearest_nic"]
    if not nn:
        need(nic is None, f"GPU{g['index']}: a nearest NIC without NICs")
        continue
    best = min(nics, key=lambda x: (["PIX", "PXB", "PHB", "NODE", "SYS", "?"].index(x["gpu_links"][g["index"]]), x["index"]))
    need(nic is not None and nic["index"] == best["index"] and nic["link"] == best["gpu_links"][g["index"]]
         and nic["label"] == best["label"], f"GPU{g['index']} nearest NIC {nic}")
    need(nic is not None and nic["summary"] == nearest.get(g["index"]), f"GPU{g['index']}: nearest NIC "
         "summary differs from --paths")

codes = {"OK", "CNS", "GNS", "TNS", "NS", "U"}
seen = set()
for p in d["pairs"]:
    s, t = p["src"], p["dst"]
    need(s != t and (s, t) not in seen, f"pair {s}->{t} once, not a GPU with itself")
    seen.add((s, t))
    if s in rows and t < ng:
        need(p["link"] == rows[s][t], f"{s}->{t}: link {p['link']} but -m says {rows[s][t]}")
    need(p["summary"] == paths.get((s, t)), f"{s}->{t}: summary differs from --paths")
    need(p["p2p"] in (True, False, None), f"{s}->{t}: p2p")
    need(set(p["nvml_p2p"]) == {"read", "write", "atomics", "nvlink"} and set(p["nvml_p2p"].values()) <= codes,
         f"{s}->{t}: nvml_p2p {p['nvml_p2p']}")
    need(all(isinstance(p["cuda"][k], int) for k in ("can_access_peer", "native_atomics", "performance_rank")),
         f"{s}->{t}: cuda fields")
    need(p["line_gbps"] >= p["expected_gbps"] >= 0, f"{s}->{t}: expected {p['expected_gbps']} above the "
         f"line rate {p['line_gbps']}")
    need((p["nvlinks"] > 0) == p["link"].startswith("NV"), f"{s}->{t}: nvlinks {p['nvlinks']} vs {p['link']}")
need(seen == {(s, t) for s in range(ng) for t in range(ng) if s != t}, "every ordered pair")
for g in gpus:
    r = rows.get(g["index"])
    if r and len(r) >= ng + nn + 2:
        c = ng + nn
        need((g["cpu_affinity"] or "N/A") == r[c], f"GPU{g['index']} CPU affinity {g['cpu_affinity']} vs {r[c]}")
        need((str(g["numa"]) if g["numa"] is not None else "N/A") == r[c + 1],
             f"GPU{g['index']} NUMA {g['numa']} vs {r[c + 1]}")
for e in errs:
    print(f"  {name}: {e}")
sys.exit(1 if errs else 0)
EOF
    echo "ok   topo --json $name"
  else
    echo "FAIL topo --json $name"; fail=1
  fi
  n=$((n + 1))
done
[ "$n" -ge 1 ] || { echo "FAIL no recorded machine with a golden output in $data"; fail=1; }
exit $fail
