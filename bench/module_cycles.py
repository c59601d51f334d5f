#!/usr/bin/env python3
"""Prints the import graph between a crate's top-level modules (from `crate::x` paths in
each file; comments, `#[cfg(test)] mod tests` blocks and `tests.rs` files left out) and
every cycle in it; exits 1 when there is one.

Usage: python3 bench/module_cycles.py gpuscope-runtime/src
"""
import os, re, sys
from itertools import chain

root = sys.argv[1] if len(sys.argv) > 1 else "gpuscope-runtime/src"
mods = {}
for dirpath, _, files in os.walk(root):
    for f in files:
        if not f.endswith(".rs") or f == "tests.rs":
            continue  # test modules (`mod tests;` files) are not part of the layering
        path = os.path.join(dirpath, f)
        rel = os.path.relpath(path, root)
        top = rel.split(os.sep)[0].removesuffix(".rs")
        if top in ("lib", "main"):
            continue
        text = open(path).read()
        # Drop `#[cfg(test)] mod tests { .. }` tails and comments.
        text = re.split(r"#\[cfg\(test\)\]\s*mod tests", text)[0]
        text = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("//"))
        deps = set(re.findall(r"crate::([a-z_]+)", text))
        # `use crate::{a, b::c}` groups
        for group in re.findall(r"crate::\{([^}]*)\}", text):
            deps |= set(re.findall(r"(?:^|,)\s*([a-z_]+)", group))
        mods.setdefault(top, set()).update(d for d in deps if d != top)
known = set(mods)
graph = {m: sorted(d for d in ds if d in known) for m, ds in mods.items()}
for m in sorted(graph):
    print(f"{m} -> {', '.join(graph[m]) or '-'}")
# Strongly connected components (Tarjan).
index, low, stack, on, sccs, i = {}, {}, [], set(), [], [0]
def visit(v):
    index[v] = low[v] = i[0]; i[0] += 1; stack.append(v); on.add(v)
    for w in graph[v]:
        if w not in index:
            visit(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1: sccs.append(sorted(comp))
for v in graph:
    if v not in index:
        visit(v)
print("cycles:", sccs if sccs else "none")
sys.exit(1 if sccs else 0)
