# SPDX-License-Identifier: LGPL-2.1-or-later
"""pmqosctl run for real workloads (issue 43): --cpus LIST (the stand-in's
requests bind those CPUs only), --clamp USEC (cyclictest and DPDK write 0 µs
whatever they need: a stricter write is raised to USEC), and --serve
serving cpu_wakeup_latency only where the kernel has the device."""

import errno
import os
import subprocess

from fixtures import PMQOSCTL, main
from test_standin import Probe, StandinCase


class TestCpus(StandinCase):
    def test_requests_bind_the_cpus_given(self):
        if not os.path.exists("/sys/devices/system/cpu/cpu1"):
            self.skipTest("needs a cpu1")
        p = Probe(self, run_args=("--cpus", "1"))
        p.ok("open 0")
        p.ok("bin 0 44")
        [req] = self.requests()
        self.assertEqual((req["value"], list(req["cpus"]), req["bound_to"]), (44, [1], "process"))
        self.assertTrue(self.kernel.released(), "a machine-wide bound")  # cpu1 only
        good, err = p.step("wopen 1")  # no per-CPU form: not served under --cpus
        self.assertEqual((good, err), (False, errno.ENOENT))
        self.assertEqual(p.close(), 0)
        self.wait_values([], "the request ended with the probe")

    def test_usage(self):
        for args in (("--cpus", "3-1"), ("--clamp", "-5"), ("--clamp", "no-such-state")):
            proc = self.run_ctl("run", *args, "--", "true")
            self.assertEqual(proc.returncode, 2, (args, proc.stderr))


class TestClamp(StandinCase):
    def test_stricter_writes_raised(self):
        p = Probe(self, run_args=("--clamp", "30"))
        p.ok("open 0")
        p.ok("bin 0 0")  # as cyclictest -m and DPDK do
        self.wait_values([30], "0 µs raised to 30")
        self.assertEqual(self.kernel.read() if self.kernel.real else 30, 30)
        p.ok("bin 0 50")  # less strict: as written
        self.wait_values([50], "50 µs as written")
        p.ok("text 0 10")  # hex text: 16 µs, raised too
        self.wait_values([30], "16 µs raised to 30")
        self.assertEqual(p.close(), 0)


class TestServe(StandinCase):
    def test_wakeup_served_only_where_the_kernel_has_it(self):
        has_wakeup = os.path.exists("/dev/cpu_wakeup_latency")
        d = "/run/pmqos-serve-wakeup-%d" % os.getpid()
        server = subprocess.Popen([PMQOSCTL, "run", "--serve", d], env=self.bus.env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: os.path.isdir(d) and os.rmdir(d))
        self.addCleanup(lambda: server.poll() is None and (server.kill(), server.wait()))

        def mounted():
            with open("/proc/self/mounts") as f:
                return " %s fuse" % d in f.read()
        self.assert_eventually(mounted, what="the stand-in mounted on %s" % d)
        expected = ["cpu_dma_latency", "cpu_wakeup_latency"] if has_wakeup else ["cpu_dma_latency"]
        self.assertEqual(sorted(os.listdir(d)), expected)
        self.assertEqual(os.path.exists(os.path.join(d, "cpu_wakeup_latency")), has_wakeup)
        server.terminate()
        self.assertEqual(server.wait(30), 0, server.stderr.read())
        server.stderr.close()


if __name__ == "__main__":
    main()
