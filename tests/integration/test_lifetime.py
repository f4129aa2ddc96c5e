# SPDX-License-Identifier: LGPL-2.1-or-later
"""Request lifetime (pmqosd(8), LIFETIME) and the daemon's own lifetime: clients leaving
the bus, many clients at once, SIGKILLed clients, SIGTERM, start-up errors."""

import os
import signal
import subprocess
import tempfile

from contract import BUS_NAME, PATH, QOS_IFACE, UPOWER_PATH
from fixtures import BrokerTestCase, Daemon, Kernel, PMQOSD, PrivateBus, main, wait_for


class TestClientLifetime(BrokerTestCase):
    def test_two_requests_dropped_together(self):
        watcher = self.client()
        watcher.subscribe(path=PATH)
        watcher.subscribe(path=UPOWER_PATH)
        c = self.bus.connect()
        c.request(80)
        c.request(60)
        self.assertKernelAtMost(60)
        watcher.take_signals()

        c.close()
        wait_for(lambda: watcher.requests() == [], what="the requests to go")
        got = watcher.take_signals()
        for path in (PATH, UPOWER_PATH):
            # One RequestsChanged for the whole client, one LatencyChanged.
            # pmqosd sends LatencyChanged first: the value, then that the set changed.
            self.assertEqual([s[2:] for s in got if s[0] == path],
                             [("LatencyChanged", ("cpu_dma", -1)), ("RequestsChanged", ())])
        self.assertKernelReleased()

    def test_sixty_clients_half_vanish(self):
        watcher = self.client()
        conns = [self.bus.connect() for _ in range(60)]
        cookies = {}
        for i, c in enumerate(conns):
            cookies[i] = c.request(1000 + i)  # client 0 is the strictest
        self.assertEqual(watcher.latency(), 1000)
        self.assertEqual(len(watcher.requests()), 60)

        for c in conns[:30]:
            c.close()
        survivors = {cookies[i] for i in range(30, 60)}
        wait_for(lambda: {r[0] for r in watcher.requests()} == survivors, what="30 requests to remain")
        self.assertEqual(watcher.latency(), 1030)
        self.assertKernelAtMost(1030)

        for c in conns[30:]:
            c.close()
        wait_for(lambda: watcher.requests() == [], what="all requests to go")
        self.assertEqual(watcher.latency(), -1)
        self.assertKernelReleased()

    def test_sigkilled_client_releases_its_requests(self):
        watcher = self.client()
        p = self.peer()
        for v in (40, 41, 42):
            p.request(v)
        self.assertKernelAtMost(40)
        p.kill(signal.SIGKILL)
        wait_for(lambda: watcher.requests() == [], what="the killed client's requests to go")
        self.assertKernelReleased()

    def test_persistent_and_plain_requests_of_a_leaving_client(self):
        watcher = self.client()
        p = self.peer()
        keep = p.request(70, persistent=True)
        p.request(30)
        self.assertKernelAtMost(30)
        p.kill(signal.SIGKILL)
        wait_for(lambda: [r[0] for r in watcher.requests()] == [keep], what="only the persistent one to stay")
        self.assertEqual(watcher.latency(), 70)
        self.assertKernelAtMost(70)
        watcher.cancel(keep)
        self.assertKernelReleased()

    def test_request_then_immediate_disconnect(self):
        # The caller leaves before pmqosd has even asked the bus who it is.
        watcher = self.client()
        for _ in range(20):
            c = self.bus.connect()
            c.conn.call(BUS_NAME, PATH, QOS_IFACE, "RequestLatency",
                        __import__("gi").repository.GLib.Variant("(sib)", ("cpu_dma", 10, False)),
                        None, 0, -1, None, None, None)
            c.conn.flush_sync(None)
            c.close()
        wait_for(lambda: watcher.requests() == [], what="no request to remain")
        self.assertEqual(watcher.latency(), -1)
        self.assertKernelReleased()


class TestDaemonLifetime(BrokerTestCase):
    def test_sigterm_releases_the_kernel(self):
        c = self.client()
        c.request(25, persistent=True)
        self.assertKernelAtMost(25)
        c.close()
        self.assertEqual(self.daemon.stop(signal.SIGTERM), 0)
        self.assertKernelReleased()
        # tearDown stops it again: harmless.

    def test_sigint_exits_zero(self):
        self.client().request(35, persistent=True)
        self.assertEqual(self.daemon.stop(signal.SIGINT), 0)
        self.assertKernelReleased()

    def test_second_instance_refuses_to_start(self):
        self.start_daemon()
        proc = subprocess.run([PMQOSD, "--device", self.kernel.path], env=self.bus.env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=10)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn(BUS_NAME, proc.stdout)


class TestStartup(BrokerTestCase):
    root_only = False  # runs as any user
    def setUp(self):
        self.kernel = Kernel()
        self.bus = PrivateBus()

    def tearDown(self):
        self.bus.stop()
        self.kernel.cleanup()

    def test_unopenable_device_is_one_clear_line(self):
        missing = os.path.join(tempfile.gettempdir(), "pmqos-no-such-device")
        # Few held requests, so that a host's low hard descriptor limit (20000
        # here; MaxHeldRequests' default needs 33792) adds no warning of its own.
        conf = os.path.join(self.bus.dir, "few-held.conf")
        with open(conf, "w") as f:
            f.write("[pmqosd]\nMaxHeldRequests=100\n")
        proc = subprocess.run([PMQOSD, "--config", conf, "--device", missing], env=self.bus.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=10)
        self.assertNotEqual(proc.returncode, 0)
        lines = proc.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertIn(missing, lines[0])
        self.assertIn("No such file or directory", lines[0])

    def test_version_and_help(self):
        out = subprocess.run([PMQOSD, "--version"], stdout=subprocess.PIPE, text=True, check=True).stdout
        self.assertRegex(out, r"^pmqosd \d+\.\d+")
        out = subprocess.run([PMQOSD, "--help"], stdout=subprocess.PIPE, text=True, check=True).stdout
        for opt in ("--device", "--state-dir", "--verbose", "--version", "--help"):
            self.assertIn(opt, out)
        proc = subprocess.run([PMQOSD, "--bogus"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(proc.returncode, 2)

    def test_bus_going_away_makes_it_exit_nonzero(self):
        d = Daemon(self.bus, self.kernel)
        self.bus.kill()
        d.proc.wait(timeout=10)
        self.assertNotEqual(d.proc.returncode, 0)
        self.assertIn("system bus", d.output())
        d.log.close()
        wait_for(self.kernel.released, what="the device to be released")


if __name__ == "__main__":
    main()
