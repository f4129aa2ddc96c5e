#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""What libpmqos exports (client-lib/libpmqos/libpmqos.sym, the linker's version
script) and what the Debian symbols file promises are the same set of
symbol@node pairs, nodes included. dh_makeshlibs refuses the package build
on any difference; this says so in the structure suite, seconds after the
change instead of at the package step.

    check-symbols.py SOURCE_ROOT
"""
import os
import re
import sys


def exported(path):
    pairs = set()
    node = None
    scope = None
    text = re.sub(r'/\*.*?\*/', '', open(path, encoding='utf-8').read(), flags=re.S)
    for raw in text.splitlines():
        line = raw.strip()
        m = re.match(r'^([A-Za-z_][A-Za-z0-9_.]*)\s*\{$', line)
        if m:
            node, scope = m.group(1), None
            pairs.add('%s@%s' % (node, node))
            continue
        if line.startswith('}'):
            node = None
            continue
        if line in ('global:', 'local:'):
            scope = line[:-1]
            continue
        if node and scope == 'global' and line.endswith(';'):
            pairs.add('%s@%s' % (line[:-1].strip(), node))
    return pairs


def promised(path):
    pairs = set()
    for line in open(path, encoding='utf-8'):
        if line.startswith(' ') and not line.startswith(' *'):
            pairs.add(line.split()[0])
    return pairs


def main(root):
    sym = os.path.join(root, 'client-lib', 'libpmqos', 'libpmqos.sym')
    deb = os.path.join(root, 'packaging', 'debian', 'libpmqos1.symbols')
    a, b = exported(sym), promised(deb)
    for s in sorted(a - b):
        print('%s: exported by %s, missing from %s' % (s, sym, deb))
    for s in sorted(b - a):
        print('%s: listed in %s, not exported by %s' % (s, deb, sym))
    print('%d symbols exported, %d listed: %d differences' % (len(a), len(b), len(a ^ b)))
    return 1 if a ^ b else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1]))
