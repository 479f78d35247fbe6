#!/usr/bin/env python3
"""Turn `ddp_mlp --backend both` output (and the device's machine.txt) into
the JSON that bench/results keeps next to the raw output.

usage: ddp_mlp_json.py MLP_OUTPUT MACHINE_TXT COMMIT > results.json
Every number comes from the files; nothing is typed in."""
import json
import re
import sys


def machine(path):
    lines = open(path).read().splitlines()
    out = {"date": lines[0].strip(), "gpus": [], "driver": None}
    for ln in lines:
        m = re.match(r"\s*(\d+), (NVIDIA [^,]+), ([0-9A-Fa-f:.]+), ([0-9.]+), ", ln)
        if m:
            out["gpus"].append({"index": int(m.group(1)), "name": m.group(2), "pci": m.group(3)})
            out["driver"] = m.group(4)
    return out


def mlp(path):
    text = open(path).read()
    res = {"config": text.splitlines()[0].strip(), "per_step_ms": {}}
    m = re.search(r"time per step, ms \(([^)]*)\)", text)
    res["timing"] = m.group(1) if m else None
    for key in ("step", "compute (fwd+bwd)", "communication", "exposed communication",
                "all-reduce alone"):
        m = re.search(r"^" + re.escape(key) + r"\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s*$", text, re.M)
        if m:
            res["per_step_ms"][key] = {"p2pkit": float(m.group(1)), "nccl": float(m.group(2)),
                                      "p2pkit_over_nccl": float(m.group(3))}
    res["replicas_bit_identical"] = "replicas bit-identical at every check" in text
    m = re.search(r"loss within ([0-9.e+-]+) of the single-GPU reference \(worst ([0-9.e+-]+)\)", text)
    if m:
        res["loss_tolerance"], res["loss_worst_rel_diff"] = float(m.group(1)), float(m.group(2))
    return res


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: ddp_mlp_json.py MLP_OUTPUT MACHINE_TXT COMMIT")
    doc = {"tool": "examples/ddp_mlp --backend both", "commit": sys.argv[3],
           "machine": machine(sys.argv[2]), "result": mlp(sys.argv[1]),
           "anchor": "NCCL (libnccl.so.2, loaded at run time) with the same buckets, same run"}
    json.dump(doc, sys.stdout, indent=2)
    print()
