#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The library's shape, checked from the build and the sources:

1. No loop of calls among its files: from each object's defined and
   undefined symbols (nm), file X depends on file Y when X uses a symbol Y
   defines; that graph must have no cycle (the whole library).
2. src/coll's rooms, in order: rdv (rendezvous, unique ids, split, hosts),
   kernels (device code, launchers, the host/device ABI), mem (scratch
   layout, shared memory, registered buffers), select (the decision),
   paths (every path; paths/ce the copy engines'), call (entry points,
   groups), comm (communicators made and freed). A file calls into its own
   room or rooms before it, never after; coll.h alone sits above them.
   No folder of src/coll holds more than 25 files.
3. Every function in src/coll's sources is under 80 lines (from its first
   line to its closing brace).
4. Each path's state is its own: c->path_state[P2PK_PATH_X] is named only
   in the file that defines path X (`.id = P2PK_PATH_X`); the copy engines'
   room's state (ce_common.h's struct p2pk_ce, cep.h's landing-slot engine)
   is seen only by the files of paths/ce.
5. Every external symbol the library defines is prefixed: p2pkit_ (public)
   or p2pk_ (internal); C++ code lives in namespace p2pk, or in an
   anonymous namespace (nvcc names each such symbol after its file, so no
   two can meet).

Usage: test_coll_structure.py SRC_DIR OBJECT... (the library's objects).
Exit 0 when all hold, 1 with the reasons.
"""
import os
import re
import subprocess
import sys

MAX_LINES = 80
EXEMPT = set()
ROOMS = ["rdv", "kernels", "mem", "select", "paths", "call", "comm"]
MAX_FILES = 25
# Symbols no p2pkit code names: the C++ personality routine's reference,
# AddressSanitizer's per-global markers, CUDA's inline dim3 constructors and
# the C++ library's templates (std::forward) that its kernel launches
# instantiate, all weak or the toolchain's own.
FOREIGN = re.compile(r"^(DW\.ref\.__gxx_personality_v0|__odr_asan\..*|_ZN4dim3C[12]Ejjj|_ZSt7forward.*)$")
PREFIXED = re.compile(r"^(p2pkit_|p2pk_|_ZN4p2pk|_ZN\d+_GLOBAL__N_|_Z\d+__device_stub__ZN(4p2pk|\d+_GLOBAL__N_))")


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
        f = o.split("/src/", 1)[1]
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


def room_of(f):
    """The room of a file named by its path under src/ ("coll/paths/ce/x.c" -> "paths")."""
    parts = f.split("/")
    return parts[1] if parts[0] == "coll" and len(parts) > 2 else None


def check_rooms(graph, why, coll):
    bad = 0
    for f in sorted(graph):
        a = room_of(f)
        if f.startswith("coll/") and a not in ROOMS:
            bad += 1
            print(f"src/{f}: in no room of src/coll ({', '.join(ROOMS)})")
            continue
        for g in sorted(graph[f]):
            b = room_of(g)
            if a in ROOMS and b in ROOMS and ROOMS.index(b) > ROOMS.index(a):
                bad += 1
                print(f"src/{f} ({a}) calls src/{g} ({b}), a later room (e.g. {why[(f, g)]})")
    for d, _, xs in os.walk(coll):
        if len(xs) > MAX_FILES:
            bad += 1
            print(f"{os.path.relpath(d, os.path.dirname(os.path.dirname(coll)))}: {len(xs)} files "
                  f"(at most {MAX_FILES}: split it into rooms)")
    return bad


PRIVATE_HEADERS = {"coll/paths/ce/ce_common.h": "coll/paths/ce/", "coll/paths/ce/cep.h": "coll/paths/ce/",
                   "coll/comm/comm.h": "coll/comm/"}


def check_private_state(src):
    """Path states named outside their path's file; private headers included outside their room."""
    bad, owner, texts = 0, {}, {}
    for d, _, xs in os.walk(os.path.join(src, "src")):
        for x in xs:
            if re.search(r"\.(c|h|cu|cuh|cpp)$", x):
                p = os.path.relpath(os.path.join(d, x), os.path.join(src, "src"))
                texts[p] = open(os.path.join(d, x), encoding="utf-8").read()
    for p, t in texts.items():
        for m in re.finditer(r"\.id = (P2PK_PATH_\w+)", t):
            owner[m.group(1)] = p
    for p, t in sorted(texts.items()):
        for m in re.finditer(r"path_state\[(P2PK_PATH_\w+)\]", t):
            if owner.get(m.group(1)) != p:
                bad += 1
                print(f"src/{p}: names {m.group(1)}'s state (only {owner.get(m.group(1))} may)")
        for m in re.finditer(r'#include "([^"]+)"', t):
            room = PRIVATE_HEADERS.get(m.group(1))
            if room and not p.startswith(room):
                bad += 1
                print(f"src/{p}: includes {m.group(1)}, private to src/{room}")
    return bad


def unprefixed(objs):
    """The library's external symbols that carry no p2pkit prefix."""
    found = {}
    for o in objs:
        out = subprocess.run([os.environ.get("NM", "nm"), "-P", "-g", "--defined-only", o],
                             capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            name = line.split()[0] if line.split() else ""
            if name and not PREFIXED.match(name) and not FOREIGN.match(name):
                found.setdefault(name, o.split("/src/", 1)[-1])
    return found


def main():
    src, objs = sys.argv[1], [o for o in sys.argv[2:] if "/src/" in o]
    if not any("/src/coll/" in o for o in objs):
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
    bad += check_rooms(graph, why, coll)
    bad += check_private_state(src)
    for f in sorted(os.path.relpath(os.path.join(d, x), coll) for d, _, xs in os.walk(coll) for x in xs):
        if not re.search(r"\.(c|h|cu|cuh)$", f) or f in EXEMPT:
            continue
        for name, line, n in long_functions(os.path.join(coll, f)):
            bad += 1
            print(f"src/coll/{f}:{line}: {name} has {n} lines (at most {MAX_LINES - 1})")
    for name, obj in sorted(unprefixed(objs).items()):
        bad += 1
        print(f"{obj}: external symbol {name} has no p2pk_ or p2pkit_ prefix")
    edges = sum(len(v) for v in graph.values())
    print(f"{len(graph)} files, {edges} file dependencies, {bad} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
