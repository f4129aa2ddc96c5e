#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Custody of the per-CPU idle knobs, on this machine's real sysfs files:
a foreign writer of cpu1's pm_qos_resume_latency_us named in Explain() and
the log (ForeignWrites=report, which changes nothing); cpupower's writes to
every cpuidle/stateK/disable named as disabled_by; restore undoing a foreign
write and giving up on a writer that fights back; adopt turning a write into
a request of the writer that ends when it exits. Each test puts every file
it touches back as it found it."""

import glob
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time

from gi.repository import GLib

from contract import NATIVE_IFACE
from fixtures import PMQOSCTL, TIME_SCALE, BrokerTestCase, main, wait_for
from fake_sysfs import cpu_file
from hostenv import pmqos_user_install, pmqos_user_uninstall

SYSFS = "/sys"
WRITER_COMM = "pmqos-writer"
# A writer with its own comm that writes argv[2] to argv[1] (one write()
# each time it reads a line on stdin), says "ok" each time, and stays alive.
WRITER = r"""
import ctypes, os, sys
ctypes.CDLL(None).prctl(15, sys.argv[3].encode(), 0, 0, 0)
for line in sys.stdin:
    fd = os.open(sys.argv[1], os.O_WRONLY)
    os.write(fd, (line.strip() or sys.argv[2]).encode())
    os.close(fd)
    print("ok", flush=True)
"""


def read(path):
    with open(path) as f:
        return f.read().strip()


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


class Writer:
    """A process named comm writing values to path, one per write()."""

    def __init__(self, path, comm=WRITER_COMM):
        self.proc = subprocess.Popen(["/usr/bin/python3", "-c", WRITER, path, "0", comm], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.pid = self.proc.pid

    def write(self, value):
        self.proc.stdin.write(value + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "ok"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(10)
            self.proc.stdout.close()


def writers(explanation):
    """Explain()'s writers: {cpu: (foreign_writer, [disabled_by of each state])}."""
    return {c["cpu"]: (c["foreign_writer"], [st["disabled_by"] for st in c["cstates"]])
            for c in explanation["cpus"]}


class CustodyTestCase(BrokerTestCase):
    policy = "report"

    def setUp(self):
        if not os.path.exists(cpu_file(SYSFS, 1)):
            self.skipTest("needs cpu1's pm_qos_resume_latency_us")
        super().setUp()
        # Every knob as it is now, put back last (after pmqosd stopped).
        self.saved = {p: read(p) for p in [cpu_file(SYSFS, 1)] +
                      glob.glob("/sys/devices/system/cpu/cpu*/cpuidle/state*/disable")}
        self.addCleanup(self.put_back)
        self.conf_dir = tempfile.mkdtemp(prefix="pmqos-custody-")
        self.addCleanup(shutil.rmtree, self.conf_dir, True)
        conf = os.path.join(self.conf_dir, "pmqosd.conf")
        write(conf, "ForeignWrites=%s\n" % self.policy)
        self.daemon_args = ("--config", conf)
        self.writers = []
        self.addCleanup(lambda: [w.stop() for w in self.writers])

    def put_back(self):
        for path, text in self.saved.items():
            if read(path) != text:
                write(path, text)

    def writer(self, path):
        w = Writer(path)
        self.writers.append(w)
        return w

    def bus_client(self):
        """One connection for the test's calls (the test bus lets uid 0 have 8)."""
        if not hasattr(self, "_client"):
            self._client = self.client()
        return self._client

    def explain(self):
        return self.bus_client().call("Explain", None, iface=NATIVE_IFACE)[0]

    def explain_cpu(self, cpu):
        e = self.explain()
        return next(c for c in e["cpus"] if c["cpu"] == cpu)

    def log_has(self, text):
        return text in self.daemon.output()


class TestReport(CustodyTestCase):
    def test_foreign_writer_named_in_explain_and_log(self):
        _ = self.daemon
        w = self.writer(cpu_file(SYSFS, 1))
        w.write("n/a")
        self.assert_eventually(lambda: self.explain_cpu(1)["foreign_writer"].get("pid") == w.pid,
                               what="cpu1's foreign_writer")
        fw = self.explain_cpu(1)["foreign_writer"]
        self.assertEqual(fw["comm"], WRITER_COMM)
        self.assertEqual(fw["value"], "n/a")
        self.assertIn("unit", fw)
        self.assertLess(abs(fw["when"] / 1e6 - time.time()), 30)
        self.assert_eventually(lambda: self.log_has("Foreign write to cpu1/power/pm_qos_resume_latency_us by pid "
                                                    "%d (%s, unit " % (w.pid, WRITER_COMM)), what="the log line")
        # report changes nothing.
        self.assert_persists(lambda: read(cpu_file(SYSFS, 1)) == "n/a", what="the writer's n/a")
        self.assertEqual(self.explain_cpu(0)["foreign_writer"], {})

    def test_writers_through_libpmqos_and_pmqosctl(self):
        """pmqosctl status --json (libpmqos's pmqos_explanation_custody())
        carries every CPU's foreign_writer and every state's disabled_by as
        Explain() sends them: the named writer of cpu1, {} elsewhere."""
        _ = self.daemon
        w = self.writer(cpu_file(SYSFS, 1))
        w.write("n/a")
        self.assert_eventually(lambda: self.explain_cpu(1)["foreign_writer"].get("pid") == w.pid,
                               what="cpu1's foreign_writer")
        out = subprocess.run([PMQOSCTL, "status", "--json"], env=self.bus.env, capture_output=True, text=True,
                             check=True).stdout
        self.assertEqual(writers(json.loads(out)), writers(self.explain()))
        self.assertEqual(writers(json.loads(out))[1][0]["comm"], WRITER_COMM)
        plain = subprocess.run([PMQOSCTL, "status"], env=self.bus.env, capture_output=True, text=True,
                               check=True).stdout
        self.assertRegex(plain, r'\nWriters:  cpu1 pm_qos_resume_latency_us "n/a" written by pid %d \(%s[,)]'
                         % (w.pid, WRITER_COMM))

    def test_a_flood_is_logged_in_bounds(self):
        """A writer's flood: 20 lines per 10 s, then, at the next line due,
        one saying how many were left out (no timer: measured then)."""
        _ = self.daemon
        w = self.writer(cpu_file(SYSFS, 1))
        for i in range(60):
            w.write(str(100 + i % 2))
            time.sleep(0.005)  # read before the next: one writer's unread writes to a file merge
        self.assert_eventually(lambda: self.explain_cpu(1)["foreign_writer"].get("value") == "101",
                               what="the last write named")
        self.assertEqual(self.daemon.output().count("Foreign write to cpu1/"), 20)
        time.sleep(10.2)
        w.write("n/a")
        self.assert_eventually(lambda: "lines about foreign writes in the last 1" in self.daemon.output(),
                               what="the count of what was left out")
        m = re.search(r"Left out (\d+) lines about foreign writes", self.daemon.output())
        self.assertGreater(int(m.group(1)), 0)
        self.assertEqual(self.daemon.output().count("Foreign write to cpu1/"), 21)

    def test_cpupower_named_as_disabled_by(self):
        cpupower = shutil.which("cpupower")
        if not cpupower:
            self.skipTest("needs cpupower (Debian's linux-cpupower)")
        if not glob.glob("/sys/devices/system/cpu/cpu*/cpuidle/state1/disable"):
            self.skipTest("needs cpuidle state1")
        _ = self.daemon
        # cpupower exits at once; a writer reaped before pmqosd reads its
        # event is named by pid only. The test reaps it once it is named:
        # pmqosd reads an event in microseconds, but this machine is shared
        # (and pmqosd may run under valgrind).
        disabling = subprocess.Popen([cpupower, "idle-set", "-d", "1"], stdout=subprocess.DEVNULL)
        self.addCleanup(subprocess.run, [cpupower, "idle-set", "-e", "1"], capture_output=True)
        cpus = sorted(int(p.split("/")[5][3:]) for p in glob.glob("/sys/devices/system/cpu/cpu*/cpuidle/state1/disable"))

        def named():
            e = self.explain()
            return all(c["cstates"][1]["disabled_by"].get("comm") == "cpupower"
                       for c in e["cpus"] if c["cpu"] in cpus)
        self.assert_eventually(named, what="disabled_by cpupower on state1 of every CPU")
        self.assertEqual(disabling.wait(10), 0)
        e = self.explain()
        for c in e["cpus"]:
            self.assertEqual(c["cstates"][1]["disabled_by"]["value"], "1")
            self.assertTrue(c["cstates"][1]["disabled"])
            self.assertEqual(c["cstates"][0]["disabled_by"], {})  # state0 was not written
        enabling = subprocess.Popen([cpupower, "idle-set", "-e", "1"], stdout=subprocess.DEVNULL)
        self.assert_eventually(lambda: self.explain_cpu(cpus[0])["cstates"][1]["disabled_by"].get("value") == "0",
                               what="the enabling write named")
        self.assertEqual(enabling.wait(10), 0)


class TestRestore(CustodyTestCase):
    policy = "restore"

    def hold_20_on_cpu1(self):
        c = self.bus_client()
        c.call("Request", "sia{sv}", "cpu_dma", 20, {"cpus": GLib.Variant("au", [1])}, iface=NATIVE_IFACE)
        self.assertEqual(read(cpu_file(SYSFS, 1)), "20")
        return c

    def test_restore_undoes_a_foreign_0(self):
        self.hold_20_on_cpu1()
        w = self.writer(cpu_file(SYSFS, 1))
        w.write("0")
        wait_for(lambda: read(cpu_file(SYSFS, 1)) == "20", timeout=1.0 * TIME_SCALE,
                 what="cpu1 restored within a second")
        self.assert_eventually(lambda: self.log_has("Restored cpu1/power/pm_qos_resume_latency_us to 20."),
                               what="the log line")

    def test_restore_undoes_a_disabled_state(self):
        path = "/sys/devices/system/cpu/cpu1/cpuidle/state1/disable"
        if not os.path.exists(path):
            self.skipTest("needs cpu1's cpuidle state1")
        before = read(path)
        _ = self.daemon
        w = self.writer(path)
        w.write("0" if before == "1" else "1")
        wait_for(lambda: read(path) == before, timeout=1.0 * TIME_SCALE, what="state1 restored within a second")
        self.assert_eventually(lambda: self.log_has("Restored cpu1/cpuidle/state1/disable to %s." % before),
                               what="the log line")

    def test_restore_gives_up_on_a_fighter(self):
        self.hold_20_on_cpu1()
        w = self.writer(cpu_file(SYSFS, 1))
        for _ in range(3):
            w.write("0")
            wait_for(lambda: read(cpu_file(SYSFS, 1)) == "20", timeout=1.0 * TIME_SCALE, what="cpu1 restored")
        w.write("0")  # the fourth in 10 s: contested, left alone
        self.assert_eventually(lambda: self.log_has("Contested: cpu1/power/pm_qos_resume_latency_us was written "
                                                    "by other processes more than 3 times in 10 s (last pid %d (%s))"
                                                    % (w.pid, WRITER_COMM)), what="the contest in the log")
        self.assert_persists(lambda: read(cpu_file(SYSFS, 1)) == "0", what="the fighter's value")
        self.assertEqual(self.daemon.output().count("Restored cpu1/power/pm_qos_resume_latency_us"), 3)

    def test_restore_gives_up_on_a_fighter_spawning_a_process_per_write(self):
        """`echo 0 | tee F` in a loop: a new pid each write, contested all
        the same (the contest was keyed by pid: restored forever); the
        Contested line is logged even when the 20 lines of the window are
        used up, once."""
        self.hold_20_on_cpu1()
        # The window's 20 lines used up ("Foreign write" and "Restored" for
        # each of 10 writes), no file written more than 3 times.
        disables = sorted(glob.glob("/sys/devices/system/cpu/cpu*/cpuidle/state*/disable"))
        spent = [p for _ in range(3) for p in disables][:10]
        if len(spent) < 10:
            self.skipTest("needs 4 cpuidle disable files")
        for path in spent:
            before = read(path)
            write(path, "0" if before == "1" else "1")
            wait_for(lambda: read(path) == before, timeout=1.0 * TIME_SCALE, what="%s restored" % path)
        self.assert_eventually(lambda: self.daemon.output().count("Restored ") == 10, what="the 20 lines")
        script = "echo 0 > %s" % cpu_file(SYSFS, 1)
        for _ in range(3):
            subprocess.run(["/bin/sh", "-c", script], check=True)
            wait_for(lambda: read(cpu_file(SYSFS, 1)) == "20", timeout=1.0 * TIME_SCALE, what="cpu1 restored")
        for _ in range(2):
            subprocess.run(["/bin/sh", "-c", script], check=True)
        self.assert_eventually(lambda: self.log_has("Contested: cpu1/power/pm_qos_resume_latency_us"),
                               what="the contest in the log")
        self.assert_persists(lambda: read(cpu_file(SYSFS, 1)) == "0", what="the fighter's value")
        self.assertEqual(self.daemon.output().count("Contested: "), 1)


class TestRestoreAsPmqos(CustodyTestCase):
    """As the shipped unit runs it: --user pmqos, no capability left. The
    resume latency file is restored through the descriptor opened at start;
    a disable file cannot be (cpuidle checks CAP_SYS_ADMIN at each write):
    the write is named, left, and the log says why."""
    policy = "restore"

    @classmethod
    def setUpClass(cls):
        pmqos_user_install()  # skips the class, saying why, where it would write the host

    @classmethod
    def tearDownClass(cls):
        pmqos_user_uninstall()

    def test_restore_without_privilege(self):
        self.daemon_args += ("--user", "pmqos")
        c = self.bus_client()
        c.call("Request", "sia{sv}", "cpu_dma", 20, {"cpus": GLib.Variant("au", [1])}, iface=NATIVE_IFACE)
        self.assertEqual(os.stat("/proc/%d" % self.daemon.proc.pid).st_uid, pwd.getpwnam("pmqos").pw_uid)
        w = self.writer(cpu_file(SYSFS, 1))
        w.write("0")
        wait_for(lambda: read(cpu_file(SYSFS, 1)) == "20", timeout=1.0 * TIME_SCALE, what="cpu1 restored within a second")
        path = "/sys/devices/system/cpu/cpu1/cpuidle/state1/disable"
        if not os.path.exists(path):
            return
        value = "0" if read(path) == "1" else "1"
        self.writer(path).write(value)
        self.assert_eventually(lambda: self.log_has("Cannot restore cpu1/cpuidle/state1/disable to "),
                               what="the refusal in the log")
        self.assertEqual(read(path), value)
        self.assertEqual(self.explain_cpu(1)["cstates"][1]["disabled_by"]["comm"], WRITER_COMM)


class TestAdopt(CustodyTestCase):
    policy = "adopt"

    def skip_unless_adopt_can_bind(self):
        """pmqosd binds the writer's pidfd that came with the event (Linux
        5.15), else one from pidfd_open(2), which valgrind 3.19 lacks (ENOSYS)."""
        release = tuple(int(x) for x in re.findall(r"\d+", os.uname().release)[:2])
        if "valgrind" in os.environ.get("PMQOSD_WRAPPER", "") and release < (5, 15):
            self.skipTest("pmqosd under valgrind, whose 3.19 has no pidfd_open(2) (ENOSYS), on a kernel "
                          "before 5.15 (no pidfd with the event): adopt cannot bind")

    def adopted(self):
        return [r for r in self.bus_client().call("ListRequests", None, iface=NATIVE_IFACE)[0]
                if r["reason"] == "adopted write to cpu1"]

    def test_adopted_write_is_a_process_bound_request(self):
        self.skip_unless_adopt_can_bind()
        original = read(cpu_file(SYSFS, 1))
        _ = self.daemon
        w = self.writer(cpu_file(SYSFS, 1))
        w.write("15")
        self.assert_eventually(lambda: len(self.adopted()) == 1, what="the adopted request")
        r = self.adopted()[0]
        self.assertEqual((r["value"], list(r["cpus"]), r["bound_to"], r["pid"], r["exec"]),
                         (15, [1], "process", w.pid, WRITER_COMM))
        self.assertEqual(r["target"], "pid %d (%s)" % (w.pid, WRITER_COMM))
        self.assertEqual(read(cpu_file(SYSFS, 1)), "15")
        w.write("9")  # its next write updates the same request
        self.assert_eventually(lambda: [x["value"] for x in self.adopted()] == [9], what="the update")
        w.stop()
        self.assert_eventually(lambda: self.adopted() == [], what="the request released at the writer's exit")
        self.assert_eventually(lambda: read(cpu_file(SYSFS, 1)) == original, what="cpu1 given back")

    def test_adopted_write_is_aggregated_with_the_others(self):
        """The file holds the aggregate after each write, the same write
        twice too (its request unchanged: no commit would write), and after
        a "0" of a writer with no request."""
        self.skip_unless_adopt_can_bind()
        c = self.bus_client()
        c.call("Request", "sia{sv}", "cpu_dma", 20, {"cpus": GLib.Variant("au", [1])}, iface=NATIVE_IFACE)
        w = self.writer(cpu_file(SYSFS, 1))
        for _ in range(2):
            w.write("50")
            self.assert_eventually(lambda: [x["value"] for x in self.adopted()] == [50], what="the adopted request")
            self.assert_eventually(lambda: read(cpu_file(SYSFS, 1)) == "20", what="the aggregate written back")
        other = self.writer(cpu_file(SYSFS, 1))
        other.write("0")
        self.assert_eventually(lambda: read(cpu_file(SYSFS, 1)) == "20", what="the aggregate written back over 0")

    def stopped(self):
        """pmqosd stopped (SIGSTOP) until the block ends: what is written meanwhile waits in one batch."""
        test = self

        class Stopped:
            def __enter__(self):
                os.kill(test.daemon.proc.pid, signal.SIGSTOP)

            def __exit__(self, *exc):
                os.kill(test.daemon.proc.pid, signal.SIGCONT)
        return Stopped()

    def test_two_writers_queued_together(self):
        """A writes 50, B 500 before pmqosd reads A's event: the file holds
        500 by then. Both were adopted at 500 (A's 50 µs bound silently
        lost); now A is named with its value unknown, and not adopted."""
        self.skip_unless_adopt_can_bind()
        _ = self.daemon
        a, b = self.writer(cpu_file(SYSFS, 1)), self.writer(cpu_file(SYSFS, 1))
        with self.stopped():
            a.write("50")
            b.write("500")
        self.assert_eventually(lambda: len(self.adopted()) == 1, what="B's request")
        self.assert_persists(lambda: len(self.adopted()) == 1, what="B's request alone")
        r = self.adopted()[0]
        self.assertEqual((r["pid"], r["value"]), (b.pid, 500))
        self.assert_eventually(lambda: self.log_has("by pid %d (%s, unit " % (a.pid, WRITER_COMM)), what="A named")
        self.assertRegex(self.daemon.output(), r"by pid %d \(%s, unit [^)]*\): unknown" % (a.pid, WRITER_COMM))

    def test_a_flood_is_bounded(self):
        """A writer alternating 100/101 for a second: each write was a
        "Changed request" audit line (root's, exempt from the audit
        budget) and its signals, thousands; now at most 3 changes per 10 s,
        one Contested line and the log's 20 lines. Then 50 write-and-exit
        writers queued at once: each was a "Cannot adopt" warning outside
        the log's limit."""
        self.skip_unless_adopt_can_bind()
        _ = self.daemon
        flood = ("import os, time\nfd = os.open(%r, os.O_WRONLY)\nend = time.monotonic() + 1\ni = 0\n"
                 "while time.monotonic() < end:\n    os.pwrite(fd, str(100 + i %% 2).encode(), 0)\n    i += 1\n"
                 "print(i)\ntime.sleep(30)\n" % cpu_file(SYSFS, 1))
        p = subprocess.Popen(["/usr/bin/python3", "-c", flood], stdout=subprocess.PIPE, text=True)
        self.addCleanup(p.wait)
        self.addCleanup(p.kill)
        writes = int(p.stdout.readline())
        self.assertGreater(writes, 100)
        self.assert_eventually(lambda: self.log_has("Contested: cpu1/"), what="the contest")
        last = str(100 + (writes - 1) % 2)
        self.assert_eventually(lambda: self.explain_cpu(1)["foreign_writer"].get("value") == last,
                               what="the flood's last write read")
        out = self.daemon.output()
        self.assertLessEqual(out.count("Changed request"), 3, out[-3000:])
        self.assertEqual(out.count("Contested: "), 1)
        self.assertLessEqual(out.count("Foreign write to cpu1/"), 20)
        p.kill()
        p.wait(10)
        self.assert_eventually(lambda: self.adopted() == [], what="the flood's request ended at its exit")
        script = "echo 30 > %s" % cpu_file(SYSFS, 1)
        with self.stopped():
            for _ in range(50):
                subprocess.run(["/bin/sh", "-c", script], check=True)
        self.assert_eventually(lambda: self.explain_cpu(1)["foreign_writer"].get("value") == "30",
                               what="the last writer named")
        self.assertLessEqual(self.daemon.output().count("Cannot adopt"), 1)
        self.assertLessEqual(self.daemon.output().count("Foreign write to cpu1/"), 20)


if __name__ == "__main__":
    main()