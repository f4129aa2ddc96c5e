# SPDX-License-Identifier: LGPL-2.1-or-later
"""pmqosctl route UNIT / unroute UNIT: the drop-in UNIT.d/50-pmqos-route.conf
(exactly its text, written whole by a rename, never through a link) under a
system directory of the test's own (PMQOS_SYSTEMD_SYSTEM_DIR), systemd's
Reload called once per change (the stand-in systemd on the test bus,
fake_systemd.py, counts them), unroute's removal, and what is refused: names
outside systemd's unit name grammar, path tricks, units that are not
services, a non-root caller; nothing written or reloaded then. pmqosd is
not involved (route writes a file and asks systemd)."""

import os
import re
import shutil
import subprocess
import tempfile

from fixtures import BrokerTestCase, main, setpriv
from test_rules import SYSTEMD_POLICY, FakeSystemd

PMQOSCTL = os.environ.get("PMQOSCTL", "pmqosctl")
DROP_IN = "50-pmqos-route.conf"


def expected(unit):
    return ("# Written by \"pmqosctl route %s\"; \"pmqosctl unroute %s\" removes it.\n"
            "# Its opens of /dev/cpu_dma_latency reach pmqosd through the stand-in served by\n"
            "# pmqos-standin.service: each open is a request of the process that opened it.\n"
            "[Unit]\n"
            "Requires=pmqos-standin.service\n"
            "After=pmqos-standin.service\n"
            "\n"
            "[Service]\n"
            "BindPaths=/run/pmqos-standin/cpu_dma_latency:/dev/cpu_dma_latency\n"
            "BindPaths=-/run/pmqos-standin/cpu_wakeup_latency:/dev/cpu_wakeup_latency\n") % (unit, unit)


class RouteTestCase(BrokerTestCase):
    bus_extra_config = SYSTEMD_POLICY

    def setUp(self):
        super().setUp()
        self.systemd = FakeSystemd(self.bus)
        self.addCleanup(self.systemd.stop)
        self.dir = tempfile.mkdtemp(prefix="pmqos-route-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.env = dict(self.bus.env, PMQOS_SYSTEMD_SYSTEM_DIR=self.dir)

    def ctl(self, *args, check=None, uid=None):
        cmd = [*(setpriv(uid) if uid is not None else ()), PMQOSCTL, *args]
        proc = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL)
        proc.stderr = "".join(line for line in proc.stderr.splitlines(True) if not line.startswith("profiling:"))
        if check is not None:
            self.assertEqual(proc.returncode, check, proc.stdout + proc.stderr)
        return proc

    def drop_in(self, unit):
        return os.path.join(self.dir, unit + ".d", DROP_IN)

    def read(self, path):
        with open(path) as f:
            return f.read()


class TestRoute(RouteTestCase):
    def test_route_installs_the_drop_in_and_reloads(self):
        proc = self.ctl("route", "tuned", check=0)  # a name of no type is a service's, as systemctl takes it
        self.assertEqual(proc.stdout, "")
        self.assertEqual(proc.stderr, "Routed tuned.service through pmqos: its next start opens the stand-in "
                                      "(systemctl restart tuned.service).\n")
        self.assertEqual(self.read(self.drop_in("tuned.service")), expected("tuned.service"))
        self.assertEqual(os.stat(self.drop_in("tuned.service")).st_mode & 0o7777, 0o644)
        self.assertEqual(os.listdir(self.dir), ["tuned.service.d"])
        self.assertEqual(os.listdir(os.path.join(self.dir, "tuned.service.d")), [DROP_IN])  # no temporary left
        self.assertEqual(self.systemd.reloads(), 1)
        # Several units at once, templates and instances too.
        for unit in ("dpdk-app.service", "getty@.service", "cyclic@rt1.service", "a:b_c\\x2d.service"):
            self.ctl("route", unit, check=0)
            self.assertEqual(self.read(self.drop_in(unit)), expected(unit))
        self.assertEqual(self.systemd.reloads(), 5)

    def test_route_again_replaces_the_file_by_a_rename(self):
        self.ctl("route", "tuned.service", check=0)
        path = self.drop_in("tuned.service")
        with open(path, "w") as f:
            f.write("old text\n")
        before = os.stat(path).st_ino
        with open(path) as old:
            self.ctl("route", "tuned.service", check=0)
            self.assertEqual(old.read(), "old text\n", "the file was rewritten in place, not replaced whole")
        self.assertNotEqual(os.stat(path).st_ino, before)
        self.assertEqual(self.read(path), expected("tuned.service"))
        self.assertEqual(self.systemd.reloads(), 2)

    def test_a_link_at_the_drop_in_is_replaced_not_followed(self):
        victim = os.path.join(self.dir, "victim")
        with open(victim, "w") as f:
            f.write("untouched\n")
        os.makedirs(os.path.join(self.dir, "tuned.service.d"))
        os.symlink(victim, self.drop_in("tuned.service"))
        self.ctl("route", "tuned.service", check=0)
        self.assertFalse(os.path.islink(self.drop_in("tuned.service")))
        self.assertEqual(self.read(victim), "untouched\n")
        self.assertEqual(self.read(self.drop_in("tuned.service")), expected("tuned.service"))

    def test_a_linked_unit_directory_is_refused(self):
        elsewhere = tempfile.mkdtemp(prefix="pmqos-route-elsewhere-")
        self.addCleanup(shutil.rmtree, elsewhere, True)
        os.symlink(elsewhere, os.path.join(self.dir, "tuned.service.d"))
        proc = self.ctl("route", "tuned.service", check=1)
        self.assertEqual(proc.stderr, "pmqosctl: cannot write %s/tuned.service.d/%s: a symbolic link or not a "
                                      "directory on the way: refusing to follow it\n" % (self.dir, DROP_IN))
        self.assertEqual(os.listdir(elsewhere), [])
        self.assertEqual(self.systemd.reloads(), 0)

    def test_reload_refused_says_so(self):
        self.systemd.say("fail-reload")
        proc = self.ctl("route", "tuned.service", check=1)
        self.assertEqual(proc.stderr, "pmqosctl: the drop-in is changed, but systemd was not reloaded: Reload refused "
                                      "by the test (run systemctl daemon-reload)\n")
        self.assertEqual(self.read(self.drop_in("tuned.service")), expected("tuned.service"))  # written, said

    def test_the_installed_standin_serves_what_the_drop_in_binds(self):
        unit = os.path.join(os.environ["PMQOS_BUILD_ROOT"], "dbus", "pmqos-standin.service")
        text = self.read(unit)
        serve = re.search(r"^ExecStart=\S*/pmqosctl .*--serve (\S+)$", text, re.M)
        self.assertIsNotNone(serve, text)
        self.assertIn("BindPaths=%s/cpu_dma_latency:/dev/cpu_dma_latency\n" % serve.group(1), expected("x.service"))
        self.assertIn("Type=notify\n", text)
        self.assertNotIn("[Install]", text)  # never enabled: routed units require it


class TestUnroute(RouteTestCase):
    def test_unroute_removes_the_drop_in_and_reloads(self):
        self.ctl("route", "tuned.service", check=0)
        proc = self.ctl("unroute", "tuned", check=0)
        self.assertEqual(proc.stderr, "Unrouted tuned.service: its next start opens the device itself "
                                      "(systemctl restart tuned.service).\n")
        self.assertEqual(os.listdir(self.dir), [])  # the directory too, which held nothing else
        self.assertEqual(self.systemd.reloads(), 2)

    def test_unroute_keeps_other_drop_ins(self):
        self.ctl("route", "tuned.service", check=0)
        mine = os.path.join(self.dir, "tuned.service.d", "10-admin.conf")
        with open(mine, "w") as f:
            f.write("[Service]\nNice=5\n")
        self.ctl("unroute", "tuned.service", check=0)
        self.assertEqual(os.listdir(os.path.join(self.dir, "tuned.service.d")), ["10-admin.conf"])

    def test_unroute_of_a_unit_not_routed(self):
        for setup in (lambda: None, lambda: os.makedirs(os.path.join(self.dir, "tuned.service.d"))):
            setup()
            proc = self.ctl("unroute", "tuned.service", check=0)
            self.assertEqual(proc.stderr, "tuned.service is not routed: nothing to do.\n")
        self.assertEqual(self.systemd.reloads(), 0)


class TestRefusals(RouteTestCase):
    def test_bad_unit_names_exit_2(self):
        for verb in ("route", "unroute"):
            for name in ("../x.service", "x/../y.service", "/etc/passwd", "", ".service", "a b.service",
                         "a@b@c.service", "@x.service", "x" * 250 + ".service", "caf\u00e9.service"):
                proc = self.ctl(verb, name, check=2)
                self.assertEqual(proc.stderr, "pmqosctl %s: \"%s\" is not a valid unit name (see pmqosctl %s "
                                              "--help)\n" % (verb, name, verb))
            for args, why in ((("foo.socket",), "foo.socket is not a service: only services are routed"),
                              (("pmqos-standin.service",), "pmqos-standin.service serves the stand-in: it "
                                                           "cannot be routed through itself"),
                              ((), "give exactly one UNIT"), (("a", "b"), "give exactly one UNIT"),
                              (("--force",), "unknown option \"--force\"")):
                proc = self.ctl(verb, *args, check=2)
                self.assertEqual(proc.stderr, "pmqosctl %s: %s (see pmqosctl %s --help)\n" % (verb, why, verb))
        # A control character is shown escaped, not sent to the terminal.
        proc = self.ctl("route", "a\x1b[2Jb", check=2)
        self.assertEqual(proc.stderr, "pmqosctl route: \"a\\x1b[2Jb\" is not a valid unit name (see pmqosctl route "
                                      "--help)\n")
        self.assertEqual(os.listdir(self.dir), [])
        self.assertEqual(os.listdir(os.path.dirname(self.dir)).count("y.service.d"), 0)
        self.assertEqual(self.systemd.reloads(), 0)

    def test_not_root(self):
        self.ctl("route", "kept.service", check=0)
        for verb, unit in (("route", "tuned.service"), ("unroute", "kept.service")):
            proc = self.ctl(verb, unit, uid=65534, check=1)
            self.assertEqual(proc.stderr, "pmqosctl %s: needs root (it changes %s and reloads systemd): run it "
                                          "with sudo\n" % (verb, self.dir))
        self.assertEqual(sorted(os.listdir(self.dir)), ["kept.service.d"])
        self.assertEqual(self.read(self.drop_in("kept.service")), expected("kept.service"))
        self.assertEqual(self.systemd.reloads(), 1)

    def test_help(self):
        for verb in ("route", "unroute"):
            self.assertIn("Usage: pmqosctl %s UNIT" % verb, self.ctl(verb, "--help", check=0).stdout)
        self.assertIn("route UNIT", self.ctl("--help", check=0).stdout)


if __name__ == "__main__":
    main()
