#!/usr/bin/env python3
"""Import circles between a crate's modules.

For every crate directory given (default: each workspace member's src/),
builds the graph of its module files: an edge A -> B when code in A names
a path into B through `crate::`, `super::` or `self::` (in a `use` or
inline), with comments and string literals skipped. A path that ends at an
item a module re-exports (`pub use`, `pub(crate) use`) is followed to the
module that defines it, and the re-export itself is no edge: a parent's
facade does not make a circle with the child it re-exports. A path from a
module up to one that contains it (`super::Execution` in a child of
`execution`) is no edge either: a child is part of its parent, and circles
are counted between modules neither of which contains the other. Inline modules
(`mod tests { .. }`) belong to their file. Prints each strongly connected
set of two or more files with one circle through it, then the same for the
graph of the crate's top-level modules (each directory or file under src/
with everything below it: what a split into crates would have to keep
acyclic), and exits 1 when it found any.

    scripts/module-cycles.py            # every crate of the workspace
    scripts/module-cycles.py vmm/src    # one crate
"""

import os
import re
import sys
from pathlib import Path


def strip(src):
    """The source with comments, strings and char literals blanked (newlines kept)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif re.match(r'(b?r(#*)")', src[i:i + 40]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'b?r(#*)"', src[i:])
            end = '"' + m.group(1)
            j = src.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == "'":
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'\n])'", src[i:])
            if m:
                out.append(" " * m.end())
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def modules(src_dir):
    """File -> module path (tuple) for every .rs file under src_dir."""
    mods = {}
    for p in sorted(Path(src_dir).rglob("*.rs")):
        rel = p.relative_to(src_dir).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "mod" or (len(parts) == 1 and parts[0] in ("lib", "main")):
            parts = parts[:-1]
        mods[p] = tuple(parts)
    return mods


def split_tree(tree):
    """Expands a use tree (`a::{b, c::d as e}`) into paths of segments."""
    # `Item as Name` names Item (the rename is dropped before the blanks).
    tree = re.sub(r"\s+as\s+[A-Za-z_][A-Za-z0-9_]*", "", tree)
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix, s):
        depth, start, items = 0, 0, []
        for k, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                items.append(s[start:k])
                start = k + 1
        items.append(s[start:])
        for it in filter(None, items):
            if "{" in it:
                head, rest = it.split("{", 1)
                walk(prefix + [x for x in head.split("::") if x], rest[: rest.rfind("}")])
            else:
                segs = [x for x in re.split(r"::", it) if x]
                out.append(prefix + segs)

    walk([], tree)
    return out


PATH = re.compile(r"\b(?:crate|super|self)(?:::(?:super|[A-Za-z_][A-Za-z0-9_]*|\*))+")
USE = re.compile(r"\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);")
INLINE_MOD = re.compile(r"\bmod\s+([A-Za-z_][A-Za-z0-9_]*)\s*\{")


def inline_spans(code):
    """(start, end, name) of each inline module block."""
    spans = []
    for m in INLINE_MOD.finditer(code):
        depth, j = 0, m.end() - 1
        while j < len(code):
            if code[j] == "{":
                depth += 1
            elif code[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        spans.append((m.start(), j, m.group(1)))
    return spans


def analyse(src_dir):
    mods = modules(src_dir)
    known = set(mods.values())
    file_of = {m: p for p, m in mods.items()}
    uses = []  # (file module, current module, segments, is_reexport)
    for path, mod in mods.items():
        code = strip(path.read_text())
        spans = inline_spans(code)

        def cur_at(pos):
            inner = [name for (s, e, name) in spans if s <= pos <= e]
            return mod + tuple(inner)

        taken = []
        for m in USE.finditer(code):
            taken.append((m.start(), m.end()))
            reexport = m.group(1) is not None
            for segs in split_tree(m.group(2)):
                if segs and segs[0] in ("crate", "super", "self"):
                    uses.append((mod, cur_at(m.start()), segs, reexport))
                elif segs and reexport:
                    # `pub use child::Item;` in a module: relative to it.
                    uses.append((mod, cur_at(m.start()), ["self"] + segs, True))
        for m in PATH.finditer(code):
            if any(s <= m.start() < e for s, e in taken):
                continue
            uses.append((mod, cur_at(m.start()), m.group(0).split("::"), False))

    reexports = {}  # (module, name) -> (current module, segments)
    for fmod, cur, segs, reexport in uses:
        if reexport and segs[-1] not in ("*", "self"):
            reexports[(cur, segs[-1])] = (cur, segs)

    def resolve(cur, segs, depth=0):
        at = list(cur)
        k = 0
        while k < len(segs) and segs[k] in ("crate", "super", "self"):
            if segs[k] == "crate":
                at = []
            elif segs[k] == "super":
                at = at[:-1]
            k += 1
        while k < len(segs) and tuple(at + [segs[k]]) in known:
            at.append(segs[k])
            k += 1
        # Inline modules (tests) are part of their file.
        while tuple(at) not in known and at:
            at = at[:-1]
        if k < len(segs) and depth < 8 and (tuple(at), segs[k]) in reexports:
            rcur, rsegs = reexports[(tuple(at), segs[k])]
            return resolve(rcur, rsegs, depth + 1)
        return tuple(at)

    edges = {m: set() for m in known}
    for fmod, cur, segs, reexport in uses:
        if reexport:
            continue
        to = resolve(cur, segs)
        # A path from a module up to one that contains it is no edge: a
        # child module is part of its parent (it sees the parent's private
        # items, and `impl Parent` in a child is how Rust spreads one
        # type's methods over files).
        if to != fmod and to in known and fmod[: len(to)] != to:
            edges[fmod].add(to)
    return edges, file_of


def sccs(edges):
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
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
            out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return [c for c in out if len(c) > 1]


def circle(edges, comp):
    """One circle through the set's first module (a shortest one)."""
    start, inside = comp[0], set(comp)
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(edges[v]):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return list(reversed(path)) + [start]
                if w in inside and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return comp


def name(m):
    return "/".join(m) or "(root)"


def main():
    root = Path(__file__).resolve().parent.parent
    dirs = sys.argv[1:]
    if not dirs:
        dirs = sorted(
            str(p.parent.relative_to(root))
            for p in root.glob("**/src/lib.rs")
            if "target" not in p.parts and not any(x.startswith(".") for x in p.relative_to(root).parts)
        )
        dirs = [d for d in dirs if not d.startswith("fuzz")] + (["fuzz/src"] if (root / "fuzz/src").is_dir() else [])
    found = 0
    for d in dirs:
        src = Path(d) if os.path.isabs(d) else root / d
        if not src.is_dir():
            print(f"module-cycles: {d}: no such directory", file=sys.stderr)
            sys.exit(2)
        edges, _ = analyse(src)
        for comp in sccs(edges):
            found += 1
            print(f"{d}: {len(comp)} modules in a circle: " + " -> ".join(name(m) for m in circle(edges, comp)))
        top = {}
        for a, bs in edges.items():
            top.setdefault(a[:1], set())
            for b in bs:
                if a[:1] != b[:1]:
                    top[a[:1]].add(b[:1])
                    top.setdefault(b[:1], set())
        for comp in sccs(top):
            found += 1
            print(f"{d}: {len(comp)} top-level modules in a circle: " + " -> ".join(name(m) for m in circle(top, comp)))
    print(f"module-cycles: {len(dirs)} crate directories, {found} circles")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
