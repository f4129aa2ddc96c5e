# SPDX-License-Identifier: LGPL-2.1-or-later
"""Faults around pmqosd: a device whose writes fail, a state directory that
turns read-only, the bus daemon going away, polkitd killed mid-traffic."""

import os
import pwd
import shutil
import subprocess
import tempfile
import sys
import threading
import time
import unittest

from gi.repository import GLib

from contract import ACCESS_DENIED, FAILED, NATIVE_IFACE
from fixtures import BrokerTestCase, IS_ROOT, Polkitd, PrivateBus, TIME_SCALE, main, small_tmpfs, wait_for
from fake_sysfs import cpu_file, make_fake_sysfs
from hostenv import POLKITD_PRESENT, POLKIT_USERS, polkit_install, polkit_uid, polkit_uninstall



class FailingDevice:
    """/dev/full: opens fine, reads zeros, every write fails with ENOSPC."""
    path = "/dev/full"
    real = False
    baseline = 0

    def read(self):
        return 0

    def released(self):
        return True

    def cleanup(self):
        pass


class TestFailingDevice(BrokerTestCase):
    kernel_class = FailingDevice

    def test_write_failure_is_reported_and_undone(self):
        c = self.client()
        name, message = c.call_error("RequestLatency", "sib", "cpu_dma", 50, False)
        self.assertEqual(name, FAILED)
        self.assertIn("/dev/full", message)
        self.assertIn("No space left on device", message)
        self.assertEqual(c.requests(), [])
        self.assertEqual(c.latency(), -1)

        # Persistent: refused the same way, and nothing of it reaches the state
        # file, which holds the one persistent request that needed no write.
        kept = c.request(-1, persistent=True)
        self.assertEqual(c.call_error("RequestLatency", "sib", "cpu_dma", 50, True)[0], FAILED)
        with open(os.path.join(self.daemon.state_dir, "state")) as f:
            records = [line for line in f if line.startswith("request ")]
        self.assertEqual(len(records), 1, records)
        self.assertIn("cookie=%d " % kept, records[0])
        c.cancel(kept)

        # A request that needs no write goes in; changing it to one that does is undone.
        cookie = c.request(-1)
        self.assertEqual(c.call_error("Update", "ui", cookie, 10, iface=NATIVE_IFACE)[0], FAILED)
        self.assertEqual([(r[0], r[8]) for r in c.requests()], [(cookie, -1)])
        c.cancel(cookie)
        self.assertEqual(c.requests(), [])
        self.assertIn("No space left on device", self.daemon.output())



class TestFailingCpuFile(BrokerTestCase):
    """A CPU's pm_qos_resume_latency_us that refuses every write (/dev/full
    in its place): the caller's Error.Failed names that file, not the
    device, and nothing of the request stays."""

    def setUp(self):
        self.sysfs = make_fake_sysfs({0: "0", 1: "0"})
        self.addCleanup(shutil.rmtree, self.sysfs, True)
        os.unlink(cpu_file(self.sysfs, 1))
        os.symlink("/dev/full", cpu_file(self.sysfs, 1))
        self.daemon_args = ("--sysfs-root", self.sysfs)
        super().setUp()

    def test_message_names_the_cpu_file(self):
        c = self.client()
        name, message = c.call_error("Request", "sia{sv}", "cpu_dma", 30, {"cpus": GLib.Variant("au", [1])},
                                     iface=NATIVE_IFACE)
        self.assertEqual(name, FAILED)
        self.assertIn(cpu_file(self.sysfs, 1), message)
        self.assertNotIn(self.kernel.path, message)
        self.assertEqual(c.requests(), [])
        # The device itself still takes writes.
        c.request(40)
        self.assertKernelAtMost(40)


class TestReadOnlyStateDir(BrokerTestCase):
    def setUp(self):
        self.mnt = small_tmpfs(self, "read-only state directory")
        super().setUp()
        self.start_daemon((), state_dir=self.mnt)

    def remount(self, mode):
        subprocess.run(["mount", "-o", "remount,%s" % mode, self.mnt], check=True)

    def test_served_in_memory_then_saved_again(self):
        c = self.client()
        a = c.request(300, persistent=True)
        self.remount("ro")
        b = c.request(200, persistent=True)  # still served
        self.assertEqual(c.latency(), 200)
        self.assertKernelAtMost(200)
        self.assertIn("Cannot save state", self.daemon.output())
        with open(os.path.join(self.mnt, "state")) as f:
            self.assertNotIn(str(b), f.read())
        self.remount("rw")
        c.call("SetMinimumLatency", "si", "cpu_dma", 50)  # the next change saves everything
        with open(os.path.join(self.mnt, "state")) as f:
            text = f.read()
        self.assertIn("cookie=%d " % a, text)
        self.assertIn("cookie=%d " % b, text)
        self.assertIn("floor 50\n", text)


class TestBusRestart(BrokerTestCase):
    def test_daemon_exits_promptly_and_reloads_on_a_new_bus(self):
        c = self.client()
        cookie = c.request(120, persistent=True)
        c.close()
        self.clients.remove(c)
        state_dir = self.daemon.state_dir
        t = time.monotonic()
        self.bus.kill()
        code = self.daemon.proc.wait(10)
        self.assertNotEqual(code, 0)
        self.assertLess(time.monotonic() - t, 2 * TIME_SCALE)
        self.assertIn("Lost the connection to the system bus", self.daemon.output())
        self.assertKernelReleased()

        # The service manager starts it again on the new bus: same state.
        self.daemon.log.close()
        # The new bus (and its directory) replaces the old; the state moves along.
        old_bus = self.bus
        self.bus = PrivateBus()
        new_state = os.path.join(self.bus.dir, "state-moved")
        shutil.copytree(state_dir, new_state)
        old_bus.stop()
        self.start_daemon((), state_dir=new_state)
        w = self.client()
        self.assertEqual([r[0] for r in w.requests()], [cookie])
        self.assertKernelAtMost(120)


@unittest.skipUnless(IS_ROOT and POLKITD_PRESENT, "needs root and polkitd")
class TestPolkitKilledMidTraffic(BrokerTestCase):
    with_polkit = True
    # Every granted request stays live for the model check: lift the limits.
    daemon_args = ("--max-requests-per-connection", "1000000", "--max-requests-per-uid", "1000000")

    @classmethod
    def setUpClass(cls):
        polkit_install()
        # The members' loops call as fast as pmqosd answers, well past the
        # per-user budget once polkit is gone (a denial takes microseconds):
        # lift it too, so that every answer is polkit's or a grant.
        fd, cls.conf = tempfile.mkstemp(prefix="pmqos-faults-", suffix=".conf")
        with os.fdopen(fd, "w") as f:
            f.write("[pmqosd]\nMaxCallsPerSecondPerUser=1000000\n")
        os.chmod(cls.conf, 0o644)
        cls.daemon_args = (*cls.daemon_args, "--config", cls.conf)

    @classmethod
    def tearDownClass(cls):
        polkit_uninstall()
        os.unlink(cls.conf)

    def test_every_call_answered(self):
        root = self.client()
        base = root.request(900)
        gid = pwd.getpwnam(POLKIT_USERS["member"]).pw_gid
        members = [self.peer(uid=polkit_uid("member"), gid=gid) for _ in range(3)]
        # Per member: (outcome, started, duration, cookie or None).
        results = {i: [] for i in range(len(members))}
        stop = threading.Event()

        def traffic(i, p):
            while not stop.is_set():
                t = time.monotonic()
                r = p.call("RequestLatency", "sib", "cpu_dma", 1000 + i, False)
                results[i].append((r[0] if r[0] == "ok" else r[1], t, time.monotonic() - t,
                                   r[1][0] if r[0] == "ok" else None))

        threads = [threading.Thread(target=traffic, args=(i, p)) for i, p in enumerate(members)]
        for th in threads:
            th.start()
        try:
            time.sleep(0.5)
            self.polkit.proc.kill()
            self.polkit.proc.wait()
            self.polkit.log.close()
            time.sleep(1.0)
            self.assertEqual(root.latency(), 900)  # root served throughout
            self.polkit = Polkitd(self.bus)
            back = time.monotonic()
            # Recovered: every member is granted again by the new polkitd.
            # A check that reached polkitd while it was starting may take up
            # to pmqosd's fail-closed timeout (5 s) to be denied first.
            try:
                wait_for(lambda: all(any(k == "ok" and t >= back for k, t, _, _ in rs) for rs in results.values()),
                         timeout=30, what="every member granted again after polkitd came back")
            except AssertionError:
                with open(self.polkit.log_path) as f:
                    print("polkitd said:\n" + f.read(), file=sys.stderr)
                raise
        finally:
            stop.set()
            for th in threads:
                th.join(30)
        for th in threads:
            self.assertFalse(th.is_alive())

        for i, rs in results.items():
            kinds = {k for k, _, _, _ in rs}
            self.assertLessEqual(kinds, {"ok", ACCESS_DENIED}, rs[-5:])
            # Nothing hangs: pmqosd denies a check polkit leaves unanswered after 5 s.
            longest = max(d for _, _, d, _ in rs)
            self.assertLess(longest, 5 + 3 * TIME_SCALE, "a call took %.1fs" % longest)
            self.assertIn(ACCESS_DENIED, kinds)  # polkit's absence was seen, and failed closed
        # The kernel holds the model's value: the strictest granted request.
        granted = {cookie for rs in results.values() for k, _, _, cookie in rs if k == "ok"}
        live = {r[0]: r[8] for r in root.requests()}
        self.assertEqual(set(live) - {base}, granted)
        self.assertEqual(root.latency(), min(live.values()))
        self.assertKernelAtMost(min(live.values()))


if __name__ == "__main__":
    main()
