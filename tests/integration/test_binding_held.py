# SPDX-License-Identifier: LGPL-2.1-or-later
"""The Python binding's requests not bound to the Client (Client.hold() →
pmqos.Hold, Client.request_for()) with Debian's /usr/bin/python3, on the
live broker and the real device: a Hold outlives its Client and ends at
close(), its descriptor kept by a child after the parent closed its copy;
request_for(pid=) ends when the process is killed, request_for(cgroup=)
when the cgroup is emptied; bad arguments are InvalidArgument before any
call. The kernel value is read back each time."""

import os
import shutil
import subprocess
import sys

# A sanitizer build of libpmqos needs its runtime loaded first (as test_binding).
_lib = os.environ.get("PMQOS_LIBRARY")
if _lib and "PMQOS_TEST_REEXEC" not in os.environ:
    _ldd = subprocess.run(["ldd", _lib], stdout=subprocess.PIPE, text=True).stdout
    _pre = [line.split("=>")[1].split()[0] for line in _ldd.splitlines()
            if "=>" in line and ("libasan" in line or "libubsan" in line)]
    if _pre:
        os.execve(sys.executable, [sys.executable] + sys.argv,
                  dict(os.environ, LD_PRELOAD=":".join(_pre), ASAN_OPTIONS="detect_leaks=0",
                       PMQOS_TEST_REEXEC="1"))

sys.path.insert(0, os.environ.get("PMQOS_PYTHONPATH", os.path.join(os.path.dirname(__file__), "..", "..",
                                                                    "bindings", "python")))
import pmqos  # noqa: E402

from contract import NATIVE_IFACE  # noqa: E402
from fixtures import BrokerTestCase, main, wait_for  # noqa: E402
from fake_sysfs import make_fake_sysfs, read_cpu  # noqa: E402
from held_util import make_cgroup  # noqa: E402


class HeldBindingTestCase(BrokerTestCase):
    def setUp(self):
        super().setUp()
        saved = os.environ.get("DBUS_SYSTEM_BUS_ADDRESS")
        os.environ["DBUS_SYSTEM_BUS_ADDRESS"] = self.bus.address
        self.addCleanup(lambda: os.environ.pop("DBUS_SYSTEM_BUS_ADDRESS", None) if saved is None
                        else os.environ.__setitem__("DBUS_SYSTEM_BUS_ADDRESS", saved))
        self.value = 30 + os.getpid() % 7  # a value no other holder is likely to ask for
        self.watcher = self.client()
        self.listed()  # the watcher's own descriptors are all open before open_fds() counts

    def listed(self):
        return {e["cookie"]: e for e in self.watcher.call("ListRequests", None, iface=NATIVE_IFACE)[0]}

    def sleeper(self, **kw):
        p = subprocess.Popen(["sleep", "600"], **kw)
        self.addCleanup(lambda: (p.kill(), p.wait()))
        return p

    def open_fds(self):
        """This process's descriptors but the event fds GLib's and libpmqos's
        threads make and drop as they go: what a leak here would be (a pidfd,
        a directory, a Hold's descriptor) is none of those."""
        out = {}
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink("/proc/self/fd/" + fd)
            except OSError:
                continue  # listdir's own, closed by now
            if target != "anon_inode:[eventfd]":
                out[fd] = target
        return out


class TestHold(HeldBindingTestCase):
    def test_outlives_client_ends_at_close(self):
        c = pmqos.Client()
        h = c.hold(self.value, reason="py held")
        self.assertIsInstance(h, pmqos.Hold)
        self.assertGreater(h.cookie, 0)
        self.assertGreaterEqual(h.fd, 0)
        entry = self.listed()[h.cookie]
        self.assertEqual((entry["bound_to"], entry["reason"], entry["value"]), ("fd", "py held", self.value))
        self.assertKernelAtMost(self.value)
        c.close()
        self.assert_persists(lambda: h.cookie in self.listed(), 0.3, "the hold after Client.close()")
        self.assertKernelAtMost(self.value)
        h.close()
        self.assertEqual(h.fd, -1)
        h.close()  # twice is fine
        self.assert_eventually(self.kernel.released, what="the bound to lift at Hold.close()")
        self.assert_eventually(lambda: h.cookie not in self.listed(), what="the hold to end")

    def test_context_manager(self):
        with pmqos.Client() as c:
            with c.hold(self.value) as h:
                self.assertKernelAtMost(self.value)
            self.assertEqual(h.fd, -1)
            self.assert_eventually(lambda: h.cookie not in self.listed(), what="the hold to end at the with's end")

    def test_child_keeps_it(self):
        with pmqos.Client() as c:
            h = c.hold(self.value)
            child = self.sleeper(pass_fds=[h.fd])
            h.close()
        self.assert_persists(lambda: h.cookie in self.listed(), 0.3, "the hold the child keeps")
        self.assertKernelAtMost(self.value)
        child.kill()
        child.wait()
        self.assert_eventually(self.kernel.released, what="the bound to lift when the child's copy closes")

    def test_refused_leaves_nothing(self):
        before = self.open_fds()
        with pmqos.Client() as c:
            for kw in ({"usec": 2 ** 32 + 5}, {"usec": -5}, {"usec": 1.5}, {"usec": 10, "cpus": [2 ** 32]},
                       {"usec": 10, "reason": b"bytes"}):
                with self.assertRaises(pmqos.InvalidArgument, msg=kw) as e:
                    c.hold(**kw)
                self.assertIsInstance(e.exception, ValueError)
            self.assertEqual(self.listed(), {})
            c.close()
            with self.assertRaises(pmqos.Error):
                c.hold(10)
        self.assertEqual(self.open_fds(), before)


class TestRequestFor(HeldBindingTestCase):
    def test_pid_ends_when_killed(self):
        p = self.sleeper()
        with pmqos.Client() as c:
            self.assertEqual(c.latency, -1)  # the client's own descriptors are all open
            before = self.open_fds()
            cookie = c.request_for(self.value, pid=p.pid, reason="py for")
            self.assertEqual(self.open_fds(), before)  # the pidfd was closed after the call
        entry = self.listed()[cookie]
        self.assertEqual((entry["bound_to"], entry["reason"]), ("process", "py for"))
        self.assert_persists(lambda: cookie in self.listed(), 0.3, "the process's request after Client.close()")
        self.assertKernelAtMost(self.value)
        p.kill()
        p.wait()
        self.assert_eventually(self.kernel.released, what="the bound to lift at the process's kill")

    def test_cgroup_ends_when_emptied(self):
        path = make_cgroup(self)
        p = self.sleeper()
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write(str(p.pid))
        with pmqos.Client() as c:
            cookie = c.request_for(self.value, cgroup=path)
        entry = self.listed()[cookie]
        self.assertEqual((entry["bound_to"], entry["target"]), ("cgroup", path))
        self.assertKernelAtMost(self.value)
        p.kill()
        p.wait()
        self.assert_eventually(self.kernel.released, what="the bound to lift when the cgroup empties")

    def test_refused(self):
        p = self.sleeper()
        gone = subprocess.Popen(["true"])
        gone.wait()
        before = self.open_fds()
        with pmqos.Client() as c:
            for kw in ({}, {"pid": p.pid, "cgroup": "/sys/fs/cgroup"}, {"pid": p.pid, "usec": 2 ** 32 + 5},
                       {"pid": 2 ** 32 + p.pid}, {"pid": 0}, {"pid": -1}, {"pid": True}, {"pid": str(p.pid)},
                       {"pid": gone.pid}, {"cgroup": "/nonexistent/pmqos"}, {"cgroup": "/tmp"},
                       {"cgroup": 5}, {"cgroup": "/tmp\0x"}, {"pid": p.pid, "cpus": [-1]}):
                kw.setdefault("usec", self.value)
                with self.assertRaises(pmqos.InvalidArgument, msg=kw) as e:
                    c.request_for(**kw)
                self.assertIsInstance(e.exception, ValueError)
            self.assertEqual(self.listed(), {})
        self.assertEqual(self.open_fds(), before)
        self.assertKernelReleased()


class TestPerCpu(HeldBindingTestCase):
    def setUp(self):
        self.sysfs = make_fake_sysfs({0: "0", 1: "100"})
        self.addCleanup(shutil.rmtree, self.sysfs, True)
        self.daemon_args = ("--sysfs-root", self.sysfs)
        super().setUp()

    def test_cpus_passed(self):
        with pmqos.Client() as c:
            h = c.hold(40, cpus=[1])
            self.assertEqual((read_cpu(self.sysfs, 1), self.listed()[h.cookie]["cpus"]), ("40", [1]))
            p = self.sleeper()
            c.request_for(30, pid=p.pid, cpus=[1])
            self.assertEqual(read_cpu(self.sysfs, 1), "30")
        p.kill()
        p.wait()
        wait_for(lambda: read_cpu(self.sysfs, 1) == "40", what="cpu1 back to the hold's bound")
        h.close()
        wait_for(lambda: read_cpu(self.sysfs, 1) == "100", what="cpu1 restored")
        self.assertEqual(read_cpu(self.sysfs, 0), "0")
        self.assertKernelReleased()


if __name__ == "__main__":
    main()
