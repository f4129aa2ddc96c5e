# SPDX-License-Identifier: LGPL-2.1-or-later
"""State on disk: persistent requests and the floor survive SIGTERM
and kill -9 with their cookies; damaged files are moved aside, never fatal;
an acknowledged request is never lost, whenever the daemon is killed."""

import glob
import os
import random
import signal
import stat
import subprocess
import threading
import time

from gi.repository import GLib

from contract import NATIVE_IFACE, PROPS
from fixtures import BrokerTestCase, PMQOSD, main


class StateTestCase(BrokerTestCase):
    def restart(self, sig=signal.SIGTERM):
        self.daemon.proc.send_signal(sig)
        self.daemon.proc.wait(60)
        self.daemon.log.close()
        self.start_daemon(self.daemon_args, state_dir=self.daemon.state_dir)

    @property
    def state_path(self):
        return os.path.join(self.daemon.state_dir, "state")

    def persistent_view(self, c):
        return sorted((r["cookie"], r["value"], r["reason"], r["uid"], r["pid"], r["exec"], r["created"],
                       r["expires"], tuple(r["cpus"]))
                      for r in c.call("ListRequests", iface=NATIVE_IFACE)[0] if r["persistent"])


class TestRestart(StateTestCase):
    def check_survives(self, sig):
        c = self.client()
        a = c.request(120, persistent=True)
        b = c.call("Request", "sia{sv}", "cpu_dma", 80,
                   {"persistent": GLib.Variant("b", True), "reason": GLib.Variant("s", "night build, 2 h"),
                    "timeout": GLib.Variant("u", 3600)}, iface=NATIVE_IFACE)[0]
        c.request(10)  # not persistent: gone after the restart
        c.call("SetMinimumLatency", "si", "cpu_dma", 90)
        before = self.persistent_view(c)
        c.close()

        self.restart(sig)
        w = self.client()
        self.assertEqual(self.persistent_view(w), before)
        self.assertEqual({r[0] for r in w.requests()}, {a, b})
        self.assertEqual(w.call("Get", "ss", NATIVE_IFACE, "MinimumLatency",
                                iface=PROPS)[0], 90)
        self.assertEqual(w.latency(), 90)  # max(min(120, 80), floor 90)
        self.assertKernelAtMost(90)
        for r in w.call("ListRequests", iface=NATIVE_IFACE)[0]:
            self.assertEqual(r["sender"], "")

    def test_survives_sigterm(self):
        self.check_survives(signal.SIGTERM)

    def test_survives_kill9(self):
        self.check_survives(signal.SIGKILL)

    def test_state_file_is_private_and_documented(self):
        c = self.client()
        c.request(5, persistent=True)
        st = os.stat(self.state_path)
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)
        self.assertEqual(stat.S_IMODE(os.stat(self.daemon.state_dir).st_mode), 0o700)
        with open(self.state_path) as f:
            text = f.read()
        self.assertIn("\npmqos-state 1\n", text)
        self.assertTrue(text.endswith("end\n"))

    def test_cancel_is_persisted(self):
        c = self.client()
        a = c.request(120, persistent=True)
        c.cancel(a)
        self.restart(signal.SIGKILL)
        self.assertEqual(self.client().requests(), [])

    def test_expired_while_down(self):
        c = self.client()
        c.call("Request", "sia{sv}", "cpu_dma", 80,
               {"persistent": GLib.Variant("b", True), "timeout": GLib.Variant("u", 1)}, iface=NATIVE_IFACE)
        self.daemon.proc.send_signal(signal.SIGKILL)
        self.daemon.proc.wait(60)
        self.daemon.log.close()
        time.sleep(1.2)
        self.start_daemon(self.daemon_args, state_dir=self.daemon.state_dir)
        self.assertEqual(self.client().requests(), [])
        self.assertKernelReleased()


class TestCorruptState(StateTestCase):
    def corrupt_and_restart(self, content):
        c = self.client()
        c.request(120, persistent=True)
        c.close()
        self.daemon.stop(signal.SIGTERM)
        with open(self.state_path, "wb") as f:
            f.write(content)
        self.start_daemon(self.daemon_args, state_dir=self.daemon.state_dir)
        w = self.client()
        self.assertEqual(w.requests(), [])  # starts empty...
        aside = glob.glob(os.path.join(self.daemon.state_dir, "state.corrupt-*"))
        self.assertEqual(len(aside), 1)     # ...having kept the damaged file
        with open(aside[0], "rb") as f:
            self.assertEqual(f.read(), content)
        self.assertIn("unusable", self.daemon.output())
        # And it works on: a new persistent request is saved again.
        w.request(33, persistent=True)
        self.assertTrue(os.path.exists(self.state_path))
        return self.daemon.output()

    def good_text(self):
        with open(self.state_path, "rb") as f:
            return f.read()

    def test_truncated(self):
        c = self.client()
        c.request(120, persistent=True)
        text = self.good_text()
        for cut in (len(text) - 4, len(text) - 1, len(text) // 2):
            with self.subTest(cut=cut):
                self.doCleanups()
                self.setUp()
                out = self.corrupt_and_restart(text[:cut])
                self.assertIn("truncated", out)

    def test_garbage(self):
        self.corrupt_and_restart(bytes(random.Random(1).randrange(256) for _ in range(3000)))

    def test_wrong_version(self):
        out = self.corrupt_and_restart(b"pmqos-state 99\nfloor -1\nend\n")
        self.assertIn("version", out)

    def test_empty(self):
        self.corrupt_and_restart(b"")

    def test_bad_record(self):
        self.corrupt_and_restart(b"pmqos-state 1\nfloor -1\nrequest cookie=0 type=cpu_dma\nend\n")

    def test_huge(self):
        out = self.corrupt_and_restart(b"#" * (17 * 1024 * 1024) + b"\n")
        self.assertIn("16 MiB", out)


class TestStateDir(StateTestCase):
    root_only = False  # runs as any user
    def test_unwritable_state_dir_is_an_error_at_start(self):
        for bad in ("/proc/1/pmqos-state", "/dev/null/state"):
            proc = subprocess.run([PMQOSD, "--device", self.kernel.path, "--state-dir", bad], env=self.bus.env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=10)
            self.assertNotEqual(proc.returncode, 0)
            self.assertIn(bad, proc.stdout)


class TestKillLoop(StateTestCase):
    """kill -9 at random moments of persistent churn, 200 times: what the
    daemon acknowledged is exactly what it reloads (an operation still in
    flight when it died may have landed or not)."""
    root_only = False  # runs as any user

    ROUNDS = int(os.environ.get("PMQOS_KILL_ROUNDS", "200"))

    def test_acknowledged_state_is_never_lost(self):
        self.start_daemon()
        rnd = random.Random(42)
        acked = {}       # cookie → value
        floor = -1
        for rnd_i in range(self.ROUNDS):
            c = self.bus.connect()
            pending = None
            stop_at = time.monotonic() + rnd.uniform(0.0, 0.03)
            killer = threading.Timer(max(0.0, stop_at - time.monotonic()),
                                     lambda: self.daemon.proc.send_signal(signal.SIGKILL))
            killer.start()
            try:
                while True:
                    op = rnd.random()
                    try:
                        if op < 0.5 or not acked:
                            v = rnd.randrange(1, 100000)
                            pending = ("add", v)
                            cookie = c.request(v, persistent=True)
                            acked[cookie] = v
                        elif op < 0.75:
                            cookie = rnd.choice(list(acked))
                            pending = ("cancel", cookie)
                            c.cancel(cookie)
                            del acked[cookie]
                        elif op < 0.9:
                            cookie = rnd.choice(list(acked))
                            v = rnd.randrange(1, 100000)
                            pending = ("update", cookie, v)
                            c.call("Update", "ui", cookie, v, iface=NATIVE_IFACE)
                            acked[cookie] = v
                        else:
                            v = rnd.choice([-1, rnd.randrange(0, 5000)])
                            pending = ("floor", v)
                            c.call("SetMinimumLatency", "si", "cpu_dma", v)
                            floor = v
                        pending = None
                    except GLib.Error:
                        break  # the daemon is gone
            finally:
                killer.join()
                c.close()
            self.daemon.proc.wait(60)
            self.daemon.log.close()
            self.start_daemon(self.daemon_args, state_dir=self.daemon.state_dir)

            w = self.bus.connect()
            got = {r[0]: r[8] for r in w.requests()}
            got_floor = w.call("Get", "ss", NATIVE_IFACE, "MinimumLatency",
                               iface=PROPS)[0]
            w.close()
            # Settle what was in flight: it either landed or it did not.
            if pending and pending[0] == "add":
                extra = set(got) - set(acked)
                self.assertLessEqual(len(extra), 1, (rnd_i, pending))
                for e in extra:
                    self.assertEqual(got[e], pending[1])
                    acked[e] = pending[1]
            elif pending and pending[0] == "cancel" and pending[1] not in got:
                del acked[pending[1]]
            elif pending and pending[0] == "update" and got.get(pending[1]) == pending[2]:
                acked[pending[1]] = pending[2]
            elif pending and pending[0] == "floor" and got_floor == pending[1]:
                floor = pending[1]
            self.assertEqual(got, acked, "round %d, in flight: %r" % (rnd_i, pending))
            self.assertEqual(got_floor, floor, "round %d" % rnd_i)


if __name__ == "__main__":
    main()
