# SPDX-License-Identifier: LGPL-2.1-or-later
"""pmqosctl request USEC --pid PID | --cgroup PATH | --unit UNIT: a request
bound to a workload (RequestFor), printed cookie and an immediate return,
listed bound to that process or cgroup, ended when the process exits or the
cgroup empties; the unit's control group asked of systemd (the stand-in
systemd on the test bus, fake_systemd.py; GetUnit and ControlGroup as
systemd answers them); what is refused, and how."""

import os
import subprocess
import time

from fixtures import main
from held_util import cgroup_root, make_cgroup, requests_by_cookie
from test_pmqosctl import CtlTestCase
from test_rules import SYSTEMD_POLICY, FakeSystemd


class WorkloadTestCase(CtlTestCase):
    bus_extra_config = SYSTEMD_POLICY

    def value(self):
        return 40 + os.getpid() % 7  # a value no other holder is likely to ask for

    def sleeper(self):
        p = subprocess.Popen(["sleep", "600"])
        self.addCleanup(lambda: (p.kill(), p.wait()))
        return p

    def populated_cgroup(self):
        """A cgroup of this test with one sleeping process in it."""
        path = make_cgroup(self)
        p = self.sleeper()
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write(str(p.pid))
        return path, p

    def request(self, *args):
        """pmqosctl request VALUE ARGS: its cookie, after checking that it
        returned at once (exit 0, the cookie alone on stdout)."""
        proc = self.ctl("request", str(self.value()), *args, check=0)
        self.assertRegex(proc.stdout, r"^[0-9]+\n$")
        return int(proc.stdout)

    def assert_bound_until_killed(self, cookie, p, bound_to, target):
        c = self.client()
        entry = requests_by_cookie(c)[cookie]
        self.assertEqual(entry["bound_to"], bound_to)
        if target is not None:
            self.assertEqual(entry["target"], target)
        self.assertKernelAtMost(self.value())
        # The command has returned: the request does not depend on it.
        self.assert_persists(lambda: cookie in requests_by_cookie(c), 0.3, "the workload's request")
        p.kill()
        p.wait()
        self.assert_eventually(lambda: cookie not in requests_by_cookie(c), what="the request to end with its workload")
        self.assert_eventually(self.kernel.released, what="the bound to lift")


class TestPid(WorkloadTestCase):
    def test_pid_bound_until_the_process_exits(self):
        p = self.sleeper()
        cookie = self.request("--pid", str(p.pid), "--reason", "sleeper")
        self.assertEqual(requests_by_cookie(self.client())[cookie]["reason"], "sleeper")
        # The table's LIFETIME names the process, not the long-gone pmqosctl.
        header, row = self.ctl("list", check=0).stdout.splitlines()[:2]
        self.assertEqual(row[header.index("LIFETIME"):header.index("CPUS")].strip(), "pid %d (sleep 600)" % p.pid)
        self.assert_bound_until_killed(cookie, p, "process", "pid %d (sleep 600)" % p.pid)

    def test_missing_process(self):
        p = subprocess.Popen(["true"])
        p.wait()
        proc = self.ctl("request", str(self.value()), "--pid", str(p.pid), check=1)
        self.assertEqual(proc.stderr, "pmqosctl: cannot open process %d: no such process\n" % p.pid)
        self.assertEqual(requests_by_cookie(self.client()), {})

    def test_usage_errors(self):
        for args in (("--pid", "abc"), ("--pid", "0"), ("--pid", "1", "--cgroup", "/x"),
                     ("--unit", "a.service", "--pid", "1"), ("--pid", "1", "--persistent"),
                     ("--unit", "multi-user.target"), ("--pid", "1", "--cpus", "3-1"), ("--pid", "1", "--pid", "2"),
                     ("--unit", "")):
            proc = self.ctl("request", "50", *args)
            self.assertEqual(proc.returncode, 2, (args, proc.stderr))
            self.assertEqual(len(proc.stderr.strip().splitlines()), 1, (args, proc.stderr))
            self.assertTrue(proc.stderr.startswith("pmqosctl request: "), proc.stderr)


class TestCgroup(WorkloadTestCase):
    def test_cgroup_directory(self):
        path, p = self.populated_cgroup()
        cookie = self.request("--cgroup", path)
        self.assert_bound_until_killed(cookie, p, "cgroup", path)

    def test_cgroup_by_its_path_in_the_hierarchy(self):
        path, p = self.populated_cgroup()
        cookie = self.request("--cgroup", path[len(cgroup_root()):])
        self.assert_bound_until_killed(cookie, p, "cgroup", path)

    def test_not_a_cgroup(self):
        proc = self.ctl("request", str(self.value()), "--cgroup", "/tmp", check=1)
        self.assertIn("cgroup", proc.stderr)
        proc = self.ctl("request", str(self.value()), "--cgroup", "/no-such-cgroup-%d" % time.monotonic_ns(), check=1)
        self.assertIn("cannot open cgroup /no-such-cgroup-", proc.stderr)
        proc = self.ctl("request", str(self.value()), "--cgroup", "/etc/passwd", check=1)
        self.assertEqual(proc.stderr, "pmqosctl: cannot open cgroup /etc/passwd: not a directory (give the cgroup's "
                                      "directory)\n")
        self.assertEqual(requests_by_cookie(self.client()), {})


class TestUnit(WorkloadTestCase):
    def setUp(self):
        super().setUp()
        _ = self.daemon
        self.systemd = FakeSystemd(self.bus)
        self.addCleanup(self.systemd.stop)

    def test_unit_control_group(self):
        path, p = self.populated_cgroup()
        self.systemd.say("state db.service active")
        self.systemd.say("cgroup db.service %s" % path[len(cgroup_root()):])
        cookie = self.request("--unit", "db", "--reason", "database")
        self.assert_bound_until_killed(cookie, p, "cgroup", path)

    def test_unit_not_loaded(self):
        proc = self.ctl("request", str(self.value()), "--unit", "nothing-here.service", check=1)
        self.assertEqual(proc.stderr, "pmqosctl: cannot find unit nothing-here.service: "
                                      "Unit nothing-here.service not loaded.\n")
        # A name of no unit type is a service's, as systemctl takes it.
        proc = self.ctl("request", str(self.value()), "--unit", "my.app", check=1)
        self.assertIn("cannot find unit my.app.service", proc.stderr)

    def test_unit_without_control_group(self):
        self.systemd.say("state idle.service inactive")
        self.systemd.say("cgroup idle.service -")
        proc = self.ctl("request", str(self.value()), "--unit", "idle.service", check=1)
        self.assertEqual(proc.stderr, "pmqosctl: idle.service has no control group (is it running?)\n")
        self.assertEqual(requests_by_cookie(self.client()), {})


if __name__ == "__main__":
    main()
