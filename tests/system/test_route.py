# SPDX-License-Identifier: LGPL-2.1-or-later
"""pmqosctl route UNIT under the real systemd, with the installed
pmqos-standin.service: a service that opens /dev/cpu_dma_latency itself and
writes 57 gets the stand-in at its next start (systemd reloaded by route:
the drop-in is among its DropInPaths), the kernel holds its value, and its
request is listed bound to its process, named after it (pid, command
line, and its comm and unit in the reason), not the stand-in server;
stopping it ends the request and the stand-in service (StopWhenUnneeded);
unroute removes the drop-in and reloads. Two routed units at once: each
its own request; the stand-in stays while one is left. A restart of pmqosd
keeps the routed request (same cookie, process and name, the kernel at its
value) and the service's stop still ends it."""

import os
import re
import unittest

from container import SystemTestCase, kernel, wait_for

UNIT = "pmqos-route-test.service"
OTHER = "pmqos-route-other.service"
DROP_IN = "/etc/systemd/system/%s.d/50-pmqos-route.conf" % UNIT
SERVICE = ("[Service]\nExecStart=/usr/bin/python3 -c \"import os, struct, time; "
           "fd = os.open('/dev/cpu_dma_latency', os.O_WRONLY); os.write(fd, struct.pack('i', %d)); "
           "time.sleep(100000)\"\n")


class TestRoute(SystemTestCase):
    def setUp(self):
        super().setUp()
        for unit, value in ((UNIT, 57), (OTHER, 58)):
            self.c.sh("cat > /run/systemd/system/%s <<'PMQOS_EOF'\n%sPMQOS_EOF\n" % (unit, SERVICE % value), check=True)
        self.c.sh("systemctl daemon-reload", check=True)

    def tearDown(self):
        self.c.sh("systemctl stop %s %s pmqos-standin; rm -rf /run/systemd/system/pmqos-route-* "
                  "/etc/systemd/system/pmqos-route-*.d; systemctl daemon-reload" % (UNIT, OTHER))
        super().tearDown()

    def start_units(self, *units):
        """systemctl start, and on a failure the stand-in service's journal in the message."""
        r = self.c.sh("systemctl start %s" % " ".join(units))
        if r.returncode != 0:
            log = self.c.sh("systemctl status pmqos-standin --no-pager; journalctl -b --no-pager -n 40 "
                            "-u pmqos-standin").stdout
            self.fail("systemctl start %s: %s%s\n%s" % (" ".join(units), r.stdout, r.stderr, log))

    def drop_ins(self, unit=UNIT):
        return self.c.sh("systemctl show -P DropInPaths %s" % unit, check=True).stdout.split()

    def listed_pid(self, cookie):
        """The PID column of pmqosctl list for cookie (None: not listed)."""
        for line in self.c.sh("pmqosctl list --full --no-legend", check=True).stdout.splitlines():
            cells = line.split()
            if cells and cells[0] == str(cookie):
                return int(re.search(r" (\d+) +\d\d:\d\d", line).group(1))
        return None

    def test_pmqosd_restart_keeps_the_routed_request(self):
        self.start()
        self.c.sh("pmqosctl route %s" % UNIT, check=True)
        self.start_units(UNIT)
        pid = int(self.c.sh("systemctl show -P MainPID %s" % UNIT).stdout.strip() or 0)
        wait_for(lambda: kernel() == 57, what="the routed service's value at the kernel")

        def mine():
            return [(r["cookie"], r["value"], r["pid"], r["exec"], r["bound_to"], r["target"])
                    for r in self.requests() if r["pid"] == pid]
        before = mine()
        self.assertEqual(len(before), 1, self.requests())
        old = self.main_pid()
        self.c.sh("systemctl restart pmqosd", check=True)
        self.assertNotEqual(self.main_pid(), old)
        # The same request, re-bound to the same process, named after it; the kernel kept its value.
        self.assertEqual(mine(), before, self.journal())
        self.assertEqual(kernel(), 57)
        self.assertEqual(self.listed_pid(before[0][0]), pid)
        self.assertEqual(self.c.sh("systemctl is-active pmqos-standin").stdout.strip(), "active")
        # Its end still comes with the service's.
        self.c.sh("systemctl stop %s" % UNIT, check=True)
        wait_for(lambda: kernel() == self.baseline, what="the bound to go with the service after the restart")
        self.assertEqual(mine(), [])

    def test_two_routed_units(self):
        self.start()
        self.c.sh("pmqosctl route %s && pmqosctl route %s" % (UNIT, OTHER), check=True)
        self.start_units(UNIT, OTHER)
        pids = {u: int(self.c.sh("systemctl show -P MainPID %s" % u).stdout.strip() or 0) for u in (UNIT, OTHER)}

        def reasons():
            return sorted(r["reason"] for r in self.requests() if r["bound_to"] == "process")
        wait_for(lambda: len(reasons()) == 2, what="both services' requests")
        self.assertEqual(reasons(), sorted("stand-in /dev/cpu_dma_latency of python3 (pid %d, %s)" % (p, u)
                                           for u, p in pids.items()))
        self.assertEqual(kernel(), 57)  # the stricter
        self.c.sh("systemctl stop %s" % UNIT, check=True)
        wait_for(lambda: kernel() == 58, what="the other service's bound alone")
        self.assertEqual(self.c.sh("systemctl is-active pmqos-standin").stdout.strip(), "active")
        self.c.sh("systemctl stop %s" % OTHER, check=True)
        wait_for(lambda: kernel() == self.baseline, what="both bounds gone")

    def test_route_start_list_stop_unroute(self):
        self.start()
        self.assertEqual(self.drop_ins(), [])
        self.c.sh("pmqosctl route %s" % UNIT, check=True)
        self.assertEqual(self.drop_ins(), [DROP_IN])  # reloaded by route itself
        self.start_units(UNIT)  # pulls in pmqos-standin.service
        self.assertEqual(self.c.sh("systemctl is-active pmqos-standin").stdout.strip(), "active")
        pid = int(self.c.sh("systemctl show -P MainPID %s" % UNIT).stdout.strip() or 0)
        self.assertNotEqual(pid, 0)
        wait_for(lambda: kernel() == 57, what="the routed service's value at the kernel")
        mine = [r for r in self.requests() if r["target"].startswith("pid %d " % pid)]
        self.assertEqual(len(mine), 1, self.requests())
        r = mine[0]
        self.assertEqual((r["value"], r["bound_to"], r["reason"]),
                         (57, "process", "stand-in /dev/cpu_dma_latency of python3 (pid %d, %s)" % (pid, UNIT)))
        # Named after the opener, not the stand-in server: pid and command
        # line (pmqosctl list's PID and COMMAND), LIFETIME and REASON.
        self.assertEqual(r["pid"], pid)
        self.assertTrue(r["exec"].startswith("/usr/bin/python3 -c "), r["exec"])
        self.assertEqual(self.listed_pid(r["cookie"]), pid)
        listing = self.c.sh("pmqosctl list", check=True).stdout
        self.assertIn("pid %d (/usr/bin/python3" % pid, listing)
        self.assertIn("(pid %d, %s)" % (pid, UNIT), self.c.sh("pmqosctl list --json", check=True).stdout)
        explain = self.c.sh("pmqosctl status --json", check=True).stdout
        self.assertRegex(explain, r"\"bound_by\": ?\"request\"")
        self.c.sh("systemctl stop %s" % UNIT, check=True)
        wait_for(lambda: kernel() == self.baseline, what="the bound to go with the service")
        wait_for(lambda: self.c.sh("systemctl is-active pmqos-standin").stdout.strip() == "inactive",
                 what="the stand-in to stop with the last routed unit")
        self.c.sh("pmqosctl unroute %s" % UNIT, check=True)
        self.assertEqual(self.drop_ins(), [])
        self.assertFalse(self.c.sh("test -e %s" % os.path.dirname(DROP_IN)).returncode == 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
