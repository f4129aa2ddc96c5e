# SPDX-License-Identifier: LGPL-2.1-or-later
"""pmqosctl's first-contact additions (issue 43): the Bound: line counting
per-CPU bounds."""

from contract import LATENCY_MAX
from fixtures import main
import test_pmqosctl
from test_pmqosctl import CtlTestCase


class StatusTestCase(CtlTestCase):
    fake_sysfs_daemon = test_pmqosctl.TestCommands.fake_sysfs_daemon  # cpu0–3 online, cpu3's file at 40

    def unconstrained(self):
        """The machine-wide value at the kernel's default before the test (no other holder binds)."""
        if self.kernel.read() != LATENCY_MAX:
            self.skipTest("another holder of the device binds it: %d µs" % self.kernel.read())


class TestBoundLine(StatusTestCase):
    def test_per_cpu_only_bound_is_not_none(self):
        """A request for cpu1 only, and cpu3's file written by someone else
        (the fake sysfs): the Bound: line names both, not "none"."""
        self.unconstrained()
        self.fake_sysfs_daemon()
        cookie = self.ctl("request", "10", "--cpus", "1", "--timeout", "60", "--reason", "pod web-0",
                          check=0).stdout.strip()
        out = self.ctl("status", check=0).stdout
        self.assertRegex(out, r"Bound:    none machine-wide; cpu1 10 µs by request %s of uid 0 pid \d+ `[^`]*` "
                              r"\(pod web-0\); cpu3 40 µs written to its pm_qos_resume_latency_us by someone else\n"
                         % cookie)
        self.assertNotIn("nothing asks for one", out)

    def test_machine_wide_bound_with_a_stricter_cpu(self):
        self.fake_sysfs_daemon()
        self.ctl("request", "500", "--timeout", "60", check=0)
        cookie = self.ctl("request", "10", "--cpus", "1", "--timeout", "60", check=0).stdout.strip()
        out = self.ctl("status", check=0).stdout
        self.assertRegex(out, r"Bound:    \d+ µs, set by [^\n]*; cpu1 10 µs by request %s of uid 0" % cookie)

    def test_fake_sysfs_rig(self):
        """The rig of the tests above: without any request, only cpu3's foreign file bounds."""
        self.unconstrained()
        self.fake_sysfs_daemon()
        out = self.ctl("status", check=0).stdout
        self.assertIn("Bound:    none machine-wide; cpu3 40 µs written to its pm_qos_resume_latency_us by "
                      "someone else\n", out)


if __name__ == "__main__":
    main()
