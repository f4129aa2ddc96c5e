# SPDX-License-Identifier: LGPL-2.1-or-later
"""The container tier: restarts and crashes of pmqosd under the real
systemd are invisible to a client and to the kernel's bound (the unit's
descriptor store and runtime record), and a stop releases everything.
See container.py for the platforms and the ways pmqos gets installed."""

import signal
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
