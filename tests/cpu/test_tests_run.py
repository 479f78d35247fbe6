#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Every file under tests/ and python/tests/ is run by something, so no test
sits in the tree checking nothing:
  - a test (test_*.c/.py/.sh, fuzz_*.c, install_test.sh) is added by a glob of
    tests/CMakeLists.txt whose loop calls add_test, or is named (its file
    name, or its module name as a word) outside the comments of a runner:
    tests/CMakeLists.txt, tests/fuzz/CMakeLists.txt, scripts/*.sh,
    scripts/device/*.sh, .ci/run;
  - a benchmark program (bench_*.c: run by hand on a GPU machine, never as a
    test) is built by such a glob;
  - a helper (*.h, a Python module that is not a test) is included or
    imported by a file under tests/ or python/tests/;
  - a fuzzer's dictionary, suppressions and seeds are named by
    tests/fuzz/CMakeLists.txt or scripts/fuzz.sh.
tests/data/ holds recordings the tests read, not tests.

usage: test_tests_run.py [REPO_ROOT]   (unittest; exits non-zero on failure)"""
import glob
import os
import re
import subprocess
import sys
import unittest
from fnmatch import fnmatch

ROOT = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
RUNNERS = ["tests/CMakeLists.txt", "tests/fuzz/CMakeLists.txt", ".ci/run"] + \
    sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "scripts", "*.sh")) +
           glob.glob(os.path.join(ROOT, "scripts", "device", "*.sh")))
GLOB = re.compile(r"file\(GLOB (\w+)(?: CONFIGURE_DEPENDS)? \$\{CMAKE_CURRENT_SOURCE_DIR\}/(\S+)\)")
LOOP = re.compile(r"foreach\(\w+ \$\{(\w+)\}\)(.*?)endforeach\(\)", re.S)
TEST = re.compile(r"^(test_\w+\.(c|py|sh)|fuzz_\w+\.c|install_test\.sh)$")


def read(rel):
    with open(os.path.join(ROOT, rel), errors="replace") as f:
        return f.read()


def code(text):
    """`text` without its comments (# lines and trailing ' # ...')."""
    lines = (ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
    return "\n".join(re.sub(r"\s#\s.*$", "", ln) for ln in lines)


def files():
    """Every file under tests/ and python/tests/ that git knows or would add."""
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "--cached", "--others", "--exclude-standard",
                          "tests", "python/tests"], capture_output=True, text=True, check=False)
    if out.returncode == 0:
        return sorted(set(out.stdout.split()))
    found = []  # not a git checkout (a release tarball): the folders as they are
    for top in ("tests", "python/tests"):
        for d, dirs, names in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [x for x in dirs if x != "__pycache__"]
            found += [os.path.relpath(os.path.join(d, n), ROOT) for n in names if not n.endswith(".pyc")]
    return sorted(found)


def cmake_globs():
    """(patterns under tests/ whose loop adds a test, patterns whose loop builds one)."""
    text = read("tests/CMakeLists.txt")
    loops = LOOP.findall(text)
    run, built = [], []
    for var, pattern in GLOB.findall(text):
        bodies = [body for v, body in loops if v == var]
        if any("add_test" in b for b in bodies):
            run.append(pattern)
        if any("add_test" in b or "add_executable" in b for b in bodies):
            built.append(pattern)
    return run, built


def named(path, texts):
    """Is `path` named in one of `texts` (by file name, or module name as a word)?"""
    base = os.path.basename(path)
    stem = re.escape(os.path.splitext(base)[0])
    return any(base in t or re.search(rf"(?<![\w./-]){stem}(?![\w.-])", t) for t in texts)


def orphans(paths):
    """What no runner runs, each with the reason."""
    runners = [code(read(r)) for r in RUNNERS if os.path.exists(os.path.join(ROOT, r))]
    run_globs, built_globs = cmake_globs()
    sources = {p: read(p) for p in files() if p.endswith((".c", ".h", ".py"))}
    fuzz = [code(read("tests/fuzz/CMakeLists.txt")), code(read("scripts/fuzz.sh"))]
    bad = []
    for p in paths:
        base, under_tests = os.path.basename(p), p[len("tests/"):] if p.startswith("tests/") else None
        if p.startswith("tests/data/") or base == "CMakeLists.txt":
            continue
        if TEST.match(base):
            if not (under_tests and any(fnmatch(under_tests, g) for g in run_globs) or named(p, runners)):
                bad.append(f"{p}: a test no runner runs")
        elif re.match(r"bench_\w+\.c$", base):
            if not (under_tests and any(fnmatch(under_tests, g) for g in built_globs)):
                bad.append(f"{p}: a benchmark nothing builds")
        elif base.endswith((".h", ".py")):
            mod = os.path.splitext(base)[0]
            use = re.compile(rf'#include "([\w/]*/)?{re.escape(base)}"|^\s*(from|import) {mod}\b', re.M)
            if not any(use.search(text) for q, text in sources.items() if q != p):
                bad.append(f"{p}: a helper no test includes or imports")
        elif p.startswith("tests/fuzz/"):
            top = p.split("/")[2]  # the seeds folder, or the file itself
            if not any(top in t for t in fuzz):
                bad.append(f"{p}: a fuzzer input neither tests/fuzz/CMakeLists.txt nor scripts/fuzz.sh names")
        else:
            bad.append(f"{p}: not a test, benchmark, helper or fuzzer input (data belongs in tests/data/)")
    return bad


class EveryTestRuns(unittest.TestCase):
    def test_no_file_is_run_by_nothing(self):
        paths = files()
        self.assertIn("tests/cpu/test_tests_run.py", paths)
        self.assertGreater(len(paths), 50)
        self.assertEqual(orphans(paths), [])

    def test_the_globs_are_read(self):
        run, built = cmake_globs()
        self.assertEqual(sorted(run), ["cli/test_*.sh", "cpu/test_*.c", "gpu/test_*.c", "gpu/test_*.sh"])
        self.assertEqual(sorted(built), sorted(run + ["gpu/bench_*.c"]))

    def test_an_unrun_file_is_named(self):
        # files of the kinds above that nothing runs, builds, includes or names
        made = ["python/tests/test_nowhere.py", "tests/cpu/test_nowhere.py", "tests/gpu/helper_nowhere.h",
                "tests/fuzz/seeds_nowhere/x", "tests/notes.txt", "tests/data/anything.txt"]
        self.assertEqual([b.split(":")[0] for b in orphans(made)], made[:-1])

    def test_comments_do_not_run_a_test(self):
        self.assertEqual(code("# runs test_x.py\nrun test_y.py # not test_z.py\n"), "run test_y.py")
        self.assertFalse(named("python/tests/test_x.py", ["python3 -m unittest test_xy"]))
        self.assertTrue(named("python/tests/test_x.py", ["python3 -m unittest -v test_x"]))


if __name__ == "__main__":
    unittest.main(verbosity=1)
