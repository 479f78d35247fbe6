#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The documents name what exists. Every file or folder, function, macro
and P2PKIT_* setting that docs/*.md, docs/decisions/*.md and README.md name
must be in the tree:

- a path (src/..., tests/..., scripts/..., include/..., ...; {a,b} and *
  expanded; a program by its source) exists, but the placeholder of a file
  to add (path_x.c); a link to a .md file exists beside the document;
- a bare file name (select.c, kern_*.cu) in ARCHITECTURE, coll-paths.md
  and the decisions is some file's name in the tree, and a partial path
  there (rdv/init_id.c, ce/cep_*.c) the end of some file's path;
- a p2pk_ / p2pkit_ / P2PK_ name, and in those documents a `snake_case`
  name in backquotes (check_infos, rules[]), appears in the sources;
- a P2PKIT_* setting is in the registry (src/core/param.c), or is a name
  the public header, the build (CMakeLists.txt options) or the registry's
  list of the scripts' own variables defines;
- `name` in `file`: the file holds the name;
- ARCHITECTURE's "Where to change what" table: each file a row names sits
  where the row says (a bare name in the folder of the path before it), and
  each name with [] or () it gives after a file is in that file;
- the claim that settings live in the registry and nowhere else: no
  getenv("P2PKIT_...") outside src/core/param.c;
- the path interface ARCHITECTURE lists is struct p2pk_path's, field for
  field.

Usage: test_docs.py REPO. Exit 0 when all hold, 1 listing what does not.
"""
import glob
import os
import re
import sys

SOURCE_EXT = (".c", ".h", ".cu", ".cuh", ".cpp", ".hpp", ".py", ".sh", ".txt", ".in")
FILE_EXT = r"(?:c|h|cu|cuh|cpp|hpp|py|sh)"
TOP = ("src", "tests", "scripts", "include", "python", "bench", "docs", "examples", ".ci")
PLACEHOLDER = re.compile(r"(^|/)\w*_x\.\w+$")  # path_x.c: the one to add


def expand(pattern):
    """{a,b} alternatives expanded (one level, left to right)."""
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    return [x for alt in m.group(1).split(",") for x in expand(pattern[: m.start()] + alt + pattern[m.end():])]


def tree_files(root):
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(".") or x == ".ci"]
        if os.path.relpath(d, root).split(os.sep)[0].startswith("build"):
            dirs[:] = []
            continue
        out += [os.path.relpath(os.path.join(d, f), root) for f in files]
    return out


def sources_text(root, files):
    return "\n".join(open(os.path.join(root, f), encoding="utf-8", errors="replace").read()
                     for f in files if f.endswith(SOURCE_EXT) and not f.startswith(("docs/", "build")))


def settings(root):
    text = open(os.path.join(root, "src/core/param.c"), encoding="utf-8").read()
    names = set(re.findall(r'\{"(P2PKIT_[A-Z0-9_]+)"', text))
    names |= set(re.findall(r'"(P2PKIT_[A-Z0-9_]+)"', text[text.find("tool_vars"):]))
    names |= set(re.findall(r"\b(P2PKIT_[A-Z0-9_]+)\b", open(os.path.join(root, "include/p2pkit.h")).read()))
    names |= set(re.findall(r"option\((P2PKIT_[A-Z0-9_]+)", open(os.path.join(root, "CMakeLists.txt")).read()))
    return names


def prose(text):
    """The document without its fenced code (checked apart) and URLs."""
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    return re.sub(r"https?://\S+", " ", text)


def internal(doc):
    """The documents of the code itself: ARCHITECTURE, the paths, the decisions."""
    return doc in ("docs/ARCHITECTURE.md", "docs/coll-paths.md") or doc.startswith("docs/decisions/")


def check_paths(doc, text, root, files, bad):
    for tok in set(re.findall(r"(?<![\w./-])((?:%s)/[\w./{},*+-]*[\w*}/])" % "|".join(re.escape(t) for t in TOP), text)):
        tok = tok.rstrip(".,")
        if PLACEHOLDER.search(tok):
            continue
        # a program named by its source (examples/two_hosts: two_hosts.c) counts
        if not any(glob.glob(os.path.join(root, p.rstrip("/"))) or glob.glob(os.path.join(root, p + ".*"))
                   for p in expand(tok)):
            bad.append(f"{doc}: names {tok}, which is not in the tree")
    for link in set(re.findall(r"\]\(([\w./-]+\.md)(?:#[\w-]*)?\)", text)):
        if not os.path.exists(os.path.join(root, os.path.dirname(doc), link)):
            bad.append(f"{doc}: links to {link}, which is not there")
    # bare names: in the documents of the code (the others show users' own
    # files, `cc app.c`)
    names = {os.path.basename(f) for f in files} if internal(doc) else set()
    for tok in set([] if not internal(doc) else re.findall(r"(?<![\w/{},*.-])([\w*{},-]+\.%s)\b" % FILE_EXT, text)):
        if "/" in tok or PLACEHOLDER.search(tok):
            continue
        if not any(any(re.fullmatch(re.escape(p).replace(r"\*", r"[\w-]*"), n) for n in names) for p in expand(tok)):
            bad.append(f"{doc}: names a file {tok}, which no file of the tree is")
    # partial paths (coll/call/trace.c, rdv/init_id.c): the end of a file's path
    ends = ["/" + f for f in files] if internal(doc) else []
    top = tuple(t + "/" for t in TOP)
    for tok in set([] if not internal(doc) else re.findall(r"(?<![\w./{},*-])((?:[\w-]+/)+[\w*{},-]+\.%s)\b" % FILE_EXT, text)):
        if tok.startswith(top) or PLACEHOLDER.search(tok):
            continue
        if not any(any(re.search(re.escape("/" + p).replace(r"\*", r"[\w-]*") + "$", e) for e in ends)
                   for p in expand(tok)):
            bad.append(f"{doc}: names {tok}, which is the end of no file's path in the tree")


def check_names(doc, text, src_text, known, bad):
    for tok in set(re.findall(r"\b((?:p2pkit?|P2PK)_\w+\*?)", text)):
        pat = re.escape(tok.rstrip("*")) + (r"\w*" if tok.endswith("*") else r"\b")
        if not re.search(r"\b" + pat, src_text):
            bad.append(f"{doc}: names {tok}, which no source has")
    # ARCHITECTURE and the decisions name p2pkit's own functions and tables
    # (the other documents also name torch's and nccl-tests')
    for tok in set(re.findall(r"`([a-z][a-z0-9]*_[a-z0-9_]+)(?:\[\]|\(\))?`", text) if internal(doc) else []):
        if not re.search(r"\b%s\b" % re.escape(tok), src_text):
            bad.append(f"{doc}: names {tok}, which no source has")
    for tok in set(re.findall(r"(?<![\w_])(P2PKIT_[A-Z0-9_*]*[A-Z0-9*])", text)):
        rx = re.compile(re.escape(tok).replace(r"\*", r"[A-Z0-9_]*") + r"$")
        if not any(rx.match(k) for k in known):
            bad.append(f"{doc}: names the setting {tok}, which neither the registry nor the "
                       f"public header nor the build has")


def check_homes(doc, text, root, files, bad):
    """`name` in `file`: the name is in that file (a bare file name: in any so named)."""
    for name, where in set(re.findall(r"`(\w+)(?:\(\)|\[\])?` in `([\w./-]+\.\w+)`", text)):
        homes = [where] if "/" in where else [f for f in files if os.path.basename(f) == where]
        if not any(re.search(r"\b%s\b" % re.escape(name), open(os.path.join(root, h), errors="replace").read())
                   for h in homes if os.path.isfile(os.path.join(root, h))):
            bad.append(f"{doc}: says {name} is in {where}, which does not hold it")


def where_table(text):
    m = re.search(r"### Where to change what\n(.*?)\n\n", text, flags=re.S)
    return [line for line in m.group(1).splitlines() if line.startswith("| ") and "---" not in line][1:] if m else []


def check_table(text, root, bad):
    rows = where_table(text)
    if len(rows) < 5:
        bad.append("docs/ARCHITECTURE.md: no 'Where to change what' table of 5 rows or more")
    for row in rows:
        cell = row.split("|")[2]
        last = None
        for tok, call in re.findall(r"`([^`]+?)(\[\]|\(\))?`", cell):
            tok = tok.strip()
            if re.fullmatch(r"[\w./{},*-]+\.\w+|[\w./-]+/", tok):
                paths = expand(tok) if "/" in tok else [os.path.join(os.path.dirname(last or ""), p) for p in expand(tok)]
                for p in paths:
                    hits = glob.glob(os.path.join(root, p))
                    if not hits:
                        bad.append(f"ARCHITECTURE's table: row '{row.split('|')[1].strip()}' names {p}, not in the tree")
                    elif "*" not in p:
                        last = p
            elif re.fullmatch(r"\w+", tok) and call and last and os.path.isfile(os.path.join(root, last)):
                if not re.search(r"\b%s\b" % re.escape(tok), open(os.path.join(root, last)).read()):
                    bad.append(f"ARCHITECTURE's table: {tok} is not in {last}")


def check_struct(text, root, bad):
    m = re.search(r"```c\n(typedef struct p2pk_path \{.*?\} p2pk_path;)\n```", text, flags=re.S)
    if not m:
        bad.append("docs/ARCHITECTURE.md: no listing of struct p2pk_path")
        return
    where = "src/coll/paths/path.h"
    if not os.path.isfile(os.path.join(root, where)):
        bad.append(f"{where}: not there, so the listing of struct p2pk_path checks nothing")
        return
    header = open(os.path.join(root, where)).read()
    real = re.search(r"typedef struct p2pk_path \{(.*?)\} p2pk_path;", header, flags=re.S).group(1)
    def fields(body):
        body = re.sub(r"/\*.*?\*/", " ", body, flags=re.S)
        body = re.sub(r"\(\*(\w+)\)", r" \1 ", body)  # a function pointer's name
        while re.search(r"\([^()]*\)", body):
            body = re.sub(r"\([^()]*\)", " ", body)  # and its parameters
        names = set()
        for decl in body.split(";"):
            for part in decl.split(","):
                m = re.search(r"(\w+)\s*(?:\[[^\]]*\])?\s*$", part.strip())
                if m:
                    names.add(m.group(1))
        return names
    listing = m.group(1)
    listed, have = fields(listing[listing.index("{") + 1:listing.rindex("}")]), fields(real)
    for f in sorted(have - listed):
        bad.append(f"docs/ARCHITECTURE.md: its listing of struct p2pk_path lacks {f}")
    for f in sorted(listed - have):
        bad.append(f"docs/ARCHITECTURE.md: its listing of struct p2pk_path has {f}, which path.h does not")


def check_registry_only(root, files, bad):
    for f in files:
        if f.startswith("src/") and f.endswith(SOURCE_EXT) and f != "src/core/param.c":
            for n, line in enumerate(open(os.path.join(root, f), encoding="utf-8"), 1):
                if re.search(r'getenv\("P2PKIT_', line):
                    bad.append(f"{f}:{n}: reads a P2PKIT_* setting with getenv, outside the registry")


def main():
    root = sys.argv[1]
    files = tree_files(root)
    src_text = sources_text(root, files)
    known = settings(root)
    docs = sorted(glob.glob(os.path.join(root, "docs/*.md")) + glob.glob(os.path.join(root, "docs/decisions/*.md")))
    docs.append(os.path.join(root, "README.md"))
    bad = []
    for path in docs:
        doc = os.path.relpath(path, root)
        text = open(path, encoding="utf-8").read()
        check_paths(doc, prose(text), root, files, bad)
        check_names(doc, prose(text), src_text, known, bad)
        check_homes(doc, prose(text), root, files, bad)
    arch = open(os.path.join(root, "docs/ARCHITECTURE.md"), encoding="utf-8").read()
    check_table(arch, root, bad)
    check_struct(arch, root, bad)
    check_registry_only(root, files, bad)
    for b in sorted(set(bad)):
        print(b)
    print(f"{len(docs)} documents, {len(set(bad))} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
