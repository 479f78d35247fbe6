#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""scripts/device/skips.py, the judge of a GPU run's skips, on recorded CTest
runs (tests/data/ctest/): nogpu.* is `ctest -L gpu` on a machine without the
CUDA driver (every GPU test skipped), h200x1.* a one-GPU H200 run of the
one-GPU suite (its console as ctest -V printed it; the LastTest.log rebuilt
from it in CTest's form). And every SKIP line the GPU tests print, judged.

usage: test_device_skips.py [REPO_ROOT]   (unittest; exits non-zero on failure)"""
import glob
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "device", "skips.py")
DATA = os.path.join(ROOT, "tests", "data", "ctest")

spec = importlib.util.spec_from_file_location("skips", SCRIPT)
skips = importlib.util.module_from_spec(spec)
spec.loader.exec_module(skips)


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, check=False)


def sample(name):
    return os.path.join(DATA, f"{name}.LastTest.log"), os.path.join(DATA, f"{name}.console.txt")


# Every SKIP format the GPU tests and benchmarks print (tests/gpu), with a
# line it prints, the machine's GPU count, whether ranks share the GPUs, and
# the verdict: None (expected there) or words of the reason it is not.
FORMATS = [
    ("SKIP: needs %d GPU(s); %s\\n", [
        ("SKIP: needs 2 GPU(s); this machine has fewer", 1, False, None),
        ("SKIP: needs 2 GPU(s); this machine has fewer", 2, False, "needs 2 GPU(s) and this machine has 2"),
        ("SKIP: needs 2 GPU(s); the CUDA driver (libcuda.so.1) is not installed", 1, False,
         "could not be counted"),
        ("SKIP: needs 1 GPU(s); the CUDA driver (libcuda.so.1) is not installed", 1, False,
         "needs 1 GPU(s) and this machine has 1")]),
    ("%-40s SKIP: %s; this machine has %d\\n", [
        ("argument_checks                          SKIP: needs 2 GPUs (one process driving several); "
         "this machine has 1", 1, False, None),
        ("argument_checks                          SKIP: needs 2 GPUs (one process driving several); "
         "this machine has 1", 1, True, None),
        ("process_per_gpu                          SKIP: needs 2 GPUs, or P2PKIT_SHARE_GPUS=1 to put the "
         "ranks on one; this machine has 1", 1, False, None),
        ("process_per_gpu                          SKIP: needs 2 GPUs, or P2PKIT_SHARE_GPUS=1 to put the "
         "ranks on one; this machine has 1", 1, True, "P2PKIT_SHARE_GPUS=1"),
        ("process_per_gpu                          SKIP: needs 2 GPUs, or P2PKIT_SHARE_GPUS=1 to put the "
         "ranks on one; this machine has 0", 1, False, "it saw 0 GPU(s); this machine has 1")]),
    ("SKIP: %s rank %d: needs %d GPUs\\n", [
        ("SKIP: process_per_gpu rank 1: needs 3 GPUs", 2, False, None),
        ("SKIP: process_per_gpu rank 1: needs 3 GPUs", 2, True, "P2PKIT_SHARE_GPUS=1"),
        ("SKIP: process_per_gpu rank 1: needs 2 GPUs", 8, False, "needs 2 GPU(s) and this machine has 8")]),
    ("SKIP: %s: needs %d GPUs\\n", [
        ("SKIP: kill-last: needs 2 GPUs", 1, False, None),
        ("SKIP: kill-last: needs 2 GPUs", 4, False, "needs 2 GPU(s) and this machine has 4")]),
    ("SKIP %s: needs 2 GPUs; this machine has %d\\n", [
        ("SKIP nccl_every_mode: needs 2 GPUs; this machine has 1", 1, False, None),
        ("SKIP nccl_every_mode: needs 2 GPUs; this machine has 1", 2, False, "needs 2 GPU(s)")]),
    ("  %d ranks: SKIP: %d GPU(s); P2PKIT_SHARE_GPUS=1 puts several ranks on one\\n", [
        ("  3 ranks: SKIP: 2 GPU(s); P2PKIT_SHARE_GPUS=1 puts several ranks on one", 2, False, None),
        ("  3 ranks: SKIP: 2 GPU(s); P2PKIT_SHARE_GPUS=1 puts several ranks on one", 2, True,
         "P2PKIT_SHARE_GPUS=1"),
        ("  3 ranks: SKIP: 1 GPU(s); P2PKIT_SHARE_GPUS=1 puts several ranks on one", 2, False,
         "it saw 1 GPU(s); this machine has 2")]),
    ("  %s, %d ranks, one process: SKIP: NCCL takes one GPU a rank in one process\\n", [
        ("  nccl, 3 ranks, one process: SKIP: NCCL takes one GPU a rank in one process", 1, True, None),
        ("  nccl, 3 ranks, one process: SKIP: NCCL takes one GPU a rank in one process", 4, True,
         "needs 3 GPU(s) and this machine has 4")]),
    ("SKIP: bench_hostmem needs %d GPUs\\n", [
        ("SKIP: bench_hostmem needs 2 GPUs", 1, False, None)]),
    ("SKIP: bench_launch needs 2 GPUs (found %d)\\n", [
        ("SKIP: bench_launch needs 2 GPUs (found 1)", 1, False, None),
        ("SKIP: bench_launch needs 2 GPUs (found 0)", 1, False, "it saw 0 GPU(s)")]),
    ("SKIP: needs 2 GPUs\\n", [("SKIP: needs 2 GPUs", 1, False, None)]),
    ("SKIP: nvidia-smi not found", [("SKIP: nvidia-smi not found", 1, False, "names no GPU count")]),
    ("SKIP: nvidia-smi sees no GPU", [("SKIP: nvidia-smi sees no GPU", 8, False, "names no GPU count")]),
    ("%-40s SKIP: opt-in, over 3 minutes (P2PKIT_TEST_LATE=1 or its name runs it)\\n", [
        ("late_ranks_under_default_timeouts        SKIP: opt-in, over 3 minutes (P2PKIT_TEST_LATE=1 or "
         "its name runs it)", 1, False, None),
        ("late_ranks_under_default_timeouts        SKIP: opt-in, over 3 minutes (P2PKIT_TEST_LATE=1 or "
         "its name runs it)", 8, True, None)]),
    ("SKIP: python3 needed to compare tables", [
        ("SKIP: python3 needed to compare tables", 1, False, "names no GPU count")]),
]


class Verdicts(unittest.TestCase):
    def test_every_skip_the_gpu_tests_print_is_judged_here(self):
        found = set()
        for path in glob.glob(os.path.join(ROOT, "tests", "gpu", "*")):
            with open(path) as f:
                found |= set(re.findall(r'"((?:[^"\\]|\\.)*\bSKIP\b(?:[^"\\]|\\.)*)"', f.read()))
        self.assertEqual(sorted(found), sorted(f for f, _ in FORMATS))

    def test_each_format(self):
        for fmt, cases in FORMATS:
            for line, ngpu, shared, want in cases:
                with self.subTest(line=line, gpus=ngpu, shared=shared):
                    got = skips.verdict(line, ngpu, shared)
                    if want is None:
                        self.assertIsNone(got)
                    else:
                        self.assertIsNotNone(got)
                        self.assertIn(want, got)


class RecordedRuns(unittest.TestCase):
    def test_every_test_skipped_fails(self):
        for gpus in ("1", "8"):
            out = run("--gpus", gpus, *sample("nogpu"))
            self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
            lines = out.stdout.splitlines()
            self.assertEqual(lines[-1], "every one of the 10 tests skipped")
            self.assertEqual(len(lines), 11)  # one line per test
            self.assertIn("gpu_test_topo_smi: unexpected skip (its reason names no GPU count): "
                          "SKIP: nvidia-smi not found", lines)
            self.assertIn("test_allreduce: unexpected skip (it needs 1 GPU(s) and this machine has "
                          f"{gpus}): SKIP: needs 1 GPU(s); the CUDA driver (libcuda.so.1) is not "
                          "installed", lines)

    def test_the_one_gpu_run_passes_there(self):
        log, console = sample("h200x1")
        out = run("--gpus", "1", log, console)
        self.assertEqual((out.returncode, out.stdout, out.stderr), (0, "", ""))
        self.assertEqual(len(skips.skipped_of(skips.read(console))), 4)
        outputs = skips.tests_of(skips.read(log))
        self.assertEqual(len(outputs), 9)
        self.assertIn("SKIP: needs 2 GPU(s); this machine has fewer", outputs["test_copy"])

    def test_the_same_skips_on_two_gpus_fail(self):
        out = run("--gpus", "2", *sample("h200x1"))
        self.assertEqual(out.returncode, 1)
        names = {ln.split(":")[0] for ln in out.stdout.splitlines()}
        self.assertEqual(names, {"test_allreduce", "test_allreduce_errors", "test_collectives",
                                 "test_copy", "test_copy_bench", "test_ddp_grad_sync", "test_perf_run"})

    def test_a_skip_that_says_nothing_fails(self):
        log, console = sample("h200x1")
        with open(log) as f:
            text = f.read()
        silent = text.replace("SKIP: needs 2 GPU(s); this machine has fewer\n<end of output>\n"
                              "Test time =   0.13 sec", "<end of output>\nTest time =   0.13 sec", 1)
        self.assertNotEqual(silent, text)
        with tempfile.NamedTemporaryFile("w", suffix=".log") as f:
            f.write(silent)
            f.flush()
            out = run("--gpus", "1", f.name, console)
            self.assertEqual(out.returncode, 1)
            self.assertEqual(out.stdout, "test_allreduce_errors: skipped without a SKIP line saying why\n")
            # without the console, nothing says that it skipped
            self.assertEqual(run("--gpus", "1", f.name).returncode, 0)

    def test_one_case_output(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
            f.write("quick_mp: 2 ranks, one process each\nSKIP: quick_mp rank 1: needs 2 GPUs\n")
            f.flush()
            self.assertEqual(run("--gpus", "1", "--output", f.name).returncode, 0)
            out = run("--gpus", "1", "--share-gpus", "--output", f.name)
            self.assertEqual(out.returncode, 1)
            self.assertIn("P2PKIT_SHARE_GPUS=1 puts several ranks on one GPU", out.stdout)
            f.seek(0)
            f.truncate()
            f.write("nothing said\n")
            f.flush()
            out = run("--gpus", "4", "--output", f.name)
            self.assertEqual((out.returncode, out.stdout.split(": ", 1)[1]),
                             (1, "skipped without a SKIP line saying why\n"))

    def test_bad_arguments(self):
        for args, words in ((["--gpus", "0", sample("h200x1")[0]], "a device suite runs on a machine with GPUs"),
                            (["--gpus", "1"], "either --output FILE or LASTTEST_LOG"),
                            (["--gpus", "1", "/nonexistent/LastTest.log"], "/nonexistent/LastTest.log:")):
            with self.subTest(args=args):
                out = run(*args)
                self.assertEqual(out.returncode, 2, out.stdout)
                self.assertIn(words, out.stderr)
        out = run("--gpus", "1", sample("h200x1")[1])  # the console is no LastTest.log
        self.assertEqual(out.returncode, 1)
        self.assertIn("no test's output in it", out.stdout)


class LibSh(unittest.TestCase):
    """scripts/device/lib.sh's use of the judge, with ctest and a GPU test
    played by scripts: ctest_gpu replays a recorded run (its LastTest.log
    and console), run_cases a case that exits 77 with a reason."""

    def suite(self, body, gpus, env=None):
        with tempfile.TemporaryDirectory() as tmp:
            fake = os.path.join(tmp, "bin")
            os.makedirs(os.path.join(tmp, "build", "tests"))
            os.makedirs(fake)
            with open(os.path.join(fake, "ctest"), "w") as f:  # ctest --test-dir DIR ...
                f.write('#!/bin/sh\nmkdir -p "$2/Testing/Temporary"\n'
                        'cp "$SAMPLE_LOG" "$2/Testing/Temporary/LastTest.log"\ncat "$SAMPLE_CONSOLE"\n')
            with open(os.path.join(tmp, "build", "tests", "test_fake"), "w") as f:
                f.write('#!/bin/sh\necho "$1 ranks 1: starting"\necho "$REASON"\nexit 77\n')
            with open(os.path.join(fake, "nvidia-smi"), "w") as f:  # machine_info counts its -L lines
                f.write(f'#!/bin/sh\n[ "$1" = -L ] && for i in $(seq 1 {gpus}); do echo "GPU $i: H200"; done\n'
                        'exit 0\n')
            for p in ("bin/ctest", "bin/nvidia-smi", "build/tests/test_fake"):
                os.chmod(os.path.join(tmp, p), 0o755)
            script = (f". scripts/device/lib.sh\nmachine_info\n{body}\necho \"status=$status\"\n"
                      "printf '%s\\n' \"${summary[@]}\"\n")
            out = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True,
                                 env=dict(os.environ, PATH=fake + os.pathsep + os.environ["PATH"],
                                          log=os.path.join(tmp, "log"), BUILD=os.path.join(tmp, "build"),
                                          **(env or {})), check=False)
            judged = os.path.join(tmp, "log", "ctest.skips.txt")
            return out.stdout + out.stderr, skips.read(judged) if os.path.exists(judged) else None

    def test_ctest_gpu_fails_a_run_where_every_test_skipped(self):
        log, console = sample("nogpu")
        out, judged = self.suite("ctest_gpu ctest 60 -L gpu", 1,
                                 {"SAMPLE_LOG": log, "SAMPLE_CONSOLE": console})
        self.assertIn("status=1", out)
        self.assertRegex(out, r"ctest\.skips +rc=1 ")
        self.assertRegex(out, r"ctest +rc=0 ")  # what CTest itself says
        self.assertIn("every one of the 10 tests skipped", judged)

    def test_ctest_gpu_passes_the_skips_expected_there(self):
        log, console = sample("h200x1")
        env = {"SAMPLE_LOG": log, "SAMPLE_CONSOLE": console}
        out, judged = self.suite("ctest_gpu ctest 60 -L gpu", 1, env)
        self.assertIn("status=0", out)
        self.assertEqual(judged, "")
        out, judged = self.suite("ctest_gpu ctest 60 -L gpu", 2, env)
        self.assertIn("status=1", out)
        out, judged = self.suite("ctest_gpu ctest 60 -L gpu", 0, env)  # nvidia-smi saw none
        self.assertIn("status=1", out)
        self.assertIn("a device suite runs on a machine with GPUs", judged)

    def test_run_cases_judges_a_case_that_skipped(self):
        body = 'step cases 60 bash -c \'run_cases "$@"\' _ "$log/cases" test_fake:process_per_gpu'
        reason = "SKIP: process_per_gpu rank 1: needs 2 GPUs"
        for gpus, env, status in ((1, {}, 0), (2, {}, 1), (1, {"P2PKIT_SHARE_GPUS": "1"}, 1)):
            with self.subTest(gpus=gpus, env=env):
                out, _ = self.suite(body, gpus, dict(env, REASON=reason))
                self.assertIn(f"status={status}", out)
                self.assertIn("    " + reason, out)
        out, _ = self.suite(body, 4, {"REASON": "SKIP: nvidia-smi not found"})
        self.assertIn("status=1", out)
        self.assertIn("unexpected skip (its reason names no GPU count)", out)


if __name__ == "__main__":
    unittest.main(verbosity=1)
