# SPDX-License-Identifier: LGPL-2.1-or-later
"""Explain(): what sets the bound (a request, a floor, another holder of the
device), who else holds the device (a real process, also of another user,
seen by pmqosd running as pmqos), each CPU's bound and C-states on a fake
sysfs with two CPU models and on this machine's, per-CPU files changed
behind pmqosd's back, a kernel that ignores writes (a FUSE file), and the
bound on calls waiting for a scan."""

import ctypes
import os
import pwd
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest

from gi.repository import GLib

from contract import BUS_NAME, LATENCY_MAX, LIMITS, NATIVE_IFACE, PATH
from fixtures import BrokerTestCase, IS_ROOT, NOBODY, TIME_SCALE, main, proc_status, setpriv, skip_notice, wait_for
from fake_sysfs import cpu_file, make_fake_sysfs
from hostenv import pmqos_user_install, pmqos_user_uninstall
from large_sysfs import FLOODER, LARGE_CPUS, LARGE_MODEL, UNLIMITED_CONFIG, large_state, make_large_sysfs

IGNORING_DEVICE = os.environ.get("PMQOS_IGNORING_DEVICE")
CAP_DAC_READ_SEARCH, CAP_SYS_PTRACE = 2, 19

# Holds the device with a value, optionally as another user, until its stdin closes.
HOLDER = r"""
import os, struct, sys
fd = os.open(sys.argv[1], os.O_RDWR)
os.write(fd, struct.pack("=i", int(sys.argv[2])))
if sys.argv[3] != "--":
    os.setgroups([])
    os.setresgid(int(sys.argv[3]), int(sys.argv[3]), int(sys.argv[3]))
    os.setresuid(int(sys.argv[3]), int(sys.argv[3]), int(sys.argv[3]))
print("holding", flush=True)
sys.stdin.read()
"""

# Holds the device in n processes of uid (one opens it, as root, then forks)
# until stdin closes; with fds, first as many descriptors of /dev/null, the
# device's above them all.
MANY_HOLDERS = r"""
import os, resource, sys
path, n, uid, fds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (fds + 128, hard))  # within the hard limit: no CAP_SYS_RESOURCE
nul = os.open("/dev/null", os.O_RDONLY)
for k in range(fds):
    os.dup2(nul, 64 + k)
fd = os.open(path, os.O_RDWR)
os.dup2(fd, 64 + fds)
os.close(fd)
os.setgroups([])
os.setresgid(uid, uid, uid)
os.setresuid(uid, uid, uid)
children = [pid for pid in (os.fork() for _ in range(n - 1)) if pid != 0 or (os.read(0, 1), os._exit(0))]
print("holding", flush=True)
os.read(0, 1)
for pid in children:
    os.waitpid(pid, 0)
"""

# What pmqosd(8) says of the holder report: at most this many listed, and
# this many entries of one user's processes looked at per scan.
HOLDERS_LISTED = 64
SCAN_PER_UID = 32768


def spare_uid(k=0):
    """A uid no account has and no other test uses: a user of our own, whose
    processes no concurrent test's share the scan's bound with."""
    uid = 2000000000 + (os.getpid() % 100000) * 10 + k
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return uid
    raise AssertionError("uid %d has an account" % uid)


class ManyHolders:
    """n processes of uid holding the device (the first with fds more
    descriptors of /dev/null below it); pids, the first's first."""

    def __init__(self, path, n, uid, fds=0, marker="pmqos-test-many"):
        self.proc = subprocess.Popen([sys.executable, "-c", MANY_HOLDERS, path, str(n), str(uid), str(fds), "--",
                                      marker], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "holding"
        self.pid = self.proc.pid
        self.pids = [self.pid] + [int(p) for p in open("/proc/%d/task/%d/children" % (self.pid, self.pid)).read().split()]

    def stop(self):
        self.proc.stdin.close()
        self.proc.wait()
        self.proc.stdout.close()


def setUpModule():
    pmqos_user_install()


def tearDownModule():
    pmqos_user_uninstall()


class Holder:
    """A real process other than pmqosd holding the device."""

    def __init__(self, path, value, uid=None, marker="pmqos-test-holder"):
        args = [sys.executable, "-c", HOLDER, path, str(value)] + ([str(uid)] if uid is not None else [])
        # The marker shows in the command line that Explain() reports.
        self.proc = subprocess.Popen(args + ["--", marker], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "holding"
        self.pid = self.proc.pid

    def stop(self):
        self.proc.stdin.close()
        self.proc.wait()
        self.proc.stdout.close()


def online_cpus(root="/sys"):
    with open(os.path.join(root, "devices/system/cpu/online")) as f:
        text = f.read().strip()
    cpus = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus += list(range(int(lo), int(hi or lo) + 1))
    return cpus


def fold_key(cpu):
    """What two CPUs share when ExplainFolded() puts them in one group."""
    return (cpu["bound"], cpu["resume_latency"], cpu["foreign"],
            tuple((s["name"], s["latency"], s["allowed"], s["disabled"]) for s in cpu["cstates"]))


def helper_pid(daemon_pid):
    """pmqosd's holder scan helper: its child named pmqosd-holders."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                st = proc_status(int(entry))
            except OSError:
                continue
            if st.get("PPid") == str(daemon_pid) and st.get("Name") == "pmqosd-holders":
                return int(entry)
    return None


class ExplainTestCase(BrokerTestCase):
    def explain(self, c=None):
        return (c or self.client()).call("Explain", None, iface=NATIVE_IFACE)[0]

    def explain_folded(self, c=None):
        return (c or self.client()).call("ExplainFolded", None, iface=NATIVE_IFACE)[0]

    def reply_size(self, c, method):
        """The bytes of method's reply body as sent (its serialized GVariant)."""
        return c.conn.call_sync(BUS_NAME, PATH, NATIVE_IFACE, method, None, None, 0, 60000, None).get_size()

    def assert_folds_like_explain(self, folded, explained):
        """folded's groups are explained's CPUs partitioned by identity, each
        group's figures its CPUs' (usage and time summed); the other keys as
        Explain's (but the scan's holders, found anew)."""
        self.assertEqual(set(folded) - {"cpu_groups"}, set(explained) - {"cpus"})
        for key in ("effective", "kernel", "floor", "bound_by", "binding", "rules"):
            self.assertEqual(folded[key], explained[key], key)
        by_cpu = {c["cpu"]: c for c in explained["cpus"]}
        listed = [n for g in folded["cpu_groups"] for n in g["cpus"]]
        self.assertEqual(sorted(listed), sorted(by_cpu))  # each CPU in exactly one group
        self.assertEqual(len(listed), len(set(listed)))
        keys = set()
        for g in folded["cpu_groups"]:
            self.assertEqual(g["cpus"], sorted(g["cpus"]))
            self.assertEqual(set(g), {"cpus", "bound", "resume_latency", "foreign", "cstates"})
            key = fold_key(g)
            self.assertNotIn(key, keys, "two groups of identical CPUs")
            keys.add(key)
            for n in g["cpus"]:
                self.assertEqual(fold_key(by_cpu[n]), key, "CPU %d in a group it differs from" % n)
        return {n: g for g in folded["cpu_groups"] for n in g["cpus"]}

    def request(self, c, value, **options):
        o = {k: (GLib.Variant("au", v) if k == "cpus" else GLib.Variant("s", v)) for k, v in options.items()}
        return c.call("Request", "sia{sv}", "cpu_dma", value, o, iface=NATIVE_IFACE)[0]


@unittest.skipUnless(IS_ROOT, "needs root: the real device and other processes' descriptors")
class TestBoundBy(ExplainTestCase):
    def test_request_binds(self):
        c = self.client()
        self.request(c, 80, reason="mixing")
        cookie = self.request(c, 55, reason="recording")
        e = self.explain()
        self.assertEqual((e["effective"], e["bound_by"], e["floor"]), (55, "request", -1))
        self.assertLessEqual(e["kernel"], 55)
        self.assertEqual(e["binding"]["cookie"], cookie)
        self.assertEqual(e["binding"]["reason"], "recording")
        listed = [r for r in c.call("ListRequests", None, iface=NATIVE_IFACE)[0] if r["cookie"] == cookie]
        self.assertEqual(e["binding"], listed[0])  # the same keys and values as ListRequests
        self.assertFalse(e["kernel_ignores_writes"])

    def test_nothing_binds(self):
        e = self.explain()
        self.assertEqual((e["effective"], e["binding"]), (-1, {}))
        # Another program may hold the device on this machine; then it is named.
        self.assertEqual(e["bound_by"], "none" if e["kernel"] == LATENCY_MAX else "external")

    def test_floors(self):
        c = self.client()
        self.request(c, 50)
        c.call("SetMinimumLatency", "si", "cpu_dma", 100)
        e = self.explain()
        self.assertEqual((e["effective"], e["floor"], e["bound_by"], e["binding"]), (100, 100, "floor", {}))
        c.call("SetMinimumLatency", "si", "cpu_dma", 30)
        self.assertEqual(self.explain()["bound_by"], "request")  # the floor is below the request

        config = os.path.join(self.bus.dir, "pmqosd.conf")
        with open(config, "w") as f:
            f.write("[pmqosd]\nDefaultMinimumLatency=200\n")
        self.start_daemon(("--config", config))
        c = self.client()
        self.request(c, 50)
        e = self.explain(c)
        self.assertEqual((e["effective"], e["bound_by"]), (200, "default-floor"))

    def test_external_holder_of_another_user(self):
        c = self.client()
        self.request(c, 55)
        holder = Holder(self.kernel.path, 7, uid=NOBODY)
        try:
            e = self.explain()
            mine = [h for h in e["external_holders"] if h["pid"] == holder.pid]
            self.assertEqual(len(mine), 1, e["external_holders"])
            self.assertEqual(mine[0]["uid"], NOBODY)
            self.assertIn("pmqos-test-holder", mine[0]["exec"])
            self.assertNotIn(self.daemon.proc.pid, [h["pid"] for h in e["external_holders"]])
            self.assertTrue(e["external_holders_complete"])
            self.assertLessEqual(e["kernel"], 7)
            self.assertEqual((e["effective"], e["bound_by"], e["binding"]), (55, "external", {}))
            for cpu in e["cpus"]:
                self.assertLessEqual(cpu["bound"], 7)  # the kernel's value is every CPU's bound
        finally:
            holder.stop()
        e = self.explain()
        self.assertNotIn(holder.pid, [h["pid"] for h in e["external_holders"]])
        self.assertEqual(e["bound_by"], "request" if e["kernel"] == 55 else "external")

    def test_waiting_calls_are_bounded_per_user(self):
        helper = helper_pid(self.daemon.proc.pid)
        self.assertIsNotNone(helper)
        os.kill(helper, signal.SIGSTOP)  # a scan that takes its time
        try:
            peers = [self.peer(uid=NOBODY) for _ in range(6)]
            for p in peers:
                p.send_call("Explain", None, iface=NATIVE_IFACE)

            def answered():
                return [p for p in peers if select.select([p.proc.stdout], [], [], 0)[0]]
            # Beyond EXPLAIN_WAITING_PER_UID (4), a user's calls are refused at once.
            refused = self.assert_eventually(lambda: len(answered()) == 2 and answered(), what="two refusals")
            for p in refused:
                self.assertEqual(p.receive_call()[1], LIMITS)
            other = self.peer(uid=pwd.getpwnam("daemon").pw_uid)
            other.send_call("Explain", None, iface=NATIVE_IFACE)  # another user is not locked out
            self.assert_persists(lambda: not select.select([other.proc.stdout], [], [], 0)[0], 0.3,
                                 what="the other user's call waiting for the scan")
            os.kill(helper, signal.SIGCONT)
            for p in [p for p in peers if p not in refused] + [other]:
                self.assertEqual(p.receive_call()[0], "ok")
        finally:
            os.kill(helper, signal.SIGCONT)
        self.assertIn(self.explain()["bound_by"], ("none", "external"))

    def test_helper_gone_explain_still_answers(self):
        helper = helper_pid(self.daemon.proc.pid)
        os.kill(helper, signal.SIGKILL)
        c = self.client()
        self.request(c, 45)
        e = wait_for(lambda: (lambda e: e if not e["external_holders_complete"] else None)(self.explain(c)),
                     what="Explain() to report holders unknown")
        self.assertEqual((e["effective"], e["external_holders"]), (45, []))
        self.assertIn("holder scan helper ended", self.daemon.output())
        self.assertEqual(self.explain(c)["bound_by"], "request")  # and again: no helper, still answers


@unittest.skipUnless(IS_ROOT, "needs root: holders of other users")
class TestHolderReport(ExplainTestCase):
    """The report a user cannot bend: root's holders listed first whatever
    the number of a user's, what is left out counted, and a user's
    descriptors costing the scan at most the bound per user."""

    def holders(self, *procs):
        for p in procs:
            self.addCleanup(p.stop)
        return procs

    def test_root_holder_listed_before_a_users_many(self):
        uid = spare_uid()
        users, = self.holders(ManyHolders(self.kernel.path, HOLDERS_LISTED + 6, uid))
        root, = self.holders(Holder(self.kernel.path, 9))  # after them: a higher pid, found last
        e = self.explain()
        listed = e["external_holders"]
        self.assertEqual(len(listed), HOLDERS_LISTED)
        self.assertEqual((listed[0]["pid"], listed[0]["uid"]), (root.pid, 0))  # root's first
        self.assertIn("pmqos-test-holder", listed[0]["exec"])
        self.assertEqual({h["uid"] for h in listed[1:]}, {uid})
        self.assertLessEqual({h["pid"] for h in listed[1:]}, set(users.pids))
        self.assertEqual(e["external_holders_left_out"], HOLDERS_LISTED + 6 + 1 - HOLDERS_LISTED)
        self.assertFalse(e["external_holders_complete"])
        self.assertNotIn(uid, [u["uid"] for u in e["external_holders_unscanned"]])

        users.stop()
        e = self.explain()
        self.assertEqual([h["pid"] for h in e["external_holders"]], [root.pid])
        self.assertEqual(e["external_holders_left_out"], 0)

    def test_users_many_descriptors_cost_a_bounded_scan(self):
        """Four processes of one user with 12,000 descriptors each (each its
        device's last, above them; a process may have no more than the hard
        limit, 20,000 here): two fit in the user's bound and are looked at,
        the third is cut before its device and the fourth not looked at."""
        uid, other = spare_uid(1), spare_uid(2)
        heavy, light, root = self.holders(ManyHolders(self.kernel.path, 4, uid, fds=12000),
                                          ManyHolders(self.kernel.path, 1, other), Holder(self.kernel.path, 9))
        self.assertEqual(heavy.pids, sorted(heavy.pids))  # /proc's order: the scan's
        e = self.explain()
        pids = [h["pid"] for h in e["external_holders"]]
        self.assertIn(root.pid, pids)
        self.assertIn(light.pid, pids)  # another user's: not cut for this one's
        self.assertEqual([p for p in heavy.pids if p in pids], heavy.pids[:2], e["external_holders"])
        self.assertIn({"uid": uid, "processes": 2}, e["external_holders_unscanned"])
        self.assertNotIn(other, [u["uid"] for u in e["external_holders_unscanned"]])
        self.assertEqual(e["external_holders_left_out"], 0)
        self.assertFalse(e["external_holders_complete"])


@unittest.skipUnless(IS_ROOT, "needs root: switching to user pmqos")
class TestUnprivilegedDaemon(ExplainTestCase):
    daemon_args = ("--user", "pmqos")

    def test_helper_alone_keeps_two_capabilities(self):
        pmqos = pwd.getpwnam("pmqos")
        main_status = proc_status(self.daemon.proc.pid)
        self.assertEqual(int(main_status["CapEff"], 16), 0)
        self.assertEqual(int(main_status["CapPrm"], 16), 0)
        helper = helper_pid(self.daemon.proc.pid)
        st = proc_status(helper)
        self.assertEqual(st["Uid"].split(), [str(pmqos.pw_uid)] * 4)
        keep = (1 << CAP_SYS_PTRACE) | (1 << CAP_DAC_READ_SEARCH)
        self.assertEqual((int(st["CapEff"], 16), int(st["CapPrm"], 16), int(st["CapBnd"], 16)), (keep, keep, keep))
        self.assertEqual(st["NoNewPrivs"], "1")

        holder = Holder(self.kernel.path, 9, uid=NOBODY)
        try:
            e = self.explain()
            self.assertIn(holder.pid, [h["pid"] for h in e["external_holders"]])
            self.assertTrue(e["external_holders_complete"])
            self.assertNotIn(helper, [h["pid"] for h in e["external_holders"]])
        finally:
            holder.stop()


FAKE_MODELS = {
    # cpu: [(name, latency, disable, usage, time)]
    "big": [("POLL", 0, 0, 10, 100), ("C1", 2, 0, 200, 5000), ("C1E", 10, 0, 300, 9000), ("C6", 133, 1, 0, 0)],
    "little": [("POLL", 0, 0, 5, 50), ("C1", 1, 0, 50, 700), ("C6", 85, 0, 900, 120000)],
}


def make_cpuidle(root, cpu, model):
    for k, (name, latency, disable, usage, time_us) in enumerate(FAKE_MODELS[model]):
        d = os.path.join(root, "devices/system/cpu/cpu%d/cpuidle/state%d" % (cpu, k))
        os.makedirs(d)
        for f, v in (("name", name), ("latency", latency), ("disable", disable), ("usage", usage), ("time", time_us)):
            with open(os.path.join(d, f), "w") as fh:
                fh.write("%s\n" % v)


class TestFakeSysfs(ExplainTestCase):
    def setUp(self):
        self.sysfs = make_fake_sysfs({0: "0", 1: "0", 2: "40", 3: "0"}, offline=(3,))
        self.addCleanup(shutil.rmtree, self.sysfs, True)
        for cpu, model in ((0, "big"), (1, "big"), (2, "little"), (3, "little")):
            make_cpuidle(self.sysfs, cpu, model)
        self.daemon_args = ("--sysfs-root", self.sysfs)
        super().setUp()

    def cpus(self, e):
        return {c["cpu"]: c for c in e["cpus"]}

    def test_models_bounds_and_states(self):
        c = self.client()
        self.request(c, 5, cpus=[1])
        e = self.explain(c)
        cpus = self.cpus(e)
        self.assertEqual(sorted(cpus), [0, 1, 2])  # cpu3 is offline
        global_bound = e["kernel"] if e["kernel"] < LATENCY_MAX else -1
        self.assertEqual(cpus[0]["bound"], global_bound)
        self.assertEqual((cpus[1]["bound"], cpus[1]["resume_latency"], cpus[1]["foreign"]), (5, "5", False))
        states = {s["name"]: s for s in cpus[1]["cstates"]}
        self.assertEqual(list(states), ["POLL", "C1", "C1E", "C6"])
        self.assertEqual([states[n]["allowed"] for n in states], [True, True, False, False])
        self.assertEqual([states[n]["disabled"] for n in states], [False, False, False, True])
        self.assertEqual((states["C1E"]["latency"], states["C1E"]["usage"], states["C1E"]["time"]), (10, 300, 9000))
        # cpu2 is another model, bound by a value someone else wrote there.
        self.assertEqual((cpus[2]["bound"], cpus[2]["resume_latency"], cpus[2]["foreign"]), (40, "40", True))
        self.assertEqual([(s["name"], s["latency"], s["allowed"]) for s in cpus[2]["cstates"]],
                         [("POLL", 0, True), ("C1", 1, True), ("C6", 85, False)])

    def test_folded_groups_identical_cpus(self):
        c = self.client()
        e = self.explain_folded(c)
        self.assertNotIn("cpus", e)
        groups = e["cpu_groups"]
        self.assertEqual([g["cpus"] for g in groups], [[0, 1], [2]])  # one model, another; cpu3 offline
        self.assert_folds_like_explain(e, self.explain(c))
        big = groups[0]
        self.assertEqual([(s["name"], s["usage"], s["time"]) for s in big["cstates"]],
                         [(n, 2 * u, 2 * t) for n, _, _, u, t in FAKE_MODELS["big"]])  # summed
        self.assertEqual((groups[1]["bound"], groups[1]["resume_latency"], groups[1]["foreign"]), (40, "40", True))
        # A per-CPU request on cpu1 sets it apart from cpu0; its end folds them again.
        cookie = self.request(c, 5, cpus=[1])
        e = self.explain_folded(c)
        self.assertEqual([g["cpus"] for g in e["cpu_groups"]], [[0], [1], [2]])
        cpu1 = e["cpu_groups"][1]
        self.assertEqual((cpu1["bound"], cpu1["resume_latency"]), (5, "5"))
        self.assertEqual([s["allowed"] for s in cpu1["cstates"]], [True, True, False, False])
        self.assertEqual([(s["usage"], s["time"]) for s in cpu1["cstates"]],
                         [(u, t) for _, _, _, u, t in FAKE_MODELS["big"]])
        self.assert_folds_like_explain(e, self.explain(c))
        c.call("Cancel", "u", cookie, iface=NATIVE_IFACE)
        self.assertEqual([g["cpus"] for g in self.explain_folded(c)["cpu_groups"]], [[0, 1], [2]])

    def test_changed_behind_our_back_and_residency(self):
        c = self.client()
        self.request(c, 5, cpus=[1])
        self.assertFalse(self.cpus(self.explain(c))[1]["foreign"])
        with open(cpu_file(self.sysfs, 1), "w") as f:
            f.write("n/a\n")  # another tool writes 0 µs there
        # Per-CPU figures may be a few sweeps' time old (on 4 CPUs, ~1 ms).
        cpu1 = self.assert_eventually(lambda: (lambda x: x if x["resume_latency"] == "n/a" else None)(
            self.cpus(self.explain(c))[1]), what="the changed file in Explain()")
        self.assertEqual((cpu1["resume_latency"], cpu1["bound"], cpu1["foreign"]), ("n/a", 0, True))
        self.assertEqual([s["allowed"] for s in cpu1["cstates"]], [True, False, False, False])

        state = os.path.join(self.sysfs, "devices/system/cpu/cpu0/cpuidle/state1")
        for f, v in (("usage", 260), ("time", 8000)):
            with open(os.path.join(state, f), "w") as fh:
                fh.write("%d\n" % v)
        c1 = self.assert_eventually(lambda: (lambda x: x if x["usage"] == 260 else None)(
            self.cpus(self.explain(c))[0]["cstates"][1]), what="the new residency in Explain()")
        self.assertEqual((c1["usage"], c1["time"]), (260, 8000))  # read again, not kept

    def test_odd_sysfs_text_is_cleaned(self):
        state = os.path.join(self.sysfs, "devices/system/cpu/cpu0/cpuidle/state2")
        with open(os.path.join(state, "name"), "wb") as f:
            f.write(b"C1E\xff\x1b[31m\n")
        with open(os.path.join(state, "latency"), "w") as f:
            f.write("-5\n")  # not a latency: the list ends before it
        cpu0 = self.cpus(self.explain())[0]
        self.assertEqual([s["name"] for s in cpu0["cstates"]], ["POLL", "C1"])
        with open(os.path.join(state, "latency"), "w") as f:
            f.write("10\n")
        c = self.client()
        cpu0 = self.assert_eventually(lambda: (lambda x: x if len(x["cstates"]) > 2 else None)(
            self.cpus(self.explain(c))[0]), what="the third state in Explain()")
        name = cpu0["cstates"][2]["name"]
        self.assertEqual(name, "C1E\\xff\\x1b[31m")


# Each of 4 callers; fewer when a checker slows pmqosd down.
FLOOD_CALLS = 40 if TIME_SCALE == 1 else 10

IN_OPEN, IN_CLOSE_NOWRITE = 0x20, 0x10


class OpenCounter:
    """Counts the opens of one file (inotify): a file every sysfs sweep reads.
    Closes are watched too: inotify merges an event with an identical one
    still unread, and an open is never next to another open then."""

    def __init__(self, path):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0 or self.libc.inotify_add_watch(self.fd, path.encode(), IN_OPEN | IN_CLOSE_NOWRITE) < 0:
            raise OSError(ctypes.get_errno(), "inotify on %s" % path)
        self.count = 0

    def take(self):
        """The opens since the last call."""
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            while data:
                _, mask, _, length = struct.unpack_from("iIII", data)
                self.count += bool(mask & IN_OPEN)
                data = data[16 + length:]
        n, self.count = self.count, 0
        return n

    def close(self):
        os.close(self.fd)


class TestLargeMachine(ExplainTestCase):
    """512 CPUs × 6 states of fake sysfs: Explain() lists every CPU, shows a
    per-CPU request at once and a change behind pmqosd's back eventually,
    and a flood of calls from another user costs a few sysfs sweeps, not one
    per call, while root is answered."""

    @classmethod
    def setUpClass(cls):
        cls.sysfs = make_large_sysfs()
        cls.config = os.path.join(cls.sysfs, "pmqosd.conf")
        with open(cls.config, "w") as f:
            f.write(UNLIMITED_CONFIG)  # the bus budget would slow the flood: here only the tables do
        cls.daemon_args = ("--sysfs-root", cls.sysfs, "--config", cls.config)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.sysfs, True)

    def usage_file(self, cpu, k):
        return os.path.join(self.sysfs, "devices/system/cpu/cpu%d/cpuidle/state%d/usage" % (cpu, k))

    def write_usage(self, cpu, k, value):
        with open(self.usage_file(cpu, k), "w") as f:
            f.write("%d\n" % value)

    def test_every_cpu_and_own_requests_at_once(self):
        c = self.client()
        e = self.explain(c)
        self.assertEqual([cpu["cpu"] for cpu in e["cpus"]], list(range(LARGE_CPUS)))
        for cpu in e["cpus"]:
            n = cpu["cpu"]
            self.assertEqual((cpu["bound"], cpu["resume_latency"], cpu["foreign"]), (-1, "0", False))
            self.assertEqual([(s["name"], s["latency"], s["disabled"], s["usage"], s["time"]) for s in cpu["cstates"]],
                             [large_state(n, k) for k in range(len(LARGE_MODEL))])
        # pmqosd's own write to a per-CPU file is in the very next answer.
        cookie = self.request(c, 30, cpus=[300, 511])
        cpus = self.explain(c)["cpus"]
        for n in (300, 511):
            self.assertEqual((cpus[n]["bound"], cpus[n]["resume_latency"], cpus[n]["foreign"]), (30, "30", False))
            self.assertEqual([s["allowed"] for s in cpus[n]["cstates"]], [True, True, True, False, False, False])
        self.assertEqual(cpus[299]["bound"], -1)
        c.call("Cancel", "u", cookie, iface=NATIVE_IFACE)
        cpus = self.explain(c)["cpus"]
        self.assertEqual([cpus[n]["resume_latency"] for n in (299, 300, 511)], ["0", "0", "0"])

    def test_folded_is_small(self):
        c = self.client()
        e = self.explain_folded(c)
        # C8 is disabled on odd CPUs only: two groups, even and odd.
        self.assertEqual([g["cpus"] for g in e["cpu_groups"]],
                         [list(range(0, LARGE_CPUS, 2)), list(range(1, LARGE_CPUS, 2))])
        for parity, g in enumerate(e["cpu_groups"]):
            self.assertEqual((g["bound"], g["resume_latency"], g["foreign"]), (-1, "0", False))
            states = [large_state(n, k) for n in g["cpus"] for k in range(len(LARGE_MODEL))]
            self.assertEqual([(s["name"], s["latency"], s["disabled"], s["usage"], s["time"]) for s in g["cstates"]],
                             [(name, latency, int(k == 5 and parity == 1),
                               sum(st[3] for st in states if st[0] == name),
                               sum(st[4] for st in states if st[0] == name))
                              for k, (name, latency) in enumerate(LARGE_MODEL)])
        self.assert_folds_like_explain(e, self.explain(c))
        folded, explained = self.reply_size(c, "ExplainFolded"), self.reply_size(c, "Explain")
        sys.stderr.write("on %d CPUs: Explain() %d bytes, ExplainFolded() %d bytes\n"
                         % (LARGE_CPUS, explained, folded))
        self.assertLess(folded * 10, explained)
        # A per-CPU request on two CPUs sets each apart from its parity's group.
        self.request(c, 30, cpus=[300, 511])
        e = self.explain_folded(c)
        self.assertEqual([g["cpus"][0] for g in e["cpu_groups"]], [0, 1, 300, 511])  # by their first CPU
        groups = self.assert_folds_like_explain(e, self.explain(c))
        self.assertEqual((groups[300]["cpus"], groups[511]["cpus"]), ([300], [511]))
        self.assertEqual(len(e["cpu_groups"]), 4)

    def test_change_behind_our_back_seen_eventually(self):
        c = self.client()
        self.assertEqual(self.explain(c)["cpus"][511]["cstates"][5]["usage"], 511005)
        self.addCleanup(self.write_usage, 511, 5, 511005)  # the tree is the class's
        self.write_usage(511, 5, 999999)
        self.assert_eventually(lambda: self.explain(c)["cpus"][511]["cstates"][5]["usage"] == 999999,
                               timeout=30, what="the new usage in Explain()")

    def test_flood_costs_few_sweeps(self):
        opens = OpenCounter(self.usage_file(0, 0))  # read once by each sweep, by nothing else
        self.addCleanup(opens.close)
        root = self.client()
        self.explain(root)
        self.assertEqual(opens.take(), 1)  # the first answer swept; and the count works
        flooders = [subprocess.Popen([*setpriv(NOBODY), sys.executable, "-c", FLOODER, BUS_NAME, PATH, NATIVE_IFACE,
                                      str(FLOOD_CALLS)], env=self.bus.env, stdout=subprocess.PIPE, text=True)
                    for _ in range(4)]
        try:
            # Root is answered all along (however slowly: no timing asserted).
            while any(f.poll() is None for f in flooders):
                self.assertGreaterEqual(root.call("GetLatency", "s", "cpu_dma", timeout=600000)[0], -1)
                time.sleep(0.05)
        finally:
            for f in flooders:
                f.wait(600)
        counts = []
        for f in flooders:
            counts.append([int(x) for x in f.stdout.read().split()])
            f.stdout.close()
        sweeps = opens.take() + 1
        self.assertEqual(counts, [[FLOOD_CALLS, 0]] * 4, "(answered, refused) per caller")
        sys.stderr.write("%d Explain() calls answered, %d sysfs sweeps\n" % (4 * FLOOD_CALLS, sweeps))
        # A sweep for every round of calls, as before, makes more than a
        # quarter of the calls: a round answers at most 4 of this user's
        # calls (EXPLAIN_WAITING_PER_UID), and the first answer swept. Here
        # a sweep serves ~9 sweeps' time of rounds (7 to 15 calls a sweep
        # on a loaded 2-core box). Not under valgrind: it slows building
        # the answer (user space) far more than the sysfs reads (system
        # calls), so a sweep there serves a round or so (12 sweeps for 40
        # calls) — still at most a tenth of the loop's time, the promise.
        if TIME_SCALE == 1:
            self.assertLess(sweeps * 4, 4 * FLOOD_CALLS, "a sysfs sweep for every few calls")


@unittest.skipUnless(IS_ROOT, "needs root: the real sysfs")
class TestRealSysfs(ExplainTestCase):
    def test_every_online_cpu(self):
        e = self.explain()
        self.assertEqual(sorted(c["cpu"] for c in e["cpus"]), online_cpus())
        for cpu in e["cpus"]:
            with open(cpu_file("/sys", cpu["cpu"])) as f:
                self.assertEqual(cpu["resume_latency"], f.read().strip())
            idle = "/sys/devices/system/cpu/cpu%d/cpuidle" % cpu["cpu"]
            n = len([d for d in os.listdir(idle) if d.startswith("state")]) if os.path.isdir(idle) else 0
            self.assertEqual(len(cpu["cstates"]), n)


    def test_folded_every_online_cpu_once(self):
        c = self.client()
        self.assert_folds_like_explain(self.explain_folded(c), self.explain(c))


def mirror_sysfs(cpus):
    """A fake sysfs tree of this machine's cpus: their resume latencies and
    C-states, read from /sys; the caller removes it."""
    def text(path, default):
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError:
            return default
    root = make_fake_sysfs({n: text(cpu_file("/sys", n), "0") for n in cpus})
    for n in cpus:
        k = 0
        while os.path.isdir("/sys/devices/system/cpu/cpu%d/cpuidle/state%d" % (n, k)):
            d = "devices/system/cpu/cpu%d/cpuidle/state%d" % (n, k)
            os.makedirs(os.path.join(root, d))
            for f in ("name", "latency", "disable", "usage", "time"):
                with open(os.path.join(root, d, f), "w") as fh:
                    fh.write(text(os.path.join("/sys", d, f), "0") + "\n")
            k += 1
    return root


class TestMirroredSysfs(ExplainTestCase):
    """ExplainFolded() on a copy of this machine's CPUs (a per-CPU request
    writes the tree, which the real /sys must not be here)."""

    def setUp(self):
        cpus = online_cpus()
        if 0 not in cpus or 1 not in cpus:
            self.skipTest("needs CPUs 0 and 1 online")
        self.sysfs = mirror_sysfs(cpus)
        self.addCleanup(shutil.rmtree, self.sysfs, True)
        self.daemon_args = ("--sysfs-root", self.sysfs)
        super().setUp()

    def test_a_per_cpu_request_splits_a_group(self):
        c = self.client()
        groups = self.assert_folds_like_explain(self.explain_folded(c), self.explain(c))
        cpus = {x["cpu"]: x for x in self.explain(c)["cpus"]}
        if fold_key(cpus[0]) == fold_key(cpus[1]):
            self.assertIs(groups[0], groups[1])
        else:
            skip_notice("CPUs 0 and 1 folded", "this machine's CPUs 0 and 1 differ")
        self.request(c, 5, cpus=[1])
        groups = self.assert_folds_like_explain(self.explain_folded(c), self.explain(c))
        self.assertNotIn(1, groups[0]["cpus"])
        self.assertEqual((groups[1]["bound"], groups[1]["resume_latency"]), (5, "5"))


@unittest.skipUnless(IS_ROOT, "needs root: mounting a FUSE file system")
class TestKernelIgnoringWrites(ExplainTestCase):
    def setUp(self):
        super().setUp()
        if not IGNORING_DEVICE:
            self.skipTest("pmqos-ignoring-device was not built (no libfuse3)")
        self.mount = tempfile.mkdtemp(prefix="pmqos-fuse-")
        self.fuse = subprocess.Popen([IGNORING_DEVICE, self.mount])
        self.addCleanup(self.unmount)
        wait_for(lambda: os.path.exists(os.path.join(self.mount, "device")), what="the FUSE device")
        self.start_daemon(device=os.path.join(self.mount, "device"))

    def unmount(self):
        self.daemon.stop()
        subprocess.run(["fusermount3", "-u", self.mount], check=False)
        self.fuse.wait(10)
        os.rmdir(self.mount)

    def test_detected_and_logged_once(self):
        c = self.client()
        self.request(c, 50)
        e = self.explain(c)
        self.assertEqual((e["kernel"], e["effective"], e["kernel_ignores_writes"]), (LATENCY_MAX, 50, True))
        self.assertEqual(e["bound_by"], "request")  # pmqosd asks; the kernel does not listen
        self.request(c, 20)
        # Audit lines are written when pmqosd's loop has nothing more to do: maybe just after the reply.
        self.assert_eventually(lambda: "The kernel ignores writes" in self.daemon.output(), what="the audit line")
        self.assertEqual(self.daemon.output().count("The kernel ignores writes"), 1)


@unittest.skipUnless(IS_ROOT, "needs root: mounting a FUSE file system")
class TestStalledFileSystem(ExplainTestCase):
    """A process holding a file named like the device on a FUSE mount whose
    server never answers getattr (a hostile user's mount): the scan must
    not wait for it, so Explain() answers and names no such holder."""

    def setUp(self):
        super().setUp()
        if not IGNORING_DEVICE:
            self.skipTest("pmqos-ignoring-device was not built (no libfuse3)")
        self.mount = tempfile.mkdtemp(prefix="pmqos-fuse-")
        # Named like the device pmqosd holds (the real one, or the stand-in).
        name = os.path.basename(self.kernel.path)
        self.fuse = subprocess.Popen([IGNORING_DEVICE, self.mount, name, "hang"])
        self.addCleanup(self.unmount)
        path = os.path.join(self.mount, name)
        wait_for(lambda: os.path.exists(path), what="the FUSE file")
        self.holder = subprocess.Popen([sys.executable, "-c", "import os, sys; fd = os.open(sys.argv[1], os.O_RDWR); "
                                        "print(flush=True); sys.stdin.read()", path],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.holder.stdout.readline()

    def unmount(self):
        self.fuse.kill()  # its getattr never returns: no clean unmount
        self.fuse.wait(10)
        subprocess.run(["umount", "-l", self.mount], check=False)
        self.holder.kill()
        self.holder.wait(10)
        self.holder.stdout.close()
        os.rmdir(self.mount)

    def test_scan_does_not_wait(self):
        c = self.client()
        # Answered at all: a scan that waited for the FUSE file's getattr
        # (which never returns) would not be, whatever the timeout.
        e = c.call("Explain", None, iface=NATIVE_IFACE, timeout=int(10000 * TIME_SCALE))[0]
        self.assertNotIn(self.holder.pid, [h["pid"] for h in e["external_holders"]])
        self.assertTrue(e["external_holders_complete"])


if not IS_ROOT:
    skip_notice("Explain() on the real device", "needs root")
if not IGNORING_DEVICE:
    skip_notice("a kernel that ignores writes", "pmqos-ignoring-device was not built: install libfuse3-dev")

if __name__ == "__main__":
    main()
