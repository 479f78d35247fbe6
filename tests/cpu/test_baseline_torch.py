#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""scripts/baseline.py --merge: a torch_host_time document (what
scripts/device/torch_host_time.py --json writes) folded into an existing
baseline, its run added to the sources, the result valid against
bench/baselines/schema.json; a document with wrong results refused. The
document here is built by the test (its numbers are inputs to the parser,
not measurements). And torch_host_time.py's refusal of bad arguments,
which needs no torch.

usage: test_baseline_torch.py [REPO_ROOT]"""
import copy
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "baseline.py")
BENCH = os.path.join(ROOT, "scripts", "device", "torch_host_time.py")
BASE = os.path.join(ROOT, "bench", "baselines", "h200x1.json")

spec = importlib.util.spec_from_file_location(
    "test_baselines", os.path.join(ROOT, "tests", "cpu", "test_baselines.py"))
saved, sys.argv = sys.argv, [sys.argv[0], ROOT]
checks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(checks)  # its validate() against schema.json
sys.argv = saved


def row(ws, call, mode, p, n, checked=True):
    return {"world_size": ws, "call": call, "mode": mode, "checked": checked,
            "p2pkit_us": {"median": p, "p10": p - 1, "p90": p + 1, "min": p - 2},
            "nccl_us": {"median": n, "p10": n - 1, "p90": n + 1, "min": n - 2},
            "p2pkit_over_nccl": round(p / n, 3)}


def document(rows):
    return {"tool": "p2pkit torch_host_time", "date": "2027-01-02T03:04:05Z", "torch": "2.11.0",
            "nccl": "2.28.9", "gpu": "NVIDIA H100 80GB HBM3", "p2pkit": 100, "bytes": 8,
            "iters": 200, "repeats": 30, "warmup": 5, "timing": "host time per call", "rows": rows}


MACHINE = "2027-01-02T03:00:00Z\ncommit: abc1234\n0, NVIDIA H100 80GB HBM3, 580.1.2, 81559 MiB\n"


class Merge(unittest.TestCase):
    def run_merge(self, doc):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "machine.txt"), "w") as f:
                f.write(MACHINE)
            os.mkdir(os.path.join(d, "torch"))
            with open(os.path.join(d, "torch", "host_time.json"), "w") as f:
                json.dump(doc, f)
            return subprocess.run([sys.executable, SCRIPT, "--merge", BASE, d], capture_output=True,
                                  text=True)

    def test_folded_in(self):
        rows = [row(2, "broadcast", "synchronized", 30.0, 40.0), row(1, "all_reduce", "back_to_back", 10.0, 20.0),
                row(1, "all_reduce", "synchronized", 12.5, 10.0)]
        got = self.run_merge(document(rows))
        self.assertEqual(got.returncode, 0, got.stderr)
        out = json.loads(got.stdout)
        self.assertEqual(checks.validate(out, checks.SCHEMA), [])
        with open(BASE) as f:
            base = json.load(f)
        self.assertEqual(out["sources"][:-1], base["sources"])
        self.assertEqual(out["sources"][-1], {"commit": "abc1234", "date": "2027-01-02T03:00:00Z",
                                              "driver": "580.1.2", "gpus": ["NVIDIA H100 80GB HBM3"]})
        (entry,) = out["torch_host_time"]
        self.assertEqual(entry["source"], len(out["sources"]) - 1)
        self.assertEqual([(r["world_size"], r["call"], r["mode"]) for r in entry["rows"]],
                         [(1, "all_reduce", "back_to_back"), (1, "all_reduce", "synchronized"),
                          (2, "broadcast", "synchronized")])
        self.assertEqual([r["ratio"] for r in entry["rows"]], [2.0, 0.8, 1.333])  # NCCL / p2pkit
        self.assertEqual(entry["rows"][0]["p2pkit_p10_p90"], [9.0, 11.0])
        del out["torch_host_time"], out["sources"][-1]
        self.assertEqual(out, base)  # nothing else changed

    def test_wrong_results_refused(self):
        got = self.run_merge(document([row(2, "all_reduce", "back_to_back", 10.0, 20.0, checked=False)]))
        self.assertEqual(got.returncode, 2)
        self.assertEqual(got.stderr.strip().count("\n"), 0)
        self.assertIn("all_reduce back_to_back on 2 rank(s) had wrong results", got.stderr)

    def test_nothing_to_merge_refused(self):
        with tempfile.TemporaryDirectory() as d:
            got = subprocess.run([sys.executable, SCRIPT, "--merge", BASE, d], capture_output=True, text=True)
        self.assertEqual(got.returncode, 2)
        self.assertIn("no torch_host_time document", got.stderr)


class BenchArguments(unittest.TestCase):
    def test_refused_in_one_line(self):
        for args, why in ((["--world-sizes", "3"], "a comma list of 1 and 2"),
                          (["--iters", "0"], "must be 1 or more"),
                          (["--iters-2", "201"], "at most 200")):
            got = subprocess.run([sys.executable, BENCH] + args, capture_output=True, text=True)
            self.assertEqual(got.returncode, 2, got.stderr)
            self.assertIn(why, got.stderr.strip().splitlines()[-1])


if __name__ == "__main__":
    unittest.main()
