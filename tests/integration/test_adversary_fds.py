# SPDX-License-Identifier: LGPL-2.1-or-later
"""Descriptors nobody asked for: a user without rights sends calls that
carry unix fds their signature never references (the bus lets 16 ride on
any message). pmqosd keeps a call while the bus says who made it or polkit
decides, and a kept message keeps its descriptors; once they filled pmqosd's
table, the next message with descriptors was cut short (MSG_CTRUNC), sd-bus
dropped the bus and pmqosd exited ("Lost the connection to the system bus")
— every request bound to a descriptor, process or cgroup ended with it. Now
the calls kept at once are bounded by what the descriptor limit leaves room
for: pmqosd lives and root is answered within a second throughout."""

import os
import subprocess
import sys
import threading
import time
import unittest

from adversary import AdversaryTestCase, polkit_ready, set_up_module, tear_down_module
from fixtures import NOBODY, TIME_SCALE, main

setUpModule = set_up_module
tearDownModule = tear_down_module

# Honest callers are answered within this, scaled for checkers.
HONEST_BOUND = 1.0 * TIME_SCALE

FLOOD = r'''
import os, sys, gi
gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib
address, n_conns, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
nul = os.open("/dev/null", os.O_RDONLY)
left = [0]
def done(c, r, _):
    left[0] -= 1
    try:
        c.call_with_unix_fd_list_finish(r)
    except Exception:
        pass
for _ in range(rounds):
    conns = [Gio.DBusConnection.new_for_address_sync(address, flags, None, None) for i in range(n_conns)]
    for c in conns:  # 16 calls a connection (MaxPendingPerConnection) x 16 fds (the bus's bound per message)
        for j in range(16):
            fdl = Gio.UnixFDList.new()
            for f in range(16):
                fdl.append(nul)  # descriptors the body never references
            left[0] += 1
            c.call_with_unix_fd_list("org.freedesktop.PMQoS", "/org/freedesktop/PMQoS", "org.freedesktop.PMQoS",
                                     "Request", GLib.Variant("(sia{sv})", ("cpu_dma", 10, {})), None, 0, 5000, fdl,
                                     None, done, None)
    while left[0] > 0:
        GLib.MainContext.default().iteration(True)
    for c in conns:
        c.close_sync(None)
print("done")
'''


@unittest.skipUnless(polkit_ready, "needs root and polkitd")
class TestUnreferencedDescriptors(AdversaryTestCase):
    with_polkit = True

    def start_limited(self, config):
        """pmqosd as its unit starts it: a soft descriptor limit of 1024
        (pmqosd raises it), here a hard one of 20000."""
        via = os.path.join(self.bus.dir, "limit-fds")
        with open(via, "w") as f:
            f.write('#!/bin/sh\nexec prlimit --nofile=1024:20000 "$@"\n')
        os.chmod(via, 0o755)
        path = os.path.join(self.bus.dir, "pmqosd-fds.conf")
        with open(path, "w") as f:
            f.write("[pmqosd]\n" + config)
        self.daemon.stop()
        self.start_daemon(("--config", path), via=via)
        self.keep_honest()

    def flood(self, n_conns, rounds):
        script = os.path.join(self.bus.dir, "fdflood.py")
        with open(script, "w") as f:
            f.write(FLOOD)
        os.chmod(script, 0o644)
        return subprocess.Popen(["prlimit", "--nofile=20000:20000", "setpriv", "--reuid=%d" % NOBODY,
                                 "--regid=%d" % NOBODY, "--clear-groups", sys.executable, script, self.bus.address,
                                 str(n_conns), str(rounds)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def root_answered_throughout(self, attack):
        """Root's GetLatency every 50 ms while the attack runs; the slowest
        answer. A refusal by dbus-daemon itself ("destination has a full
        message queue": the system bus lets 64 descriptors wait towards one
        connection, max_incoming_unix_fds) is counted apart: it is the bus's
        quota, which pmqosd cannot lift, and says nothing of pmqosd's loop."""
        worst = [0.0]
        self.bus_refusals = []
        stop = threading.Event()

        def ask():
            while not stop.is_set():
                t = time.monotonic()
                try:
                    self.honest.call("GetLatency", "s", "cpu_dma", timeout=int(5000 * TIME_SCALE))
                    took = time.monotonic() - t
                except Exception as e:
                    if "full message queue" in str(e):
                        self.bus_refusals.append(time.monotonic() - t)
                        took = 0.0
                    else:
                        sys.stderr.write("root's GetLatency failed: %s\n" % e)
                        took = 5.0 * TIME_SCALE
                worst[0] = max(worst[0], took)
                time.sleep(0.05)

        asker = threading.Thread(target=ask, daemon=True)
        asker.start()
        try:
            out, err = attack.communicate(timeout=240 * TIME_SCALE)
        finally:
            stop.set()
            asker.join(10 * TIME_SCALE)
        sys.stderr.write("root's slowest GetLatency: %.3f s, %d refused by the bus; attacker: %r %r\n"
                         % (worst[0], len(self.bus_refusals), out[-200:], err[-300:]))
        return worst[0]

    def test_flood_of_unreferenced_fds(self):
        """50 connections x 16 calls x 16 descriptors, three rounds, against
        MaxHeldRequests=100 (what pmqosd sized its table for before: 1224):
        pmqosd exited in the first round."""
        self.start_limited("MaxHeldRequests=100\n")
        worst = self.root_answered_throughout(self.flood(50, 3))
        self.assertNotIn("Lost the connection", self.daemon.output())
        self.assertIntact()
        self.assertLess(worst, HONEST_BOUND, "root waited %.2f s for GetLatency" % worst)


if __name__ == "__main__":
    main()
