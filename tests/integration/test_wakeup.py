# SPDX-License-Identifier: LGPL-2.1-or-later
"""cpu_wakeup (Linux 6.19's /dev/cpu_wakeup_latency): on a stand-in file
given with --wakeup-device (this kernel has no such device), requests of
that type are aggregated and written apart from cpu_dma, with their own
LatencyChanged, listed with their type, ended with their owner, floored
like cpu_dma, refused with a CPU list, re-adopted after a crash, and shown
by pmqosctl."""

import json
import os
import signal
import struct
import subprocess
import tempfile

from gi.repository import GLib

from contract import INVALID, LATENCY_MAX, NATIVE_IFACE, PATH, UPOWER_PATH
from fixtures import BrokerTestCase, PMQOSCTL, main



class WakeupTestCase(BrokerTestCase):
    def setUp(self):
        fd, self.wakeup = tempfile.mkstemp(prefix="pmqos-wakeup-")
        os.write(fd, struct.pack("=i", LATENCY_MAX))
        os.close(fd)
        self.addCleanup(os.unlink, self.wakeup)
        self.daemon_args = ("--wakeup-device", self.wakeup)
        super().setUp()

    def wakeup_value(self):
        with open(self.wakeup, "rb") as f:
            return struct.unpack("=i", f.read(4))[0]


class TestWakeup(WakeupTestCase):
    def test_apart_from_cpu_dma(self):
        c = self.client()
        a = c.call("RequestLatency", "sib", "cpu_wakeup", 30, False)[0]
        self.assertEqual(self.wakeup_value(), 30)
        self.assertTrue(self.kernel.released())  # the cpu_dma device is left alone
        self.assertEqual((c.call("GetLatency", "s", "cpu_wakeup")[0], c.call("GetLatency", "s", "cpu_dma")[0]),
                         (30, -1))
        c.request(50)
        self.assertKernelAtMost(50)
        self.assertEqual(self.wakeup_value(), 30)
        c.call("RequestLatency", "sib", "cpu_wakeup", 80, False)
        self.assertEqual(self.wakeup_value(), 30)  # the strictest of the type
        c.cancel(a)
        self.assertEqual(self.wakeup_value(), 80)
        c.close()
        self.assert_eventually(lambda: self.wakeup_value() == LATENCY_MAX, what="the wakeup bound to end with c")
        self.assertKernelReleased()

    def test_own_signal_at_both_paths(self):
        w = self.client()
        w.subscribe(path=PATH)
        w.subscribe(path=UPOWER_PATH)
        c = self.client()
        c.call("RequestLatency", "sib", "cpu_wakeup", 25, False)
        got = [(s[0], s[3]) for s in w.take_signals() if s[2] == "LatencyChanged"]
        self.assertEqual(sorted(got), sorted([(PATH, ("cpu_wakeup", 25)), (UPOWER_PATH, ("cpu_wakeup", 25))]))

    def test_listed_with_its_type(self):
        c = self.client()
        cookie = c.call("Request", "sia{sv}", "cpu_wakeup", 40, {"reason": GLib.Variant("s", "vr")},
                        iface=NATIVE_IFACE)[0]
        listed = {r["cookie"]: r for r in c.call("ListRequests", None, iface=NATIVE_IFACE)[0]}
        self.assertEqual((listed[cookie]["type"], listed[cookie]["value"]), ("cpu_wakeup", 40))
        upower = {r[0]: r for r in c.call("GetLatencyRequests")[0]}
        self.assertEqual(upower[cookie][6], "cpu_wakeup")
        rows = json.loads(subprocess.run([PMQOSCTL, "list", "--json"], env=self.bus.env, stdout=subprocess.PIPE,
                                         text=True, check=True).stdout)
        self.assertEqual([r["type"] for r in rows if r["cookie"] == cookie], ["cpu_wakeup"])
        table = subprocess.run([PMQOSCTL, "list"], env=self.bus.env, stdout=subprocess.PIPE, text=True,
                               check=True).stdout
        self.assertRegex(table, r"COOKIE +TYPE +VALUE")
        self.assertRegex(table, r"\n%d +cpu_wakeup +40 µs" % cookie)
        status = subprocess.run([PMQOSCTL, "status"], env=self.bus.env, stdout=subprocess.PIPE, text=True,
                                check=True).stdout
        self.assertIn("Wakeup:   40 µs asked (cpu_wakeup), the kernel at 40 µs\n", status)
        e = c.call("Explain", None, iface=NATIVE_IFACE)[0]
        self.assertEqual((e["wakeup_effective"], e["wakeup_kernel"]), (40, 40))

    def test_binding_is_of_cpu_dma(self):
        c = self.client()
        c.call("RequestLatency", "sib", "cpu_wakeup", 20, False)  # older, same value
        dma = c.request(20)
        e = c.call("Explain", None, iface=NATIVE_IFACE)[0]
        if e["kernel"] == 20:
            self.assertEqual((e["bound_by"], e["binding"]["cookie"], e["binding"]["type"]), ("request", dma, "cpu_dma"))

    def test_cpus_refused_and_floor_applies(self):
        c = self.client()
        name, message = c.call_error("Request", "sia{sv}", "cpu_wakeup", 5, {"cpus": GLib.Variant("au", [0])},
                                     iface=NATIVE_IFACE)
        self.assertEqual(name, INVALID)
        self.assertIn("cpus", message)
        c.call("RequestLatency", "sib", "cpu_wakeup", 30, False)
        c.call("SetMinimumLatency", "si", "cpu_dma", 100)  # one floor for both types
        self.assertEqual(self.wakeup_value(), 100)
        c.call("SetMinimumLatency", "si", "cpu_dma", -1)
        self.assertEqual(self.wakeup_value(), 30)

    def test_readopted_after_a_crash(self):
        c = self.client()
        cookie = c.call("RequestLatency", "sib", "cpu_wakeup", 35, False)[0]
        self.daemon.stop(signal.SIGKILL)
        self.start_daemon(self.daemon_args, state_dir=self.daemon.state_dir, runtime_dir=self.daemon.runtime_dir)
        listed = {r["cookie"]: r for r in c.call("ListRequests", None, iface=NATIVE_IFACE)[0]}
        self.assertEqual(listed[cookie]["type"], "cpu_wakeup")
        self.assertEqual(self.wakeup_value(), 35)

    def test_persistent_survives_a_restart(self):
        c = self.client()
        c.call("RequestLatency", "sib", "cpu_wakeup", 45, True)
        self.start_daemon(self.daemon_args, state_dir=self.daemon.state_dir)
        self.assertEqual(self.client().call("GetLatency", "s", "cpu_wakeup")[0], 45)
        self.assertEqual(self.wakeup_value(), 45)


if __name__ == "__main__":
    main()
