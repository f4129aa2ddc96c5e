# SPDX-License-Identifier: LGPL-2.1-or-later
"""The one fixtures module of the integration tests: a private system bus,
the real pmqosd on the real device (or a file when not root, said out loud),
polkitd, clients on the bus (in this process or as other users), signal
capture, and kernel read-back. The names a test checks are in contract.py;
the host side of authorization (users, polkit files) in hostenv.py; the TAP
runner in tap.py (main() here runs it)."""

import json
import os
import pwd
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import gi

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

from contract import (  # noqa: E402
    BUS_NAME,
    BUS_POLICY_FILE,
    DBUS_IFACE,
    DBUS_NAME,
    DBUS_PATH,
    DEVICE,
    LATENCY_MAX,
    PATH,
    PEER,
    POLKIT_BUS_NAME,
    QOS_IFACE,
)
from hostenv import IS_ROOT, POLKITD, SOURCE_ROOT  # noqa: E402
import tap  # noqa: E402

main = tap.main  # every suite ends with main()

NOBODY = 65534

PMQOSD = os.environ.get("PMQOSD", os.path.join(SOURCE_ROOT, "build", "daemon", "pmqosd"))
PMQOSCTL = os.environ.get("PMQOSCTL", os.path.join(os.path.dirname(PMQOSD), "..", "client-lib", "pmqosctl", "pmqosctl"))
HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peer.py")
ATTACKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "attacker.py")



def pmqosd_has_asan():
    """Whether the pmqosd under test is built with AddressSanitizer: it then
    runs 2-4 times slower, and takes every freed block's memory anew."""
    ldd = subprocess.run(["ldd", PMQOSD], capture_output=True, text=True).stdout
    return "libasan" in ldd


def _time_scale():
    if os.environ.get("PMQOS_TIME_SCALE"):
        return float(os.environ["PMQOS_TIME_SCALE"])
    if os.environ.get("PMQOSD_WRAPPER"):
        return 4.0
    return 3.0 if pmqosd_has_asan() else 1.0


# Bounds on how long pmqosd takes are about pmqosd, not about the checker it
# may run under (PMQOSD_WRAPPER, e.g. valgrind, is 20-50 times slower; ASan
# 2-4 times): they are multiplied by this. Such a bound only tells "answered"
# from "waited for a timeout, or forever"; what a budget grants is counted
# instead (pmqosd's PMQOSD_TEST_FREEZE_BUDGET_CLOCK), never timed.
TIME_SCALE = _time_scale()


BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
    <deny send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus" send_member="UpdateActivationEnvironment"/>
    <deny send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.systemd1.Activator"/>
  </policy>
  <policy user="root">
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.systemd1.Activator"/>
    <!-- busctl monitor, as Debian's system.conf lets root -->
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Monitoring"/>
  </policy>
  {extra}
  <includedir>{policy_dir}</includedir>
</busconfig>
"""


def setpriv(uid, gid=None):
    """The command prefix that runs a program as uid (and gid, else uid's
    number), with no supplementary groups; the test skipped, saying so, when
    it cannot (only root can)."""
    if not IS_ROOT:
        raise unittest.SkipTest("needs root: runs a client as uid %d (setpriv)" % uid)
    gid = uid if gid is None else gid
    return ["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid, "--clear-groups"]


USER_POLICY = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <policy user="{user}">
    <allow own="org.freedesktop.PMQoS"/>
    <allow own="org.freedesktop.UPower"/>
    <allow send_destination="org.freedesktop.PMQoS"/>
    <allow receive_sender="org.freedesktop.PMQoS"/>
  </policy>
</busconfig>
"""


def skip_notice(what, why):
    """A skip is never silent: say what is not checked and why."""
    sys.stderr.write("SKIP: %s (%s)\n" % (what, why))


def small_tmpfs(test, what, mode="0700", size="1m"):
    """A tmpfs of its own for test (unmounted at its cleanup), or the test
    skipped with a notice saying what goes unchecked."""
    mnt = tempfile.mkdtemp(prefix="pmqos-tmpfs-")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=%s" % (size, mode), "tmpfs", mnt],
                       stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        os.rmdir(mnt)
        skip_notice(what, "cannot mount a tmpfs: " + r.stderr.strip())
        test.skipTest("cannot mount a tmpfs")
    test.addCleanup(os.rmdir, mnt)
    test.addCleanup(subprocess.run, ["umount", mnt])
    return mnt


def wait_for(predicate, timeout=5.0, interval=0.005, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.1fs waiting for %s" % (timeout, what))
        time.sleep(interval)


def remote_error_name(e):
    return Gio.DBusError.get_remote_error(e) or ""


# Which bus the suite runs on: PMQOS_TEST_BUS=dbus-broker (meson test --setup
# dbus-broker) or dbus-daemon, the default. Where the two legitimately differ
# (limits, quotas, error names for them) a test asks ON_BROKER and says why.
BUS_KIND = os.environ.get("PMQOS_TEST_BUS", "dbus-daemon") or "dbus-daemon"
if BUS_KIND not in ("dbus-daemon", "dbus-broker"):
    raise SystemExit("PMQOS_TEST_BUS=%s: dbus-daemon or dbus-broker" % BUS_KIND)
ON_BROKER = BUS_KIND == "dbus-broker"
# The bench's launcher: dbus-broker-launch without systemd as PID 1.
BROKER_RUN = os.path.join(SOURCE_ROOT, "tests", "bench", "dbus-broker-run")


class PrivateBus:
    """A system bus (dbus-daemon, or dbus-broker: BUS_KIND) on a socket in a
    world-traversable temp dir (polkitd, which drops to its own user, must be
    able to reach it), with the project's bus policy."""

    def __init__(self, extra_config="", with_polkit=False):
        self.dir = tempfile.mkdtemp(prefix="pmqos-bus-")
        os.chmod(self.dir, 0o755)
        self.socket = os.path.join(self.dir, "bus")
        # One runtime directory per bus, as /run/pmqos is one per boot: restarts on it re-adopt.
        self.runtime_dir = os.path.join(self.dir, "run")
        policy_dir = os.path.join(self.dir, "system.d")
        os.mkdir(policy_dir)
        shutil.copy(os.path.join(SOURCE_ROOT, "dbus", BUS_POLICY_FILE), policy_dir)
        if with_polkit:
            shutil.copy("/usr/share/dbus-1/system.d/org.freedesktop.PolicyKit1.conf", policy_dir)
        if not IS_ROOT:
            # pmqosd runs as this user here: on this private bus only, the
            # user has what the project's policy gives root.
            with open(os.path.join(policy_dir, "pmqos-test-user.conf"), "w") as f:
                f.write(USER_POLICY.format(user=pwd.getpwuid(os.getuid()).pw_name))
        # Peers may run as other users: give them a copy they can read whatever
        # the permissions of the source tree.
        self.helper = shutil.copy(HELPER, self.dir)
        self.attacker = shutil.copy(ATTACKER, self.dir)
        config = os.path.join(self.dir, "bus.conf")
        with open(config, "w") as f:
            f.write(BUS_CONFIG.format(socket=self.socket, policy_dir=policy_dir, extra=extra_config))
        self.log_path = os.path.join(self.dir, "%s.log" % BUS_KIND)
        self.launcher = 0
        if ON_BROKER:
            self._start_broker(config)
        else:
            self._start_dbus_daemon(config)
        self.env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=self.address)

    def _start_dbus_daemon(self, config):
        with open(self.log_path, "w") as log:
            out = subprocess.run(
                ["dbus-daemon", "--config-file=" + config, "--fork", "--print-address=1", "--print-pid=1"],
                stdout=subprocess.PIPE,
                stderr=log,
                check=True,
                text=True,
            ).stdout.split()
        self.address, self.pid = out[0], int(out[1])

    def _start_broker(self, config):
        if not IS_ROOT:
            # Its launcher logs only to the journal: dbus-broker-run gives it a
            # stand-in in a mount namespace of its own, which takes root here.
            shutil.rmtree(self.dir, ignore_errors=True)
            raise unittest.SkipTest("dbus-broker: its launcher needs a mount namespace of its own (root)")
        with open(self.log_path, "w") as log:
            # (This python for the launcher's journal stand-in: a python3 on PATH may be a slow shim.)
            out = subprocess.run(["sh", BROKER_RUN, config, self.socket], stdout=subprocess.PIPE, stderr=log,
                                 check=True, text=True, timeout=60,
                                 env=dict(os.environ, PMQOS_PYTHON=sys.executable)).stdout.split()
        # The launcher leads a process group: the broker, the journal stand-in.
        self.launcher, self.pid = int(out[0]), int(out[1])
        # As systemd's dbus.socket (SocketMode=0666): every user may connect.
        os.chmod(self.socket, 0o666)
        self.address = "unix:path=" + self.socket

    def kill(self):
        """The bus dies at once (SIGKILL), as in a crash: every peer loses it."""
        os.kill(self.pid, signal.SIGKILL)
        self.pid = 0

    def stop(self):
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            self.pid = 0
        if self.launcher:
            try:
                os.killpg(self.launcher, signal.SIGTERM)
            except ProcessLookupError:
                pass
            self.launcher = 0
        shutil.rmtree(self.dir, ignore_errors=True)

    def connect(self):
        return Client(self)


class Polkitd:
    """The real polkitd on the private bus. As root it reads actions from
    /usr/share/polkit-1/actions and rules from /etc/polkit-1/rules.d."""

    BINARY = POLKITD

    def __init__(self, bus):
        self.bus = bus
        self.log_path = os.path.join(bus.dir, "polkitd-%d.log" % time.monotonic_ns())
        self.log = open(self.log_path, "w")
        # Without --no-debug: what polkitd says of itself ("Terminating
        # runaway script") reaches its log (output()).
        self.proc = subprocess.Popen([self.BINARY], env=bus.env, stdout=self.log, stderr=subprocess.STDOUT)
        probe = bus.connect()
        try:
            wait_for(lambda: self.proc.poll() is not None or probe.name_has_owner(POLKIT_BUS_NAME),
                     timeout=10, what="polkitd to own its name")
        finally:
            probe.close()
        if self.proc.poll() is not None:
            with open(self.log_path) as f:
                raise AssertionError("polkitd exited with %d:\n%s" % (self.proc.returncode, f.read()))

    def output(self):
        self.log.flush()
        with open(self.log_path, errors="backslashreplace") as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


# PMQOS_TEST_STANDIN=1: a file for the device even as root, and no write to
# the real sysfs, to run beside another run that owns them.
STANDIN = os.environ.get("PMQOS_TEST_STANDIN") == "1"


class Kernel:
    """The latency device, or a file standing in for it when not root."""

    def __init__(self):
        standin = STANDIN
        if IS_ROOT and not standin:
            self.path = DEVICE
            self.real = True
        else:
            fd, self.path = tempfile.mkstemp(prefix="pmqos-device-")
            os.write(fd, struct.pack("=i", LATENCY_MAX))
            os.close(fd)
            self.real = False
            skip_notice("kernel read-back on %s" % DEVICE, "%s: using the file %s instead"
                        % ("PMQOS_TEST_STANDIN=1" if standin else "not root", self.path))
        self.baseline = self.read()

    def read(self):
        # Opening the device adds a no-constraint request, closing drops it.
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            return struct.unpack("=i", os.pread(fd, 4, 0))[0]
        finally:
            os.close(fd)

    def released(self):
        """True when our daemon no longer constrains the machine."""
        return self.read() == self.baseline

    def cleanup(self):
        if not self.real:
            os.unlink(self.path)


class Daemon:
    def __init__(self, bus, kernel, args=(), state_dir=None, env=None, device=None, runtime_dir=None, pass_fds=(),
                 via=None):
        self.bus = bus
        # A state directory of our own lives inside the bus's temp dir, removed with it.
        self.state_dir = state_dir or os.path.join(bus.dir, "state-%d" % time.monotonic_ns())
        self.runtime_dir = runtime_dir or bus.runtime_dir
        self.log_path = os.path.join(bus.dir, "pmqosd-%d.log" % time.monotonic_ns())
        self.log = open(self.log_path, "w")
        # PMQOSD_WRAPPER runs the daemon under a checker, e.g. valgrind (see .ci/run).
        wrapper = shlex.split(os.environ.get("PMQOSD_WRAPPER", ""))
        self.proc = subprocess.Popen(
            [*([via] if via else []), *wrapper, PMQOSD, "--device", device or kernel.path, "--state-dir", self.state_dir,
             "--runtime-dir", self.runtime_dir, "--verbose", *args],
            env=dict(bus.env, **(env or {})),
            pass_fds=pass_fds,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        probe = bus.connect()
        try:
            wait_for(
                lambda: self.proc.poll() is not None or probe.name_has_owner(BUS_NAME),
                timeout=30,
                what="pmqosd to own its name",
            )
        finally:
            probe.close()
        if self.proc.poll() is not None:
            raise AssertionError("pmqosd exited with %d:\n%s" % (self.proc.returncode, self.output()))

    def output(self):
        if not self.log.closed:
            self.log.flush()
        # What pmqosd logs is UTF-8; should a bug ever break that, the test still shows the rest.
        with open(self.log_path, errors="backslashreplace") as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.log.close()
        return code


class Client:
    """One connection to the private bus, with signal capture."""

    def __init__(self, bus):
        self.conn = Gio.DBusConnection.new_for_address_sync(
            bus.address,
            Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
            None,
            None,
        )
        self.signals = []
        self.subscriptions = []

    @property
    def name(self):
        return self.conn.get_unique_name()

    def close(self):
        for s in self.subscriptions:
            self.conn.signal_unsubscribe(s)
        self.subscriptions = []
        if not self.conn.is_closed():
            self.conn.close_sync(None)

    def call(self, method, signature=None, *args, path=PATH, iface=QOS_IFACE, dest=BUS_NAME, flags=0, timeout=10000):
        params = GLib.Variant("(%s)" % signature, args) if signature else None
        reply = self.conn.call_sync(
            dest, path, iface, method, params, None, Gio.DBusCallFlags(flags), timeout, None
        )
        return reply.unpack() if reply is not None else ()

    def call_error(self, method, signature=None, *args, **kw):
        """Calls and returns the D-Bus error name (and message) it must fail with."""
        try:
            self.call(method, signature, *args, **kw)
        except GLib.Error as e:
            return remote_error_name(e), e.message
        raise AssertionError("%s%r succeeded, expected an error" % (method, args))

    def name_has_owner(self, name):
        return self.call(
            "NameHasOwner", "s", name, path=DBUS_PATH, iface=DBUS_IFACE, dest=DBUS_NAME,
        )[0]

    def request(self, value, persistent=False):
        return self.call("RequestLatency", "sib", "cpu_dma", value, persistent)[0]

    def cancel(self, cookie):
        self.call("CancelRequest", "u", cookie)

    def latency(self):
        return self.call("GetLatency", "s", "cpu_dma")[0]

    def requests(self):
        return self.call("GetLatencyRequests")[0]

    def subscribe(self, path=PATH, iface=QOS_IFACE, member=None):
        def on_signal(conn, sender, obj_path, interface, signal_name, params):
            self.signals.append((obj_path, interface, signal_name, params.unpack()))

        self.subscriptions.append(
            self.conn.signal_subscribe(
                BUS_NAME, iface, member, path, None, Gio.DBusSignalFlags.NONE, on_signal
            )
        )
        # A round trip makes sure the bus has installed the match.
        self.name_has_owner(BUS_NAME)

    def pump(self, seconds=0.0):
        """Dispatch pending signals; with seconds > 0 keep dispatching that long."""
        ctx = GLib.MainContext.default()
        deadline = time.monotonic() + seconds
        while True:
            while ctx.iteration(False):
                pass
            if time.monotonic() >= deadline:
                return
            time.sleep(0.005)

    def take_signals(self, settle=0.2):
        """All signals received so far, after a quiet settle period."""
        # A round trip to pmqosd orders every signal it sent before it.
        self.call("Ping", path=PATH, iface=PEER)
        self.pump(settle)
        got, self.signals = self.signals, []
        return got


class Peer:
    """A client in another process, optionally as another user, driven by JSON
    lines (see peer.py). Its connection lives as long as the process."""

    def __init__(self, bus, uid=None, gid=None):
        cmd = [sys.executable, bus.helper]
        if uid is not None:
            cmd = [*setpriv(uid, gid), *cmd]
        self.proc = subprocess.Popen(
            cmd, env=bus.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        self.name = self._rpc({"op": "name"})["name"]
        self.pid = self.proc.pid

    def _send(self, msg):
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()

    def _receive(self):
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError("peer process died")
        return json.loads(line)

    def _rpc(self, msg):
        self._send(msg)
        return self._receive()

    def send_call(self, method, signature, *args, iface=QOS_IFACE, path=PATH, interactive=False,
                  dest=BUS_NAME):
        """Starts a call without waiting; collect the answer with receive_call()."""
        self._send(
            {"op": "call", "method": method, "signature": signature, "args": list(args), "iface": iface,
             "path": path, "interactive": interactive, "dest": dest}
        )

    def receive_call(self):
        """Returns ("ok", [results]) or ("error", name, message)."""
        r = self._receive()
        if "error" in r:
            return ("error", r["error"], r["message"])
        return ("ok", r["result"])

    def call(self, method, signature, *args, **kw):
        self.send_call(method, signature, *args, **kw)
        return self.receive_call()

    def burst(self, n, method, signature, *args, iface=QOS_IFACE, path=PATH, dest=BUS_NAME):
        """n copies of one call sent at once on this connection; their answers, in order."""
        r = self._rpc({"op": "burst", "n": n, "method": method, "signature": signature, "args": list(args),
                       "iface": iface, "path": path, "dest": dest})
        return [("error", x["error"], x["message"]) if "error" in x else ("ok", x["result"]) for x in r["results"]]

    def request(self, value, persistent=False):
        r = self.call("RequestLatency", "sib", "cpu_dma", value, persistent)
        if r[0] != "ok":
            raise AssertionError("request failed: %r" % (r,))
        return r[1][0]

    def kill(self, sig=signal.SIGKILL):
        self.proc.send_signal(sig)
        self.proc.wait()
        self.proc.stdin.close()
        self.proc.stdout.close()

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait()
            self.proc.stdout.close()


FORGE_SIGNAL = """
import json, sys
from gi.repository import Gio, GLib
conn = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
dest, path, iface, member, signature, text = json.loads(sys.argv[1])
body = GLib.Variant.parse(GLib.VariantType.new("(%s)" % signature), text, None, None)
conn.emit_signal(dest, path, iface, member, body)
conn.flush_sync(None)
"""


def forge_signal(bus, uid, destination, path, iface, member, signature, text):
    """A peer of another uid sends a signal straight to destination (a
    unique name), made to look like another sender's: the system bus lets
    any peer send signals. text is the body in GVariant text form."""
    cmd = [*setpriv(uid), "/usr/bin/python3", "-c", FORGE_SIGNAL, json.dumps([destination, path, iface, member, signature, text])]
    subprocess.run(cmd, env=bus.env, check=True, timeout=30)


def owner_of(client, name):
    return client.call("GetNameOwner", "s", name, path=DBUS_PATH, iface=DBUS_IFACE, dest=DBUS_NAME)[0]


class cpu_hog:
    """A process keeping one CPU busy while the with block runs: the broker
    and the test compete for time, as on a loaded machine."""

    def __enter__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()
        return False


# The "in a row" tests: 1,000 rounds, fewer when a checker slows pmqosd down.
ROUNDS = 1000 if TIME_SCALE == 1 else 100


def proc_status(pid):
    """/proc/PID/status as a dict of its fields."""
    fields = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            fields[k] = v.strip()
    return fields


def strace(pid, syscalls, out, follow=False):
    """strace tracing syscalls of pid into the file out, returned once it is
    attached (the kernel's TracerPid says so; the tracee is held until strace
    traces it, so nothing after the return is missed). SIGINT ends it."""
    cmd = ["strace", *(["-f"] if follow else []), "-qq", "-e", "trace=" + syscalls, "-o", out, "-p", str(pid)]
    tracer = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
    wait_for(lambda: tracer.poll() is not None or proc_status(pid)["TracerPid"] != "0", timeout=10,
             what="strace to attach to %d" % pid)
    if tracer.poll() is not None:
        raise AssertionError("strace -p %d exited with %d" % (pid, tracer.returncode))
    return tracer


def rss_kib(pid):
    return int(proc_status(pid)["VmRSS"].split()[0])


ROOT_ONLY = ("needs root: without polkitd (which needs root) pmqosd lets only root change requests, and the "
             "test's clients, bus policy or stand-ins are root's")


class BrokerTestCase(unittest.TestCase):
    """Each test gets a fresh bus and the device, restored after; and the
    daemon it needs, started when it needs it: by start_daemon(args, ...) when
    the test says which, else the class's (daemon_args) the first time the test
    reaches for it (self.daemon, self.client(), self.peer()). setUp starts no
    daemon, so a test that needs another or none pays for no default one.
    with_polkit: polkitd runs on the bus from before the first daemon."""

    daemon_args = ()
    # As another user than root the test is skipped, saying ROOT_ONLY: what
    # it asks pmqosd needs root. A class that runs as any user says False.
    root_only = True
    with_polkit = False
    kernel_class = None  # the device to run on: Kernel() (the real one, or a stand-in) unless a test says
    bus_extra_config = ""  # more bus policy, for tests that run stand-ins of other services

    def setUp(self):
        if self.root_only and not IS_ROOT:
            self.skipTest(ROOT_ONLY)
        # Cleanups run even when setUp fails half-way, so no bus or daemon leaks.
        self.clients = []
        self.peers = []
        self._daemon = None
        self._polkit = None
        self.kernel = (self.kernel_class or Kernel)()
        self.addCleanup(self._release_kernel)
        self.bus = PrivateBus(extra_config=self.bus_extra_config, with_polkit=self.with_polkit)
        self.addCleanup(lambda: self.bus.stop())
        self.addCleanup(lambda: self._polkit and self._polkit.stop())
        self.addCleanup(self._stop_daemon)
        self.addCleanup(self._close_clients)

    @property
    def polkit(self):
        """The polkitd of this test's bus (with_polkit), started on first use."""
        if self._polkit is None and self.with_polkit:
            self._polkit = Polkitd(self.bus)
        return self._polkit

    @polkit.setter
    def polkit(self, value):
        self._polkit = value

    @property
    def daemon(self):
        """The running daemon; the class's own, started now, if the test started none."""
        if self._daemon is None:
            self.start_daemon()
        return self._daemon

    @daemon.setter
    def daemon(self, value):
        self._daemon = value

    @property
    def state_dir(self):
        """The running daemon's state directory, None before the first: a
        restart passes it on (state_dir=self.state_dir) to keep the state."""
        return self._daemon.state_dir if self._daemon else None

    def start_daemon(self, args=None, env=None, state_dir=None, device=None, runtime_dir=None, pass_fds=(), via=None):
        """The daemon this test needs (the class's daemon_args by default, on
        the test's kernel device unless device says otherwise), in place of the
        one running, which is stopped first if it still runs."""
        if self._daemon is not None:
            self._daemon.stop()
        _ = self.polkit  # with_polkit: polkitd answers before pmqosd asks
        self._daemon = Daemon(self.bus, self.kernel, self.daemon_args if args is None else args, state_dir=state_dir,
                              env=env, device=device, runtime_dir=runtime_dir, pass_fds=pass_fds, via=via)
        return self._daemon

    def assert_eventually(self, predicate, timeout=5.0, what="condition"):
        """Waits for an event the test cannot subscribe to (bounded)."""
        return wait_for(predicate, timeout=timeout * TIME_SCALE, what=what)

    def assert_persists(self, predicate, seconds=0.5, what="condition"):
        """predicate holds all along for seconds: something must NOT happen."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.assertTrue(predicate(), "%s stopped holding" % what)
            time.sleep(0.02)

    def _close_clients(self):
        for c in self.clients:
            c.close()
        for p in self.peers:
            p.close()

    def _stop_daemon(self):
        if self._daemon is None:
            return
        code = self._daemon.stop()
        if code != 0 or self._outcome_failed():
            sys.stderr.write(self._daemon.output())
        self.assertEqual(code, 0, "pmqosd did not exit cleanly on SIGTERM")

    def _release_kernel(self):
        try:
            wait_for(self.kernel.released, what="the device to be released after pmqosd exits")
        finally:
            self.kernel.cleanup()

    def _outcome_failed(self):
        result = getattr(self, "_outcome", None)
        errors = getattr(getattr(result, "result", None), "errors", []) + \
            getattr(getattr(result, "result", None), "failures", [])
        return any(test is self for test, _ in errors)

    def client(self, start=True):
        """A connection to the bus, the daemon running (see daemon) unless
        start=False: a test that needs the bus without pmqosd, or before it."""
        if start:
            _ = self.daemon
        c = self.bus.connect()
        self.clients.append(c)
        return c

    def peer(self, uid=None, gid=None):
        """A client in another process, maybe another user; the daemon running."""
        _ = self.daemon
        p = Peer(self.bus, uid, gid)
        self.peers.append(p)
        return p

    def assertKernelAtMost(self, value):
        got = self.kernel.read()
        if self.kernel.real:
            self.assertLessEqual(got, value, "the kernel reports %d µs, more than the %d µs asked" % (got, value))
        else:
            self.assertEqual(got, value)

    def assertKernelReleased(self):
        wait_for(self.kernel.released, timeout=2, what="the kernel value to return to %d" % self.kernel.baseline)
