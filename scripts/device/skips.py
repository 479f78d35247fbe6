#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Judge the skips of a GPU test run on a machine with GPUs: CTest and
lib.sh's run_cases count a test that exits 77 as passed, so a run where
every test skipped (no driver, a broken build of the runtime) looks green.
Here a skip passes only when its reason names more GPUs than the machine
has and nothing in it contradicts the machine: the count the test saw, a
library error in place of a count; with ranks sharing the GPUs
(--share-gpus: P2PKIT_SHARE_GPUS=1), only what sharing does not lift (one
process driving several GPUs, NCCL's one GPU a rank).

usage: skips.py --gpus N [--share-gpus] LASTTEST_LOG [CTEST_CONSOLE]
       skips.py --gpus N [--share-gpus] --output FILE   (one case's output)

LASTTEST_LOG is CTest's Testing/Temporary/LastTest.log (every test's
output); CTEST_CONSOLE, what ctest printed, names the tests it skipped
(LastTest.log writes "Test Passed." for them too), so a test that skipped
without saying why is caught. Every "SKIP" line of every test is judged,
a skipped case inside a test that passed included. Prints one line per
unexpected skip; exit 0 when there is none, 1 when there is, 2 for bad
arguments or unreadable files."""
import argparse
import re
import sys

NEED = (re.compile(r"needs (\d+) GPU"),                    # needs 2 GPU(s) / 2 GPUs
        re.compile(r"\b(\d+) ranks\b[^\n]*\bSKIP\b"))        # test_conformance: 3 ranks: SKIP: ...
SEEN = (re.compile(r"this machine has (\d+)\b"),            # coll_runner.h, test_perf_run.c
        re.compile(r"\bSKIP: (\d+) GPU\(s\)"),              # test_conformance.c
        re.compile(r"\(found (\d+)\)"))                       # bench_launch.c
COUNT_FAILED = re.compile(r"needs \d+ GPU\(s\); (?!this machine has fewer)")  # gpu_test.h
# What ranks sharing a GPU (P2PKIT_SHARE_GPUS=1) do not lift: one process
# driving several GPUs (coll_runner.h), NCCL's one GPU a rank (test_conformance.c).
NOT_SHARED = re.compile(r"one process driving several|NCCL takes one GPU a rank")
# A case that runs only when asked (test_timeouts' three-minute late ranks):
# its skip is the suite's choice, not the machine's.
OPT_IN = re.compile(r"\bSKIP: opt-in\b")
SKIP = re.compile(r"\bSKIP\b")
TEST_START = re.compile(r"^\d+/\d+ Test: (\S+)$")
DID_NOT_RUN = re.compile(r"^\s*\d+ - (\S+) \(Skipped\)\s*$")


def verdict(line, ngpu, shared=False):
    """None when the skip `line` is expected on a machine of `ngpu` GPUs,
    else why not (a few words)."""
    if OPT_IN.search(line):
        return None
    need = next((int(m.group(1)) for m in (r.search(line) for r in NEED) if m), None)
    if need is None:
        return "its reason names no GPU count"
    if need <= ngpu:
        return f"it needs {need} GPU(s) and this machine has {ngpu}"
    for r in SEEN:
        m = r.search(line)
        if m and int(m.group(1)) != ngpu:
            return f"it saw {m.group(1)} GPU(s); this machine has {ngpu}"
    if COUNT_FAILED.search(line):
        return "the GPUs could not be counted"
    if shared and not NOT_SHARED.search(line):
        return "P2PKIT_SHARE_GPUS=1 puts several ranks on one GPU"
    return None


def tests_of(log):
    """{test name: its output} from LastTest.log's text."""
    out, name, body, inside = {}, None, [], False
    for ln in log.splitlines():
        m = TEST_START.match(ln)
        if m:
            name, body, inside = m.group(1), [], False
        elif name and ln == "Output:":
            inside = None  # the dashes come next
        elif name and inside is None:
            inside = True
        elif name and inside and ln == "<end of output>":
            out[name], inside = "\n".join(body), False
        elif name and inside:
            body.append(ln)
    return out


def skipped_of(console):
    """The tests ctest's console lists as skipped."""
    return [m.group(1) for m in map(DID_NOT_RUN.match, console.splitlines()) if m]


def judge(outputs, ngpu, shared=False, skipped=()):
    """A line for every unexpected skip: `outputs` {test: output},
    `skipped` the tests counted as skipped (exit 77)."""
    bad = []
    for name in skipped:
        if name not in outputs:
            bad.append(f"{name}: skipped, and LastTest.log has no output of it")
        elif not SKIP.search(outputs[name]):
            bad.append(f"{name}: skipped without a SKIP line saying why")
    for name, text in outputs.items():
        for ln in text.splitlines():
            why = SKIP.search(ln) and verdict(ln, ngpu, shared)
            if why:
                bad.append(f"{name}: unexpected skip ({why}): {ln.strip()}")
    return bad


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError as e:
        print(f"skips.py: {path}: {e.strerror}", file=sys.stderr)
        sys.exit(2)


def main(argv):
    ap = argparse.ArgumentParser(prog="skips.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, required=True, help="the GPUs this machine has (1 or more)")
    ap.add_argument("--share-gpus", action="store_true", help="P2PKIT_SHARE_GPUS=1 was in force")
    ap.add_argument("--output", metavar="FILE", help="one case's output (it exited 77)")
    ap.add_argument("files", nargs="*", metavar="LASTTEST_LOG [CTEST_CONSOLE]")
    a = ap.parse_args(argv)
    if a.gpus < 1:
        ap.error(f"--gpus {a.gpus}: a device suite runs on a machine with GPUs")
    if bool(a.output) == bool(a.files) or len(a.files) > 2:
        ap.error("either --output FILE or LASTTEST_LOG [CTEST_CONSOLE]")
    if a.output:
        bad = judge({a.output: read(a.output)}, a.gpus, a.share_gpus, [a.output])
    else:
        outputs = tests_of(read(a.files[0]))
        if not outputs:
            print(f"skips.py: {a.files[0]}: no test's output in it (not a LastTest.log?)")
            return 1
        skipped = skipped_of(read(a.files[1])) if len(a.files) > 1 else []
        bad = judge(outputs, a.gpus, a.share_gpus, skipped)
        if set(skipped) >= set(outputs):
            bad.append(f"every one of the {len(outputs)} tests skipped")
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
