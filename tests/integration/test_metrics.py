# SPDX-License-Identifier: LGPL-2.1-or-later
"""pmqosctl metrics: the Prometheus text format, checked by Debian's promtool
and served by Debian's prometheus-node-exporter through its textfile
collector (scraped on loopback), with the figures Explain() and Ledger()
give once nothing binds any more; --textfile written atomically (mode
0644, no temporary file left)."""

import os
import re
import shutil
import socket
import stat
import subprocess
import tempfile
import time
import urllib.request

from contract import NATIVE_IFACE
from fixtures import PMQOSCTL, main, wait_for
from test_ledger import PAUSE, LedgerTestCase

PROMTOOL = shutil.which("promtool")
NODE_EXPORTER = shutil.which("prometheus-node-exporter")


def labels(text):
    """A series' labels, in name order (node_exporter sorts them)."""
    pairs = re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', text or "")
    return "{%s}" % ",".join('%s="%s"' % p for p in sorted(pairs)) if pairs else ""


def samples(text):
    """{(name, labels text): value} of an exposition."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            m = re.match(r'^([a-z_]+)(\{.*\})? (\S+)$', line)
            assert m, "not a sample line: %r" % line
            out[(m.group(1), labels(m.group(2)))] = float(m.group(3))
    return out


class TestMetrics(LedgerTestCase):
    maxDiff = None

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix="pmqos-metrics-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.path = os.path.join(self.dir, "pmqos.prom")

    def metrics(self, *args):
        p = subprocess.run([PMQOSCTL, "metrics", *args], env=self.bus.env, capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def bound_then_released(self):
        """A 0 µs request held a while, then cancelled: figures that stay."""
        c = self.client()
        cookie = self.request(c, 0)
        time.sleep(PAUSE / 2)
        c.call("Cancel", "u", cookie, iface=NATIVE_IFACE)
        return c

    def test_textfile_matches_explain_and_ledger(self):
        c = self.bound_then_released()
        os.umask(0o077)  # the file is 0644 whatever the umask
        try:
            self.metrics("--textfile", self.path)
        finally:
            os.umask(0o022)
        self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), 0o644)
        self.assertEqual(os.listdir(self.dir), ["pmqos.prom"])
        with open(self.path) as f:
            text = f.read()
        got = samples(text)
        _, e, _ = self.explain(c)
        rows = self.ledger(c)
        self.assertEqual(got[("pmqos_requests", "")], 0)
        self.assertEqual(got[("pmqos_kernel_latency_seconds", "")], self.kernel.read() / 1e6)
        for cpu in self.cpus:
            label = '{cpu="%d"}' % cpu
            self.assertAlmostEqual(got[("pmqos_cpu_shallow_idle_seconds_total", label)], e[cpu]["shallow_idle"] / 1e6,
                                   places=6)
            self.assertEqual(got[("pmqos_cpu_blocked_entries_total", label)], 0)
            self.assertEqual(got[("pmqos_cpu_bound_verified", label)], 0)  # nothing blocked now
        self.assertEqual(len(rows), 1)
        holder = labels('{kind="request",uid="%d",comm="%s",unit="%s"}' % (rows[0]["uid"], rows[0]["comm"], rows[0]["unit"]))
        self.assertAlmostEqual(got[("pmqos_holder_shallow_idle_seconds_total", holder)],
                               rows[0]["shallow_idle"] / 1e6, places=6)
        if not PROMTOOL:
            self.skipTest("promtool not installed (Debian package prometheus)")
        p = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True)
        self.assertEqual((p.returncode, p.stdout + p.stderr), (0, ""))

    def test_while_bound_verified(self):
        c = self.client()
        self.request(c, 0)
        time.sleep(PAUSE / 4)
        got = samples(self.metrics())
        self.assertEqual(got[("pmqos_requests", "")], 1)
        self.assertEqual(got[("pmqos_kernel_latency_seconds", "")], 0)
        for cpu in self.cpus:
            self.assertEqual(got[("pmqos_cpu_bound_verified", '{cpu="%d"}' % cpu)], 1)

    def test_node_exporter_serves_them(self):
        if not NODE_EXPORTER:
            self.skipTest("prometheus-node-exporter not installed")
        self.bound_then_released()
        self.metrics("--textfile", self.path)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        exporter = subprocess.Popen([NODE_EXPORTER, "--web.listen-address=127.0.0.1:%d" % port,
                                     "--collector.disable-defaults", "--collector.textfile",
                                     "--collector.textfile.directory=" + self.dir],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (exporter.terminate(), exporter.wait(10), exporter.stderr.close()))

        def scrape():
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
                    return r.read().decode()
            except OSError:
                return None
        text = wait_for(scrape, timeout=10, what="node_exporter to answer")
        self.assertIn("node_textfile_scrape_error 0", text)
        served = {k: v for k, v in samples(text).items() if k[0].startswith("pmqos_")}
        with open(self.path) as f:
            self.assertEqual(served, samples(f.read()))
        self.assertTrue(any(k[0] == "pmqos_holder_shallow_idle_seconds_total" and 'kind="request"' in k[1]
                            for k in served))


if __name__ == "__main__":
    main()
