# SPDX-License-Identifier: LGPL-2.1-or-later
"""The interfaces pmqosd exports are the ones dbus/*.xml documents: every
member, argument name and type, and property access, read from the live
Introspect() of both object paths and compared with the shipped XML."""

import os
import subprocess
import tempfile

from gi.repository import Gio

from contract import INTROSPECTABLE, NATIVE_IFACE, PATH, QOS_IFACE, STANDARD_IFACES, UPOWER_PATH
from fixtures import BrokerTestCase, SOURCE_ROOT, main

XML = {
    QOS_IFACE: os.path.join(SOURCE_ROOT, "dbus", "org.freedesktop.UPower.QoS.xml"),
    NATIVE_IFACE: os.path.join(SOURCE_ROOT, "dbus", "org.freedesktop.PMQoS.xml"),
}
STANDARD = STANDARD_IFACES


def shape(iface):
    """An interface as plain data: what a client can see of it."""
    args = lambda infos: [(a.name, a.signature) for a in infos or []]  # noqa: E731
    return {
        "methods": {m.name: (args(m.in_args), args(m.out_args)) for m in iface.methods},
        "signals": {s.name: args(s.args) for s in iface.signals},
        "properties": {p.name: (p.signature, int(p.flags)) for p in iface.properties},
    }


def from_file(name):
    with open(XML[name]) as f:
        node = Gio.DBusNodeInfo.new_for_xml(f.read())
    (iface,) = [i for i in node.interfaces if i.name == name]
    return shape(iface)


class TestInterfaces(BrokerTestCase):
    root_only = False  # runs as any user
    def live(self, path):
        c = self.client()
        (xml,) = c.call("Introspect", path=path, iface=INTROSPECTABLE)
        node = Gio.DBusNodeInfo.new_for_xml(xml)
        return {i.name: shape(i) for i in node.interfaces}

    def test_pmqos_path_matches_the_xml(self):
        live = self.live(PATH)
        self.assertEqual(set(live), STANDARD | {QOS_IFACE, NATIVE_IFACE})
        for name in (QOS_IFACE, NATIVE_IFACE):
            with self.subTest(interface=name):
                self.assertEqual(live[name], from_file(name))

    def test_upower_path_matches_the_xml(self):
        live = self.live(UPOWER_PATH)
        self.assertEqual(set(live), STANDARD | {QOS_IFACE})
        self.assertEqual(live[QOS_IFACE], from_file(QOS_IFACE))

    def test_the_xml_documents_every_member(self):
        """Each member of the shipped XML has a comment above it: the interface
        documentation lives in the tree, next to the signatures."""
        for name, path in XML.items():
            with open(path) as f:
                text = f.read()
            for member in list(from_file(name)["methods"]) + list(from_file(name)["signals"]) + \
                    list(from_file(name)["properties"]):
                with self.subTest(interface=name, member=member):
                    at = text.index('name="%s"' % member)
                    self.assertIn("-->", text[max(0, at - 400):at], "no <!-- … --> documentation before %s" % member)


class TestMonitor(BrokerTestCase):
    def test_busctl_monitor_as_the_readme_shows(self):
        """README's `busctl monitor org.freedesktop.PMQoS` on the test bus (and
        tests/run-daemon's, which takes this policy): root may monitor, as on
        Debian's system bus, and sees pmqosd's signals."""
        c = self.client()
        out = tempfile.TemporaryFile(mode="w+")
        mon = subprocess.Popen(["busctl", "--system", "monitor", "org.freedesktop.PMQoS"], env=self.bus.env,
                               stdout=out, stderr=subprocess.STDOUT, text=True)
        try:
            self.assert_eventually(lambda: "Monitoring bus message stream" in read_all(out) or mon.poll() is not None,
                                   what="busctl monitor to start")
            self.assertIsNone(mon.poll(), read_all(out))
            c.call("RequestLatency", "sib", "cpu_dma", 1000, False)
            self.assert_eventually(lambda: "Member=RequestsChanged" in read_all(out), what="the signal in the monitor")
        finally:
            mon.terminate()
            mon.wait(10)
            out.close()


def read_all(f):
    f.seek(0)
    return f.read()


if __name__ == "__main__":
    main()
