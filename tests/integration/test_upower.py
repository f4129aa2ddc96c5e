# SPDX-License-Identifier: LGPL-2.1-or-later
"""org.freedesktop.UPower.QoS end to end: every method, signal and error of the interface, and the
error names, against the real daemon on a private bus, with values read
back from the kernel and signals received by a subscriber."""

import os
import time
import xml.etree.ElementTree as ET

from contract import (
    ACCESS_DENIED,
    BUS_NAME,
    INTROSPECTABLE,
    INVALID,
    LATENCY_MAX,
    NOT_SUPPORTED,
    NO_SUCH_REQUEST,
    PATH,
    QOS_IFACE,
    UPOWER_PATH,
)
from fixtures import BrokerTestCase, NOBODY, main



class TestIntrospection(BrokerTestCase):
    root_only = False  # runs as any user
    def test_signatures_and_argument_names_at_both_paths(self):
        c = self.client()
        want_methods = {
            "RequestLatency": ([("type", "s"), ("value", "i"), ("persistent", "b")], [("cookie", "u")]),
            "CancelRequest": ([("cookie", "u")], []),
            "GetLatency": ([("type", "s")], [("value", "i")]),
            "GetLatencyRequests": ([], [("requests", "a(uuusxbssi)")]),
            "SetMinimumLatency": ([("type", "s"), ("value", "i")], []),
        }
        want_signals = {"LatencyChanged": [("type", "s"), ("value", "i")], "RequestsChanged": []}
        for path in (PATH, UPOWER_PATH):
            xml = c.call("Introspect", path=path, iface=INTROSPECTABLE)[0]
            iface = [i for i in ET.fromstring(xml).findall("interface") if i.get("name") == QOS_IFACE]
            self.assertEqual(len(iface), 1, path)
            methods = {}
            for m in iface[0].findall("method"):
                args_in = [(a.get("name"), a.get("type")) for a in m.findall("arg") if a.get("direction") != "out"]
                args_out = [(a.get("name"), a.get("type")) for a in m.findall("arg") if a.get("direction") == "out"]
                methods[m.get("name")] = (args_in, args_out)
            self.assertEqual(methods, want_methods, path)
            signals = {s.get("name"): [(a.get("name"), a.get("type")) for a in s.findall("arg")]
                       for s in iface[0].findall("signal")}
            self.assertEqual(signals, want_signals, path)


class TestRequests(BrokerTestCase):
    def test_request_reaches_kernel_and_is_listed(self):
        c = self.client()
        before = int(time.time())
        cookie = c.request(123)
        self.assertNotEqual(cookie, 0)
        self.assertKernelAtMost(123)
        self.assertEqual(c.latency(), 123)

        reqs = c.requests()
        self.assertEqual(len(reqs), 1)
        r_cookie, uid, pid, exe, timespec, persistent, typ, reserved, value = reqs[0]
        self.assertEqual(r_cookie, cookie)
        self.assertEqual(uid, os.getuid())
        self.assertEqual(pid, os.getpid())
        with open("/proc/self/cmdline", "rb") as f:
            self.assertEqual(exe, f.read().rstrip(b"\0").replace(b"\0", b" ").decode())
        self.assertTrue(before - 1 <= timespec <= int(time.time()) + 1)
        self.assertFalse(persistent)
        self.assertEqual(typ, "cpu_dma")
        self.assertEqual(reserved, "")
        self.assertEqual(value, 123)

        # The same request seen from the UPower-era path.
        self.assertEqual(c.call("GetLatencyRequests", path=UPOWER_PATH)[0], reqs)

    def test_minimum_of_several_and_cancel(self):
        c = self.client()
        a = c.request(300)
        b = c.request(100)
        d = c.request(200)
        self.assertEqual(len({a, b, d}), 3)
        self.assertEqual(c.latency(), 100)
        self.assertKernelAtMost(100)
        c.cancel(b)
        self.assertEqual(c.latency(), 200)
        self.assertKernelAtMost(200)
        c.cancel(d)
        c.cancel(a)
        self.assertEqual(c.latency(), -1)
        self.assertKernelReleased()
        self.assertEqual(c.requests(), [])

    def test_zero_is_the_strictest_bound(self):
        c = self.client()
        cookie = c.request(0)
        self.assertEqual(c.latency(), 0)
        self.assertKernelAtMost(0)
        c.cancel(cookie)
        self.assertKernelReleased()

    def test_minus_one_is_listed_but_never_constrains(self):
        c = self.client()
        cookie = c.request(-1)
        self.assertEqual(c.latency(), -1)
        self.assertKernelReleased()
        self.assertEqual([r[0] for r in c.requests()], [cookie])
        self.assertEqual(c.requests()[0][8], -1)

    def test_maximum_value_is_accepted(self):
        c = self.client()
        c.request(LATENCY_MAX)
        self.assertEqual(c.latency(), LATENCY_MAX)

    def test_invalid_values(self):
        c = self.client()
        keep = c.request(500)
        for v in (-2, -1000, -2147483648, LATENCY_MAX + 1, 2147483647):
            name, message = c.call_error("RequestLatency", "sib", "cpu_dma", v, False)
            self.assertEqual(name, INVALID, v)
            self.assertIn("out of range", message)
            name, _ = c.call_error("SetMinimumLatency", "si", "cpu_dma", v)
            self.assertEqual(name, INVALID, v)
        # Nothing was lost.
        self.assertEqual([r[0] for r in c.requests()], [keep])
        self.assertEqual(c.latency(), 500)

    def test_types(self):
        c = self.client()
        for method, sig, args in (
            ("RequestLatency", "sib", (10, False)),
            ("GetLatency", "s", ()),
            ("SetMinimumLatency", "si", (10,)),
        ):
            # Known names, not served here (no /dev/network_latency since Linux 5.7, no
            # /dev/cpu_wakeup_latency before 6.19): NotSupported, not InvalidArgs.
            for known in ("network", "cpu_wakeup"):
                name, message = c.call_error(method, sig, known, *args)
                self.assertEqual(name, NOT_SUPPORTED, (method, known))
                self.assertIn(known, message)
            for bad in ("", "cpu", "CPU_DMA", "x" * 5000, "cpu_dma\u00e9"):
                name, _ = c.call_error(method, sig, bad, *args)
                self.assertEqual(name, INVALID, (method, bad))
        self.assertEqual(c.requests(), [])

    def test_wrong_signature_is_refused(self):
        c = self.client()
        name, _ = c.call_error("RequestLatency", "si", "cpu_dma", 10)
        self.assertEqual(name, INVALID)
        name, _ = c.call_error("CancelRequest", "s", "1")
        self.assertEqual(name, INVALID)
        self.assertEqual(c.requests(), [])

    def test_cancel_unknown_cookie(self):
        c = self.client()
        keep = c.request(700)
        for cookie in (0, 1, 0xFFFFFFFF, keep ^ 1):
            name, message = c.call_error("CancelRequest", "u", cookie)
            self.assertEqual(name, NO_SUCH_REQUEST)
            self.assertTrue(message.endswith("."))
        self.assertEqual(c.latency(), 700)
        c.cancel(keep)
        name, _ = c.call_error("CancelRequest", "u", keep)  # twice: gone
        self.assertEqual(name, NO_SUCH_REQUEST)

    def test_cancel_with_the_pre_0_9_17_signature(self):
        """CancelRequest(s type, u cookie), as UPower before 0.9.17 had it."""
        c = self.client()
        watcher = self.client()
        watcher.subscribe(path=PATH)
        keep, gone = c.request(300), c.request(200)
        self.assertKernelAtMost(200)
        watcher.take_signals()
        # The type must be the request's; nothing changes otherwise.
        for bad in ("network", "cpu_wakeup_x", ""):
            name, message = c.call_error("CancelRequest", "su", bad, gone)
            self.assertIn(name, (INVALID, NOT_SUPPORTED), bad)
            self.assertTrue(message.endswith("."))
        self.assertEqual(c.call_error("CancelRequest", "su", "cpu_dma", 12345)[0], NO_SUCH_REQUEST)
        self.assertEqual(len(c.requests()), 2)
        # At either path, exactly like CancelRequest(u).
        self.assertEqual(c.call("CancelRequest", "su", "cpu_dma", gone, path=UPOWER_PATH), ())
        self.assertEqual([r[0] for r in c.requests()], [keep])
        self.assertKernelAtMost(300)
        got = watcher.take_signals()
        self.assertEqual([s[2:] for s in got], [("LatencyChanged", ("cpu_dma", 300)), ("RequestsChanged", ())])
        c.call("CancelRequest", "su", "cpu_dma", keep)
        self.assertEqual(c.requests(), [])
        self.assertKernelReleased()
        # Introspection still shows the current signature only.
        node = ET.fromstring(c.call("Introspect", path=PATH, iface=INTROSPECTABLE)[0])
        method = node.find("./interface[@name='org.freedesktop.UPower.QoS']/method[@name='CancelRequest']")
        self.assertEqual([a.get("type") for a in method.findall("arg")], ["u"])

    def test_persistent_request_outlives_its_caller(self):
        c = self.client()
        cookie = c.request(150, persistent=True)
        c.close()
        other = self.client()
        self.assertEqual(other.latency(), 150)
        self.assertKernelAtMost(150)
        reqs = other.requests()
        self.assertEqual(len(reqs), 1)
        self.assertEqual(reqs[0][0], cookie)
        self.assertTrue(reqs[0][5])
        other.cancel(cookie)
        self.assertKernelReleased()

    def test_busctl_request_ends_with_its_connection(self):
        self.start_daemon()
        # busctl closes its connection right after the reply: a non-persistent
        # request made that way is gone at once.
        import subprocess

        out = subprocess.run(
            ["busctl", "call", BUS_NAME, PATH, QOS_IFACE, "RequestLatency", "sib", "cpu_dma", "42",
             "false"],
            env=self.bus.env, check=True, stdout=subprocess.PIPE, text=True,
        ).stdout
        self.assertTrue(out.startswith("u "))
        c = self.client()
        from fixtures import wait_for

        wait_for(lambda: c.requests() == [], what="the busctl request to end")
        self.assertKernelReleased()


class TestFloor(BrokerTestCase):
    def test_floor_raises_bounds_and_goes_away(self):
        c = self.client()
        c.request(100)
        c.call("SetMinimumLatency", "si", "cpu_dma", 500)
        self.assertEqual(c.latency(), 500)
        self.assertKernelAtMost(500)
        if self.kernel.real:
            # Nobody else on this machine asks for less than 500 µs unless the
            # baseline already did.
            self.assertEqual(self.kernel.read(), min(500, self.kernel.baseline))
        c.call("SetMinimumLatency", "si", "cpu_dma", 50)
        self.assertEqual(c.latency(), 100)
        c.call("SetMinimumLatency", "si", "cpu_dma", 500)
        c.call("SetMinimumLatency", "si", "cpu_dma", -1)
        self.assertEqual(c.latency(), 100)
        self.assertKernelAtMost(100)

    def test_floor_alone_constrains_nothing(self):
        c = self.client()
        c.call("SetMinimumLatency", "si", "cpu_dma", 500)
        self.assertEqual(c.latency(), -1)
        self.assertKernelReleased()


class TestSignals(BrokerTestCase):
    def test_latency_changed_once_per_change_on_each_path(self):
        watcher = self.client()
        watcher.subscribe(path=PATH)
        watcher.subscribe(path=UPOWER_PATH)
        c = self.client()

        a = c.request(200)
        got = watcher.take_signals()
        for path in (PATH, UPOWER_PATH):
            self.assertEqual([s for s in got if s[0] == path and s[2] == "LatencyChanged"],
                             [(path, QOS_IFACE, "LatencyChanged", ("cpu_dma", 200))])
            self.assertEqual(len([s for s in got if s[0] == path and s[2] == "RequestsChanged"]), 1)

        # A weaker request changes the set, not the value.
        b = c.request(900)
        got = watcher.take_signals()
        self.assertEqual(sorted(s[2] for s in got), ["RequestsChanged", "RequestsChanged"])

        # Same value again: no LatencyChanged either.
        c.call("SetMinimumLatency", "si", "cpu_dma", 100)
        self.assertEqual(watcher.take_signals(), [])

        c.cancel(a)
        got = watcher.take_signals()
        self.assertEqual(sorted((s[0], s[2], s[3]) for s in got), sorted([
            (PATH, "LatencyChanged", ("cpu_dma", 900)),
            (UPOWER_PATH, "LatencyChanged", ("cpu_dma", 900)),
            (PATH, "RequestsChanged", ()),
            (UPOWER_PATH, "RequestsChanged", ()),
        ]))
        c.cancel(b)
        got = watcher.take_signals()
        self.assertIn((PATH, QOS_IFACE, "LatencyChanged", ("cpu_dma", -1)), got)

    def test_failed_calls_emit_nothing(self):
        watcher = self.client()
        watcher.subscribe()
        c = self.client()
        c.call_error("RequestLatency", "sib", "cpu_dma", -7, False)
        c.call_error("CancelRequest", "u", 12345)
        c.call_error("RequestLatency", "sib", "bogus", 1, False)
        self.assertEqual(watcher.take_signals(), [])

    def test_floor_change_signals_latency(self):
        watcher = self.client()
        watcher.subscribe()
        c = self.client()
        c.request(100)
        watcher.take_signals()  # those of the request itself
        c.call("SetMinimumLatency", "si", "cpu_dma", 300)
        self.assertEqual(watcher.take_signals(), [(PATH, QOS_IFACE, "LatencyChanged", ("cpu_dma", 300))])


class TestUnprivileged(BrokerTestCase):
    """Until polkit decides, only root may change anything (fail closed)."""

    def test_other_user_may_read_but_not_change(self):
        root = self.client()
        cookie = root.request(250)
        nobody = self.peer(uid=NOBODY)

        r = nobody.call("RequestLatency", "sib", "cpu_dma", 10, False)
        self.assertEqual(r[:2], ("error", ACCESS_DENIED))
        r = nobody.call("RequestLatency", "sib", "cpu_dma", 10, True)
        self.assertEqual(r[:2], ("error", ACCESS_DENIED))
        r = nobody.call("CancelRequest", "u", cookie)
        self.assertEqual(r[:2], ("error", ACCESS_DENIED))
        r = nobody.call("CancelRequest", "su", "cpu_dma", cookie)  # the old shape: the same rules
        self.assertEqual(r[:2], ("error", ACCESS_DENIED))
        r = nobody.call("SetMinimumLatency", "si", "cpu_dma", 1000)
        self.assertEqual(r[:2], ("error", ACCESS_DENIED))

        self.assertEqual(nobody.call("GetLatency", "s", "cpu_dma"), ("ok", [250]))
        ok, (reqs,) = nobody.call("GetLatencyRequests", "")
        self.assertEqual(ok, "ok")
        self.assertEqual([r[0] for r in reqs], [cookie])
        self.assertEqual(nobody.call("GetLatencyRequests", "", path=UPOWER_PATH)[0], "ok")

        # Validation still answers first, with the precise error.
        r = nobody.call("RequestLatency", "sib", "cpu_dma", -5, False)
        self.assertEqual(r[:2], ("error", INVALID))
        self.assertEqual(root.latency(), 250)
        self.assertKernelAtMost(250)


if __name__ == "__main__":
    main()
