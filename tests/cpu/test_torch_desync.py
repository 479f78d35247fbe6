#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""python/tests/torch_desync_case.py (issue 48's desync jobs through
torch.distributed) without a GPU:
  - its verdict check (--check) on the recorded jobs of tests/data/trace
    through the real `p2pkit trace`: each job passes as its own mode and
    fails, naming the line it got and the one it wanted, as any other;
  - its command line: each bad argument refused with one line naming it,
    exit 2;
  - what it asks of each rank: a whole report of its own, and on p2pkit the
    trigger the mode implies (the signal for the hang; the library's error,
    the abort or the watchdog's finding otherwise), the exits;
  - where torch (with gloo) imports, whole jobs on the CPU through gloo
    (skip, die, hang, idle): three processes, the fault, the dumps, the verdict.
    CTest's python3 has no torch here: run this file with a Python that
    has it to include them (they skip, saying so, without).
The GPU jobs run in scripts/device/desync.sh.

usage: test_torch_desync.py REPO_ROOT P2PKIT_CLI"""
import io
import os
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

ROOT = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else None
SCRIPT = os.path.join(ROOT, "python", "tests", "torch_desync_case.py")
TRACE = os.path.join(ROOT, "tests", "data", "trace")
sys.path.insert(0, os.path.dirname(SCRIPT))
import torch_desync_case as case  # noqa: E402

# The recorded jobs: (folder, mode, backend, the call that went wrong, the call before it)
RECORDED = [("skip", "skip", "p2pkit", 6, "broadcast"), ("count", "count", "p2pkit", 6, "broadcast"),
            ("die", "die", "p2pkit", 6, "broadcast"), ("hang", "hang", "p2pkit", 6, "broadcast"),
            ("fr_skip", "skip", "gloo", 3, "broadcast"), ("fr_count", "count", "gloo", 3, "broadcast"),
            ("fr_die", "die", "gloo", 3, "broadcast"), ("fr_hang", "hang", "gloo", 3, "broadcast")]


def run(*args):
    return subprocess.run([sys.executable, SCRIPT] + list(args), capture_output=True, text=True,
                          timeout=300)


@unittest.skipUnless(CLI and os.path.isfile(CLI), "needs the p2pkit CLI's path (second argument)")
class Verdicts(unittest.TestCase):
    def check(self, folder, mode, backend, seq, before):
        return run("--check", os.path.join(TRACE, folder), mode, "--backend", backend, "--seq", str(seq),
                   "--before", before, "--cli", CLI)

    def test_each_recorded_job_passes_as_its_mode(self):
        for folder, mode, backend, seq, before in RECORDED:
            with self.subTest(folder=folder):
                r = self.check(folder, mode, backend, seq, before)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertIn("\nverdict: rank ", r.stdout)
                self.assertTrue(r.stdout.rstrip().endswith(f"PASS: {mode} ({backend}) in "
                                                           f"{os.path.join(TRACE, folder)}"))

    def test_each_recorded_job_fails_as_another_mode(self):
        for folder, mode, backend, seq, before in RECORDED:
            source = "p2pkit" if backend == "p2pkit" else "torch"
            for other in case.MODES:
                if case.wanted(other, source, seq, before) == case.wanted(mode, source, seq, before):
                    continue  # itself, or on the flight recorder idle and hang (the same words)
                with self.subTest(folder=folder, mode=other):
                    r = self.check(folder, other, backend, seq, before)
                    self.assertEqual(r.returncode, 1, r.stdout)
                    got = r.stdout.splitlines()[0]  # `p2pkit trace`'s own first line
                    self.assertIn(f"FAIL: {other}: `p2pkit trace {os.path.join(TRACE, folder)}` exited 0 "
                                  f"with the verdict \"{got}\", not \"", r.stdout)
                    self.assertNotIn("PASS", r.stdout)

    def test_the_wrong_call_number_or_call_before_fails(self):
        r = self.check("hang", "hang", "p2pkit", 5, "broadcast")
        self.assertEqual(r.returncode, 1)
        r = self.check("hang", "hang", "p2pkit", 6, "all_reduce")
        self.assertEqual(r.returncode, 1)
        self.assertIn("not \"rank 1 never arrived at seq 6 (all_reduce); its last call was seq 5 "
                      "(all_reduce, launched)\"", r.stdout)
        r = self.check("skip", "skip", "gloo", 6, "broadcast")  # p2pkit's reports judged as torch's: same words
        self.assertEqual(r.returncode, 0)
        r = self.check("die", "die", "gloo", 6, "broadcast")  # but a dead rank reads otherwise
        self.assertEqual(r.returncode, 1)

    def test_a_rank_that_never_reached_call_6_and_left_no_report(self):
        # idle: the hang's reports without rank 1's (no call of its own failed)
        with tempfile.TemporaryDirectory() as d:
            for name in os.listdir(os.path.join(TRACE, "hang")):
                if "-r1-" not in name:
                    with open(os.path.join(TRACE, "hang", name)) as f, open(os.path.join(d, name), "w") as g:
                        g.write(f.read())
            r = run("--check", d, "idle", "--seq", "6", "--cli", CLI)
            self.assertEqual(r.returncode, 0, r.stdout)
            self.assertIn("verdict: rank 1 left no dump (gone, or hung where it could not dump: "
                          "P2PKIT_TRACE_SIGNAL lets a signal dump it); the others' last call was seq 6 "
                          "(all_reduce)", r.stdout)
            self.assertEqual(run("--check", d, "hang", "--seq", "6", "--cli", CLI).returncode, 1)

    def test_a_folder_without_reports_fails(self):
        with tempfile.TemporaryDirectory() as d:
            r = run("--check", d, "skip", "--cli", CLI)
        self.assertEqual(r.returncode, 1)
        self.assertIn("exited 2 with the verdict \"\"", r.stdout)


class Wanted(unittest.TestCase):
    def match(self, line, *a, **kw):
        import re
        pattern, reads = case.wanted(*a, **kw)
        return re.fullmatch(pattern, line) is not None, reads

    def test_a_dead_ranks_pid_is_checked_when_known(self):
        line = ("rank 2's process is gone (pid 40213, gone when rank 0 dumped) and left no dump; "
                "the others' last call was seq 6 (all_reduce)")
        self.assertEqual(self.match(line, "die", "p2pkit", pid=40213)[0], True)
        self.assertEqual(self.match(line, "die", "p2pkit", pid=40214)[0], False)
        self.assertEqual(self.match(line, "die", "p2pkit")[0], True)
        self.assertEqual(self.match(line.replace("rank 0 dumped", "rank 2 dumped"), "die", "p2pkit")[0], False)
        self.assertEqual(self.match(line, "die", "p2pkit", seq=7)[0], False)

    def test_an_idle_rank_is_named_running_while_the_job_is_judged(self):
        runs = ("rank 1 left no dump; its process (pid 4242) still runs: it hangs where it cannot dump "
                "(P2PKIT_TRACE_SIGNAL lets a signal dump it); the others' last call was seq 6 (all_reduce)")
        self.assertEqual(self.match(runs, "idle", "p2pkit", pid=4242), (True, runs))
        self.assertFalse(self.match(runs, "idle", "p2pkit", pid=4243)[0])
        ended = "rank 1 left no dump; its process (pid 4242) is not running now; the others' last call " \
                "was seq 6 (all_reduce)"
        self.assertFalse(self.match(ended, "idle", "p2pkit", pid=4242)[0])  # the live job's: it still runs
        self.assertTrue(self.match(ended, "idle", "p2pkit")[0])  # a recorded one's: either
        self.assertTrue(self.match(runs, "idle", "p2pkit")[0])
        self.assertFalse(self.match(runs.replace("rank 1", "rank 2"), "idle", "p2pkit")[0])

    def test_the_states_each_source_may_give(self):
        line = "rank 1 never arrived at seq 6 (all_reduce); its last call was seq 5 (broadcast, {})"
        self.assertTrue(self.match(line.format("launched"), "hang", "p2pkit")[0])
        self.assertFalse(self.match(line.format("queued"), "hang", "p2pkit")[0])
        for state in ("scheduled", "started", "completed"):
            self.assertTrue(self.match(line.format(state), "hang", "torch")[0])
        self.assertFalse(self.match(line.format("launched"), "hang", "torch")[0])

    def test_how_a_wanted_line_reads(self):
        self.assertEqual(case.wanted("count", "p2pkit")[1],
                         "rank 1 passed count 1000 where ranks 0,2 passed 1024 at seq 6 (all_reduce)")
        self.assertEqual(case.wanted("die", "p2pkit")[1],
                         "rank 2's process is gone (pid N, gone when rank 0|1 dumped) and left no dump; "
                         "the others' last call was seq 6 (all_reduce)")


class CommandLine(unittest.TestCase):
    BAD = [
        (["wobble"], "mode 'wobble': one of skip, count, die, hang, idle"),
        (["skip", "--backend", "mpi"], "--backend 'mpi': one of p2pkit, nccl, gloo"),
        (["skip", "--timeout", "0"], "--timeout 0: from 1 to 3600 seconds"),
        (["skip", "--timeout", "soon"], "argument --timeout: invalid float value: 'soon'"),
        (["die", "--handling", "4"], "--handling 4: 0 to 3, with --backend p2pkit"),
        (["die", "--handling", "0", "--backend", "nccl"], "--handling 0: 0 to 3, with --backend p2pkit"),
        (["skip", "--limit", "5"], "--limit 5: from 10 to 3600 seconds"),
        (["count", "--backend", "gloo"], "count on gloo: gloo ends rank 1's process at the size mismatch"),
        (["skip", "--check", "/nonexistent/p2pkit-desync"], "--check '/nonexistent/p2pkit-desync': not a "
                                                             "directory"),
        (["skip", "--seq", "1", "--check", "."], "--seq 1: 2 or more"),
        (["hang", "--before", "x;rm", "--check", "."], "--before 'x;rm': a collective's name"),
        (["skip", "--cli", "/nonexistent/p2pkit"], "--cli '/nonexistent/p2pkit': no such command"),
    ]

    def test_each_bad_argument_is_named_in_one_line(self):
        for args, words in self.BAD:
            with self.subTest(args=args):
                r = run(*args)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                last = r.stderr.strip().splitlines()[-1]
                self.assertTrue(last.startswith("torch_desync_case.py: error: "), last)
                self.assertIn(words, last)
                self.assertNotIn("Traceback", r.stderr)

    def test_the_defaults(self):
        cli = CLI or sys.executable  # any file: the check is only that it exists
        a = case.parse(["hang", "--cli", cli])
        self.assertEqual((a.backend, a.timeout, a.handling, a.limit), ("p2pkit", 120.0, None, 120.0))
        self.assertEqual(case.parse(["die", "--cli", cli]).timeout, 5.0)


class Ranks(unittest.TestCase):
    ABORT = {"file": "r.txt", "reason": "p2pkit_comm_abort"}
    ERROR = {"file": "r.txt", "reason": "error: rank 0 (GPU 0): rank 2 did not take part in a collective"}
    WATCHDOG = {"file": "r.txt", "reason": "all_reduce (call 6) has not finished after 5012 ms, past the "
                                           "group's timeout of 5000 ms"}
    SIGNAL = {"file": "r.txt", "reason": "signal SIGUSR2"}

    def test_the_triggers_each_mode_allows(self):
        f = case.rank_faults
        self.assertEqual(f("die", "p2pkit", None, {0, 1}, [0, 0, 0], {0: self.ABORT, 1: self.WATCHDOG}), [])
        self.assertEqual(f("skip", "p2pkit", None, {0, 1, 2}, [0, 0, 0],
                           {0: self.ERROR, 1: self.ERROR, 2: self.ABORT}), [])
        self.assertEqual(f("hang", "p2pkit", None, {0, 1, 2}, [-9, -9, -9], {r: self.SIGNAL for r in range(3)}), [])
        self.assertEqual(f("die", "p2pkit", None, {0, 1}, [0, 0, 0], {0: self.ABORT, 1: self.SIGNAL}),
                         ["rank 1's report says \"signal SIGUSR2\": not the library's error, the abort or the "
                          "watchdog's finding"])
        self.assertEqual(f("hang", "p2pkit", None, {0, 1, 2}, [-9, -9, -9],
                           {0: self.SIGNAL, 1: self.SIGNAL, 2: self.ERROR}),
                         [f"rank 2's report says \"{self.ERROR['reason']}\", not the signal's"])

    def test_a_missing_report_and_a_wrong_exit(self):
        f = case.rank_faults
        self.assertEqual(f("die", "p2pkit", None, {0, 1}, [0, 1, 0], {0: self.ABORT, 1: self.ABORT}),
                         ["rank 1 exited 1, not 0"])
        self.assertEqual(f("die", "p2pkit", 3, {0, 1}, [0, 1, 0], {0: self.ABORT, 1: self.ABORT}), [])
        self.assertEqual(f("count", "nccl", None, {0, 1, 2}, [-9, -6, -9], {0: {}, 2: {}}),
                         ["rank 1 left no report"])

    def test_own_report_is_this_processs_whole_one(self):
        with tempfile.TemporaryDirectory() as d:
            mine = os.path.join(d, f"p2pkit-trace-5f3a9c01d2e4b7aa-r1-p{os.getpid()}-1.txt")
            other = os.path.join(d, f"p2pkit-trace-5f3a9c01d2e4b7aa-r1-p{os.getpid() + 1}-1.txt")
            with open(other, "w") as f:
                f.write("p2pkit-trace 1\nend 0\n")
            with open(mine, "w") as f:
                f.write("p2pkit-trace 1\ncomm 5f3a9c01d2e4b7aa\n")  # cut: no end line yet
            self.assertIsNone(case.own_report(d, 1))
            with open(mine, "a") as f:
                f.write("end 0\n")
            self.assertEqual(case.own_report(d, 1), mine)
            self.assertIsNone(case.own_report(d, 0))


def gloo_missing():
    try:
        import torch.distributed as dist
    except ImportError:
        return "torch is not installed for this Python: the gloo jobs run where it is"
    return None if dist.is_gloo_available() else "this torch has no gloo"


@unittest.skipUnless(CLI and os.path.isfile(CLI), "needs the p2pkit CLI's path (second argument)")
class GlooJobs(unittest.TestCase):
    def setUp(self):
        why = gloo_missing()
        if why:
            self.skipTest(why)

    def test_skip_die_hang_and_idle_on_the_cpu(self):
        for mode in ("skip", "die", "hang", "idle"):
            with self.subTest(mode=mode), tempfile.TemporaryDirectory() as keep:
                r = run(mode, "--backend", "gloo", "--cli", CLI, "--limit", "90", "--keep", keep)
                self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-2000:])
                self.assertTrue(r.stdout.rstrip().splitlines()[-1].startswith(f"PASS: {mode} on gloo"))
                want = 2 if mode == "die" else 3
                self.assertEqual(sorted(os.listdir(keep)),
                                 [f"{case.FR_PREFIX}{r}" for r in range(want)])  # kept for the record
                with redirect_stdout(io.StringIO()):
                    self.assertTrue(case.judge(CLI, keep, mode, "torch"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
