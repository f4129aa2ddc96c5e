# SPDX-License-Identifier: LGPL-2.1-or-later
"""The container tier, pmqos from its Debian packages (PMQOS_INSTALL=deb):
what dpkg -i left (the unit enabled, not started; the user; the bus knows
the name), the first client starting pmqosd through D-Bus activation, an
upgrade to a rebuilt package of a higher version while a client holds a
bound (sampled on the host every 100 µs: no lapse), and dpkg --purge
leaving no process, file, unit, bus name or bound behind. Runs after
test_container and test_restarts (tests/system/run), which ran every case
against the same installed packages; the purge comes last."""

import os
import re
import signal
import sys
import unittest

from container import BUS, INSTALL, QOS, SystemTestCase, kernel, wait_for

PACKAGES = ("pmqos", "libpmqos1", "libpmqos-dev", "python3-pmqos")

# What a first program does: the Python binding, nothing else.
FIRST_CLIENT = """
import pmqos
with pmqos.Client() as c:
    print(c.latency)
with pmqos.hold(71, reason="first client"):
    with pmqos.Client() as c:
        print(c.latency)
"""


@unittest.skipUnless(INSTALL == "deb", "the packages are not installed in this run (PMQOS_INSTALL=deb)")
class TestPackage(SystemTestCase):
    def version(self, package="pmqos"):
        return self.c.sh("dpkg-query -W -f '${Version}' %s" % package).stdout.strip()

    def debs(self, sub=""):
        return "$(ls /pmqos-install/%s*.deb | grep -v -- -dbgsym_)" % sub

    def test_1_install_then_first_client(self):
        # dpkg -i enabled pmqosd (it starts at boot, for persistent requests
        # and unit rules) but did not start it: the first client does.
        self.assertEqual(self.c.after_install, ["inactive", "enabled"])
        self.assertEqual(self.c.sh("id -gn pmqos", check=True).stdout.strip(), "pmqos")
        for p in PACKAGES:
            self.assertRegex(self.c.sh("dpkg-query -W -f '${Status}' %s" % p).stdout, r"install ok installed")
        r = self.c.sh("python3 -c '%s'" % FIRST_CLIENT.replace("'", '"'))
        self.assertEqual(r.returncode, 0, r.stderr + self.journal())
        self.assertEqual(r.stdout.split(), ["-1", "71"])
        self.assertEqual(self.c.sh("systemctl is-active pmqosd").stdout.strip(), "active")
        self.assertIn("/system.slice/pmqosd.service", self.c.sh("cat /proc/%d/cgroup" % self.main_pid()).stdout)
        wait_for(lambda: kernel() == self.baseline, timeout=5, what="the hold's end")

    def test_2_upgrade_keeps_bounds(self):
        old = self.version()
        new = self.c.sh("dpkg-deb -f $(ls /pmqos-install/upgrade/pmqos_*.deb) Version", check=True).stdout.strip()
        r = self.c.sh("dpkg --compare-versions %s gt %s" % (new, old))
        self.assertEqual(r.returncode, 0, "the upgrade's version %s is not above %s" % (new, old))
        self.start()
        holder, cookie = self.holder(44)
        try:
            self.assertLessEqual(kernel(), 44)
            persistent = self.busctl(QOS, "RequestLatency", "sib", "cpu_dma", "88", "true").stdout.split()[1]
            pid = self.main_pid()
            sampler = self.sampler(44)
            try:
                r = self.c.sh("dpkg -i %s" % self.debs("upgrade/"), timeout=120)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            finally:
                sampler.send_signal(signal.SIGTERM)
                n, above, max_gap = (int(x) for x in sampler.communicate(timeout=10)[0].split())
            sys.stderr.write("upgrade %s -> %s: %d samples, %d above 44 µs, longest gap %d µs\n"
                             % (old, new, n, above, max_gap))
            for p in PACKAGES:
                self.assertEqual(self.version(p), new)
            self.assertEqual(self.c.sh("systemctl is-active pmqosd").stdout.strip(), "active")
            self.assertNotEqual(self.main_pid(), pid, "the upgrade did not restart pmqosd")
            self.assertGreater(n, 100)
            self.assertEqual(above, 0, "the kernel lost the bound during the upgrade:\n" + self.journal())
            self.assertTrue(self.listed(cookie), "the client's request is gone after the upgrade")
            self.assertTrue(self.listed(persistent), "the persistent request is gone after the upgrade")
            self.assertIn("Re-adopted", self.journal("-n 30"))
        finally:
            self.release(holder)
        wait_for(lambda: not self.listed(cookie), timeout=5, what="the client's request to end with it")
        self.busctl(QOS, "CancelRequest", "u", persistent)

    def test_3_purge_leaves_nothing(self):
        cpu0 = "/sys/devices/system/cpu/cpu0/power/pm_qos_resume_latency_us"
        with open(cpu0) as f:
            original = f.read().strip()
        self.start()
        holder, cookie = self.holder(47)
        cpu_holder, _ = self.holder(29, cpu=0)
        try:
            with open(cpu0) as f:
                self.assertEqual(f.read().strip(), "29")
            self.busctl(QOS, "RequestLatency", "sib", "cpu_dma", "88", "true")  # into /var/lib/pmqos
            self.c.sh("mkdir -p /etc/pmqos/rules.d && printf '[Rule]\\nUnit=x.service\\nLatency=5\\n' "
                      "> /etc/pmqos/rules.d/admin.conf", check=True)
            self.assertLessEqual(kernel(), 47)
            r = self.c.sh("dpkg --purge %s" % " ".join(PACKAGES), timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            wait_for(lambda: kernel() == self.baseline, timeout=5, what="the bound to go with the package")
            with open(cpu0) as f:
                self.assertEqual(f.read().strip(), original, "cpu0's bound outlived the package")
            self.assertEqual(self.c.sh("pgrep -l 'pmqos'").stdout, "", "a process outlived the package")
            for p in PACKAGES:
                self.assertNotRegex(self.c.sh("dpkg-query -W -f '${Status}' %s 2>&1" % p).stdout, r"installed")
            self.assertEqual(self.c.sh("systemctl show -P LoadState pmqosd").stdout.strip(), "not-found")
            self.assertEqual(self.c.sh("systemctl list-units --all --no-legend 'pmqosd*'").stdout.strip(), "")
            left = self.c.sh("ls -d /var/lib/pmqos /run/pmqos /etc/pmqos /usr/lib/pmqos /usr/share/doc/*pmqos* "
                             "/lib/systemd/system/pmqosd.service /usr/lib/systemd/system/pmqosd.service "
                             "/etc/systemd/system/*/pmqosd.service /var/lib/systemd/deb-systemd-*/*pmqos* "
                             "/var/lib/systemd/deb-systemd-*/*/*pmqos* /usr/share/dbus-1/*/*PMQoS* "
                             "/usr/share/polkit-1/*/*pmqos* /usr/lib/sysusers.d/pmqos.conf "
                             "/usr/lib/*/libpmqos* /usr/lib/python3/dist-packages/pmqos 2>/dev/null").stdout
            self.assertEqual(left, "", "files left behind")
            owned = self.c.sh("find / -xdev \\( -user pmqos -o -group pmqos \\) -print 2>/dev/null").stdout
            self.assertEqual(owned, "", "files of user pmqos left behind")
            # The bus reloaded its configuration (the bus package's dpkg
            # trigger): the name is no longer activatable.
            r = self.c.sh("busctl --system call %s /org/freedesktop/PMQoS %s GetLatency s cpu_dma" % (BUS, QOS))
            self.assertNotEqual(r.returncode, 0)
            self.assertTrue(re.search(r"not activatable|not provided|ServiceUnknown|was not provided", r.stderr),
                            r.stderr)
        finally:
            for h in (holder, cpu_holder):
                h.kill()
                self.release(h)


if __name__ == "__main__":
    sys.exit("run through tests/system/run (one container for every module): %s" % os.path.basename(__file__))
