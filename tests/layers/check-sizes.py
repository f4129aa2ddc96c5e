#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The sizes the house keeps: no source file of the given folders (C and
Python) over 500 lines (tests/, benches and fuzz targets included: 800), no
C function over 80 (from its first line to its closing brace), tests too.
Prints each one over and a summary line; exits 1 if there is any.

    check-sizes.py SOURCE_ROOT FOLDER...
"""
import os
import re
import sys

FILE_MAX = 500
TEST_FILE_MAX = 800
FUNCTION_MAX = 80
# A definition at the top level: a declarator at column 0 whose parameter
# list (on this line or the next few) ends in "{".
HEAD = re.compile(r'^[A-Za-z_][^;=#]*\(')


def functions(lines):
    n = 0
    while n < len(lines):
        line = lines[n]
        if HEAD.match(line) and not line.startswith(('struct', 'enum', 'typedef', 'union', 'static const')):
            name = line.split('(')[0].split()[-1].lstrip('*')
            k = n
            while k < len(lines) and k < n + 6 and not lines[k].rstrip().endswith(('{', ';')):
                k += 1
            if k < len(lines) and lines[k].rstrip().endswith('{') and ';' not in lines[k]:
                end = k
                while end < len(lines) and not lines[end].startswith('}'):
                    end += 1
                yield name, n + 1, end - n + 1
                n = end
        n += 1


def main():
    root, folders = sys.argv[1], sys.argv[2:]
    over = []
    n_files = n_functions = 0
    for folder in folders:
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for f in sorted(files):
                if not f.endswith(('.c', '.h', '.py')):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                with open(path, encoding='utf-8') as fh:
                    lines = fh.read().split('\n')
                n_files += 1
                most = TEST_FILE_MAX if rel.startswith('tests' + os.sep) else FILE_MAX
                if len(lines) - 1 > most:
                    over.append(f'{rel}: {len(lines) - 1} lines (at most {most})')
                for name, start, length in functions(lines) if not f.endswith('.py') else ():
                    n_functions += 1
                    if length > FUNCTION_MAX:
                        over.append(f'{rel}:{start}: {name}() is {length} lines (at most {FUNCTION_MAX})')
    for line in over:
        print('OVER   ' + line)
    print(f'{n_files} files, {n_functions} functions in {", ".join(folders)}: {len(over)} over')
    return 1 if over else 0


if __name__ == '__main__':
    sys.exit(main())
