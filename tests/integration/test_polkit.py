# SPDX-License-Identifier: LGPL-2.1-or-later
"""Authorization with the real polkitd, the project's own .policy
and rules installed for the run, users created for it, and callers of
several uids. Needs root (users, polkit files, setpriv); says so if not."""

import os
import pwd
import select
import subprocess
import sys
import time
import unittest

from contract import (ACCESS_DENIED, BUS_NAME, DBUS_IFACE, DBUS_NAME, DBUS_PATH, INTERACTIVE, LIMITS, NATIVE_IFACE,
                      PEER)
from fixtures import PMQOSCTL, BrokerTestCase, IS_ROOT, NOBODY, TIME_SCALE, main, skip_notice, wait_for
from hostenv import POLKITD_PRESENT, POLKIT_USERS, polkit_install, polkit_uid, polkit_uninstall


def setUpModule():
    polkit_install()


def tearDownModule():
    polkit_uninstall()


def uid(key):
    return polkit_uid(key)


USERS = POLKIT_USERS
polkitd_present = POLKITD_PRESENT


@unittest.skipUnless(IS_ROOT and polkitd_present, "needs root and /usr/lib/polkit-1/polkitd")
class PolkitTestCase(BrokerTestCase):
    with_polkit = True

    def peer_as(self, key):
        u = pwd.getpwnam(USERS[key])
        return self.peer(uid=u.pw_uid, gid=u.pw_gid)


class TestActions(PolkitTestCase):
    def test_user_without_session_or_group(self):
        root = self.client()
        root.request(500)
        p = self.peer_as("plain")
        self.assertEqual(p.call("RequestLatency", "sib", "cpu_dma", 10, False)[:2], ("error", ACCESS_DENIED))
        # Reads are open to everyone.
        self.assertEqual(p.call("GetLatency", "s", "cpu_dma"), ("ok", [500]))
        self.assertEqual(p.call("GetLatencyRequests", "")[0], "ok")
        self.assertEqual(len(root.requests()), 1)
        self.assertKernelAtMost(500)

    def test_group_member(self):
        root = self.client()
        root_cookie = root.request(900)
        p = self.peer_as("member")

        ok, (cookie,) = p.call("RequestLatency", "sib", "cpu_dma", 77, False)
        self.assertEqual(ok, "ok")
        self.assertEqual(root.latency(), 77)
        self.assertKernelAtMost(77)
        listed = {r[0]: r for r in root.requests()}
        self.assertEqual(listed[cookie][1], uid("member"))
        self.assertEqual(listed[cookie][2], p.pid)

        # More than an ordinary request needs an administrator.
        self.assertEqual(p.call("RequestLatency", "sib", "cpu_dma", 10, True)[:2], ("error", INTERACTIVE))
        self.assertEqual(p.call("SetMinimumLatency", "si", "cpu_dma", 100)[:2], ("error", INTERACTIVE))
        self.assertEqual(p.call("CancelRequest", "u", root_cookie)[:2], ("error", INTERACTIVE))
        self.assertEqual(sorted(r[0] for r in root.requests()), sorted([root_cookie, cookie]))

        # Its own request it may cancel, and another member's (same rule, other uid) it may not.
        other = self.peer_as("member2")
        ok, (other_cookie,) = other.call("RequestLatency", "sib", "cpu_dma", 88, False)
        self.assertEqual(p.call("CancelRequest", "u", other_cookie)[:2], ("error", INTERACTIVE))
        self.assertEqual(p.call("CancelRequest", "u", cookie), ("ok", []))
        self.assertEqual(root.latency(), 88)

        # Dropped when it leaves.
        ok, (cookie,) = p.call("RequestLatency", "sib", "cpu_dma", 55, False)
        self.assertEqual(root.latency(), 55)
        p.kill()
        wait_for(lambda: cookie not in [r[0] for r in root.requests()], what="the member's request to go")
        self.assertEqual(root.latency(), 88)

    def test_refusal_says_what_would_allow_it(self):
        """A member of group pmqos asking a timeout past
        MaxUnprivilegedTimeoutSec (or a persistent request) needs
        request-latency-persistent, which the group does not give: the
        refusal says that, and what would (an administrator's password, or a
        shorter timeout), not "allowed to members of group pmqos"."""
        _ = self.daemon
        u = pwd.getpwnam(USERS["member"])
        answers = []
        for options in ({"timeout": {"__variant__": ["u", 3600]}}, {"persistent": {"__variant__": ["b", True]}}):
            p = self.peer(uid=u.pw_uid, gid=u.pw_gid)
            answers.append(p.call("Request", "sia{sv}", "cpu_dma", 60, options, iface=NATIVE_IFACE))
        for answer in answers:
            self.assertEqual(answer[:2], ("error", INTERACTIVE), answer)
            self.assertIn("org.freedesktop.pmqos.request-latency-persistent", answer[2])
            self.assertIn("group pmqos does not give it", answer[2])
            self.assertIn("administrator", answer[2])
        self.assertIn("a timeout of at most 300 s", answers[0][2])
        proc = subprocess.run(["setpriv", "--reuid=%d" % u.pw_uid, "--regid=%d" % u.pw_gid, "--init-groups",
                               PMQOSCTL, "request", "60", "--timeout", "3600"], env=self.bus.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        sys.stderr.write("pmqosctl as a member of group pmqos: %s" % proc.stderr)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("group pmqos does not give it", proc.stderr)
        self.assertNotIn("to members of group pmqos", proc.stderr)  # pmqosctl's own hint, which would contradict it
        self.assertEqual(self.client().requests(), [])

    def test_rule_grants_floor(self):
        root = self.client()
        root.request(100)
        p = self.peer_as("floor")
        self.assertEqual(p.call("SetMinimumLatency", "si", "cpu_dma", 400), ("ok", []))
        self.assertEqual(root.latency(), 400)
        self.assertKernelAtMost(400)
        # The same user has no right to request latency at all.
        self.assertEqual(p.call("RequestLatency", "sib", "cpu_dma", 10, False)[:2], ("error", ACCESS_DENIED))

    def test_identical_checks_share_one_answer(self):
        """Calls asked again while polkitd still answers the first are not put
        to it again (a flood of one connection is one check at a time); no
        answer is kept past that."""
        root = self.client()
        root.request(100)
        p = self.peer_as("once")
        self.assertEqual(p.burst(8, "SetMinimumLatency", "si", "cpu_dma", 300), [("ok", [])] * 8)
        self.assertEqual(root.latency(), 300)
        # Asked anew, polkitd's rule now says no.
        self.assertEqual(p.call("SetMinimumLatency", "si", "cpu_dma", 400)[:2], ("error", ACCESS_DENIED))
        self.assertEqual(root.latency(), 300)

    def test_root_needs_no_polkit(self):
        root = self.client()
        c = root.request(60, persistent=True)
        root.call("SetMinimumLatency", "si", "cpu_dma", 70)
        self.assertEqual(root.latency(), 70)
        other = self.peer_as("member")
        ok, (mine,) = other.call("RequestLatency", "sib", "cpu_dma", 80, False)
        root.cancel(mine)  # someone else's: root may
        root.cancel(c)
        self.assertEqual(root.latency(), -1)


class TestLimits(PolkitTestCase):
    daemon_args = ()

    def test_per_connection_limit(self):
        root = self.client()
        p = self.peer_as("member")
        cookies = []
        for i in range(64):
            r = p.call("RequestLatency", "sib", "cpu_dma", 1000 + i, False)
            self.assertEqual(r[0], "ok", (i, r))
            cookies.append(r[1][0])
        r = p.call("RequestLatency", "sib", "cpu_dma", 5, False)
        self.assertEqual(r[:2], ("error", LIMITS))
        self.assertTrue(r[2].endswith("."))
        # Nothing else changed.
        self.assertEqual(len(root.requests()), 64)
        self.assertEqual(root.latency(), 1000)
        # Room again after a cancel.
        self.assertEqual(p.call("CancelRequest", "u", cookies[0]), ("ok", []))
        self.assertEqual(p.call("RequestLatency", "sib", "cpu_dma", 999, False)[0], "ok")

    def test_per_uid_limit_across_connections(self):
        root = self.client()
        peers = [self.peer_as("member") for _ in range(5)]
        made = 0
        for p in peers[:4]:
            for _ in range(64):
                self.assertEqual(p.call("RequestLatency", "sib", "cpu_dma", 5000, False)[0], "ok")
                made += 1
        self.assertEqual(made, 256)
        r = peers[4].call("RequestLatency", "sib", "cpu_dma", 5000, False)
        self.assertEqual(r[:2], ("error", LIMITS))
        self.assertEqual(len(root.requests()), 256)
        # Another user is not affected.
        self.assertEqual(self.peer_as("member2").call("RequestLatency", "sib", "cpu_dma", 7, False)[0], "ok")

    def test_root_is_exempt(self):
        root = self.client()
        for _ in range(70):
            root.request(3000)
        self.assertEqual(len(root.requests()), 70)


class TestConfiguredLimits(PolkitTestCase):
    daemon_args = ("--max-requests-per-connection", "3", "--max-requests-per-uid", "4")

    def test_configured_limits(self):
        a = self.peer_as("member")
        b = self.peer_as("member")
        for _ in range(3):
            self.assertEqual(a.call("RequestLatency", "sib", "cpu_dma", 100, False)[0], "ok")
        self.assertEqual(a.call("RequestLatency", "sib", "cpu_dma", 100, False)[:2], ("error", LIMITS))
        self.assertEqual(b.call("RequestLatency", "sib", "cpu_dma", 100, False)[0], "ok")
        self.assertEqual(b.call("RequestLatency", "sib", "cpu_dma", 100, False)[:2], ("error", LIMITS))


def read_line(stream, timeout=30):
    """A line from a child's output, or an assertion error after timeout s."""
    ready, _, _ = select.select([stream], [], [], timeout)
    if not ready:
        raise AssertionError("no answer from the agent within %d s" % timeout)
    return stream.readline().strip()


def start_agent(bus, peer, delay):
    """A polkit agent for peer's process that answers after delay seconds."""
    return subprocess.Popen(
        [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "slow_agent.py"),
         "--pid", str(peer.pid), "--delay", str(delay)],
        env=bus.env, stdout=subprocess.PIPE, text=True)


class TestSlowPolkit(PolkitTestCase):
    def start_agent(self, peer, delay):
        return start_agent(self.bus, peer, delay)

    def test_slow_check_blocks_nobody_else(self):
        root = self.client()
        slow = self.peer_as("slow")
        agent = self.start_agent(slow, 3)
        try:
            self.assertEqual(read_line(agent.stdout), "ready")
            start = time.monotonic()
            slow.send_call("RequestLatency", "sib", "cpu_dma", 33, False, interactive=True)
            self.assertEqual(read_line(agent.stdout), "begin")  # the check reached the agent

            # Meanwhile root, a group member and a denied user are answered at once.
            t = time.monotonic()
            cookie = root.request(500)
            member = self.peer_as("member")
            self.assertEqual(member.call("RequestLatency", "sib", "cpu_dma", 400, False)[0], "ok")
            self.assertEqual(self.peer_as("plain").call("RequestLatency", "sib", "cpu_dma", 1, False)[:2],
                             ("error", ACCESS_DENIED))
            root.cancel(cookie)
            self.assertLess(time.monotonic() - t, 1.5 * TIME_SCALE)
            # The slow request has not taken effect before authorization said yes.
            self.assertEqual(root.latency(), 400)
            self.assertNotIn(33, [r[8] for r in root.requests()])

            ok = slow.receive_call()
            elapsed = time.monotonic() - start
            self.assertEqual(ok[0], "ok", ok)
            self.assertGreaterEqual(elapsed, 2.5)
            self.assertEqual(root.latency(), 33)
            self.assertKernelAtMost(33)
        finally:
            agent.kill()
            agent.wait()
            agent.stdout.close()

    def test_caller_leaving_during_check_gets_nothing(self):
        root = self.client()
        slow = self.peer_as("slow")
        agent = self.start_agent(slow, 60)
        try:
            self.assertEqual(read_line(agent.stdout), "ready")
            slow.send_call("RequestLatency", "sib", "cpu_dma", 44, False, interactive=True)
            self.assertEqual(read_line(agent.stdout), "begin")  # the check reached the agent
            slow.kill()
            # The subject is the caller's bus name: polkitd ends the
            # authentication when it leaves, so no dialog outlives the caller,
            # and pmqosd drops whatever answer comes back.
            self.assertEqual(read_line(agent.stdout, timeout=10), "cancelled")
            self.assertEqual(root.requests(), [])
            self.assertEqual(root.latency(), -1)
            self.assertKernelReleased()
        finally:
            agent.kill()
            agent.wait()
            agent.stdout.close()


class TestShutdownDuringCheck(PolkitTestCase):
    def test_sigterm_while_a_check_waits(self):
        slow = self.peer_as("slow")
        agent = start_agent(self.bus, slow, 60)
        try:
            self.assertEqual(read_line(agent.stdout), "ready")
            slow.send_call("RequestLatency", "sib", "cpu_dma", 44, False, interactive=True)
            self.assertEqual(read_line(agent.stdout), "begin")
            t = time.monotonic()
            # Exits at once, cleanly, and (under ASan) with nothing leaked.
            self.assertEqual(self.daemon.stop(), 0)
            self.assertLess(time.monotonic() - t, 5 * TIME_SCALE)
        finally:
            agent.kill()
            agent.wait()
            agent.stdout.close()


class TestPolkitDown(PolkitTestCase):
    def test_polkitd_stopped_and_restarted(self):
        from fixtures import Polkitd

        root = self.client()
        member = self.peer_as("member")
        self.assertEqual(member.call("RequestLatency", "sib", "cpu_dma", 500, False)[0], "ok")

        self.polkit.stop()
        t = time.monotonic()
        r = member.call("RequestLatency", "sib", "cpu_dma", 400, False)
        self.assertEqual(r[:2], ("error", ACCESS_DENIED))
        self.assertLess(time.monotonic() - t, 3 * TIME_SCALE)
        root.request(300)  # root still served
        self.assertEqual(root.latency(), 300)

        # polkit comes back: pmqosd recovers without a restart. (A polkitd
        # that has just started may leave its first checks unanswered: pmqosd
        # denies those after 5 s, so ask until granted.)
        self.polkit = Polkitd(self.bus)
        wait_for(lambda: member.call("RequestLatency", "sib", "cpu_dma", 200, False)[0] == "ok", timeout=30,
                 interval=0.1, what="a member to be granted again")
        self.assertEqual(root.latency(), 200)


class TestBusPolicy(PolkitTestCase):
    def test_unprivileged_cannot_own_the_name(self):
        for p in (self.peer(uid=NOBODY), self.peer_as("member")):
            r = p.call("RequestName", "su", BUS_NAME, 0, dest=DBUS_NAME,
                       path=DBUS_PATH, iface=DBUS_IFACE)
            self.assertEqual(r[:2], ("error", ACCESS_DENIED), r)

    def test_undocumented_interface_is_not_reachable(self):
        p = self.peer(uid=NOBODY)
        r = p.call("Frobnicate", "", iface="org.example.Other")
        self.assertEqual(r[:2], ("error", ACCESS_DENIED), r)
        self.assertEqual(p.call("Ping", "", iface=PEER), ("ok", []))


if not IS_ROOT or not polkitd_present:
    skip_notice("polkit authorization tests", "need root and /usr/lib/polkit-1/polkitd")

if __name__ == "__main__":
    main()
