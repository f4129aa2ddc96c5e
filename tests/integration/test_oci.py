# SPDX-License-Identifier: LGPL-2.1-or-later
"""pmqos-oci-hook under a real OCI runtime (crun, tests/integration/oci.py):
the container's bound while it runs, released at its init's death before
poststop, poststop idempotent, CRI-O's annotation per CPU, two containers on
one CPU, a restart of pmqosd, no broker, bad annotations; the bound and its
release through podman. The confinement to the container's cpuset and
MachineWide= under crun; the hook run directly as CRI-O's and containerd's
runtimes run it (their annotations): sandboxes skipped, pods named, every
decision in the journal (a stand-in journal socket read back)."""

import glob
import json
import os
import shutil
import socket
import subprocess
import signal
import tempfile
import time

from contract import NATIVE_IFACE
from fixtures import BrokerTestCase, STANDIN, main, skip_notice
from held_util import make_cgroup
import oci

CPU = 1 if os.path.exists("/sys/devices/system/cpu/cpu1/power/pm_qos_resume_latency_us") else 0
CPU_FILE = "/sys/devices/system/cpu/cpu%d/power/pm_qos_resume_latency_us" % CPU
LAT = "org.freedesktop.pmqos.latency"
REQ = "org.freedesktop.pmqos.required"
CRIO = "cpu-c-states.crio.io"
CPUS = "org.freedesktop.pmqos.cpus"
OTHER = 0 if CPU == 1 else None  # a CPU outside a container on CPU


def read_cpu(cpu=CPU):
    with open("/sys/devices/system/cpu/cpu%d/power/pm_qos_resume_latency_us" % cpu) as f:
        return f.read().strip()


class OciTestCase(BrokerTestCase):
    def setUp(self):
        why = oci.missing() or ("PMQOS_TEST_STANDIN=1 keeps the test off the real device" if STANDIN else None)
        if why:
            skip_notice("pmqos-oci-hook with crun", why)
            self.skipTest(why)
        super().setUp()
        self.crun = oci.Crun(self.bus.address)
        self.addCleanup(self.crun.cleanup)
        self.hook_log = os.path.join(self.crun.dir, "hooks.err")

    def create(self, name, annotations, cpus=None, cgroup=None):
        a = dict(annotations)
        a["run.oci.hooks.stderr"] = self.hook_log  # crun's own key: where hooks' stderr goes
        code, out = self.crun.create(name, a, cpus, cgroup)
        return code, out

    def hook_stderr(self):
        try:
            with open(self.hook_log) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def requests(self):
        if getattr(self, "_lister", None) is None or self._lister_of is not self.daemon:
            self._lister, self._lister_of = self.client(), self.daemon  # one connection per daemon
        return self._lister.call("ListRequests", "", iface=NATIVE_IFACE)[0]

    def ours(self, name):
        return [r for r in self.requests() if r["reason"].split(" ")[:2] == ["container", name]]

    def init_pid(self, name):
        return self.crun.state(name)["pid"]


class TestLifetime(OciTestCase):
    def test_bound_while_running_released_on_kill_before_poststop(self):
        _ = self.daemon
        code, out = self.create("c1", {LAT: "42"})
        self.assertEqual(code, 0, out + self.hook_stderr())
        self.assertEqual(self.crun.run("start", "c1")[0], 0)
        self.assertKernelAtMost(42)
        [r] = self.ours("c1")
        self.assertEqual(r["bound_to"], "process")  # no container cgroup here: the init's pidfd
        self.assertTrue(r["target"].startswith("pid %d " % self.init_pid("c1")), r["target"])
        os.kill(self.init_pid("c1"), signal.SIGKILL)
        t0 = time.monotonic()
        self.assert_eventually(self.kernel.released, what="the bound to go with the container's init")
        ms = (time.monotonic() - t0) * 1000
        print("# released %.1f ms after kill -9 of the container's init" % ms)
        self.assertEqual(self.crun.state("c1")["status"], "stopped")
        self.assertNotIn("stopped", self.crun.hook_runs(), "poststop ran before crun delete")
        self.assertEqual(self.ours("c1"), [])
        code, out = self.crun.run("delete", "c1")
        self.assertEqual(code, 0, out)
        self.assertEqual(self.crun.hook_runs(), ["created", "stopped"])
        self.assertEqual(self.hook_stderr(), "", "poststop after the end printed something")

    def test_cgroup_bound_released_on_kill_before_poststop(self):
        # The container in a cgroup of its own: one the test makes under the
        # unified tree, crun (cgroupfs manager) making the container's below it.
        parent = make_cgroup(self)
        path = os.path.join(parent, "c5")
        self.addCleanup(lambda: self.crun.run("delete", "-f", "c5"))  # before the parent's removal
        self.crun.manager = "cgroupfs"
        _ = self.daemon
        code, out = self.create("c5", {LAT: "44"}, cgroup="/%s/c5" % os.path.basename(parent))  # crun's view
        self.assertEqual(code, 0, out + self.hook_stderr())
        self.assertEqual(self.crun.run("start", "c5")[0], 0)
        with open(os.path.join(path, "cgroup.procs")) as f:
            self.assertIn(str(self.init_pid("c5")), f.read().split())
        self.assertKernelAtMost(44)
        [r] = self.ours("c5")
        # Its path in pmqosd's own cgroup2 mount, not as the hook opened it
        # (in crun's mount namespace, cgroup2 at /sys/fs/cgroup).
        self.assertEqual((r["bound_to"], r["target"]), ("cgroup", parent + "/c5"))
        os.kill(self.init_pid("c5"), signal.SIGKILL)
        self.assert_eventually(self.kernel.released, what="the bound to go with the container's processes")
        self.assertEqual(self.crun.state("c5")["status"], "stopped")
        self.assertNotIn("stopped", self.crun.hook_runs(), "poststop ran before crun delete")
        self.assertEqual(self.ours("c5"), [])
        code, out = self.crun.run("delete", "c5")
        self.assertEqual(code, 0, out)
        self.assertEqual(self.crun.hook_runs(), ["created", "stopped"])
        self.assertEqual(self.hook_stderr(), "", "poststop after the end printed something")
        self.assertFalse(os.path.exists(path), "crun delete left the container's cgroup")

    def test_poststop_cancels_and_is_idempotent(self):
        _ = self.daemon
        self.assertEqual(self.create("c2", {LAT: "37"})[0], 0, self.hook_stderr())
        self.assertKernelAtMost(37)
        self.assertEqual(self.crun.run("delete", "-f", "c2")[0], 0)
        self.assertTrue(self.kernel.released())
        # poststop again, late, after the request ended: exit 0, nothing printed.
        state = '{"ociVersion":"1.0.2","id":"c2","status":"stopped","bundle":"%s"}' % self.crun.dir
        import subprocess
        for _ in range(2):
            p = subprocess.run([oci.HOOK], input=state.encode(), capture_output=True,
                               env={"DBUS_SYSTEM_BUS_ADDRESS": self.bus.address}, timeout=10)
            self.assertEqual((p.returncode, p.stdout, p.stderr), (0, b"", b""))

    def test_reason_names_the_pod(self):
        _ = self.daemon
        a = {LAT: "40", "io.kubernetes.pod.namespace": "ran", "io.kubernetes.pod.name": "du-0",
             "io.kubernetes.container.name": "l1"}
        self.assertEqual(self.create("c3", a)[0], 0, self.hook_stderr())
        [r] = self.ours("c3")
        self.assertEqual(r["reason"], "container c3 pod ran/du-0 name l1")
        self.assertEqual(r["value"], 40)

    def test_cstate_name(self):
        # A C-state name is the largest exit latency an online CPU gives a
        # state of that name (util/cpuidle.c, pmqosd's and pmqosctl's rule).
        states = {}
        for d in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpuidle/state[0-9]*"):
            online = os.path.join(os.path.dirname(os.path.dirname(d)), "online")
            if os.path.exists(online) and open(online).read().strip() != "1":
                continue
            name = open(os.path.join(d, "name")).read().strip()
            latency = int(open(os.path.join(d, "latency")).read())
            states[name.lower()] = max(latency, states.get(name.lower(), 0))
        _ = self.daemon
        code, out = self.create("u", {LAT: "NoSuchState", REQ: "true"})
        self.assertNotEqual(code, 0, "an unknown C-state started a required container")
        self.assertIn("C-state", self.hook_stderr())
        self.assertEqual(self.ours("u"), [])
        named = [n for n in states if n.isalnum() and n[0].isalpha()]  # the annotation's syntax
        if not named:
            skip_notice("a C-state name in an annotation", "this machine shows no cpuidle state to name")
            return
        self.assertEqual(self.create("c6", {LAT: named[0].upper()})[0], 0, self.hook_stderr())
        [r] = self.ours("c6")
        self.assertEqual(r["value"], states[named[0]])

    def test_restart_of_pmqosd_keeps_the_bound(self):
        if "valgrind" in os.environ.get("PMQOSD_WRAPPER", ""):
            # valgrind 3.19 answers pidfd_open(2) with ENOSYS: pmqosd under it cannot reopen a pid (as test_held).
            skip_notice("re-binding the container's request after a restart", "pmqosd runs under valgrind, "
                        "which does not implement pidfd_open(2)")
            self.skipTest("valgrind does not implement pidfd_open(2)")
        _ = self.daemon
        self.assertEqual(self.create("c4", {LAT: "33"})[0], 0, self.hook_stderr())
        self.assertEqual(self.crun.run("start", "c4")[0], 0)
        self.assertKernelAtMost(33)
        self.start_daemon()  # SIGTERM, then a new pmqosd on the same bus and runtime directory
        self.assert_eventually(lambda: len(self.ours("c4")) == 1, what="the container's request back")
        self.assertEqual(self.ours("c4")[0]["bound_to"], "process")
        self.assertKernelAtMost(33)
        os.kill(self.init_pid("c4"), signal.SIGKILL)
        self.assert_eventually(self.kernel.released, what="the bound to go with the container")


class TestPodman(OciTestCase):
    def setUp(self):
        if not oci.PODMAN:
            skip_notice("pmqos-oci-hook through podman", "podman is not installed")
            self.skipTest("podman is not installed")
        super().setUp()
        self.podman = oci.Podman(self.bus.address)
        self.addCleanup(self.podman.cleanup)

    def remove_podman_cgroups(self, parent):
        self.podman.run("rm", "-f", "p1")
        for d in os.listdir(parent):  # conmon's, and the container's if podman left it
            if os.path.isdir(os.path.join(parent, d)):
                os.rmdir(os.path.join(parent, d))

    def test_cgroup_bound_released_on_kill(self):
        parent = make_cgroup(self)
        self.addCleanup(self.remove_podman_cgroups, parent)  # before the parent's removal
        _ = self.daemon
        code, out = self.podman.start("p1", {LAT: "46", "io.kubernetes.pod.name": "x"},
                                      "/" + os.path.basename(parent))  # as crun sees it
        self.assertEqual(code, 0, out + self.podman.hook_stderr())
        cid = out.split()[-1]
        self.assertKernelAtMost(46)
        [r] = [r for r in self.requests() if r["reason"].startswith("container " + cid)]
        self.assertEqual((r["bound_to"], r["target"]), ("cgroup", "%s/libpod-%s" % (parent, cid)))  # pmqosd's view
        self.assertEqual(self.podman.hook_runs(), ["created"])
        os.kill(self.podman.pid("p1"), signal.SIGKILL)
        self.assert_eventually(self.kernel.released, what="the bound to go with the container's processes")
        # podman runs poststop itself when it cleans up after the exit, maybe already: not asserted.
        print("# hook runs at the release: %s" % self.podman.hook_runs())
        self.assertEqual([r for r in self.requests() if r["reason"].startswith("container " + cid)], [])
        code, out = self.podman.run("rm", "-f", "p1")
        self.assertEqual(code, 0, out)
        self.assertEqual(self.podman.hook_runs(), ["created", "stopped"])
        self.assertEqual(self.podman.hook_stderr(), "")
        self.assertFalse(os.path.exists(os.path.join(parent, "libpod-" + cid)))


class TestCrio(OciTestCase):
    def setUp(self):
        super().setUp()
        self.original = read_cpu()
        self.addCleanup(lambda: self.assertEqual(read_cpu(), self.original, "cpu%d not restored" % CPU))

    def test_max_latency_disable_enable(self):
        _ = self.daemon
        base = self.kernel.read()
        self.assertEqual(self.create("m", {CRIO: "max_latency:7"}, cpus=str(CPU))[0], 0, self.hook_stderr())
        self.assertEqual(read_cpu(), "7")
        self.assertEqual(self.create("d", {CRIO: "disable"}, cpus=str(CPU))[0], 0, self.hook_stderr())
        self.assertEqual(read_cpu(), "n/a")
        self.assertEqual(self.kernel.read(), base, "the global device was touched")
        self.assertEqual(self.create("e", {CRIO: "enable"}, cpus=str(CPU))[0], 0, self.hook_stderr())
        self.assertEqual(self.ours("e"), [])
        self.crun.run("delete", "-f", "d")
        self.assertEqual(read_cpu(), "7")
        self.crun.run("delete", "-f", "m")
        self.assertEqual(read_cpu(), self.original)

    def two_on_one_cpu(self, first_stopped):
        _ = self.daemon
        self.assertEqual(self.create("a", {CRIO: "max_latency:20"}, cpus=str(CPU))[0], 0, self.hook_stderr())
        self.assertEqual(self.create("b", {CRIO: "max_latency:10"}, cpus=str(CPU))[0], 0, self.hook_stderr())
        self.assertEqual(read_cpu(), "10")
        other = "b" if first_stopped == "a" else "a"
        os.kill(self.init_pid(first_stopped), signal.SIGKILL)
        self.assert_eventually(lambda: read_cpu() == ("10" if other == "b" else "20"), what="the other's bound")
        self.crun.run("delete", "-f", first_stopped)
        self.assertEqual(read_cpu(), "10" if other == "b" else "20")
        self.crun.run("delete", "-f", other)
        self.assertEqual(read_cpu(), self.original)

    def test_two_containers_one_cpu_a_first(self):
        self.two_on_one_cpu("a")

    def test_two_containers_one_cpu_b_first(self):
        self.two_on_one_cpu("b")


class TestNoBroker(OciTestCase):
    def test_no_annotation_no_hook(self):
        self.assertFalse(oci.hook_wanted({"io.kubernetes.pod.name": "x"}))
        self.assertTrue(oci.hook_wanted({CRIO: "enable"}))
        self.assertEqual(self.create("n", {"io.kubernetes.pod.name": "x"})[0], 0)
        self.assertEqual(self.crun.hook_runs(), [])

    def test_broker_absent_starts_or_fails_when_required(self):
        code, out = self.create("s", {LAT: "42"})
        self.assertEqual(code, 0, out)
        self.assertIn("starting it without the bound", self.hook_stderr())
        code, out = self.create("f", {LAT: "42", REQ: "true"})
        self.assertNotEqual(code, 0, "a required bound without a broker started the container")
        self.assertIn("container f", self.hook_stderr())

    def test_bad_annotation(self):
        _ = self.daemon
        self.assertEqual(self.create("x", {LAT: "fast!"})[0], 0)
        self.assertIn(LAT, self.hook_stderr())
        self.assertNotEqual(self.create("y", {LAT: "fast!", REQ: "true"})[0], 0)
        self.assertTrue(self.kernel.released())


class TestConfinement(OciTestCase):
    """An annotation reaches only the container's own CPUs; the whole
    machine only with MachineWide=allow."""

    def setUp(self):
        if OTHER is None:
            skip_notice("the confinement to a container's cpuset", "it needs CPUs 0 and 1")
            self.skipTest("it needs CPUs 0 and 1")
        super().setUp()
        self.original = {c: read_cpu(c) for c in (0, 1)}
        self.addCleanup(lambda: self.assertEqual({c: read_cpu(c) for c in (0, 1)}, self.original, "CPUs not restored"))

    def test_list_outside_the_cpuset_refused(self):
        _ = self.daemon
        base = self.kernel.read()
        code, out = self.create("r", {LAT: "11", CPUS: str(OTHER), REQ: "true"}, cpus=str(CPU))
        self.assertNotEqual(code, 0, "a container asking for another CPU started under required=true")
        self.assertIn("CPU %d, outside the container's cpuset \"%d\"" % (OTHER, CPU), self.hook_stderr())
        self.assertIsNone(self.crun.state("r"), "the failed container was left behind")
        code, out = self.create("u", {LAT: "11", CPUS: str(OTHER)}, cpus=str(CPU))
        self.assertEqual(code, 0, out + self.hook_stderr())
        self.assertIn("container u: %s names CPU %d" % (CPUS, OTHER), self.hook_stderr())
        self.assertIn("starting it without the bound", self.hook_stderr())
        self.assertEqual(self.ours("r") + self.ours("u"), [])
        self.assertEqual((read_cpu(OTHER), read_cpu(CPU), self.kernel.read()), (self.original[OTHER], self.original[CPU], base))
        # Its own CPU, by list and by "container": granted there, only there.
        self.assertEqual(self.create("g", {LAT: "12", CPUS: str(CPU)}, cpus=str(CPU))[0], 0, self.hook_stderr())
        self.assertEqual(self.create("h", {CRIO: "max_latency:13"}, cpus="%d-%d" % (CPU, CPU))[0], 0)
        self.assertEqual((read_cpu(CPU), read_cpu(OTHER), self.kernel.read()), ("12", self.original[OTHER], base))
        self.crun.run("delete", "-f", "g")
        self.assertEqual(read_cpu(CPU), "13")
        self.crun.run("delete", "-f", "h")

    def test_machine_wide_refused_by_default_granted_when_allowed(self):
        _ = self.daemon
        oci.write_conf(self.crun.dir, None)  # no file: the default
        self.assertEqual(self.create("d", {LAT: "42"})[0], 0, self.hook_stderr())
        self.assertEqual(self.create("n", {CRIO: "disable"})[0], 0, self.hook_stderr())  # no cpuset: every CPU
        self.assertNotEqual(self.create("f", {LAT: "42", REQ: "true"})[0], 0)
        err = self.hook_stderr()
        self.assertIn("container d: no %s: a bound on the whole machine, which MachineWide=deny in %s refuses"
                      % (CPUS, self.crun.conf), err)
        self.assertIn("container n: the container has no cpuset", err)
        self.assertIn("container f: no %s" % CPUS, err)
        self.assertIsNone(self.crun.state("f"))
        self.assertEqual(self.ours("d") + self.ours("n") + self.ours("f"), [])
        self.assertTrue(self.kernel.released())
        self.assertEqual({c: read_cpu(c) for c in (0, 1)}, self.original)
        # Not understood: said, with its line, and taken as deny.
        with open(self.crun.conf, "w") as f:
            f.write("[Hook]\nMachineWide=yes\n")
        self.assertEqual(self.create("b", {LAT: "42"})[0], 0)
        self.assertIn("%s:2: MachineWide: invalid value \"yes\", expected deny or allow (MachineWide=deny)"
                      % self.crun.conf, self.hook_stderr())
        self.assertTrue(self.kernel.released())
        oci.write_conf(self.crun.dir, "allow")
        self.assertEqual(self.create("a", {LAT: "42"})[0], 0, self.hook_stderr())
        self.assertKernelAtMost(42)
        self.assertEqual(len(self.ours("a")), 1)


class TestAsKubernetesRuns(OciTestCase):
    """The hook run as CRI-O's and containerd's runtimes run it: the OCI
    state on stdin, the bundle's config.json with their annotations, the
    container's init a process of ours. A stand-in journal socket (a
    datagram socket of the test bind-mounted at /run/systemd/journal in a
    mount namespace of the hook's own) is read back; without one, refusals
    are on stderr."""

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix="pmqos-k8s-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.journal = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(self.journal.close)
        self.journal.bind(os.path.join(self.dir, "socket"))
        self.journal.setblocking(False)
        self.conf = oci.write_conf(self.dir, None)

    def hook(self, cid, annotations, cpus=None, journal=True):
        """(exit status, stderr, journal entries as dicts) of one createRuntime run."""
        bundle = os.path.join(self.dir, cid)
        os.mkdir(bundle)
        config = {"ociVersion": "1.1.0", "annotations": annotations, "linux": {}}
        if cpus is not None:
            config["linux"]["resources"] = {"cpu": {"cpus": cpus}}
        with open(os.path.join(bundle, "config.json"), "w") as f:
            json.dump(config, f)
        init = subprocess.Popen(["sleep", "1000"])
        self.addCleanup(init.wait)
        self.addCleanup(init.kill)
        state = {"ociVersion": "1.1.0", "id": cid, "status": "creating", "pid": init.pid, "bundle": bundle,
                 "annotations": annotations}
        mounts = "mkdir -p /run/systemd && mount -t tmpfs tmpfs /run/systemd && mkdir /run/systemd/journal"
        if journal:
            mounts += ' && mount --bind "$0" /run/systemd/journal'
        p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", mounts + ' && exec "$@"',
                            self.dir, oci.HOOK], input=json.dumps(state).encode(), capture_output=True, timeout=10,
                           env={"DBUS_SYSTEM_BUS_ADDRESS": self.bus.address, oci.CONF_ENV: self.conf})
        entries = []
        while True:
            try:
                data = self.journal.recv(65536).decode()
            except BlockingIOError:
                break
            entries.append(dict(line.split("=", 1) for line in data.splitlines() if "=" in line))
        return p.returncode, p.stderr.decode(), entries

    def test_sandbox_containers_get_no_request(self):
        _ = self.daemon
        for cid, key in (("pause-d", "io.kubernetes.cri.container-type"),
                         ("pause-o", "io.kubernetes.cri-o.ContainerType")):
            a = {key: "sandbox", LAT: "0", CPUS: str(CPU), REQ: "true", "io.kubernetes.pod.name": "du-0",
                 "io.kubernetes.cri.sandbox-name": "du-0"}
            code, err, journal = self.hook(cid, a, cpus=str(CPU))
            self.assertEqual((code, err), (0, ""))
            self.assertEqual(self.ours(cid), [])
            [e] = journal
            self.assertEqual((e["SYSLOG_IDENTIFIER"], e["CONTAINER_ID"], e["PRIORITY"]), ("pmqos-oci-hook", cid, "6"))
            self.assertIn("container %s pod ?/du-0: a sandbox (pause) container, never given a request" % cid,
                          e["MESSAGE"])
        self.assertTrue(self.kernel.released())
        # The same annotations on the pod's container (type "container"): granted.
        a = {"io.kubernetes.cri.container-type": "container", LAT: "44", CPUS: str(CPU)}
        self.assertEqual(self.hook("app", a, cpus=str(CPU))[0], 0)
        self.assertEqual(len(self.ours("app")), 1)

    def test_reason_names_the_pod_by_both_runtimes_keys(self):
        _ = self.daemon
        containerd = {"io.kubernetes.cri.container-type": "container", "io.kubernetes.cri.sandbox-namespace": "ran",
                      "io.kubernetes.cri.sandbox-name": "du-0", "io.kubernetes.cri.container-name": "l1"}
        crio = {"io.kubernetes.cri-o.ContainerType": "container", "io.kubernetes.pod.namespace": "core",
                "io.kubernetes.pod.name": "upf-1", "io.kubernetes.container.name": "dp"}
        for cid, keys, reason in (("cd1", containerd, "container cd1 pod ran/du-0 name l1"),
                                  ("co1", crio, "container co1 pod core/upf-1 name dp")):
            code, err, journal = self.hook(cid, dict(keys, **{LAT: "45", CPUS: "container"}), cpus=str(CPU))
            self.assertEqual((code, err), (0, ""))
            [r] = self.ours(cid)
            self.assertEqual((r["reason"], r["value"]), (reason, 45))
            [e] = journal
            self.assertEqual((e["SYSLOG_IDENTIFIER"], e["CONTAINER_ID"]), ("pmqos-oci-hook", cid))
            self.assertTrue(e["MESSAGE"].startswith(reason + ": 45 µs on CPUs %d, request %d bound to its "
                                                    % (CPU, r["cookie"])), e["MESSAGE"])

    def test_refusals_in_the_journal_and_on_stderr_without_one(self):
        _ = self.daemon
        a = {"io.kubernetes.cri.container-type": "container", LAT: "46", REQ: "true"}
        code, err, journal = self.hook("mw", a, cpus=str(CPU))
        self.assertEqual(code, 1)
        [e] = journal
        self.assertEqual((e["SYSLOG_IDENTIFIER"], e["CONTAINER_ID"], e["PRIORITY"]), ("pmqos-oci-hook", "mw", "3"))
        self.assertIn("container mw: no %s: a bound on the whole machine, which MachineWide=deny" % CPUS, e["MESSAGE"])
        self.assertIn(e["MESSAGE"], err)  # a refusal goes to stderr too
        code, err, journal = self.hook("mw2", a, cpus=str(CPU), journal=False)
        self.assertEqual((code, journal), (1, []))
        self.assertIn("pmqos-oci-hook: container mw2: no %s: a bound on the whole machine" % CPUS, err)
        self.assertEqual(self.ours("mw") + self.ours("mw2"), [])
        self.assertTrue(self.kernel.released())

    def test_a_cpuset_of_every_online_cpu_is_the_whole_machine(self):
        """A cpuset holding every online CPU (a node's shared pool before any
        CPU is given out exclusively, --cpuset-cpus 0-N): "container", a list
        of all of them, CRI-O's annotation reach the whole machine, so
        MachineWide=deny refuses them as it refuses no list."""
        _ = self.daemon
        with open("/sys/devices/system/cpu/online") as f:
            online = f.read().strip()
        for cid, a in (("all-c", {LAT: "47", CPUS: "container"}), ("all-l", {LAT: "47", CPUS: online}),
                       ("all-o", {CRIO: "max_latency:47"}), ("all-r", {LAT: "47", CPUS: online, REQ: "true"})):
            code, err, journal = self.hook(cid, a, cpus=online)
            self.assertEqual(code, 1 if REQ in a else 0, err)
            self.assertIn("container %s: its CPUs are every online CPU (%s): the whole machine, which "
                          "MachineWide=deny in %s refuses" % (cid, online, self.conf), err)
            self.assertEqual(self.ours(cid), [])
        self.assertTrue(self.kernel.released())
        oci.write_conf(self.dir, "allow")
        self.assertEqual(self.hook("all-a", {LAT: "48", CPUS: "container"}, cpus=online)[:2], (0, ""))
        [r] = self.ours("all-a")
        self.assertEqual(r["value"], 48)


if __name__ == "__main__":
    main()
