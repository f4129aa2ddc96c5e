# SPDX-License-Identifier: LGPL-2.1-or-later
"""Restart survival (pmqosd(8), RESTARTS): requests that die with their
connection, and timed ones, come back after SIGTERM and kill -9 for every
kind of client — same cookie, same listing, departure tracked again — when
their owner is still on the same bus; owners that left meanwhile lose them
with one RequestsChanged; a record of another bus, or a damaged one, gives
nothing back; the service manager's stored descriptor is taken back."""

import glob
import os
import signal
import struct
import tempfile

from gi.repository import GLib

from contract import NATIVE_IFACE, PATH, UPOWER_PATH
from fixtures import BrokerTestCase, PrivateBus, main, small_tmpfs
from held_util import hold, requests_by_cookie


def listing(c):
    return sorted((r for r in c.call("ListRequests", iface=NATIVE_IFACE)[0]), key=lambda r: r["cookie"])


def read_only(pid, fd):
    with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
        flags = next(int(line.split()[1], 8) for line in f if line.startswith("flags:"))
    return flags & os.O_ACCMODE == os.O_RDONLY


class RestartTestCase(BrokerTestCase):
    def restart(self, sig=signal.SIGTERM, **kw):
        self.daemon.proc.send_signal(sig)
        self.daemon.proc.wait(60)
        self.daemon.log.close()
        return self.start_daemon(state_dir=self.daemon.state_dir, **kw)

    def timed(self, c, value, seconds=600, reason="timed"):
        return c.call("Request", "sia{sv}", "cpu_dma", value,
                      {"timeout": GLib.Variant("u", seconds), "reason": GLib.Variant("s", reason)},
                      iface=NATIVE_IFACE)[0]


class TestReadoption(RestartTestCase):
    def check_survives(self, sig):
        c = self.client()
        upower = c.request(61)  # the UPower-era call
        native = c.call("Request", "sia{sv}", "cpu_dma", 70, {"reason": GLib.Variant("s", "recording")},
                        iface=NATIVE_IFACE)[0]
        timed = self.timed(c, 65)
        p = self.peer()  # another process: its own pid, its own command line
        theirs = p.request(75)
        before = listing(c)
        self.assertEqual({r["cookie"] for r in before}, {upower, native, timed, theirs})

        self.restart(sig)
        w = self.client()
        self.assertEqual(listing(w), before)  # every key: cookie, sender, pid, exec, created, expires…
        self.assertEqual(w.latency(), 61)
        self.assertKernelAtMost(61)
        self.assertIn("Re-adopted 4 request(s)", self.daemon.output())

        # Departures are tracked again: the owner leaves, its bound goes; the timed one stays, detached.
        c.close()
        self.assert_eventually(lambda: {r["cookie"] for r in listing(w)} == {timed, theirs},
                               what="the client's connection-bound requests to end")
        self.assertEqual([r["sender"] for r in listing(w) if r["cookie"] == timed], [""])
        self.assertEqual(w.latency(), 65)
        p.kill()
        self.assert_eventually(lambda: {r["cookie"] for r in listing(w)} == {timed}, what="the peer's request to end")
        w.call("Cancel", "u", timed, iface=NATIVE_IFACE)
        self.assertKernelReleased()

    def test_survives_sigterm(self):
        self.check_survives(signal.SIGTERM)

    def test_survives_kill9(self):
        self.check_survives(signal.SIGKILL)

    def test_survives_repeated_restarts(self):
        c = self.client()
        cookie = c.request(44)
        for i in range(5):
            self.restart(signal.SIGKILL if i % 2 else signal.SIGTERM)
            self.assertEqual([r[0] for r in c.requests()], [cookie])
            self.assertKernelAtMost(44)
        c.cancel(cookie)
        self.assertKernelReleased()

    def test_owner_left_while_down(self):
        watcher = self.client()
        stays, leaves = self.client(), self.bus.connect()
        kept = stays.request(90)
        leaves.request(30)
        leaves_timed = self.timed(leaves, 20)
        self.daemon.proc.send_signal(signal.SIGKILL)
        self.daemon.proc.wait(60)
        self.daemon.log.close()
        leaves.close()
        watcher.subscribe(path=PATH)
        watcher.subscribe(path=UPOWER_PATH)
        watcher.subscribe(path=PATH, iface=NATIVE_IFACE)

        self.start_daemon(state_dir=self.daemon.state_dir)
        # The timed request outlives its owner, as it would have with pmqosd running.
        self.assertEqual({r["cookie"]: r["sender"] for r in listing(watcher)}, {kept: stays.name, leaves_timed: ""})
        self.assertEqual(watcher.latency(), 20)
        got = watcher.take_signals()
        for path in (PATH, UPOWER_PATH):
            self.assertEqual([s[2] for s in got if s[0] == path and s[1] != NATIVE_IFACE].count("RequestsChanged"),
                             1, got)
        watcher.call("Cancel", "u", leaves_timed, iface=NATIVE_IFACE)
        self.assertKernelAtMost(90)

    def test_hundreds_of_requests(self):
        conns = [self.client() for _ in range(10)]
        cookies = {c.request(1000 + 50 * i + k) for i, c in enumerate(conns) for k in range(50)}
        before = listing(conns[0])
        self.restart(signal.SIGKILL)
        self.assertEqual(listing(conns[0]), before)
        self.assertEqual({r["cookie"] for r in before}, cookies)
        for c in conns[:5]:
            c.close()
        self.assert_eventually(lambda: len(listing(conns[9])) == 250, what="half of them to end")

    def test_record_of_another_bus(self):
        c = self.client()
        c.request(33)
        timed = self.timed(c, 66)
        runtime_dir = self.daemon.runtime_dir
        self.daemon.stop()
        other = PrivateBus()
        try:
            d = self.start_daemon_on(other, runtime_dir)
            w = other.connect()
            try:
                # A new bus hands out the same unique names again: nothing connection-bound is adopted.
                self.assertEqual([(r["cookie"], r["sender"]) for r in listing(w)], [(timed, "")])
                w.call("Cancel", "u", timed, iface=NATIVE_IFACE)
            finally:
                w.close()
            self.assertIn("another bus", d.output())
            d.stop()
        finally:
            other.stop()

    def start_daemon_on(self, bus, runtime_dir):
        from fixtures import Daemon
        return Daemon(bus, self.kernel, (), runtime_dir=runtime_dir)

    def test_damaged_record_moved_aside(self):
        c = self.client()
        c.request(33)
        record = os.path.join(self.daemon.runtime_dir, "requests")
        self.daemon.stop(signal.SIGKILL)
        with open(record, "r+b") as f:
            data = f.read()
            f.seek(0)
            f.write(data.replace(b"add sender=", b"add snder="))
        self.start_daemon(state_dir=self.daemon.state_dir)
        self.assertEqual(c.requests(), [])
        self.assertIn("unusable", self.daemon.output())
        self.assertEqual(len(glob.glob(record + ".corrupt-*")), 1)
        # A fresh record is written at once: the next restart works again.
        cookie = c.request(34)
        self.restart(signal.SIGKILL)
        self.assertEqual([r[0] for r in c.requests()], [cookie])

    def test_without_a_runtime_directory(self):
        self.start_daemon(args=("--runtime-dir", ""))
        c = self.client()
        c.request(33)
        self.restart(signal.SIGTERM, args=("--runtime-dir", ""))
        self.assertEqual(c.requests(), [])

    def test_record_stays_small(self):
        c = self.client()
        keep = c.request(500)
        for i in range(3000):
            c.cancel(c.request(600 + i))
        size = os.path.getsize(os.path.join(self.daemon.runtime_dir, "requests"))
        self.assertLess(size, 1100 * 400, "the record grows with changes, not with live requests")
        self.restart(signal.SIGKILL)
        self.assertEqual([r[0] for r in c.requests()], [keep])


class TestFullRuntimeDir(RestartTestCase):
    """Lines are copied into a reserved tail of the record; where the tmpfs
    has no room for another such window they are written through instead,
    and a kill -9 still loses no acknowledged request."""
    daemon_args = ("--max-requests-per-connection", "100000", "--max-requests-per-uid", "100000")

    def setUp(self):
        self.mnt = small_tmpfs(self, "a runtime record on a full tmpfs", mode="0755")
        super().setUp()
        self.start_daemon(runtime_dir=self.mnt)
        self.record = os.path.join(self.mnt, "requests")

    def lines(self):
        with open(self.record, "rb") as f:
            data = f.read()
        return data.rstrip(b"\0"), len(data)

    def test_written_through_when_no_window_fits(self):
        c = self.client()
        cookies = [c.request(900)]
        text, size = self.lines()
        self.assertGreater(size, len(text), "a tail is reserved past the lines")
        line = len(text.split(b"\n")[-2]) + 1
        # Leave 40 KiB: less than a window, more than the lines past this one.
        st = os.statvfs(self.mnt)
        with open(os.path.join(self.mnt, "filler"), "wb") as f:
            f.write(b"x" * (st.f_bavail * st.f_frsize - 40 * 1024))
        n = (size - len(text) + 20 * 1024) // line + 1
        cookies += [c.request(1000 + i) for i in range(n)]
        text, size = self.lines()
        self.assertEqual(size, len(text), "the last lines were written past the reserved tail")
        self.assertEqual(text.count(b"\nadd "), n + 1)

        self.restart(signal.SIGKILL, runtime_dir=self.mnt)
        self.assertEqual(sorted(r[0] for r in c.requests()), sorted(cookies))
        self.assertKernelAtMost(900)


class TestStoredDescriptor(RestartTestCase):
    """The LISTEN_FDS side of the service manager's store, without systemd:
    pmqosd started with the device's descriptor takes it instead of opening
    the device, so the value it holds does not lapse (the container tier
    proves it under systemd itself)."""

    def start_with_fd(self, fd, name="cpu_dma_latency"):
        self.daemon.proc.send_signal(signal.SIGKILL)
        self.daemon.proc.wait(60)
        self.daemon.log.close()
        # As systemd passes it: descriptor 3, and LISTEN_PID = pmqosd's own pid (exec keeps it).
        wrapper = os.path.join(self.bus.dir, "with-fds")
        with open(wrapper, "w") as f:
            f.write("#!/usr/bin/python3\nimport os, sys\nos.dup2(%d, 3)\n"
                    "os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS='1', LISTEN_FDNAMES=%r)\n"
                    "os.execvp(sys.argv[1], sys.argv[1:])\n" % (fd, name))
        os.chmod(wrapper, 0o755)
        return self.start_daemon(state_dir=self.state_dir, pass_fds=(fd,), via=wrapper)

    def test_descriptor_taken_back(self):
        fd = os.open(self.kernel.path, os.O_RDWR | os.O_CLOEXEC)
        try:
            os.pwrite(fd, struct.pack("=i", 42), 0)  # the previous run's bound, kept in the store
            self.assertKernelAtMost(42)
            self.start_with_fd(fd)
            self.assertIn("Took %s back" % self.kernel.path, self.daemon.output())
            if self.kernel.real:
                # Nothing to hold now: pmqosd lifts the bound through that very
                # descriptor, though this test still holds a copy of it.
                self.assertKernelReleased()
            c = self.client()
            c.request(52)
            self.assertKernelAtMost(52)
        finally:
            os.close(fd)

    def test_held_descriptor_taken_back(self):
        self.held_descriptor_taken_back("h%08x")

    def test_held_descriptor_of_0_1_0_taken_back(self):
        # An upgrade: the store holds what pmqos 0.1.0 named it.
        self.held_descriptor_taken_back("hold-%d")

    def held_descriptor_taken_back(self, name):
        # Hold()'s pipe as the store would keep it: a read end of that very
        # pipe (opened through /proc), passed back named hXXXXXXXX (the
        # cookie in hex), with a stray name beside it that must be closed,
        # not trusted.
        c = self.client()
        cookie, held = hold(c, 47, {"reason": GLib.Variant("s", "kept")})
        self.assertKernelAtMost(47)
        ino = os.fstat(held).st_ino
        pid = self.daemon.proc.pid
        # Its read end (the write end may not be closed yet: the reply goes first).
        ours = [n for n in os.listdir("/proc/%d/fd" % pid)
                if os.readlink("/proc/%d/fd/%s" % (pid, n)) == "pipe:[%d]" % ino and read_only(pid, n)]
        self.assertEqual(len(ours), 1)
        fd = os.open("/proc/%d/fd/%s" % (pid, ours[0]), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        stray = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
        try:
            self.daemon.proc.send_signal(signal.SIGKILL)
            self.daemon.proc.wait(60)
            self.daemon.log.close()
            wrapper = os.path.join(self.bus.dir, "with-held-fds")
            with open(wrapper, "w") as f:
                f.write("#!/usr/bin/python3\nimport os, sys\nos.dup2(%d, 3)\nos.dup2(%d, 4)\n"
                        "os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS='2', LISTEN_FDNAMES=%r)\n"
                        "os.execvp(sys.argv[1], sys.argv[1:])\n" % (fd, stray, (name % cookie) + ":hold-99999"))
            os.chmod(wrapper, 0o755)
            self.start_daemon(state_dir=self.daemon.state_dir, pass_fds=(fd, stray), via=wrapper)
        finally:
            os.close(fd)
            os.close(stray)
        self.assertIn('"hold-99999"', self.daemon.output())
        c = self.client()
        entry = requests_by_cookie(c).get(cookie)
        self.assertIsNotNone(entry, "the held request did not come back")
        self.assertEqual((entry["bound_to"], entry["reason"], entry["value"]), ("fd", "kept", 47))
        self.assertKernelAtMost(47)
        os.close(held)  # the last copy of the write end: the request ends
        self.assert_eventually(lambda: cookie not in requests_by_cookie(c), what="the request to end at the close")
        self.assert_eventually(self.kernel.released, what="the bound to lift at the descriptor's close")

    def test_descriptor_of_something_else_refused(self):
        with tempfile.NamedTemporaryFile() as other:
            fd = os.open(other.name, os.O_RDWR | os.O_CLOEXEC)
            try:
                self.start_with_fd(fd)
            finally:
                os.close(fd)
        self.assertIn("opening it anew", self.daemon.output())
        c = self.client()
        c.request(51)
        self.assertKernelAtMost(51)


if __name__ == "__main__":
    main()
