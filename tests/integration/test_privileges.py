# SPDX-License-Identifier: LGPL-2.1-or-later
"""Least privilege: pmqosd --user pmqos opens the device and the per-CPU
files as root, then runs as pmqos with no capabilities and still serves
everything — including polkit checks of its callers, which polkitd allows
because the project's actions name unix-user:pmqos as their owner."""

import os
import pwd
import shutil
import unittest

from gi.repository import GLib

from contract import ACCESS_DENIED, NATIVE_IFACE, QOS_IFACE, UPOWER_BUS_NAME, UPOWER_PATH
from fixtures import BrokerTestCase, IS_ROOT, main, proc_status, skip_notice, wait_for
from fake_sysfs import make_fake_sysfs, read_cpu
from hostenv import (
    POLKITD_PRESENT,
    POLKIT_USERS,
    pmqos_user_install,
    pmqos_user_uninstall,
    polkit_install,
    polkit_uid,
    polkit_uninstall,
)

def setUpModule():
    if not IS_ROOT or not POLKITD_PRESENT:
        return
    polkit_install()
    pmqos_user_install()


def tearDownModule():
    pmqos_user_uninstall()
    if IS_ROOT and POLKITD_PRESENT:
        polkit_uninstall()


@unittest.skipUnless(IS_ROOT and POLKITD_PRESENT, "needs root and polkitd")
class TestUserSwitch(BrokerTestCase):
    with_polkit = True

    def setUp(self):
        self.sysfs = make_fake_sysfs({0: "0", 1: "100"})
        self.addCleanup(shutil.rmtree, self.sysfs, True)
        self.daemon_args = ("--user", "pmqos", "--sysfs-root", self.sysfs)
        super().setUp()

    def test_serves_everything_without_privilege(self):
        pmqos = pwd.getpwnam("pmqos")
        st = proc_status(self.daemon.proc.pid)
        self.assertEqual(st["Uid"].split(), [str(pmqos.pw_uid)] * 4)
        self.assertEqual(st["Gid"].split(), [str(pmqos.pw_gid)] * 4)
        self.assertEqual(int(st["CapEff"], 16), 0)
        self.assertEqual(int(st["CapPrm"], 16), 0)
        self.assertEqual(st["NoNewPrivs"], "1")
        self.assertIn("Running as user pmqos", self.daemon.output())

        root = self.client()
        root.request(40)
        self.assertKernelAtMost(40)  # through the descriptor opened as root

        member = self.peer(uid=polkit_uid("member"), gid=pwd.getpwnam(POLKIT_USERS["member"]).pw_gid)
        ok = member.call("RequestLatency", "sib", "cpu_dma", 30, False)
        self.assertEqual(ok[0], "ok", ok)  # polkitd answered pmqosd, a non-root owner of the action
        self.assertKernelAtMost(30)
        plain = self.peer(uid=polkit_uid("plain"), gid=pwd.getpwnam(POLKIT_USERS["plain"]).pw_gid)
        self.assertEqual(plain.call("RequestLatency", "sib", "cpu_dma", 20, False)[:2], ("error", ACCESS_DENIED))

        root.call("Request", "sia{sv}", "cpu_dma", 25, {"cpus": GLib.Variant("au", [1])}, iface=NATIVE_IFACE)
        self.assertEqual(read_cpu(self.sysfs, 1), "25")

        root.request(60, persistent=True)
        state = os.path.join(self.daemon.state_dir, "state")
        self.assertEqual(os.stat(state).st_uid, pmqos.pw_uid)
        self.assertEqual(os.stat(self.daemon.state_dir).st_uid, pmqos.pw_uid)

        self.assertEqual(self.daemon.stop(), 0)
        self.assertEqual(read_cpu(self.sysfs, 1), "100")  # restored without privilege too


if not IS_ROOT:
    skip_notice("privilege drop", "needs root")

@unittest.skipUnless(IS_ROOT and POLKITD_PRESENT, "needs root and polkitd")
class TestUserSwitchUPowerName(BrokerTestCase):
    """The shipped unit runs pmqosd --user pmqos: the bus policy lets that
    user own UPower's name too, or --upower-name could not work there."""
    with_polkit = True
    daemon_args = ("--user", "pmqos", "--upower-name")

    def test_owns_upower_name_as_pmqos(self):
        c = self.client()
        wait_for(lambda: c.name_has_owner(UPOWER_BUS_NAME), timeout=30, what="pmqosd (as pmqos) to own UPower's name")
        cookie = c.call("RequestLatency", "sib", "cpu_dma", 60, False, path=UPOWER_PATH, iface=QOS_IFACE,
                        dest=UPOWER_BUS_NAME)[0]
        self.assertEqual(c.latency(), 60)
        self.assertEqual([r[0] for r in c.requests()], [cookie])


if __name__ == "__main__":
    main()
