#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""src/coll's shape, checked from the build and the sources:

1. No loop of calls among its files: from each object's defined and
   undefined symbols (nm), file X depends on file Y when X uses a symbol Y
   defines; that graph must have no cycle.
2. Every function in its sources is under 80 lines (from its first line to
   its closing brace).

Usage: test_coll_structure.py SRC_DIR OBJECT... (the library's objects; those
of src/coll are picked by name). Exit 0 when both hold, 1 with the reasons.
"""
import os
import re
import subprocess
import sys

MAX_LINES = 80
EXEMPT = set()


def symbols(obj):
    out = subprocess.run([os.environ.get("NM", "nm"), "-P", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            used.add(name)
        elif kind in "TDBRVWGSu":
            defined.add(name)
    return defined, used


def file_graph(objs):
    defs, uses = {}, {}
    for o in objs:
        f = os.path.basename(o)
        for suffix in (".o", ".obj"):
            if f.endswith(suffix):
                f = f[: -len(suffix)]
        defs[f], uses[f] = symbols(o)
    owner = {}
    for f, ds in defs.items():
        for s in ds:
            owner.setdefault(s, f)
    graph = {f: set() for f in defs}
    why = {}
    for f, us in uses.items():
        for s in us:
            g = owner.get(s)
            if g and g != f:
                graph[f].add(g)
                why.setdefault((f, g), s)
    return graph, why


def cycles(graph):
    """Strongly connected components with more than one file."""
    index, low, stack, on, comps, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


HEAD = re.compile(r"^[A-Za-z_].*\(")


def long_functions(path):
    """(name, first line, lines) of each top-level function over MAX_LINES."""
    lines = open(path, encoding="utf-8").read().split("\n")
    found, i, depth = [], 0, 0
    start = None
    in_macro = False
    for ln, text in enumerate(lines, 1):
        stripped = text.rstrip()
        if in_macro or (depth == 0 and stripped.startswith("#")):
            in_macro = stripped.endswith("\\")
            continue
        code = re.sub(r'"(\\.|[^"\\])*"', '""', re.sub(r"//.*", "", stripped))
        code = re.sub(r"'(\\.|[^'\\])'", "''", code)
        if depth == 0 and start is None and HEAD.match(code) and "=" not in code.split("(")[0]:
            start = ln
        if depth == 0 and start is not None and code.endswith(";") and "{" not in code:
            start = None  # a declaration
        opens, closes = code.count("{"), code.count("}")
        if depth == 0 and opens and start is None and not code.startswith("namespace"):
            start = -1  # a block that is no function (a table, a struct)
        if code.startswith("namespace") or code.startswith("extern \"C\" {") or code == 'extern "C" {':
            continue
        depth += opens - closes
        if depth == 0 and closes and start is not None:
            if start > 0 and not code.endswith("};"):
                n = ln - start + 1
                if n >= MAX_LINES:
                    name = re.search(r"([A-Za-z_]\w*)\s*\(", lines[start - 1])
                    found.append((name.group(1) if name else "?", start, n))
            start = None
    return found


def main():
    src, objs = sys.argv[1], [o for o in sys.argv[2:] if "/src/coll/" in o]
    if not objs:
        print("no src/coll objects given")
        return 1
    bad = 0
    graph, why = file_graph(objs)
    for comp in cycles(graph):
        bad += 1
        print("files calling each other in a loop: " + ", ".join(comp))
        for a in comp:
            for b in comp:
                if b in graph[a]:
                    print(f"  {a} -> {b} (e.g. {why[(a, b)]})")
    coll = os.path.join(src, "src", "coll")
    for f in sorted(os.listdir(coll)):
        if not re.search(r"\.(c|h|cu|cuh)$", f) or f in EXEMPT:
            continue
        for name, line, n in long_functions(os.path.join(coll, f)):
            bad += 1
            print(f"src/coll/{f}:{line}: {name} has {n} lines (at most {MAX_LINES - 1})")
    edges = sum(len(v) for v in graph.values())
    print(f"{len(graph)} files, {edges} file dependencies, {bad} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
