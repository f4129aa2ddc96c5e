# SPDX-License-Identifier: LGPL-2.1-or-later
"""pmqosctl: every command's output and exit status, against the live broker
and the real device."""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile

from harness import NOBODY, ROUNDS, BrokerTestCase, PrivateBus, cpu_hog, forge_signal, main, wait_for

PMQOSCTL = os.environ.get("PMQOSCTL", os.path.join(os.path.dirname(os.environ.get("PMQOSD", "")), "..",
                                                    "client-lib", "pmqosctl"))


class CtlTestCase(BrokerTestCase):
    def ctl(self, *args, env=None, uid=None, check=None, timeout=30):
        cmd = [PMQOSCTL, *args]
        if uid is not None:
            cmd = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups", *cmd]
        proc = subprocess.run(cmd, env=env or self.bus.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if check is not None:
            self.assertEqual(proc.returncode, check, proc.stdout + proc.stderr)
        return proc

    def listing(self):
        return json.loads(self.ctl("list", "--json", check=0).stdout)


class TestCommands(CtlTestCase):
    def test_help_everywhere(self):
        out = self.ctl("--help", check=0).stdout
        for verb in ("status", "list", "hold", "request", "cancel", "set-minimum", "monitor"):
            self.assertIn(verb, out)
            self.assertIn("Usage: pmqosctl " + verb, self.ctl(verb, "--help", check=0).stdout)

    def test_usage_errors_exit_2(self):
        for args in ((), ("frobnicate",), ("request", "abc", "--timeout", "5"), ("request", "50"),
                     ("request", "50", "--timeout", "0"), ("cancel",), ("cancel", "x"), ("set-minimum", "-5"),
                     ("hold",), ("hold", "20", "--cpus", "3-1"), ("list", "extra"), ("status", "extra"),
                     ("hold", "-3")):
            proc = self.ctl(*args)
            self.assertEqual(proc.returncode, 2, args)
            self.assertEqual(len(proc.stderr.strip().splitlines()), 1, (args, proc.stderr))
            self.assertTrue(proc.stderr.startswith("pmqosctl"), proc.stderr)

    def test_status(self):
        out = self.ctl("status", check=0).stdout
        self.assertIn("Effective latency: none", out)
        self.assertIn("Minimum latency:   none", out)
        self.assertIn("Requests:          0", out)
        cookie = self.ctl("request", "250", "--timeout", "60", check=0).stdout.strip()
        self.assertTrue(cookie.isdigit())
        self.ctl("set-minimum", "300", check=0)
        out = self.ctl("status", check=0).stdout
        self.assertIn("Effective latency: 300 µs", out)
        self.assertIn("Minimum latency:   300 µs", out)
        self.assertIn("Requests:          1", out)
        if self.kernel.real:
            self.assertRegex(out, r"Kernel latency:\s+\d+ µs")
        self.ctl("set-minimum", "none", check=0)
        self.assertIn("Minimum latency:   none", self.ctl("status", check=0).stdout)

    def test_status_cstates_from_a_fake_sysfs(self):
        root = tempfile.mkdtemp(prefix="pmqos-sysfs-")
        try:
            for k, (name, lat, dis) in enumerate([("POLL", 0, 0), ("C1", 2, 0), ("C1E", 10, 1), ("C6", 133, 0)]):
                d = os.path.join(root, "devices/system/cpu/cpu0/cpuidle/state%d" % k)
                os.makedirs(d)
                for f, v in (("name", name), ("latency", lat), ("disable", dis)):
                    with open(os.path.join(d, f), "w") as fh:
                        fh.write("%s\n" % v)
            env = dict(self.bus.env, PMQOS_SYSFS_ROOT=root)
            out = self.ctl("status", env=env, check=0).stdout
            self.assertIn("C-states of cpu0 (bound none)", out)
            self.assertRegex(out, r"state3\s+C6\s+133 µs\s+allowed")
            self.ctl("request", "50", "--timeout", "60", check=0)
            out = self.ctl("--sysfs-root", root, "status", check=0).stdout
            self.assertRegex(out, r"state0\s+POLL\s+0 µs\s+allowed")
            self.assertRegex(out, r"state1\s+C1\s+2 µs\s+allowed")
            self.assertRegex(out, r"state2\s+C1E\s+10 µs\s+disabled")
            self.assertRegex(out, r"state3\s+C6\s+133 µs\s+blocked")
            # Without cpuidle (this VM) the section is simply absent.
            empty = tempfile.mkdtemp()
            self.assertNotIn("C-states", self.ctl("--sysfs-root", empty, "status", check=0).stdout)
            os.rmdir(empty)
        finally:
            shutil.rmtree(root)

    def test_list_table_and_json(self):
        self.assertEqual(self.listing(), [])
        a = int(self.ctl("request", "120", "--timeout", "60", "--reason", "night build", check=0).stdout)
        b = int(self.ctl("request", "80", "--persistent", check=0).stdout)
        items = {r["cookie"]: r for r in self.listing()}
        self.assertEqual(set(items), {a, b})
        self.assertEqual(items[a]["reason"], "night build")
        self.assertEqual(items[a]["value"], 120)
        self.assertGreater(items[a]["expires"], items[a]["created"])
        self.assertTrue(items[b]["persistent"])
        self.assertEqual(set(items[a]), {"cookie", "type", "value", "uid", "pid", "exec", "reason", "created",
                                         "persistent", "expires", "cpus", "sender"})
        lines = self.ctl("list", check=0).stdout.splitlines()
        self.assertTrue(lines[0].startswith("COOKIE"))
        self.assertEqual(len(lines), 3)
        # Columns line up: each header starts where its values start.
        col = lines[0].index("UID")
        for line in lines[1:]:
            self.assertEqual(line[col - 1], " ")
        self.assertTrue(any("night build" in l for l in lines))

    def test_request_cancel_and_errors(self):
        cookie = self.ctl("request", "90", "--timeout", "30", check=0).stdout.strip()
        self.assertKernelAtMost(90)
        self.ctl("cancel", cookie, check=0)
        self.assertKernelReleased()
        proc = self.ctl("cancel", cookie, check=1)
        self.assertIn("No latency request has this cookie", proc.stderr)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1)

    def test_refused_for_other_users(self):
        proc = self.ctl("request", "10", "--timeout", "5", uid=NOBODY, check=1)
        self.assertIn("Not authorized", proc.stderr)
        self.assertIn("Effective latency", self.ctl("status", uid=NOBODY, check=0).stdout)

    def test_broker_not_running(self):
        empty = PrivateBus()
        try:
            proc = self.ctl("status", env=empty.env, check=1)
            self.assertIn("not running", proc.stderr)
            proc = self.ctl("status", env=dict(self.bus.env, DBUS_SYSTEM_BUS_ADDRESS="unix:path=/nonexistent"),
                            check=1)
            self.assertIn("system bus", proc.stderr)
        finally:
            empty.stop()


def fake_cstates(root):
    """Two CPU models and an offline CPU: C1E is 10 µs on cpu0, 15 µs on cpu1,
    99 µs on cpu2, which is offline and does not count."""
    tables = {0: [("POLL", 0), ("C1E", 10), ("C6", 133)], 1: [("POLL", 0), ("C1E", 15), ("C3", 80)],
              2: [("POLL", 0), ("C1E", 99)]}
    for cpu, states in tables.items():
        base = os.path.join(root, "devices", "system", "cpu", "cpu%d" % cpu)
        for k, (name, latency) in enumerate(states):
            d = os.path.join(base, "cpuidle", "state%d" % k)
            os.makedirs(d)
            for f, v in (("name", name), ("latency", latency), ("disable", 0)):
                with open(os.path.join(d, f), "w") as fh:
                    fh.write("%s\n" % v)
        if cpu:
            with open(os.path.join(base, "online"), "w") as fh:
                fh.write("0\n" if cpu == 2 else "1\n")
    return dict(os.environ, PMQOS_SYSFS_ROOT=root)


class TestCStateNames(CtlTestCase):
    def setUp(self):
        super().setUp()
        self.sysfs = os.path.join(self.bus.dir, "sysfs")
        self.env = dict(fake_cstates(self.sysfs), DBUS_SYSTEM_BUS_ADDRESS=self.bus.address)

    def test_hold_by_name(self):
        # The largest exit latency of an online CPU: C1E stays allowed on both models.
        proc = self.ctl("hold", "c1e", "--", PMQOSCTL, "list", "--json", env=self.env, check=0)
        self.assertIn("Holding 15 µs (C1E).", proc.stderr)
        [held] = json.loads(proc.stdout)
        self.assertEqual((held["value"], held["reason"]), (15, "C1E"))  # the reason defaults to the name
        self.assertKernelReleased()
        proc = self.ctl("hold", "C6", "--reason", "render", "--", PMQOSCTL, "list", "--json", env=self.env, check=0)
        [held] = json.loads(proc.stdout)
        self.assertEqual((held["value"], held["reason"]), (133, "render"))

    def test_request_by_name(self):
        proc = self.ctl("request", "C3", "--timeout", "30", env=self.env, check=0)
        self.assertIn("Requesting 80 µs (C3).", proc.stderr)
        cookie = int(proc.stdout)
        w = self.client()
        self.assertEqual([(r[0], r[7], r[8]) for r in w.requests()], [(cookie, "C3", 80)])
        self.ctl("cancel", str(cookie), check=0)

    def test_unknown_name_lists_this_machines(self):
        proc = self.ctl("hold", "C9", "--", "true", env=self.env, check=2)
        self.assertIn('unknown C-state "C9"', proc.stderr)
        for name in ("POLL", "C1E", "C3", "C6"):
            self.assertIn(name, proc.stderr)
        empty = dict(self.env, PMQOS_SYSFS_ROOT=os.path.join(self.bus.dir, "no-sysfs"))
        proc = self.ctl("hold", "C1E", "--", "true", env=empty, check=2)
        self.assertIn("shows no C-states", proc.stderr)
        self.assertEqual(self.client().requests(), [])


class TestHold(CtlTestCase):
    def test_hold_runs_command_and_returns_its_status(self):
        script = "import struct,sys; f=open(sys.argv[1],'rb'); print(struct.unpack('=i', f.read(4))[0])"
        proc = self.ctl("hold", "40", "--reason", "compile", "--", "/usr/bin/python3", "-c",
                        script + "; sys.exit(3)", self.kernel.path)
        self.assertEqual(proc.returncode, 3)
        self.assertLessEqual(int(proc.stdout), 40)
        self.assertKernelReleased()

    def test_hold_releases_when_command_is_killed(self):
        p = subprocess.Popen([PMQOSCTL, "hold", "35", "--", "sleep", "60"], env=self.bus.env)
        w = self.client()
        wait_for(lambda: [r[8] for r in w.requests()] == [35], what="the hold")
        self.assertKernelAtMost(35)
        child = int(subprocess.run(["pgrep", "-P", str(p.pid), "sleep"], stdout=subprocess.PIPE,
                                   text=True).stdout)
        os.kill(child, signal.SIGKILL)
        self.assertEqual(p.wait(10), 128 + signal.SIGKILL)
        wait_for(lambda: w.requests() == [], what="release")
        self.assertKernelReleased()

    def test_hold_releases_when_pmqosctl_is_killed(self):
        p = subprocess.Popen([PMQOSCTL, "hold", "36"], env=self.bus.env, stderr=subprocess.PIPE, text=True)
        self.assertIn("Holding 36 µs", p.stderr.readline())
        self.assertKernelAtMost(36)
        p.kill()
        p.wait()
        p.stderr.close()
        w = self.client()
        wait_for(lambda: w.requests() == [], what="release")
        self.assertKernelReleased()

    def test_hold_without_command_until_sigterm(self):
        p = subprocess.Popen([PMQOSCTL, "hold", "37", "--cpus", "0"], env=self.bus.env, stderr=subprocess.PIPE,
                             text=True)
        self.assertIn("Holding 37 µs", p.stderr.readline())
        w = self.client()
        self.assertEqual([(r[8]) for r in w.requests()], [37])
        p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(10), 0)
        p.stderr.close()
        wait_for(lambda: w.requests() == [], what="release")

    def test_released_when_it_returns(self):
        # A bound that outlives "pmqosctl hold" would spoil whatever runs next.
        with cpu_hog():
            for i in range(ROUNDS):
                subprocess.run([PMQOSCTL, "hold", str(50 + i), "--", "true"], env=self.bus.env, check=True)
                got = self.kernel.read()
                self.assertEqual(got, self.kernel.baseline, "round %d: the kernel is at %d after hold" % (i, got))

    def test_released_when_interrupted(self):
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            p = subprocess.Popen([PMQOSCTL, "hold", "38"], env=self.bus.env, stderr=subprocess.PIPE, text=True)
            self.assertIn("Holding 38 µs", p.stderr.readline())
            self.assertKernelAtMost(38)
            p.send_signal(sig)
            self.assertEqual(p.wait(10), 0)
            p.stderr.close()
            self.assertEqual(self.kernel.read(), self.kernel.baseline, "after %s" % signal.Signals(sig).name)

    def test_hold_refused(self):
        proc = self.ctl("hold", "10", "--", "true", uid=NOBODY, check=1)
        self.assertIn("Not authorized", proc.stderr)


class TestMonitor(CtlTestCase):
    @contextlib.contextmanager
    def monitor(self):
        p = subprocess.Popen([PMQOSCTL, "monitor"], env=self.bus.env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            self.assertIn("Monitoring", p.stderr.readline())
            yield p
        finally:
            p.send_signal(signal.SIGINT)
            self.assertEqual(p.wait(10), 0)
            p.stdout.close()
            p.stderr.close()

    def test_monitor_prints_changes(self):
        with self.monitor() as p:
            c = self.client()
            cookie = c.request(50)
            self.assertEqual(p.stdout.readline(), "latency 50 µs\n")
            self.assertEqual(p.stdout.readline(), "requests changed\n")
            c.request(70)  # no latency change: one line only
            self.assertEqual(p.stdout.readline(), "requests changed\n")
            c.cancel(cookie)
            self.assertEqual(p.stdout.readline(), "latency 70 µs\n")
            self.assertEqual(p.stdout.readline(), "requests changed\n")

    def test_monitor_ignores_look_alikes(self):
        """Signals made to look like the broker's, sent straight to the
        monitor by another user, are not reported (libpmqos checks the sender)."""
        with self.monitor() as p:
            w = self.client()
            bus = "/org/freedesktop/DBus", "org.freedesktop.DBus"
            names = w.call("ListNames", path=bus[0], iface=bus[1], dest=bus[1])[0]
            [monitor] = [n for n in names if n.startswith(":") and w.call(
                "GetConnectionUnixProcessID", "s", n, path=bus[0], iface=bus[1], dest=bus[1])[0] == p.pid]
            forge_signal(self.bus, NOBODY, monitor, "/org/freedesktop/PMQoS", "org.freedesktop.UPower.QoS",
                         "LatencyChanged", "si", "('cpu_dma', 1)")
            forge_signal(self.bus, NOBODY, monitor, "/org/freedesktop/PMQoS", "org.freedesktop.UPower.QoS",
                         "RequestsChanged", "", "()")
            forge_signal(self.bus, NOBODY, monitor, "/org/freedesktop/DBus", "org.freedesktop.DBus",
                         "NameOwnerChanged", "sss", "('org.freedesktop.PMQoS', '%s', '')" % monitor)
            c = self.client()
            c.request(50)
            self.assertEqual(p.stdout.readline(), "latency 50 µs\n")  # the first line is the broker's
            self.assertEqual(p.stdout.readline(), "requests changed\n")


if __name__ == "__main__":
    main()
