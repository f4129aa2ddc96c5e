# SPDX-License-Identifier: LGPL-2.1-or-later
"""Readers that never read: a raw client as nobody sends calls to pmqosd and
never reads its socket, so every reply waits in the bus for it. Whatever it
does, root and another user are answered within a second throughout, and
pmqosd keeps what waits for the attacker in the bus bounded."""

import json
import os
import pwd
import select
import shutil
import subprocess
import sys
import threading
import time

from gi.repository import GLib

from contract import LIMITS, NATIVE_IFACE, PROPS
from fixtures import NOBODY, TIME_SCALE, BrokerTestCase, main

NONREADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nonreader.py")
FIRSTCALLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "firstcalls.py")
HONEST_UID = pwd.getpwnam("daemon").pw_uid  # any user but the attacker's
# Honest callers are answered within this (the bound), scaled for checkers.
HONEST_BOUND = 1.0 * TIME_SCALE
# pmqosd's test-only switch: its call buckets never refill (pmqosd(8)), so
# what a burst gets is counted, not timed.
FROZEN_BUDGET = {"PMQOSD_TEST_FREEZE_BUDGET_CLOCK": "1"}


class NonReader:
    """tests/integration/nonreader.py as uid, until closed."""

    def __init__(self, bus, uid, connections, rate, methods):
        script = shutil.copy(NONREADER, bus.dir)
        cmd = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups", sys.executable, script,
               "--connections", str(connections), "--rate", str(rate), "--methods", methods]
        self.proc = subprocess.Popen(cmd, env=bus.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            raise AssertionError("the non-reader did not connect: %r" % self.proc.poll())
        self.last = json.loads(line)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.last = json.loads(line)

    def progress(self):
        """Its latest report: calls sent, and calls it held back because the bus stopped reading it."""
        return self.last

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(5)


class StallTestCase(BrokerTestCase):
    def nonreader(self, connections=1, rate=1000, methods="Introspect,Explain"):
        _ = self.daemon  # the class's, started before the attack
        n = NonReader(self.bus, NOBODY, connections, rate, methods)
        self.addCleanup(n.close)
        return n

    def honest_latencies(self, seconds, attacker):
        """Root (in this process) and HONEST_UID (its own process) ask
        GetLatency every 100 ms for seconds; the slowest answer of each."""
        root = self.client()
        cookie = root.request(700)
        other = self.peer(uid=HONEST_UID)
        worst = {"root": 0.0, "other": 0.0}
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            t = time.monotonic()
            try:
                root.call("GetLatency", "s", "cpu_dma", timeout=int(5000 * TIME_SCALE))
                took = time.monotonic() - t
            except Exception:
                took = 5.0 * TIME_SCALE  # no answer at all
            worst["root"] = max(worst["root"], took)
            t = time.monotonic()
            answer = other.call("GetLatency", "s", "cpu_dma")
            took = time.monotonic() - t if answer[0] == "ok" else 60.0  # its 60 s timeout, or refused
            worst["other"] = max(worst["other"], took)
            time.sleep(0.1)
        sys.stderr.write("honest worst answer: root %.3f s, uid %d %.3f s; attacker %r\n"
                         % (worst["root"], HONEST_UID, worst["other"], attacker.progress()))
        self.assertIn(cookie, [r[0] for r in root.requests()])
        self.assertIsNone(self.daemon.proc.poll(), "pmqosd died:\n" + self.daemon.output())
        return worst

    def assertAnsweredThroughout(self, worst):
        self.assertLess(worst["root"], HONEST_BOUND, "root waited %.2f s for GetLatency" % worst["root"])
        self.assertLess(worst["other"], HONEST_BOUND, "uid %d waited %.2f s" % (HONEST_UID, worst["other"]))


class TestNonReader(StallTestCase):
    """The audit's reproducer: Introspect and Explain about once a
    millisecond, nothing ever read (here 3 a millisecond: 2 CPUs make Explain
    small). It stalled pmqosd for everyone on dbus-daemon after ~20 s (the bus charged the queued replies to pmqosd
    and stopped reading it)."""

    def test_few_connections(self):
        """Four connections: the bus's bound on pmqosd's queued messages
        (127 MiB) comes before any one receiver's."""
        attacker = self.nonreader(connections=4, rate=3000, methods="Introspect,Explain")
        self.assertAnsweredThroughout(self.honest_latencies(35, attacker))

    def test_many_connections_every_method(self):
        """Any number of non-reading connections of one user, every method
        an unprivileged caller can reach, sd-bus's built-ins included."""
        attacker = self.nonreader(
            connections=64, rate=3000,
            methods="Introspect,Explain,Introspect,Explain,GetAll,ListRequests,GetLatencyRequests,Ping,"
                    "ExplainFolded,ListRequestsPage")
        self.assertAnsweredThroughout(self.honest_latencies(45, attacker))

    def test_reader_of_same_user_served_after(self):
        """A connection that stops reading is dropped from service, not the
        machine: once the attacker left, its user is served again."""
        attacker = self.nonreader(connections=4, rate=1000, methods="Introspect,Explain")
        time.sleep(5)
        attacker.close()
        mine = self.peer(uid=NOBODY)
        deadline = time.monotonic() + 10 * TIME_SCALE
        while True:
            answer = mine.call("Explain", "", iface=NATIVE_IFACE)
            if answer[0] == "ok" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertEqual(answer[0], "ok", answer)


class TestFirstCalls(StallTestCase):
    """Whose a connection is, pmqosd learns one bus round trip after its
    first call. Before, those first calls counted for no user: 40
    connections of nobody, each sending one ListRequests with its Hello and
    never reading, had 40 whole listings queued in the bus, twenty times
    MaxUnreadBytesPerUser here."""

    def first_calls(self, connections, method="ListRequests", calls=1):
        """firstcalls.py as nobody, connected and its calls sent; closing its stdin ends it."""
        for script in (NONREADER, FIRSTCALLS):
            shutil.copy(script, self.bus.dir)
        cmd = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups", sys.executable,
               os.path.join(self.bus.dir, "firstcalls.py"), "--connections", str(connections), "--method", method,
               "--calls", str(calls)]
        attacker = subprocess.Popen(cmd, env=self.bus.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.addCleanup(attacker.kill)
        self.assertIn("connected", attacker.stdout.readline())
        return attacker

    def test_ping_asked_before_known(self):
        """A connection past its bound before pmqosd knew whose it is was
        asked a Ping, and its user was learnt before the answer (here a
        timeout): the answer was counted off a user that never counted the
        question, and no connection of that user was asked again — a reader
        of nobody past its bound then waited forever."""
        path = os.path.join(self.bus.dir, "small-budget.conf")
        with open(path, "w") as f:
            f.write("[pmqosd]\nMaxUnreadBytesPerConnection=32768\n")
        self.start_daemon(("--config", path))
        self.first_calls(1, method="GetAll", calls=40)
        time.sleep(7 * TIME_SCALE)  # past the Ping's 5 s
        reader = self.peer(uid=NOBODY)
        answers = [reader.call("Explain", "", iface=NATIVE_IFACE)[0] for _ in range(12)]  # ~6 KiB each counted
        self.assertEqual(answers.count("ok"), 12, answers)

    def test_new_connections_first_large_call_under_attack(self):
        """Non-readers of nobody fill what pmqosd keeps waiting for them; a
        new connection's first call with a large answer (root's, another
        user's) still waits its round trip for a place and is answered."""
        path = os.path.join(self.bus.dir, "small-budget.conf")
        with open(path, "w") as f:
            f.write("[pmqosd]\nMaxUnreadBytesPerUser=65536\nMaxUnreadBytesPerConnection=32768\n")
        self.start_daemon(("--config", path))
        holder = self.client()
        for i in range(40):
            holder.call("Request", "sia{sv}", "cpu_dma", 1000 + i, {"reason": GLib.Variant("s", "x" * 200)},
                        iface=NATIVE_IFACE)
        attacker = self.nonreader(connections=120, rate=5000, methods="ListRequests,Explain,ExplainFolded")
        time.sleep(8)
        for method in ("ExplainFolded", "ListRequests"):
            root = self.bus.connect()
            root.call(method, iface=NATIVE_IFACE, timeout=int(20000 * TIME_SCALE))  # raises if refused
            root.close()
            answer = self.peer(uid=HONEST_UID).call(method, "", iface=NATIVE_IFACE)
            self.assertEqual(answer[0], "ok", (method, answer, attacker.progress()))
        self.assertIsNone(self.daemon.proc.poll(), "pmqosd died:\n" + self.daemon.output())

    def test_first_calls_count_for_their_user(self):
        path = os.path.join(self.bus.dir, "small-budget.conf")
        with open(path, "w") as f:
            f.write("[pmqosd]\nMaxUnreadBytesPerUser=131072\n")
        self.start_daemon(("--config", path))
        holders = [self.client(), self.client()]  # 64 requests a connection at most
        for i in range(120):
            holders[i % 2].call("Request", "sia{sv}", "cpu_dma", 1000 + i, {"reason": GLib.Variant("s", "x" * 250)},
                                iface=NATIVE_IFACE)
        listing = len(repr(holders[0].call("ListRequests", iface=NATIVE_IFACE)))
        self.assertGreater(listing, 40000)
        attacker = self.first_calls(40)
        time.sleep(1)
        other = self.peer(uid=HONEST_UID)
        t = time.monotonic()
        self.assertEqual(other.call("GetLatency", "s", "cpu_dma")[0], "ok")
        self.assertLess(time.monotonic() - t, HONEST_BOUND)
        out, _ = attacker.communicate("", timeout=60)
        got = json.loads(out.strip().splitlines()[-1])["bytes"]
        sys.stderr.write("40 first calls of nobody: %d bytes sent to it (a listing is ~%d)\n" % (got, listing))
        self.assertLess(got, 4 * 131072, "nobody's first calls were sent %d bytes" % got)
        self.assertIsNone(self.daemon.proc.poll(), "pmqosd died:\n" + self.daemon.output())


class TestReaders(StallTestCase):
    """The budget never stands in the way of a client that reads."""

    def test_reader_past_the_bound_is_served(self):
        """A reader of nobody sent far more than MaxUnreadBytesPerConnection
        answers pmqosd's Peer.Ping as it reads, and every call is answered."""
        path = os.path.join(self.bus.dir, "small-budget.conf")
        with open(path, "w") as f:
            f.write("[pmqosd]\nMaxUnreadBytesPerConnection=32768\nMaxUnreadBytesPerUser=65536\n")
        self.start_daemon(("--config", path))
        reader = self.peer(uid=NOBODY)
        answers = [reader.call("Explain", "", iface=NATIVE_IFACE)[0] for _ in range(60)]  # ~6 KiB each counted
        self.assertEqual(answers.count("ok"), 60, answers)

    def test_calls_per_second(self):
        """Past MaxCallsPerSecondPerUser a reader gets LimitsExceeded, and
        another user is not slowed. The bucket's clock stands still
        (FROZEN_BUDGET): of 600 calls its 500 go, however slowly pmqosd
        answers. (Before, 1500 at once: a slow pmqosd let the bucket refill,
        or the bus refused past its 128 pending replies before pmqosd could.)"""
        self.start_daemon(env=FROZEN_BUDGET)
        flooder = self.peer(uid=NOBODY)
        self.assertEqual(flooder.call("GetLatency", "s", "cpu_dma")[0], "ok")  # pmqosd knows whose it is
        answers = []
        for _ in range(6):  # below the bus's 128 pending replies a connection
            answers += flooder.burst(100, "Get", "ss", NATIVE_IFACE, "EffectiveLatency", iface=PROPS)
        refused = [a for a in answers if a[0] == "error"]
        self.assertEqual({a[1] for a in refused}, {LIMITS})
        self.assertTrue(all("MaxCallsPerSecondPerUser" in a[2] for a in refused), refused[:3])
        self.assertIn(len(answers) - len(refused), (499, 500), "of 600 calls, a bucket of 500")
        other = self.peer(uid=HONEST_UID)
        t = time.monotonic()
        self.assertEqual(other.call("GetLatency", "s", "cpu_dma")[0], "ok")
        self.assertLess(time.monotonic() - t, HONEST_BOUND)

    def test_a_page_costs_a_page(self):
        """With 3000 requests a ListRequests answer is ~1.8 MB, some 450 of
        the 500 calls a second a user may make: a second one at once is
        refused. A ListRequestsPage answer is priced as the largest page
        (1024 requests), whatever the store holds: three go at once. "At
        once" whatever the speed: the buckets' clock stands still
        (FROZEN_BUDGET); before, under valgrind the first listing took
        pmqosd long enough for the bucket to refill for a second one."""
        path = os.path.join(self.bus.dir, "no-unread-bound.conf")
        with open(path, "w") as f:  # only the calls per second decide here
            f.write("[pmqosd]\nMaxUnreadBytesPerConnection=1073741824\nMaxUnreadBytesPerUser=1073741824\n")
        self.start_daemon(("--config", path), env=FROZEN_BUDGET)
        root = self.client()
        for k in range(3000):
            root.call("Request", "sia{sv}", "cpu_dma", 1000 + k, {}, iface=NATIVE_IFACE)
        lister, pager = self.peer(uid=NOBODY), self.peer(uid=HONEST_UID)
        for p in (lister, pager):  # pmqosd knows whose they are (before, a few calls go on credit)
            self.assertEqual(p.call("GetLatency", "s", "cpu_dma")[0], "ok")
        lists = lister.burst(4, "ListRequests", None, iface=NATIVE_IFACE)
        pages = pager.burst(4, "ListRequestsPage", "uu", 0, 0, iface=NATIVE_IFACE)
        outcome = lambda answers: [a[0] if a[0] == "ok" else a[1] for a in answers]  # noqa: E731
        self.assertEqual(outcome(lists), ["ok", LIMITS, LIMITS, LIMITS])
        self.assertEqual(len(pages[0][1][0]), 256)
        self.assertEqual(outcome(pages), ["ok", "ok", "ok", LIMITS])

if __name__ == "__main__":
    main()
