#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""bench/baselines/*.json against their schema (bench/baselines/schema.json,
documented in bench/baselines/README.md) and the rules the schema cannot say;
scripts/baseline.py on a small recorded log folder (tests/data/baseline-run/)
against the baseline expected of it, and its refusals.

usage: test_baselines.py [REPO_ROOT]   (unittest; exits non-zero on failure)"""
import copy
import glob
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "baseline.py")
BASELINES = os.path.join(ROOT, "bench", "baselines")
FIXTURE = os.path.join(ROOT, "tests", "data", "baseline-run")
EXPECTED = os.path.join(ROOT, "tests", "data", "baseline-run.expected.json")
MAX_BYTES = 200 * 1000
MARKERS = ("<!-- baseline-table -->", "<!-- /baseline-table -->")

spec = importlib.util.spec_from_file_location("baseline", SCRIPT)
baseline = importlib.util.module_from_spec(spec)
spec.loader.exec_module(baseline)

with open(os.path.join(BASELINES, "schema.json")) as f:
    SCHEMA = json.load(f)

TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None),
         "integer": int, "number": (int, float)}


def is_type(v, t):
    if t in ("integer", "number") and isinstance(v, bool):
        return False
    return isinstance(v, TYPES[t])


def validate(v, s, path="$"):
    """The errors of `v` against `s`: the part of JSON Schema schema.json uses
    ($ref to #/$defs, type, enum, pattern, minimum, exclusiveMinimum,
    minItems, required, properties, additionalProperties, items)."""
    if "$ref" in s:
        s = SCHEMA["$defs"][s["$ref"].rsplit("/", 1)[1]]
    errs = []
    types = s.get("type")
    if types is not None:
        types = types if isinstance(types, list) else [types]
        if not any(is_type(v, t) for t in types):
            return [f"{path}: {v!r} is not {'/'.join(types)}"]
    if "enum" in s and v not in s["enum"]:
        errs.append(f"{path}: {v!r} not one of {s['enum']}")
    if isinstance(v, str) and "pattern" in s and not re.search(s["pattern"], v):
        errs.append(f"{path}: {v!r} does not match {s['pattern']}")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if "minimum" in s and v < s["minimum"]:
            errs.append(f"{path}: {v} < {s['minimum']}")
        if "exclusiveMinimum" in s and v <= s["exclusiveMinimum"]:
            errs.append(f"{path}: {v} <= {s['exclusiveMinimum']}")
    if isinstance(v, list):
        if len(v) < s.get("minItems", 0):
            errs.append(f"{path}: fewer than {s['minItems']} items")
        for i, x in enumerate(v):
            errs += validate(x, s.get("items", {}), f"{path}[{i}]")
    if isinstance(v, dict):
        errs += [f"{path}: no {k!r}" for k in s.get("required", []) if k not in v]
        props, extra = s.get("properties", {}), s.get("additionalProperties", True)
        for k, x in v.items():
            if k in props:
                errs += validate(x, props[k], f"{path}.{k}")
            elif extra is False:
                errs.append(f"{path}: unknown field {k!r}")
            elif isinstance(extra, dict):
                errs += validate(x, extra, f"{path}.{k}")
    return errs


def ratio_ok(r, nccl, p2pkit):
    return abs(r - nccl / p2pkit) <= 0.0005 + 1e-9


def check(doc, name=None):
    """Every error of a baseline: the schema, then what it cannot say."""
    errs = validate(doc, SCHEMA)
    if errs:
        return errs
    if name is not None and doc["machine"] != name:
        errs.append(f"machine {doc['machine']!r} in a file named {name}.json")
    src = doc["sources"]
    if [(s["date"], s["commit"]) for s in src] != sorted((s["date"], s["commit"]) for s in src):
        errs.append("sources are not oldest first")
    for part in ("collectives", "copy", "training"):
        for i, item in enumerate(doc[part]):
            if item["source"] >= len(src):
                errs.append(f"{part}[{i}]: source {item['source']} of {len(src)}")
    if errs:
        return errs
    counts = {}
    for t in doc["collectives"]:
        counts[t["source"]] = counts.get(t["source"], 0) + 1
    head = max(counts, key=lambda i: (counts[i], src[i]["date"]))
    if (doc["commit"], doc["date"]) != (src[head]["commit"], src[head]["date"]):
        errs.append(f"commit/date {doc['commit']} {doc['date']} are not the headline source's")
    kinds = set()
    for i, t in enumerate(doc["collectives"]):
        where = f"collectives[{i}] ({t['collective']} {t['mode']} {t['launch']} {t['transport']})"
        kind = tuple(t[k] for k in ("collective", "mode", "nranks", "launch", "transport", "registered",
                                    "dtype", "op"))
        if kind in kinds:
            errs.append(f"{where}: a second table of its kind")
        kinds.add(kind)
        if t["nranks"] > len(src[t["source"]]["gpus"]):
            errs.append(f"{where}: {t['nranks']} ranks on {len(src[t['source']]['gpus'])} GPUs")
        if t["mode"] == "process_per_gpu" and t["nranks"] < 2:
            errs.append(f"{where}: process per GPU on one rank")
        sizes = [r["size"] for r in t["rows"]]
        if sizes != sorted(set(sizes)):
            errs.append(f"{where}: sizes not ascending: {sizes}")
        for r in t["rows"]:
            for place in ("out_of_place", "in_place"):
                x = r.get(place)
                if x and not ratio_ok(x["ratio"], x["nccl_us"], x["p2pkit_us"]):
                    errs.append(f"{where} size {r['size']} {place}: ratio {x['ratio']} but "
                                f"{x['nccl_us']} / {x['p2pkit_us']} = {x['nccl_us'] / x['p2pkit_us']:.4f}")
    if len({c["p2p"] for c in doc["copy"]}) != len(doc["copy"]):
        errs.append("copy: two entries of one p2p setting")
    for c in doc["copy"]:
        keys = [(r["method"], r["mode"], r["bytes"], r["pair"]) for r in c["results"]]
        if len(set(keys)) != len(keys):
            errs.append(f"copy (p2p {c['p2p']}): a result twice")
    for e in doc["training"]:
        for name_, x in e["per_step_ms"].items():
            if not ratio_ok(x["ratio"], x["nccl_ms"], x["p2pkit_ms"]):
                errs.append(f"training {e['config']!r} {name_}: ratio {x['ratio']}")
    return errs


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, check=False)


def baseline_files():
    return sorted(glob.glob(os.path.join(BASELINES, "*.json")))


# A torch_host_time entry as baseline.py --merge writes one (parser input).
TORCH_ENTRY = {"source": 0, "gpu": "NVIDIA H200", "torch": "2.11.0", "nccl": "2.28.9", "bytes": 8,
               "iters": 200, "repeats": 30, "timing": "host time per call",
               "rows": [{"world_size": 1, "call": "all_reduce", "mode": "synchronized", "p2pkit_us": 9.0,
                         "nccl_us": 18.0, "ratio": 2.0, "p2pkit_p10_p90": [8.5, 9.5],
                         "nccl_p10_p90": [17.0, 19.0]}]}


class Baselines(unittest.TestCase):
    def test_the_three_machines_are_there(self):
        names = [os.path.basename(p) for p in baseline_files()]
        for m in ("h200x1.json", "h200x2.json", "h200x4.json", "schema.json"):
            self.assertIn(m, names)

    def test_every_baseline_meets_the_schema(self):
        for path in baseline_files():
            name = os.path.basename(path)[:-5]
            if name == "schema":
                continue
            with self.subTest(baseline=name):
                self.assertLess(os.path.getsize(path), MAX_BYTES)
                with open(path) as f:
                    text = f.read()
                doc = json.loads(text)
                self.assertEqual(check(doc, name), [])
                # as the script writes it (a hand edit shows)
                self.assertEqual(text, baseline.dump(doc) + "\n")

    def test_a_hand_edited_baseline_is_caught(self):
        with open(os.path.join(BASELINES, "h200x2.json")) as f:
            doc = json.load(f)
        edits = []
        d = copy.deepcopy(doc)
        d["collectives"][0]["rows"][3]["out_of_place"]["ratio"] += 0.01
        edits.append(("ratio", d))
        d = copy.deepcopy(doc)
        d["collectives"][0]["rows"][3]["in_place"]["nccl_us"] *= 1.1
        edits.append(("time", d))
        d = copy.deepcopy(doc)
        rows = d["collectives"][0]["rows"]
        rows[1], rows[2] = rows[2], rows[1]
        edits.append(("order", d))
        d = copy.deepcopy(doc)
        d["collectives"][0]["mode"] = "two_processes"
        edits.append(("mode", d))
        d = copy.deepcopy(doc)
        d["collectives"][1]["collective"] = "allreduce"
        edits.append(("collective", d))
        d = copy.deepcopy(doc)
        d["training"][0]["per_step_ms"]["step"]["ratio"] = 0.984  # the file's p2pkit/nccl
        edits.append(("training ratio", d))
        d = copy.deepcopy(doc)
        del d["collectives"][2]["rows"][0]["out_of_place"]["nccl_us"]
        edits.append(("missing field", d))
        d = copy.deepcopy(doc)
        d["collectives"].append(copy.deepcopy(d["collectives"][0]))
        edits.append(("duplicate table", d))
        for what, d in edits:
            with self.subTest(edit=what):
                self.assertNotEqual(check(d), [])

    # Where the first instance of each $def holding times or ratios sits in a
    # baseline (a new such $def needs its place here).
    INSTANCE = {"times_us": lambda d: d["collectives"][0]["rows"][0]["out_of_place"],
                "copy_row": lambda d: d["copy"][0]["results"][0],
                "times_ms": lambda d: d["training"][0]["per_step_ms"]["step"],
                "torch_row": lambda d: d.setdefault("torch_host_time", [copy.deepcopy(TORCH_ENTRY)])[0]["rows"][0]}

    def test_every_time_rate_and_ratio_is_above_zero_in_the_schema(self):
        # Every number a baseline holds is a time, a rate or a ratio.
        fields = [(d, k) for d, s in SCHEMA["$defs"].items()
                  for k, rule in s.get("properties", {}).items() if rule.get("type") == "number"]
        self.assertEqual(len(fields), 11)  # p2pkit_us nccl_us ratio gbps us p2pkit_ms nccl_ms ratio, torch's 3
        self.assertEqual(sorted({d for d, _ in fields}), sorted(self.INSTANCE))
        for d, k in fields:
            with self.subTest(field=f"{d}.{k}"):
                self.assertEqual(SCHEMA["$defs"][d]["properties"][k].get("exclusiveMinimum"), 0)

    def test_a_time_rate_or_ratio_not_above_zero_is_caught(self):
        with open(os.path.join(BASELINES, "h200x2.json")) as f:
            doc = json.load(f)
        for d, where in self.INSTANCE.items():
            for k, rule in SCHEMA["$defs"][d]["properties"].items():
                if "exclusiveMinimum" not in rule:
                    continue
                for bad in (0, -1.5):
                    with self.subTest(field=f"{d}.{k}", value=bad):
                        e = copy.deepcopy(doc)
                        where(e)[k] = bad
                        errs = check(e)
                        self.assertEqual(len(errs), 1, errs)
                        self.assertRegex(errs[0], rf"\.{k}: {bad} <= 0$")

    def test_readme_tables_are_the_scripts(self):
        with open(os.path.join(BASELINES, "h200x2.json")) as f:
            want = baseline.table(json.load(f))
        for readme in (os.path.join(ROOT, "README.md"), os.path.join(BASELINES, "README.md")):
            with open(readme) as f:
                text = f.read()
            if MARKERS[0] not in text:
                continue  # no table there (yet)
            with self.subTest(readme=os.path.relpath(readme, ROOT)):
                got = text.split(MARKERS[0], 1)[1].split(MARKERS[1], 1)[0]
                self.assertEqual(got.strip(), want.strip())

    def test_readme_documents_every_field(self):
        with open(os.path.join(BASELINES, "README.md")) as f:
            text = f.read()
        self.assertLessEqual(len(text.splitlines()), 80)
        names = set()

        def walk(s):
            for k, v in s.get("properties", {}).items():
                names.add(k)
                walk(v)
        walk(SCHEMA)
        for d in SCHEMA["$defs"].values():
            walk(d)
        for n in sorted(names):
            self.assertTrue(re.search(f"`{re.escape(n)}(\\[\\])?`", text), f"README.md does not document `{n}`")


class Script(unittest.TestCase):
    def fixture(self, top):
        dst = os.path.join(top, "baseline-run")
        shutil.copytree(FIXTURE, dst)
        return dst

    def test_the_fixture_gives_the_expected_baseline(self):
        out = run("--machine", "h200x2", FIXTURE)
        self.assertEqual(out.returncode, 0, out.stderr)
        with open(EXPECTED) as f:
            self.assertEqual(out.stdout, f.read())
        self.assertEqual(check(json.loads(out.stdout), "h200x2"), [])
        # the grid-capped table and the one-size repeat are left out, and say so
        self.assertIn("baseline-run/capped/cap16.json: tuning variables NCCL_MAX_CTAS=16 P2PKIT_MAX_BLOCKS=16",
                      out.stderr)
        self.assertIn("baseline-run/again/ar_p2_1m.json: superseded by baseline-run/perf/p2_eager.json",
                      out.stderr)

    def test_a_file_takes_the_machine_txt_of_its_own_folder(self):
        files = [os.path.join(FIXTURE, p) for p in ("perf/p2_eager.json", "mlp.txt")]
        out = run("--machine", "h200x2", *files)
        # perf/'s machine.txt (perf.sh's) names no commit
        self.assertEqual(out.returncode, 2)
        self.assertIn("perf/p2_eager.json: no machine.txt with a `commit:` line", out.stderr)

    def test_a_file_named_twice_counts_once(self):
        out = run("--machine", "h200x2", os.path.join(FIXTURE, "bench", "bench.json"), FIXTURE)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertNotIn("bench.json: superseded", out.stderr)
        with open(EXPECTED) as f:
            self.assertEqual(out.stdout, f.read())

    def test_table(self):
        out = run("--table", EXPECTED)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertTrue(lines[0].startswith("**2× NVIDIA H200** (`h200x2`), recorded 2026-11-30, commit f451e84"))
        self.assertIn("| size | process per GPU: p2pkit µs | NCCL µs | ratio |", lines)
        self.assertEqual([ln for ln in lines if ln.startswith("| ") and ln[2].isdigit()],
                         ["| 8 B | 4.22 | 9.28 | 2.20 |", "| 1 MiB | 7.36 | 14.03 | 1.91 |",
                          "| 1 GiB | 2910.7 | 3295.0 | 1.13 |"])
        out = run("--table", EXPECTED, "--sizes", "1M")
        self.assertEqual(out.stdout.splitlines()[-1], "| 1 MiB | 7.36 | 14.03 | 1.91 |")

    def refused(self, out, words):
        self.assertEqual(out.returncode, 2, out.stdout)
        self.assertEqual(len(out.stderr.strip().splitlines()), 1, out.stderr)
        self.assertIn(words, out.stderr)
        self.assertEqual(out.stdout, "")

    def edit_json(self, path, fn):
        with open(path) as f:
            doc = json.load(f)
        fn(doc)
        with open(path, "w") as f:
            json.dump(doc, f)

    def test_refuses_a_wrong_result(self):
        def wrong(doc):
            doc["passes"][0]["results"][1]["in_place"]["p2pkit"]["wrong"] = 3
        with tempfile.TemporaryDirectory() as top:
            d = self.fixture(top)
            self.edit_json(os.path.join(d, "perf", "p2_eager.json"), wrong)
            self.refused(run("--machine", "h200x2", d), "all_reduce table has 3 wrong results")
        # NCCL's too, and in a table that would be left out
        def nccl_wrong(doc):
            doc["passes"][0]["results"][0]["out_of_place"]["nccl"]["wrong"] = 1
        with tempfile.TemporaryDirectory() as top:
            d = self.fixture(top)
            self.edit_json(os.path.join(d, "capped", "cap16.json"), nccl_wrong)
            self.refused(run("--machine", "h200x2", d), "has 1 wrong results")

    def refused_edit(self, rel, fn, words):
        """The fixture with `rel` edited by `fn` is refused, naming `words`."""
        with tempfile.TemporaryDirectory() as top:
            d = self.fixture(top)
            self.edit_json(os.path.join(d, rel), fn)
            self.refused(run("--machine", "h200x2", d), words)

    def test_refuses_an_unchecked_table(self):
        def c0(doc):  # what perf -c 0 writes
            doc["settings"]["check"] = False
            for r in doc["passes"][0]["results"]:
                for place in ("out_of_place", "in_place"):
                    for lib in ("p2pkit", "nccl"):
                        r[place][lib]["wrong"] = None
        self.refused_edit("perf/p2_eager.json", c0, "perf/p2_eager.json: all_reduce table whose "
                          "results were not checked (perf -c 0); record it with -c 1")
        # in a table that would be left out too
        self.refused_edit("capped/cap16.json", c0, "capped/cap16.json: all_reduce table whose "
                          "results were not checked (perf -c 0)")

        def one_null(doc):
            doc["passes"][0]["results"][2]["in_place"]["nccl"]["wrong"] = None
        self.refused_edit("perf/p2_eager.json", one_null, "not checked (size 1073741824 in_place nccl: no "
                          "count of wrong results)")

    def test_refuses_a_forced_algorithm_or_protocol(self):
        def algo(doc):
            doc["passes"][0]["algo"] = "oneshot"
        self.refused_edit("perf/p2_eager.json", algo, "perf/p2_eager.json: all_reduce table with a "
                          "forced algorithm or protocol (--algo oneshot)")

        def sweep(doc):
            doc["passes"] = [dict(doc["passes"][0], algo=a) for a in ("oneshot/ll", "twoshot/simple")]
        self.refused_edit("perf/p2_eager.json", sweep, "(--sweep-algos oneshot/ll,twoshot/simple)")
        for var, value in (("P2PKIT_PROTO", "ll"), ("P2PKIT_ALGO", "twoshot"), ("NCCL_ALGO", "Ring"),
                           ("NCCL_PROTO", "Simple"), ("P2PKIT_ALGO_TABLE", "/tmp/t.txt")):
            def env(doc):
                doc["env"][var] = value
            with self.subTest(var=var):
                self.refused_edit("perf/g2_sendrecv.json", env, f"sendrecv table with a forced "
                                  f"algorithm or protocol ({var}={value})")

    def test_refuses_a_time_rate_or_ratio_not_above_zero(self):
        for field, value, words in (("time_us", 0, "a time that is not positive (0, "),
                                    ("time_us", -3.5, "a time that is not positive (-3.5, "),
                                    ("time_us", float("nan"), "a time that is not positive (nan, ")):
            def perf(doc):
                doc["passes"][0]["results"][1]["out_of_place"]["p2pkit"][field] = value
            with self.subTest(perf=value):
                self.refused_edit("perf/p2_eager.json", perf, "perf/p2_eager.json size 1048576: " + words)

        def tiny(doc):  # NCCL 10^6 times faster: the ratio rounds to 0.000
            x = doc["passes"][0]["results"][1]["out_of_place"]
            x["nccl"]["time_us"] = x["p2pkit"]["time_us"] / 1e6
        self.refused_edit("perf/p2_eager.json", tiny, "size 1048576: a ratio (to 3 decimals) that is not "
                          "positive (0.0)")
        for field in ("median_gbps", "median_us"):
            def bench(doc):
                doc["results"][0][field] = 0
            with self.subTest(bench=field):
                self.refused_edit("bench/bench.json", bench, "bench/bench.json: p2p-ce oneway 0->1: a "
                                  "rate or time that is not positive")
        with tempfile.TemporaryDirectory() as top:
            d = self.fixture(top)
            path = os.path.join(d, "mlp.txt")
            with open(path) as f:
                text = f.read()
            with open(path, "w") as f:
                f.write(text.replace("step                          2.121", "step                          0.000"))
            self.refused(run("--machine", "h200x2", d), "mlp.txt step: a time that is not positive")

    def test_refuses_a_copy_that_did_not_verify(self):
        def bad(doc):
            doc["results"][0]["mismatches"] = 12
        with tempfile.TemporaryDirectory() as top:
            d = self.fixture(top)
            self.edit_json(os.path.join(d, "bench", "bench.json"), bad)
            self.refused(run("--machine", "h200x2", d), "did not verify (12 mismatches)")

    def test_refuses_an_empty_folder_and_one_with_nothing_recognisable(self):
        with tempfile.TemporaryDirectory() as top:
            self.refused(run("--machine", "h200x2", top), "nothing recognisable")
            shutil.copy(os.path.join(FIXTURE, "machine.txt"), top)
            shutil.copy(os.path.join(FIXTURE, "console.txt"), top)
            with open(os.path.join(top, "other.json"), "w") as f:
                f.write('{"tool": "p2pkit doctor"}\n')
            self.refused(run("--machine", "h200x2", top), "nothing recognisable")
            self.refused(run("--machine", "h200x2", FIXTURE, top), "nothing recognisable")
            self.refused(run("--machine", "h200x2", os.path.join(top, "absent")), "no such file or folder")

    def test_refuses_a_file_without_its_commit(self):
        with tempfile.TemporaryDirectory() as top:
            d = self.fixture(top)
            os.remove(os.path.join(d, "machine.txt"))
            self.refused(run("--machine", "h200x2", d), "no machine.txt with a `commit:` line")


if __name__ == "__main__":
    unittest.main(verbosity=1)
