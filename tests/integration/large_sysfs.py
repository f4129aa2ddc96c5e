# SPDX-License-Identifier: LGPL-2.1-or-later
"""A large machine's fake sysfs (512 CPUs × 6 states) and a client that
calls Explain() in a loop: shared by test_explain and the Explain bench."""

import os

from fake_sysfs import make_fake_sysfs

# One CPU model: (name, latency); usage and time differ per CPU, C8 is
# disabled on odd CPUs.
LARGE_MODEL = [("POLL", 0), ("C1", 1), ("C1E", 4), ("C3", 40), ("C6", 133), ("C8", 400)]
LARGE_CPUS = 512


def large_state(cpu, k):
    """(name, latency, disable, usage, time) of a state of the large tree."""
    name, latency = LARGE_MODEL[k]
    return name, latency, int(k == 5 and cpu % 2 == 1), cpu * 1000 + k, cpu * 100000 + k


def make_large_sysfs():
    """The tree, every CPU online with no per-CPU bound; the caller removes it."""
    root = make_fake_sysfs({cpu: "0" for cpu in range(LARGE_CPUS)})
    for cpu in range(LARGE_CPUS):
        for k in range(len(LARGE_MODEL)):
            d = os.path.join(root, "devices/system/cpu/cpu%d/cpuidle/state%d" % (cpu, k))
            os.makedirs(d)
            for f, v in zip(("name", "latency", "disable", "usage", "time"), large_state(cpu, k)):
                with open(os.path.join(d, f), "w") as fh:
                    fh.write("%s\n" % v)
    return root


# The bus budget (MaxCallsPerSecondPerUser: Explain on 512 CPUs costs 129
# calls' worth) would slow a flood down: with this only pmqosd's own work does.
UNLIMITED_CONFIG = ("[pmqosd]\nMaxCallsPerSecondPerUser=1000000\nMaxUnreadBytesPerConnection=1073741824\n"
                    "MaxUnreadBytesPerUser=1073741824\n")

# python3 -c FLOODER BUS_NAME PATH IFACE N: calls Explain() on the bus of
# $DBUS_SYSTEM_BUS_ADDRESS as fast as its answers come, N times, and prints
# how many were answered and how many refused.
FLOODER = r"""
import os, sys
import gi
gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib
conn = Gio.DBusConnection.new_for_address_sync(
    os.environ["DBUS_SYSTEM_BUS_ADDRESS"],
    Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, None, None)
answered = refused = 0
for _ in range(int(sys.argv[4])):
    try:
        conn.call_sync(sys.argv[1], sys.argv[2], sys.argv[3], "Explain", None, None, 0, 600000, None)
        answered += 1
    except GLib.Error:
        refused += 1
print(answered, refused, flush=True)
"""
