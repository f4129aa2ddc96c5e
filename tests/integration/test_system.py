# SPDX-License-Identifier: LGPL-2.1-or-later
"""System integration: the installed tree, the unit (systemd-analyze), the
policy (polkit DTD), man pages, completion, the configuration file and its
reload, sd_notify, and the opt-in UPower name."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

from gi.repository import GLib

from contract import (
    DBUS_IFACE,
    DBUS_NAME,
    DBUS_PATH,
    INVALID,
    NATIVE_IFACE,
    POLICY_FILE,
    PROPS,
    QOS_IFACE,
    UPOWER_BUS_NAME,
    UPOWER_PATH,
)
from fixtures import PMQOSCTL, BrokerTestCase, PMQOSD, SOURCE_ROOT, main, skip_notice, wait_for

BUILD_ROOT = os.environ.get("PMQOS_BUILD_ROOT", os.path.join(SOURCE_ROOT, "build"))


def run(*cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


class TestInstall(BrokerTestCase):
    root_only = False  # runs as any user
    def setUp(self):  # no bus or daemon needed
        self.dest = tempfile.mkdtemp(prefix="pmqos-destdir-")
        self.addCleanup(shutil.rmtree, self.dest)

    def test_destdir_tree(self):
        r = run("meson", "install", "-C", BUILD_ROOT, "--no-rebuild", "--quiet", "--destdir", self.dest)
        self.assertEqual(r.returncode, 0, r.stderr)
        files = {os.path.relpath(os.path.join(d, f), self.dest) for d, _, fs in os.walk(self.dest) for f in fs}
        options = {o["name"]: o["value"] for o in json.loads(run("meson", "introspect", "--buildoptions",
                                                               BUILD_ROOT).stdout)}
        want = [
            r"libexec/pmqosd$", r"bin/pmqosctl$", r"include/pmqos\.h$", r"lib/.*libpmqos\.so\.1$",
            r"lib/.*libpmqos\.so$", r"lib/.*pkgconfig/pmqos\.pc$", r"pmqos/__init__\.py$",
            r"share/dbus-1/system\.d/org\.freedesktop\.PMQoS\.conf$",
            r"share/dbus-1/system-services/org\.freedesktop\.PMQoS\.service$",
            r"share/dbus-1/interfaces/org\.freedesktop\.UPower\.QoS\.xml$",
            r"share/dbus-1/interfaces/org\.freedesktop\.PMQoS\.xml$",
            r"share/polkit-1/actions/org\.freedesktop\.pmqos\.policy$",
            r"share/polkit-1/rules\.d/org\.freedesktop\.pmqos\.rules$",
            r"lib/systemd/system/pmqosd\.service$", r"lib/sysusers\.d/pmqos\.conf$", r"etc/pmqos/pmqosd\.conf$",
            r"share/man/man8/pmqosd\.8$", r"share/man/man1/pmqosctl\.1$", r"share/man/man3/libpmqos\.3$",
            r"share/man/man5/pmqosd\.conf\.5$", r"bash-completion/completions/pmqosctl$",
            r"libexec/pmqos-oci-hook$", r"share/containers/oci/hooks\.d/pmqos-oci-hook\.json$",
            r"share/man/man8/pmqos-oci-hook\.8$",
            r"lib/systemd/system/pmqos-metrics\.service$", r"lib/systemd/system/pmqos-metrics\.timer$",
        ]
        for pattern in want:
            self.assertTrue(any(re.search(pattern, f) for f in files), "%s missing from %s" % (pattern, sorted(files)))
        # Everything but configuration lands under the configured prefix.
        prefix = options["prefix"].lstrip("/")
        outside = [f for f in files if not f.startswith(prefix + "/") and not f.startswith("etc/")]
        self.assertEqual(outside, [], "installed outside %s" % options["prefix"])
        self.assertIn(os.path.join(prefix, options["libexecdir"], "pmqosd"), files)
        unit = [f for f in files if f.endswith("pmqosd.service") and "systemd" in f][0]
        with open(os.path.join(self.dest, unit)) as f:
            text = f.read()
        for line in ("Type=notify", "BusName=org.freedesktop.PMQoS", "ProtectSystem=strict", "DevicePolicy=closed",
                     "DeviceAllow=/dev/cpu_dma_latency rw", "NoNewPrivileges=yes",
                     "RestrictAddressFamilies=AF_UNIX", "SystemCallFilter=@system-service",
                     "MemoryDenyWriteExecute=yes", "StateDirectory=pmqos"):
            self.assertIn(line + "\n", text)
        act = [f for f in files if f.endswith("system-services/org.freedesktop.PMQoS.service")][0]
        with open(os.path.join(self.dest, act)) as f:
            self.assertIn("SystemdService=pmqosd.service\n", f.read())
        pc = [f for f in files if f.endswith("pmqos.pc")][0]
        with open(os.path.join(self.dest, pc)) as f:
            self.assertIn("-lpmqos", f.read())

    def test_unit_verifies_and_is_hardened(self):
        unit = os.path.join(self.dest, "pmqosd.service")
        with open(os.path.join(BUILD_ROOT, "dbus", "pmqosd.service")) as f:
            # The built pmqosd where the unit runs the installed one (ExecStart=, ExecReload='s check).
            text = re.sub(r"(Exec(?:Start|Reload)=\+?)\S*/pmqosd\b", lambda m: m.group(1) + PMQOSD, f.read())
        with open(unit, "w") as f:
            f.write(text)
        r = run("systemd-analyze", "verify", "--man=no", unit)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run("systemd-analyze", "security", "--offline=true", unit)
        m = re.search(r"Overall exposure level for pmqosd.service: ([\d.]+) (\w+)", r.stdout)
        self.assertIsNotNone(m, r.stdout + r.stderr)
        self.assertIn(m.group(2), ("OK", "SAFE"), m.group(0))
        # 1.5 before Explain(): CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH in the bounding set (held by the
        # holder scan helper alone; ptrace() itself is outside the system call filter) add 0.4;
        # CAP_SYS_ADMIN (fanotify_init() at start, for the watch of the per-CPU idle knobs) 0.3.
        self.assertLessEqual(float(m.group(1)), 2.2, m.group(0))

    def test_metrics_units_verify(self):
        """pmqos-metrics.service and .timer: valid, the service hardened, the
        timer not enabled by anything installed (no .wants link)."""
        dest = tempfile.mkdtemp(prefix="pmqos-units-")
        self.addCleanup(shutil.rmtree, dest, True)
        with open(os.path.join(BUILD_ROOT, "dbus", "pmqos-metrics.service")) as f:
            text = re.sub(r"(ExecStart=)\S*/pmqosctl\b", lambda m: m.group(1) + PMQOSCTL, f.read())
        with open(os.path.join(dest, "pmqos-metrics.service"), "w") as f:
            f.write(text)
        shutil.copy(os.path.join(SOURCE_ROOT, "dbus", "pmqos-metrics.timer"), dest)
        self.assertIn("--textfile /var/lib/prometheus/node-exporter/pmqos.prom\n", text)
        r = run("systemd-analyze", "verify", "--man=no", os.path.join(dest, "pmqos-metrics.service"),
                os.path.join(dest, "pmqos-metrics.timer"))
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run("systemd-analyze", "security", "--offline=true", os.path.join(dest, "pmqos-metrics.service"))
        m = re.search(r"Overall exposure level for pmqos-metrics.service: ([\d.]+) (\w+)", r.stdout)
        self.assertIsNotNone(m, r.stdout + r.stderr)
        self.assertIn(m.group(2), ("OK", "SAFE"), m.group(0))
        self.assertFalse(any("wants" in root for root, _, _ in os.walk(self.dest)), "something enables a unit")

    def test_policy_and_bus_files_validate(self):
        r = run("xmllint", "--noout", "--dtdvalid", "/usr/share/polkit-1/policyconfig-1.dtd",
                os.path.join(SOURCE_ROOT, "policy", POLICY_FILE))
        self.assertEqual(r.returncode, 0, r.stderr)
        for f in ("org.freedesktop.PMQoS.conf", "org.freedesktop.UPower.QoS.xml", "org.freedesktop.PMQoS.xml"):
            r = run("xmllint", "--noout", os.path.join(SOURCE_ROOT, "dbus", f))
            self.assertEqual(r.returncode, 0, r.stderr)

    def test_man_pages_render_without_warnings(self):
        for page in ("daemon/pmqosd.8", "daemon/pmqosd.conf.5", "client-lib/pmqosctl/pmqosctl.1", "client-lib/libpmqos/libpmqos.3",
                     "client-lib/oci-hook/pmqos-oci-hook.8"):
            r = run("man", "--warnings", "-l", os.path.join(SOURCE_ROOT, page), env=dict(os.environ, MANWIDTH="80"))
            self.assertEqual(r.returncode, 0, page)
            self.assertEqual(r.stderr, "", page)
            self.assertIn("NAME", r.stdout)

    def test_bash_completion_parses(self):
        r = run("bash", "-n", os.path.join(SOURCE_ROOT, "client-lib", "pmqosctl", "pmqosctl.bash-completion"))
        self.assertEqual(r.returncode, 0, r.stderr)


class ConfigTestCase(BrokerTestCase):
    config = ""

    def setUp(self):
        fd, self.config_path = tempfile.mkstemp(prefix="pmqosd-", suffix=".conf")
        os.write(fd, self.config.encode())
        os.close(fd)
        self.addCleanup(os.unlink, self.config_path)
        self.daemon_args = ("--config", self.config_path)
        super().setUp()

    def write_config(self, text):
        with open(self.config_path, "w") as f:
            f.write(text)

    def reload(self):
        before = self.daemon.output().count("onfiguration")
        self.daemon.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: self.daemon.output().count("onfiguration") > before or "Reloaded" in self.daemon.output(),
                 what="the reload to be logged")

    def request_timeout(self, c, seconds):
        return c.call("Request", "sia{sv}", "cpu_dma", 100, {"timeout": GLib.Variant("u", seconds)},
                      iface=NATIVE_IFACE)


class TestConfig(ConfigTestCase):
    config = "[pmqosd]\n# a comment\nMaxTimeoutSec = 5\n"

    def test_reload_applies_without_dropping_requests(self):
        c = self.client()
        keep = c.request(70)
        name, message = c.call_error("Request", "sia{sv}", "cpu_dma", 100, {"timeout": GLib.Variant("u", 6)},
                                     iface=NATIVE_IFACE)
        self.assertEqual(name, INVALID)
        self.assertIn("5 seconds", message)

        self.write_config("MaxTimeoutSec=10\nDefaultMinimumLatency=90\n")
        self.daemon.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "Reloaded" in self.daemon.output(), what="the reload")
        self.request_timeout(c, 6)  # allowed now
        self.assertEqual([r[0] for r in c.requests() if r[0] == keep], [keep])  # nothing dropped
        self.assertEqual(c.latency(), 90)  # the default floor applies
        self.assertKernelAtMost(90)

        # A bad file is refused whole and names file, line and key.
        self.write_config("MaxTimeoutSec=20\nMaxRequestsPerUser=lots\n")
        self.daemon.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "Keeping the previous configuration" in self.daemon.output(), what="the refusal")
        out = self.daemon.output()
        self.assertIn("%s:2: MaxRequestsPerUser" % self.config_path, out)
        self.assertEqual(c.call_error("Request", "sia{sv}", "cpu_dma", 100, {"timeout": GLib.Variant("u", 15)},
                                      iface=NATIVE_IFACE)[0], INVALID)  # still 10, not 20
        self.assertEqual(c.latency(), 90)


class TestDefaultFloor(ConfigTestCase):
    config = "DefaultMinimumLatency=300\n"

    def test_admin_floor_over_default(self):
        c = self.client()
        c.request(100)
        prop = lambda: c.call("Get", "ss", NATIVE_IFACE, "MinimumLatency", iface=PROPS)[0]
        self.assertEqual(c.latency(), 300)
        self.assertEqual(prop(), 300)
        c.call("SetMinimumLatency", "si", "cpu_dma", 500)
        self.assertEqual((c.latency(), prop()), (500, 500))
        c.call("SetMinimumLatency", "si", "cpu_dma", -1)  # the administrator's goes, the default stays
        self.assertEqual((c.latency(), prop()), (300, 300))
        with open(os.path.join(self.daemon.state_dir, "state")) as f:
            self.assertIn("floor -1\n", f.read())


class TestBadConfigAtStart(BrokerTestCase):
    root_only = False  # runs as any user
    def test_refuses_to_start_with_a_clear_line(self):
        fd, path = tempfile.mkstemp(suffix=".conf")
        os.write(fd, b"MaxTimeoutSec=60\nColour=blue\n")
        os.close(fd)
        self.addCleanup(os.unlink, path)
        r = run(PMQOSD, "--config", path, "--device", self.kernel.path, env=self.bus.env, timeout=10)
        self.assertEqual(r.returncode, 1)
        self.assertIn("%s:2: Colour: unknown key" % path, r.stderr)
        r = run(PMQOSD, "--config", "/nonexistent/pmqosd.conf", "--device", self.kernel.path, env=self.bus.env,
                timeout=10)
        self.assertEqual(r.returncode, 1)
        self.assertIn("/nonexistent/pmqosd.conf", r.stderr)


class TestNotify(BrokerTestCase):
    def setUp(self):
        self.sockdir = tempfile.mkdtemp(prefix="pmqos-notify-")
        self.addCleanup(shutil.rmtree, self.sockdir)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(self.sock.close)
        path = os.path.join(self.sockdir, "notify")
        self.sock.bind(path)
        self.sock.settimeout(10)
        self.notify_env = {"NOTIFY_SOCKET": path}
        super().setUp()

    def start_notifying(self):
        """Replaces setUp's daemon, which has no NOTIFY_SOCKET, with one that
        has; returns what it said up to READY=1."""
        self.daemon.stop()
        self.start_daemon((), env=self.notify_env)
        got = ""
        while "READY=1" not in got:
            got += self.sock.recv(4096).decode() + "\n"
        return got

    def test_ready_and_status(self):
        self.assertIn("STATUS=no bound, 0 request(s)", self.start_notifying())
        c = self.client()
        c.request(50)
        got = self.sock.recv(4096).decode()
        self.assertEqual(got, "STATUS=effective 50 µs, 1 request(s)")

    def test_status_at_most_once_a_second(self):
        # Every STATUS= wakes the service manager: 100 changes are not 100 datagrams.
        self.start_notifying()
        start = time.monotonic()  # the last STATUS= was READY's
        c = self.client()
        for i in range(50):
            c.cancel(c.request(100 + i))
        elapsed = time.monotonic() - start
        statuses = []
        self.sock.settimeout(3)
        try:
            while True:
                statuses.append(self.sock.recv(4096).decode())
        except socket.timeout:
            pass
        # The first change at once, then at most one a second; the last says how it ended.
        self.assertLessEqual(len(statuses), int(elapsed) + 3, statuses)
        self.assertEqual(statuses[-1], "STATUS=no bound, 0 request(s)")


class TestPackagingFiles(unittest.TestCase):
    def test_readme_installs_every_package_and_pmqos_recommends_fuse3(self):
        """The README's install line left libpmqos-dev out (no pmqos.pc, no
        libpmqos(3)); pmqos did not recommend fuse3, which a non-root
        pmqosctl run needs (fusermount3)."""
        with open(os.path.join(SOURCE_ROOT, "packaging", "debian", "control")) as f:
            stanzas = {m.group(1): m.group(0) for m in re.finditer(r"^Package: (\S+)\n(?:[^\n]+\n)*", f.read(), re.M)}
        self.assertEqual(set(stanzas), {"pmqos", "libpmqos1", "libpmqos-dev", "python3-pmqos"})
        self.assertRegex(stanzas["pmqos"], r"\nRecommends: fuse3\n")
        with open(os.path.join(SOURCE_ROOT, "README.md")) as f:
            line = [x for x in f.read().splitlines() if x.startswith("sudo apt install ./build-deb/")][0]
        listed = re.search(r"\{([^}]*)\}_\*\.deb", line).group(1).split(",")
        self.assertEqual(sorted(listed), sorted(stanzas))


@unittest.skipIf(os.path.isdir("/run/systemd/system"), "systemd runs as PID 1 here: the scripts leave pmqosd to it")
class TestMaintainerScriptsWithoutSystemd(BrokerTestCase):
    """packaging/debian's prerm and postinst where no systemd runs (a
    container, another init): pmqosd came from D-Bus activation or by hand.
    Before, dpkg --purge left it running with its bound held, and an upgrade
    left the old binary running."""

    PRERM = os.path.join(SOURCE_ROOT, "packaging", "debian", "pmqos.prerm")
    POSTINST = os.path.join(SOURCE_ROOT, "packaging", "debian", "pmqos.postinst")
    MARKER = "/run/pmqos-dpkg-restart"

    def script(self, path, *args, chroot=False):
        """The script as dpkg runs it. This suite runs in a private copy of
        the host (hostenv), which ischroot takes for a chroot, where the
        prerm stands aside (the processes it sees may be the host's): an
        ischroot that says "not a chroot" comes first on PATH unless chroot."""
        env = {k: v for k, v in self.bus.env.items() if k != "DPKG_ROOT"}
        if not chroot:
            bindir = os.path.join(self.bus.dir, "not-a-chroot")
            os.makedirs(bindir, exist_ok=True)
            with open(os.path.join(bindir, "ischroot"), "w") as f:
                f.write("#!/bin/sh\nexit 1\n")
            os.chmod(os.path.join(bindir, "ischroot"), 0o755)
            env["PATH"] = bindir + ":" + env.get("PATH", "/usr/bin:/bin")
        return run("sh", path, *args, env=env, timeout=60)

    def held(self):
        if os.environ.get("PMQOSD_WRAPPER"):
            skip_notice("the maintainer scripts stopping pmqosd", "pmqosd runs under a checker, not as pmqosd")
            return None
        _ = self.daemon
        c = self.client()
        c.request(33)
        self.assertKernelAtMost(33)
        return self.daemon.proc

    def test_removal_stops_pmqosd_and_its_bound(self):
        proc = self.held()
        if not proc:
            return
        if run("ischroot").returncode == 0:  # from a chroot, nothing is stopped
            r = self.script(self.PRERM, "remove", chroot=True)
            self.assertEqual((r.returncode, r.stdout), (0, ""), r.stderr)
            self.assertIsNone(proc.poll())
        r = self.script(self.PRERM, "remove")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Stopping pmqosd (pid %d)" % proc.pid, r.stdout)
        self.assertEqual(proc.wait(10), 0)  # SIGTERM: a clean stop
        self.assertKernelReleased()

    def test_upgrade_stops_the_old_binary_and_asks_for_the_new(self):
        proc = self.held()
        if not proc:
            return
        self.addCleanup(lambda: os.path.exists(self.MARKER) and os.unlink(self.MARKER))
        r = self.script(self.PRERM, "upgrade", "0.0.1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Stopping pmqosd (pid %d)" % proc.pid, r.stdout)
        self.assertEqual(proc.wait(10), 0)
        self.assertTrue(os.path.exists(self.MARKER))
        # The test bus has no activation file: the postinst says so and succeeds.
        r = self.script(self.POSTINST, "configure", "0.0.1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("its first client starts it", r.stderr)
        self.assertFalse(os.path.exists(self.MARKER))
        self.assertKernelReleased()


class TestUPowerName(BrokerTestCase):
    daemon_args = ("--upower-name",)

    def test_upower_era_clients_reach_pmqosd(self):
        c = self.client()
        wait_for(lambda: c.name_has_owner(UPOWER_BUS_NAME), timeout=30, what="pmqosd to own UPower's name")
        cookie = c.call("RequestLatency", "sib", "cpu_dma", 60, False, path=UPOWER_PATH, iface=QOS_IFACE,
                        dest=UPOWER_BUS_NAME)[0]
        self.assertEqual(c.latency(), 60)
        self.assertEqual([r[0] for r in c.requests()], [cookie])

    def test_not_claimed_when_taken(self):
        holder = self.client(start=False)
        self.assertEqual(holder.call("RequestName", "su", UPOWER_BUS_NAME, 4, path=DBUS_PATH,
                                     iface=DBUS_IFACE, dest=DBUS_NAME)[0], 1)
        self.start_daemon(("--upower-name",))
        wait_for(lambda: "Not claiming org.freedesktop.UPower" in self.daemon.output(), timeout=30,
                 what="pmqosd to leave UPower's name alone")
        self.assertEqual(holder.call("GetNameOwner", "s", UPOWER_BUS_NAME, path=DBUS_PATH,
                                     iface=DBUS_IFACE, dest=DBUS_NAME)[0], holder.name)
        self.assertEqual(holder.latency(), -1)  # pmqosd itself serves on


if __name__ == "__main__":
    main()
