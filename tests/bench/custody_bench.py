# SPDX-License-Identifier: LGPL-2.1-or-later
"""Bench rows for the custody of the per-CPU idle knobs (the fanotify watch):
what one foreign write costs pmqosd, in system calls (strace -c on pmqosd,
divided by the events it decoded: one readlink() each), on a fake sysfs of
2 CPUs and of 512 CPUs × 6 states — the same, since an event is decoded
from its own descriptor, never by a scan; and pmqosd's context switches
while idle with the watch in place. Targets: per-event cost on 512 CPUs at
most TARGET times that on 2, and 0 context switches idle.

Usage: custody_bench.py [--quick] (--quick: fewer writes, 1 s idle)."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from fixtures import Daemon, Kernel, PrivateBus, skip_notice, wait_for  # noqa: E402
from fake_sysfs import cpu_file, make_fake_sysfs  # noqa: E402
from large_sysfs import make_large_sysfs  # noqa: E402

TARGET = 1.5


def switches(pid):
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
            for line in f:
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    total += int(line.split()[1])
    return total


def per_event(pid, path, n):
    """Syscalls of pmqosd per decoded event over n foreign writes to path."""
    out = tempfile.mktemp(prefix="pmqos-strace-")
    strace = subprocess.Popen(["strace", "-f", "-c", "-o", out, "-p", str(pid)], stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # attached
    for i in range(n):
        with open(path, "w") as f:
            f.write(str(10 + i % 2))
        time.sleep(0.002)  # read before the next: fanotify would merge two writes of one writer
    time.sleep(0.3)
    strace.terminate()
    strace.wait()
    with open(out) as f:
        text = f.read()
    os.unlink(out)
    total = int(re.search(r"^-+ -+ .*\n\s*100\.00\s+\S+\s+\S+\s+(\d+)", text, re.M).group(1))
    events = int(re.search(r"^\s*\S+\s+\S+\s+\S+\s+(\d+)\s+(?:\d+\s+)?readlink$", text, re.M).group(1))
    return total / events, events


def measure(bus, kernel, sysfs, n, idle_secs):
    daemon = Daemon(bus, kernel, ("--sysfs-root", sysfs))
    try:
        pid = daemon.proc.pid
        wait_for(lambda: "Watching the per-CPU idle knobs" in daemon.output(), what="the watch")
        time.sleep(0.5)
        before = switches(pid)
        time.sleep(idle_secs)
        idle = switches(pid) - before
        cost, events = per_event(pid, cpu_file(sysfs, 1), n)
        return cost, events, idle
    finally:
        daemon.stop()


def main():
    quick = "--quick" in sys.argv
    if os.geteuid() != 0:
        skip_notice("the custody bench rows", "needs root: fanotify needs CAP_SYS_ADMIN")
        return 77
    if not shutil.which("strace"):
        skip_notice("the custody bench rows", "needs strace")
        return 77
    n, idle_secs = (50, 1) if quick else (500, 10)
    small, large = make_fake_sysfs({0: "0", 1: "0"}), make_large_sysfs()
    kernel, bus = Kernel(), PrivateBus()
    try:
        s_cost, s_events, s_idle = measure(bus, kernel, small, n, idle_secs)
        l_cost, l_events, l_idle = measure(bus, kernel, large, n, idle_secs)
    finally:
        bus.stop()
        kernel.cleanup()
        shutil.rmtree(small, True)
        shutil.rmtree(large, True)
    ratio = l_cost / s_cost
    print("custody foreign write: %.1f system calls per event on 512 CPUs x 6 states (%d events) against %.1f on 2 "
          "CPUs (%d events) = %.2f x (target <= %.1f x)%s"
          % (l_cost, l_events, s_cost, s_events, ratio, TARGET, ", --quick: not held" if quick else ""))
    print("custody idle: %d and %d context switches of pmqosd in %d s with the watch on 2 and 512 CPUs (target 0)"
          % (s_idle, l_idle, idle_secs))
    return 0 if quick or (ratio <= TARGET and s_idle == 0 and l_idle == 0) else 1


if __name__ == "__main__":
    sys.exit(main())
