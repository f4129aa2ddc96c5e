# SPDX-License-Identifier: LGPL-2.1-or-later
"""The container tier's machinery: a Debian tree (tests/system/make-tree)
booted under systemd-nspawn with a real systemd as PID 1, the real
/dev/cpu_dma_latency bound in, the real system bus and polkitd, and pmqos
installed in it the way a system gets it. Two platforms (PMQOS_PLATFORM):

  bookworm  Debian 12, systemd 252, dbus-daemon (the default)
  trixie    Debian 13, systemd 257, dbus-broker

and two ways in (PMQOS_INSTALL):

  meson  meson install --destdir of this tree (prefix /usr, sysconfdir
         /etc), copied in, then sysusers, daemon-reload, bus reload by hand
  deb    the Debian packages (packaging/build-deb; PMQOS_DEB_DIR holds them,
         or they are built here) installed with dpkg -i, which alone must
         do all of that

One container is booted for the whole run (tests/system/run loads every
module against it); each test starts from pmqosd stopped and its state
removed. Needs root, systemd-nspawn and debootstrap; says so and skips
otherwise."""

import atexit
import glob
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
failure = False

PLATFORM = os.environ.get("PMQOS_PLATFORM", "bookworm")
INSTALL = os.environ.get("PMQOS_INSTALL", "meson")
# What each platform must be: the tier checks it is testing what it says.
# build: the make-tree tree pmqos is built in for that platform (None: this
# machine, Debian 12; a Debian 12 binary need not run on 13: libfuse3's
# soname differs).
PLATFORMS = {"bookworm": {"systemd": 252, "bus": "dbus-daemon", "build": None},
             "trixie": {"systemd": 257, "bus": "dbus-broker", "build": "trixie-build"}}

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
        self.tree = subprocess.run([os.path.join(SOURCE_ROOT, "tests", "system", "make-tree"), PLATFORM],
                                   check=True, stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()[-1]
        self.tree_seconds = time.monotonic() - t0
        self.work = tempfile.mkdtemp(prefix="pmqos-system-")
        t0 = time.monotonic()
        self.install_tree = self.build_debs() if INSTALL == "deb" else self.install()
        self.build_seconds = time.monotonic() - t0
        self.cgroup = os.path.join(cgroup2_root(), "pmqos-system-%d" % os.getpid())
        os.mkdir(self.cgroup)
        env = dict(os.environ, SYSTEMD_NSPAWN_UNIFIED_HIERARCHY="1", SYSTEMD_NSPAWN_API_VFS_WRITABLE="1")
        self.log = open(os.path.join(self.work, "nspawn.log"), "w")
        # nspawn makes sub-cgroups of its own: give it one to itself. Its
        # system call filter refuses fanotify_init() to the container (EPERM
        # even with CAP_SYS_ADMIN): allowed, as a host allows pmqosd's watch
        # of the per-CPU knobs' foreign writers.
        self.nspawn = subprocess.Popen(
            ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', self.cgroup,
             "systemd-nspawn", "-q", "-D", self.tree, "--volatile=overlay", "--boot", "--register=no",
             "--keep-unit", "--system-call-filter=bpf fanotify_init fanotify_mark", "--bind=%s" % DEVICE, "--bind=/dev/fuse",
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

    def build_tree(self):
        """The tree to build in for this platform, or None for this machine."""
        name = PLATFORMS[PLATFORM]["build"]
        if name is None:
            return None
        return subprocess.run([os.path.join(SOURCE_ROOT, "tests", "system", "make-tree"), name], check=True,
                              stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()[-1]

    def install(self):
        build = os.path.join(self.work, "build")
        dest = os.path.join(self.work, "dest")
        tree = self.build_tree()
        wrap = [os.path.join(SOURCE_ROOT, "packaging", "in-tree"), tree, SOURCE_ROOT, self.work, "--"] if tree else []
        for cmd in (["meson", "setup", build, SOURCE_ROOT, "--prefix=/usr", "--sysconfdir=/etc",
                     "--libexecdir=lib/pmqos", "--buildtype=debugoptimized", "-Dtests=false"],
                    ["ninja", "-C", build],
                    ["meson", "install", "-C", build, "--no-rebuild", "--quiet", "--destdir", dest]):
            subprocess.run(wrap + cmd, check=True, stdout=subprocess.DEVNULL)
        return dest

    def build_debs(self):
        """The packages, twice: as they are and as an upgrade to them (a
        higher version, in upgrade/); from PMQOS_DEB_DIR/PLATFORM, else
        built here."""
        if os.environ.get("PMQOS_DEB_DIR"):
            debs = os.path.join(os.environ["PMQOS_DEB_DIR"], PLATFORM)
        else:
            debs = os.path.join(self.work, "debs")
            tree = self.build_tree()
            for flag, out in (([], debs), (["--upgrade"], os.path.join(debs, "upgrade"))):
                subprocess.run([os.path.join(SOURCE_ROOT, "packaging", "build-deb")] + (["--in", tree] if tree else [])
                               + flag + [out], check=True, stdout=subprocess.DEVNULL)
        for d in (debs, os.path.join(debs, "upgrade")):
            if not glob.glob(os.path.join(d, "pmqos_*.deb")):
                raise AssertionError("no pmqos_*.deb in %s (PMQOS_DEB_DIR=DIR: packaging/build-deb [--in TREE] "
                                     "DIR/%s and packaging/build-deb [--in TREE] --upgrade DIR/%s/upgrade)"
                                     % (d, PLATFORM, PLATFORM))
        return debs

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
        self.check_platform()
        if INSTALL == "deb":
            # As an administrator would: the packages alone do sysusers,
            # daemon-reload and the bus's reload (its dpkg trigger).
            self.sh("dpkg -i $(ls /pmqos-install/*.deb | grep -v -- -dbgsym_)", check=True, timeout=120)
            self.after_install = self.sh("systemctl is-active pmqosd; systemctl is-enabled pmqosd").stdout.split()
            self.sh("mkdir -p /var/tmp/pmqos-pristine && cp /etc/pmqos/pmqosd.conf /var/tmp/pmqos-pristine/",
                    check=True)
        else:
            self.sh("cp -a /pmqos-install/. / && systemd-sysusers && systemctl daemon-reload && "
                    "systemctl reload dbus && systemctl restart polkit && "
                    "mkdir -p /var/tmp/pmqos-pristine && cp /pmqos-install/etc/pmqos/pmqosd.conf "
                    "/var/tmp/pmqos-pristine/", check=True)
        for user, groups in ((MEMBER, "-G pmqos"), (PLAIN, "")):
            self.sh("useradd --system --no-create-home --shell /usr/sbin/nologin %s %s" % (groups, user), check=True)

    def check_platform(self):
        """The tree is what PLATFORMS says: systemd's version, and which
        bus answers on the system bus's socket."""
        want = PLATFORMS[PLATFORM]
        out = self.sh("systemctl --version", check=True).stdout
        self.systemd = int(re.match(r"systemd (\d+)", out).group(1))
        bus_pid = self.sh("systemctl show -P MainPID dbus.service", check=True).stdout.strip()
        self.bus = os.path.basename(self.sh("readlink /proc/%s/exe" % bus_pid, check=True).stdout.strip())
        if self.bus == "dbus-broker-launch":
            self.bus = "dbus-broker"
        if (self.systemd, self.bus) != (want["systemd"], want["bus"]):
            raise AssertionError("platform %s: systemd %d with %s, expected systemd %d with %s"
                                 % (PLATFORM, self.systemd, self.bus, want["systemd"], want["bus"]))

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


def get():
    """The one container of this run, booted at the first call; skips
    (with a SKIP: line) where the tier cannot run."""
    global container, failure
    if failure:
        raise AssertionError("the container did not come up (see the first failure)")
    if container is None:
        reason = why_not()
        if reason:
            sys.stderr.write("SKIP: the container tier (%s)\n" % reason)
            raise unittest.SkipTest(reason)
        try:
            container = Container()
        except BaseException:
            failure = True
            raise
        atexit.register(container.stop)
        sys.stderr.write("container tier on %s (systemd %d, %s), pmqos from %s: tree %.1f s (cached when < 1 s), "
                         "build+install %.1f s, boot %.1f s\n"
                         % (PLATFORM, container.systemd, container.bus, INSTALL, container.tree_seconds,
                            container.build_seconds, container.boot_seconds))
    return container


class SystemTestCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = get()

    def setUp(self):
        self.baseline = kernel()
        self.c.sh("systemctl stop pmqosd; systemctl reset-failed pmqosd; rm -rf /var/lib/pmqos; "
                  "cp /var/tmp/pmqos-pristine/pmqosd.conf /etc/pmqos/", check=True)

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

    def requests(self):
        """ListRequests as a list of dicts, busctl's variants unwrapped."""
        out = self.c.sh("busctl --system --json=short call %s %s %s ListRequests" % (BUS, PATH, NATIVE),
                        check=True).stdout
        return [{k: v["data"] for k, v in r.items()} for r in json.loads(out)["data"][0]]


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
