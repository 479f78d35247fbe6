#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""A machine's baseline (bench/baselines/<machine>.json) from a device run's
logs, and its headline table in Markdown. Schema: bench/baselines/README.md.

usage: baseline.py --machine NAME PATH [PATH ...] > bench/baselines/NAME.json
       baseline.py --table BASELINE.json [--sizes 8,64K,1M,16M,256M,1G]
       baseline.py --merge BASELINE.json PATH [PATH ...] > NEW.json

PATH is a log folder (read recursively) or one file. Recognised:
  - `p2pkit perf --vs-nccl --json-file` documents ("tool": "p2pkit perf"),
  - `p2pkit bench --json` documents ("tool": "p2pkit bench"),
  - `examples/ddp_mlp --backend both` output (first line `ddp_mlp: N ranks,`),
  - scripts/device/torch_host_time.py --json documents ("tool": "p2pkit
    torch_host_time": the backend's host time per call beside
    ProcessGroupNCCL's); --merge adds them to an existing baseline,
  - machine.txt (scripts/device/record.sh writes it: date, `commit: X`,
    nvidia-smi lines): the nearest one naming a commit, in a file's folder
    or above, dates the file; a data file without one is refused.
A perf table is a headline table when NCCL ran beside p2pkit with no tuning
variable set; others are left out, each with a note on stderr. Two tables of
one kind: the one with more sizes is kept (then the newer). Every number
comes from the files. Exit 2, one line on stderr: a table with wrong results,
one whose results were not checked (perf -c 0), one with a forced algorithm
or protocol (--algo, --sweep-algos, P2PKIT_ALGO, P2PKIT_PROTO,
P2PKIT_ALGO_TABLE, NCCL_ALGO, NCCL_PROTO), a time, rate or ratio that is not
positive, a copy that did not verify, a path with nothing recognisable."""
import argparse
import json
import os
import re
import sys

COLLECTIVES = ("all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "sendrecv", "alltoall")
MODES = ("one_process", "process_per_gpu")
LAUNCHES = ("eager", "graph")
TRANSPORTS = ("p2p", "shm")
METHODS = ("memcpy-peer", "p2p-ce", "p2p-sm-push")
BENCH_MODES = ("oneway", "both", "all")
# Environment a headline table may carry: NCCL without NVLink multicast, the
# timeout, the version NCCL reports, and P2P off for both libraries.
PLAIN_ENV = {"NCCL_NVLS_ENABLE", "NCCL_VERSION", "P2PKIT_TIMEOUT", "CUDA_VISIBLE_DEVICES",
             "P2PKIT_P2P_DISABLE", "NCCL_P2P_DISABLE"}
# Settings that force p2pkit's or NCCL's algorithm or protocol: a table made
# under one measures that choice, not the library's.
FORCING_ENV = ("P2PKIT_ALGO", "P2PKIT_PROTO", "P2PKIT_ALGO_TABLE", "NCCL_ALGO", "NCCL_PROTO")
TABLE_SIZES = (8, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30)
DDP_FIRST = re.compile(r"^ddp_mlp: (\d+) ranks?, ")
DDP_ROW = re.compile(r"^(\S.*?)\s{2,}([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s*$")
SMI_LINE = re.compile(r"^\s*(\d+), (NVIDIA [^,]+), (?:[0-9A-Fa-f]+:[0-9A-Fa-f:.]+, )?(\d+\.[0-9.]+)(?:, .*)?\s*$")


class Refused(Exception):
    pass


NOTES = []  # what was left out and why: printed once the baseline is written


def note(msg):
    NOTES.append(f"baseline.py: {msg}")


def positive(where, what, *values):
    """The schema's rule: every time, rate and ratio above 0 (NaN refused)."""
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in values):
        raise Refused(f"{where}: a {what} that is not positive ({', '.join(map(str, values))})")


def ratio(nccl, p2pkit, where):
    positive(where, "time", p2pkit, nccl)
    r = round(nccl / p2pkit, 3)
    positive(where, "ratio (to 3 decimals)", r)
    return r


def order(seq, x):
    return (seq.index(x), "") if x in seq else (len(seq), str(x))


def read_machine(path):
    out = {"commit": None, "date": None, "driver": None, "gpus": []}
    with open(path, errors="replace") as f:
        for ln in f:
            if out["date"] is None and re.match(r"^\d{4}-\d\d-\d\dT[0-9:]+Z\s*$", ln):
                out["date"] = ln.strip()
            elif ln.startswith("commit:"):
                out["commit"] = ln.split(":", 1)[1].strip()
            else:
                m = SMI_LINE.match(ln)
                if m:
                    out["gpus"].append(m.group(2).strip())
                    out["driver"] = m.group(3)
    if not out["date"] or not out["commit"]:
        raise Refused(f"{path}: no date or no `commit:` line")
    return out


def has_commit(path):
    with open(path, errors="replace") as f:
        return any(ln.startswith("commit:") for ln in f)


def machine_txt(path, stop):
    """The nearest machine.txt at or above `path` (up to `stop`) that names a
    commit (perf.sh's own machine.txt in perf/ names none)."""
    d = os.path.dirname(os.path.abspath(path))
    stop = os.path.abspath(stop)
    while True:
        cand = os.path.join(d, "machine.txt")
        if os.path.isfile(cand) and has_commit(cand):
            return cand
        if d == stop or os.path.dirname(d) == d:
            raise Refused(f"{path}: no machine.txt with a `commit:` line in its folder or above")
        d = os.path.dirname(d)


# ---- perf tables ----------------------------------------------------------

def wrong_count(doc):
    n = doc.get("wrong_total") or 0
    for p in doc.get("passes", []):
        for r in p.get("results", []):
            for place in ("out_of_place", "in_place"):
                for lib in ("p2pkit", "nccl"):
                    side = (r.get(place) or {}).get(lib) or {}
                    n += side.get("wrong") or 0
    return n


def unchecked(doc):
    """Why the table's results cannot be trusted to have been checked, or
    None: perf -c 0 records check false and every `wrong` as null."""
    if doc["settings"].get("check") is not True:
        return "perf -c 0"
    for p in doc["passes"]:
        for r in p["results"]:
            for place in ("out_of_place", "in_place"):
                for lib in ("p2pkit", "nccl"):
                    side = (r.get(place) or {}).get(lib)
                    if side and side.get("wrong") is None:
                        return f"size {r['size']} {place} {lib}: no count of wrong results"
    return None


def forced(doc):
    """What forced the table's algorithm or protocol, or None."""
    algos = [p.get("algo") for p in doc["passes"]]
    if len(algos) > 1:
        why = ["--sweep-algos " + ",".join(map(str, algos))]
    else:
        why = [f"--algo {a}" for a in algos if a]
    why += [f"{k}={v}" for k, v in sorted(doc.get("env", {}).items()) if k in FORCING_ENV and v is not None]
    return ", ".join(why) or None


def perf_table(doc, where):
    """(key, table) for a headline table, or (None, why it is left out)."""
    m, s = doc["mode"], doc["settings"]
    if m.get("libraries") != "p2pkit+nccl":
        return None, f"libraries {m.get('libraries')}, not p2pkit beside NCCL"
    passes = doc["passes"]
    tuned = sorted(f"{k}={v}" for k, v in doc.get("env", {}).items() if v is not None and k not in PLAIN_ENV)
    if tuned:
        return None, "tuning variables " + " ".join(tuned)
    nranks = m["nranks"]
    if len({g.get("busid") for g in doc.get("gpus", [])}) < nranks:
        return None, f"{nranks} ranks sharing fewer GPUs"
    if m["processes"] == 1:
        mode = "one_process"
    elif m["gpus_per_process"] == 1 and m["processes"] == nranks:
        mode = "process_per_gpu"
    else:
        return None, f"{m['processes']} processes of {m['gpus_per_process']} GPUs"
    rows = []
    for r in passes[0]["results"]:
        row = {"size": r["size"]}
        if r.get("p2pkit_algo"):
            row["algo"] = r["p2pkit_algo"]
        for place in ("out_of_place", "in_place"):
            x = r.get(place) or {}
            if x.get("p2pkit") and x.get("nccl"):
                p, n = x["p2pkit"]["time_us"], x["nccl"]["time_us"]
                row[place] = {"p2pkit_us": p, "nccl_us": n, "ratio": ratio(n, p, f"{where} size {r['size']}")}
        if "out_of_place" in row:
            rows.append(row)
    if not rows:
        return None, "no row with both libraries' times"
    rows.sort(key=lambda r: r["size"])
    table = {"collective": doc["collective"], "mode": mode, "nranks": nranks, "launch": m["launch"],
             "transport": s["p2pkit_transport"], "registered": bool(s.get("register")),
             "dtype": s["dtype"], "op": s.get("op"), "root": s.get("root", -1), "source": None, "rows": rows}
    key = tuple(table[k] for k in ("collective", "mode", "nranks", "launch", "transport", "registered", "dtype", "op"))
    return key, table


def table_order(t):
    return (order(COLLECTIVES, t["collective"]), order(MODES, t["mode"]), t["nranks"],
            order(LAUNCHES, t["launch"]), order(TRANSPORTS, t["transport"]), t["registered"],
            t["dtype"], t["op"] or "")


# ---- copy bench -----------------------------------------------------------

def bench_entry(doc, where):
    rows = []
    for r in doc.get("results", []):
        if r.get("mismatches") or r.get("verified") is False:
            raise Refused(f"{where}: {r['method']} {r['mode']} {r['src']}->{r['dst']} did not verify "
                          f"({r.get('mismatches')} mismatches)")
        if r.get("status") != "ok":
            note(f"{where}: {r['method']} {r['mode']} {r['src']}->{r['dst']} left out (status {r.get('status')})")
            continue
        positive(f"{where}: {r['method']} {r['mode']} {r['src']}->{r['dst']}", "rate or time",
                 r["median_gbps"], r["median_us"])
        pair = "all" if r["total"] and r["src"] < 0 else \
            f"{r['src']}<->{r['dst']}" if r["total"] else f"{r['src']}->{r['dst']}"
        rows.append((order(METHODS, r["method"]), order(BENCH_MODES, r["mode"]), r["bytes"], r["total"],
                     r["src"], r["dst"],
                     {"method": r["method"], "mode": r["mode"], "bytes": r["bytes"], "pair": pair,
                      "link": r.get("link"), "gbps": r["median_gbps"], "us": r["median_us"]}))
    for extra in ("latency", "sweeps"):
        if doc.get(extra):
            note(f"{where}: its {extra} section is not carried")
    if not rows:
        return None, "no result that ran"
    rows.sort(key=lambda t: t[:6])
    p2p = not doc.get("settings", {}).get("p2p_disable", False)
    return ("p2p" if p2p else "p2p_off"), {"source": None, "p2p": p2p, "results": [t[-1] for t in rows]}


# ---- the data-parallel example ------------------------------------------

def ddp_entry(text, where):
    lines = text.splitlines()
    first = DDP_FIRST.match(lines[0])
    at = next((i for i, ln in enumerate(lines) if ln.startswith("time per step, ms")), None)
    if at is None or at + 1 >= len(lines):
        return None, "no `time per step` table"
    if lines[at + 1].split() != ["p2pkit", "nccl", "p2pkit/nccl"]:
        return None, "not both backends (" + " ".join(lines[at + 1].split()) + ")"
    timing = re.search(r"time per step, ms \((.*)\)\s*$", lines[at])
    per_step = {}
    for ln in lines[at + 2:]:
        m = DDP_ROW.match(ln)
        if not m:
            break
        name = re.sub(r"[^a-z0-9]+", "_", m.group(1).lower()).strip("_")
        p, n = float(m.group(2)), float(m.group(3))
        per_step[name] = {"p2pkit_ms": p, "nccl_ms": n, "ratio": ratio(n, p, f"{where} {name}")}
    if "step" not in per_step:
        return None, "no `step` row"
    config = lines[0][len("ddp_mlp: "):].strip()
    return config, {"source": None, "example": "ddp_mlp", "ranks": int(first.group(1)), "config": config,
                    "timing": timing.group(1) if timing else None, "per_step_ms": per_step}


# ---- the PyTorch backend's host time per call ------------------------------

TORCH_CALLS = ("all_reduce", "all_reduce_async", "all_gather_into_tensor", "reduce_scatter_tensor",
               "broadcast")
TORCH_MODES = ("back_to_back", "synchronized")


def torch_entry(doc, where):
    """(key, entry) of a torch_host_time document; a row whose results were
    wrong refuses the file."""
    rows = []
    for r in doc["rows"]:
        if not r["checked"]:
            raise Refused(f"{where}: {r['call']} {r['mode']} on {r['world_size']} rank(s) had wrong results")
        p, n = r["p2pkit_us"], r["nccl_us"]
        rows.append({"world_size": r["world_size"], "call": r["call"], "mode": r["mode"],
                     "p2pkit_us": p["median"], "nccl_us": n["median"],
                     "ratio": ratio(n["median"], p["median"], f"{where} {r['call']} {r['mode']}"),
                     "p2pkit_p10_p90": [p["p10"], p["p90"]], "nccl_p10_p90": [n["p10"], n["p90"]]})
    if not rows:
        return None, "no rows"
    rows.sort(key=lambda r: (r["world_size"], order(TORCH_CALLS, r["call"]), order(TORCH_MODES, r["mode"])))
    return "torch_host_time", {"source": None, "gpu": doc["gpu"], "torch": doc["torch"],
                               "nccl": doc["nccl"], "bytes": doc["bytes"], "iters": doc["iters"],
                               "repeats": doc["repeats"], "timing": doc["timing"], "rows": rows}


def merge(base_path, args):
    """The baseline at base_path with its torch_host_time section taken from
    the torch_host_time documents under args (their run added to sources)."""
    with open(base_path) as f:
        base = json.load(f)
    picked = None
    for arg in args:
        root, paths = files_of(arg)
        for path in paths:
            got = recognise(path) if path.endswith(".json") else None
            if not got or got[0] != "torch":
                continue
            where = os.path.relpath(path, os.path.dirname(os.path.abspath(root)))
            try:
                key, item = torch_entry(got[1], where)
            except (KeyError, TypeError) as e:
                raise Refused(f"{where}: a torch_host_time document without the fields it should have ({e!r})")
            if key is None:
                raise Refused(f"{where}: {item}")
            if picked and picked[2] >= got[1].get("date", ""):
                note(f"left out {where}: an older recording than {picked[1]}")
                continue
            picked = (item, where, got[1].get("date", ""), machine_txt(path, root))
    if not picked:
        raise Refused("no torch_host_time document in " + " ".join(args))
    item, _, _, mtxt = picked
    info = read_machine(mtxt)
    src = {"commit": info["commit"], "date": info["date"], "driver": info["driver"], "gpus": info["gpus"]}
    if src not in base["sources"]:
        base["sources"].append(src)
    item["source"] = base["sources"].index(src)
    base["torch_host_time"] = [item]
    return base


# ---- reading the folders --------------------------------------------------

def files_of(arg):
    if os.path.isfile(arg):
        return os.path.dirname(os.path.abspath(arg)), [arg]
    if not os.path.isdir(arg):
        raise Refused(f"{arg}: no such file or folder")
    out = []
    for root, dirs, files in os.walk(arg):
        dirs.sort()
        out += [os.path.join(root, f) for f in sorted(files)]
    return arg, out


def recognise(path):
    """('perf'|'bench', doc) / ('ddp', text) / None."""
    if path.endswith(".json"):
        try:
            with open(path) as f:
                doc = json.load(f)
        except (ValueError, UnicodeDecodeError):
            return None
        tool = doc.get("tool") if isinstance(doc, dict) else None
        return {"p2pkit perf": ("perf", doc), "p2pkit bench": ("bench", doc),
                "p2pkit torch_host_time": ("torch", doc)}.get(tool)
    with open(path, "rb") as f:
        head = f.read(200)
    if not DDP_FIRST.match(head.decode("utf-8", "replace")):
        return None
    with open(path, errors="replace") as f:
        return "ddp", f.read()


def build(machine, args):
    found = {"perf": {}, "bench": {}, "ddp": {}, "torch": {}}  # kind -> key -> [(rank, item, where, machine.txt, doc)]
    read = set()
    for arg in args:
        root, paths = files_of(arg)
        seen = 0
        for path in paths:
            if os.path.basename(path) == "machine.txt":
                continue
            real = os.path.realpath(path)
            if real in read:  # named twice (a folder and a file in it)
                seen += 1
                continue
            read.add(real)
            got = recognise(path)
            if not got:
                continue
            seen += 1
            kind, doc = got
            where = os.path.relpath(path, os.path.dirname(os.path.abspath(root)))
            mtxt = machine_txt(path, root)
            try:
                if kind == "perf":
                    wrong = wrong_count(doc)
                    if wrong:
                        raise Refused(f"{where}: {doc.get('collective')} table has {wrong} wrong results")
                    why = unchecked(doc)
                    if why:
                        raise Refused(f"{where}: {doc.get('collective')} table whose results were not "
                                      f"checked ({why}); record it with -c 1")
                    why = forced(doc)
                    if why:
                        raise Refused(f"{where}: {doc.get('collective')} table with a forced algorithm "
                                      f"or protocol ({why}); a baseline holds the library's own choice")
                    key, item = perf_table(doc, where)
                elif kind == "bench":
                    key, item = bench_entry(doc, where)
                elif kind == "torch":
                    key, item = torch_entry(doc, where)
                else:
                    key, item = ddp_entry(doc, where)
            except (KeyError, TypeError, AttributeError, IndexError) as e:
                raise Refused(f"{where}: a {kind} document without the fields it should have ({e!r})")
            if key is None:
                note(f"left out {where}: {item}")
                continue
            size = len(item.get("rows") or item.get("results") or item.get("per_step_ms"))
            date = doc.get("date", "") if isinstance(doc, dict) else read_machine(mtxt)["date"]
            found[kind].setdefault(key, []).append(((size, date, where), item, where, mtxt, doc))
        if not seen:
            raise Refused(f"{arg}: nothing recognisable (no perf or bench JSON, no ddp_mlp output)")

    chosen = {}
    for kind, by_key in found.items():
        chosen[kind] = []
        for key, cands in by_key.items():
            cands.sort(key=lambda c: c[0], reverse=True)
            for c in cands[1:]:
                note(f"left out {c[2]}: superseded by {cands[0][2]} ({cands[0][0][0]} against {c[0][0]} entries)")
            chosen[kind].append(cands[0])
    if not chosen["perf"]:
        raise Refused("no headline perf table against NCCL in " + " ".join(args))

    # Sources: every machine.txt an item was read under, oldest first.
    infos = {m: read_machine(m) for kind in chosen.values() for (_, _, _, m, _) in kind}
    order_m = sorted(infos, key=lambda m: (infos[m]["date"], infos[m]["commit"], m))
    index = {m: i for i, m in enumerate(order_m)}
    for kind in chosen.values():
        for (_, item, _, m, _) in kind:
            item["source"] = index[m]

    # The headline source: the one with most collective tables (then the newest).
    counts = {}
    for (_, _, _, m, _) in chosen["perf"]:
        counts[m] = counts.get(m, 0) + 1
    primary = max(counts, key=lambda m: (counts[m], infos[m]["date"]))
    docs = [d for (_, _, _, m, d) in chosen["perf"] if m == primary]

    def one(field, fmt=lambda v: v):
        vals = {fmt(d.get(field)) for d in docs}
        if len(vals) != 1:
            raise Refused(f"the tables of commit {infos[primary]['commit']} disagree on {field}: {sorted(map(str, vals))}")
        return vals.pop()

    cuda = lambda v: f"{v // 1000}.{v % 1000 // 10}" if isinstance(v, int) else None
    head = infos[primary]
    out = {
        "schema_version": 1,
        "machine": machine,
        "gpus": head["gpus"],
        "driver": one("driver_version"),
        "cuda_driver": one("cuda_driver_version", cuda),
        "cuda_runtime": one("cuda_runtime_version", cuda),
        "nccl": one("nccl_version"),
        "p2pkit": one("p2pkit_version"),
        "commit": head["commit"],
        "date": head["date"],
        "sources": [{"commit": infos[m]["commit"], "date": infos[m]["date"], "driver": infos[m]["driver"],
                     "gpus": infos[m]["gpus"]} for m in order_m],
        "collectives": sorted((c[1] for c in chosen["perf"]), key=table_order),
        "copy": sorted((c[1] for c in chosen["bench"]), key=lambda e: (not e["p2p"], e["source"])),
        "training": sorted((c[1] for c in chosen["ddp"]), key=lambda e: (e["ranks"], e["config"])),
    }
    if chosen["torch"]:
        out["torch_host_time"] = [c[1] for c in chosen["torch"]]
    return out


# ---- output ---------------------------------------------------------------

def dump(obj, indent=0):
    """JSON, one row (a dict with `size` or `pair`) or short value per line."""
    flat = json.dumps(obj)
    if not isinstance(obj, (dict, list)) or not obj or len(flat) + indent <= 100 or \
            (isinstance(obj, dict) and ("size" in obj or "pair" in obj)):
        return flat
    pad = " " * (indent + 2)
    if isinstance(obj, list):
        body = [pad + dump(v, indent + 2) for v in obj]
        return "[\n" + ",\n".join(body) + "\n" + " " * indent + "]"
    body = [pad + json.dumps(k) + ": " + dump(v, indent + 2) for k, v in obj.items()]
    return "{\n" + ",\n".join(body) + "\n" + " " * indent + "}"


def fmt_size(n):
    for unit, s in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= unit and n % unit == 0:
            return f"{n // unit} {s}"
    return f"{n} B"


def parse_size(s):
    m = re.fullmatch(r"(\d+)\s*([KMG]?)(?:i?B)?", s.strip(), re.I)
    if not m:
        raise Refused(f"--sizes: {s!r} is not a size")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2).upper()]


def fmt_us(v):
    return f"{v:.1f}" if v >= 100 else f"{v:.2f}"


def table(doc, sizes=TABLE_SIZES):
    """The headline all-reduce rows (eager, out of place, P2P, unregistered)
    of a baseline as a Markdown table, headed by the machine and the date."""
    picked = []
    for mode in MODES:
        for t in doc["collectives"]:
            if (t["collective"], t["mode"], t["launch"], t["transport"], t["registered"]) == \
                    ("all_reduce", mode, "eager", "p2p", False):
                picked.append(t)
                break
    if not picked:
        raise Refused(f"{doc['machine']}: no eager all-reduce table over P2P")
    srcs = sorted({t["source"] for t in picked})
    when = "; ".join(f"{doc['sources'][i]['date'][:10]}, commit {doc['sources'][i]['commit']}" for i in srcs)
    names = sorted(set(doc["gpus"]))
    gpus = f"{len(doc['gpus'])}× {' + '.join(names)}"
    t0 = picked[0]
    lines = [f"**{gpus}** (`{doc['machine']}`), recorded {when}: driver {doc['driver']}, "
             f"CUDA {doc['cuda_runtime']}, NCCL {doc['nccl']}.",
             f"All-reduce of {t0['dtype']} ({t0['op']}), eager, out of place, over P2P; "
             f"ratio = NCCL time / p2pkit time (above 1: p2pkit is faster).", ""]
    label = {"one_process": "one process", "process_per_gpu": "process per GPU"}
    hdr = ["size"] + [c for t in picked for c in (f"{label[t['mode']]}: p2pkit µs", "NCCL µs", "ratio")]
    lines += ["| " + " | ".join(hdr) + " |", "|" + " ---: |" * len(hdr)]
    for size in sizes:
        cells, any_row = [fmt_size(size)], False
        for t in picked:
            row = next((r["out_of_place"] for r in t["rows"] if r["size"] == size), None)
            any_row |= row is not None
            cells += [fmt_us(row["p2pkit_us"]), fmt_us(row["nccl_us"]), f"{row['ratio']:.2f}"] if row else ["–"] * 3
        if any_row:
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(prog="baseline.py", usage=__doc__.split("\n\n")[1][len("usage: "):],
                                 description="A machine's baseline from a device run's logs, or its table.")
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--machine", help="the machine kind the logs were recorded on (h200x2, ...)")
    what.add_argument("--table", metavar="BASELINE", help="print BASELINE's headline all-reduce table")
    what.add_argument("--merge", metavar="BASELINE",
                      help="BASELINE with the torch_host_time documents under PATHs in it")
    ap.add_argument("--sizes", help="with --table: the sizes to show (default 8,64K,1M,16M,256M,1G)")
    ap.add_argument("paths", nargs="*", metavar="PATH")
    a = ap.parse_args(argv)
    if bool(a.machine or a.merge) != bool(a.paths) or (a.sizes and not a.table):
        ap.error("--machine and --merge take one or more PATHs; --table and --sizes none")
    if a.machine and not re.fullmatch(r"[a-z0-9]+", a.machine):
        ap.error("--machine: lower-case letters and digits (h200x2)")
    try:
        if a.table:
            sizes = [parse_size(s) for s in a.sizes.split(",")] if a.sizes else TABLE_SIZES
            with open(a.table) as f:
                sys.stdout.write(table(json.load(f), sizes))
        elif a.merge:
            sys.stdout.write(dump(merge(a.merge, a.paths)) + "\n")
            for ln in NOTES:
                print(ln, file=sys.stderr)
        else:
            sys.stdout.write(dump(build(a.machine, a.paths)) + "\n")
            for ln in NOTES:
                print(ln, file=sys.stderr)
    except Refused as e:
        print(f"baseline.py: refused: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
