# SPDX-License-Identifier: LGPL-2.1-or-later
"""The battery floor (pmqosd.conf(5), OnBatteryMinimumLatency): while UPower
says OnBattery, the configured value is one more floor; plugging and
unplugging change the kernel with one write and one LatencyChanged each;
UPower leaving or arriving is followed; the OnBattery property tells. A
stand-in UPower (fake_upower.py) runs on the test bus."""

import os
import shutil
import signal
import subprocess
import time

from contract import BUS_NAME, DBUS_IFACE, DBUS_PATH, NATIVE_IFACE, PATH, PROPS, UPOWER_BUS_NAME
from fixtures import BrokerTestCase, NOBODY, forge_signal, main, owner_of, skip_notice, strace
from fake_sysfs import CSTATE_LATENCY, make_cstate_sysfs

HERE = os.path.dirname(os.path.abspath(__file__))
UPOWER_POLICY = """<policy user="root">
  <allow own="org.freedesktop.UPower"/>
  <allow send_destination="org.freedesktop.UPower"/>
</policy>"""


class FakeUPower:
    def __init__(self, bus, on_battery=False):
        self.proc = subprocess.Popen(["/usr/bin/python3", os.path.join(HERE, "fake_upower.py"),
                                      "1" if on_battery else "0"], env=bus.env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)
        if self.proc.stdout.readline().strip() != "ready":
            raise AssertionError("the stand-in UPower did not start")

    def say(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        if self.proc.stdout.readline().strip() != "ok":
            raise AssertionError("the stand-in UPower did not answer")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(10)
            self.proc.stdout.close()


class BatteryTestCase(BrokerTestCase):
    # The test bus lets root own UPower's name (the stand-in) and call it (pmqosd).
    bus_extra_config = UPOWER_POLICY

    def start(self, config="OnBatteryMinimumLatency=300\n", on_battery=False, upower=True, args=()):
        self.upower = FakeUPower(self.bus, on_battery) if upower else None
        if self.upower:
            self.addCleanup(self.upower.stop)
        path = os.path.join(self.bus.dir, "pmqosd.conf")
        with open(path, "w") as f:
            f.write("[pmqosd]\n" + config)
        self.start_daemon(("--config", path, *args))
        self.watcher = self.client()
        self.watcher.subscribe(path=PATH)

    def on_battery(self):
        return self.watcher.call("Get", "ss", NATIVE_IFACE, "OnBattery", iface=PROPS)[0]

    def latency_signals(self):
        return [s[3] for s in self.watcher.take_signals() if s[2] == "LatencyChanged"]

    def writes_during(self, action):
        """How many times pmqosd writes the device while action runs (strace)."""
        if not shutil.which("strace"):
            skip_notice("counting device writes", "strace is not installed")
            action()
            return None
        out = os.path.join(self.bus.dir, "strace-%d" % time.monotonic_ns())
        tracer = strace(self.daemon.proc.pid, "pwrite64", out)
        action()
        self.watcher.take_signals(settle=0.3)
        tracer.send_signal(signal.SIGINT)
        tracer.wait(10)
        with open(out) as f:
            return sum(1 for line in f if line.startswith("pwrite64("))


class TestBatteryFloor(BatteryTestCase):
    def test_plug_and_unplug(self):
        self.start()
        c = self.client()
        c.request(50)
        self.assertKernelAtMost(50)
        self.assertFalse(self.on_battery())
        self.watcher.take_signals()

        writes = self.writes_during(lambda: self.upower.say("battery 1"))
        self.assert_eventually(lambda: self.watcher.latency() == 300, what="the battery floor")
        self.assertKernelAtMost(300)
        self.assertTrue(self.on_battery())
        self.assertEqual(self.latency_signals(), [])  # all were taken while counting writes
        if writes is not None:
            self.assertEqual(writes, 1)

        writes = self.writes_during(lambda: self.upower.say("battery 0"))
        self.assertEqual(self.watcher.latency(), 50)
        self.assertKernelAtMost(50)
        self.assertFalse(self.on_battery())
        if writes is not None:
            self.assertEqual(writes, 1)

    def test_one_signal_each_way(self):
        self.start()
        c = self.client()
        c.request(50)
        self.watcher.take_signals()
        self.upower.say("battery 1")
        self.assert_eventually(lambda: self.watcher.latency() == 300, what="the battery floor")
        self.assertEqual(self.latency_signals(), [("cpu_dma", 300)])
        self.upower.say("battery 1")  # the same again: nothing to change
        self.upower.say("battery 0")
        self.assert_eventually(lambda: self.watcher.latency() == 50, what="the floor lifted")
        self.assertEqual(self.latency_signals(), [("cpu_dma", 50)])

    def test_upower_leaving_lifts_it(self):
        self.start(on_battery=True)
        c = self.client()
        c.request(50)
        self.assertEqual(self.watcher.latency(), 300)
        e = self.watcher.call("Explain", None, iface=NATIVE_IFACE)[0]
        if e["kernel"] == 300:  # unless another holder of the device asks for less
            self.assertEqual((e["bound_by"], e["floor"], e["binding"]), ("battery-floor", 300, {}))
        self.upower.stop()
        self.assert_eventually(lambda: self.watcher.latency() == 50, what="the floor to go with UPower")
        self.assertFalse(self.on_battery())
        self.assertIn(self.watcher.call("Explain", None, iface=NATIVE_IFACE)[0]["bound_by"], ("request", "external"))
        self.assertKernelAtMost(50)

    def test_upower_arriving_later(self):
        self.start(upower=False)
        c = self.client()
        c.request(50)
        self.assertFalse(self.on_battery())
        late = FakeUPower(self.bus, on_battery=True)
        self.addCleanup(late.stop)
        self.assert_eventually(lambda: self.watcher.latency() == 300, what="UPower's word once it is there")
        self.assertTrue(self.on_battery())

    def test_invalidated_is_asked_again(self):
        self.start()
        c = self.client()
        c.request(50)
        self.upower.say("battery 1")
        self.assert_eventually(lambda: self.on_battery(), what="on battery")
        # UPower says only that the value changed, not what it is: pmqosd asks.
        self.upower.say("invalidate")
        self.assertTrue(self.on_battery())
        self.assertEqual(self.watcher.latency(), 300)

    def test_forged_signals_change_nothing(self):
        """Another user's look-alikes of UPower's PropertiesChanged and of the
        bus's NameOwnerChanged, sent straight to pmqosd, are ignored."""
        self.start()
        c = self.client()
        c.request(50)
        broker = owner_of(self.watcher, BUS_NAME)
        forge_signal(self.bus, NOBODY, broker, "/org/freedesktop/UPower", PROPS,
                     "PropertiesChanged", "sa{sv}as", "('org.freedesktop.UPower', {'OnBattery': <true>}, @as [])")
        self.watcher.take_signals()
        self.assertFalse(self.on_battery())
        self.assertEqual(self.watcher.latency(), 50)
        self.upower.say("battery 1")
        self.assert_eventually(lambda: self.watcher.latency() == 300, what="the real battery floor")
        upower = owner_of(self.watcher, UPOWER_BUS_NAME)
        forge_signal(self.bus, NOBODY, broker, DBUS_PATH, DBUS_IFACE, "NameOwnerChanged",
                     "sss", "('org.freedesktop.UPower', '%s', '')" % upower)
        self.watcher.take_signals()
        self.assertTrue(self.on_battery())
        self.assertEqual(self.watcher.latency(), 300)

    def test_nothing_without_the_key(self):
        self.start(config="", on_battery=True)
        c = self.client()
        c.request(50)
        self.assertTrue(self.on_battery())  # followed anyway
        self.assertEqual(self.watcher.latency(), 50)
        self.assertKernelAtMost(50)

    def test_requests_below_or_without_a_bound(self):
        self.start(on_battery=True)
        self.assertEqual(self.watcher.latency(), -1)  # the floor never creates a bound
        c = self.client()
        c.request(900)
        self.assertEqual(self.watcher.latency(), 900)  # above the floor: unchanged
        c.request(10)
        self.assertEqual(self.watcher.latency(), 300)

    def test_floor_named_by_a_cstate(self):
        """OnBatteryMinimumLatency=C1E: the largest exit latency of C1E on an
        online CPU of this machine (a fake cpuidle tree: cpu2's 25 µs)."""
        sysfs = make_cstate_sysfs()
        self.addCleanup(shutil.rmtree, sysfs, True)
        self.start(config="OnBatteryMinimumLatency=C1E\n", on_battery=True, args=("--sysfs-root", sysfs))
        c = self.client()
        c.request(1)
        self.assertEqual(self.watcher.latency(), CSTATE_LATENCY["C1E"])
        e = self.watcher.call("Explain", None, iface=NATIVE_IFACE)[0]
        self.assertEqual((e["bound_by"], e["floor"]), ("battery-floor", CSTATE_LATENCY["C1E"]))
        self.upower.say("battery 0")
        self.assert_eventually(lambda: self.watcher.latency() == 1, what="the floor lifted")


if __name__ == "__main__":
    main()
