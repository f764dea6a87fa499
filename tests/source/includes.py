#!/usr/bin/env python3
"""includes.py DIR - the include graph of DIR's own headers and sources
(#include "x.h" lines naming a file of DIR), and its cycles.

Prints one line per file, "FILE: A.h B.h ..." (what it includes of DIR),
then one "cycle: A.h -> B.h -> A.h" line per cycle found; exits 1 when there
is one.  Header guards let a cycle compile, but then no header can be read
(or changed) without the others: the dependencies are no longer a path.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def graph(d):
    files = sorted(f for f in os.listdir(d) if f.endswith((".c", ".h")))
    own = set(files)
    g = {}
    for f in files:
        with open(os.path.join(d, f), errors="replace") as fh:
            g[f] = [h for h in INCLUDE.findall(fh.read()) if h in own]
    return g


def cycles(g):
    """Every cycle through the headers, each once (from its least name)."""
    found = set()

    def walk(start, node, path, on_path):
        for nxt in g.get(node, []):
            if nxt == start:
                found.add(tuple(path))
            elif nxt not in on_path and nxt > start:
                on_path.add(nxt)
                walk(start, nxt, path + [nxt], on_path)
                on_path.discard(nxt)

    for f in sorted(g):
        walk(f, f, [f], {f})
    return sorted(found)


def main():
    d = sys.argv[1]
    g = graph(d)
    for f in sorted(g):
        print(f"{f}: {' '.join(g[f])}")
    cs = cycles(g)
    for c in cs:
        print("cycle: " + " -> ".join(list(c) + [c[0]]))
    sys.exit(1 if cs else 0)


if __name__ == "__main__":
    main()
