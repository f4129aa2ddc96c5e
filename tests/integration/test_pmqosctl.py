# SPDX-License-Identifier: LGPL-2.1-or-later
"""pmqosctl: every command's output and exit status, against the live broker
and the real device."""

import contextlib
import fcntl
import json
import os
import pty
import re
import sys
import shutil
import signal
import struct
import subprocess
import termios
import time
import unicodedata

from contract import BUS_NAME, DBUS_IFACE, DBUS_NAME, DBUS_PATH, LATENCY_MAX, NATIVE_IFACE, PATH, QOS_IFACE
from fixtures import (
    BrokerTestCase,
    IS_ROOT,
    NOBODY,
    PMQOSCTL,
    PrivateBus,
    ROUNDS,
    cpu_hog,
    forge_signal,
    main,
    setpriv,
    wait_for,
)



class CtlTestCase(BrokerTestCase):
    def ctl(self, *args, env=None, uid=None, check=None, timeout=30):
        """pmqosctl ARGS; on this test's bus, the daemon running (BrokerTestCase.daemon)."""
        if (env or self.bus.env).get("DBUS_SYSTEM_BUS_ADDRESS") == self.bus.address:
            _ = self.daemon
        cmd = [PMQOSCTL, *args]
        if uid is not None:
            cmd = [*setpriv(uid), *cmd]
        proc = subprocess.run(cmd, env=env or self.bus.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        # A coverage build's pmqosctl run as another user cannot write its
        # .gcda files and says so on stderr: not pmqosctl's output.
        proc.stderr = "".join(line for line in proc.stderr.splitlines(True) if not line.startswith("profiling:"))
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
        for args in (("frobnicate",), ("request", "abc", "--timeout", "5"), ("request", "50"),
                     ("request", "50", "--timeout", "0"), ("cancel",), ("cancel", "x"), ("set-minimum", "-5"),
                     ("hold",), ("hold", "20", "--cpus", "3-1"), ("list", "extra"), ("status", "extra"),
                     ("hold", "-3"), ("status", "--watch", "0"), ("status", "--watch=abc"),
                     ("status", "--json", "--watch")):
            proc = self.ctl(*args)
            self.assertEqual(proc.returncode, 2, args)
            self.assertEqual(len(proc.stderr.strip().splitlines()), 1, (args, proc.stderr))
            self.assertTrue(proc.stderr.startswith("pmqosctl"), proc.stderr)

    def test_status(self):
        out = self.ctl("status", check=0).stdout
        if self.kernel.read() == LATENCY_MAX:
            self.assertIn("Bound:    none: nothing asks for one", out)
        self.assertIn("Floor:    none", out)
        self.assertIn("Requests: 0", out)
        cookie = self.ctl("request", "250", "--timeout", "60", "--reason", "night build", check=0).stdout.strip()
        self.assertTrue(cookie.isdigit())
        self.ctl("set-minimum", "300", check=0)
        out = self.ctl("status", check=0).stdout
        self.assertIn("Bound:    300 µs, set by the floor (pmqosctl set-minimum)", out)
        self.assertIn("Floor:    300 µs", out)
        self.assertIn("Requests: 1", out)
        if self.kernel.real:
            self.assertRegex(out, r"Kernel:\s+\d+ µs")
        self.ctl("set-minimum", "none", check=0)
        out = self.ctl("status", check=0).stdout
        self.assertRegex(out, r"Bound:    250 µs, set by request %s of uid 0 pid \d+ `[^`]*pmqosctl request 250[^`]*` "
                              r"\(night build\)" % cookie)
        self.assertIn("Floor:    none", out)

    def test_no_command_is_status(self):
        """A bare pmqosctl shows the state, as systemctl and powerprofilesctl do."""
        self.ctl("request", "250", "--timeout", "60", "--reason", "bare", check=0)
        bare = self.ctl(check=0).stdout
        self.assertRegex(bare, r"Bound:    250 µs, set by request \d+ .*\(bare\)")
        self.assertEqual(bare.split("\nKernel:")[0], self.ctl("status", check=0).stdout.split("\nKernel:")[0])

    def test_status_other_holder(self):
        if not self.kernel.real:
            self.skipTest("needs the real device")
        self.ctl("request", "55", "--timeout", "60", check=0)
        holder = subprocess.Popen([sys.executable, "-c", "import os, struct, sys; fd = os.open(sys.argv[1], os.O_RDWR); "
                                   "os.write(fd, struct.pack('=i', 7)); print(flush=True); sys.stdin.read()",
                                   self.kernel.path, "tuned-alike"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            holder.stdout.readline()
            out = self.ctl("status", check=0).stdout
            self.assertRegex(out, r"Bound:    the kernel is at \d µs because `[^`]*tuned-alike` \(pid %d\) holds the "
                                  r"device itself; pmqosd asks for 55 µs" % holder.pid)
            self.assertRegex(out, r"Holders:  pid %d uid 0 `[^`]*tuned-alike`" % holder.pid)
        finally:
            holder.stdin.close()
            holder.wait()
            holder.stdout.close()

    def test_status_holders_left_out(self):
        """66 holders of one user and root's: root's listed, 5 counted; a
        user with 4 × 12,000 descriptors: 2 processes not looked at. The
        text says both, --json passes Explain()'s keys through."""
        if not IS_ROOT:
            self.skipTest("needs root: holders of other users")
        from test_explain import Holder, ManyHolders, spare_uid
        uid, heavy_uid = spare_uid(3), spare_uid(4)
        holders = [ManyHolders(self.kernel.path, 66, uid), ManyHolders(self.kernel.path, 4, heavy_uid, fds=12000),
                   Holder(self.kernel.path, 9, marker="root-holder")]
        for h in holders:
            self.addCleanup(h.stop)
        out = self.ctl("status", check=0).stdout
        self.assertRegex(out, r"Holders:  pid %d uid 0 `[^`]*root-holder`, " % holders[2].pid)
        self.assertRegex(out, r", pid \d+ uid \d+ `[^`]*` and 5 more holders not listed\n")
        self.assertIn("\n          not looked at (the scan's bound per user): 2 processes of uid %d\n" % heavy_uid, out)
        e = json.loads(self.ctl("status", "--json", check=0).stdout)
        self.assertEqual(e["external_holders_left_out"], 5)  # 66 + 2 + 1 found, 64 listed
        self.assertIn({"uid": heavy_uid, "processes": 2}, e["external_holders_unscanned"])

    def fake_sysfs_daemon(self):
        from test_explain import make_cpuidle, make_fake_sysfs
        root = make_fake_sysfs({0: "0", 1: "0", 2: "0", 3: "40", 4: "0"}, offline=(4,))
        self.addCleanup(shutil.rmtree, root, True)
        for cpu, model in ((0, "big"), (1, "big"), (2, "little"), (3, "little"), (4, "big")):
            make_cpuidle(root, cpu, model)
        self.start_daemon(("--sysfs-root", root))
        return root

    def test_status_cpus_folded_and_json(self):
        self.fake_sysfs_daemon()
        self.ctl("request", "50", "--timeout", "60", check=0)
        out = self.ctl("status", check=0).stdout
        bound = "50 µs" if self.kernel.read() == 50 else "\\d+ µs"
        # Identical CPUs share a row; cpu3 differs by its own bound, cpu4 is offline.
        self.assertRegex(out, r"\ncpu0\u20131: bound %s\n  POLL +0 µs  allowed\n  C1 +2 µs  allowed\n"
                              r"  C1E +10 µs  allowed\n  C6 +133 µs  disabled\n" % bound)
        self.assertRegex(out, r"\ncpu2: bound %s\n  POLL +0 µs  allowed\n  C1 +1 µs  allowed\n  C6 +85 µs  blocked\n"
                         % bound)
        self.assertIn('\ncpu3: bound 40 µs (its pm_qos_resume_latency_us holds "40", written by someone else)\n', out)
        self.assertNotIn("cpu4", out)

        from_ctl = json.loads(self.ctl("status", "--json", check=0).stdout)
        # Besides Explain()'s keys, the Cost line's (Ledger()'s holders binding now).
        self.assertEqual(sorted(from_ctl.pop("cost")), ["blocked_cstates", "holders"])
        c = self.client()
        from_bus = c.call("Explain", None, iface=NATIVE_IFACE)[0]
        # The same dictionary, key for key (the writers too), but "no
        # constraint" is -1 in every field (the kernel reads LATENCY_MAX).
        for key in ("kernel", "wakeup_kernel"):
            if from_bus[key] == LATENCY_MAX:
                from_bus[key] = -1
        self.assertEqual(from_ctl, from_bus)

    def test_status_long_cstate_names_aligned(self):
        """A state named longer than the column ("haltpoll idle", the guest
        idle driver's) widens the column instead of shifting its row."""
        from test_explain import FAKE_MODELS, make_cpuidle, make_fake_sysfs
        root = make_fake_sysfs({0: "0"})
        self.addCleanup(shutil.rmtree, root, True)
        FAKE_MODELS["guest"] = [("POLL", 0, 0, 1, 1), ("haltpoll idle", 1, 0, 1, 1), ("C1", 2, 0, 1, 1)]
        self.addCleanup(FAKE_MODELS.pop, "guest")
        make_cpuidle(root, 0, "guest")
        self.start_daemon(("--sysfs-root", root))
        out = self.ctl("status", check=0).stdout
        rows = [line for line in out.splitlines() if line.endswith("allowed") or line.endswith("blocked")]
        self.assertEqual(len(rows), 3, out)
        self.assertEqual(len({row.index(" µs") for row in rows}), 1, out)
        self.assertIn("  haltpoll idle      1 µs  allowed", out)

    def test_status_watch_residency(self):
        """Paced by the frames pmqosctl prints, not by sleeps: under a
        checker a frame may come later than its 0.3 s."""
        root = self.fake_sysfs_daemon()
        proc = subprocess.Popen([PMQOSCTL, "status", "--watch", "0.3"], env=self.bus.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        header = "C-states, with each one's share of the last"
        lines = []

        def frames_begun(n):  # the first frame has no share; the later ones begin with header
            while sum(header in line for line in lines) < n:
                line = proc.stdout.readline()
                if not line:
                    raise AssertionError("pmqosctl ended: %r" % "".join(lines))
                lines.append(line)
        try:
            frames_begun(1)  # one interval measured from here on
            # cpu2 spends 0.15 s of a later interval in C6.
            with open(os.path.join(root, "devices/system/cpu/cpu2/cpuidle/state2/time"), "w") as f:
                f.write("%d\n" % (120000 + 150000))
            frames_begun(3)  # the frame that counts it is printed whole
        finally:
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=10)
        out = "".join(lines) + out
        self.assertEqual(proc.returncode, 0, err)
        intervals = [float(v) for v in re.findall(r"share of the last (\d+\.\d) s:", out)]
        self.assertTrue(intervals and all(v >= 0.3 for v in intervals), out)  # as measured
        shares = [float(m) for m in re.findall(r"\n  C6 +85 µs  (?:allowed|blocked) +(\d+\.\d) %", out)]
        self.assertTrue(any(v > 0 for v in shares), out)  # the residency showed up
        self.assertTrue(all(0 <= v <= 100 for v in shares), shares)

    def test_status_refuses_a_malformed_explanation(self):
        """A process that took the broker's name cannot make pmqosctl (libpmqos) take a key twice or
        an endless CPU list: the answer is refused whole, with a message and exit status 1."""
        from gi.repository import Gio, GLib
        impostor = self.client(start=False)
        impostor.call("RequestName", "su", BUS_NAME, 0, path=DBUS_PATH,
                      iface=DBUS_IFACE, dest=DBUS_NAME)
        node = Gio.DBusNodeInfo.new_for_xml(
            "<node><interface name='org.freedesktop.PMQoS'><method name='Explain'>"
            "<arg direction='out' type='a{sv}'/></method></interface></node>")

        def entry(key, value):
            return GLib.Variant.new_dict_entry(GLib.Variant("s", key), GLib.Variant("v", value))
        cpu = GLib.Variant("a{sv}", {"cpu": GLib.Variant("u", 0)})
        unscanned = GLib.Variant("a{sv}", {"uid": GLib.Variant("u", 1000), "processes": GLib.Variant("u", 1)})
        answers = {
            "twice": [entry("effective", GLib.Variant("i", 1)), entry("effective", GLib.Variant("i", 2))],
            "cpus": [entry("cpus", GLib.Variant.new_array(GLib.VariantType("a{sv}"), [cpu] * 9000))],
            "type": [entry("bound_by", GLib.Variant("u", 7))],
            "unscanned": [entry("external_holders_unscanned",
                                GLib.Variant.new_array(GLib.VariantType("a{sv}"), [unscanned] * 4097))],
            "left-out type": [entry("external_holders_left_out", GLib.Variant("i", 3))],
        }
        current = {}

        def on_call(conn, sender, path, iface, method, params, invocation):
            invocation.return_value(GLib.Variant.new_tuple(
                GLib.Variant.new_array(GLib.VariantType("{sv}"), answers[current["kind"]])))
        reg = impostor.conn.register_object("/org/freedesktop/PMQoS", node.interfaces[0], on_call, None, None)
        try:
            for kind in answers:
                current["kind"] = kind
                proc = subprocess.Popen([PMQOSCTL, "status", "--json"], env=self.bus.env, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
                while proc.poll() is None:
                    impostor.pump(0.01)
                out, err = proc.communicate()
                self.assertEqual(proc.returncode, 1, (kind, out, err))
                self.assertEqual(out, "")
                self.assertTrue(err.startswith("pmqosctl: cannot read the broker's explanation: "), err)
        finally:
            impostor.conn.unregister_object(reg)
            impostor.close()  # the name is free again
        self.start_daemon()  # for the clean stop every test ends with

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
                                         "persistent", "expires", "cpus", "sender", "bound_to", "target"})
        self.assertEqual((items[a]["bound_to"], items[a]["target"]), ("timeout", ""))
        self.assertEqual((items[b]["bound_to"], items[b]["target"]), ("persistent", ""))
        from_bus = {r["cookie"]: r for r in self.client().call("ListRequests", None, iface=NATIVE_IFACE)[0]}
        self.assertEqual(items, from_bus)  # the same dictionaries, key for key
        lines = self.ctl("list", check=0).stdout.splitlines()
        self.assertTrue(lines[0].startswith("COOKIE"))
        self.assertEqual(len(lines), 3)
        # Columns line up: each header starts where its values start.
        col = lines[0].index("USER")
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
        self.assertIn("Bound:", self.ctl("status", uid=NOBODY, check=0).stdout)

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


def display_width(text):
    """Terminal columns: wide (CJK, emoji) characters two, combining none."""
    return sum(0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
               for ch in text)


def on_a_terminal(cmd, env, stdin_tty=False, columns=None):
    """Runs cmd with stdout (and stdin if asked) on a pseudo-terminal; returns
    (status, what it printed)."""
    master, slave = pty.openpty()
    if columns:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen(cmd, env=env, stdout=slave, stderr=slave,
                            stdin=slave if stdin_tty else subprocess.DEVNULL, close_fds=True)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: every writer closed it
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return proc.wait(30), out.decode().replace("\r\n", "\n")


# The integer keys of a listing and of an explanation that are not "u".
class TestListForPeople(CtlTestCase):
    def test_user_names_and_since(self):
        self.ctl("request", "120", "--timeout", "60", check=0)
        lines = self.ctl("list", check=0).stdout.splitlines()
        header = lines[0].split()
        self.assertEqual(header[:6], ["COOKIE", "VALUE", "USER", "PID", "SINCE", "LIFETIME"])
        row = lines[1]
        col = lines[0].index("USER")
        self.assertEqual(row[col:].split()[0], "root")
        col = lines[0].index("SINCE")
        self.assertRegex(row[col:].split()[0], r"^\d\d:\d\d:\d\d$")

    def test_wide_text_aligned_and_fitted_to_the_terminal(self):
        reason = "音楽の再生 🎵 ok"
        long_arg = "x" * 300
        self.start_daemon()
        p = subprocess.Popen([PMQOSCTL, "hold", "60", "--reason", reason, "--", "sh", "-c", "sleep 60", long_arg],
                             env=self.bus.env)
        self.addCleanup(p.wait)
        self.addCleanup(p.kill)
        self.ctl("request", "70", "--timeout", "60", "--reason", "plain", check=0)
        wait_for(lambda: len(self.listing()) == 2, what="both requests")
        # Not a terminal: nothing cut.
        self.assertIn(long_arg, self.ctl("list", check=0).stdout)
        status, out = on_a_terminal([PMQOSCTL, "list"], dict(self.bus.env, COLUMNS=""), columns=100)
        self.assertEqual(status, 0, out)
        lines = out.rstrip("\n").split("\n")
        self.assertEqual(len(lines), 3, out)
        for line in lines:
            self.assertLessEqual(display_width(line), 100, line)
        self.assertTrue(any(line.endswith("\u2026") for line in lines), out)
        # Each column starts at the same display column on every line.
        head = lines[0]
        for name in ("REASON", "COMMAND"):
            col = display_width(head[:head.index(name)])
            for line in lines[1:]:
                cut = 0
                while display_width(line[:cut]) < col:
                    cut += 1
                self.assertEqual(display_width(line[:cut]), col, (name, line))
                self.assertEqual(line[cut - 1], " ", (name, line))
        self.assertTrue(any(reason in line for line in lines), out)


class TestPasswordAgent(CtlTestCase):
    """On a terminal, a command that may need authorization starts
    pkttyagent --notify-fd N --fallback first, as systemctl does, and ends
    it; never for read-only commands, off a terminal or with
    --no-ask-password."""

    def fake_agent(self):
        self.start_daemon()
        bindir = os.path.join(self.bus.dir, "bin")
        os.makedirs(bindir, exist_ok=True)
        log = os.path.join(bindir, "agent.log")
        with open(os.path.join(bindir, "pkttyagent"), "w") as f:
            f.write("#!/usr/bin/python3\nimport os, signal, sys, time\n"
                    "log = open(%r, 'a')\nlog.write(' '.join(sys.argv[1:]) + '\\n'); log.flush()\n"
                    "signal.signal(signal.SIGTERM, lambda *a: (log.write('ended\\n'), sys.exit(0)))\n"
                    "os.close(int(sys.argv[2]))\ntime.sleep(60)\n" % log)
        os.chmod(os.path.join(bindir, "pkttyagent"), 0o755)
        env = dict(self.bus.env, PATH=bindir + ":" + os.environ.get("PATH", "/usr/bin:/bin"))
        return env, log

    def agent_log(self, log):
        if not os.path.exists(log):
            return ""
        with open(log) as f:
            return f.read()

    def test_agent_on_a_terminal(self):
        env, log = self.fake_agent()
        status, out = on_a_terminal([PMQOSCTL, "request", "80", "--timeout", "30"], env, stdin_tty=True)
        self.assertEqual(status, 0, out)
        self.assertRegex(self.agent_log(log), r"^--notify-fd \d+ --fallback\nended\n$")

    def test_no_agent_when_not_asked(self):
        env, log = self.fake_agent()
        for cmd in (["list"], ["--no-ask-password", "request", "80", "--timeout", "30"]):
            status, out = on_a_terminal([PMQOSCTL, *cmd], env, stdin_tty=True)
            self.assertEqual(status, 0, out)
        self.ctl("request", "80", "--timeout", "30", env=env, check=0)  # stdin not a terminal
        self.assertEqual(self.agent_log(log), "")


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
        self.start_daemon()
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
        self.start_daemon()
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
        self.start_daemon()
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
        self.start_daemon()
        # A bound that outlives "pmqosctl hold" would spoil whatever runs next.
        with cpu_hog():
            for i in range(ROUNDS):
                subprocess.run([PMQOSCTL, "hold", str(50 + i), "--", "true"], env=self.bus.env, check=True)
                got = self.kernel.read()
                self.assertEqual(got, self.kernel.baseline, "round %d: the kernel is at %d after hold" % (i, got))

    def test_released_when_interrupted(self):
        self.start_daemon()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            p = subprocess.Popen([PMQOSCTL, "hold", "38"], env=self.bus.env, stderr=subprocess.PIPE, text=True)
            self.assertIn("Holding 38 µs", p.stderr.readline())
            self.assertKernelAtMost(38)
            p.send_signal(sig)
            self.assertEqual(p.wait(10), 0)
            p.stderr.close()
            self.assertEqual(self.kernel.read(), self.kernel.baseline, "after %s" % signal.Signals(sig).name)

    def test_hold_refused(self):
        # pmqosctl's own failure as a launcher: 125, COMMAND not run, and what would allow it.
        proc = self.ctl("hold", "10", "--", "true", uid=NOBODY, check=125)
        self.assertIn("Not authorized", proc.stderr)
        self.assertIn("members of group pmqos", proc.stderr)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
        proc = self.ctl("hold", "10", uid=NOBODY, check=1)  # no COMMAND: the usual 1


class TestLauncher(CtlTestCase):
    """hold … -- COMMAND as env(1) and timeout(1) are launchers: 125 for
    pmqosctl's own failure, 126 and 127 for COMMAND's, else COMMAND's
    status; --best-effort runs COMMAND without the bound."""

    def marker_command(self, status=0):
        marker = os.path.join(self.bus.dir, "ran")
        if os.path.exists(marker):
            os.unlink(marker)
        return marker, ["sh", "-c", 'echo "$@" > %s; exit %d' % (marker, status), "sh"]

    def test_no_broker_125_and_command_not_run(self):
        empty = PrivateBus()
        self.addCleanup(empty.stop)
        marker, cmd = self.marker_command()
        proc = self.ctl("hold", "20", "--", *cmd, env=empty.env, check=125)
        self.assertIn("pmqosd is not running", proc.stderr)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
        self.assertFalse(os.path.exists(marker))

    def test_best_effort_runs_command_without_broker(self):
        empty = PrivateBus()
        self.addCleanup(empty.stop)
        marker, cmd = self.marker_command(7)
        proc = self.ctl("hold", "20", "--best-effort", "--", *cmd, "--reason", "-b", env=empty.env, check=7)
        self.assertEqual(proc.stderr, "pmqosctl: running sh without the latency bound: pmqosd is not running\n")
        with open(marker) as f:
            self.assertEqual(f.read(), "--reason -b\n")  # COMMAND's arguments are its own

    def test_best_effort_when_refused(self):
        proc = self.ctl("hold", "10", "--best-effort", "--", "sh", "-c", "exit 3", uid=NOBODY, check=3)
        self.assertIn("without the latency bound: Not authorized", proc.stderr)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)

    def test_best_effort_with_the_bound(self):
        script = "import struct,sys; f=open(sys.argv[1],'rb'); print(struct.unpack('=i', f.read(4))[0])"
        proc = self.ctl("hold", "41", "--best-effort", "--", "/usr/bin/python3", "-c", script, self.kernel.path,
                        check=0)
        self.assertLessEqual(int(proc.stdout), 41)
        self.assertEqual(proc.stderr, "")
        self.assertKernelReleased()

    def test_cannot_run_126_not_found_127(self):
        plain = os.path.join(self.bus.dir, "not-executable")
        with open(plain, "w") as f:
            f.write("#!/bin/sh\n")
        for argv, status in (([plain], 126), (["/nonexistent/program"], 127), (["pmqos-no-such-command"], 127)):
            proc = self.ctl("hold", "20", "--", *argv, check=status)
            self.assertIn("cannot run " + argv[0], proc.stderr)
            self.assertKernelReleased()

    def test_empty_command_is_a_usage_error(self):
        for args in (("hold", "20", "--"), ("hold", "20", "--best-effort"), ("hold", "20", "true")):
            proc = self.ctl(*args, check=2)
            self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)


class TestValueGrammar(CtlTestCase):
    """Decimal everywhere (a leading zero is decimal, never octal; no hex),
    time spans with units where a timeout is taken, units for latencies."""

    def expiry_seconds(self, cookie):
        [r] = [r for r in self.listing() if r["cookie"] == cookie]
        return (r["expires"] - r["created"]) / 1e6

    def test_timeouts(self):
        for text, seconds in (("010", 10), ("2min", 120), ("1h 30min", 5400), ("45s", 45)):
            cookie = int(self.ctl("request", "100", "--timeout", text, check=0).stdout)
            self.assertAlmostEqual(self.expiry_seconds(cookie), seconds, delta=1.5)
            self.ctl("cancel", str(cookie), check=0)
        for text in ("0x10", "1.5s", "0", "-5", "5 parsecs", "4294967296"):
            proc = self.ctl("request", "100", "--timeout", text, check=2)
            self.assertIn("invalid timeout", proc.stderr)

    def test_cookies_decimal_only(self):
        cookie = int(self.ctl("request", "100", "--timeout", "60", check=0).stdout)
        self.ctl("cancel", hex(cookie), check=2)
        self.ctl("cancel", "0%d" % cookie, check=0)  # a leading zero is still decimal
        self.assertEqual(self.listing(), [])

    def test_latency_units(self):
        proc = self.ctl("hold", "2ms", "--", PMQOSCTL, "list", "--json", check=0)
        [held] = json.loads(proc.stdout)
        self.assertEqual(held["value"], 2000)
        self.ctl("set-minimum", "0x20", check=2)
        self.ctl("set-minimum", "030", check=0)
        self.assertEqual(json.loads(self.ctl("status", "--json", check=0).stdout)["floor"], 30)
        self.ctl("set-minimum", "none", check=0)


class TestMonitor(CtlTestCase):
    @contextlib.contextmanager
    def monitor(self):
        self.start_daemon()
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

    def test_monitor_json(self):
        self.start_daemon()
        p = subprocess.Popen([PMQOSCTL, "monitor", "--json"], env=self.bus.env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            self.assertIn("Monitoring", p.stderr.readline())
            c = self.client()
            before = time.time()
            cookie = c.request(50)
            first, second = json.loads(p.stdout.readline()), json.loads(p.stdout.readline())
            self.assertEqual((first["event"], first["value"]), ("latency", 50))
            self.assertEqual(second["event"], "requests")
            self.assertEqual(set(second), {"timestamp", "event"})
            self.assertAlmostEqual(first["timestamp"] / 1e6, before, delta=5)
            c.cancel(cookie)
            self.assertEqual(json.loads(p.stdout.readline())["value"], -1)
        finally:
            p.send_signal(signal.SIGINT)
            self.assertEqual(p.wait(10), 0)
            p.stdout.close()
            p.stderr.close()

    def test_monitor_ignores_look_alikes(self):
        """Signals made to look like the broker's, sent straight to the
        monitor by another user, are not reported (libpmqos checks the sender)."""
        with self.monitor() as p:
            w = self.client()
            bus = DBUS_PATH, DBUS_IFACE
            names = w.call("ListNames", path=bus[0], iface=bus[1], dest=bus[1])[0]
            [monitor] = [n for n in names if n.startswith(":") and w.call(
                "GetConnectionUnixProcessID", "s", n, path=bus[0], iface=bus[1], dest=bus[1])[0] == p.pid]
            forge_signal(self.bus, NOBODY, monitor, PATH, QOS_IFACE,
                         "LatencyChanged", "si", "('cpu_dma', 1)")
            forge_signal(self.bus, NOBODY, monitor, PATH, QOS_IFACE,
                         "RequestsChanged", "", "()")
            forge_signal(self.bus, NOBODY, monitor, DBUS_PATH, DBUS_IFACE,
                         "NameOwnerChanged", "sss", "('org.freedesktop.PMQoS', '%s', '')" % monitor)
            c = self.client()
            c.request(50)
            self.assertEqual(p.stdout.readline(), "latency 50 µs\n")  # the first line is the broker's
            self.assertEqual(p.stdout.readline(), "requests changed\n")


if __name__ == "__main__":
    main()
