# SPDX-License-Identifier: LGPL-2.1-or-later
"""pmqosctl against other brokers: a stand-in that answers only the methods of
an older pmqosd, or only the newer paged and folded ones, or malformed
pages; and a listing longer than one page from the real one."""

import json
import os
import shutil
import subprocess
import tempfile

from contract import BUS_NAME, DBUS_IFACE, DBUS_NAME, DBUS_PATH, LATENCY_MAX, NATIVE_IFACE, PATH
from fixtures import PMQOSCTL, main
from test_pmqosctl import CtlTestCase


INT_TYPES = {"value": "i", "created": "x", "expires": "x", "bound": "i", "usage": "t", "time": "t",
             "effective": "i", "kernel": "i", "floor": "i", "when": "x", "held": "t", "shallow_idle": "t",
             "blocked_entries": "t"}


def variant_dict(d):
    """An a{sv} of python values: ints as the key's type (INT_TYPES, else u),
    str s, bool b, dicts a{sv}, lists of ints au, lists of dicts aa{sv}."""
    from gi.repository import GLib

    def v(k, x):
        if isinstance(x, bool):
            return GLib.Variant("b", x)
        if isinstance(x, int):
            return GLib.Variant(INT_TYPES.get(k, "u"), x)
        if isinstance(x, str):
            return GLib.Variant("s", x)
        if isinstance(x, dict):
            return variant_dict(x)
        if x and isinstance(x[0], dict):
            return GLib.Variant.new_array(GLib.VariantType("a{sv}"), [variant_dict(e) for e in x])
        return GLib.Variant("au", x)
    return GLib.Variant("a{sv}", {k: v(k, x) for k, x in d.items()})


class StandInBroker(CtlTestCase):
    """A process holding the broker's name that answers the methods a test
    gives it (no tests of its own)."""

    def impostor(self, methods):
        """Takes the name and answers methods {name: (in, out, handler(params) -> tuple of variants)},
        and RequestCount; returns the client (close it to free the name)."""
        from gi.repository import Gio, GLib
        imp = self.client(start=False)
        self.addCleanup(imp.close)
        imp.call("RequestName", "su", BUS_NAME, 0, path=DBUS_PATH, iface=DBUS_IFACE, dest=DBUS_NAME)
        xml = "".join("<method name='%s'>%s%s</method>" % (name, "".join("<arg direction='in' type='%s'/>" % t
                                                                           for t in ins),
                                                      "".join("<arg direction='out' type='%s'/>" % t for t in outs))
                      for name, (ins, outs, _) in methods.items())
        node = Gio.DBusNodeInfo.new_for_xml("<node><interface name='%s'>%s<property name='RequestCount' type='u' "
                                            "access='read'/></interface></node>" % (NATIVE_IFACE, xml))
        self.calls = []

        def on_call(conn, sender, path, iface, method, params, invocation):
            self.calls.append(method)
            invocation.return_value(GLib.Variant.new_tuple(*methods[method][2](params.unpack())))
        reg = imp.conn.register_object(PATH, node.interfaces[0], on_call, lambda *a: GLib.Variant("u", 3), None)
        self.addCleanup(imp.conn.unregister_object, reg)
        return imp

    def ctl_against(self, imp, *args, stdout=subprocess.PIPE, cwd=None):
        proc = subprocess.Popen([PMQOSCTL, *args], env=self.bus.env, stdout=stdout, stderr=subprocess.PIPE,
                                text=True, cwd=cwd)
        while proc.poll() is None:
            imp.pump(0.01)
        out, err = proc.communicate()
        return proc.returncode, out, err

    REQUESTS = [{"cookie": c, "type": "cpu_dma", "value": 10 + c, "created": 1000 - c} for c in (3, 9, 17, 40, 41)]
    CPU = {"bound": -1, "resume_latency": "0", "foreign": False,
           "cstates": [{"name": "POLL", "latency": 0, "allowed": True, "disabled": False, "usage": 1, "time": 1},
                       {"name": "C6", "latency": 133, "allowed": True, "disabled": True, "usage": 1, "time": 1}]}
    EXPLANATION = {"effective": -1, "kernel": LATENCY_MAX, "floor": -1, "bound_by": "none"}


class TestOtherBrokers(StandInBroker):
    """pmqosctl against a stand-in that answers only some methods: an older
    pmqosd (ListRequests and Explain only: the same output), one with pages
    and folded CPUs only (they are used), and one whose pages never end
    (refused, not followed)."""

    def old_broker(self):
        from gi.repository import GLib
        listed = lambda p: (GLib.Variant.new_array(GLib.VariantType("a{sv}"),  # noqa: E731
                                                   [variant_dict(r) for r in self.REQUESTS]),)
        cpus = [dict(self.CPU, cpu=n) for n in (0, 1, 2, 5)]
        explained = lambda p: (variant_dict(dict(self.EXPLANATION, cpus=cpus)),)  # noqa: E731
        return self.impostor({"ListRequests": ((), ("aa{sv}",), listed), "Explain": ((), ("a{sv}",), explained)})

    def test_an_older_broker(self):
        imp = self.old_broker()
        status, out, err = self.ctl_against(imp, "list", "--json")
        self.assertEqual(status, 0, err)
        self.assertEqual([r["cookie"] for r in json.loads(out)], [3, 9, 17, 40, 41])
        self.assertEqual(self.calls, ["ListRequests"])  # ListRequestsPage: UnknownMethod, from Gio itself
        status, out, err = self.ctl_against(imp, "status")
        self.assertEqual(status, 0, err)
        self.assertIn("\ncpu0\u20132,5: bound none\n  POLL", out)
        self.assertEqual(self.calls[-1], "Explain")

    def test_pages_and_folded_groups(self):
        from gi.repository import GLib

        def page(p):
            after, max_ = p
            self.assertEqual(max_, 1024)  # the library asks for the largest page
            got = [r for r in self.REQUESTS if r["cookie"] > after][:2]  # this broker's pages are of 2
            more = len([r for r in self.REQUESTS if r["cookie"] > after]) > 2
            return (GLib.Variant.new_array(GLib.VariantType("a{sv}"), [variant_dict(r) for r in got]),
                    GLib.Variant("u", got[-1]["cookie"] if more else 0))
        groups = [dict(self.CPU, cpus=[0, 1, 2, 5]), dict(self.CPU, cpus=[3], bound=40, resume_latency="40",
                                                          foreign=True)]
        folded = lambda p: (variant_dict(dict(self.EXPLANATION, cpu_groups=groups)),)  # noqa: E731
        imp = self.impostor({"ListRequestsPage": (("u", "u"), ("aa{sv}", "u"), page),
                             "ExplainFolded": ((), ("a{sv}",), folded)})
        status, out, err = self.ctl_against(imp, "list", "--json")
        self.assertEqual(status, 0, err)
        self.assertEqual(self.calls, ["ListRequestsPage"] * 3)
        # Every request once, oldest first (created), as ListRequests lists them.
        self.assertEqual([r["cookie"] for r in json.loads(out)], [41, 40, 17, 9, 3])
        status, out, err = self.ctl_against(imp, "status")
        self.assertEqual(status, 0, err)
        self.assertRegex(out, "\ncpu0\u20132,5: bound none\n  POLL +0 µs  allowed\n  C6 +133 µs  disabled\n")
        self.assertIn('\ncpu3: bound 40 µs (its pm_qos_resume_latency_us holds "40", written by someone else)\n',
                      out)
        self.assertIn("Bound:    none machine-wide; cpu3 40 µs written to its pm_qos_resume_latency_us by someone else\n",
                      out)
        self.assertEqual(self.calls[-1], "ExplainFolded")  # no listing: a foreign file's bound is no request's

    def test_writers_carried_and_malformed_ones_refused(self):
        """Explain()'s foreign_writer and disabled_by in status --json as sent
        and named in status; a writer without a pid (pmqosd names every
        writer by its pid) is refused, not shown as nobody."""
        w = {"pid": 42, "comm": "tuned", "unit": "tuned.service", "value": "n/a", "when": 1700000000000000}
        # State 0 without disabled_by (a broker may leave it out): nobody, {}.
        cpu = dict(self.CPU, cpu=1, foreign_writer=w, cstates=[dict(st) for st in self.CPU["cstates"]])
        cpu["cstates"][1]["disabled_by"] = dict(w, comm="cpupower", unit="", value="1")
        for answer in (cpu, dict(cpu, foreign_writer={"comm": "nobody", "value": "0"})):
            explained = lambda p: (variant_dict(dict(self.EXPLANATION, cpus=[answer])),)  # noqa: E731
            imp = self.impostor({"Explain": ((), ("a{sv}",), explained)})
            status, out, err = self.ctl_against(imp, "status", "--json")
            if answer is not cpu:
                self.assertEqual((status, out), (1, ""), err)
                self.assertTrue(err.startswith("pmqosctl: cannot read the broker's explanation: "), err)
                break
            self.assertEqual(status, 0, err)
            got = json.loads(out)["cpus"][0]
            self.assertEqual(got["foreign_writer"], w)
            self.assertEqual([st["disabled_by"] for st in got["cstates"]], [{}, cpu["cstates"][1]["disabled_by"]])
            status, out, err = self.ctl_against(imp, "status")
            self.assertEqual(status, 0, err)
            self.assertIn('\nWriters:  cpu1 pm_qos_resume_latency_us "n/a" written by pid 42 (tuned, tuned.service)\n'
                          '          cpu1 C6 disable "1" written by pid 42 (cpupower)\n', out)
            imp.close()

    def test_groups_of_more_cpus_than_a_machine_are_refused(self):
        groups = [dict(self.CPU, cpus=list(range(k * 5000, (k + 1) * 5000))) for k in range(2)]
        folded = lambda p: (variant_dict(dict(self.EXPLANATION, cpu_groups=groups)),)  # noqa: E731
        imp = self.impostor({"ExplainFolded": ((), ("a{sv}",), folded)})
        status, out, err = self.ctl_against(imp, "status")
        self.assertEqual((status, out), (1, ""), err)
        self.assertTrue(err.startswith("pmqosctl: cannot read the broker's explanation: "), err)

    def test_pages_that_do_not_move_on_are_refused(self):
        from gi.repository import GLib
        entry = GLib.Variant.new_array(GLib.VariantType("a{sv}"), [variant_dict(self.REQUESTS[0])])
        empty = GLib.Variant.new_array(GLib.VariantType("a{sv}"), [])
        for kind, answer in (("the same page again", lambda p: (entry, GLib.Variant("u", 3))),
                             ("an empty page with more", lambda p: (empty, GLib.Variant("u", p[0] + 1)))):
            imp = self.impostor({"ListRequestsPage": (("u", "u"), ("aa{sv}", "u"), answer)})
            status, out, err = self.ctl_against(imp, "list")
            self.assertEqual((status, out), (1, ""), (kind, err))
            self.assertTrue(err.startswith("pmqosctl: cannot list requests: "), (kind, err))
            self.assertLessEqual(len(self.calls), 2, kind)
            imp.close()


class TestFiguresAndFiles(StandInBroker):
    """What pmqosctl says of a stand-in broker's chosen figures (Ledger()
    rows for status's Cost line, the metrics), where --textfile writes and
    what it refuses, and a standard output that cannot be written."""

    ROW = {"kind": "request", "uid": 0, "comm": "cyclictest", "unit": "", "cookie": 7, "active": True,
           "held": 0, "shallow_idle": 0, "blocked_entries": 0}

    def ledger_broker(self, rows):
        from gi.repository import GLib
        cpus = [dict(self.CPU, cpu=0, bound=0, cstates=[dict(self.CPU["cstates"][0]),
                                                        dict(self.CPU["cstates"][1], allowed=False)])]
        explained = lambda p: (variant_dict(dict(self.EXPLANATION, cpus=cpus)),)  # noqa: E731
        ledger = lambda p: (GLib.Variant.new_array(GLib.VariantType("a{sv}"),  # noqa: E731
                                                   [variant_dict(dict(self.ROW, **r)) for r in rows]),)
        listed = lambda p: (GLib.Variant.new_array(GLib.VariantType("a{sv}"), []),)  # noqa: E731
        return self.impostor({"Explain": ((), ("a{sv}",), explained), "Ledger": ((), ("aa{sv}",), ledger),
                              "ListRequests": ((), ("aa{sv}",), listed)})

    def test_cost_rounded_and_folded_rows_named(self):
        """1550 µs is 2 ms (was "1 ms"), 400 µs "< 1 ms" (was "0 ms"), 999.6 ms "1.0 s", 59.96 s
        "1.0 min"; a folded row (kind other) is other holders (was "the other binds now")."""
        imp = self.ledger_broker([{"shallow_idle": 1550, "held": 999600},
                                  {"kind": "other", "uid": 1000, "comm": "", "cookie": 0, "shallow_idle": 400,
                                   "held": 59960000},
                                  {"kind": "other", "uid": 4294967295, "comm": "", "cookie": 0, "shallow_idle": 0,
                                   "held": 59949999}])
        status, out, err = self.ctl_against(imp, "status")
        self.assertEqual(status, 0, err)
        self.assertIn("\nCost:     request 7 of uid 0 (cyclictest) binds now; its holder's total since pmqosd "
                      "started (every request of that uid, program and unit, summed over CPUs): 2 ms of idle time "
                      "spent shallow over 1.0 s held; the kernel entered no blocked state in all that time\n"
                      "          other holders of uid 1000 (folded, kind other) bind now; their total since pmqosd "
                      "started (every request folded into that row, summed over CPUs): < 1 ms of idle time spent "
                      "shallow over 1.0 min held; the kernel entered no blocked state in all that time\n"
                      "          other holders (folded, kind other) bind now; their total since pmqosd started "
                      "(every request folded into that row, summed over CPUs): 0 ms of idle time spent shallow over "
                      "59.9 s held; the kernel entered no blocked state in all that time\n"
                      "          kept out now, on some CPU: C6\n", out)
        self.assertNotIn("the other", out)

    def textfile_dir(self):
        d = tempfile.mkdtemp(prefix="pmqos-textfile-")
        self.addCleanup(shutil.rmtree, d, True)
        os.mkdir(os.path.join(d, "tf"))
        return d

    def test_textfile_must_name_a_file(self):
        """An empty PATH, one ending in '/', "." or "..": usage errors naming --textfile, nothing
        written anywhere (before: tf/new.prom/ wrote the file tf/new.prom and exited 0; tf/ made
        its temporary file in the current directory; "" said "cannot write : …", exit 1)."""
        d = self.textfile_dir()
        imp = self.ledger_broker([self.ROW])
        for path in ("tf/new.prom/", "tf/", "", "tf/.", "tf/..", "/"):
            status, out, err = self.ctl_against(imp, "metrics", "--textfile", path, cwd=d)
            self.assertEqual((status, out), (2, ""), (path, err))
            self.assertEqual(err, 'pmqosctl metrics: --textfile needs the path of a file, not "%s" '
                                  '(see pmqosctl metrics --help)\n' % path)
            self.assertEqual((sorted(os.listdir(d)), os.listdir(os.path.join(d, "tf"))), (["tf"], []), path)

    def test_textfile_beside_its_target(self):
        """A relative PATH with and without a directory: the file written there, nothing left in
        the current directory or beside it (the temporary file renamed over PATH)."""
        d = self.textfile_dir()
        imp = self.ledger_broker([self.ROW])
        for path, where in (("tf//a.prom", "tf"), ("b.prom", ".")):
            status, out, err = self.ctl_against(imp, "metrics", "--textfile", path, cwd=d)
            self.assertEqual((status, out, err), (0, "", ""), path)
            with open(os.path.join(d, path)) as f:
                self.assertIn('pmqos_holder_held_seconds_total{kind="request",uid="0",comm="cyclictest",unit=""} '
                              '0.000000\n', f.read())
        self.assertEqual((sorted(os.listdir(d)), os.listdir(os.path.join(d, "tf"))), (["b.prom", "tf"], ["a.prom"]))

    def test_full_standard_output_said(self):
        """metrics, status and --help onto /dev/full: exit 1 and one line saying so (before:
        metrics exit 1 silently, status and --help exit 0)."""
        imp = self.ledger_broker([self.ROW])
        for args, verb in ((("metrics",), " metrics"), (("status",), " status"), (("--help",), ""),
                           (("metrics", "--help"), " metrics")):
            with open("/dev/full", "w") as full:
                status, out, err = self.ctl_against(imp, *args, stdout=full)
            self.assertEqual((status, err), (1, "pmqosctl%s: cannot write standard output: No space left on device\n"
                                             % verb), args)


class TestManyRequests(CtlTestCase):
    def test_list_more_than_a_page(self):
        c = self.client()
        cookies = [c.call("Request", "sia{sv}", "cpu_dma", 500 + k, {}, iface=NATIVE_IFACE)[0] for k in range(1100)]
        listed = [r["cookie"] for r in self.listing()]
        self.assertEqual(sorted(listed), sorted(cookies))  # each once, though no page holds them all
        from_bus = [r["cookie"] for r in c.call("ListRequests", None, iface=NATIVE_IFACE)[0]]
        self.assertEqual(listed, from_bus)  # and in ListRequests' order, oldest first
        lines = self.ctl("list", check=0).stdout.splitlines()
        self.assertEqual(len(lines), 1 + 1100)



if __name__ == "__main__":
    main()
