#!/usr/bin/env python3
"""The bench/results helpers (scripts/results/*.py) on made-up run folders and
perf documents, and the results.json of sessions 22 - 25 regenerated from
their logs (a results.json is the tool's output, never typed in).

usage: test_results_tools.py [REPO_ROOT]   (unittest; exits non-zero on failure)"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
TOOLS = os.path.join(ROOT, "scripts", "results")

PERF_HEADER = "# p2pkit perf all_reduce: p2pkit 0.1.0, baseline NCCL 2.28.3 (libnccl.so.2)\n"
PERF_ROW = ("    16777216       4194304     float     sum      -1    59.19  283.46  283.46       0"
            "     78.24       0     1.32    58.52  286.71  286.71       0     74.66       0     1.28\n")


PERF_ROW_OOP = ("   268435456      67108864     float    none      -1    709.3  378.45  378.45       0"
                "     735.1       0     1.04\n")
PERF_ROW_ALONE = ("        1024           256     float     sum      -1     4.36    0.23    0.23       0"
                  "     4.18    0.24    0.24       0\n")


def tool(name, *args):
    out = subprocess.run([sys.executable, os.path.join(TOOLS, name), *args], capture_output=True,
                         text=True, check=False)
    if out.returncode != 0:
        raise AssertionError(f"{name} {' '.join(args)}: exit {out.returncode}: {out.stderr}")
    return out.stdout


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


class RunsJson(unittest.TestCase):
    def session(self, top):
        r1 = os.path.join(top, "run1-first-abc1234")
        write(os.path.join(r1, "machine.txt"),
              "2026-11-30T18:22:29Z\ncommit: abc1234\nindex, name, driver_version\n"
              "0, NVIDIA H200, 580.159.04\n1, NVIDIA H200, 580.159.04\n")
        write(os.path.join(r1, "output.txt"),
              "build                  rc=0     37s\n"
              "case.test_allreduce.quick_mp rc=0      6s\n"
              "ranks 4  test_collectives         process_per_gpu      rc=1     30s\n"
              "mc_quick_mp        rc=0      6s   1 ========= ERROR SUMMARY: 0 errors;\n"
              "rc_quick_mp        rc=99     7s\n"
              "87 runs, 0 failed (ranks 3 4 8 on 2 GPU(s))\n")
        write(os.path.join(r1, "rc_quick_mp.txt"),
              "========= RACECHECK SUMMARY: 48 hazards displayed (32 errors, 16 warnings)\n")
        write(os.path.join(r1, "perf", "pg.txt"), PERF_HEADER + PERF_ROW)
        # send/recv has out-of-place columns only; a table without NCCL is not kept
        write(os.path.join(r1, "perf", "sr.txt"), PERF_HEADER + PERF_ROW_OOP)
        write(os.path.join(r1, "perf", "alone.txt"), PERF_HEADER + PERF_ROW_ALONE)
        r10 = os.path.join(top, "run10-later-def5678")
        write(os.path.join(r10, "machine.txt"), "2026-11-30T19:00:00Z\ncommit: def5678\n")
        write(os.path.join(r10, "ctest.txt"),
              "1/6 Test #22: test_copy ........................   Passed    9.22 sec\n")
        r2 = os.path.join(top, "run2-second-0000000")
        write(os.path.join(r2, "cases.txt"), "test_allreduce           count_zero_is_a_no_op rc=0      1s\n")

    def test_every_kind_of_step_and_the_perf_rows(self):
        with tempfile.TemporaryDirectory() as top:
            self.session(top)
            doc = json.loads(tool("runs_json.py", top, "7", "what"))
        self.assertEqual(doc["session"], 7)
        self.assertEqual([r["run"] for r in doc["runs"]],
                         ["run1-first-abc1234", "run2-second-0000000", "run10-later-def5678"])
        r1 = doc["runs"][0]
        self.assertEqual((r1["date"], r1["commit"], r1["driver"]), ("2026-11-30T18:22:29Z", "abc1234", "580.159.04"))
        self.assertEqual(r1["gpus"], ["NVIDIA H200", "NVIDIA H200"])
        by = {(s["kind"], s.get("case") or s.get("step") or s.get("what")): s for s in r1["steps"]}
        self.assertEqual(by[("gpu_test_case", "quick_mp")]["rc"], 0)
        shared = by[("gpu_test_case", "process_per_gpu")]
        self.assertEqual((shared["ranks"], shared["rc"], shared["seconds"]), (4, 1, 30))
        self.assertEqual(by[("compute_sanitizer", "mc_quick_mp")]["summary"], "ERROR SUMMARY: 0 errors")
        race = by[("compute_sanitizer", "rc_quick_mp")]
        self.assertEqual((race["tool"], race["rc"], race["log"]), ("racecheck", 99, "rc_quick_mp.txt"))
        self.assertIn("48 hazards", race["summary"])
        self.assertEqual(by[("shared_ranks", "ranks 3 4 8 on 2 GPU(s)")]["runs"], 87)
        self.assertEqual(len(r1["steps"]), 5)  # the build line is not a step
        row = r1["perf"]["perf/pg.txt"][0]
        self.assertEqual(row["size"], 16 << 20)
        self.assertEqual(row["out_of_place"]["time_us"], 59.19)
        self.assertEqual(row["in_place"]["nccl_time_us"], 74.66)
        self.assertEqual(row["in_place"]["speedup"], 1.28)
        sr = r1["perf"]["perf/sr.txt"]
        self.assertEqual(len(sr), 1)
        self.assertEqual((sr[0]["out_of_place"]["nccl_time_us"], sr[0]["out_of_place"]["speedup"]), (735.1, 1.04))
        self.assertNotIn("in_place", sr[0])
        self.assertNotIn("perf/alone.txt", r1["perf"])
        self.assertEqual(doc["runs"][1]["steps"][0]["case"], "count_zero_is_a_no_op")
        self.assertEqual(doc["runs"][2]["steps"][0], {"kind": "ctest", "test": "test_copy", "result": "Passed",
                                                      "seconds": 9.22, "log": "ctest.txt"})

    def kept_run(self, folder, run_prefix):
        """A session's results.json, checked to be what its logs say again,
        and its run named `run_prefix`, whose 48 collective cases all passed
        on every GPU of its machine (lines a shared-ranks run tags `ranks K`
        are counted apart)."""
        top = os.path.join(ROOT, "bench", "results", folder)
        with open(os.path.join(top, "results.json")) as f:
            kept = json.load(f)
        again = json.loads(tool("runs_json.py", top, str(kept["session"]), kept["what"]))
        self.assertEqual(kept, again)
        run = [r for r in kept["runs"] if r["run"].startswith(run_prefix)][0]
        cases = [s for s in run["steps"] if s["kind"] == "gpu_test_case" and s["ranks"] == len(run["gpus"])]
        self.assertEqual(len(cases), 48)
        self.assertTrue(all(s["rc"] == 0 for s in cases))
        return run

    def test_s22_results_json_is_what_its_logs_say(self):
        self.kept_run("2026-11-30-h200x2-s22", "run4-")

    def test_s23_results_json_is_what_its_logs_say(self):
        # The first 4-GPU machine: the final run (run 4) passed every case
        # of the three collective tests on 4 ranks and the six other GPU
        # tests, and every perf row it holds checked out (#wrong 0).
        final = self.kept_run("2026-11-30-h200x4-s23", "run4-")
        self.assertEqual(len(final["gpus"]), 4)
        ctest = [s for s in final["steps"] if s["kind"] == "ctest"]
        self.assertEqual(len(ctest), 6)
        self.assertTrue(all(s["result"] == "Passed" for s in ctest))
        # every table against NCCL: 19 of run 4's (send/recv and all-to-all
        # with out-of-place columns only), 14 sizes each but the sweep's
        self.assertEqual(len(final["perf"]), 19)
        rows = [r for t in final["perf"].values() for r in t]
        self.assertEqual(len(rows), 239)
        for r in rows:
            for place in ("out_of_place", "in_place"):
                if place in r:
                    self.assertEqual((r[place]["wrong"], r[place]["nccl_wrong"]), (0, 0))

    def test_s24_results_json_is_what_its_logs_say(self):
        # Run 1 passed the 48 collective cases on 2 ranks (broadcast and
        # reduce forced into their rooted two-shot among them) and
        # test_collectives' process-per-GPU suite on 3 and 4 ranks sharing
        # the 2 GPUs; run 2 the 18 forced rooted two-shot checks of
        # test_shared_ranks.sh (run 1's were refused by perf's arguments).
        check = self.kept_run("2026-11-30-h200x2-s24", "run1-")
        shared = [s for s in check["steps"] if s["kind"] == "gpu_test_case" and s["ranks"] > 2]
        self.assertEqual(sorted(s["ranks"] for s in shared), [3, 4])
        with open(os.path.join(ROOT, "bench", "results", "2026-11-30-h200x2-s24", "results.json")) as f:
            runs = json.load(f)["runs"]
        perf = [r for r in runs if r["run"].startswith("run2-")][0]
        self.assertIn({"kind": "shared_ranks", "runs": 18, "failed": 0, "what": "ranks 3 4 8 on 2 GPU(s)",
                       "log": "output.txt"}, perf["steps"])
        for r in (x for t in perf["perf"].values() for x in t):
            for place in ("out_of_place", "in_place"):
                self.assertEqual((r[place]["wrong"], r[place]["nccl_wrong"]), (0, 0))

    def test_s25_results_json_is_what_its_logs_say(self):
        # The one-GPU machine: run 1 passed the GPU tests that one GPU runs
        # (the one-rank cases, perf's one-GPU case, topo against
        # nvidia-smi), 70 perf -p runs of 2 and 4 ranks sharing the GPU, and
        # every collective on one rank against NCCL's with #wrong 0; run 2
        # the collective tests' process-per-GPU suites on 2 and 3 shared
        # ranks and memcheck (0 errors) on the one-rank cases; runs 3 and 4
        # the GPU tests and memcheck again after the review's changes to the
        # tests, run 4 also the kill cases on 2 ranks sharing the GPU.
        top = os.path.join(ROOT, "bench", "results", "2026-12-01-h200x1-s25")
        with open(os.path.join(top, "results.json")) as f:
            kept = json.load(f)
        self.assertEqual(kept, json.loads(tool("runs_json.py", top, "25", kept["what"])))
        one, shared, review, final, doctor, last, probe = kept["runs"]
        self.assertEqual({r["gpus"][0] for r in kept["runs"]}, {"NVIDIA H200"})
        self.assertEqual([len(r["gpus"]) for r in kept["runs"]], [1, 1, 1, 1, 1, 1, 1])
        self.assertEqual((probe["commit"], probe["steps"]), ("cc7f535", []))  # doctor only (summary.md)
        # run 5 (the doctor's host-link probe) holds no step the tool reads;
        # its machine.txt names the commit by a placeholder (summary.md)
        self.assertEqual((doctor["steps"], doctor["commit"]), ([], "DOCTORCOMMIT"))
        for run in (one, review, final, last):  # runs 3, 4 and 6 again after later changes
            ctest = {s["test"]: s["result"] for s in run["steps"] if s["kind"] == "ctest"}
            self.assertEqual(ctest, {t: "Passed" for t in ("test_allreduce", "test_collectives", "test_perf_kernels",
                                                            "test_perf_run", "gpu_test_topo_smi")})
        self.assertIn({"kind": "shared_ranks", "runs": 70, "failed": 0, "what": "ranks 2 4 on 1 GPU(s)",
                       "log": "output.txt"}, one["steps"])
        tables = {t: rows for t, rows in one["perf"].items() if t.startswith("perf_g1_")}
        self.assertEqual(len(tables), 9)  # 7 collectives eager, all-reduce and broadcast under a graph
        for rows in tables.values():
            self.assertEqual(len(rows), 10)  # 8 B .. 1 GiB by 8x
            for r in rows:
                for place in ("out_of_place", "in_place"):
                    if place in r:
                        self.assertEqual((r[place]["wrong"], r[place]["nccl_wrong"]), (0, 0))
        cases = [(s["test"], s["case"], s["ranks"], s["rc"]) for s in shared["steps"] if s["kind"] == "gpu_test_case"]
        self.assertEqual(sorted(cases), sorted([
            ("test_allreduce", "quick_mp", 2, 0), ("test_collectives", "quick_mp", 2, 0),
            ("test_collectives", "process_per_gpu", 2, 0), ("test_allreduce", "quick_mp", 3, 0),
            ("test_collectives", "quick_mp", 3, 0), ("test_allreduce", "process_per_gpu", 3, 0)]))
        for run in (shared, review, final):
            san = [s["summary"] for s in run["steps"] if s["kind"] == "compute_sanitizer"]
            self.assertEqual(san, ["ERROR SUMMARY: 0 errors"] * 2)
        # run 4: five kill cases on 2 ranks sharing the GPU, each survivor timed out cleanly
        kills = [(s["case"], s["ranks"], s["rc"]) for s in final["steps"] if s["kind"] == "gpu_test_case"]
        self.assertEqual(len(kills), 5)
        self.assertTrue(all(c.startswith("kill_") and r == 2 and rc == 0 for c, r, rc in kills))


class PerfSummary(unittest.TestCase):
    def test_slowest_point_small_ratio_and_wrong_results(self):
        def point(size, p, n, wrong=0):
            x = lambda t: {"time_us": t, "busbw_gbps": size / t / 1e3, "wrong": wrong}
            return {"size": size, "out_of_place": {"p2pkit": x(p), "nccl": x(n), "speedup": n / p}}
        doc = {"collective": "all_reduce", "mode": {"processes": 2, "gpus_per_process": 1, "launch": "eager"},
               "passes": [{"results": [point(8, 4.0, 10.0), point(1024, 5.0, 10.0),
                                       point(256 << 20, 800.0, 900.0, wrong=2)]}]}
        with tempfile.TemporaryDirectory() as top:
            path = os.path.join(top, "p2_eager.json")
            write(path, json.dumps(doc))
            out = tool("perf_summary.py", path)
        line = [ln for ln in out.splitlines() if ln.startswith("| all_reduce")][0]
        self.assertIn("256M out_of_place: 1.12x", line)  # the slowest point
        self.assertIn("0.50 (1K: 5.00 vs 10.00 us), median 0.45", line)
        self.assertTrue(line.rstrip().endswith("| 2 |"))  # wrong results counted


if __name__ == "__main__":
    unittest.main(verbosity=1)
