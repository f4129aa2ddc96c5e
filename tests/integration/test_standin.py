# SPDX-License-Identifier: LGPL-2.1-or-later
"""pmqosctl run: unmodified programs (cyclictest, and a probe that does what
programs do with the device) through the stand-in /dev/cpu_dma_latency and
/dev/cpu_wakeup_latency, against the live broker and the device (a file
under PMQOS_TEST_STANDIN=1: the command only ever opens the stand-in)."""

import glob
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

from contract import LATENCY_MAX, NATIVE_IFACE
from held_util import cgroup_root
from fixtures import NOBODY, PMQOSCTL, TIME_SCALE, BrokerTestCase, main, skip_notice, wait_for

PROBE = os.environ.get("PMQOS_STANDIN_PROBE", "pmqos-standin-probe")
IGNORING_DEVICE = os.environ.get("PMQOS_IGNORING_DEVICE")
CYCLICTEST = shutil.which("cyclictest")


def cmdline(pid):
    """/proc/PID/cmdline as pmqosd lists it: arguments joined by spaces."""
    with open("/proc/%d/cmdline" % pid) as f:
        return f.read().replace("\0", " ").strip()


class Probe:
    """The probe under pmqosctl run: one step, one answer."""

    def __init__(self, test, prefix=(), run_args=()):
        self.proc = subprocess.Popen([*prefix, PMQOSCTL, "run", *run_args, "--", PROBE], env=test.bus.env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        test.addCleanup(self.close)

    def step(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().split()
        if not answer:
            raise AssertionError("the probe ended: %s" % self.proc.stderr.read())
        return answer[0] == "ok", int(answer[1])

    def ok(self, line):
        good, value = self.step(line)
        if not good:
            raise AssertionError("%s failed: %s" % (line, os.strerror(value)))
        return value

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(30)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return self.proc.returncode


class StandinCase(BrokerTestCase):
    # Root (root_only): the stand-in is mounted in a mount namespace of its own.
    def setUp(self):
        super().setUp()
        self.bus_client = self.client()

    def requests(self):
        return self.bus_client.call("ListRequests", iface=NATIVE_IFACE)[0]

    def values(self):
        return sorted(r["value"] for r in self.requests())

    def wait_values(self, values, what):
        return self.assert_eventually(lambda: self.values() == sorted(values), what=what)

    def run_ctl(self, *args, timeout=60, prefix=(), **kw):
        return subprocess.run([*prefix, PMQOSCTL, *args], env=kw.pop("env", self.bus.env), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=timeout, stdin=subprocess.DEVNULL, **kw)


class TestCyclictest(StandinCase):
    def setUp(self):
        super().setUp()
        if not CYCLICTEST:
            skip_notice("pmqosctl run -- cyclictest", "cyclictest (rt-tests) is not installed")
            self.skipTest("no cyclictest")

    def cyclictest(self, latency, seconds):
        return subprocess.Popen([PMQOSCTL, "run", "--", CYCLICTEST, "--latency=%d" % latency, "-D", str(seconds), "-q",
                                 "-m"], env=self.bus.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)

    def test_cyclictest_holds_71_while_it_runs(self):
        proc = self.cyclictest(71, 4)
        self.assert_eventually(lambda: self.kernel.read() == 71, what="the kernel at 71 µs")
        [req] = self.requests()
        self.assertEqual(req["value"], 71)
        self.assertIn("cyclictest", req["exec"])
        self.assertEqual(req["bound_to"], "process")  # RequestFor(pidfd of the opener)
        self.assertRegex(req["target"], r"^pid \d+ \(.*cyclictest")
        self.assert_persists(lambda: self.kernel.read() == 71, seconds=1.0, what="71 µs while cyclictest runs")
        out, err = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 0, err)
        self.assertIn("/dev/cpu_dma_latency set to 71us", out)
        self.assertEqual(self.requests(), [])
        self.assertTrue(self.kernel.released())

    def test_floor_applies(self):
        self.bus_client.call("SetMinimumLatency", "si", "cpu_dma", 100)
        proc = self.cyclictest(0, 3)
        self.wait_values([0], "cyclictest's request at 0")
        self.assertEqual(self.kernel.read(), 100)
        out, err = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 0, err)
        self.bus_client.call("SetMinimumLatency", "si", "cpu_dma", -1)

    def test_server_killed_the_bound_lasts_as_long_as_the_program(self):
        proc = self.cyclictest(71, 3)
        self.assert_eventually(lambda: self.kernel.read() == 71, what="the kernel at 71 µs")
        os.kill(proc.pid, signal.SIGKILL)  # pmqosctl alone: cyclictest goes on
        self.assert_persists(lambda: self.kernel.read() == 71, seconds=1.0, what="the bound with the server gone")
        self.wait_values([], "the request ended with cyclictest")
        proc.communicate(timeout=30)

    def test_kill_session_releases_within_milliseconds(self):
        # cyclictest killed leaves its /dev/shm/cyclictestPID behind: ours are removed
        before = set(glob.glob("/dev/shm/cyclictest*"))
        self.addCleanup(lambda: [os.unlink(p) for p in set(glob.glob("/dev/shm/cyclictest*")) - before])
        proc = self.cyclictest(71, 60)
        self.assert_eventually(lambda: self.kernel.read() == 71, what="the kernel at 71 µs")
        os.killpg(proc.pid, signal.SIGKILL)
        start = time.monotonic()
        wait_for(lambda: self.kernel.read() != 71, timeout=5, interval=0.001, what="the release")
        took = time.monotonic() - start
        proc.communicate(timeout=30)
        sys.stderr.write("released %.1f ms after kill -9 of the session\n" % (took * 1000))
        self.assertLess(took, 0.1 * TIME_SCALE)
        self.wait_values([], "no request left")


class TestKernelSemantics(StandinCase):
    def test_binary_and_hex_writes(self):
        p = Probe(self)
        p.ok("open 0")
        self.wait_values([-1], "the open's request, constraining nothing")
        self.assertEqual(p.ok("bin 0 42"), 4)
        self.assertEqual(self.kernel.read(), 42)
        self.assertEqual(p.ok("text 0 100"), 3)  # hexadecimal: 256 µs
        self.assertEqual(self.values(), [256])
        self.assertEqual(p.ok("text 0 0x64\\n"), 5)
        self.assertEqual(self.kernel.read(), 100)
        self.assertEqual(p.ok("text 0 +3f"), 3)
        self.assertEqual(self.values(), [63])
        # What the kernel refuses, refused alike; the value stays.
        self.assertEqual(p.step("text 0 zz"), (False, 22))  # EINVAL
        self.assertEqual(p.step("text 0 80000000"), (False, 34))  # ERANGE
        self.assertEqual(p.step("text 0  1"), (False, 22))
        self.assertEqual(self.values(), [63])
        # What the kernel takes without effect: negative values, above its default.
        p.ok("bin 0 -5")
        self.assertEqual(self.values(), [-1])
        self.assertEqual(self.kernel.read(), self.kernel.baseline)
        p.ok("bin 0 2100000000")
        self.assertEqual(self.values(), [-1])
        p.ok("close 0")
        self.wait_values([], "the request ended with the close")

    def test_read_gives_the_machines_value(self):
        self.bus_client.call("Request", "sia{sv}", "cpu_dma", 33, {}, iface=NATIVE_IFACE)
        p = Probe(self)
        p.ok("open 0")
        self.assertEqual(p.ok("read 0"), 33)
        p.ok("bin 0 20")
        self.assertEqual(p.ok("read 0"), 20)
        self.assertEqual(p.ok("readall 0"), 4)  # 4 bytes, like the kernel's read
        self.assertEqual(p.ok("readall 0"), 0)  # then the end of the file

    def test_two_opens_two_requests(self):
        p = Probe(self)
        p.ok("open 0")
        p.ok("open 1")
        p.ok("bin 0 40")
        p.ok("bin 1 30")
        self.assertEqual(self.values(), [30, 40])
        self.assertEqual(self.kernel.read(), 30)
        p.ok("close 1")
        self.wait_values([40], "only the closed open's request gone")
        self.assertEqual(self.kernel.read(), 40)

    def test_listed_as_the_opener_not_the_server(self):
        p = Probe(self)
        pid = p.ok("pid")
        p.ok("open 0")
        p.ok("bin 0 46")
        [req] = self.requests()
        exec_ = cmdline(pid)
        self.assertNotEqual(pid, p.proc.pid)  # the server, which asked
        self.assertEqual((req["pid"], req["exec"], req["target"]), (pid, exec_, "pid %d (%s)" % (pid, exec_)))
        # pmqosctl list's PID and COMMAND columns: the opener's.
        out = self.run_ctl("list", "--full", "--no-legend").stdout
        self.assertRegex(out, r"(?m)^%d .* %d +\d\d:\d\d:\d\d .* %s$" % (req["cookie"], pid, re.escape(exec_)))

    def test_dup_and_fork_share(self):
        p = Probe(self)
        p.ok("open 0")
        p.ok("dup 0 1")
        p.ok("bin 1 45")
        self.assertEqual(self.values(), [45])  # one open, one request, whichever descriptor writes
        p.ok("close 0")
        self.assert_persists(lambda: self.values() == [45], seconds=0.3, what="the dup keeping the request")
        p.ok("fork 1")
        p.ok("close 1")
        self.assert_persists(lambda: self.values() == [45], seconds=0.3, what="the child keeping the request")
        p.ok("unfork")
        self.wait_values([], "the request ended with the child's close")

    def test_probe_exit_releases(self):
        p = Probe(self)
        p.ok("open 0")
        p.ok("bin 0 25")
        self.assertEqual(p.close(), 0)
        self.assertEqual(self.requests(), [])
        self.assertTrue(self.kernel.released())

    def test_flood_is_bounded(self):
        p = Probe(self)
        good, errno = p.step("flood 2000")
        self.assertFalse(good)
        self.assertEqual(errno, 24)  # EMFILE
        n = p.ok("count")
        self.assertLessEqual(n, 1024)
        self.assertEqual(len(self.requests()), n)
        p.ok("unflood")
        self.wait_values([], "every flood request ended")
        p.ok("open 0")  # and the stand-in still serves


class TestCommandLine(StandinCase):
    def test_exit_statuses(self):
        self.assertEqual(self.run_ctl("run", "--", "sh", "-c", "exit 7").returncode, 7)
        self.assertEqual(self.run_ctl("run", "--", "sh", "-c", "kill -9 $$").returncode, 128 + 9)
        r = self.run_ctl("run", "--", "/nonexistent/program")
        self.assertEqual(r.returncode, 127, r.stderr)
        self.assertEqual(len(r.stderr.splitlines()), 1, repr(r.stderr))
        r = self.run_ctl("run", "--", "/etc/passwd")
        self.assertEqual(r.returncode, 126, r.stderr)
        r = self.run_ctl("run")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)

    def test_command_sees_the_standin_only(self):
        r = self.run_ctl("run", "--", "sh", "-c", "grep -c ' /dev/cpu_dma_latency fuse' /proc/self/mounts; "
                         "grep -c pmqos-run /proc/self/mounts")
        self.assertEqual(r.stdout.split(), ["1", "0"], r.stderr)
        with open("/proc/self/mounts") as f:
            self.assertNotIn("pmqos-standin", f.read())

    def test_no_broker_is_125(self):
        env = dict(self.bus.env, DBUS_SYSTEM_BUS_ADDRESS="unix:path=/nonexistent/bus")
        r = self.run_ctl("run", "--", "true", env=env)
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertGreaterEqual(len(r.stderr.splitlines()), 1)

    def test_unprivileged_user_runs_or_says_why(self):
        # Without root the mount comes from fusermount3 and the namespace from a
        # user namespace; where either is not allowed: one line and 125, and
        # COMMAND does not run on the real device.
        r = self.run_ctl("run", "--", "sh", "-c", "echo ran", prefix=("setpriv", "--reuid=%d" % NOBODY,
                                                                      "--regid=%d" % NOBODY, "--clear-groups"))
        if r.returncode == 125:
            self.assertNotIn("ran", r.stdout)
            self.assertIn("pmqosctl run: cannot set up the stand-in device: ", r.stderr)
            skip_notice("pmqosctl run as another user than root", r.stderr.strip().splitlines()[-1])
            return
        self.assertEqual((r.returncode, r.stdout), (0, "ran\n"), r.stderr)

    def test_reason_listed(self):
        p = Probe(self, run_args=("--reason", "audio test"))
        p.ok("open 0")
        [req] = self.requests()
        self.assertIn("audio test", req["reason"])

    def test_other_user_cannot_use_it(self):
        # A program of root's that drops to nobody cannot open root's stand-in
        # (as with the device, mode 0600): no request is made as root for it.
        r = self.run_ctl("run", "--", "setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups",
                         "sh", "-c", "exec 3<>/dev/cpu_dma_latency")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ermission denied", r.stderr)
        self.assertEqual(self.requests(), [])



# A /dev with a cpu_wakeup_latency (Linux 6.19; this kernel may have none)
# for pmqosctl run and its command: in a mount namespace of the test's own, a
# tmpfs moved over /dev holding binds of the nodes they use, and regular
# files for both latency devices, so that nothing there is the real device
# whatever happens. pmqosctl run then binds its stand-in over both.
WAKEUP_DEV = r"""
set -e
d=$1; shift
mount -t tmpfs -o mode=0755 pmqos-test-dev "$d"
for n in null zero full random urandom tty fuse; do
        : > "$d/$n"
        mount --bind "/dev/$n" "$d/$n"
done
mkdir "$d/pts" "$d/shm"
mount --rbind /dev/pts "$d/pts"
mount --rbind /dev/shm "$d/shm"
ln -s pts/ptmx "$d/ptmx"
ln -s /proc/self/fd "$d/fd"
ln -s /proc/self/fd/0 "$d/stdin"
ln -s /proc/self/fd/1 "$d/stdout"
ln -s /proc/self/fd/2 "$d/stderr"
: > "$d/cpu_dma_latency"
: > "$d/cpu_wakeup_latency"
chmod 600 "$d/cpu_dma_latency" "$d/cpu_wakeup_latency"
mount --move "$d" /dev
exec "$@"
"""


class TestWakeupDevice(StandinCase):
    """The stand-in /dev/cpu_wakeup_latency: each open a cpu_wakeup request
    where pmqosd has a wakeup device (here a file, --wakeup-device), written
    to that device and not to cpu_dma's; ENODEV where pmqosd has none."""

    def setUp(self):
        fd, self.wakeup = tempfile.mkstemp(prefix="pmqos-wakeup-")
        os.write(fd, struct.pack("=i", LATENCY_MAX))
        os.close(fd)
        self.addCleanup(os.unlink, self.wakeup)
        self.daemon_args = ("--wakeup-device", self.wakeup)
        self.dev = tempfile.mkdtemp(prefix="pmqos-dev-")
        self.addCleanup(os.rmdir, self.dev)
        super().setUp()
        self.in_dev = ("unshare", "--mount", "--propagation", "private", "sh", "-c", WAKEUP_DEV, "sh", self.dev)

    def wakeup_value(self):
        with open(self.wakeup, "rb") as f:
            return struct.unpack("=i", f.read(4))[0]

    def test_open_is_a_cpu_wakeup_request(self):
        r = self.run_ctl("run", "--", "sh", "-c", "grep -c ' /dev/cpu_wakeup_latency fuse' /proc/self/mounts",
                         prefix=self.in_dev)
        self.assertEqual(r.stdout.split(), ["1"], r.stderr)
        p = Probe(self, prefix=self.in_dev)
        pid = p.ok("pid")
        p.ok("wopen 0")
        self.wait_values([-1], "the open's request, constraining nothing")
        [req] = self.requests()
        self.assertEqual((req["type"], req["bound_to"]), ("cpu_wakeup", "process"))
        self.assertRegex(req["target"], r"^pid %d " % pid)
        self.assertIn("/dev/cpu_wakeup_latency", req["reason"])
        self.assertEqual(self.wakeup_value(), LATENCY_MAX)
        self.assertEqual(p.ok("bin 0 42"), 4)
        self.assertEqual(self.wakeup_value(), 42)
        self.assertTrue(self.kernel.released())  # cpu_dma's device untouched
        self.assertEqual(self.bus_client.call("GetLatency", "s", "cpu_dma")[0], -1)
        self.assertEqual(p.ok("text 0 100"), 3)  # hexadecimal, as the kernel reads it: 256 µs
        self.assertEqual(self.wakeup_value(), 256)
        self.assertEqual(p.step("text 0 zz"), (False, 22))  # EINVAL, the value kept
        self.assertEqual(self.values(), [256])
        p.ok("dup 0 1")
        p.ok("close 0")
        p.ok("fork 1")
        p.ok("close 1")
        self.assert_persists(lambda: self.values() == [256], seconds=0.3, what="the child's dup keeping it")
        p.ok("unfork")
        self.wait_values([], "the request ended with the last close")
        self.assertEqual(self.wakeup_value(), LATENCY_MAX)
        self.assertTrue(self.kernel.released())

    def test_read_gives_the_machines_wakeup_value(self):
        p = Probe(self, prefix=self.in_dev)
        p.ok("wopen 0")
        self.assertEqual(p.ok("read 0"), LATENCY_MAX)  # nothing asked: the kernel's default
        self.bus_client.call("Request", "sia{sv}", "cpu_wakeup", 33, {}, iface=NATIVE_IFACE)
        self.bus_client.call("Request", "sia{sv}", "cpu_dma", 10, {}, iface=NATIVE_IFACE)
        self.assertEqual(p.ok("read 0"), 33)
        p.ok("bin 0 20")
        self.assertEqual(p.ok("read 0"), 20)
        p.ok("open 1")
        self.assertEqual(p.ok("read 1"), 10)  # each file its own type's value
        self.assertEqual(p.ok("read 0"), 20)

    def test_opens_of_both_files_share_the_bound(self):
        p = Probe(self, prefix=self.in_dev)
        good, errno = p.step("flood 2000")
        self.assertEqual((good, errno), (False, 24))  # EMFILE
        self.assertEqual(p.step("wopen 0"), (False, 24))
        self.assertEqual(len(self.requests()), p.ok("count"))
        p.ok("unflood")
        self.wait_values([], "every flood request ended")
        p.ok("wopen 0")

    def test_no_wakeup_device_is_enodev(self):
        self.start_daemon(("--wakeup-device", ""))
        p = Probe(self, prefix=self.in_dev)
        self.assertEqual(p.step("wopen 0"), (False, 19))  # ENODEV, as before it was served
        self.assertEqual(self.requests(), [])
        p.ok("open 1")  # cpu_dma is served as ever
        self.assertEqual([r["type"] for r in self.requests()], ["cpu_dma"])
        self.assertEqual(self.wakeup_value(), LATENCY_MAX)


class TestServeForServices(StandinCase):
    """--serve DIR, as a unit's BindPaths=DIR/cpu_dma_latency:/dev/cpu_dma_latency
    gives it to a service: here the bind made by unshare and mount, as
    systemd makes it in the service's namespace."""

    def test_service_bound_listed_and_released(self):
        d = "/run/pmqos-standin-test-%d" % os.getpid()
        server = subprocess.Popen([PMQOSCTL, "run", "--reason", "svc", "--serve", d], env=self.bus.env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: os.path.isdir(d) and os.rmdir(d))
        self.addCleanup(lambda: server.poll() is None and server.kill())

        def mounted():
            with open("/proc/self/mounts") as f:
                return " %s fuse" % d in f.read()
        self.assert_eventually(mounted, what="the stand-in mounted on %s" % d)
        # The service in a unit's cgroup, as systemd starts it: the reason
        # names the opener's comm, pid and unit, not the server.
        root, unit = cgroup_root(), "probe-%d.service" % os.getpid()
        join = ""
        if root:
            slice_dir = os.path.join(root, "pmqos-test-%d.slice" % os.getpid())
            os.makedirs(os.path.join(slice_dir, unit))
            self.addCleanup(lambda: (os.rmdir(os.path.join(slice_dir, unit)), os.rmdir(slice_dir)))
            join = "echo $$ > %s/%s/cgroup.procs && " % (slice_dir, unit)
        service = subprocess.Popen(["unshare", "--mount", "--propagation", "slave", "sh", "-c",
                                    join + "mount --bind %s/cpu_dma_latency /dev/cpu_dma_latency && exec %s"
                                    % (d, PROBE)],
                                   env=self.bus.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        p = Probe.__new__(Probe)
        p.proc = service
        p.proc.stderr = open(os.devnull)
        self.addCleanup(p.close)
        p.ok("open 0")
        p.ok("bin 0 44")
        [req] = self.requests()
        self.assertEqual(req["value"], 44)
        with open("/proc/%d/comm" % service.pid) as f:
            comm = f.read().strip()
        self.assertEqual(req["reason"], "svc (%s, pid %d%s)" % (comm, service.pid, ", " + unit if root else ""))
        self.assertEqual(self.kernel.read(), 44)
        # Listed, and in the ledger, as the opener's: pid, command line,
        # comm and unit; the server is only who asked (billed as its uid).
        self.assertEqual((req["pid"], req["exec"], req["uid"]), (service.pid, cmdline(service.pid), os.getuid()))
        status = self.run_ctl("status").stdout
        self.assertIn("Bound:    44 µs, set by request %d of uid %d pid %d `%s`"
                      % (req["cookie"], os.getuid(), service.pid, cmdline(service.pid)), status)
        if self.kernel.real:
            # The ledger rows a holder that keeps a state out (haltpoll's
            # 1 µs one: 0 µs, briefly).
            p.ok("bin 0 0")

            def row():
                return [r for r in self.bus_client.call("Ledger", None, iface=NATIVE_IFACE)[0]
                        if r["cookie"] == req["cookie"]]
            [row] = self.assert_eventually(row, what="the opener's ledger row")
            p.ok("bin 0 44")
            self.assertEqual((row["kind"], row["comm"], row["unit"], row["uid"]),
                             ("request", comm, unit if root else "", os.getuid()))
        else:
            skip_notice("the opener's ledger row", "the device is a stand-in file, with no cpuidle behind it")
        self.assertEqual(p.close(), 0)
        self.wait_values([], "the service's request ended with it")
        server.terminate()
        self.assertEqual(server.wait(30), 0, server.stderr.read())
        server.stdout.close()
        server.stderr.close()
        self.assertFalse(mounted())

    def test_planted_link_or_foreign_dir_refused(self):
        """A symbolic link at DIR, or at a directory above it, is refused
        (not followed: nothing is mounted on its target), as is a directory
        of another user; exit status 125, the reason on stderr."""
        target = tempfile.mkdtemp(prefix="pmqos-serve-target-")
        self.addCleanup(shutil.rmtree, target, True)
        link = "/run/pmqos-serve-link-%d" % os.getpid()
        os.symlink(target, link)
        self.addCleanup(os.unlink, link)
        foreign = os.path.join(target, "foreign")
        os.mkdir(foreign)
        os.chown(foreign, 65534, 65534)
        for d, why in ((link, "or a directory above it, is a symbolic link: refusing to follow it"),
                       (link + "/sub", "or a directory above it, is a symbolic link: refusing to follow it"),
                       (foreign, "not owned by root, or on a FUSE file system: refusing to serve over it")):
            p = subprocess.run([PMQOSCTL, "run", "--serve", d], env=self.bus.env, capture_output=True, text=True,
                               timeout=30)
            self.assertEqual(p.returncode, 125, p.stderr)
            self.assertIn("pmqosctl run: cannot set up the stand-in device: %s: " % d, p.stderr)
            self.assertIn(why, p.stderr)
            with open("/proc/self/mountinfo") as f:
                self.assertNotIn("pmqos-serve-", f.read(), "mounted over the link's target")
        self.assertEqual(sorted(os.listdir(target)), ["foreign"], "made a directory through the link")

    def test_directory_above_of_another_user_or_open_to_all_refused(self):
        """A directory above DIR that another user owns, or that others may
        write without the sticky bit, is refused before anything is made in
        it: its owner could rename it, with the mounted DIR inside, and put a
        directory of their own at its path, so that services binding
        DIR/cpu_dma_latency would get the attacker's file."""
        for mode, uid in ((0o755, 65534), (0o777, 0)):
            above = tempfile.mkdtemp(prefix="pmqos-above-")
            self.addCleanup(shutil.rmtree, above, True)
            os.chmod(above, mode)
            os.chown(above, uid, uid)
            d = os.path.join(above, "standin")
            p = subprocess.run([PMQOSCTL, "run", "--serve", d], env=self.bus.env, capture_output=True, text=True,
                               timeout=5)
            self.assertEqual(p.returncode, 125, p.stderr)
            self.assertIn("pmqosctl run: cannot set up the stand-in device: %s: a directory above it (%s) is not "
                          "root's, or on FUSE, or others may write it without the sticky bit: refusing to serve below it"
                          % (d, above), p.stderr)
            self.assertEqual(os.listdir(above), [], "made DIR in a directory another user controls")
            with open("/proc/self/mountinfo") as f:
                self.assertNotIn("pmqos-above-", f.read())

    def test_directory_on_fuse_refused(self):
        """DIR on a FUSE file system is refused: its server, not the kernel,
        says who owns it (this one, as a user's mounted with allow_other
        would, says root), and can drop the stand-in's mount point from
        under it."""
        if not IGNORING_DEVICE:
            skip_notice("--serve DIR on a FUSE file system", "PMQOS_IGNORING_DEVICE is not set (run through meson)")
            self.skipTest("PMQOS_IGNORING_DEVICE is not set")
        d = tempfile.mkdtemp(prefix="pmqos-fuse-")
        self.addCleanup(os.rmdir, d)
        fuse = subprocess.Popen([IGNORING_DEVICE, d])
        self.addCleanup(fuse.wait, 10)
        self.addCleanup(fuse.terminate)
        self.addCleanup(subprocess.run, ["fusermount3", "-u", d], check=False)
        wait_for(lambda: os.path.exists(os.path.join(d, "device")), what="the FUSE file system")
        self.assertEqual(os.stat(d).st_uid, 0)  # what the server says
        p = subprocess.run([PMQOSCTL, "run", "--serve", d], env=self.bus.env, capture_output=True, text=True,
                           timeout=5)
        self.assertEqual(p.returncode, 125, p.stderr)
        self.assertIn("pmqosctl run: cannot set up the stand-in device: %s: not owned by root, or on a FUSE file "
                      "system: refusing to serve over it" % d, p.stderr)
        with open("/proc/self/mountinfo") as f:
            self.assertNotIn("pmqos-standin", f.read())


if __name__ == "__main__":
    main()
