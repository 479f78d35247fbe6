#!/usr/bin/env python3
"""Collect a session's device runs (bench/results/<session>/runN-*/) into one
JSON document: per run its machine.txt (date, commit, GPUs, driver) and
every step its logs name, each with its exit status and seconds:
  - GPU test cases (try.sh summaries `case.TEST.CASE rc=N Ns` and cases.sh
    lines `TEST CASE rc=N Ns`, with `ranks K` in front for shared ranks; a
    line without it ran on every GPU of the run's machine),
  - compute-sanitizer steps (sanitize.sh lines `NAME rc=N Ns ... SUMMARY`),
  - ctest lines (`N/M Test #K: NAME ... Passed T sec`),
  - test_shared_ranks.sh's last line (`R runs, F failed (...)`),
  - `p2pkit perf --vs-nccl` tables under the run (every row: size, p2pkit
    and NCCL time and speedup, out of place and in place, #wrong).
Every number comes from the files; nothing is typed in.

usage: runs_json.py SESSION_DIR SESSION_NUMBER "WHAT" > SESSION_DIR/results.json"""
import json
import os
import re
import sys

CASE_TRY = re.compile(r"^case\.(\w+)\.(\w+)\s+rc=(\d+)\s+(\d+)s")
CASE_LINE = re.compile(r"^(?:ranks (\d+)\s+)?(test_\w+)\s+(\w+)\s+rc=(\d+)\s+(\d+)s")
SAN_LINE = re.compile(r"^([mrsi]c_\w+)\s+rc=(\d+)\s+(\d+)s\s*(.*)$")
CTEST = re.compile(r"Test +#\d+: (\S+) \.+\s+(\w+)\s+([0-9.]+) sec")
SHARED = re.compile(r"^(\d+) runs, (\d+) failed \((.*)\)")
PERF_ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+(.*)$")
TOOL = {"mc": "memcheck", "rc": "racecheck", "sc": "synccheck", "ic": "initcheck"}


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def machine(path):
    out = {"date": None, "commit": None, "gpus": [], "driver": None}
    if not os.path.exists(path):
        return out
    for ln in read(path).splitlines():
        if re.match(r"^\d{4}-\d\d-\d\dT", ln):
            out["date"] = ln.strip()
        elif ln.startswith("commit:"):
            out["commit"] = ln.split(":", 1)[1].strip()
        else:
            # nvidia-smi --query-gpu=index,name[,pci.bus_id],driver_version[,memory.total]
            m = re.match(r"\s*(\d+), (NVIDIA [^,]+), (?:[0-9A-Fa-f]+:[0-9A-Fa-f:.]+, )?(\d+\.[0-9.]+)(?:, .*)?\s*$", ln)
            if m:
                out["gpus"].append(m.group(2))
                out["driver"] = m.group(3)
    return out


def perf_table(path):
    rows = []
    for ln in read(path).splitlines(True):
        m = PERF_ROW.match(ln)
        if not m:
            continue
        f = m.group(6).split()
        # 7 or 14 fields with NCCL beside; a table without NCCL has 4 or 8
        if len(f) != 7 and len(f) < 14:
            continue
        # time algbw busbw #wrong nccl_time #wrong speedup, out of place, then
        # in place where the collective has it (send/recv and all-to-all
        # tables have out-of-place columns only)
        def side(v):
            return {"time_us": float(v[0]), "busbw": float(v[2]), "wrong": int(v[3]),
                    "nccl_time_us": float(v[4]), "nccl_wrong": int(v[5]), "speedup": float(v[6])}
        row = {"size": int(m.group(1)), "type": m.group(3), "op": m.group(4), "out_of_place": side(f[0:7])}
        if len(f) >= 14:
            row["in_place"] = side(f[7:14])
        rows.append(row)
    return rows


def steps_of(text, where, ranks):
    """The steps a log names; `ranks` for case lines without a `ranks K`
    tag (the collective tests take every GPU of the machine by default)."""
    steps = []
    for ln in text.splitlines():
        m = CASE_TRY.match(ln)
        if m:
            steps.append({"kind": "gpu_test_case", "test": m.group(1), "case": m.group(2), "ranks": ranks,
                          "rc": int(m.group(3)), "seconds": int(m.group(4)), "log": where})
            continue
        m = CASE_LINE.match(ln)
        if m:
            steps.append({"kind": "gpu_test_case", "test": m.group(2), "case": m.group(3),
                          "ranks": int(m.group(1) or ranks), "rc": int(m.group(4)),
                          "seconds": int(m.group(5)), "log": where})
            continue
        m = SAN_LINE.match(ln)
        if m:
            summ = re.findall(r"(?:ERROR SUMMARY: \d+ errors?|RACECHECK SUMMARY: [^;]*)", m.group(4))
            steps.append({"kind": "compute_sanitizer", "tool": TOOL[m.group(1)[:2]], "step": m.group(1),
                          "rc": int(m.group(2)), "seconds": int(m.group(3)),
                          "summary": summ[0] if summ else None, "log": where})
            continue
        m = CTEST.search(ln)
        if m:
            steps.append({"kind": "ctest", "test": m.group(1), "result": m.group(2),
                          "seconds": float(m.group(3)), "log": where})
            continue
        m = SHARED.match(ln)
        if m:
            steps.append({"kind": "shared_ranks", "runs": int(m.group(1)), "failed": int(m.group(2)),
                          "what": m.group(3), "log": where})
    return steps


def run(d):
    info = machine(os.path.join(d, "machine.txt"))
    doc = {"run": os.path.basename(d), **info, "steps": [], "perf": {}}
    seen = set()
    for root, _, files in sorted(os.walk(d)):
        for f in sorted(files):
            p = os.path.join(root, f)
            rel = os.path.relpath(p, d)
            text = read(p)
            if f in ("output.txt", "cases.txt", "try.txt", "ctest.txt", "shared.txt",
                     "shared_ranks.txt"):
                for s in steps_of(text, rel, len(info["gpus"]) or 2):
                    key = json.dumps({k: v for k, v in s.items() if k != "log"}, sort_keys=True)
                    if key not in seen:
                        seen.add(key)
                        doc["steps"].append(s)
            if "--vs-nccl" in text or "baseline NCCL" in text:
                rows = perf_table(p)
                if rows:
                    doc["perf"][rel] = rows
    # A sanitizer step's verdict from its own log (the console keeps one line).
    logs = {f: os.path.join(root, f) for root, _, files in sorted(os.walk(d)) for f in files}
    for s in doc["steps"]:
        p = logs.get(s.get("step", "") + ".txt") if s["kind"] == "compute_sanitizer" else None
        if p:
            found = re.findall(r"(?:ERROR|RACECHECK) SUMMARY: [^\n]*", read(p))
            s["summary"] = "; ".join(sorted(set(found))) or s["summary"]
            s["log"] = os.path.relpath(p, d)
    return doc


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip().splitlines()[-1])
    top, n, what = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    runs = [os.path.join(top, x) for x in sorted(os.listdir(top), key=lambda s: (len(s.split("-")[0]), s))
            if x.startswith("run") and os.path.isdir(os.path.join(top, x))]
    json.dump({"session": n, "what": what, "runs": [run(r) for r in runs]}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
