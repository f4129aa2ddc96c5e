# SPDX-License-Identifier: LGPL-2.1-or-later
"""A hostile client: wrong signatures, extreme values, huge strings and
arrays, unknown interfaces and paths, calls whose replies nobody waits for,
disconnects mid-call. Afterwards the daemon must be alive, answer correctly,
and the kernel must hold exactly what the model says."""

from gi.repository import Gio, GLib

from contract import (
    BUS_NAME,
    INVALID,
    LATENCY_MAX,
    NATIVE_IFACE,
    NO_SUCH_REQUEST,
    PATH,
    PROPERTY_READ_ONLY,
    PROPS,
    QOS_IFACE,
    UNKNOWN_INTERFACE,
    UNKNOWN_METHOD,
    UNKNOWN_OBJECT,
    UNKNOWN_PROPERTY,
    UPOWER_PATH,
)
from fixtures import BrokerTestCase, main, remote_error_name, wait_for

UNKNOWN = {UNKNOWN_METHOD, UNKNOWN_OBJECT, UNKNOWN_INTERFACE, UNKNOWN_PROPERTY}


def raw_call(conn, path, iface, method, params, flags=Gio.DBusSendMessageFlags.NONE):
    msg = Gio.DBusMessage.new_method_call(BUS_NAME, path, iface, method)
    if params is not None:
        msg.set_body(params)
    return msg


class TestHostile(BrokerTestCase):
    def expect_error(self, c, path, iface, method, params, names):
        try:
            c.conn.call_sync(BUS_NAME, path, iface, method, params, None, Gio.DBusCallFlags.NONE, 10000, None)
        except GLib.Error as e:
            name = remote_error_name(e)
            self.assertIn(name, names if isinstance(names, (set, list, tuple)) else {names},
                          (method, e.message))
            self.assertTrue(e.message, method)
            return
        self.fail("%s.%s%r succeeded" % (iface, method, params))

    def test_everything_at_once(self):
        keeper = self.client()
        keep = keeper.request(777)  # the model: this is the only live bound at the end
        c = self.bus.connect()
        V = GLib.Variant

        # Wrong signatures, on every method of both interfaces.
        wrong = [
            (QOS_IFACE, "RequestLatency", V("(s)", ("cpu_dma",))),
            (QOS_IFACE, "RequestLatency", V("(iib)", (1, 2, True))),
            (QOS_IFACE, "RequestLatency", V("(sibs)", ("cpu_dma", 1, True, "x"))),
            (QOS_IFACE, "CancelRequest", V("(i)", (-1,))),
            (QOS_IFACE, "CancelRequest", None),
            (QOS_IFACE, "GetLatency", V("(u)", (1,))),
            (QOS_IFACE, "SetMinimumLatency", V("(s)", ("cpu_dma",))),
            (NATIVE_IFACE, "Request", V("(si)", ("cpu_dma", 1))),
            (NATIVE_IFACE, "Request", V("(sia{ss})", ("cpu_dma", 1, {"reason": "x"}))),
            (NATIVE_IFACE, "Update", V("(u)", (1,))),
            (NATIVE_IFACE, "Cancel", V("(s)", ("1",))),
        ]
        for iface, method, params in wrong:
            self.expect_error(c, PATH, iface, method, params, INVALID)

        # Extreme values.
        for v in (-2147483648, 2147483647, LATENCY_MAX + 1, -2):
            self.expect_error(c, PATH, QOS_IFACE, "RequestLatency", V("(sib)", ("cpu_dma", v, False)), INVALID)
            self.expect_error(c, PATH, NATIVE_IFACE, "Request", V("(sia{sv})", ("cpu_dma", v, {})), INVALID)
            self.expect_error(c, PATH, QOS_IFACE, "SetMinimumLatency", V("(si)", ("cpu_dma", v)), INVALID)
        for cookie in (0, 1, 0xFFFFFFFF):
            self.expect_error(c, PATH, QOS_IFACE, "CancelRequest", V("(u)", (cookie,)),
                              NO_SUCH_REQUEST)

        # Huge strings and arrays.
        big = "x" * (1 << 20)
        self.expect_error(c, PATH, QOS_IFACE, "RequestLatency", V("(sib)", (big, 10, False)), INVALID)
        self.expect_error(c, PATH, QOS_IFACE, "GetLatency", V("(s)", (big,)), INVALID)
        self.expect_error(c, PATH, NATIVE_IFACE, "Request",
                          V("(sia{sv})", ("cpu_dma", 10, {"reason": V("s", big)})), INVALID)
        self.expect_error(c, PATH, NATIVE_IFACE, "Request",
                          V("(sia{sv})", ("cpu_dma", 10, {"cpus": V("au", list(range(100000)))})), INVALID)
        self.expect_error(c, PATH, NATIVE_IFACE, "Request",
                          V("(sia{sv})", ("cpu_dma", 10, {"k%d" % i: V("s", "v") for i in range(5000)})), INVALID)
        self.expect_error(c, PATH, NATIVE_IFACE, "Request",
                          V("(sia{sv})", ("cpu_dma", 10, {"timeout": V("v", V("u", 5))})), INVALID)

        # Unknown interfaces, methods, paths, properties.
        self.expect_error(c, PATH, "org.example.Nope", "Frob", None, UNKNOWN)
        self.expect_error(c, PATH, QOS_IFACE, "Frob", None, UNKNOWN)
        self.expect_error(c, "/org/freedesktop/PMQoS/nope", QOS_IFACE, "GetLatency", V("(s)", ("cpu_dma",)),
                          UNKNOWN)
        self.expect_error(c, UPOWER_PATH, NATIVE_IFACE, "ListRequests", None, UNKNOWN)
        self.expect_error(c, PATH, PROPS, "Get", V("(ss)", (NATIVE_IFACE, "Nope")),
                          UNKNOWN | {INVALID})
        self.expect_error(c, PATH, PROPS, "Set",
                          V("(ssv)", (NATIVE_IFACE, "EffectiveLatency", V("i", 5))),
                          UNKNOWN | {INVALID, PROPERTY_READ_ONLY})
        self.expect_error(c, PATH, PROPS, "Set",
                          V("(ssv)", (NATIVE_IFACE, "MinimumLatency", V("s", "5"))), INVALID)

        # Calls nobody waits for: 300 requests, then the connection goes.
        for i in range(300):
            msg = Gio.DBusMessage.new_method_call(BUS_NAME, PATH, QOS_IFACE, "RequestLatency")
            msg.set_body(V("(sib)", ("cpu_dma", 5 + i, False)))
            msg.set_flags(Gio.DBusMessageFlags.NO_REPLY_EXPECTED)
            c.conn.send_message(msg, Gio.DBusSendMessageFlags.NONE)
        # And a few that wait, but whose caller leaves mid-call.
        for i in range(20):
            c.conn.call(BUS_NAME, PATH, NATIVE_IFACE, "Request", V("(sia{sv})", ("cpu_dma", 3, {})), None,
                        Gio.DBusCallFlags.NONE, -1, None, None, None)
        c.conn.flush_sync(None)
        c.close()

        # The daemon is alive, answers, and holds exactly the model's bound.
        wait_for(lambda: [r[0] for r in keeper.requests()] == [keep], timeout=10,
                 what="only the keeper's request to remain")
        self.assertEqual(keeper.latency(), 777)
        self.assertKernelAtMost(777)
        if self.kernel.real and self.kernel.baseline > 777:
            self.assertEqual(self.kernel.read(), 777)
        other = self.client()
        cookie = other.request(555)
        self.assertEqual(other.latency(), 555)
        other.cancel(cookie)
        self.assertEqual(other.latency(), 777)

    def test_a_stream_of_large_calls_stalls_nothing(self):
        """3,000 calls of 40 KB each that want no reply, as fast as the bus
        takes them: each one is forwarded to sd-bus by the gate on pmqosd's
        loop, which must never wait for room in the pair sd-bus reads on
        that same loop (it did: the gate's turn came before sd-bus's, filled
        the pair and waited for ever, SIGTERM unserved). Afterwards pmqosd
        answers at once and a request still reaches the kernel."""
        keeper = self.client()
        keep = keeper.request(777)
        c = self.bus.connect()
        body = GLib.Variant("(s)", ("x" * 40000,))
        for _ in range(3000):
            msg = Gio.DBusMessage.new_method_call(BUS_NAME, PATH, QOS_IFACE, "GetLatency")
            msg.set_body(body)
            msg.set_flags(Gio.DBusMessageFlags.NO_REPLY_EXPECTED)
            c.conn.send_message(msg, Gio.DBusSendMessageFlags.NONE)
        c.conn.flush_sync(None)
        # Answered while the stream is read (a stalled pmqosd answers never).
        self.assertEqual(keeper.latency(), 777)
        c.close()
        other = self.client()
        cookie = other.request(555)
        self.assertEqual(other.latency(), 555)
        self.assertKernelAtMost(555)
        other.cancel(cookie)
        self.assertEqual([r[0] for r in keeper.requests()], [keep])


if __name__ == "__main__":
    main()
