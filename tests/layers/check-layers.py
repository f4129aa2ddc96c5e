#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The daemon's layers, checked from its includes (and, given object files,
its calls): every arrow between two modules (a .c and its .h are one module)
must point to the module's own layer or one below it, and no arrows may form
a circle. The client side likewise (client_side() below): libpmqos uses
only the shared base (daemon/util) and the contract, pmqosctl, the OCI hook
and the examples only libpmqos's pmqos.h, the base and the contract, no
product another's files, and no circle. Prints each arrow that runs up or
breaks a rule and each circle, and a summary line; exits 1 if there is any.

    check-layers.py SOURCE_ROOT [DAEMON_BUILD_DIR | OBJECT...] [BUILD_ROOT]

Given the daemon's build directory, its object files are those of the
layers' libraries and of pmqosd (not of the layer-check programs); given
the build root, the client products' objects too.
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


# The client side (client-lib/DESIGN.md): one folder per product. libpmqos
# may use the shared base (daemon/util) and the contract only; the others
# libpmqos's public header, the base and the contract; no product reaches
# into another's folder, nor into libpmqos's inside.
LIBPMQOS = 'client-lib/libpmqos'
CLIENT_PRODUCTS = (LIBPMQOS, 'client-lib/pmqosctl', 'client-lib/oci-hook', 'client-lib/examples')
PUBLIC_HEADER = LIBPMQOS + '/pmqos.h'


def client_product(rel):
    for p in CLIENT_PRODUCTS:
        if rel.startswith(p + '/'):
            return p
    return None


def client_modules(root):
    """module ('client-lib/pmqosctl/standin/standin-fs') → its files; and
    files of client-lib that stand in no product folder."""
    found, loose = {}, []
    for dirpath, _, files in os.walk(os.path.join(root, 'client-lib')):
        for f in files:
            if f.endswith(('.c', '.h')):
                rel = os.path.relpath(os.path.join(dirpath, f), root)
                if client_product(rel):
                    found.setdefault(rel[:-2], []).append(rel)
                else:
                    loose.append(rel)
    return found, sorted(loose)


def client_include_arrows(root, mods, up):
    """Arrows between client modules from their includes; what breaks the
    rules above goes to up."""
    arrows = {}
    for mod, files in sorted(mods.items()):
        product = client_product(files[0])
        for f in files:
            with open(os.path.join(root, f), encoding='utf-8') as fh:
                text = fh.read()
            for inc in INCLUDE.findall(text):
                first = inc.split('/')[0]
                if inc == 'dbus/contract.h' or first == 'util':
                    continue
                if first in BELOW:
                    up.append(f'{f}: #include "{inc}": of the daemon, the client side may use only util/')
                    continue
                target = os.path.normpath(os.path.join(os.path.dirname(f), inc))
                if not os.path.exists(os.path.join(root, target)) and inc == 'pmqos.h':
                    target = PUBLIC_HEADER
                if not os.path.exists(os.path.join(root, target)):
                    up.append(f'{f}: #include "{inc}" names no file beside it (nor pmqos.h)')
                    continue
                other = client_product(target)
                if other != product and target != PUBLIC_HEADER:
                    up.append(f'{f}: #include "{inc}": {product} may not reach into {other or target}'
                              + (' (libpmqos only through pmqos.h)' if other == LIBPMQOS else ''))
                    continue
                if target[:-2] != mod:
                    arrows.setdefault((mod, target[:-2]), f'{f}: #include "{inc}"')
    return arrows


def client_call_arrows(root, build, mods, up):
    """Arrows from the client products' objects (meson names them
    DIR/TARGET.p/SUB_FILE.c.o); an object built from another folder's
    source is a product borrowing another's code."""
    objects = {}
    for dirpath, _, files in os.walk(os.path.join(build, 'client-lib')):
        for f in files:
            if not f.endswith('.c.o') or not dirpath.endswith('.p'):
                continue
            folder = os.path.relpath(os.path.dirname(dirpath), build)
            src = f[:-len('.c.o')]
            if src.startswith('..'):
                up.append(f'{folder}: builds {src.replace("_", "/")}.c, another folder\'s source: link its library')
                continue
            mod = folder + '/' + src.replace('_', '/')
            if mod in mods:
                objects[os.path.join(dirpath, f)] = mod
    defined, used = {}, {}
    for obj, mod in objects.items():
        out = subprocess.run(['nm', '--defined-only', '-g', obj], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            defined.setdefault(line.split()[-1], mod)
        out = subprocess.run(['nm', '-u', obj], capture_output=True, text=True, check=True).stdout
        used.setdefault(mod, set()).update(line.split()[-1] for line in out.splitlines() if line.strip())
    arrows = {}
    for mod, syms in used.items():
        for sym in sorted(syms):
            target = defined.get(sym)
            if target and target != mod:
                arrows.setdefault((mod, target), f'{mod}.c calls {sym}()')
    return arrows


def client_side(root, build):
    up = []
    mods, loose = client_modules(root)
    for f in loose:
        up.append(f'{f}: stands in no product folder ({", ".join(CLIENT_PRODUCTS)})')
    arrows = client_include_arrows(root, mods, up)
    if build:
        arrows.update({k: v for k, v in client_call_arrows(root, build, mods, up).items() if k not in arrows})
    return mods, arrows, up


def main():
    root = sys.argv[1]
    objects = []
    build = None
    for arg in sys.argv[2:]:
        if os.path.isdir(os.path.join(arg, 'client-lib')):
            build = arg  # the build root: the client side's objects
        elif os.path.isdir(arg):
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
    rings = circles(arrows.keys())
    client_mods, client_arrows, client_up = client_side(root, build)
    client_rings = circles(client_arrows.keys())
    for line in up:
        print('UP     ' + line)
    for ring in rings:
        print('CIRCLE ' + ' ↔ '.join(m[len('daemon/'):] for m in ring))
    for line in client_up:
        print('CLIENT ' + line)
    for ring in client_rings:
        print('CIRCLE ' + ' ↔ '.join(ring))
    print(f'daemon: {len(mods)} modules, {len(arrows)} arrows ({kinds}): '
          f'{len(up)} running up, {len(rings)} circles')
    print(f'client side: {len(client_mods)} modules, {len(client_arrows)} arrows '
          f'({"includes and calls" if build else "includes"}): {len(client_up)} breaking its rules, '
          f'{len(client_rings)} circles')
    up += client_up
    rings += client_rings
    return 1 if up or rings else 0


if __name__ == '__main__':
    sys.exit(main())
