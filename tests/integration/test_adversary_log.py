# SPDX-License-Identifier: LGPL-2.1-or-later
"""Log lines that cannot lie: a caller's text never makes a line of its own
or a terminal escape in pmqosd's log, and one user's churn never hides
another's changes, nor the administrator's, from the audit trail."""

import pwd
import re
import time
import unittest

from gi.repository import GLib

from contract import NATIVE_IFACE
from fixtures import NOBODY, TIME_SCALE, main, wait_for
from hostenv import POLKIT_USERS
from adversary import AdversaryTestCase, polkit_ready, set_up_module, tear_down_module

setUpModule = set_up_module
tearDownModule = tear_down_module

FORGED = "New request 1 of uid 0 pid 1 (/sbin/init): 0 µs"


class TestForgedLines(AdversaryTestCase):
    def test_newline_and_escape_in_reason(self):
        """A newline in a reason used to forge a whole entry; escape
        sequences reached the terminal or the journal as they were."""
        c = self.client()
        reason = "ok\n" + FORGED + ".\x1b[2J\x1b]0;owned\x07"
        c.call("Request", "sia{sv}", "cpu_dma", 650, {"reason": GLib.Variant("s", reason)}, iface=NATIVE_IFACE)
        # Audit lines are written in one batch once pmqosd's loop is idle,
        # just after the reply: waited for, never assumed.
        wait_for(lambda: "reason: ok\\x0a" + FORGED in self.daemon.output(), timeout=5 * TIME_SCALE,
                 what="the request's audit entry")
        out = self.daemon.output()
        lines = out.splitlines()
        self.assertFalse([line for line in lines if line.startswith(("pmqosd: " + FORGED, FORGED))], out)
        self.assertFalse(any("\x1b" in line or "\x07" in line for line in lines), out)
        self.assertTrue(any("reason: ok\\x0a" + FORGED in line for line in lines), out)
        self.assertIntact(expected_latency=650)


@unittest.skipUnless(polkit_ready, "needs root and polkitd")
class TestAuditBudget(AdversaryTestCase):
    with_polkit = True

    def test_one_users_churn_hides_nothing_of_others(self):
        """One user's Request/Cancel churn used up the one audit budget:
        root's "floor set to 0 µs" was then never recorded."""
        u = pwd.getpwnam(POLKIT_USERS["member"])
        churner = self.peer(uid=u.pw_uid, gid=u.pw_gid)
        for i in range(150):  # 300 entries, past the 200 of a burst
            r = churner.call("RequestLatency", "sib", "cpu_dma", 900 + i, False)
            self.assertEqual(r[0], "ok", r)
            self.assertEqual(churner.call("CancelRequest", "u", r[1][0])[0], "ok")
        root = self.client()
        root.call("SetMinimumLatency", "si", "cpu_dma", 0)
        cookie = root.request(640)
        # Audit lines are written when pmqosd's loop has nothing more to do: maybe just after the reply.
        self.assert_eventually(lambda: "New request %d of uid 0" % cookie in self.daemon.output(),
                               what="the request's audit line")
        self.assertIn("The floor went from none to 0 µs", self.daemon.output())
        root.call("SetMinimumLatency", "si", "cpu_dma", -1)
        self.assertIntact(expected_latency=640)


@unittest.skipUnless(polkit_ready, "needs root and polkitd")
class TestPolkitWarnings(AdversaryTestCase):
    with_polkit = True

    def test_connect_call_leave_cycles(self):
        """libpolkit's own GLib warnings (a caller gone before polkitd looked)
        bypassed pmqosd's limit: 1,000 cycles made ~600 lines a second."""
        _ = self.daemon
        t = time.monotonic()
        a = self.attacker(NOBODY, "cycles", 1000)
        self.assertEqual(a.result(timeout=300), {"cycles": 1000})
        time.sleep(2)
        noise = [line for line in self.daemon.output().splitlines()
                 if not re.search(r"(New|Changed|Ended) request \d+ of|The effective latency bound went|"
                                  r"The floor went|left the bus|Checked \d+ previous|Serving ", line)]
        # LOG_CALLER_BURST (20) lines a window of 10 s, and one saying how
        # many were left out: a slow pmqosd (valgrind) spreads the attack
        # over more windows; here ~2 s, 45 lines at most.
        windows = int((time.monotonic() - t) // 10) + 2
        self.assertLessEqual(len(noise), 21 * windows + 3, "\n".join(noise[:60]))
        self.assertIntact()


if __name__ == "__main__":
    main()
