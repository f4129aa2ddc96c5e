# SPDX-License-Identifier: LGPL-2.1-or-later
"""The Python binding (import pmqos) with Debian's /usr/bin/python3, on the
live broker and the real device."""

import ctypes
import errno
import glob
import os
import re
import subprocess
import sys
import time

# A sanitizer build of libpmqos needs its runtime loaded first: re-run this
# interpreter with it preloaded (leak checking off: it is Python's, not ours).
_lib = os.environ.get("PMQOS_LIBRARY")
if _lib and "PMQOS_TEST_REEXEC" not in os.environ:
    _ldd = subprocess.run(["ldd", _lib], stdout=subprocess.PIPE, text=True).stdout
    _pre = [line.split("=>")[1].split()[0] for line in _ldd.splitlines()
            if "=>" in line and ("libasan" in line or "libubsan" in line)]
    if _pre:
        os.execve(sys.executable, [sys.executable] + sys.argv,
                  dict(os.environ, LD_PRELOAD=":".join(_pre), ASAN_OPTIONS="detect_leaks=0",
                       PMQOS_TEST_REEXEC="1"))

BINDING_DIR = os.path.abspath(os.environ.get("PMQOS_PYTHONPATH", os.path.join(os.path.dirname(__file__), "..", "..",
                                                                              "bindings", "python")))
sys.path.insert(0, BINDING_DIR)
import pmqos  # noqa: E402

import test_custody  # noqa: E402
from contract import LATENCY_MAX, NATIVE_IFACE
from fixtures import (BrokerTestCase, IS_ROOT, NOBODY, PrivateBus, ROUNDS, SOURCE_ROOT, cpu_hog, main, setpriv,  # noqa: E402
                      wait_for)


class BindingTestCase(BrokerTestCase):
    def setUp(self):
        super().setUp()
        saved = os.environ.get("DBUS_SYSTEM_BUS_ADDRESS")
        os.environ["DBUS_SYSTEM_BUS_ADDRESS"] = self.bus.address
        self.addCleanup(lambda: os.environ.pop("DBUS_SYSTEM_BUS_ADDRESS", None) if saved is None
                        else os.environ.__setitem__("DBUS_SYSTEM_BUS_ADDRESS", saved))


class TestWriters(BindingTestCase, test_custody.CustodyTestCase):
    """Explain()'s writers through the binding (libpmqos's
    pmqos_explanation_custody()), on the real per-CPU files (the custody
    suite's setup: each file put back as found)."""

    def test_explain_names_a_foreign_writer(self):
        _ = self.daemon
        w = self.writer(test_custody.cpu_file(test_custody.SYSFS, 1))
        w.write("n/a")
        self.assert_eventually(lambda: self.explain_cpu(1)["foreign_writer"].get("pid") == w.pid,
                               what="cpu1's foreign_writer")
        with pmqos.Client() as c:
            got = c.explain()
        self.assertEqual(test_custody.writers(got), test_custody.writers(self.explain()))
        fw = next(cpu["foreign_writer"] for cpu in got["cpus"] if cpu["cpu"] == 1)
        self.assertEqual((fw["pid"], fw["comm"], fw["value"]), (w.pid, test_custody.WRITER_COMM, "n/a"))
        self.assertEqual(set(fw), {"pid", "comm", "unit", "value", "when"})


class TestClient(BindingTestCase):
    def test_request_update_cancel(self):
        self.start_daemon()
        with pmqos.Client() as c:
            cookie = c.request(150, reason="python test")
            self.assertKernelAtMost(150)
            self.assertEqual(c.latency, 150)
            c.update(cookie, 60)
            self.assertKernelAtMost(60)
            self.assertEqual(c.latency, 60)
            c.cancel(cookie)
            self.assertEqual(c.latency, -1)
        self.assertKernelReleased()

    def test_explain_equals_the_broker(self):
        self.start_daemon()
        with pmqos.Client() as c:
            cookie = c.request(90, reason="explained")
            got = c.explain()
            bus = self.client().call("Explain", None, iface=NATIVE_IFACE)[0]
            # The same keys and values as the D-Bus dictionary (the writers too); the C-states'
            # residency counters are live (read at call time): later, never less.
            counters = [(a.pop(k), b.pop(k)) for cg, cb in zip(got["cpus"], bus["cpus"])
                        for a, b in zip(cg["cstates"], cb["cstates"]) for k in ("usage", "time")]
            self.assertEqual(got, bus)
            self.assertTrue(all(a <= b for a, b in counters), counters)
            if got["kernel"] == 90:
                self.assertEqual((got["bound_by"], got["binding"]["cookie"]), ("request", cookie))
            self.assertEqual(len(got["cpus"]), os.cpu_count())

    def test_explain_folded_equals_the_broker(self):
        self.start_daemon()
        with pmqos.Client() as c:
            got = c.explain_folded()
            bus = self.client().call("ExplainFolded", None, iface=NATIVE_IFACE)[0]
            counters = [(a.pop(k), b.pop(k)) for cg, cb in zip(got["cpu_groups"], bus["cpu_groups"])
                        for a, b in zip(cg["cstates"], cb["cstates"]) for k in ("usage", "time")]
            self.assertEqual(got, bus)
            self.assertTrue(all(a <= b for a, b in counters), counters)
            self.assertNotIn("cpus", got)
            self.assertEqual(sorted(n for g in got["cpu_groups"] for n in g["cpus"]),
                             sorted(x["cpu"] for x in c.explain()["cpus"]))

    def test_ledger_equals_the_broker(self):
        """Client.ledger() is Ledger(): a 0 µs request keeps every CPU out of
        its states deeper than 0 µs, a row of this process; its live figures
        (held, shallow_idle) read first through the binding, never more than
        the bus's read after; once cancelled, nothing grows: equal."""
        if not glob.glob("/sys/devices/system/cpu/cpu*/cpuidle/state1"):
            self.skipTest("needs cpuidle states: a 0 µs bound blocks none without")
        if self.kernel.baseline < LATENCY_MAX:
            self.skipTest("another process holds /dev/cpu_dma_latency at %d µs" % self.kernel.baseline)
        self.start_daemon()
        bus = self.client()
        with pmqos.Client() as c:
            self.assertEqual(c.ledger(), [])
            cookie = c.request(0, reason="ledger")
            time.sleep(0.2)
            got = c.ledger()
            rows = bus.call("Ledger", None, iface=NATIVE_IFACE)[0]
            live = [(a.pop(k), b.pop(k)) for a, b in zip(got, rows) for k in ("held", "shallow_idle")]
            self.assertEqual(got, rows)
            self.assertTrue(all(0 < a <= b for a, b in live[:1]) and all(a <= b for a, b in live), live)
            with open("/proc/self/comm") as f:
                comm = f.read().strip()
            self.assertEqual([(r["kind"], r["uid"], r["comm"], r["cookie"], r["active"]) for r in got],
                             [("request", os.getuid(), comm, cookie, True)])
            self.assertEqual(set(got[0]), {"kind", "uid", "comm", "unit", "cookie", "active", "blocked_entries"})
            c.cancel(cookie)
            got = c.ledger()
            self.assertEqual(got, bus.call("Ledger", None, iface=NATIVE_IFACE)[0])
            self.assertFalse(got[0]["active"])
            self.assertGreater(got[0]["held"], 0)

    def test_list_requests_page(self):
        self.start_daemon()
        with pmqos.Client() as c:
            cookies = [c.request(100 + k) for k in range(300)]
            listed, after, pages = [], 0, 0
            while True:
                page, nxt = c.list_requests_page(after=after, max=64)
                self.assertLessEqual(len(page), 64)
                listed += page
                pages += 1
                if nxt == 0:
                    break
                self.assertEqual(nxt, page[-1]["cookie"])
                after = nxt
            self.assertEqual([r["cookie"] for r in listed], sorted(cookies))  # each once, ascending
            self.assertEqual(pages, 5)
            bus = {r["cookie"]: r for r in self.client().call("ListRequests", None, iface=NATIVE_IFACE)[0]}
            self.assertEqual({r["cookie"]: r for r in listed}, bus)  # the same dictionaries
            self.assertEqual(len(c.list_requests_page()[0]), 256)  # max 0: 256
            self.assertEqual(c.list_requests_page(after=max(cookies)), ([], 0))
            for bad in ({"after": -1}, {"max": 2 ** 32}, {"after": "1"}, {"max": True}):
                with self.assertRaises(pmqos.InvalidArgument):
                    c.list_requests_page(**bad)

    def test_explain_holders_left_out_equal_the_broker(self):
        """The keys saying what the holder report left out, non-zero, read
        through the C struct's later fields as the bus sends them."""
        if not IS_ROOT:
            self.skipTest("needs root: holders of another user")
        from test_explain import ManyHolders, spare_uid
        uid, heavy_uid = spare_uid(5), spare_uid(6)
        for h in (ManyHolders(self.kernel.path, 66, uid), ManyHolders(self.kernel.path, 4, heavy_uid, fds=12000)):
            self.addCleanup(h.stop)
        self.start_daemon()
        with pmqos.Client() as c:
            got = c.explain()
        bus = self.client().call("Explain", None, iface=NATIVE_IFACE)[0]
        for e in (got, bus):
            for cpu in e["cpus"]:
                cpu.pop("cstates")  # live residency counters
        self.assertEqual(got, bus)
        self.assertEqual(got["external_holders_left_out"], 66 + 2 - 64)
        self.assertIn({"uid": heavy_uid, "processes": 2}, got["external_holders_unscanned"])

    def test_close_ends_requests(self):
        self.start_daemon()
        w = self.client()
        c = pmqos.Client()
        c.request(70)
        c.request(71)
        self.assertEqual(len(w.requests()), 2)
        c.close()
        c.close()  # twice is fine
        wait_for(lambda: w.requests() == [], what="the requests to end")
        self.assertKernelReleased()
        with self.assertRaises(pmqos.Error):
            c.request(10)

    def test_released_when_close_returns(self):
        self.start_daemon()
        with cpu_hog():
            for i in range(ROUNDS):
                with pmqos.hold(66 + i):
                    pass
                got = self.kernel.read()
                self.assertEqual(got, self.kernel.baseline, "round %d: the kernel is at %d after hold" % (i, got))
            c = pmqos.Client()
            c.request(70)
            c.request(71)
            c.close()
            self.assertEqual(self.kernel.read(), self.kernel.baseline)

    def test_hold(self):
        self.start_daemon()
        w = self.client()
        with pmqos.hold(45, reason="render") as h:
            self.assertKernelAtMost(45)
            self.assertEqual([(r[0], r[7], r[8]) for r in w.requests()], [(h.cookie, "render", 45)])
        wait_for(lambda: w.requests() == [], what="the hold to end")
        self.assertKernelReleased()

    def test_exceptions(self):
        self.start_daemon()
        with pmqos.Client() as c:
            with self.assertRaises(pmqos.InvalidArgument) as e:
                c.request(-5)
            self.assertIsInstance(e.exception, ValueError)
            with self.assertRaises(ValueError):
                c.request(pmqos.LATENCY_MAX + 1)
            with self.assertRaises(ValueError):
                c.request(1.5)
            with self.assertRaises(pmqos.NoSuchRequest) as e:
                c.cancel(12345)
            self.assertIsInstance(e.exception, LookupError)
            self.assertIn("cookie", str(e.exception))
            with self.assertRaises(LookupError):
                c.update(12345, 10)
            with self.assertRaises(pmqos.InvalidArgument):
                c.request(10, cpus=[7777])

    def test_values_checked_never_wrapped(self):
        """Out of range is InvalidArgument, before any call: timeout=2**32+5
        was once a 5 s request, cancel(cookie + 2**32) cancelled cookie."""
        self.start_daemon()
        with pmqos.Client() as c:
            for kw in ({"timeout": 2 ** 32 + 5}, {"timeout": -1}, {"timeout": True}, {"timeout": 1.5},
                       {"timeout": "1.5s"}, {"timeout": "0x10"}, {"cpus": [-1]}, {"cpus": [True]},
                       {"cpus": [2 ** 32]}, {"reason": b"bytes"}):
                with self.assertRaises(pmqos.InvalidArgument, msg=kw):
                    c.request(10, **kw)
            self.assertEqual(c.latency, -1)  # none of them reached the broker
            cookie = c.request(50)
            for bad in (cookie + 2 ** 32, 0, -cookie, True):
                with self.assertRaises(pmqos.InvalidArgument, msg=bad):
                    c.cancel(bad)
                with self.assertRaises(pmqos.InvalidArgument, msg=bad):
                    c.update(bad, 40)
            self.assertEqual(c.latency, 50)  # still there
            c.cancel(cookie)

    def test_values_grammar(self):
        """Time spans where a timeout is taken, units and C-state names where
        a latency is, as pmqosctl takes them."""
        self.start_daemon()
        bus = self.client()
        with pmqos.Client() as c:
            for timeout, seconds in (("2min", 120), ("1h 30min", 5400), ("010", 10), (45, 45)):
                cookie = c.request(100, timeout=timeout)
                [r] = [r for r in bus.call("ListRequests", None, iface=NATIVE_IFACE)[0] if r["cookie"] == cookie]
                self.assertAlmostEqual((r["expires"] - r["created"]) / 1e6, seconds, delta=1.5, msg=timeout)
                c.cancel(cookie)
            cookie = c.request("2ms")
            self.assertEqual(c.latency, 2000)
            c.update(cookie, "50us")
            self.assertEqual(c.latency, 50)
            c.cancel(cookie)
            with self.assertRaises(pmqos.InvalidArgument):
                c.request("C-no-such-state")
            with self.assertRaises(pmqos.InvalidArgument):
                c.request("0x20")

    def test_access_denied_as_other_user(self):
        self.start_daemon()
        code = ("import os, sys, pmqos\n"
                "try:\n"
                "    pmqos.Client().request(10)\n"
                "except pmqos.AccessDenied as e:\n"
                "    sys.exit(0 if isinstance(e, PermissionError) and 'Not authorized' in str(e) else 2)\n"
                "sys.exit(1)\n")
        env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(pmqos.__file__)))
        proc = subprocess.run([*setpriv(NOBODY),
                               "/usr/bin/python3", "-c", code], env=env)
        self.assertEqual(proc.returncode, 0)

    def test_broker_unavailable(self):
        empty = PrivateBus()
        try:
            os.environ["DBUS_SYSTEM_BUS_ADDRESS"] = empty.address
            with self.assertRaises(pmqos.BrokerUnavailable) as e:
                pmqos.Client()
            self.assertIsInstance(e.exception, ConnectionError)
            lib = pmqos._library()
            lib.pmqos_strerror.restype = ctypes.c_char_p
            lib.pmqos_strerror.argtypes = [ctypes.c_int]
            sentence = lib.pmqos_strerror(-errno.ECONNREFUSED).decode()
            self.assertTrue(str(e.exception).endswith(": " + sentence), str(e.exception))
            os.environ["DBUS_SYSTEM_BUS_ADDRESS"] = "unix:path=/nonexistent/bus"
            with self.assertRaises(ConnectionError):
                pmqos.hold(10).__enter__()
        finally:
            os.environ["DBUS_SYSTEM_BUS_ADDRESS"] = self.bus.address
            empty.stop()


class TestFirstContact(BindingTestCase):
    """What a new user of the module meets first (SPEC "First contact
    additions"): its version, hold() on some CPUs, a missing library said as
    such, and the README's ways to use it from a build tree or a venv."""

    def python(self, interpreter, code, **env):
        return subprocess.run([interpreter, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=60, env=dict(os.environ, PYTHONPATH=BINDING_DIR, **env))

    def test_version(self):
        with open(os.path.join(SOURCE_ROOT, "meson.build")) as f:
            version = re.search(r"project\('pmqos'.*?version : '([^']+)'", f.read(), re.S).group(1)
        self.assertEqual(pmqos.__version__, version)
        self.assertIn("__version__", pmqos.__all__)

    def test_hold_on_some_cpus(self):
        self.start_daemon()
        root = self.client()
        with pmqos.hold(45, reason="render", cpus=[0]) as h:
            listed = {r["cookie"]: r for r in root.call("ListRequests", None, iface=NATIVE_IFACE)[0]}
            self.assertEqual((listed[h.cookie]["cpus"], listed[h.cookie]["reason"]), ([0], "render"))
        wait_for(lambda: root.requests() == [], what="the hold to end")
        with self.assertRaises(pmqos.InvalidArgument):
            pmqos.hold(45, cpus=[-1])

    def test_library_missing_or_unusable(self):
        """Before: a bare OSError ("libpmqos.so.1: cannot open shared object
        file"), or an AttributeError for a library without pmqos_*."""
        not_elf = os.path.join(self.bus.dir, "libpmqos.so.1")
        with open(not_elf, "w") as f:
            f.write("not a library\n" * 20)  # long enough to be read as ELF, and refused
        code = ("import pmqos\ntry:\n    pmqos.Client()\nexcept pmqos.Error as e:\n"
                "    print(type(e).__name__, isinstance(e, OSError), e)\n")
        for library, why in (("/nonexistent/libpmqos.so.1", "No such file"), (not_elf, "invalid ELF header"),
                             ("libc.so.6", "pmqos_client_new")):
            proc = self.python(sys.executable, code, PMQOS_LIBRARY=library)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertTrue(proc.stdout.startswith("LibraryUnavailable True "), proc.stdout)
            self.assertIn(library, proc.stdout)
            self.assertIn(why, proc.stdout)

    def test_readme_build_tree_and_venv(self):
        """The README's build-tree line, with an interpreter that has no gi
        or dbus module: a venv of its own (Debian's python3 -m venv)."""
        self.start_daemon()
        venv = os.path.join(self.bus.dir, "venv")
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", venv], check=True, timeout=120)
        python = os.path.join(venv, "bin", "python3")
        self.assertNotEqual(self.python(python, "import gi").returncode, 0)  # really without
        with open(os.path.join(SOURCE_ROOT, "README.md")) as f:
            readme = f.read()
        line = [x for x in readme.splitlines() if x.startswith("PYTHONPATH=bindings/python ")][0]
        library = os.environ.get("PMQOS_LIBRARY",
                                 os.path.join(SOURCE_ROOT, "build", "client-lib", "libpmqos", "libpmqos.so.1"))
        cmd = line.replace("python3 ", python + " ", 1).replace("build/client-lib/libpmqos/libpmqos.so.1", library)
        proc = subprocess.run(["sh", "-c", cmd], cwd=SOURCE_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=60)
        self.assertEqual((proc.returncode, proc.stdout.strip()), (0, pmqos.__version__), proc.stderr)
        # The module linked into the venv's site-packages, as the README says for an installed one.
        purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                 stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
        os.symlink(os.path.join(BINDING_DIR, "pmqos"), os.path.join(purelib, "pmqos"))
        code = "import pmqos\nwith pmqos.Client() as c:\n    c.request(61)\n    print(c.latency)\n"
        proc = subprocess.run([python, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=60, env=dict(os.environ, PMQOS_LIBRARY=library))
        self.assertEqual((proc.returncode, proc.stdout.strip()), (0, "61"), proc.stderr)
        self.assertKernelReleased()


if __name__ == "__main__":
    main()
