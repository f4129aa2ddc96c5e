# SPDX-License-Identifier: LGPL-2.1-or-later
"""org.freedesktop.PMQoS end to end: options, updates, listings,
properties and PropertiesChanged, timed requests, and agreement with the
UPower view of the same requests."""

import os
import time
import xml.etree.ElementTree as ET

from gi.repository import GLib

from contract import (
    ACCESS_DENIED,
    INTROSPECTABLE,
    INVALID,
    LATENCY_MAX,
    NATIVE_IFACE,
    NOT_SUPPORTED,
    NO_SUCH_REQUEST,
    PATH,
    PROPERTY_READ_ONLY,
    PROPS,
    QOS_IFACE,
)
from fixtures import BrokerTestCase, NOBODY, main, wait_for

LIST_KEYS = {"cookie", "type", "value", "uid", "pid", "exec", "reason", "created", "persistent", "expires",
             "cpus", "sender", "bound_to", "target"}


def opts(**kw):
    types = {"reason": "s", "persistent": "b", "timeout": "u", "cpus": "au"}
    return {k: GLib.Variant(types[k], v) for k, v in kw.items()}


class NativeTestCase(BrokerTestCase):
    def native(self, c, method, signature=None, *args):
        return c.call(method, signature, *args, iface=NATIVE_IFACE)

    def request(self, c, value, **kw):
        return self.native(c, "Request", "sia{sv}", "cpu_dma", value, opts(**kw))[0]

    def listing(self, c):
        return {r["cookie"]: r for r in self.native(c, "ListRequests")[0]}

    def prop(self, c, name):
        return c.call("Get", "ss", NATIVE_IFACE, name, iface=PROPS)[0]


class TestNativeInterface(NativeTestCase):
    def test_introspection(self):
        c = self.client()
        xml = c.call("Introspect", iface=INTROSPECTABLE)[0]
        iface = [i for i in ET.fromstring(xml).findall("interface") if i.get("name") == NATIVE_IFACE][0]
        methods = {m.get("name"): [(a.get("name"), a.get("type"), a.get("direction") or "in")
                                   for a in m.findall("arg")] for m in iface.findall("method")}
        self.assertEqual(methods, {
            "Request": [("type", "s", "in"), ("value", "i", "in"), ("options", "a{sv}", "in"),
                        ("cookie", "u", "out")],
            "Hold": [("type", "s", "in"), ("value", "i", "in"), ("options", "a{sv}", "in"), ("cookie", "u", "out"),
                     ("fd", "h", "out")],
            "RequestFor": [("type", "s", "in"), ("value", "i", "in"), ("target", "h", "in"),
                           ("options", "a{sv}", "in"), ("cookie", "u", "out")],
            "Update": [("cookie", "u", "in"), ("value", "i", "in")],
            "Cancel": [("cookie", "u", "in")],
            "ListRequests": [("requests", "aa{sv}", "out")],
            "Explain": [("explanation", "a{sv}", "out")],
            "ListRequestsPage": [("after", "u", "in"), ("max", "u", "in"), ("requests", "aa{sv}", "out"),
                                 ("next", "u", "out")],
            "ExplainFolded": [("explanation", "a{sv}", "out")],
            "Ledger": [("rows", "aa{sv}", "out")],
        })
        props = {p.get("name"): (p.get("type"), p.get("access")) for p in iface.findall("property")}
        self.assertEqual(props, {
            "EffectiveLatency": ("i", "read"),
            "KernelLatency": ("i", "read"),
            "MinimumLatency": ("i", "readwrite"),
            "RequestCount": ("u", "read"),
            "Version": ("s", "read"),
            "OnBattery": ("b", "read"),
        })

    def test_request_listed_with_every_key(self):
        c = self.client()
        before = time.time()
        cookie = self.request(c, 321, reason="audio session")
        self.assertKernelAtMost(321)
        r = self.listing(c)[cookie]
        self.assertEqual(set(r), LIST_KEYS)
        self.assertEqual(r["type"], "cpu_dma")
        self.assertEqual(r["value"], 321)
        self.assertEqual(r["uid"], os.getuid())
        self.assertEqual(r["pid"], os.getpid())
        self.assertEqual((r["bound_to"], r["target"]), ("connection", ""))
        self.assertEqual(r["reason"], "audio session")
        self.assertFalse(r["persistent"])
        self.assertEqual(r["expires"], 0)
        self.assertEqual(r["cpus"], [])
        self.assertEqual(r["sender"], c.name)
        self.assertTrue(before * 1e6 - 1e6 <= r["created"] <= time.time() * 1e6 + 1e6)
        self.assertIn("python", r["exec"])
        # The compat view shows the same request, reason in "reserved".
        compat = [x for x in c.requests() if x[0] == cookie][0]
        self.assertEqual(compat[7], "audio session")
        self.assertEqual(compat[4], r["created"] // 1000000)

    def test_compat_and_native_views_are_one_set(self):
        c = self.client()
        a = c.request(500)                     # compat
        b = self.request(c, 400)               # native
        self.native(c, "Update", "ui", a, 100)  # native update of a compat request
        self.assertEqual(c.latency(), 100)
        self.assertKernelAtMost(100)
        self.assertEqual({x[0]: x[8] for x in c.requests()}, {a: 100, b: 400})
        c.cancel(b)                            # compat cancel of a native request
        self.native(c, "Cancel", "u", a)
        self.assertEqual(self.listing(c), {})
        self.assertEqual(c.latency(), -1)
        self.assertKernelReleased()

    def test_update_in_place(self):
        watcher = self.client()
        watcher.subscribe()
        c = self.client()
        cookie = self.request(c, 300)
        watcher.take_signals()
        self.native(c, "Update", "ui", cookie, 50)
        self.assertKernelAtMost(50)
        got = watcher.take_signals()
        self.assertIn((PATH, QOS_IFACE, "LatencyChanged", ("cpu_dma", 50)), got)
        self.assertEqual(list(self.listing(c)), [cookie])
        # Same value: nothing changes, nothing is said.
        self.native(c, "Update", "ui", cookie, 50)
        self.assertEqual(watcher.take_signals(), [])
        self.native(c, "Update", "ui", cookie, -1)
        self.assertEqual(c.latency(), -1)
        self.assertKernelReleased()
        self.assertEqual(c.call_error("Update", "ui", 12345, 10, iface=NATIVE_IFACE)[0], NO_SUCH_REQUEST)
        self.assertEqual(c.call_error("Update", "ui", cookie, -3, iface=NATIVE_IFACE)[0], INVALID)
        self.assertEqual(c.call_error("Cancel", "u", 12345, iface=NATIVE_IFACE)[0], NO_SUCH_REQUEST)

    def test_bad_options(self):
        c = self.client()
        keep = self.request(c, 800)
        bad = [
            {"colour": GLib.Variant("s", "red")},
            {"reason": GLib.Variant("i", 3)},
            {"persistent": GLib.Variant("s", "yes")},
            {"timeout": GLib.Variant("i", 10)},
            {"timeout": GLib.Variant("u", 0)},
            {"timeout": GLib.Variant("u", 86401)},
            {"cpus": GLib.Variant("ai", [0])},
            {"cpus": GLib.Variant("au", [9999])},
            {"cpus": GLib.Variant("au", [4000000000])},
            {"reason": GLib.Variant("s", "x" * 257)},
        ]
        for o in bad:
            name, message = c.call_error("Request", "sia{sv}", "cpu_dma", 10, o, iface=NATIVE_IFACE)
            self.assertEqual(name, INVALID, o)
            self.assertTrue(message.endswith("."), message)
        for t, v, name in (("network", 10, NOT_SUPPORTED), ("gpu", 10, INVALID), ("cpu_dma", -2, INVALID),
                           ("cpu_dma", LATENCY_MAX + 1, INVALID)):
            self.assertEqual(c.call_error("Request", "sia{sv}", t, v, {}, iface=NATIVE_IFACE)[0], name)
        # 256 bytes of reason is fine, and UTF-8 counts in bytes.
        ok = self.request(c, 900, reason="é" * 128)
        self.assertEqual(self.listing(c)[ok]["reason"], "é" * 128)
        self.assertEqual(set(self.listing(c)), {keep, ok})
        self.assertEqual(c.latency(), 800)

    def test_properties(self):
        c = self.client()
        self.assertEqual(self.prop(c, "EffectiveLatency"), -1)
        self.assertEqual(self.prop(c, "RequestCount"), 0)
        self.assertEqual(self.prop(c, "MinimumLatency"), -1)
        self.assertRegex(self.prop(c, "Version"), r"^\d+\.\d+")
        self.assertEqual(self.prop(c, "KernelLatency"), self.kernel.read())
        self.request(c, 250)
        self.assertEqual(self.prop(c, "EffectiveLatency"), 250)
        self.assertEqual(self.prop(c, "RequestCount"), 1)
        self.assertEqual(self.prop(c, "KernelLatency"), self.kernel.read())
        self.assertLessEqual(self.prop(c, "KernelLatency"), 250)
        allp = c.call("GetAll", "s", NATIVE_IFACE, iface=PROPS)[0]
        self.assertEqual(set(allp), {"EffectiveLatency", "KernelLatency", "MinimumLatency", "RequestCount",
                                     "Version", "OnBattery"})
        self.assertIs(allp["OnBattery"], False)  # no UPower on the test bus

    def test_properties_changed(self):
        watcher = self.client()
        watcher.subscribe(iface=PROPS, member="PropertiesChanged")
        c = self.client()

        cookie = self.request(c, 600)
        got = watcher.take_signals()
        self.assertEqual(len(got), 1)
        iface, changed, invalidated = got[0][3]
        self.assertEqual((iface, changed), (NATIVE_IFACE, {"EffectiveLatency": 600, "RequestCount": 1}))

        c.call("Set", "ssv", NATIVE_IFACE, "MinimumLatency", GLib.Variant("i", 700), iface=PROPS)
        got = watcher.take_signals()
        self.assertEqual([s[3][1] for s in got], [{"EffectiveLatency": 700, "MinimumLatency": 700}])
        self.assertEqual(c.latency(), 700)
        self.assertEqual(c.call("GetLatency", "s", "cpu_dma")[0], 700)

        # An update that changes nothing visible emits nothing.
        self.native(c, "Update", "ui", cookie, 650)
        self.assertEqual(watcher.take_signals(), [])

        self.native(c, "Cancel", "u", cookie)
        got = watcher.take_signals()
        self.assertEqual([s[3][1] for s in got], [{"EffectiveLatency": -1, "RequestCount": 0}])

        c.call("SetMinimumLatency", "si", "cpu_dma", -1)
        got = watcher.take_signals()
        self.assertEqual([s[3][1] for s in got], [{"MinimumLatency": -1}])

    def test_minimum_latency_set_rules(self):
        c = self.client()
        name, _ = c.call_error("Set", "ssv", NATIVE_IFACE, "MinimumLatency", GLib.Variant("s", "5"), iface=PROPS)
        self.assertEqual(name, INVALID)
        name, _ = c.call_error("Set", "ssv", NATIVE_IFACE, "MinimumLatency", GLib.Variant("i", -9), iface=PROPS)
        self.assertEqual(name, INVALID)
        name, _ = c.call_error("Set", "ssv", NATIVE_IFACE, "RequestCount", GLib.Variant("u", 5), iface=PROPS)
        self.assertEqual(name, PROPERTY_READ_ONLY)
        self.assertEqual(self.prop(c, "MinimumLatency"), -1)
        nobody = self.peer(uid=NOBODY)
        r = nobody.call("Set", "ssv", NATIVE_IFACE, "MinimumLatency", {"__variant__": ["i", 5]}, iface=PROPS)
        self.assertEqual(r[:2], ("error", ACCESS_DENIED))
        self.assertEqual(self.prop(c, "MinimumLatency"), -1)


# What ListRequestsPage's max means (org.freedesktop.PMQoS.xml): 0 is this
# many, more than PAGE_MAX is PAGE_MAX.
PAGE_DEFAULT, PAGE_MAX = 256, 1024


class TestListRequestsPage(NativeTestCase):
    """ListRequests a page at a time: every request once, in cookie order,
    with next saying where the following page starts, and pages bounded."""

    def page(self, c, after, max_):
        return self.native(c, "ListRequestsPage", "uu", after, max_)

    def walk(self, c, max_):
        """Every page from after=0 until next is 0: the entries, and how many pages."""
        entries, after, pages = [], 0, 0
        while True:
            got, nxt = self.page(c, after, max_)
            self.assertLessEqual(len(got), max_)
            entries += got
            pages += 1
            if nxt == 0:
                return entries, pages
            self.assertEqual(nxt, got[-1]["cookie"])
            after = nxt

    def make(self, c, n):
        return [self.request(c, 1000 + k % 50) for k in range(n)]

    def test_pages_list_every_request_once_in_cookie_order(self):
        c = self.client()
        cookies = self.make(c, 300)
        self.request(c, 40, cpus=[0], reason="per-CPU")  # entries with every key filled
        entries, pages = self.walk(c, 64)
        listed = [e["cookie"] for e in entries]
        self.assertEqual(listed, sorted(listed))
        self.assertEqual(len(listed), len(set(listed)))
        self.assertEqual(len(listed), 301)
        self.assertTrue(set(cookies) <= set(listed))
        self.assertEqual(pages, 5)  # 64 × 4 + 45
        # Each entry is ListRequests' entry for that request.
        self.assertEqual({e["cookie"]: e for e in entries}, self.listing(c))

    def test_page_sizes_are_bounded(self):
        c = self.client()
        self.make(c, 1100)
        got, nxt = self.page(c, 0, 0)
        self.assertEqual(len(got), PAGE_DEFAULT)
        self.assertEqual(nxt, got[-1]["cookie"])
        got, nxt = self.page(c, 0, 5000)
        self.assertEqual(len(got), PAGE_MAX)
        self.assertEqual(nxt, got[-1]["cookie"])
        rest, last = self.page(c, nxt, 5000)
        self.assertEqual((len(rest), last), (1100 - PAGE_MAX, 0))
        self.assertEqual(sorted(e["cookie"] for e in got + rest), sorted(self.listing(c)))

    def test_after_the_last_cookie_is_empty(self):
        c = self.client()
        cookies = self.make(c, 10)
        self.assertEqual(self.page(c, max(cookies), 0), ([], 0))
        self.assertEqual(self.page(c, 0xFFFFFFFF, 3), ([], 0))
        got, nxt = self.page(c, 0, 10)  # exactly one full page: nothing follows
        self.assertEqual(([e["cookie"] for e in got], nxt), (sorted(cookies), 0))
        self.assertEqual(self.page(c, 0, 3)[1], sorted(cookies)[2])

    def test_open_to_other_users(self):
        c = self.client()
        cookie = self.request(c, 100)
        status, (got, nxt) = self.peer(uid=NOBODY).call("ListRequestsPage", "uu", 0, 0, iface=NATIVE_IFACE)
        self.assertEqual((status, [e["cookie"] for e in got], nxt), ("ok", [cookie], 0))


class TestTimed(NativeTestCase):
    def test_timed_request_outlives_its_connection_until_the_deadline(self):
        watcher = self.client()
        c = self.bus.connect()
        cookie = self.request(c, 45, timeout=2)
        entry = self.listing(watcher)[cookie]
        self.assertAlmostEqual(entry["expires"] - entry["created"], 2_000_000, delta=1000)
        c.close()
        # The request is detached from its caller, not dropped.
        wait_for(lambda: self.listing(watcher)[cookie]["sender"] == "", what="the request to be detached")
        entry = self.listing(watcher)[cookie]
        self.assertEqual(entry["pid"], os.getpid())
        self.assertKernelAtMost(45)
        watcher.subscribe()
        wait_for(lambda: cookie not in self.listing(watcher), timeout=4, what="the deadline")
        self.assertGreaterEqual(time.time() * 1e6, entry["expires"] - 2000)
        self.assertKernelReleased()
        got = watcher.take_signals()
        self.assertIn((PATH, QOS_IFACE, "LatencyChanged", ("cpu_dma", -1)), got)
        self.assertEqual(len([s for s in got if s[2] == "RequestsChanged"]), 1)

    def test_earliest_deadline_first(self):
        c = self.client()
        late = self.request(c, 20, timeout=3)
        early = self.request(c, 10, timeout=1)
        self.assertEqual(c.latency(), 10)
        wait_for(lambda: early not in self.listing(c), timeout=3, what="the early deadline")
        self.assertEqual(c.latency(), 20)
        self.assertIn(late, self.listing(c))
        self.native(c, "Cancel", "u", late)
        self.assertKernelReleased()


class TestConfiguredTimeout(NativeTestCase):
    daemon_args = ("--max-timeout", "10")

    def test_maximum_timeout(self):
        c = self.client()
        self.request(c, 100, timeout=10)
        name, message = c.call_error("Request", "sia{sv}", "cpu_dma", 10, opts(timeout=11), iface=NATIVE_IFACE)
        self.assertEqual(name, INVALID)
        self.assertIn("10", message)


if __name__ == "__main__":
    main()
