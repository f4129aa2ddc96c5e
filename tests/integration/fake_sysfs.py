# SPDX-License-Identifier: LGPL-2.1-or-later
"""Fake sysfs trees for the per-CPU tests: a CPU's pm_qos_resume_latency_us
under a root (the real /sys or a fake), and C-state tables."""
import os
import tempfile


def cpu_file(root, cpu):
    """A CPU's pm_qos_resume_latency_us under a sysfs root (the real /sys or a fake)."""
    return os.path.join(root, "devices/system/cpu/cpu%d/power/pm_qos_resume_latency_us" % cpu)


def read_cpu(root, cpu):
    with open(cpu_file(root, cpu)) as f:
        return f.read().strip()


def make_fake_sysfs(originals, offline=()):
    """A fake sysfs tree with these CPUs' resume latencies ({cpu: "value"}), the
    offline ones said so; the caller removes it."""
    root = tempfile.mkdtemp(prefix="pmqos-sysfs-")
    for cpu, value in originals.items():
        os.makedirs(os.path.dirname(cpu_file(root, cpu)))
        with open(cpu_file(root, cpu), "w") as f:
            f.write(value + "\n")
        if cpu > 0:
            with open(os.path.join(root, "devices/system/cpu/cpu%d/online" % cpu), "w") as f:
                f.write("0\n" if cpu in offline else "1\n")
    return root


# A machine for C-state names where a latency is taken (pmqosd.conf(5),
# pmqosd(8)): cpu0 and cpu1 of one model, cpu2 of another whose C1E is
# slower (a name stands for the largest exit latency on an online CPU), cpu3
# offline with a slower one still, which does not count.
CSTATE_TABLES = {
    0: [("POLL", 0), ("C1", 2), ("C1E", 10), ("C6", 133)],
    1: [("POLL", 0), ("C1", 2), ("C1E", 10), ("C6", 133)],
    2: [("POLL", 0), ("C1", 1), ("C1E", 25)],
    3: [("C1E", 400)],
}
CSTATE_LATENCY = {"POLL": 0, "C1": 2, "C1E": 25, "C6": 133}
CSTATE_NAMES = "POLL, C1, C1E, C6"  # as an error lists them


def make_cstate_sysfs():
    """A fake sysfs tree of CSTATE_TABLES; the caller removes it."""
    root = make_fake_sysfs({cpu: "0" for cpu in CSTATE_TABLES}, offline=(3,))
    for cpu, states in CSTATE_TABLES.items():
        for k, (name, latency) in enumerate(states):
            d = os.path.join(root, "devices/system/cpu/cpu%d/cpuidle/state%d" % (cpu, k))
            os.makedirs(d)
            for f, v in (("name", name), ("latency", latency)):
                with open(os.path.join(d, f), "w") as fh:
                    fh.write("%s\n" % v)
    return root
