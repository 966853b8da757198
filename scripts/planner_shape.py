#!/usr/bin/python3
"""planner_shape.py: the shape of planner/ -- its longest functions and which
file calls functions defined in which other file.

Usage: scripts/planner_shape.py [planner_dir]   (default: planner next to scripts/)

Function lengths: from the line of the name to the closing brace, inclusive. The file
graph: for every planner/*.c, the non-static functions it defines; then
for every other .c, an edge A -> B when A's code (comments and strings removed)
calls a function defined in B. Cycles are reported as strongly connected
components; with none, the files are printed in an order where each calls only
files listed after it (a line).

Exits 1 when the files form a cycle or a function is MAX_LINES lines or
longer (issue 23's bounds; the unit test planner_shape runs it).
"""
import os, re, sys

MAX_LINES = 150


def functions(path):
    """(name, first line, last line, static) of each function defined in
    path. House style makes this a line scan: a definition starts at column
    0 with `type name(` and no `;`, its body opens with `{` alone on a line
    and closes with `}` alone on a line."""
    lines = open(path).read().split('\n')
    res, i = [], 0
    while i < len(lines):
        l = lines[i]
        m = re.match(r'[A-Za-z_][\w \*]*?\b([A-Za-z_]\w*)\s*\(', l)
        if m and not l.startswith(('typedef', 'return', 'else', 'if ', 'for ', 'while ')) and not l.rstrip().endswith(';'):
            if l.rstrip().endswith('}'):  # a definition on one line
                res.append((m.group(1), i + 1, i + 1, l.startswith('static')))
                i += 1
                continue
            j = i
            while j < len(lines) and lines[j] != '{' and not lines[j].rstrip().endswith(';') and j - i < 6:
                j += 1
            if j < len(lines) and lines[j] == '{':
                k = j
                while lines[k] != '}':
                    k += 1
                res.append((m.group(1), i + 1, k + 1, l.startswith('static')))
                i = k
        i += 1
    return res

def strip(src):
    src = re.sub(r'/\*.*?\*/', ' ', src, flags=re.S)
    src = re.sub(r'//[^\n]*', ' ', src)
    src = re.sub(r'"(\\.|[^"\\])*"', '""', src)
    src = re.sub(r"'(\\.|[^'\\])*'", "''", src)
    return src

def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..', 'planner')
    files = sorted(f for f in os.listdir(d) if f.endswith('.c'))
    fns, defined = [], {}
    for f in files:
        for name, start, end, is_static in functions(os.path.join(d, f)):
            fns.append((end - start + 1, name, f))
            if not is_static:
                defined[name] = f
    print('Longest functions (lines, from the line of the name to the closing brace):')
    print()
    print('| lines | function | file |')
    print('| ---: | --- | --- |')
    for n, name, f in sorted(fns, reverse=True)[:10]:
        print(f'| {n} | `{name}` | {f} |')
    edges = {f: {} for f in files}
    for f in files:
        src = strip(open(os.path.join(d, f)).read())
        for name in set(re.findall(r'\b([A-Za-z_]\w*)\s*\(', src)):
            g = defined.get(name)
            if g and g != f:
                edges[f].setdefault(g, []).append(name)
    print()
    print('File graph (A -> B: A calls functions defined in B):')
    print()
    for f in files:
        if edges[f]:
            print(f'    {f} -> ' + ', '.join(f'{g} ({len(v)})' for g, v in sorted(edges[f].items())))
    # Tarjan's strongly connected components.
    index, low, stack, on, sccs, cnt = {}, {}, [], set(), [], [0]
    def visit(v):
        index[v] = low[v] = cnt[0]; cnt[0] += 1
        stack.append(v); on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            sccs.append(sorted(comp))
    for f in files:
        if f not in index:
            visit(f)
    cycles = [c for c in sccs if len(c) > 1]
    print()
    if cycles:
        for c in cycles:
            print('Cycle: ' + ', '.join(c) + ' (files that reach each other through calls)')
    else:
        # sccs come out callees first: reversed, each file calls only later ones.
        print('No cycle. Layers (a file calls only files on lines below it):')
        print()
        depth = {}
        for c in sccs:
            f = c[0]
            depth[f] = 1 + max((depth[g] for g in edges[f]), default=-1)
        for k in range(max(depth.values()), -1, -1):
            print(f'    {k}: ' + ', '.join(sorted(f for f in files if depth[f] == k)))
    too_long = [f'{name} ({n} lines, {f})' for n, name, f in fns if n >= MAX_LINES]
    if too_long:
        print()
        print(f'Functions of {MAX_LINES} lines or more: ' + ', '.join(too_long))
    return 1 if cycles or too_long else 0

if __name__ == '__main__':
    sys.exit(main())
