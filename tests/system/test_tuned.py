# SPDX-License-Identifier: LGPL-2.1-or-later
"""Debian's real TuneD (2.20, in the bookworm tree) under the real systemd,
as pmqosctl(1) and migrating-from-tuned.md tell an administrator to run it.

Routed (pmqosctl route tuned.service), TuneD's latency-performance profile
holds the kernel at what its force_latency (cstate.id_no_zero:1|3) resolves
to on this machine's C-state table, as a request pmqosd lists bound to
TuneD's process; Explain() says a request binds the kernel, not an external
holder. A switch to a profile without a [cpu] plugin (optimize-serial-
console) ends it, back to latency-performance brings it back, tuned-adm off
and systemctl stop tuned end it; a restart of pmqosd keeps it; unroute
removes the drop-in. Under ForeignWrites=adopt, a profile's per-CPU
pm_qos_resume_latency_us becomes TuneD's request on that CPU, ended when
TuneD puts the file back at its stop.

The container shares the host's kernel and nspawn leaves /sys and /proc/sys
writable (SYSTEMD_NSPAWN_API_VFS_WRITABLE, for pmqosd's per-CPU files): a
drop-in makes both read-only for tuned.service, except the per-CPU resume
latency files, so that latency-performance's sysctls (vm.dirty_ratio,
vm.dirty_background_ratio, vm.swappiness), optimize-serial-console's
kernel.printk, TuneD's reapply of sysctl.d and its governor/min_perf_pct
writes fail in the container instead of changing the host (cpufreq and
intel_pstate are absent here anyway; x86_energy_perf_policy is not
installed and /dev/cpu/*/msr is not in the container). Each test checks the
host's values of those sysctls and puts the per-CPU files back."""

import json
import os
import unittest

from container import BUS, NATIVE, PATH, SystemTestCase, kernel, wait_for

UNIT = "tuned.service"
ROUTE_DROP_IN = "/etc/systemd/system/%s.d/50-pmqos-route.conf" % UNIT
GUARD_DROP_IN = "/run/systemd/system/%s.d/10-pmqos-test-host.conf" % UNIT
CPU = "/sys/devices/system/cpu"
# latency-performance's force_latency in TuneD 2.20 (/usr/lib/tuned/latency-performance/tuned.conf).
FORCE_LATENCY = "cstate.id_no_zero:1|3"
# What latency-performance and optimize-serial-console set: the host's stay as they were.
HOST_SYSCTLS = ("vm/dirty_ratio", "vm/dirty_background_ratio", "vm/swappiness", "kernel/printk")
TUNED_CMDLINE = "/usr/bin/python3 -Es /usr/sbin/tuned -l -P"  # tuned.service's ExecStart=, through its #!
RESUME_US = 75
RESUME_PROFILE = ("[main]\nsummary=pmqos test: a per-CPU resume latency on cpu%d\n\n"
                  "[cpu]\ndevices=cpu%d\npm_qos_resume_latency_us=%d\n")


def cpus():
    return sorted(int(n[3:]) for n in os.listdir(CPU) if n.startswith("cpu") and n[3:].isdigit())


def resume_file(cpu):
    return "%s/cpu%d/power/pm_qos_resume_latency_us" % (CPU, cpu)


def read(path):
    with open(path) as f:
        return f.read().strip()


def tuned_latency(spec, cpuidle=CPU + "/cpu0/cpuidle"):
    """What TuneD 2.20's force_latency SPEC resolves to here, as its [cpu]
    plugin does (plugin_cpu.py, _parse_latency): the first alternative that
    gives a number; cstate.id:N is cpu0's stateN's exit latency,
    cstate.name:X that of cpu0's state named X, _no_zero skips a 0."""
    names = {}
    for d in os.listdir(cpuidle):
        if d.startswith("state"):
            names[read(os.path.join(cpuidle, d, "name"))] = d
    for alt in spec.split("|"):
        value = None
        if alt.lstrip("-").isdigit():
            return int(alt)
        kind, _, arg = alt.partition(":")
        state = {"cstate.id": "state" + arg, "cstate.id_no_zero": "state" + arg,
                 "cstate.name": names.get(arg), "cstate.name_no_zero": names.get(arg)}.get(kind)
        if state and os.path.exists(os.path.join(cpuidle, state, "latency")):
            value = int(read(os.path.join(cpuidle, state, "latency")))
            if kind.endswith("_no_zero") and value == 0:
                value = None
        if value is not None:
            return value
    return None


class TunedTestCase(SystemTestCase):
    def setUp(self):
        super().setUp()
        if self.c.sh("test -x /usr/sbin/tuned").returncode != 0:
            self.fail("no TuneD in the container's tree (tests/system/make-tree bookworm installs it)")
        self.host_sysctls = {k: read("/proc/sys/" + k) for k in HOST_SYSCTLS}
        self.resume = {c: read(resume_file(c)) for c in cpus()}
        writable = " ".join(resume_file(c) for c in cpus())
        self.c.sh("mkdir -p %s && cat > %s <<'PMQOS_EOF'\n[Service]\nReadOnlyPaths=/proc/sys /sys\n"
                  "ReadWritePaths=%s\nPMQOS_EOF\nsystemctl daemon-reload"
                  % (os.path.dirname(GUARD_DROP_IN), GUARD_DROP_IN, writable), check=True)

    def tearDown(self):
        self.c.sh("systemctl stop %s pmqos-standin; systemctl reset-failed %s; pmqosctl unroute %s; "
                  "rm -rf %s /etc/tuned/pmqos-test-*; printf '\\n' > /etc/tuned/active_profile; "
                  "systemctl daemon-reload" % (UNIT, UNIT, UNIT, os.path.dirname(GUARD_DROP_IN)))
        try:
            super().tearDown()  # pmqosd stopped: it gave back what it held
        finally:
            changed = self.put_back()
        self.assertEqual(changed, [], "not as the test found them (now put back)")

    def put_back(self):
        """The per-CPU files and the host's sysctls as setUp found them: what differed."""
        changed = []
        for path, text in ([(resume_file(c), t) for c, t in self.resume.items()]
                           + [("/proc/sys/" + k, t) for k, t in self.host_sysctls.items()]):
            if read(path) != text:
                changed.append("%s was %s" % (path, read(path)))
                with open(path, "w") as f:
                    f.write(text)
        return changed

    def start_tuned(self, profile):
        """tuned.service started with PROFILE (its first start would pick a
        recommended profile itself)."""
        self.c.sh("printf '%s\\n' > /etc/tuned/active_profile && printf 'manual\\n' > /etc/tuned/profile_mode"
                  % profile, check=True)
        r = self.c.sh("systemctl start %s" % UNIT, timeout=120)
        if r.returncode != 0:
            self.fail("systemctl start %s: %s%s\n%s" % (UNIT, r.stdout, r.stderr, self.tuned_log()))
        pid = int(self.c.sh("systemctl show -P MainPID %s" % UNIT).stdout.strip() or 0)
        self.assertNotEqual(pid, 0)
        self.assertEqual(self.c.sh("cat /proc/%d/comm" % pid).stdout.strip(), "tuned")
        return pid

    def tuned_log(self):
        return self.c.sh("systemctl status pmqos-standin --no-pager; journalctl -b --no-pager -n 30 -u %s; "
                         "tail -n 30 /var/log/tuned/tuned.log" % UNIT).stdout

    def tuned_adm(self, *args):
        r = self.c.sh("tuned-adm %s" % " ".join(args), timeout=120)
        self.assertEqual(r.returncode, 0, "tuned-adm %s: %s%s\n%s" % (" ".join(args), r.stdout, r.stderr,
                                                                      self.tuned_log()))

    def of(self, pid):
        return [r for r in self.requests() if r["target"].startswith("pid %d " % pid)]

    def explain(self):
        r = self.c.sh("busctl --system --json=short call %s %s %s Explain" % (BUS, PATH, NATIVE), check=True)

        def plain(v):  # busctl's {"type": …, "data": …} variants, unwrapped
            if isinstance(v, dict) and set(v) == {"type", "data"}:
                return plain(v["data"])
            if isinstance(v, dict):
                return {k: plain(x) for k, x in v.items()}
            return [plain(x) for x in v] if isinstance(v, list) else v
        return plain(json.loads(r.stdout)["data"][0])

    def drop_ins(self):
        return self.c.sh("systemctl show -P DropInPaths %s" % UNIT, check=True).stdout.split()


class TestTunedRouted(TunedTestCase):
    def test_latency_performance_through_route(self):
        want = tuned_latency(FORCE_LATENCY)
        self.assertIsNotNone(want, "%s resolves to nothing here" % FORCE_LATENCY)
        self.assertLess(want, self.baseline, "the device is held at %d µs already" % self.baseline)
        server = self.start()
        self.c.sh("pmqosctl route %s" % UNIT, check=True)
        self.assertIn(ROUTE_DROP_IN, self.drop_ins())
        pid = self.start_tuned("latency-performance")
        wait_for(lambda: kernel() == want, what="TuneD's %d µs at the kernel" % want)
        mine = self.of(pid)
        self.assertEqual(len(mine), 1, self.requests())
        r = mine[0]
        self.assertEqual((r["value"], r["bound_to"], r["reason"]),
                         (want, "process", "stand-in /dev/cpu_dma_latency of tuned (pid %d, %s)" % (pid, UNIT)))
        self.assertEqual(r["target"], "pid %d (%s)" % (pid, TUNED_CMDLINE))
        # Named after TuneD, the process that opened the device, not the
        # stand-in's server (pmqosd names a RequestFor(pidfd) after its process).
        self.assertEqual((r["pid"], r["exec"]), (pid, TUNED_CMDLINE), r)
        self.assertNotEqual(server, r["pid"])
        listing = self.c.sh("pmqosctl list", check=True).stdout
        self.assertIn("pid %d (/usr/bin/python3" % pid, listing)
        self.assertIn("of tuned (pid %d, %s)" % (pid, UNIT), self.c.sh("pmqosctl list --json", check=True).stdout)
        e = self.explain()
        self.assertEqual((e["effective"], e["bound_by"]), (want, "request"))
        self.assertNotIn(pid, [h["pid"] for h in e["external_holders"]])
        self.assertRegex(self.c.sh("pmqosctl status --json", check=True).stdout, r"\"bound_by\": ?\"request\"")

        # pmqosd's restart keeps TuneD's request (the same cookie), and the bound.
        self.c.sh("systemctl restart pmqosd", check=True)
        self.assertEqual([(x["cookie"], x["value"]) for x in self.of(pid)], [(r["cookie"], want)])
        self.assertEqual(kernel(), want)

        # A profile without a [cpu] plugin: TuneD closes the device.
        self.tuned_adm("profile", "optimize-serial-console")
        wait_for(lambda: kernel() == self.baseline, what="the bound to end with the profile")
        self.assertEqual(self.of(pid), [])
        self.assertEqual(self.c.sh("systemctl show -P MainPID %s" % UNIT).stdout.strip(), str(pid))
        self.tuned_adm("profile", "latency-performance")
        wait_for(lambda: kernel() == want, what="latency-performance's bound again")
        self.assertEqual([(x["value"], x["bound_to"]) for x in self.of(pid)], [(want, "process")])
        self.tuned_adm("off")
        wait_for(lambda: kernel() == self.baseline, what="the bound to end with tuned-adm off")
        self.assertEqual(self.of(pid), [])
        self.tuned_adm("profile", "latency-performance")
        wait_for(lambda: kernel() == want, what="latency-performance's bound once more")

        self.c.sh("systemctl stop %s" % UNIT, check=True)
        wait_for(lambda: kernel() == self.baseline, what="the bound to end with TuneD")
        self.assertEqual(self.of(pid), [])
        wait_for(lambda: self.c.sh("systemctl is-active pmqos-standin").stdout.strip() == "inactive",
                 what="the stand-in to stop with TuneD")
        self.c.sh("pmqosctl unroute %s" % UNIT, check=True)
        self.assertNotIn(ROUTE_DROP_IN, self.drop_ins())
        self.assertNotEqual(self.c.sh("test -e %s" % ROUTE_DROP_IN).returncode, 0)


class TestTunedPerCpu(TunedTestCase):
    def test_resume_latency_adopted(self):
        cpu = cpus()[-1]
        self.c.sh("printf '[pmqosd]\\nForeignWrites=adopt\\n' > /etc/pmqos/pmqosd.conf && "
                  "mkdir -p /etc/tuned/pmqos-test-resume && cat > /etc/tuned/pmqos-test-resume/tuned.conf "
                  "<<'PMQOS_EOF'\n%sPMQOS_EOF" % (RESUME_PROFILE % (cpu, cpu, RESUME_US)), check=True)
        self.start()
        pid = self.start_tuned("pmqos-test-resume")
        reason = "adopted write to cpu%d" % cpu

        def adopted():
            return [r for r in self.requests() if r["reason"] == reason]
        try:
            wait_for(adopted, what="TuneD's write adopted")
        except AssertionError as e:
            self.fail("%s: cpu%d holds %s; %s\n%s\n%s" % (e, cpu, read(resume_file(cpu)), self.requests(),
                                                        self.journal(), self.tuned_log()))
        r = adopted()[0]
        self.assertEqual((len(adopted()), r["value"], list(r["cpus"]), r["bound_to"], r["pid"], r["exec"],
                          r["target"]), (1, RESUME_US, [cpu], "process", pid, "tuned", "pid %d (tuned)" % pid))
        self.assertEqual(read(resume_file(cpu)), str(RESUME_US))
        self.assertIn(reason, self.c.sh("pmqosctl list", check=True).stdout)
        # At its stop TuneD writes back what it found: that ends its request, pmqosd gives the file back.
        self.c.sh("systemctl stop %s" % UNIT, check=True)
        wait_for(lambda: adopted() == [], what="TuneD's request to end")
        wait_for(lambda: read(resume_file(cpu)) == self.resume[cpu], what="cpu%d given back" % cpu)


if __name__ == "__main__":
    unittest.main(verbosity=2)
