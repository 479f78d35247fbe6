#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""clang's static analyzer over the host C code (src/**/*.c), with the flags
CMake gives each file (compile_commands.json of a configure-only tree), files
in parallel. Every warning must be fixed or listed in
scripts/analyze-baseline.txt with the reason it is a false alarm; a warning
not listed fails the run. An entry is matched by file, checker and the text
of the flagged source line (not its number, so edits elsewhere do not break
it); entries that no longer match are reported, so the list cannot rot.

usage: scripts/analyze.py [BUILD_DIR]   (default build-analyze; needs clang)"""
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BASELINE = os.path.join(ROOT, "scripts", "analyze-baseline.txt")
WARN = re.compile(r"^(/[^:]+):(\d+):(\d+): warning: (.*) \[([\w.]+)\]$")


def commands(build):
    subprocess.run(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"],
                   check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(build, "compile_commands.json")) as f:
        db = json.load(f)
    for e in db:
        src = e["file"]
        if not src.endswith(".c") or not src.startswith(os.path.join(ROOT, "src") + os.sep):
            continue
        args = shlex.split(e["command"]) if "command" in e else e["arguments"]
        keep, it = [], iter(args[1:])
        for a in it:
            if a in ("-isystem", "-I", "-D", "-include"):
                keep += [a, next(it)]
            elif a.startswith(("-I", "-D", "-std=")):
                keep.append(a)
        yield src, ["clang", "--analyze", "-Xanalyzer", "-analyzer-output=text", *keep, src,
                    "-o", os.devnull]


def analyze(job):
    src, cmd = job
    out = subprocess.run(cmd, capture_output=True, text=True)
    found = []
    for ln in (out.stdout + out.stderr).splitlines():
        m = WARN.match(ln)
        if m:
            path, line = m.group(1), int(m.group(2))
            with open(path, errors="replace") as f:
                text = f.read().splitlines()[line - 1].strip()
            found.append((os.path.relpath(path, ROOT), line, m.group(5), m.group(4), text))
    if out.returncode != 0 and not found:
        found.append((os.path.relpath(src, ROOT), 0, "clang", out.stderr.strip()[-300:], ""))
    return found


def baseline():
    entries = []
    with open(BASELINE) as f:
        for ln in f:
            if ln.strip() and not ln.startswith("#"):
                path, checker, text, why = (x.strip() for x in ln.rstrip("\n").split("|", 3))
                entries.append((path, checker, text, why))
    return entries


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build-analyze")
    jobs = list(commands(build))
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        warnings = sorted(set(w for ws in pool.map(analyze, jobs) for w in ws))
    known = baseline()
    used, new = set(), []
    for path, line, checker, msg, text in warnings:
        hit = [i for i, (p, c, t, _) in enumerate(known) if p == path and c == checker and t == text]
        if hit:
            used.update(hit)
        else:
            new.append(f"{path}:{line}: {msg} [{checker}]\n    {text}")
    for i, (p, c, t, _) in enumerate(known):
        if i not in used:
            print(f"analyze: baseline entry no longer found (remove it): {p} | {c} | {t}")
    print(f"analyze: {len(jobs)} files, {len(warnings)} warnings, {len(warnings) - len(new)} known "
          f"false alarms (scripts/analyze-baseline.txt), {len(new)} new")
    for w in new:
        print("analyze: " + w)
    stale = len(known) - len(used)
    return 1 if new or stale else 0


if __name__ == "__main__":
    sys.exit(main())
