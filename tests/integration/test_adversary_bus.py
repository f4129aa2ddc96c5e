# SPDX-License-Identifier: LGPL-2.1-or-later
"""The adversary on the bus: message bodies of every shape, hundreds of
connections and pipelined calls, forged departures, hostile strings and
terminal escapes in what clients show, and a hostile broker answering
libpmqos and pmqosctl (see adversary.py)."""

import json
import os
import subprocess
import sys

from gi.repository import GLib

from contract import (
    BUS_NAME,
    DBUS_IFACE,
    DBUS_PATH,
    LIMITS,
    NATIVE_IFACE,
    NO_SUCH_REQUEST,
    PATH,
    PROPS,
    QOS_IFACE,
    UPOWER_BUS_NAME,
    UPOWER_PATH,
)
from fixtures import BrokerTestCase, NOBODY, PMQOSCTL, TIME_SCALE, forge_signal, main, owner_of, setpriv
from hostenv import polkit_uid
from adversary import AdversaryTestCase, polkit_ready, set_up_module, tear_down_module

setUpModule = set_up_module
tearDownModule = tear_down_module


class TestMessageShapes(AdversaryTestCase):
    """One message used to crash pmqosd: the Properties.Set filter read the
    variant before sd-bus had checked the body (bodies "ss", "ssi")."""

    SHAPES = [
        ("Set", "", ()),
        ("Set", "s", (NATIVE_IFACE,)),
        ("Set", "ss", (NATIVE_IFACE, "MinimumLatency")),
        ("Set", "ssi", (NATIVE_IFACE, "MinimumLatency", 5)),
        ("Set", "sss", (NATIVE_IFACE, "MinimumLatency", "5")),
        ("Set", "ssu", (NATIVE_IFACE, "MinimumLatency", 5)),
        ("Set", "ssv", (NATIVE_IFACE, "MinimumLatency", GLib.Variant("s", "5"))),
        ("Set", "ssv", (NATIVE_IFACE, "MinimumLatency", GLib.Variant("ai", [5]))),
        ("Set", "ssv", (NATIVE_IFACE, "MinimumLatency", GLib.Variant("i", -7))),
        ("Set", "ssv", (NATIVE_IFACE, "EffectiveLatency", GLib.Variant("i", 5))),
        ("Set", "ssv", (NATIVE_IFACE, "NoSuchProperty", GLib.Variant("i", 5))),
        ("Set", "ssv", (QOS_IFACE, "MinimumLatency", GLib.Variant("i", 5))),
        ("Set", "ssvi", (NATIVE_IFACE, "MinimumLatency", GLib.Variant("i", 5), 1)),
        ("Set", "i", (5,)),
        ("Get", "", ()),
        ("Get", "s", (NATIVE_IFACE,)),
        ("Get", "si", (NATIVE_IFACE, 5)),
        ("Get", "ssi", (NATIVE_IFACE, "MinimumLatency", 5)),
        ("Get", "ss", ("no.such.Interface", "MinimumLatency")),
        ("GetAll", "", ()),
        ("GetAll", "i", (5,)),
        ("GetAll", "ss", (NATIVE_IFACE, NATIVE_IFACE)),
        ("GetAll", "s", ("no.such.Interface",)),
    ]

    def check_shapes(self, dest):
        p = self.peer(uid=NOBODY)
        for path in (PATH, UPOWER_PATH):
            for method, sig, args in self.SHAPES:
                with self.subTest(dest=dest, path=path, method=method, signature=sig):
                    r = p.call(method, sig, *[_wire(a) for a in args], iface=PROPS, path=path, dest=dest)
                    # Whatever the answer, it is an answer, and nothing changed.
                    self.assertIn(r[0], ("ok", "error"))
                    if method == "Set":
                        self.assertEqual(r[0], "error", r)
                    self.assertIsNone(self.daemon.proc.poll(), "pmqosd died:\n" + self.daemon.output())
        self.assertIntact()
        self.assertEqual(self.honest.call("Get", "ss", NATIVE_IFACE, "MinimumLatency", iface=PROPS)[0], -1)

    def test_every_properties_body_shape(self):
        self.check_shapes(BUS_NAME)

    def test_the_reported_crash_with_busctl(self):
        env = dict(self.bus.env)
        r = subprocess.run([*setpriv(NOBODY), "busctl",
                            "--system", "call", BUS_NAME, PATH, PROPS, "Set", "ssi", NATIVE_IFACE, "MinimumLatency",
                            "5"], env=env, capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("signature", r.stderr)  # sd-bus's own refusal of a body that is not "ssv"
        self.assertIntact()


def _wire(arg):
    """peer.py takes JSON: a variant travels as {"__variant__": [type, value]}."""
    if isinstance(arg, GLib.Variant):
        return {"__variant__": [arg.get_type_string(), arg.unpack()]}
    return arg


class TestMessageShapesUnderUPowerName(TestMessageShapes):
    daemon_args = ("--upower-name",)

    def test_every_properties_body_shape(self):
        self.check_shapes(UPOWER_BUS_NAME)

    def test_the_reported_crash_with_busctl(self):
        pass  # the same filter; covered by the body shapes above under this name


class TestClients(AdversaryTestCase):
    def test_600_connections_from_3_uids(self):
        """Each connection that ever called a mutating method used to cost a
        bus match rule of pmqosd's 512: the 513th made pmqosd exit."""
        if not polkit_ready:
            self.skipTest("needs root for the suite's users")
        # dbus-daemon refuses uids the user database does not know: the suite's own users.
        # Both buses let each of them have 210 connections (dbus-daemon: 256 a uid; dbus-broker
        # counts no connections but a user's bytes, fds, matches and objects): what is tested is
        # pmqosd's own bound (512 matches), the same on both.
        uids = (NOBODY, polkit_uid("plain"), polkit_uid("slow"))
        attackers = [self.attacker(uid, "connections", 210) for uid in uids]
        for a in attackers:
            got = a.result(timeout=300 * TIME_SCALE)
            self.assertEqual(got, {NO_SUCH_REQUEST: 210}, got)
        self.assertIntact()
        # They all leave at once: pmqosd is still there, and serves.
        for a in attackers:
            a.close()
        self.assertIntact()
        c = self.client()
        cookie = c.request(300)
        self.assertEqual(self.honest.latency(), 300)
        c.cancel(cookie)
        self.assertIntact()

    def test_tracked_clients_are_capped_and_idle_ones_forgotten(self):
        self.restart(config="MaxClients=8\n")
        # 7 connections hold a request each (the honest one is the 8th tracked).
        holders = [self.peer(uid=0) for _ in range(7)]
        for i, h in enumerate(holders):
            self.assertEqual(h.call("RequestLatency", "sib", "cpu_dma", 900 + i, False)[0], "ok")
        # A 9th connection that would need tracking is refused, and nothing changes.
        extra = self.peer(uid=NOBODY)
        r = extra.call("CancelRequest", "u", 1)
        self.assertEqual(r[:2], ("error", LIMITS), r)
        self.assertIn("tracks 8 connections", r[2])
        self.assertEqual(len(self.honest.requests()), 8)
        # Clients with nothing left are forgotten: once the holders cancel,
        # 40 more connections are served one after the other.
        for h in holders:
            self.assertEqual(h.call("GetLatencyRequests", "")[0], "ok")
        cookies = {r[2]: r[0] for r in self.honest.requests()}
        for h in holders:
            self.assertEqual(h.call("CancelRequest", "u", cookies[h.pid])[0], "ok")
        for _ in range(40):
            p = self.peer(uid=NOBODY)
            self.assertEqual(p.call("CancelRequest", "u", 1)[:2], ("error", NO_SUCH_REQUEST))
            p.close()
        self.assertIntact()

    def test_forged_departure_ends_nothing(self):
        """A NameOwnerChanged sent straight to pmqosd by a peer (sd-bus's match
        on the bus's name lets it through) used to end the named client's
        requests; only the bus's own counts."""
        broker = owner_of(self.honest, BUS_NAME)
        victim = self.client()
        cookie = victim.request(650)
        forge_signal(self.bus, NOBODY, broker, DBUS_PATH, DBUS_IFACE, "NameOwnerChanged",
                     "sss", "('%s', '%s', '')" % (victim.name, victim.name))
        self.honest.take_signals()  # a round trip to pmqosd: the forgery was handled by now
        self.assertIn(cookie, [r[0] for r in self.honest.requests()])
        self.assertIntact(expected_latency=650)
        victim.close()
        self.assert_eventually(lambda: cookie not in [r[0] for r in self.honest.requests()],
                               what="the real departure to count")

    def test_pipelined_calls_of_one_connection_are_bounded(self):
        """A connection that sends 200 calls at once, before its credentials
        are known, gets LimitsExceeded past MaxPendingPerConnection; every
        call is answered and pmqosd holds nothing for the refused ones."""
        self.restart(config="MaxPendingPerConnection=4\nMaxRequestsPerConnection=1000\n")
        a = self.attacker(NOBODY, "pipeline", 200, wait=30 * TIME_SCALE)
        got = a.result(timeout=120 * TIME_SCALE)
        self.assertEqual(got.get("unanswered"), 0, got)
        self.assertGreater(got.get(LIMITS, 0), 0, got)
        self.assertEqual(sum(v for k, v in got.items() if k != "unanswered"), 200, got)
        self.assertEqual(got.get("ok", 0), 0, got)  # nobody has no right to request
        self.assertIntact()




class TestStrings(AdversaryTestCase):
    def start_with_argv(self, argv0, *extra):
        """A root client (no polkit needed) whose command line is argv0 extra…"""
        proc = subprocess.Popen([argv0, self.bus.helper, *extra], executable=sys.executable, env=self.bus.env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.addCleanup(lambda: (proc.stdin.close(), proc.wait(), proc.stdout.close()))
        proc.stdin.write(json.dumps({"op": "call", "method": "RequestLatency", "signature": "sib",
                                     "args": ["cpu_dma", 800, True], "iface": QOS_IFACE, "path": PATH}) + "\n")
        proc.stdin.flush()
        reply = json.loads(proc.stdout.readline())
        self.assertIn("result", reply, reply)
        return reply["result"][0]

    def listed_exec(self, cookie):
        native = {r["cookie"]: r for r in self.honest.call("ListRequests", iface=NATIVE_IFACE)[0]}
        compat = {r[0]: r for r in self.honest.requests()}
        self.assertEqual(native[cookie]["exec"], compat[cookie][3])
        return native[cookie]["exec"]

    def test_invalid_utf8_and_controls_in_the_command_line(self):
        """Used to make every listing fail with InvalidArgs, for everyone,
        for the request's life — across restarts too."""
        cookie = self.start_with_argv(b"\xff\x1b[2J\x7f\xc2\x85", "\u00e9\u00e9")
        exec_ = self.listed_exec(cookie)
        self.assertTrue(exec_.startswith("\\xff\\x1b[2J\\x7f\\xc2\\x85 "), exec_)
        self.assertIn("\u00e9\u00e9", exec_)
        r = subprocess.run([PMQOSCTL, "list"], env=self.bus.env, capture_output=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn(b"\x1b", r.stdout)
        # Persistent: it survives a restart, and the listing still works.
        self.daemon.stop()
        self.start_daemon((), state_dir=self.daemon.state_dir)
        self.keep_honest()
        self.assertEqual(self.listed_exec(cookie), exec_)
        self.honest.cancel(cookie)
        self.assertIntact()

    def test_long_command_line_cut_at_a_character(self):
        cookie = self.start_with_argv("python3", "\u00e9" * 3000)
        exec_ = self.listed_exec(cookie)
        self.assertLessEqual(len(exec_.encode()), 1024)
        self.assertTrue(exec_.endswith("\u2026"), exec_[-10:])
        self.honest.cancel(cookie)
        self.assertIntact()

    def test_state_file_with_bad_strings(self):
        self.daemon.stop()
        state_dir = self.daemon.state_dir
        with open(os.path.join(state_dir, "state"), "w") as f:
            f.write("pmqos-state 1\nfloor -1\n"
                    "request cookie=77 type=cpu_dma value=900 uid=0 pid=1 created=1 expires=0 cpus= "
                    "exec=%FF%1B]0;x%07 reason=%C3%28bad\nend\n")
        self.start_daemon((), state_dir=state_dir)
        self.keep_honest()
        native = {r["cookie"]: r for r in self.honest.call("ListRequests", iface=NATIVE_IFACE)[0]}
        self.assertEqual(native[77]["exec"], "\\xff\\x1b]0;x\\x07")
        self.assertEqual(native[77]["reason"], "\\xc3(bad")
        self.assertEqual(len(self.honest.requests()), 2)
        self.assertIntact()


class TestTerminal(AdversaryTestCase):
    def test_escapes_through_pmqosctl_list(self):
        evil = "\x1b]0;pwned\x07\x1b[2J\x7f\u0085\u009b31m"
        c = self.client()
        cookie = c.call("Request", "sia{sv}", "cpu_dma", 750, {"reason": GLib.Variant("s", evil),
                                                             "timeout": GLib.Variant("u", 60)},
                        iface=NATIVE_IFACE)[0]
        short = c.request(5)  # a narrower value: "5 µs"
        r = subprocess.run([PMQOSCTL, "list"], env=self.bus.env, capture_output=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        for bad in (b"\x1b", b"\x07", b"\x7f", b"\xc2\x85", b"\xc2\x9b"):
            self.assertNotIn(bad, r.stdout)
        self.assertIn(b"\\x1b]0;pwned\\x07", r.stdout)
        # Columns line up by characters, "µs" and escaped text included.
        lines = r.stdout.decode().splitlines()
        header = lines[0]
        self.assertEqual(len(lines), 4)
        for name in ("USER", "SINCE", "LIFETIME", "COMMAND"):
            col = header.index(name)
            for line in lines[1:]:
                self.assertEqual(line[col - 1], " ", (name, header, line))
                self.assertNotEqual(line[col], " ", (name, header, line))
        j = subprocess.run([PMQOSCTL, "list", "--json"], env=self.bus.env, capture_output=True)
        self.assertEqual(j.returncode, 0, j.stderr)
        for bad in (b"\x1b", b"\x07", b"\x7f", b"\xc2\x85", b"\xc2\x9b"):
            self.assertNotIn(bad, j.stdout)
        entries = {e["cookie"]: e for e in json.loads(j.stdout)}
        self.assertEqual(entries[cookie]["reason"], evil)  # escaped, not changed
        c.call("Cancel", "u", cookie, iface=NATIVE_IFACE)
        c.cancel(short)
        self.assertIntact()


FAKE_BROKER = r'''
import sys
from gi.repository import Gio, GLib
XML = """<node><interface name="org.freedesktop.PMQoS">
<method name="ListRequests"><arg type="aa{sv}" direction="out"/></method>
<method name="Cancel"><arg type="u" direction="in"/></method>
</interface><interface name="org.freedesktop.UPower.QoS">
<method name="CancelRequest"><arg type="u" direction="in"/></method>
</interface></node>"""
mode = sys.argv[1]
def on_call(conn, sender, path, iface, method, params, inv):
    if method in ("Cancel", "CancelRequest"):
        inv.return_dbus_error("org.freedesktop.PMQoS.Error.Failed", "\x1b[2J\x1b]0;owned\x07gotcha")
    elif mode == "duplicate":
        entry = {"cookie": GLib.Variant("u", 1), "exec": GLib.Variant("s", "a")}
        # a{sv} built by hand: the same key twice
        b = GLib.VariantBuilder(GLib.VariantType("a{sv}"))
        for k in ("cookie", "exec", "exec", "reason", "reason"):
            b.add_value(GLib.Variant("{sv}", (k, entry.get(k, GLib.Variant("s", "x")))))
        inv.return_value(GLib.Variant.new_tuple(GLib.Variant.new_array(None, [b.end()])))
    else:
        inv.return_value(GLib.Variant("(aa{sv})", ([{}] * 150000,)))
conn = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
for info in Gio.DBusNodeInfo.new_for_xml(XML).interfaces:
    conn.register_object("/org/freedesktop/PMQoS", info, on_call, None, None)
def owned(*a):
    print("ready", flush=True)
Gio.bus_own_name_on_connection(conn, "org.freedesktop.PMQoS", 0, owned, None)
GLib.MainLoop().run()
'''


class TestHostileBroker(BrokerTestCase):
    """libpmqos and pmqosctl against a broker that sends what pmqosd never would."""

    def broker(self, mode):
        path = os.path.join(self.bus.dir, "fake-broker.py")
        with open(path, "w") as f:
            f.write(FAKE_BROKER)
        p = subprocess.Popen([sys.executable, path, mode], env=self.bus.env, stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (p.kill(), p.wait(), p.stdout.close()))
        self.assertEqual(p.stdout.readline().strip(), "ready")

    def test_duplicate_keys_refused(self):
        self.broker("duplicate")
        r = subprocess.run([PMQOSCTL, "list"], env=self.bus.env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("cannot list requests", r.stderr)

    def test_huge_listing_refused(self):
        self.broker("huge")
        r = subprocess.run([PMQOSCTL, "list"], env=self.bus.env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("cannot list requests", r.stderr)

    def test_error_text_escaped(self):
        self.broker("duplicate")
        r = subprocess.run([PMQOSCTL, "cancel", "5"], env=self.bus.env, capture_output=True)
        self.assertEqual(r.returncode, 1, r)
        self.assertNotIn(b"\x1b", r.stderr)
        self.assertNotIn(b"\x07", r.stderr)
        self.assertIn(b"\\x1b[2J\\x1b]0;owned\\x07gotcha", r.stderr)


if __name__ == "__main__":
    main()
