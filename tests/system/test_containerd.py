# SPDX-License-Identifier: LGPL-2.1-or-later
"""The containerd tier: Debian 13's containerd, in the container tier's
booted Debian 13 (container.py), driven through its CRI gRPC API as kubelet
drives it (cri/cri-client, a Python CRI client on Debian's python3-grpcio),
with a local image (a static busybox imported with ctr, no registry) and
host-network pods. pmqos-oci-hook reaches containerd as an administrator
sets it up with what pmqos ships: base_runtime_spec written by
pmqos-containerd-base-spec, annotations passed through by the keys of
containerd-pmqos.toml.

This machine needs four settings of the tier's own for containerd to run in
systemd-nspawn, none of which a node needs:
  - NoNewKeyring: nspawn's seccomp filter refuses keyctl() (runc: "unable
    to join session keyring: operation not permitted");
  - restrict_oom_score_adj: nspawn keeps no CAP_SYS_RESOURCE, so runc
    cannot lower the sandbox's oom_score_adj to -998 (runc: "can't get
    final child's PID from pipe: EOF");
  - disable_cgroup: the cgroup2 hierarchy has no cpu or cpuset controller
    (they are on cgroup1 here), so runc cannot write the sandbox's
    cpu.weight; runc still gives each container a cgroup of its own (beside
    the shim's), so the hook still binds to it. CRI then leaves out
    linux.resources: no container has a cpuset, and a per-CPU list needs
    MachineWide=allow like a machine-wide bound (the cpuset confinement
    itself is tested in integration/oci);
  - sandbox_image: the local image (no registry).
And /var/lib/containerd on a tmpfs: the tree's root is an overlay, and the
overlayfs snapshotter's layers cannot be on one.

Run as its own meson test (containerd-trixie: tests/system/run
test_containerd), one booted container for it alone."""

import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import time

from container import SOURCE_ROOT, SystemTestCase, kernel, wait_for

IMAGE = "localhost/pmqos/busybox:1"
SOCKET = "/run/containerd/containerd.sock"
CPU1 = "/sys/devices/system/cpu/cpu1/power/pm_qos_resume_latency_us"
HOOK_CONF = "/etc/pmqos/oci-hook.conf"

# What this machine needs (see above), then the keys pmqos ships.
CONFIG = """version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%s"
  restrict_oom_score_adj = true
  disable_cgroup = true
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  NoNewKeyring = true
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.crun]
  runtime_type = "io.containerd.runc.v2"
  base_runtime_spec = "/etc/containerd/pmqos-base-spec.json"
  pod_annotations = ["org.freedesktop.pmqos.*"]
  container_annotations = ["org.freedesktop.pmqos.*"]
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.crun.options]
  BinaryName = "crun"
  NoNewKeyring = true
""" % IMAGE

# Inside the container: waits for PID to exit (pidfd), then for FILE to read
# other than HELD; prints the milliseconds from one to the other.
RELEASE_TIMER = """
import os, select, sys, time
pid, path, held = int(sys.argv[1]), sys.argv[2], sys.argv[3]
fd = os.pidfd_open(pid)
print("watching", flush=True)
select.select([fd], [], [], 30)
t0 = time.monotonic()
while time.monotonic() - t0 < 5:
    with open(path) as f:
        if f.read().strip() != held:
            break
    time.sleep(0.0002)
print("%.1f" % ((time.monotonic() - t0) * 1000))
"""


def oci_image(busybox, name):
    """An OCI image layout (tar) of one layer: a static busybox as /bin/sh,
    /bin/sleep, /bin/false; named NAME for ctr images import."""
    blobs = {}

    def blob(data):
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        blobs["blobs/sha256/" + digest[7:]] = data
        return {"digest": digest, "size": len(data)}

    def tar(members):
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w") as t:
            for info, data in members:
                t.addfile(info, io.BytesIO(data) if data is not None else None)
        return out.getvalue()

    def entry(name, **kw):
        info = tarfile.TarInfo(name)
        for k, v in kw.items():
            setattr(info, k, v)
        return info

    with open(busybox, "rb") as f:
        exe = f.read()
    members = [(entry(d, type=tarfile.DIRTYPE, mode=0o755), None) for d in ("bin", "dev", "proc", "sys", "tmp")]
    members.append((entry("bin/busybox", size=len(exe), mode=0o755), exe))
    members += [(entry("bin/" + n, type=tarfile.SYMTYPE, linkname="busybox"), None) for n in ("sh", "sleep", "false")]
    layer_tar = tar(members)
    layer = dict(blob(layer_tar), mediaType="application/vnd.oci.image.layer.v1.tar")
    config = dict(blob(json.dumps({"architecture": "amd64", "os": "linux",
                                   "config": {"Cmd": ["/bin/sleep", "1000000"], "Env": ["PATH=/bin"]},
                                   "rootfs": {"type": "layers", "diff_ids": [layer["digest"]]}}).encode()),
                  mediaType="application/vnd.oci.image.config.v1+json")
    manifest = dict(blob(json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                                     "config": config, "layers": [layer]}).encode()),
                    mediaType="application/vnd.oci.image.manifest.v1+json",
                    annotations={"io.containerd.image.name": name}, platform={"architecture": "amd64", "os": "linux"})
    blobs["index.json"] = json.dumps({"schemaVersion": 2, "manifests": [manifest]}).encode()
    blobs["oci-layout"] = b'{"imageLayoutVersion": "1.0.0"}'
    return tar([(entry(n, size=len(d), mode=0o644), d) for n, d in blobs.items()])


class CRI:
    """cri/cri-client inside the container, one JSON line a call."""

    def __init__(self, c):
        self.proc = subprocess.Popen(["nsenter", "-t", str(c.pid1), "-a", "/usr/bin/python3",
                                      "/var/tmp/pmqos-cri/cri-client", SOCKET],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            raise AssertionError("cri-client did not start: %r" % line)

    def call(self, call, request, service="RuntimeService"):
        self.proc.stdin.write(json.dumps({"service": service, "call": call, "request": request}) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def ok(self, call, request, service="RuntimeService"):
        out = self.call(call, request, service)
        if "error" in out:
            raise AssertionError("%s: %s" % (call, out["error"]))
        return out["reply"]

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


class TestContainerd(SystemTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        c = cls.c
        root = "/proc/%d/root" % c.pid1
        t0 = time.monotonic()
        os.makedirs(root + "/var/tmp/pmqos-cri", exist_ok=True)
        for name in ("cri.proto", "cri-client"):
            with open(os.path.join(SOURCE_ROOT, "tests", "system", "cri", name)) as src, \
                    open(root + "/var/tmp/pmqos-cri/" + name, "w") as dst:
                dst.write(src.read())
        with open(root + "/var/tmp/pmqos-cri/busybox.tar", "wb") as f:
            f.write(oci_image(root + "/bin/busybox", IMAGE))
        with open(root + "/usr/share/pmqos/containerd-pmqos.toml") as f:
            shipped = f.read()
        with open(root + "/etc/containerd/config.toml", "w") as f:
            f.write(CONFIG + shipped)
        # As the shipped file's comment says, then the image.
        c.sh("mkdir -p /var/lib/containerd && mount -t tmpfs tmpfs /var/lib/containerd && "
             "/usr/lib/pmqos/pmqos-containerd-base-spec && systemctl start containerd && "
             "ctr -n k8s.io images import /var/tmp/pmqos-cri/busybox.tar", check=True)
        cls.cri = CRI(c)
        cls.addClassCleanup(lambda: cls.cri.close())
        cls.version = cls.cri.ok("Version", {"version": "v1"})
        # As kubelet does before it creates a container: the image is there.
        assert cls.cri.ok("ImageStatus", {"image": {"image": IMAGE}}, "ImageService")["image"]["repo_tags"] == [IMAGE]
        cls.setup_seconds = time.monotonic() - t0
        sys.stderr.write("containerd %s through CRI %s: set up in %.1f s\n"
                         % (cls.version["runtime_version"], cls.version["runtime_api_version"], cls.setup_seconds))

    def setUp(self):
        super().setUp()
        self.cpu1 = self.c.sh("cat %s" % CPU1, check=True).stdout.strip()
        self.c.sh("rm -f %s" % HOOK_CONF, check=True)  # MachineWide=deny

    def tearDown(self):
        self.c.sh("rm -f %s" % HOOK_CONF)
        super().tearDown()
        self.assertEqual(self.c.sh("cat %s" % CPU1).stdout.strip(), self.cpu1)

    def allow(self):
        self.c.sh("printf '[Hook]\\nMachineWide=allow\\n' > %s" % HOOK_CONF, check=True)

    # kubelet's calls

    def pod(self, name, annotations=None, handler="runc"):
        config = {"metadata": {"name": name, "uid": name + "-uid", "namespace": "rt"},
                  "log_directory": "/var/log/pods/" + name, "annotations": annotations or {},
                  "linux": {"security_context": {"namespace_options": {"network": "NODE"}}}}
        sandbox = self.cri.ok("RunPodSandbox", {"config": config, "runtime_handler": handler})["pod_sandbox_id"]
        self.addCleanup(self.remove_pod, sandbox, True)
        return sandbox, config

    def remove_pod(self, sandbox, cleanup=False):
        """kubelet's removal of a pod (StopPodSandbox stops its containers)."""
        if cleanup and sandbox not in self.c.sh("ctr -n k8s.io containers ls -q").stdout:
            return
        self.cri.ok("StopPodSandbox", {"pod_sandbox_id": sandbox})
        self.cri.ok("RemovePodSandbox", {"pod_sandbox_id": sandbox})

    def create(self, pod, name, command, annotations=None, attempt=0):
        sandbox, config = pod
        container = {"metadata": {"name": name, "attempt": attempt}, "image": {"image": IMAGE},
                     "command": command, "log_path": "%s_%d.log" % (name, attempt),
                     "annotations": annotations or {},
                     "linux": {"security_context": {"namespace_options": {"network": "NODE", "pid": "CONTAINER"}}}}
        return self.cri.ok("CreateContainer", {"pod_sandbox_id": sandbox, "config": container,
                                               "sandbox_config": config})["container_id"]

    def start_container(self, pod, name, command, annotations=None):
        cid = self.create(pod, name, command, annotations)
        self.cri.ok("StartContainer", {"container_id": cid})
        return cid

    def status(self, cid):
        reply = self.cri.ok("ContainerStatus", {"container_id": cid, "verbose": True})
        info = json.loads(reply.get("info", {}).get("info", "{}"))
        return reply["status"], info.get("pid", 0)

    # what pmqos holds

    def requests_of(self, cid):
        return [r for r in self.requests() if r["reason"].startswith("container " + cid)]

    def no_request(self):
        return self.requests() == []

    def hook_journal(self, cid):
        return self.c.sh("journalctl -q --no-pager -t pmqos-oci-hook CONTAINER_ID=%s" % cid).stdout

    def release_ms(self, pid, action):
        """Runs ACTION once PID is watched, returns ms from PID's exit to CPU 1's file given back."""
        timer = subprocess.Popen(["nsenter", "-t", str(self.c.pid1), "-a", "/usr/bin/python3", "-c",
                                  RELEASE_TIMER, str(pid), CPU1, "42"], stdout=subprocess.PIPE, text=True)
        self.assertEqual(timer.stdout.readline().strip(), "watching")
        action()
        out = timer.communicate(timeout=40)[0].strip()
        return float(out)

    def test_bound_named_by_pod_and_sandbox_gets_none(self):
        """A pod's annotation reaches its containers (not its sandbox): one
        asking CPU 1 gets it per CPU, one without cpus the whole machine
        (MachineWide=allow), each bound to its own cgroup and named by pod;
        runc and crun alike; removing the pods leaves nothing."""
        self.allow()
        for handler in ("runc", "crun"):
            with self.subTest(handler=handler):
                pod = self.pod("bound-" + handler, {"org.freedesktop.pmqos.latency": "42"}, handler)
                one = self.start_container(pod, "on-cpu1", ["/bin/sleep", "1000"], {"org.freedesktop.pmqos.cpus": "1"})
                every = self.start_container(pod, "everywhere", ["/bin/sleep", "1000"])
                self.assertEqual(self.c.sh("cat %s" % CPU1).stdout.strip(), "42")
                self.assertLessEqual(kernel(), 42)
                mine = self.requests_of(one)
                self.assertEqual(len(mine), 1, self.requests())
                self.assertEqual(mine[0]["reason"], "container %s pod rt/bound-%s name on-cpu1" % (one, handler))
                self.assertEqual((mine[0]["cpus"], mine[0]["value"], mine[0]["bound_to"]), ([1], 42, "cgroup"))
                self.assertTrue(mine[0]["target"].endswith("/" + one), mine[0]["target"])
                whole = self.requests_of(every)
                self.assertEqual(len(whole), 1, self.requests())
                self.assertEqual(whole[0]["cpus"], [])
                # The sandbox's spec carries the pod's annotation; it holds nothing.
                spec = json.loads(self.c.sh("cat /run/containerd/io.containerd.runtime.v2.task/k8s.io/%s/config.json"
                                            % pod[0], check=True).stdout)
                self.assertEqual(spec["annotations"]["io.kubernetes.cri.container-type"], "sandbox")
                self.assertEqual(spec["annotations"]["org.freedesktop.pmqos.latency"], "42")
                self.assertEqual(self.requests_of(pod[0]), [])
                self.assertEqual(len(self.requests()), 2, self.requests())
                self.remove_pod(pod[0])
                self.assertTrue(self.no_request(), self.requests())
                self.assertEqual(self.c.sh("cat %s" % CPU1).stdout.strip(), self.cpu1)

    def test_deny_refuses_and_the_journal_says_so(self):
        """Default MachineWide=deny: the container starts without a bound,
        the journal says why under its CONTAINER_ID; with required=true its
        start fails and nothing of it is left."""
        pod = self.pod("denied", {"org.freedesktop.pmqos.latency": "42"})
        cid = self.start_container(pod, "unbound", ["/bin/sleep", "1000"])
        self.assertEqual(self.status(cid)[0]["state"], "CONTAINER_RUNNING")
        self.assertTrue(self.no_request(), self.requests())
        wait_for(lambda: "MachineWide=deny" in self.hook_journal(cid), timeout=5, what="the refusal in the journal")
        self.assertRegex(self.c.sh("journalctl -q --no-pager -t pmqos-oci-hook -o json CONTAINER_ID=%s" % cid).stdout,
                         r'"SYSLOG_IDENTIFIER":"pmqos-oci-hook"')
        required = self.create(pod, "required", ["/bin/sleep", "1000"],
                               {"org.freedesktop.pmqos.required": "true", "org.freedesktop.pmqos.cpus": "1"})
        out = self.cri.call("StartContainer", {"container_id": required})
        self.assertIn("error", out)
        self.assertRegex(out["error"], r"hook")
        self.assertNotEqual(self.status(required)[0]["state"], "CONTAINER_RUNNING")
        self.assertNotIn(required, self.c.sh("ctr -n k8s.io tasks ls -q").stdout)
        self.assertTrue(self.no_request(), self.requests())
        wait_for(lambda: "MachineWide=deny" in self.hook_journal(required), timeout=5,
                 what="the required refusal in the journal")
        self.assertEqual(self.c.sh("cat %s" % CPU1).stdout.strip(), self.cpu1)

    def test_crash_loop_leaves_no_request(self):
        """kubelet's CrashLoopBackOff at full speed: a container whose
        process exits at once (its cgroup removed by runc within
        milliseconds) created, started and removed again and again."""
        self.allow()
        pod = self.pod("crashing", {"org.freedesktop.pmqos.latency": "42", "org.freedesktop.pmqos.cpus": "1"})
        started = []
        for attempt in range(6):
            cid = self.create(pod, "crasher", ["/bin/false"], attempt=attempt)
            self.cri.ok("StartContainer", {"container_id": cid})
            wait_for(lambda: self.status(cid)[0]["state"] == "CONTAINER_EXITED", timeout=10, what="the exit")
            self.cri.ok("RemoveContainer", {"container_id": cid})
            started.append(cid)
        wait_for(self.no_request, timeout=5, what="no request left")
        self.assertEqual(self.c.sh("cat %s" % CPU1).stdout.strip(), self.cpu1)
        # Each start did get its request (the hook runs before the process does).
        wait_for(lambda: all(re.search(r": 42 µs on CPUs 1, request \d+ bound to its cgroup", self.hook_journal(cid))
                             for cid in started), timeout=5, what="every start's grant in the journal")

    def test_self_exit_releases_before_stop(self):
        """A container whose process exits by itself gives its CPUs back
        before kubelet's StopContainer (never called here until then)."""
        self.allow()
        pod = self.pod("selfexit", {"org.freedesktop.pmqos.latency": "42"})
        # Its shell (the container's init) exits once /tmp/exit is there.
        cid = self.start_container(pod, "short", ["/bin/sh", "-c", "while [ ! -e /tmp/exit ]; do sleep 0.01; done"],
                                   {"org.freedesktop.pmqos.cpus": "1"})
        pid = self.status(cid)[1]
        self.assertEqual(len(self.requests_of(cid)), 1, self.requests())
        ms = self.release_ms(pid, lambda: self.c.sh(
            "touch /run/containerd/io.containerd.runtime.v2.task/k8s.io/%s/rootfs/tmp/exit" % cid, check=True))
        self.assertTrue(self.no_request(), self.requests())
        # containerd may not even have seen the exit yet: nothing asked for the release.
        wait_for(lambda: self.status(cid)[0]["state"] == "CONTAINER_EXITED", timeout=10, what="containerd to see the exit")
        self.assertEqual(self.status(cid)[0].get("exit_code", 0), 0)  # protobuf's JSON leaves out a 0
        sys.stderr.write("self-exit: CPU 1 given back %.1f ms after the container's process exited\n" % ms)
        self.cri.ok("StopContainer", {"container_id": cid, "timeout": 0})

    def test_restarts_and_kill_keep_the_right_bound(self):
        """containerd restarted with the container running, then pmqosd
        restarted: the same request holds CPU 1; kill -9 of the container's
        init then releases it at once."""
        self.allow()
        pod = self.pod("restarts", {"org.freedesktop.pmqos.latency": "42"})
        cid = self.start_container(pod, "long", ["/bin/sleep", "1000"], {"org.freedesktop.pmqos.cpus": "1"})
        pid = self.status(cid)[1]
        cookie = self.requests_of(cid)[0]["cookie"]
        self.c.sh("systemctl restart containerd", check=True)
        self.cri.close()
        type(self).cri = CRI(self.c)
        status, pid_after = self.status(cid)
        self.assertEqual((status["state"], pid_after), ("CONTAINER_RUNNING", pid))
        self.assertEqual([r["cookie"] for r in self.requests_of(cid)], [cookie])
        self.assertEqual(self.c.sh("cat %s" % CPU1).stdout.strip(), "42")
        self.c.sh("systemctl restart pmqosd", check=True)
        self.assertEqual([r["cookie"] for r in self.requests_of(cid)], [cookie])
        self.assertEqual(self.c.sh("cat %s" % CPU1).stdout.strip(), "42")
        ms = self.release_ms(pid, lambda: self.c.sh("kill -9 %d" % pid, check=True))
        self.assertTrue(self.no_request(), self.requests())
        sys.stderr.write("kill -9: CPU 1 given back %.1f ms after the container's init died\n" % ms)
