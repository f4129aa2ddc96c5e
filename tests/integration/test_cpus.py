# SPDX-License-Identifier: LGPL-2.1-or-later
"""Per-CPU requests (option "cpus"): aggregation per CPU into
pm_qos_resume_latency_us, restoration of each CPU's original value on the
last cancel, on SIGTERM and after kill -9 + restart; on a fake sysfs tree and
on this machine's real one."""

import os
import shutil
import signal

from gi.repository import GLib

from contract import INVALID, NATIVE_IFACE
from fixtures import BrokerTestCase, IS_ROOT, STANDIN, main, skip_notice, wait_for
from fake_sysfs import cpu_file, make_fake_sysfs, read_cpu

REAL_SYSFS = "/sys"


class CpuTestCase(BrokerTestCase):
    sysfs_originals = {0: "0", 1: "100", 2: "0", 3: "n/a"}
    sysfs_offline = (2,)

    def setUp(self):
        self.sysfs = make_fake_sysfs(self.sysfs_originals, self.sysfs_offline)
        self.addCleanup(shutil.rmtree, self.sysfs, True)  # last: after pmqosd has restored it
        self.daemon_args = ("--sysfs-root", self.sysfs)
        super().setUp()

    def state_text(self):
        with open(os.path.join(self.daemon.state_dir, "state")) as f:
            return f.read()

    def request(self, c, value, cpus, **extra):
        o = {"cpus": GLib.Variant("au", cpus)}
        o.update(extra)
        return c.call("Request", "sia{sv}", "cpu_dma", value, o, iface=NATIVE_IFACE)[0]

    def restart(self, sig):
        self.daemon.proc.send_signal(sig)
        self.daemon.proc.wait(60)
        self.daemon.log.close()
        self.start_daemon(self.daemon_args, state_dir=self.daemon.state_dir)


class TestFakeSysfs(CpuTestCase):
    def test_aggregate_per_cpu_and_restore(self):
        c = self.client()
        a = self.request(c, 30, [1])
        self.assertEqual(read_cpu(self.sysfs, 1), "30")
        self.assertEqual(read_cpu(self.sysfs, 0), "0")  # untouched
        self.assertKernelReleased()                  # the global device is left alone
        self.assertEqual(c.latency(), -1)
        b = self.request(c, 20, [0, 1])
        self.assertEqual((read_cpu(self.sysfs, 0), read_cpu(self.sysfs, 1)), ("20", "20"))
        c.cancel(b)
        self.assertEqual((read_cpu(self.sysfs, 0), read_cpu(self.sysfs, 1)), ("0", "30"))
        c.call("Update", "ui", a, 0, iface=NATIVE_IFACE)
        self.assertEqual(read_cpu(self.sysfs, 1), "n/a")  # 0 µs is written as "n/a"
        c.cancel(a)
        self.assertEqual(read_cpu(self.sysfs, 1), "100")  # the original, not "0"
        state = self.state_text()
        self.assertNotIn("\ncpu ", state)

    def test_originals_recorded_before_the_first_write(self):
        c = self.client()
        self.request(c, 55, [1, 3])
        state = self.state_text()
        self.assertIn("cpu 1 100\n", state)
        self.assertIn("cpu 3 n/a\n", state)

    def test_floor_applies_per_cpu(self):
        c = self.client()
        self.request(c, 10, [1])
        c.call("SetMinimumLatency", "si", "cpu_dma", 40)
        self.assertEqual(read_cpu(self.sysfs, 1), "40")
        c.call("SetMinimumLatency", "si", "cpu_dma", -1)
        self.assertEqual(read_cpu(self.sysfs, 1), "10")

    def test_absent_and_offline_cpus(self):
        c = self.client()
        for cpus in ([2], [7], [0, 7]):
            name, message = c.call_error("Request", "sia{sv}", "cpu_dma", 10, {"cpus": GLib.Variant("au", cpus)},
                                         iface=NATIVE_IFACE)
            self.assertEqual(name, INVALID, cpus)
        self.assertIn("offline", c.call_error("Request", "sia{sv}", "cpu_dma", 10,
                                              {"cpus": GLib.Variant("au", [2])}, iface=NATIVE_IFACE)[1])
        self.assertEqual(read_cpu(self.sysfs, 0), "0")

    def test_empty_cpus_means_the_global_device(self):
        c = self.client()
        self.request(c, 70, [])
        self.assertEqual(c.latency(), 70)
        self.assertKernelAtMost(70)
        self.assertEqual(read_cpu(self.sysfs, 1), "100")

    def test_client_leaving_restores(self):
        self.start_daemon()
        c = self.bus.connect()
        self.request(c, 25, [1])
        self.assertEqual(read_cpu(self.sysfs, 1), "25")
        c.close()
        wait_for(lambda: read_cpu(self.sysfs, 1) == "100", what="cpu1 to be restored")

    def test_sigterm_restores(self):
        c = self.client()
        self.request(c, 35, [0, 1], persistent=GLib.Variant("b", True))
        self.assertEqual((read_cpu(self.sysfs, 0), read_cpu(self.sysfs, 1)), ("35", "35"))
        self.assertEqual(self.daemon.stop(signal.SIGTERM), 0)
        self.assertEqual((read_cpu(self.sysfs, 0), read_cpu(self.sysfs, 1)), ("0", "100"))

    def test_kill9_then_restart_restores_and_reapplies(self):
        c = self.client()
        keep = self.request(c, 15, [1], persistent=GLib.Variant("b", True))
        self.request(c, 12, [0])
        self.assertEqual((read_cpu(self.sysfs, 0), read_cpu(self.sysfs, 1)), ("12", "15"))
        c.close()
        self.restart(signal.SIGKILL)
        # cpu0's request died with its client and the crash; its original is back.
        self.assertEqual(read_cpu(self.sysfs, 0), "0")
        # cpu1's persistent request is applied again over the restored original.
        self.assertEqual(read_cpu(self.sysfs, 1), "15")
        w = self.client()
        w.cancel(keep)
        self.assertEqual(read_cpu(self.sysfs, 1), "100")


    def test_restart_readopts_without_a_write(self):
        c = self.client()
        self.request(c, 12, [0])
        path = cpu_file(self.sysfs, 0)
        written = os.stat(path).st_mtime_ns
        for sig in (signal.SIGKILL, signal.SIGTERM):
            self.restart(sig)
            if sig == signal.SIGKILL:
                # Its client is still connected: the value stays, not even rewritten.
                self.assertEqual(os.stat(path).st_mtime_ns, written)
            self.assertEqual(read_cpu(self.sysfs, 0), "12")
        c.close()
        self.assert_eventually(lambda: read_cpu(self.sysfs, 0) == "0", what="cpu0's original back")


class TestRealSysfs(CpuTestCase):
    """This machine's own CPU files, when root and they exist."""

    def setUp(self):
        if STANDIN:
            self.skipTest("PMQOS_TEST_STANDIN=1: the real sysfs is not written")
        self.real = IS_ROOT and os.path.exists(cpu_file(REAL_SYSFS, 0))
        if not self.real:
            skip_notice("per-CPU test on the real /sys", "needs root and pm_qos_resume_latency_us")
            self.skipTest("needs root and /sys/devices/system/cpu/cpu0/power/pm_qos_resume_latency_us")
        self.sysfs = REAL_SYSFS
        self.daemon_args = ("--sysfs-root", REAL_SYSFS)
        self.cpu = max(c for c in range(os.cpu_count()) if os.path.exists(cpu_file(REAL_SYSFS, c)))
        self.original = read_cpu(REAL_SYSFS, self.cpu)
        # Runs after pmqosd has exited: the machine is as we found it.
        self.addCleanup(lambda: self.assertEqual(read_cpu(REAL_SYSFS, self.cpu), self.original))
        BrokerTestCase.setUp(self)

    def test_real_cpu_file(self):
        c = self.client()
        a = self.request(c, 40, [self.cpu])
        self.assertEqual(read_cpu(REAL_SYSFS, self.cpu), "40")
        c.cancel(a)
        self.assertEqual(read_cpu(REAL_SYSFS, self.cpu), self.original)

    def test_real_cpu_after_kill9(self):
        c = self.client()
        self.request(c, 41, [self.cpu])
        self.assertEqual(read_cpu(REAL_SYSFS, self.cpu), "41")
        # Its client is still connected: re-adopted, the file never changed.
        self.restart(signal.SIGKILL)
        self.assertEqual(read_cpu(REAL_SYSFS, self.cpu), "41")
        c.close()
        self.assert_eventually(lambda: read_cpu(REAL_SYSFS, self.cpu) == self.original, what="the original back")
        # The client left while pmqosd was down: the next start gives the original back.
        c = self.client()
        self.request(c, 42, [self.cpu])
        self.daemon.proc.send_signal(signal.SIGKILL)
        self.daemon.proc.wait(60)
        c.close()
        self.assertEqual(read_cpu(REAL_SYSFS, self.cpu), "42")
        self.restart(signal.SIGKILL)
        self.assertEqual(read_cpu(REAL_SYSFS, self.cpu), self.original)


if __name__ == "__main__":
    main()
