#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""One D-Bus client of pmqosd: libpmqos. No product file outside the daemon
and libpmqos opens a bus connection or makes a bus call, except those listed
below with what they call (never pmqosd); and no product file outside them
names pmqosd's bus name, object path or interfaces beside a bus call. The
stand-in, the hook, pmqosctl and the Python binding ask pmqosd through
libpmqos, so its error mapping, timeouts and checks hold for all of them.
The tests, benches and the stress program talk to pmqosd directly on
purpose (they are its clients and adversaries) and are not product code.
Prints each file that breaks this and a summary line; exits 1 if any.

    check-bus-clients.py SOURCE_ROOT
"""
import os
import re
import sys

PRODUCTS = ('client-lib', 'bindings', 'policy')
# The one client of pmqosd, and the daemon itself.
ALLOWED = ('daemon/', 'client-lib/libpmqos/')
# Files that call another service over the bus, and which.
OTHER_SERVICES = {
    'client-lib/pmqosctl/pmqosctl-request.c': 'org.freedesktop.systemd1',
}
BUS_CALL = re.compile(r'\b(sd_bus_open\w*|sd_bus_default\w*|sd_bus_call\w*|sd_bus_message_new_method_call'
                      r'|sd_bus_get_property\w*|sd_bus_set_property\w*|g_dbus_\w+|Gio\.DBus\w*|dbus\.\w*Bus)\b')
PMQOSD = re.compile(r'org\.freedesktop\.(PMQoS|UPower\.QoS)|/org/freedesktop/(PMQoS|UPower)'
                    r'|\bPMQOS_(BUS_NAME|OBJECT_PATH|NATIVE_INTERFACE|QOS_INTERFACE|QOS_PATH)\b')
# Comments are not calls.
COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*|^\s*#(?!\s*include)[^\n]*', re.S | re.M)


def main(root):
    bad, n_files = [], 0
    for top in PRODUCTS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith(('.c', '.h', '.py')):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, f), root)
                if rel.startswith(ALLOWED):
                    continue
                n_files += 1
                with open(os.path.join(root, rel), encoding='utf-8') as fh:
                    text = COMMENT.sub('', fh.read())
                calls = sorted(set(m.group(1) for m in BUS_CALL.finditer(text)))
                names = sorted(set(m.group(0) for m in PMQOSD.finditer(text)))
                if calls and rel not in OTHER_SERVICES:
                    bad.append(f'{rel}: calls {", ".join(calls)} outside libpmqos: ask pmqosd through libpmqos')
                elif calls and names:
                    bad.append(f'{rel}: calls {OTHER_SERVICES[rel]} and names pmqosd ({", ".join(names)})')
    for line in bad:
        print('CLIENT ' + line)
    print(f'{n_files} product files outside the daemon and libpmqos: {len(bad)} second clients of pmqosd')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1]))
