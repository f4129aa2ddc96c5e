# SPDX-License-Identifier: LGPL-2.1-or-later
"""A descriptor on a file system whose server never answers pmqosd: every
close of a FUSE descriptor sends FLUSH and the closer waits, uninterruptibly,
for the answer — process exit included. A user without rights mounts one
(fusermount3), whose server (withholding-fs.c) answers every FLUSH but
pmqosd's and its children's, and sends a descriptor of it with RequestFor
and with a GetLatency that never references it. sd-bus used to close those
on pmqosd's loop: it slept in request_wait_answer for good, root unanswered,
an honest client's bound stayed after it left, SIGKILL left it in state D.
Now no such descriptor is ever installed in pmqosd (the gate, the sorter:
daemon/DESIGN.md, Hostile callers): root and another user are answered
within a second, departures are heard, SIGTERM ends pmqosd, and what the
attacker pins (sorters, the descriptors they keep) is bounded, with
LimitsExceeded past it."""

import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

from adversary import AdversaryTestCase, set_up_module, tear_down_module
from fixtures import NOBODY, TIME_SCALE, main, setpriv, wait_for

setUpModule = set_up_module
tearDownModule = tear_down_module

HONEST_BOUND = 1.0 * TIME_SCALE
SERVER = os.environ.get("PMQOS_WITHHOLDING_FS", "")
OTHER_USER = 1  # "daemon": neither root nor the attacker

ATTACK = r'''
import json, os, sys, time, gi
gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib
address, path, method, n_calls, n_fds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
conn = Gio.DBusConnection.new_for_address_sync(address, flags, None, None)
fd = os.pidfd_open(os.getpid()) if path == "pidfd" else os.open(path, os.O_RDONLY)
if method == "GetLatency":  # descriptors the body never references
    iface, body = "org.freedesktop.UPower.QoS", GLib.Variant("(s)", ("cpu_dma",))
else:
    iface, body = "org.freedesktop.PMQoS", GLib.Variant("(siha{sv})", ("cpu_dma", 10, 0, {}))
out = []
for i in range(n_calls):
    fdl = Gio.UnixFDList.new()
    for _ in range(n_fds):
        fdl.append(fd)
    try:
        conn.call_with_unix_fd_list_sync("org.freedesktop.PMQoS", "/org/freedesktop/PMQoS", iface, method, body,
                                         None, 0, 10000, fdl, None)
        out.append(["ok", ""])
    except GLib.Error as e:
        out.append([Gio.DBusError.get_remote_error(e) or str(e), e.message])
print(json.dumps(out), flush=True)
'''


def pinned(pid):
    """Threads and descriptors of a process."""
    return len(os.listdir("/proc/%d/task" % pid)), len(os.listdir("/proc/%d/fd" % pid))


def sorters(pid):
    """pmqosd's descriptor sorters, retired ones not yet reaped included."""
    out = subprocess.run(["pgrep", "-P", str(pid), "-x", "pmqosd-sorter"], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


@unittest.skipUnless(SERVER and shutil.which("fusermount3") and os.path.exists("/dev/fuse"),
                     "needs libfuse3 (pmqos-withholding-fs), fusermount3 and /dev/fuse")
class TestWithholdingFuse(AdversaryTestCase):
    def setUp(self):
        super().setUp()
        self.mnt = tempfile.mkdtemp(prefix="pmqos-fuse-")
        os.chmod(self.mnt, 0o755)
        os.chown(self.mnt, NOBODY, NOBODY)
        self.addCleanup(os.rmdir, self.mnt)
        # The attacker mounts it where it may (/dev/fuse 0666, as udev sets
        # it); else root does, for it (allow_other), and it sends from there.
        as_nobody = subprocess.run([*setpriv(NOBODY), "test", "-r", "/dev/fuse", "-a", "-w", "/dev/fuse"]).returncode == 0
        cmd = [*setpriv(NOBODY), SERVER, self.mnt, str(self.daemon.proc.pid)] if as_nobody else \
            [SERVER, self.mnt, str(self.daemon.proc.pid), "allow_other"]
        if not as_nobody:
            print("# /dev/fuse is not open to uid %d here: root mounts the attacker's file system" % NOBODY)
        self.server_log = os.path.join(self.bus.dir, "withholding-fs-%d.log" % time.monotonic_ns())
        with open(self.server_log, "w") as log:
            self.server = subprocess.Popen(cmd, stdout=log)
        self.addCleanup(self.unmount)
        wait_for(lambda: self.server_lines()[:1] == ["mounted"] or self.server.poll() is not None,
                 what="the FUSE server")
        self.assertEqual(self.server_lines()[:1], ["mounted"])
        self.file = os.path.join(self.mnt, "f")
        wait_for(lambda: os.path.exists(self.file), what="the FUSE mount")

    def unmount(self):
        """The server ended (every withheld close is released), the mount gone."""
        if self.server.poll() is None:
            self.server.terminate()
            try:
                self.server.wait(10)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()
        subprocess.run(["fusermount3", "-u", "-z", self.mnt], capture_output=True)

    def server_lines(self):
        with open(self.server_log) as f:
            return [line.strip() for line in f]

    def withheld_from_pmqosd(self):
        """The FLUSHes the server withheld from pmqosd itself (not its sorters):
        each would be a close of the attacker's descriptor in pmqosd."""
        return [line for line in self.server_lines() if line.split()[2:] == [str(self.daemon.proc.pid)]]

    def attack(self, method, n_calls, n_fds=1, uid=NOBODY, target=None):
        cmd = [*setpriv(uid), "/usr/bin/python3", "-c", ATTACK, self.bus.address, target or self.file, method,
               str(n_calls), str(n_fds)]
        r = subprocess.run(cmd, env=self.bus.env, capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def assertAnswered(self):
        """Root and another user answered within HONEST_BOUND; pmqosd alive."""
        start = time.monotonic()
        self.assertEqual(self.honest.latency(), 700)
        other = self.peer(uid=OTHER_USER)
        self.assertEqual(other.call("GetLatency", "s", "cpu_dma"), ("ok", [700]))
        elapsed = time.monotonic() - start
        self.assertLess(elapsed, HONEST_BOUND, "root and another user answered in %.2f s" % elapsed)
        self.assertIntact()

    def assertLeaverLifted(self):
        """An honest client's bound ends with it: pmqosd still hears departures."""
        leaver = self.peer(uid=0)
        leaver.request(10)
        self.assert_eventually(lambda: self.honest.latency() == 10, what="the leaver's bound")
        self.assertKernelAtMost(10)
        leaver.close()
        self.assert_eventually(lambda: self.honest.latency() == 700, what="the leaver's bound to be lifted")
        if self.kernel.real:
            self.assert_eventually(lambda: self.kernel.read() == 700, what="the kernel back at 700")

    def test_get_latency_with_unreferenced_descriptors(self):
        before = pinned(self.daemon.proc.pid)
        results = self.attack("GetLatency", 4, 16)
        self.assertEqual([r[0] for r in results], ["ok"] * 4)
        self.assertAnswered()
        self.assertEqual(self.withheld_from_pmqosd(), [])
        self.assertLeaverLifted()
        # pmqosd itself pins nothing: its threads and descriptors as before.
        self.assertEqual(pinned(self.daemon.proc.pid)[0], before[0])
        self.assertLessEqual(pinned(self.daemon.proc.pid)[1], before[1] + 2)

    def test_request_for_refused_and_sigterm_ends_pmqosd(self):
        results = self.attack("RequestFor", 3)
        self.assertEqual([r[0] for r in results], ["org.freedesktop.DBus.Error.InvalidArgs"] * 3)
        self.assertIn("regular file", results[0][1])
        self.assertAnswered()
        self.assertEqual(self.withheld_from_pmqosd(), [])
        self.assertLeaverLifted()
        # Stopped during the attack: pmqosd exits and is reaped; only its
        # sorter may wait at its own exit, until the server goes.
        pid = self.daemon.proc.pid
        waiting = sorters(pid)
        self.assertEqual(self.daemon.stop(timeout=10 * TIME_SCALE), 0, self.daemon.output())
        self.assertIsNone(state(pid))
        print("# after SIGTERM: pmqosd reaped; its sorter(s) %s in state %s" %
              (waiting, [state(p) for p in waiting]))
        self.unmount()
        for p in waiting:
            wait_for(lambda: state(p) in (None, "Z"), timeout=10, what="the sorter to end with the server")

    def test_what_the_attacker_pins_is_bounded(self):
        limited = ["org.freedesktop.DBus.Error.InvalidArgs", "org.freedesktop.DBus.Error.LimitsExceeded"]
        # One uid: 256 kept descriptors (16 calls of 16), then refused...
        names = [r[0] for r in self.attack("RequestFor", 20, 16)]
        self.assertEqual(names, [limited[0]] * 16 + [limited[1]] * 4)
        # ...and root's RequestFor with a pidfd still granted: one uid never fills a sorter.
        self.assertEqual(self.attack("RequestFor", 1, 1, uid=0, target="pidfd"), [["ok", ""]])
        # Six more uids: a sorter keeps up to 512 and is retired, two retired
        # ones may wait at once; then everyone's descriptors are refused.
        accepted = 16
        for uid in range(1, 7):
            results = self.attack("RequestFor", 17, 16, uid=uid)
            self.assertLessEqual({r[0] for r in results}, set(limited))
            accepted += sum(r[0] == limited[0] for r in results)
        results = self.attack("RequestFor", 1, 1, uid=0, target="pidfd")
        self.assertEqual(results[0][0], limited[1])
        self.assertIn("Try again later", results[0][1])
        pid = self.daemon.proc.pid
        alive = sorters(pid)
        # A retired sorter waiting in its exit shows no descriptors (its table is
        # detached first): it keeps at most 512 by construction.
        kept = sum(pinned(p)[1] for p in alive if state(p) not in (None, "Z"))
        print("# %d calls of 16 kept before the bound; %d sorters (states %s), %d descriptors in the live one; "
              "pmqosd's threads and descriptors %r" % (accepted, len(alive), [state(p) for p in alive], kept,
                                                        pinned(pid)))
        self.assertLessEqual(len(alive), 3)
        self.assertLessEqual(accepted * 16, 3 * 512)
        self.assertAnswered()
        self.assertLeaverLifted()
        self.assertEqual(self.withheld_from_pmqosd(), [])


FLOOD = r"""
import os, sys, time, dbus, dbus.lowlevel
address, pid, n, look_up = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
c = dbus.bus.BusConnection(address)
bus = c.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus")
owner = bus.GetNameOwner("org.freedesktop.PMQoS", dbus_interface="org.freedesktop.DBus")
def trigger():  # a descriptor from a name the gate has not seen: one uid look-up
    t = dbus.bus.BusConnection(address)
    try:  # refused (the body is not "s"), no matter: the gate saw the descriptor
        t.call_blocking("org.freedesktop.PMQoS", "/org/freedesktop/PMQoS", "org.freedesktop.UPower.QoS",
                        "GetLatency", "sh", ("cpu_dma", dbus.types.UnixFd(os.pidfd_open(os.getpid()))), timeout=60)
    except dbus.exceptions.DBusException:
        pass
    t.close()
trigger()
names = [x for x in bus.ListNames(dbus_interface="org.freedesktop.DBus") if x.startswith(":") and x != owner]
def pid_of(name):
    try:
        return bus.GetConnectionUnixProcessID(name, dbus_interface="org.freedesktop.DBus")
    except dbus.exceptions.DBusException:  # gone since ListNames
        return None
targets = [x for x in names if pid_of(x) == pid]
for target in targets:  # unicast signals: any peer may send them to any connection
    for i in range(n):
        m = dbus.lowlevel.SignalMessage("/", "x.y", "Z")
        m.set_destination(target)
        c.send_message(m)
        if i % 4096 == 0:
            c.flush()
c.flush()
print("flooded %d" % len(targets), flush=True)
if look_up:
    trigger()
else:  # the bus alone: wait until it has routed all of them
    bus.GetId(dbus_interface="org.freedesktop.DBus", timeout=60)
print("done", flush=True)
"""


class TestLookUpFlood(AdversaryTestCase):
    def test_signals_to_the_uid_look_up_connection_stall_nobody(self):
        """The gate asks the bus for a sender's uid on a connection of its
        own; anyone may send that connection unicast signals, which queue at
        the bus until the next look-up reads them all, on the gate's thread."""
        control = self.flood(0)
        worst = self.flood(1)
        print("# root's GetLatency, the slowest: %.2f s with the bus routing 200,000 signals to pmqosd's look-up "
              "connection, %.2f s with a look-up after them" % (control, worst))
        self.assertLess(worst, HONEST_BOUND)
        self.assertIntact()

    def flood(self, look_up):
        pid = self.daemon.proc.pid
        flood = subprocess.Popen([*setpriv(NOBODY), "/usr/bin/python3", "-c", FLOOD, self.bus.address, str(pid),
                                  "200000", str(look_up)], env=self.bus.env, stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: flood.poll() is None and flood.kill())
        self.assertEqual(flood.stdout.readline().strip(), "flooded 1")
        worst = 0
        while flood.poll() is None:
            start = time.monotonic()
            self.assertEqual(self.honest.latency(), 700)
            worst = max(worst, time.monotonic() - start)
        self.assertEqual(flood.stdout.read().strip(), "done")
        return worst


SLOW_FDINFO = r"""
import os, resource, select, sys, dbus
address, copies = sys.argv[1], int(sys.argv[2])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
top = min(hard, 20000) - 8
# An epoll set's fdinfo lists every watch, and a watch outlives its
# descriptor while the file lives: files x descriptor numbers of watches.
ep = select.epoll()
files = [os.eventfd(0) for _ in range(40)]
for f in files:
    for k in range(200, top):
        os.dup2(f, k)
        try:
            ep.register(k, select.EPOLLIN)
        except OSError:  # fs.epoll.max_user_watches
            break
        os.close(k)
c = dbus.bus.BusConnection(address)
print("ready", flush=True)
for _ in range(3):
    try:  # refused (the body is not "s"), no matter: the gate sees the descriptors
        c.call_blocking("org.freedesktop.PMQoS", "/org/freedesktop/PMQoS", "org.freedesktop.UPower.QoS",
                        "GetLatency", "s" + "h" * copies, ("cpu_dma", *[dbus.types.UnixFd(ep.fileno())] * copies),
                        timeout=60)
    except dbus.exceptions.DBusException:
        pass
print("done", flush=True)
"""


class TestSlowToSort(AdversaryTestCase):
    def test_descriptors_slow_to_sort_stall_nobody(self):
        """The sorter tells pidfds from the rest; reading each descriptor's
        /proc fdinfo, it took as long as the kernel takes to print it, and an
        epoll set of nobody's prints a line per watch (hundreds of thousands:
        0.7 s a read). The gate waited for the sorter, up to 2 s a message."""
        attack = subprocess.Popen([*setpriv(NOBODY), "/usr/bin/python3", "-c", SLOW_FDINFO, self.bus.address, "8"],
                                  env=self.bus.env, stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: attack.poll() is None and attack.kill())
        self.assertEqual(attack.stdout.readline().strip(), "ready")
        worst = 0
        while attack.poll() is None:
            start = time.monotonic()
            self.assertEqual(self.honest.latency(), 700)
            worst = max(worst, time.monotonic() - start)
        self.assertEqual(attack.stdout.read().strip(), "done")
        print("# root's GetLatency, the slowest: %.2f s while nobody sent an epoll set 8 times a call" % worst)
        self.assertLess(worst, HONEST_BOUND)
        self.assertIntact()


if __name__ == "__main__":
    main()
