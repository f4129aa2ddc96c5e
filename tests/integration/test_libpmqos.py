# SPDX-License-Identifier: LGPL-2.1-or-later
"""Runs the C tests of libpmqos (tests/unit/test-libpmqos.c) against a live
broker: private bus, real polkitd with the project's policy, pmqosd restarted
whenever it exits (as systemd's Restart= would), and test users."""

import os
import pwd
import subprocess
import sys
import time
import unittest

from fixtures import BrokerTestCase, IS_ROOT, PrivateBus, TIME_SCALE, main, skip_notice
from hostenv import POLKITD_PRESENT, POLKIT_USERS, polkit_install, polkit_uninstall

TEST_BINARY = os.environ.get("PMQOS_TEST_LIBPMQOS",
                             os.path.join(os.path.dirname(os.environ.get("PMQOSD", "")), "..", "tests",
                                          "test-libpmqos"))


def setUpModule():
    polkit_install()


def tearDownModule():
    polkit_uninstall()


@unittest.skipUnless(IS_ROOT and POLKITD_PRESENT, "needs root and polkitd")
class TestLibrary(BrokerTestCase):
    with_polkit = True
    daemon_args = ("--max-requests-per-connection", "2")

    def run_binary(self, mode, env, supervise=False):
        proc = subprocess.Popen([TEST_BINARY, mode], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        restarts = 0
        while proc.poll() is None:
            if supervise and self.daemon.proc.poll() is not None:
                self.daemon.log.close()
                restarts += 1
                try:
                    self.start_daemon(self.daemon_args, state_dir=self.daemon.state_dir)
                except AssertionError:
                    # The test binary killed it again before it was seen to own its
                    # name (it watches the name too): that exit counts, start another.
                    pass
            time.sleep(0.01)
        out = proc.stdout.read()
        proc.stdout.close()
        sys.stderr.write(out)
        self.assertEqual(proc.returncode, 0, out)
        return restarts

    def env(self):
        member = pwd.getpwnam(POLKIT_USERS["member"])
        plain = pwd.getpwnam(POLKIT_USERS["plain"])
        return dict(self.bus.env, PMQOS_TEST_DEVICE=self.kernel.path, PMQOS_TEST_RUNTIME_DIR=self.bus.runtime_dir,
                    PMQOS_TEST_ROUNDS="1000" if TIME_SCALE == 1 else "100",
                    PMQOS_TEST_MEMBER_UID=str(member.pw_uid), PMQOS_TEST_MEMBER_GID=str(member.pw_gid),
                    PMQOS_TEST_PLAIN_UID=str(plain.pw_uid), PMQOS_TEST_PLAIN_GID=str(plain.pw_gid))

    def test_with_broker(self):
        self.start_daemon()
        restarts = self.run_binary("broker", self.env(), supervise=True)
        self.assertEqual(restarts, 2)  # the two restart tests stopped it once each

    def test_without_broker(self):
        empty = PrivateBus()
        try:
            self.run_binary("no-broker", dict(self.env(), DBUS_SYSTEM_BUS_ADDRESS=empty.address))
        finally:
            empty.stop()

    def test_without_bus(self):
        self.run_binary("no-bus", dict(self.env(), DBUS_SYSTEM_BUS_ADDRESS="unix:path=/nonexistent/bus"))


if not IS_ROOT:
    skip_notice("libpmqos C tests", "need root (users, polkit files)")

if __name__ == "__main__":
    main()
