# SPDX-License-Identifier: LGPL-2.1-or-later
"""The container tier: pmqos as a system installs it (prefix /usr,
sysconfdir /etc), under a real systemd as PID 1 in a systemd-nspawn
container with the real /dev/cpu_dma_latency bound in, the real dbus-daemon
and polkitd. Proves the shipped unit, activation file, sysusers entry, bus
policy and polkit files work together with the sandbox enforced.

One container is booted for the whole module (about a second); each test
starts from pmqosd stopped and its state removed. Needs root,
systemd-nspawn and debootstrap; says so and skips otherwise."""

import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest

SOURCE_ROOT = os.environ.get("PMQOS_SOURCE_ROOT",
                             os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
DEVICE = "/dev/cpu_dma_latency"
LATENCY_MAX = 2000000000
BUS = "org.freedesktop.PMQoS"
PATH = "/org/freedesktop/PMQoS"
NATIVE = "org.freedesktop.PMQoS"
QOS = "org.freedesktop.UPower.QoS"
MEMBER, PLAIN = "pmqos-c-member", "pmqos-c-plain"

container = None


def why_not():
    if os.geteuid() != 0:
        return "not root"
    for tool in ("systemd-nspawn", "debootstrap", "nsenter"):
        if not shutil.which(tool):
            return "%s is not installed (Debian: systemd-container, debootstrap, util-linux)" % tool
    if not cgroup2_root():
        return "no cgroup2 hierarchy mounted"
    if not os.path.exists(DEVICE):
        return "no %s" % DEVICE
    return None


def cgroup2_root():
    """Where cgroup2 is: /sys/fs/cgroup itself, or its unified/ on a hybrid host."""
    for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        if os.path.exists(os.path.join(root, "cgroup.controllers")):
            return root
    return None


def kernel():
    fd = os.open(DEVICE, os.O_RDONLY)
    try:
        return struct.unpack("=i", os.pread(fd, 4, 0))[0]
    finally:
        os.close(fd)


def wait_for(pred, timeout=20.0, interval=0.05, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(interval)


class Container:
    def __init__(self):
        t0 = time.monotonic()
        self.tree = subprocess.run([os.path.join(SOURCE_ROOT, "tests", "system", "make-tree")], check=True,
                                   stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()[-1]
        self.tree_seconds = time.monotonic() - t0
        self.work = tempfile.mkdtemp(prefix="pmqos-system-")
        t0 = time.monotonic()
        self.install_tree = self.install()
        self.build_seconds = time.monotonic() - t0
        self.cgroup = os.path.join(cgroup2_root(), "pmqos-system-%d" % os.getpid())
        os.mkdir(self.cgroup)
        env = dict(os.environ, SYSTEMD_NSPAWN_UNIFIED_HIERARCHY="1", SYSTEMD_NSPAWN_API_VFS_WRITABLE="1")
        self.log = open(os.path.join(self.work, "nspawn.log"), "w")
        # nspawn makes sub-cgroups of its own: give it one to itself.
        self.nspawn = subprocess.Popen(
            ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', self.cgroup,
             "systemd-nspawn", "-q", "-D", self.tree, "--volatile=overlay", "--boot", "--register=no",
             "--keep-unit", "--system-call-filter=bpf", "--bind=%s" % DEVICE,
             "--bind-ro=%s:/pmqos-install" % self.install_tree, "--machine=pmqos-system",
             "--console=pipe"],
            env=env, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
        # From here on a failure stops the container before it is reported:
        # tearDownModule never runs for a module whose setUp failed.
        try:
            self.boot()
            self.prepare()
        except BaseException:
            self.stop()
            raise

    def boot(self):
        t0 = time.monotonic()
        self.pid1 = wait_for(self.find_init, interval=0.002, what="the container's systemd")
        try:
            wait_for(lambda: self.sh("systemctl is-system-running 2>/dev/null || true").stdout.strip()
                             in ("running", "degraded") and "up", timeout=60, what="the container to boot")
        except AssertionError as e:
            raise AssertionError("%s; its jobs:\n%s\nnspawn's output:\n%s"
                                 % (e, self.sh("systemctl list-jobs --no-pager 2>&1").stdout,
                                    self.output()[-4000:])) from None
        self.boot_seconds = time.monotonic() - t0

    def install(self):
        build = os.path.join(self.work, "build")
        dest = os.path.join(self.work, "dest")
        subprocess.run(["meson", "setup", build, SOURCE_ROOT, "--prefix=/usr", "--sysconfdir=/etc",
                        "--libexecdir=lib/pmqos", "--buildtype=debugoptimized", "-Dtests=false"],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["ninja", "-C", build], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["meson", "install", "-C", build, "--no-rebuild", "--quiet", "--destdir", dest], check=True,
                       stdout=subprocess.DEVNULL)
        return dest

    def find_init(self):
        """The container's PID 1: the child of nspawn that is pid 1 in its
        own namespace. For a moment nspawn has another child too, the one
        that forks PID 1 and exits: taking it would leave every later
        nsenter aimed at a process that is gone."""
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/status" % pid) as f:
                    fields = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
                ppid = int(fields["PPid"])
                nspids = fields["NSpid"].split()
            except (OSError, ValueError, KeyError):
                continue
            if ppid == self.nspawn.pid and len(nspids) > 1 and nspids[-1] == "1":
                return int(pid)
        if self.nspawn.poll() is not None:
            raise AssertionError("systemd-nspawn exited:\n" + self.output())
        return None

    def output(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def sh(self, script, check=False, timeout=60):
        """A shell command inside the container (all namespaces; not under
        nspawn's seccomp filter: systemd-run there runs under the manager's)."""
        r = subprocess.run(["nsenter", "-t", str(self.pid1), "-a", "/bin/sh", "-c", script],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError("%r failed (%d):\n%s%s" % (script, r.returncode, r.stdout, r.stderr))
        return r

    def prepare(self):
        self.sh("cp -a /pmqos-install/. / && systemd-sysusers && systemctl daemon-reload && "
                "systemctl reload dbus && systemctl restart polkit", check=True)
        for user, groups in ((MEMBER, "-G pmqos"), (PLAIN, "")):
            self.sh("useradd --system --no-create-home --shell /usr/sbin/nologin %s %s" % (groups, user), check=True)

    def stop(self):
        if self.nspawn.poll() is None:
            self.nspawn.send_signal(signal.SIGTERM)  # nspawn asks the container's systemd to power off
            try:
                self.nspawn.wait(30)
            except subprocess.TimeoutExpired:
                self.nspawn.kill()
                self.nspawn.wait()
        self.log.close()
        try:
            for sub in sorted((os.path.join(d, n) for d, ns, _ in os.walk(self.cgroup) for n in ns),
                              key=len, reverse=True):
                os.rmdir(sub)
            os.rmdir(self.cgroup)
        except OSError:
            pass
        shutil.rmtree(self.work, ignore_errors=True)


def setUpModule():
    global container
    reason = why_not()
    if reason:
        sys.stderr.write("SKIP: the container tier (%s)\n" % reason)
        raise unittest.SkipTest(reason)
    container = Container()
    sys.stderr.write("container tier: tree %.1f s (cached when < 1 s), build+install %.1f s, boot %.1f s\n"
                     % (container.tree_seconds, container.build_seconds, container.boot_seconds))


def tearDownModule():
    if container:
        container.stop()


class SystemTestCase(unittest.TestCase):
    def setUp(self):
        self.c = container
        self.baseline = kernel()
        self.c.sh("systemctl stop pmqosd; systemctl reset-failed pmqosd; rm -rf /var/lib/pmqos; "
                  "cp /pmqos-install/etc/pmqos/pmqosd.conf /etc/pmqos/", check=True)

    def tearDown(self):
        self.c.sh("systemctl stop pmqosd")
        wait_for(lambda: kernel() == self.baseline, timeout=5, what="the device to be released")

    def start(self):
        self.c.sh("systemctl start pmqosd", check=True)
        return self.main_pid()

    def main_pid(self):
        pid = int(self.c.sh("systemctl show -P MainPID pmqosd").stdout.strip() or 0)
        self.assertNotEqual(pid, 0, self.journal())
        return pid

    def journal(self, *args):
        return self.c.sh("journalctl -q --no-pager -u pmqosd %s" % " ".join(args)).stdout

    def busctl(self, *args, user=None):
        cmd = "busctl --system call %s %s %s" % (BUS, PATH, " ".join(args))
        if user:
            cmd = "setpriv --reuid=%s --regid=%s --init-groups %s" % (user, user, cmd)
        return self.c.sh(cmd)

    def host_status(self, pid_in_container):
        # The container's /proc shows its own pids; the host reads the same process through it.
        with open("/proc/%d/root/proc/%d/status" % (self.c.pid1, pid_in_container)) as f:
            return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


class TestService(SystemTestCase):
    def test_start_ready_status_and_privileges(self):
        pid = self.start()
        self.assertEqual(self.c.sh("systemctl is-active pmqosd").stdout.strip(), "active")
        self.assertRegex(self.c.sh("systemctl show -P StatusText pmqosd").stdout, r"no bound, 0 request")
        f = self.host_status(pid)
        uid = self.c.sh("id -u pmqos").stdout.strip()
        self.assertEqual(f["Uid"].split(), [uid] * 4)
        for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            self.assertEqual(int(f[k], 16), 0, "%s is %s" % (k, f[k]))
        self.assertEqual(f["NoNewPrivs"], "1")
        self.assertEqual(f["Seccomp"], "2")  # the unit's system call filter
        self.assertIn("Running as user pmqos", self.journal())

    def test_requests_reach_the_kernel_and_polkit_decides(self):
        self.start()
        r = self.busctl(QOS, "RequestLatency", "sib", "cpu_dma", "77", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        cookie = r.stdout.split()[1]
        self.assertLessEqual(kernel(), 77)
        # STATUS= goes at most once a second: the first of a burst at once, this one up to a second later.
        wait_for(lambda: re.search(r"effective 77 µs, 1 request", self.c.sh("systemctl show -P StatusText pmqosd").stdout),
                 timeout=10, what="systemd's StatusText to say effective 77 µs, 1 request")
        # A member of group pmqos, without a session: a timed request is granted.
        r = self.busctl(NATIVE, "Request", "'sia{sv}'", "cpu_dma", "55", "1", "timeout", "u", "60", user=MEMBER)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLessEqual(kernel(), 55)
        # A user with neither session nor group is refused by polkit.
        r = self.busctl(NATIVE, "Request", "'sia{sv}'", "cpu_dma", "5", "1", "timeout", "u", "60", user=PLAIN)
        self.assertNotEqual(r.returncode, 0)
        # busctl shows any AccessDenied as "Access denied"; the bus policy let the
        # member's identical call through, so this one is polkit's "no".
        self.assertIn("Access denied", r.stderr)
        self.assertEqual(self.busctl(NATIVE, "ListRequests").stdout.count('"cookie" u '), 2)
        self.busctl(QOS, "CancelRequest", "u", cookie)

    def test_per_cpu_bound_written_and_restored(self):
        path = "/sys/devices/system/cpu/cpu0/power/pm_qos_resume_latency_us"
        before = self.c.sh("cat %s" % path, check=True).stdout.strip()
        self.start()
        r = self.busctl(NATIVE, "Request", "'sia{sv}'", "cpu_dma", "33", "2", "timeout", "u", "60", "cpus", "au",
                        "1", "0")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.c.sh("cat %s" % path).stdout.strip(), "33")
        self.busctl(NATIVE, "Cancel", "u", r.stdout.split()[1])
        self.assertEqual(self.c.sh("cat %s" % path).stdout.strip(), before)

    PROBE = """#!/bin/sh
# Runs as the unit's ExecStartPost=, inside its sandbox; prints to the journal.
echo "PROBE devices: $(ls /dev | tr '\\n' ' ')"
if touch /etc/pmqos-probe 2>/dev/null; then echo "PROBE etc-writable"; else echo "PROBE etc-read-only"; fi
if : < /dev/cpu_dma_latency; then echo "PROBE device-ok"; else echo "PROBE device-refused"; fi
if python3 -c 'import socket; socket.socket(socket.AF_INET)' 2>/dev/null; then echo "PROBE inet-ok"
else echo "PROBE inet-refused"; fi
"""

    def test_sandbox_holds(self):
        """From inside the service's own sandbox (an ExecStartPost= probe runs
        with the unit's settings): the device is the only physical device
        there, /etc is read-only, there is no network; pmqosd still works."""
        root = "/proc/%d/root" % self.c.pid1
        with open(root + "/usr/local/bin/pmqos-probe", "w") as f:
            f.write(self.PROBE)
        os.chmod(root + "/usr/local/bin/pmqos-probe", 0o755)
        os.makedirs(root + "/run/systemd/system/pmqosd.service.d", exist_ok=True)
        with open(root + "/run/systemd/system/pmqosd.service.d/probe.conf", "w") as f:
            f.write("[Service]\nExecStartPost=/usr/local/bin/pmqos-probe\n")
        self.c.sh("systemctl daemon-reload", check=True)
        try:
            self.start()
            out = wait_for(lambda: "PROBE inet" in self.journal() and self.journal(), what="the probe's lines")
        finally:
            self.c.sh("rm -rf /run/systemd/system/pmqosd.service.d; systemctl daemon-reload")
        devices = set(re.search(r"PROBE devices: (.*)", out).group(1).split())
        self.assertIn("cpu_dma_latency", devices)
        for physical in ("mem", "kmsg", "port", "vda", "sda", "console"):
            self.assertNotIn(physical, devices)
        self.assertIn("PROBE etc-read-only", out)
        self.assertIn("PROBE device-ok", out)
        self.assertIn("PROBE inet-refused", out)
        self.c.sh("systemctl restart pmqosd", check=True)
        r = self.busctl(QOS, "RequestLatency", "sib", "cpu_dma", "66", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLessEqual(kernel(), 66)
        self.busctl(QOS, "CancelRequest", "u", r.stdout.split()[1])

    def test_dbus_activation_goes_through_systemd(self):
        r = self.busctl(QOS, "GetLatency", "s", "cpu_dma")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["i", "-1"])
        self.assertEqual(self.c.sh("systemctl is-active pmqosd").stdout.strip(), "active")
        pid = self.main_pid()
        cgroup = self.c.sh("cat /proc/%d/cgroup" % pid).stdout
        self.assertIn("/system.slice/pmqosd.service", cgroup)  # started by systemd, not by dbus-daemon

    def test_reload(self):
        self.start()
        self.c.sh("printf '[pmqosd]\\nMaxRequestsPerUser=1\\n' > /etc/pmqos/pmqosd.conf", check=True)
        self.c.sh("systemctl reload pmqosd", check=True)
        wait_for(lambda: "Reloaded /etc/pmqos/pmqosd.conf: 64 requests per connection, 1 per user" in self.journal(),
                 what="the reload in the journal")
        ok = self.busctl(NATIVE, "Request", "'sia{sv}'", "cpu_dma", "500", "1", "timeout", "u", "60", user=MEMBER)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        r = self.busctl(NATIVE, "Request", "'sia{sv}'", "cpu_dma", "500", "1", "timeout", "u", "60", user=MEMBER)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("the most one user may hold", r.stderr)
        # A bad file: the previous configuration stays, and the journal says why.
        self.c.sh("printf '[pmqosd]\\nMaxRequestsPerUser=lots\\n' > /etc/pmqos/pmqosd.conf", check=True)
        self.c.sh("systemctl reload pmqosd", check=True)
        wait_for(lambda: "pmqosd.conf:2: MaxRequestsPerUser: invalid value" in self.journal(),
                 what="the refusal in the journal")
        self.assertEqual(self.c.sh("systemctl is-active pmqosd").stdout.strip(), "active")
        r = self.busctl(NATIVE, "Request", "'sia{sv}'", "cpu_dma", "500", "1", "timeout", "u", "60", user=MEMBER)
        self.assertIn("the most one user may hold", r.stderr)
        self.busctl(NATIVE, "Cancel", "u", ok.stdout.split()[1])

    def test_restart_and_crash_keep_persistent_requests(self):
        self.start()
        r = self.busctl(QOS, "RequestLatency", "sib", "cpu_dma", "88", "true")
        cookie = r.stdout.split()[1]
        self.c.sh("systemctl restart pmqosd", check=True)
        self.assertIn(cookie, self.busctl(QOS, "GetLatencyRequests").stdout)
        self.assertLessEqual(kernel(), 88)
        pid = self.main_pid()
        self.c.sh("kill -9 %d" % pid)
        wait_for(lambda: self.c.sh("systemctl show -P MainPID pmqosd").stdout.strip() not in ("0", str(pid), ""),
                 timeout=30, what="systemd to restart pmqosd")
        wait_for(lambda: self.c.sh("systemctl is-active pmqosd").stdout.strip() == "active", what="active again")
        self.assertIn(cookie, self.busctl(QOS, "GetLatencyRequests").stdout)
        self.assertLessEqual(kernel(), 88)
        self.busctl(QOS, "CancelRequest", "u", cookie)

    def test_journal_priorities(self):
        self.start()
        self.c.sh("printf 'Bogus=1\\n' > /etc/pmqos/pmqosd.conf && systemctl reload pmqosd", check=True)
        wait_for(lambda: "Bogus" in self.journal(), what="the bad line in the journal")
        entries = [json.loads(line) for line in self.journal("-o json").splitlines() if line.strip()]
        by_text = {e["MESSAGE"]: int(e["PRIORITY"]) for e in entries if isinstance(e.get("MESSAGE"), str)}
        serving = [p for m, p in by_text.items() if m.startswith("Serving org.freedesktop.PMQoS")]
        bad = [p for m, p in by_text.items() if m.startswith("Bad configuration")]
        self.assertEqual(serving, [6])
        self.assertEqual(bad, [3])


SAMPLER = r"""
/* Reads the device (or, given a third argument, a sysfs file as text) every
 * 100 µs until SIGTERM; prints samples, samples above the bound given (for
 * the file: not equal to that text), and the longest gap between two
 * samples (µs). */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static volatile sig_atomic_t stop;
static void on_term(int sig) { (void) sig; stop = 1; }
int main(int argc, char **argv) {
        int32_t bound = atoi(argv[1]), v;
        long n = 0, above = 0, max_gap = 0;
        struct timespec prev, now, pause = { 0, 100000 };
        const char *text = argc > 2 ? argv[1] : NULL;
        char buf[32];
        int fd = open(argc > 2 ? argv[2] : "/dev/cpu_dma_latency", O_RDONLY);
        if (fd < 0) return 1;
        signal(SIGTERM, on_term);
        clock_gettime(CLOCK_MONOTONIC, &prev);
        printf("started\n");
        fflush(stdout);
        while (!stop) {
                if (text) {
                        ssize_t k = pread(fd, buf, sizeof(buf) - 1, 0);
                        if (k > 0) { buf[k] = 0; buf[strcspn(buf, "\n")] = 0; n++; if (strcmp(buf, text)) above++; }
                } else if (pread(fd, &v, 4, 0) == 4) { n++; if (v > bound) above++; }
                clock_gettime(CLOCK_MONOTONIC, &now);
                long gap = (now.tv_sec - prev.tv_sec) * 1000000L + (now.tv_nsec - prev.tv_nsec) / 1000;
                if (gap > max_gap) max_gap = gap;
                prev = now;
                nanosleep(&pause, NULL);
        }
        printf("%ld %ld %ld\n", n, above, max_gap);
        return 0;
}
"""

HOLDER = """
import sys
import dbus
bus = dbus.SystemBus()
obj = bus.get_object("org.freedesktop.PMQoS", "/org/freedesktop/PMQoS")
if len(sys.argv) > 2:  # a per-CPU bound, through the native interface
    cookie = dbus.Interface(obj, "org.freedesktop.PMQoS").Request(
        "cpu_dma", int(sys.argv[1]), {"cpus": dbus.Array([dbus.UInt32(int(sys.argv[2]))], signature="u")})
else:
    cookie = dbus.Interface(obj, "org.freedesktop.UPower.QoS").RequestLatency("cpu_dma", int(sys.argv[1]), False)
print(int(cookie), flush=True)
sys.stdin.readline()
"""


class TestRestartSurvival(SystemTestCase):
    """A plain python-dbus client's connection-bound request across 20
    restarts and 20 kill -9, watched on the host every 100 µs."""

    def holder(self, usec, cpu=None):
        p = subprocess.Popen(["nsenter", "-t", str(self.c.pid1), "-a", "/usr/bin/python3", "-c", HOLDER, str(usec)]
                             + ([str(cpu)] if cpu is not None else []),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        cookie = p.stdout.readline().strip()
        self.assertTrue(cookie.isdigit(), "the holder got no cookie")
        return p, cookie

    def release(self, holder):
        holder.stdin.close()
        holder.wait(10)
        holder.stdout.close()

    def sampler(self, bound, path=None):
        src = os.path.join(self.c.work, "sampler.c")
        exe = os.path.join(self.c.work, "sampler")
        if not os.path.exists(exe):
            with open(src, "w") as f:
                f.write(SAMPLER)
            subprocess.run(["cc", "-O2", "-o", exe, src], check=True)
        p = subprocess.Popen([exe, str(bound)] + ([path] if path else []), stdout=subprocess.PIPE, text=True)
        self.assertEqual(p.stdout.readline().strip(), "started")
        self.addCleanup(p.stdout.close)
        return p

    def listed(self, cookie):
        return re.search(r"\b%s\b" % cookie, self.busctl(QOS, "GetLatencyRequests").stdout) is not None

    def test_restarts_and_crashes_are_invisible(self):
        self.start()
        holder, cookie = self.holder(44)
        self.assertLessEqual(kernel(), 44)
        sampler = self.sampler(44)
        try:
            for i in range(40):
                pid = self.main_pid()
                # 40 starts in a row are more than the default start rate limit lets through.
                self.c.sh("systemctl reset-failed pmqosd")
                if i < 20:
                    self.c.sh("systemctl restart pmqosd", check=True)
                else:
                    self.c.sh("kill -9 %d" % pid)
                    wait_for(lambda: self.c.sh("systemctl is-active pmqosd; systemctl show -P MainPID pmqosd")
                             .stdout.split() not in (["active", str(pid)],) and
                             self.c.sh("systemctl is-active pmqosd").stdout.strip() == "active", timeout=30,
                             interval=0.01, what="systemd to restart pmqosd")
                self.assertNotEqual(self.main_pid(), pid)
                self.assertTrue(self.listed(cookie), "round %d: the cookie is gone:\n%s" % (i, self.journal()))
        finally:
            sampler.send_signal(signal.SIGTERM)
            n, above, max_gap = (int(x) for x in sampler.communicate(timeout=10)[0].split())
        sys.stderr.write("sampler: %d samples, %d above 44 µs, longest gap between samples %d µs\n"
                         % (n, above, max_gap))
        self.assertGreater(n, 1000)
        self.assertEqual(above, 0, "the kernel lost the bound during a restart")
        journal = self.journal()
        self.assertIn("Took /dev/cpu_dma_latency back from the service manager", journal)
        self.assertIn("Re-adopted 1 request(s)", journal)

        # The client leaves: its request ends, as with one broker all along.
        self.release(holder)
        wait_for(lambda: kernel() == self.baseline, timeout=5, interval=0.01, what="the request to end")
        self.assertFalse(self.listed(cookie))

    def test_per_cpu_bound_holds_through_restarts(self):
        path = "/sys/devices/system/cpu/cpu0/power/pm_qos_resume_latency_us"
        with open(path) as f:
            original = f.read().strip()
        self.start()
        holder, cookie = self.holder(23, cpu=0)
        try:
            sampler = self.sampler("23", path)
            try:
                for i in range(10):
                    self.c.sh("systemctl reset-failed pmqosd")
                    if i % 2 == 0:
                        self.c.sh("systemctl restart pmqosd", check=True)
                    else:
                        pid = self.main_pid()
                        self.c.sh("kill -9 %d" % pid)
                        wait_for(lambda: self.c.sh("systemctl show -P MainPID pmqosd").stdout.strip()
                                 not in ("0", "", str(pid)) and
                                 self.c.sh("systemctl is-active pmqosd").stdout.strip() == "active",
                                 timeout=30, interval=0.01, what="systemd to restart pmqosd")
                    self.assertTrue(self.listed(cookie), "round %d" % i)
            finally:
                sampler.send_signal(signal.SIGTERM)
                n, changed, max_gap = (int(x) for x in sampler.communicate(timeout=10)[0].split())
            sys.stderr.write("cpu0 sampler: %d samples, %d not 23, longest gap %d µs\n" % (n, changed, max_gap))
            self.assertEqual(changed, 0, "cpu0's bound lapsed during a restart:\n" + self.journal())
            self.assertIn("Restarting: per-CPU bounds stay in place", self.journal())
            # A stop gives cpu0 its value back.
            self.c.sh("systemctl stop pmqosd", check=True)
            with open(path) as f:
                self.assertEqual(f.read().strip(), original)
        finally:
            self.release(holder)

    def test_stop_releases_everything(self):
        self.start()
        holder, cookie = self.holder(45)
        try:
            self.c.sh("systemctl restart pmqosd", check=True)  # the store holds the descriptor now
            self.assertLessEqual(kernel(), 45)
            self.c.sh("systemctl stop pmqosd", check=True)
            t0 = time.monotonic()
            wait_for(lambda: kernel() == self.baseline, timeout=5, interval=0.001, what="the bound to go")
            released = time.monotonic() - t0
            sys.stderr.write("stop: the kernel at the default %.1f ms after systemctl stop returned\n"
                             % (released * 1000))
            self.assertLess(released, 0.1)
            # Nothing comes back at the next start: a stop is not a restart.
            self.start()
            self.assertFalse(self.listed(cookie))
            self.assertEqual(kernel(), self.baseline)
        finally:
            self.release(holder)

    def test_runtime_record_is_private(self):
        self.start()
        holder, cookie = self.holder(46)
        try:
            out = self.c.sh("stat -c '%U %a' /run/pmqos /run/pmqos/requests", check=True).stdout.split("\n")
            self.assertEqual(out[:2], ["pmqos 700", "pmqos 600"])
            self.assertIn("add sender=", self.c.sh("cat /run/pmqos/requests").stdout)
        finally:
            self.release(holder)


DEVICE_HOLDER = """
import os, struct, time
fd = os.open("/dev/cpu_dma_latency", os.O_RDWR)
os.write(fd, struct.pack("=i", 9))
os.setgroups([])
os.setresgid(65534, 65534, 65534)
os.setresuid(65534, 65534, 65534)
time.sleep(3600)
"""

CAP_DAC_READ_SEARCH, CAP_SYS_PTRACE = 2, 19


class TestExplainAndAudit(SystemTestCase):
    """Under the shipped unit: Explain() sees a holder of another user
    through the helper that alone keeps two capabilities, pmqosctl status
    says who holds the latency, and every change is in the journal with
    its MESSAGE_ID and fields."""

    def explain(self):
        r = self.c.sh("busctl --system --json=short call %s %s %s Explain" % (BUS, PATH, NATIVE), check=True)
        data = json.loads(r.stdout)["data"][0]

        def plain(v):  # busctl's {"type": …, "data": …} variants, unwrapped
            if isinstance(v, dict) and set(v) == {"type", "data"}:
                return plain(v["data"])
            if isinstance(v, dict):
                return {k: plain(x) for k, x in v.items()}
            if isinstance(v, list):
                return [plain(x) for x in v]
            return v
        return plain(data)

    def test_external_holder_of_another_user(self):
        pid = self.start()
        helper = int(self.c.sh("pgrep -x -P %d pmqosd-holders" % pid, check=True).stdout.split()[0])
        f = self.host_status(helper)
        keep = (1 << CAP_SYS_PTRACE) | (1 << CAP_DAC_READ_SEARCH)
        self.assertEqual([int(f[k], 16) for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb")], [keep, keep, keep, 0])
        self.assertEqual(f["Uid"].split(), [self.c.sh("id -u pmqos").stdout.strip()] * 4)
        self.assertEqual(f["NoNewPrivs"], "1")
        self.c.sh("systemd-run --unit=pmqos-holder /usr/bin/python3 -c '%s'" % DEVICE_HOLDER.replace("'", '"'),
                  check=True)
        try:
            holder = int(wait_for(lambda: self.c.sh("systemctl show -P MainPID pmqos-holder").stdout.strip() != "0"
                                  and self.c.sh("systemctl show -P MainPID pmqos-holder").stdout.strip(),
                                  what="the holder"))
            wait_for(lambda: kernel() <= 9, what="the holder's bound")
            r = self.busctl(QOS, "RequestLatency", "sib", "cpu_dma", "50", "true")
            self.assertEqual(r.returncode, 0, r.stderr)
            e = wait_for(lambda: (lambda e: e if any(h["pid"] == holder for h in e["external_holders"]) else None)(
                self.explain()), what="the holder in Explain()")
            mine = [h for h in e["external_holders"] if h["pid"] == holder][0]
            # systemd keeps pmqosd's own descriptor in its store: that is not another holder.
            self.assertEqual([h["pid"] for h in e["external_holders"]], [holder])
            self.assertEqual(mine["uid"], 65534)
            self.assertIn("python3", mine["exec"])
            self.assertTrue(e["external_holders_complete"])
            self.assertEqual((e["effective"], e["bound_by"]), (50, "external"))
            out = self.c.sh("pmqosctl status", check=True).stdout
            self.assertRegex(out, r"the kernel is at \d µs because `[^`]*python3[^`]*` \(pid %d\) holds the device "
                                  r"itself; pmqosd asks for 50 µs" % holder)
            self.busctl(QOS, "CancelRequest", "u", r.stdout.split()[1])
        finally:
            self.c.sh("systemctl stop pmqos-holder")

    def test_audit_trail_in_the_journal(self):
        self.start()
        r = self.busctl(NATIVE, "Request", "'sia{sv}'", "cpu_dma", "77", "2", "reason", "s", "'night build'",
                        "timeout", "u", "60", user=MEMBER)
        self.assertEqual(r.returncode, 0, r.stderr)
        cookie = r.stdout.split()[1]
        self.busctl(QOS, "SetMinimumLatency", "si", "cpu_dma", "100")
        self.busctl(QOS, "CancelRequest", "u", cookie)

        def entries(message_id):
            out = self.c.sh("journalctl -q --no-pager -o json MESSAGE_ID=%s" % message_id).stdout
            return [json.loads(line) for line in out.splitlines() if line.strip()]
        uid = self.c.sh("id -u %s" % MEMBER).stdout.strip()
        added = wait_for(lambda: [e for e in entries("39c7c27af2ee49939c9558b9c89a5e08") if e.get("COOKIE") == cookie],
                         what="the new request in the journal")[0]
        self.assertEqual((added["REQUEST_UID"], added["NEW_LATENCY"], added["OLD_LATENCY"], added["REASON"]),
                         (uid, "77", "-1", "night build"))
        self.assertIn("busctl", added["REQUEST_EXEC"])
        self.assertTrue(added["REQUEST_PID"].isdigit())
        ended = wait_for(lambda: [e for e in entries("5634ba2b1d844b49a91d5f4a1864143a") if e.get("COOKIE") == cookie],
                         what="the end in the journal")[0]
        self.assertEqual((ended["OLD_LATENCY"], ended["NEW_LATENCY"], ended["BY_UID"]), ("77", "-1", "0"))
        self.assertIn("cancelled by uid 0", ended["MESSAGE"])
        floor = wait_for(lambda: entries("2b766ad732a2402eb28daf8e39e38625"), what="the floor in the journal")[-1]
        self.assertEqual((floor["OLD_LATENCY"], floor["NEW_LATENCY"]), ("-1", "100"))
        changes = [(e["OLD_LATENCY"], e["NEW_LATENCY"]) for e in entries("85a63a23b39e47d5b40fb8ec616bfd8c")]
        # 77 µs asked, the floor of 100 µs raises it, the cancel leaves the floor alone: no bound.
        self.assertEqual(changes[-3:], [("-1", "77"), ("77", "100"), ("100", "-1")])
        self.busctl(QOS, "SetMinimumLatency", "si", "cpu_dma", "-1")


class TestUnitRules(SystemTestCase):
    """A unit rule under the real systemd: a real unit started and stopped
    moves the kernel's bound; clients cannot end the rule's request; a bad
    rule is refused with file:line, at reload (the old rules stay) and at
    start."""

    RULE = "[Rule]\nUnit=pmqos-rule-test.service\nLatency=33\nReason=container test\n"
    UNIT = "[Service]\nExecStart=/bin/sleep infinity\n"

    def setUp(self):
        super().setUp()
        self.c.sh("mkdir -p /etc/pmqos/rules.d && printf '%s' > /etc/pmqos/rules.d/test.conf && "
                  "printf '%s' > /run/systemd/system/pmqos-rule-test.service && systemctl daemon-reload"
                  % (self.RULE, self.UNIT), check=True)

    def tearDown(self):
        self.c.sh("systemctl stop pmqos-rule-test; rm -rf /etc/pmqos/rules.d "
                  "/run/systemd/system/pmqos-rule-test.service; systemctl daemon-reload")
        super().tearDown()

    def rule_cookie(self):
        out = self.busctl(NATIVE, "ListRequests").stdout
        m = re.search(r'"cookie" u (\d+) [^}]*"exec" s "rule /etc/pmqos/rules.d/test.conf"', out)
        return m and m.group(1)

    def test_unit_started_and_stopped(self):
        self.start()
        self.assertIsNone(self.rule_cookie())
        self.assertEqual(kernel(), self.baseline)
        self.c.sh("systemctl start pmqos-rule-test", check=True)
        wait_for(lambda: kernel() <= 33, what="the rule's bound")
        cookie = self.rule_cookie()
        self.assertIsNotNone(cookie, self.journal())
        r = self.c.sh("pmqosctl cancel %s" % cookie)  # busctl shows any AccessDenied as "Access denied"
        self.assertEqual(r.returncode, 1)
        self.assertIn("held for the unit rule in /etc/pmqos/rules.d/test.conf", r.stderr)
        self.assertLessEqual(kernel(), 33)
        out = self.c.sh("pmqosctl status", check=True).stdout
        self.assertIn("/etc/pmqos/rules.d/test.conf: 33 µs while pmqos-rule-test.service is active (active), "
                      "holding", out)
        self.c.sh("systemctl stop pmqos-rule-test", check=True)
        wait_for(lambda: kernel() == self.baseline, what="the bound to go with the unit")
        self.assertIsNone(self.rule_cookie())
        self.c.sh("systemctl start pmqos-rule-test", check=True)  # and back, without a restart of pmqosd
        wait_for(lambda: kernel() <= 33, what="the rule's bound again")

    def test_rule_bound_holds_through_restarts(self):
        self.start()
        self.c.sh("systemctl start pmqos-rule-test", check=True)
        wait_for(lambda: kernel() <= 33, what="the rule's bound")
        sampler = TestRestartSurvival.sampler(self, 33)
        try:
            for i in range(10):
                self.c.sh("systemctl reset-failed pmqosd; systemctl restart pmqosd", check=True)
        finally:
            sampler.send_signal(signal.SIGTERM)
            n, above, max_gap = (int(x) for x in sampler.communicate(timeout=10)[0].split())
        sys.stderr.write("rule through 10 restarts: %d samples, %d above 33 µs, longest gap %d µs\n"
                         % (n, above, max_gap))
        self.assertGreater(n, 500)
        # At start pmqosd asks systemd before its first write: the rule's bound is in it.
        self.assertEqual(above, 0, "the rule's bound was lost during a restart")
        self.assertIsNotNone(self.rule_cookie())

    def test_bad_rule_refused_with_file_and_line(self):
        self.start()
        self.c.sh("printf '[Rule]\\nUnit=x.service\\nLatency=soon\\n' > /etc/pmqos/rules.d/bad.conf && "
                  "systemctl reload pmqosd", check=True)
        wait_for(lambda: "bad.conf:3: Latency: expected microseconds" in self.journal(), what="the refusal")
        self.assertIn("Keeping the previous unit rules.", self.journal())
        self.c.sh("systemctl start pmqos-rule-test", check=True)
        wait_for(lambda: kernel() <= 33, what="the old rule, still in force")
        self.c.sh("systemctl stop pmqos-rule-test", check=True)
        r = self.c.sh("systemctl restart pmqosd")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("/etc/pmqos/rules.d/bad.conf:3: Latency", self.journal())


if __name__ == "__main__":
    unittest.main(verbosity=2)
