# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the adversary suites (test_adversary_*.py) share: what a local user
with no pmqos rights can try, each attack with real clients of other uids on
a bus with the bus's default limits, the real polkitd and a never-answering
authentication agent. After each: pmqosd alive, honest clients' requests
intact, the kernel value equal to the model (AdversaryTestCase.assertIntact)."""

import json
import os
import subprocess
import sys
import time
import unittest

from fixtures import BrokerTestCase, IS_ROOT, setpriv
from hostenv import POLKITD_PRESENT, pmqos_user_install, pmqos_user_uninstall, polkit_install, polkit_uninstall


UNDER_WRAPPER = bool(os.environ.get("PMQOSD_WRAPPER"))

polkit_ready = IS_ROOT and POLKITD_PRESENT


def set_up_module():
    if not IS_ROOT:
        raise unittest.SkipTest("needs root: every attack comes from clients of other uids (setpriv)")
    if polkit_ready:
        polkit_install()
    pmqos_user_install()


def tear_down_module():
    pmqos_user_uninstall()
    if polkit_ready:
        polkit_uninstall()


class Attacker:
    """tests/integration/attacker.py as another user; see its docstring."""

    def __init__(self, bus, uid, what, n, wait=None):
        cmd = [*setpriv(uid), sys.executable, bus.attacker, what, str(n)]
        if wait is not None:
            cmd += ["--wait", str(wait)]
        self.proc = subprocess.Popen(cmd, env=bus.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def result(self, timeout=120):
        import select
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise AssertionError("the attacker did not finish in %d s" % timeout)
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError("the attacker died: %r" % self.proc.wait())
        return json.loads(line)

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()


class AdversaryTestCase(BrokerTestCase):
    def setUp(self):
        super().setUp()
        # The honest side: a root request that every attack must leave intact.
        self.honest = self.client()
        self.honest_cookie = self.honest.request(700)

    def attacker(self, uid, what, n, wait=None):
        a = Attacker(self.bus, uid, what, n, wait)
        self.addCleanup(a.close)
        return a

    def restart(self, args=(), config=None, state_dir=None):
        """A fresh pmqosd with these arguments (and configuration text)."""
        self.daemon.stop()
        if config is not None:
            path = os.path.join(self.bus.dir, "pmqosd-%d.conf" % time.monotonic_ns())
            with open(path, "w") as f:
                f.write("[pmqosd]\n" + config)
            args = ("--config", path, *args)
        self.start_daemon(args, state_dir=state_dir)
        self.keep_honest()

    def keep_honest(self):
        """The honest client stayed connected: its request is re-adopted across
        the restart; it asks again only if it is not."""
        if self.honest_cookie not in [r[0] for r in self.honest.requests()]:
            self.honest_cookie = self.honest.request(700)

    def assertIntact(self, expected_latency=700):
        """pmqosd alive, the honest request listed, kernel equal to the model."""
        self.assertIsNone(self.daemon.proc.poll(), "pmqosd died:\n" + self.daemon.output())
        listed = [r[0] for r in self.honest.requests()]
        self.assertIn(self.honest_cookie, listed)
        self.assertEqual(self.honest.latency(), expected_latency)
        self.assertKernelAtMost(expected_latency)


