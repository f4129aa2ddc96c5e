# SPDX-License-Identifier: LGPL-2.1-or-later
"""The container tier: restarts and crashes of pmqosd under the real
systemd are invisible to a client and to the kernel's bound (the unit's
descriptor store and runtime record), and a stop releases everything.
See container.py for the platforms and the ways pmqos gets installed."""

import signal
import subprocess
import sys
import time
import unittest

from container import SystemTestCase, kernel, wait_for


class TestRestartSurvival(SystemTestCase):
    """A plain python-dbus client's connection-bound request across 20
    restarts and 20 kill -9, watched on the host every 100 µs."""

    def test_restarts_and_crashes_are_invisible(self):
        self.start()
        holder, cookie = self.holder(44)
        self.assertLessEqual(kernel(), 44)
        sampler = self.sampler(44)
        try:
            for i in range(40):
                pid = self.main_pid()
                # 40 starts in a row are more than the default start rate limit lets through.
                self.c.sh("systemctl reset-failed pmqosd")
                if i < 20:
                    self.c.sh("systemctl restart pmqosd", check=True)
                else:
                    self.c.sh("kill -9 %d" % pid)
                    wait_for(lambda: self.c.sh("systemctl is-active pmqosd; systemctl show -P MainPID pmqosd")
                             .stdout.split() not in (["active", str(pid)],) and
                             self.c.sh("systemctl is-active pmqosd").stdout.strip() == "active", timeout=30,
                             interval=0.01, what="systemd to restart pmqosd")
                self.assertNotEqual(self.main_pid(), pid)
                self.assertTrue(self.listed(cookie), "round %d: the cookie is gone:\n%s" % (i, self.journal()))
        finally:
            sampler.send_signal(signal.SIGTERM)
            n, above, max_gap = (int(x) for x in sampler.communicate(timeout=10)[0].split())
        sys.stderr.write("sampler: %d samples, %d above 44 µs, longest gap between samples %d µs\n"
                         % (n, above, max_gap))
        self.assertGreater(n, 1000)
        self.assertEqual(above, 0, "the kernel lost the bound during a restart")
        journal = self.journal()
        self.assertIn("Took /dev/cpu_dma_latency back from the service manager", journal)
        self.assertIn("Re-adopted 1 request(s)", journal)

        # The client leaves: its request ends, as with one broker all along.
        self.release(holder)
        wait_for(lambda: kernel() == self.baseline, timeout=5, interval=0.01, what="the request to end")
        self.assertFalse(self.listed(cookie))

    def test_per_cpu_bound_holds_through_restarts(self):
        path = "/sys/devices/system/cpu/cpu0/power/pm_qos_resume_latency_us"
        with open(path) as f:
            original = f.read().strip()
        self.start()
        holder, cookie = self.holder(23, cpu=0)
        try:
            sampler = self.sampler("23", path)
            try:
                for i in range(10):
                    self.c.sh("systemctl reset-failed pmqosd")
                    if i % 2 == 0:
                        self.c.sh("systemctl restart pmqosd", check=True)
                    else:
                        pid = self.main_pid()
                        self.c.sh("kill -9 %d" % pid)
                        wait_for(lambda: self.c.sh("systemctl show -P MainPID pmqosd").stdout.strip()
                                 not in ("0", "", str(pid)) and
                                 self.c.sh("systemctl is-active pmqosd").stdout.strip() == "active",
                                 timeout=30, interval=0.01, what="systemd to restart pmqosd")
                    self.assertTrue(self.listed(cookie), "round %d" % i)
            finally:
                sampler.send_signal(signal.SIGTERM)
                n, changed, max_gap = (int(x) for x in sampler.communicate(timeout=10)[0].split())
            sys.stderr.write("cpu0 sampler: %d samples, %d not 23, longest gap %d µs\n" % (n, changed, max_gap))
            self.assertEqual(changed, 0, "cpu0's bound lapsed during a restart:\n" + self.journal())
            self.assertIn("Restarting: per-CPU bounds stay in place", self.journal())
            # A stop gives cpu0 its value back.
            self.c.sh("systemctl stop pmqosd", check=True)
            with open(path) as f:
                self.assertEqual(f.read().strip(), original)
        finally:
            self.release(holder)

    def test_stop_releases_everything(self):
        self.start()
        holder, cookie = self.holder(45)
        try:
            self.c.sh("systemctl restart pmqosd", check=True)  # the store holds the descriptor now
            self.assertLessEqual(kernel(), 45)
            self.c.sh("systemctl stop pmqosd", check=True)
            t0 = time.monotonic()
            wait_for(lambda: kernel() == self.baseline, timeout=5, interval=0.001, what="the bound to go")
            released = time.monotonic() - t0
            sys.stderr.write("stop: the kernel at the default %.1f ms after systemctl stop returned\n"
                             % (released * 1000))
            self.assertLess(released, 0.1)
            # Nothing comes back at the next start: a stop is not a restart.
            self.start()
            self.assertFalse(self.listed(cookie))
            self.assertEqual(kernel(), self.baseline)
        finally:
            self.release(holder)

    def test_runtime_record_is_private(self):
        self.start()
        holder, cookie = self.holder(46)
        try:
            out = self.c.sh("stat -c '%U %a' /run/pmqos /run/pmqos/requests", check=True).stdout.split("\n")
            self.assertEqual(out[:2], ["pmqos 700", "pmqos 600"])
            self.assertIn("add sender=", self.c.sh("cat /run/pmqos/requests").stdout)
        finally:
            self.release(holder)


# Hold(): the request is the returned descriptor's. The bus connection is
# closed at once; a line on stdin closes the descriptor (the process stays),
# the next one (or EOF) ends the process.
HOLD = """
import os
import sys
import dbus
bus = dbus.SystemBus(private=True)
native = dbus.Interface(bus.get_object("org.freedesktop.PMQoS", "/org/freedesktop/PMQoS"), "org.freedesktop.PMQoS")
cookie, fd = native.Hold("cpu_dma", int(sys.argv[1]), dbus.Dictionary({}, signature="sv"))
fd = fd.take()
bus.close()
print(int(cookie), flush=True)
sys.stdin.readline()
os.close(fd)
print("closed", flush=True)
sys.stdin.readline()
"""

# RequestFor() with the pidfd of a sleep started here, which outlives this
# process (and its connection); prints the cookie and the sleep's pid.
REQUEST_FOR = """
import os
import subprocess
import sys
import dbus
sleep = subprocess.Popen(["sleep", "infinity"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
pidfd = os.pidfd_open(sleep.pid)
bus = dbus.SystemBus(private=True)
native = dbus.Interface(bus.get_object("org.freedesktop.PMQoS", "/org/freedesktop/PMQoS"), "org.freedesktop.PMQoS")
cookie = native.RequestFor("cpu_dma", int(sys.argv[1]), dbus.types.UnixFd(pidfd), dbus.Dictionary({}, signature="sv"))
print(int(cookie), sleep.pid, flush=True)
"""


class TestHeldRequestsSurvive(SystemTestCase):
    """Requests bound to a descriptor (Hold), a process (RequestFor with a
    pidfd) and a unit's cgroup (pmqosctl request --unit) through restarts
    and kill -9 of pmqosd: their descriptors wait in systemd's store under
    h/p/c and the cookie in hex, the host reads the device every 100 µs, and each
    request still ends with what it is bound to afterwards."""

    HOLD_US, PID_US, CGROUP_US = 31, 32, 34
    UNIT = "pmqos-held-cgroup"

    def tearDown(self):
        self.c.sh("systemctl stop %s" % self.UNIT)
        super().tearDown()

    def bindings(self):
        return {r["cookie"]: (r["bound_to"], r["value"], r["target"]) for r in self.requests()}

    def round(self, i, crash):
        pid = self.main_pid()
        self.c.sh("systemctl reset-failed pmqosd")
        if not crash:
            self.c.sh("systemctl restart pmqosd", check=True)
        else:
            self.c.sh("kill -9 %d" % pid)
            wait_for(lambda: self.c.sh("systemctl show -P MainPID pmqosd").stdout.strip() not in ("0", "", str(pid))
                     and self.c.sh("systemctl is-active pmqosd").stdout.strip() == "active",
                     timeout=30, interval=0.01, what="systemd to restart pmqosd (round %d)" % i)
        self.assertNotEqual(self.main_pid(), pid)

    def test_descriptor_process_and_cgroup_bound_requests_survive(self):
        self.start()
        holder = subprocess.Popen(["nsenter", "-t", str(self.c.pid1), "-a", "/usr/bin/python3", "-c", HOLD,
                                   str(self.HOLD_US)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (holder.stdin.close(), holder.wait(10), holder.stdout.close()))
        hold = holder.stdout.readline().strip()
        self.assertTrue(hold.isdigit(), "Hold() gave no cookie")
        out = subprocess.run(["nsenter", "-t", str(self.c.pid1), "-a", "/usr/bin/python3", "-c", REQUEST_FOR,
                              str(self.PID_US)], stdout=subprocess.PIPE, text=True, check=True).stdout.split()
        pid, sleep = out[0], int(out[1])
        self.addCleanup(self.c.sh, "kill -9 %d" % sleep)
        self.c.sh("systemd-run --unit=%s sleep infinity" % self.UNIT, check=True)
        cgroup = self.c.sh("systemctl show -P ControlGroup %s" % self.UNIT, check=True).stdout.strip()
        cg = self.c.sh("pmqosctl request %d --unit %s" % (self.CGROUP_US, self.UNIT), check=True).stdout.strip()
        want = {int(hold): ("fd", self.HOLD_US), int(pid): ("process", self.PID_US),
                int(cg): ("cgroup", self.CGROUP_US)}

        def check(when):
            got = self.bindings()
            self.assertEqual({c: got.get(c, (None, None))[:2] for c in want}, want, when)
            self.assertTrue(got[int(pid)][2].startswith("pid %d (" % sleep), got[int(pid)])
            self.assertTrue(got[int(cg)][2].endswith(cgroup), (got[int(cg)], cgroup))
        check("before the restarts")
        self.assertLessEqual(kernel(), self.HOLD_US)
        before = self.journal()

        sampler = self.sampler(self.HOLD_US)
        try:
            for i in range(10):
                self.round(i, crash=i >= 5)
                check("after round %d (%s)" % (i, "kill -9" if i >= 5 else "restart"))
        finally:
            sampler.send_signal(signal.SIGTERM)
            n, above, max_gap = (int(x) for x in sampler.communicate(timeout=10)[0].split())
        sys.stderr.write("held requests through 5 restarts and 5 kill -9: %d samples, %d above %d µs, "
                         "longest gap %d µs\n" % (n, above, self.HOLD_US, max_gap))
        self.assertGreater(n, 500)
        self.assertEqual(above, 0, "the kernel lost the bound during a restart")
        journal = self.journal()
        # Each start took the three descriptors back from the store; none was refused or left over.
        rebound = "Re-bound 3 request(s) to their descriptor, process or cgroup; 0 held one(s) ended"
        for line, times in ((rebound, 10), ("descriptor store", 0), ("Closing descriptor", 0),
                            ("that no recorded request claimed", 0)):
            self.assertEqual(journal.count(line) - before.count(line), times, "%r in:\n%s" % (line, journal))
        if self.c.systemd >= 254:  # systemd-analyze fdstore is newer than 252
            store = self.c.sh("systemd-analyze fdstore pmqosd.service", check=True).stdout
            for name in ("h%08x" % int(hold), "p%08x" % int(pid), "c%08x" % int(cg)):
                self.assertRegex(store, r"\b%s\b" % name)

        # Each ends with what it is bound to, the next one's bound showing at the kernel.
        holder.stdin.write("\n")
        holder.stdin.flush()
        self.assertEqual(holder.stdout.readline().strip(), "closed")
        wait_for(lambda: kernel() == min(self.baseline, self.PID_US), timeout=5, interval=0.01,
                 what="the Hold() descriptor's close to end its request")
        self.assertIsNone(holder.poll(), "the holder's process is still there: its descriptor alone ended it")
        self.assertNotIn(int(hold), self.bindings())
        self.c.sh("kill -9 %d" % sleep, check=True)
        wait_for(lambda: kernel() == min(self.baseline, self.CGROUP_US), timeout=5, interval=0.01,
                 what="the sleep's exit to end its request")
        self.assertNotIn(int(pid), self.bindings())
        self.c.sh("systemctl stop %s" % self.UNIT, check=True)
        wait_for(lambda: kernel() == self.baseline, timeout=5, interval=0.01,
                 what="the unit's stop to end its request")
        self.assertEqual(self.bindings(), {})


if __name__ == "__main__":
    unittest.main(verbosity=2)
