# SPDX-License-Identifier: LGPL-2.1-or-later
"""Soak: 200 client processes for 60 s (PMQOS_STRESS_SECONDS) making,
updating and cancelling requests at random and dying at random, checked
against a model at every quiet point (tests/stress/pmqos-stress.c). Reports
operations, errors (must be 0) and pmqosd's RSS before and after."""

import os
import subprocess
import sys

from fixtures import BrokerTestCase, main, pmqosd_has_asan, rss_kib, wait_for

STRESS = os.environ.get("PMQOS_STRESS", os.path.join(os.path.dirname(os.environ.get("PMQOSD", "")), "..", "tests",
                                                      "stress", "pmqos-stress"))
SECONDS = os.environ.get("PMQOS_STRESS_SECONDS", "60")
WORKERS = os.environ.get("PMQOS_STRESS_WORKERS", "200")


class TestStress(BrokerTestCase):
    def test_soak(self):
        w = self.client()
        w.cancel(w.request(1))  # warm up the daemon's own structures
        before = rss_kib(self.daemon.proc.pid)
        r = subprocess.run([STRESS, "--workers", WORKERS, "--seconds", SECONDS, "--device", self.kernel.path],
                           env=self.bus.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=int(SECONDS) + 240)
        sys.stderr.write(r.stderr[-4000:])
        wait_for(lambda: w.requests() == [], timeout=10, what="every request to end")
        after = rss_kib(self.daemon.proc.pid)
        sys.stderr.write("\n%s; pmqosd RSS %d KiB before, %d KiB after\n" % (r.stdout.strip(), before, after))
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("errors 0,", r.stdout)
        self.assertIn("mismatches 0,", r.stdout)
        # ASan keeps freed memory in quarantine: RSS says nothing about leaks there
        # (LeakSanitizer checks those at exit instead).
        if not pmqosd_has_asan():
            self.assertLess(after - before, 4096, "pmqosd grew by %d KiB" % (after - before))
        self.assertEqual(w.latency(), -1)
        self.assertKernelReleased()


if __name__ == "__main__":
    main()
