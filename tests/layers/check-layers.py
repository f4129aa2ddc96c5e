#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The daemon's layers, checked from its includes (and, given object files,
its calls): every arrow between two modules (a .c and its .h are one module)
must point to the module's own layer or one below it, and no arrows may form
a circle; of the daemon's layers, client-lib may include only util/. Prints each arrow that runs up and each circle, and a summary line;
exits 1 if there is any.

    check-layers.py SOURCE_ROOT [DAEMON_BUILD_DIR | OBJECT...]

Given the daemon's build directory, its object files are those of the
layers' libraries and of pmqosd (not of the layer-check programs).
"""
import os
import re
import subprocess
import sys

# What each layer may include or call besides itself (daemon/meson.build).
BELOW = {
    'util': set(),
    'model': {'util'},
    'conf': {'model', 'util'},
    'sys': {'model', 'util'},
    'record': {'sys', 'model', 'util'},
    'core': {'record', 'sys', 'conf', 'model', 'util'},
    'bus': {'core', 'record', 'sys', 'conf', 'model', 'util'},
    'main': {'bus', 'core', 'record', 'sys', 'conf', 'model', 'util'},
}
# dbus/contract.h is the contract's names: below every layer that knows pmqos.
CONTRACT = 'dbus/contract'

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(module):
    parts = module.split('/')
    if module == CONTRACT:
        return 'contract'
    if parts[0] == 'daemon' and len(parts) == 2:
        return 'main'
    if parts[0] == 'daemon' and parts[1] in BELOW:
        return parts[1]
    return None


def modules(root):
    """module ('daemon/util/log') → list of its files, relative to root."""
    found = {}
    for top in ('daemon', 'dbus'):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if f.endswith(('.c', '.h')):
                    rel = os.path.relpath(os.path.join(dirpath, f), root)
                    found.setdefault(rel[:-2], []).append(rel)
    return found


def include_arrows(root, mods):
    arrows = {}
    for mod, files in mods.items():
        for f in files:
            with open(os.path.join(root, f), encoding='utf-8') as fh:
                text = fh.read()
            for inc in INCLUDE.findall(text):
                if inc == 'dbus/contract.h':
                    target = CONTRACT
                else:
                    target = 'daemon/' + inc[:-2]
                if target not in mods:
                    arrows.setdefault((mod, target), f'{f}: #include "{inc}" names no module '
                                      '(includes name the layer: "util/log.h")')
                    continue
                if target != mod:
                    arrows.setdefault((mod, target), f'{f}: #include "{inc}"')
    return arrows


def call_arrows(root, objects):
    """Arrows from the object files: a module that uses a symbol another defines."""
    defined, used = {}, {}
    for obj in objects:
        # meson names objects daemon/libX.a.p/util_log.c.o or daemon/pmqosd.p/main.c.o
        base = os.path.basename(obj)[:-len('.c.o')]
        mod = 'daemon/' + base.replace('_', '/', 1) if '_' in base and base.split('_')[0] in BELOW \
            else 'daemon/' + base
        out = subprocess.run(['nm', '--defined-only', '-g', obj], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            sym = line.split()[-1]
            defined[sym] = mod
        out = subprocess.run(['nm', '-u', obj], capture_output=True, text=True, check=True).stdout
        used[mod] = {line.split()[-1] for line in out.splitlines() if line.strip()}
    arrows = {}
    for mod, syms in used.items():
        for sym in sorted(syms):
            target = defined.get(sym)
            if target and target != mod:
                arrows.setdefault((mod, target), f'{mod}.c calls {sym}()')
    return arrows


def circles(edges):
    """Strongly connected components of more than one module (Tarjan)."""
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
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
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def client_arrows(root):
    """client-lib (libpmqos, pmqosctl) may use of the daemon's tree only util/
    and the contract: anything else would be a second daemon inside it."""
    out = []
    folder = os.path.join(root, 'client-lib')
    if not os.path.isdir(folder):
        return out
    for f in sorted(os.listdir(folder)):
        if not f.endswith(('.c', '.h')):
            continue
        with open(os.path.join(folder, f), encoding='utf-8') as fh:
            for inc in INCLUDE.findall(fh.read()):
                layer = inc.split('/')[0] if '/' in inc else None
                if layer in BELOW and layer != 'util':
                    out.append(f'client-lib/{f}: #include "{inc}": of the daemon, client-lib may use only util/')
    return out


def main():
    root = sys.argv[1]
    objects = []
    for arg in sys.argv[2:]:
        if os.path.isdir(arg):
            for sub in sorted(os.listdir(arg)):
                if sub.endswith('.p') and (sub.startswith('libpmqos-') or sub == 'pmqosd.p'):
                    objects += sorted(os.path.join(arg, sub, f) for f in os.listdir(os.path.join(arg, sub))
                                      if f.endswith('.c.o'))
        else:
            objects.append(arg)
    mods = modules(root)
    arrows = include_arrows(root, mods)
    kinds = 'includes'
    if objects:
        arrows.update({k: v for k, v in call_arrows(root, objects).items() if k not in arrows})
        kinds = 'includes and calls'
    up = []
    for (a, b), why in sorted(arrows.items()):
        la, lb = layer_of(a), layer_of(b)
        if lb is None:
            up.append(f'{why}')
        elif lb == 'contract':
            if la == 'util':
                up.append(f'{why}: util knows nothing of pmqos')
        elif la != lb and lb not in BELOW[la]:
            up.append(f'{why}: {la} may not reach {lb}')
    up += client_arrows(root)
    rings = circles(arrows.keys())
    for line in up:
        print('UP     ' + line)
    for ring in rings:
        print('CIRCLE ' + ' ↔ '.join(m[len('daemon/'):] for m in ring))
    print(f'{len(mods)} modules, {len(arrows)} arrows ({kinds}): '
          f'{len(up)} running up, {len(rings)} circles')
    return 1 if up or rings else 0


if __name__ == '__main__':
    sys.exit(main())
