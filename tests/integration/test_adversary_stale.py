# SPDX-License-Identifier: LGPL-2.1-or-later
"""The polkit answer bound to its action: a call that polkit answered for one
action, and that needs another by the time the answer comes (a reload changed
MaxUnprivilegedTimeoutSec while polkit decided), is asked again, never let
through on the stale answer (systemd's bus-polkit.c answers -ESTALE there)."""

import os
import pwd
import signal
import time
import unittest

from contract import ACCESS_DENIED, NATIVE_IFACE
from fixtures import main
from hostenv import POLKIT_USERS
from adversary import AdversaryTestCase, polkit_ready, set_up_module, tear_down_module

setUpModule = set_up_module
tearDownModule = tear_down_module


@unittest.skipUnless(polkit_ready, "needs root and polkitd")
class TestStaleAnswer(AdversaryTestCase):
    with_polkit = True

    def config(self, max_unprivileged):
        with open(self.conf, "w") as f:
            f.write("[pmqosd]\nMaxUnprivilegedTimeoutSec=%d\n" % max_unprivileged)

    def test_reload_while_polkit_decides(self):
        """A 400 s timeout needs request-latency under MaxUnprivilegedTimeoutSec=600
        (which the test rule grants, after 2 s); the reload to 300 s comes
        while polkit decides: the call now needs request-latency-persistent,
        which the rule refuses."""
        self.conf = os.path.join(self.bus.dir, "stale.conf")
        self.config(600)
        self.start_daemon(("--config", self.conf))
        self.keep_honest()
        u = pwd.getpwnam(POLKIT_USERS["stale"])
        p = self.peer(uid=u.pw_uid, gid=u.pw_gid)
        p.send_call("Request", "sia{sv}", "cpu_dma", 450, {"timeout": {"__variant__": ["u", 400]}},
                    iface=NATIVE_IFACE)
        time.sleep(0.7)  # polkit is asked and sleeps its 2 s
        self.config(300)
        self.daemon.proc.send_signal(signal.SIGHUP)
        answer = p.receive_call()
        self.assertEqual(answer[:2], ("error", ACCESS_DENIED), answer)
        self.assertNotIn(450, [r[-1] for r in self.honest.requests()])
        # The same call after the reload, with a timeout the new limit allows, is granted.
        answer = p.call("Request", "sia{sv}", "cpu_dma", 450, {"timeout": {"__variant__": ["u", 200]}},
                        iface=NATIVE_IFACE)
        self.assertEqual(answer[0], "ok", answer)
        self.assertIntact(expected_latency=450)


if __name__ == "__main__":
    main()
