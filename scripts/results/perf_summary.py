#!/usr/bin/env python3
"""Summarise `p2pkit perf --vs-nccl --json-file` documents against the
issues' kinds of goal: the slowest point (never slower than NCCL), the
small-message time ratio (8 B - 64 KiB, eager goal <= 0.5x NCCL's time:
the worst point and the median over every size and placement), and busbw
at the largest sizes (>= 256 MiB).

usage: perf_summary.py FILE.json ...   (prints a Markdown table)"""
import json
import statistics
import sys


def rows(doc):
    for p in doc["passes"]:
        for r in p["results"]:
            for place in ("out_of_place", "in_place"):
                x = r.get(place)
                if x and x.get("nccl") and x["nccl"].get("time_us"):
                    yield r["size"], place, x


def summary(path):
    doc = json.load(open(path))
    pts = list(rows(doc))
    if not pts:
        return None
    slow = min(pts, key=lambda t: t[2]["speedup"])
    small = [t for t in pts if t[0] <= 64 << 10]
    worst_small = max(small, key=time_ratio) if small else None
    median_small = statistics.median(time_ratio(t) for t in small) if small else None
    big = [t for t in pts if t[0] >= 256 << 20]
    wrong = sum(t[2]["p2pkit"]["wrong"] for t in pts)
    return doc, slow, worst_small, median_small, big, wrong


def time_ratio(t):
    """p2pkit's time / NCCL's for a row (size, place, result)."""
    return t[2]["p2pkit"]["time_us"] / t[2]["nccl"]["time_us"]


def fmt_size(n):
    for unit, s in ((1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")):
        if n >= unit and n % unit == 0:
            return f"{n // unit}{s}"
    return str(n)


def main(paths):
    print("| run | mode | slowest point (speedup) | small msgs: worst p2pkit/NCCL time, median | >= 256 MiB: speedup, busbw p2pkit / NCCL | #wrong |")
    print("|---|---|---|---|---|---|")
    for path in paths:
        s = summary(path)
        if not s:
            continue
        doc, slow, ws, med, big, wrong = s
        m = doc.get("mode", {})
        mode = f"{m.get('processes', '?')}p x {m.get('gpus_per_process', '?')}g {m.get('launch', '')}"
        a = f"{fmt_size(slow[0])} {slow[1]}: {slow[2]['speedup']:.2f}x"
        b = (f"{time_ratio(ws):.2f} ({fmt_size(ws[0])}: "
             f"{ws[2]['p2pkit']['time_us']:.2f} vs {ws[2]['nccl']['time_us']:.2f} us), median "
             f"{med:.2f}") if ws else "-"
        c = "; ".join(f"{fmt_size(z)} {'oop' if pl == 'out_of_place' else 'ip'} {x['speedup']:.2f}x "
                      f"{x['p2pkit']['busbw_gbps']:.0f}/{x['nccl']['busbw_gbps']:.0f}"
                      for z, pl, x in big) or "-"
        print(f"| {doc.get('collective', '?')} ({path.split('/')[-1]}) | {mode} | {a} | {b} | {c} | {wrong} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
