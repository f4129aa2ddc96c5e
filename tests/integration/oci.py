# SPDX-License-Identifier: LGPL-2.1-or-later
"""A real OCI runtime for the hook's tests: crun on a bundle the test makes
(busybox-static as the rootfs), the hooks taken from the shipped hooks.d
file. On hosts with hybrid cgroups crun runs in a private mount namespace
with cgroup2 at /sys/fs/cgroup and --cgroup-manager=disabled: the container
has no cgroup of its own, so the hook binds the request to its init's pidfd."""

import json
import os
import re
import resource
import shutil
import struct
import subprocess
import tempfile

BUILD_ROOT = os.environ.get("PMQOS_BUILD_ROOT", "build")
HOOK = os.environ.get("PMQOS_OCI_HOOK", os.path.join(BUILD_ROOT, "client-lib/oci-hook/pmqos-oci-hook"))
HOOKS_D = os.path.join(os.path.dirname(HOOK), "pmqos-oci-hook.json")
CRUN = shutil.which("crun")
BUSYBOX = "/bin/busybox"


def static_binary(path):
    """False when the ELF file asks for a dynamic loader (a PT_INTERP segment)."""
    with open(path, "rb") as f:
        elf = f.read(1 << 16)
    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        return None
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    return all(struct.unpack_from("<I", elf, phoff + i * phentsize)[0] != 3 for i in range(phnum))


def missing():
    """Why these tests cannot run here, or None."""
    if not CRUN:
        return "crun is not installed"
    if not os.path.exists(BUSYBOX) or static_binary(BUSYBOX) is False:
        return "busybox-static is not installed (%s missing or dynamically linked)" % BUSYBOX
    if not os.path.exists(HOOK):
        return "pmqos-oci-hook is not built (json-c missing?)"
    return None


CONF_ENV = "PMQOS_OCI_HOOK_CONF"


def write_conf(directory, machine_wide):
    """An oci-hook.conf in directory with MachineWide=machine_wide (None: no
    file at that path, so the hook's default); its path."""
    path = os.path.join(directory, "oci-hook.conf")
    if machine_wide is None:
        if os.path.exists(path):
            os.unlink(path)
    else:
        with open(path, "w") as f:
            f.write("[Hook]\nMachineWide=%s\n" % machine_wide)
    return path


def hooks_d():
    with open(HOOKS_D) as f:
        return json.load(f)


def hook_wanted(annotations):
    """The shipped when.annotations, evaluated as podman and CRI-O do: every
    key pattern must match some annotation whose value matches too."""
    when = hooks_d()["when"]["annotations"]
    return all(any(re.search(k, key) and re.search(v, val) for key, val in annotations.items())
               for k, v in when.items())


class Crun:
    """crun with its own state directory; containers by name."""

    def __init__(self, bus_address):
        self.dir = tempfile.mkdtemp(prefix="pmqos-oci-")
        self.root = os.path.join(self.dir, "state")
        self.bus_address = bus_address
        self.log = os.path.join(self.dir, "crun.log")
        self.manager = "disabled"  # "cgroupfs" for a container given linux.cgroupsPath
        self.conf = write_conf(self.dir, "allow")  # the hook's oci-hook.conf (most tests bind the whole machine)

    def cleanup(self):
        for name in os.listdir(self.root) if os.path.isdir(self.root) else ():
            self.run("delete", "-f", name)
        shutil.rmtree(self.dir, True)

    def run(self, *args):
        """crun ARGS; its output to a file (a detached container keeps crun's
        stdio, and a pipe nobody reads would stall it). (status, output)"""
        with open(self.log, "w") as out:
            p = subprocess.run(
                ["unshare", "-m", "sh", "-c",
                 'mount --make-rprivate / && mount -t cgroup2 none /sys/fs/cgroup && exec "$@"', "sh",
                 CRUN, "--cgroup-manager=" + self.manager, "--root", self.root] + list(args),
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, timeout=30)
        with open(self.log) as f:
            return p.returncode, f.read()

    def bundle(self, name, annotations, cpus=None, hook_env=(), cgroup=None):
        """A bundle whose config.json carries the hooks as hooks.d would add them."""
        b = os.path.join(self.dir, name)
        rootfs = os.path.join(b, "rootfs")
        os.makedirs(os.path.join(rootfs, "bin"))
        for d in ("proc", "dev", "tmp"):
            os.mkdir(os.path.join(rootfs, d))
        shutil.copy(BUSYBOX, os.path.join(rootfs, "bin", "busybox"))
        self.marker = os.path.join(self.dir, "hook-runs")
        config = {
            "ociVersion": "1.0.2",
            "process": {"args": ["/bin/busybox", "sleep", "1000"], "cwd": "/", "user": {"uid": 0, "gid": 0},
                        "env": ["PATH=/bin"], "terminal": False},
            "root": {"path": "rootfs", "readonly": True},
            "hostname": name,
            "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
            "linux": {"namespaces": [{"type": t} for t in ("pid", "mount", "ipc", "uts")]},
            "annotations": annotations,
        }
        if cgroup is not None:
            config["linux"]["cgroupsPath"] = cgroup  # below cgroup2's root as mounted for crun
        if cpus is not None:
            config["linux"]["resources"] = {"cpu": {"cpus": cpus}}
        if hook_wanted(annotations):
            spec = hooks_d()
            # A wrapper records each run's state, so a test can tell poststop ran;
            # the hook gets the state and arguments as the shipped file says.
            wrapper = os.path.join(self.dir, "hook-wrapper")
            with open(wrapper, "w") as f:
                f.write('#!/bin/sh\nstate=$(cat)\necho "$state" >> %s\necho "$state" | exec %s "$@"\n'
                        % (self.marker, HOOK))
            os.chmod(wrapper, 0o755)
            args = spec["hook"].get("args", [spec["hook"]["path"]])[1:]
            config["hooks"] = {stage: [{"path": wrapper, "args": ["pmqos-oci-hook"] + args,
                                        "env": ["DBUS_SYSTEM_BUS_ADDRESS=" + self.bus_address,
                                                CONF_ENV + "=" + self.conf] + list(hook_env),
                                        "timeout": spec["hook"]["timeout"]}]
                               for stage in spec["stages"]}
        with open(os.path.join(b, "config.json"), "w") as f:
            json.dump(config, f)
        return b

    def hook_runs(self):
        """The status of the state each hook run was given, in order."""
        try:
            with open(self.marker) as f:
                return [json.loads(line).get("status") for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def create(self, name, annotations, cpus=None, cgroup=None):
        return self.run("create", "--bundle", self.bundle(name, annotations, cpus, cgroup=cgroup), name)

    def state(self, name):
        code, out = self.run("state", name)
        return json.loads(out) if code == 0 else None


PODMAN = shutil.which("podman")


class Podman:
    """podman on a --rootfs (no image, no registry) with storage of its own and
    the shipped hooks.d file in a --hooks-dir, the hook given the test's bus.
    Here podman, like crun, runs in a private mount namespace with cgroup2 at
    /sys/fs/cgroup (crun refuses hybrid cgroups), the cgroupfs manager placing
    the container below a cgroup the caller names. It is --privileged: with
    any device rule crun loads a BPF device filter, and raising RLIMIT_MEMLOCK
    for it needs CAP_SYS_RESOURCE; the rlimits podman would raise are given
    below this process's own."""

    def __init__(self, bus_address):
        self.dir = tempfile.mkdtemp(prefix="pmqos-podman-")
        self.hooks_dir = os.path.join(self.dir, "hooks.d")
        os.mkdir(self.hooks_dir)
        self.marker = os.path.join(self.dir, "hook-runs")
        self.hook_log = os.path.join(self.dir, "hooks.err")
        wrapper = os.path.join(self.dir, "hook-wrapper")
        with open(wrapper, "w") as f:
            f.write('#!/bin/sh\nstate=$(cat)\necho "$state" >> %s\nexport DBUS_SYSTEM_BUS_ADDRESS=%s %s=%s\n'
                    'echo "$state" | exec %s "$@" 2>>%s\n' % (self.marker, bus_address, CONF_ENV,
                                                               write_conf(self.dir, "allow"), HOOK, self.hook_log))
        os.chmod(wrapper, 0o755)
        spec = hooks_d()
        spec["hook"]["path"] = wrapper
        with open(os.path.join(self.hooks_dir, "pmqos-oci-hook.json"), "w") as f:
            json.dump(spec, f)
        self.rootfs = os.path.join(self.dir, "rootfs")
        for d in ("bin", "proc", "dev", "sys", "tmp", "etc", "run"):
            os.makedirs(os.path.join(self.rootfs, d))
        shutil.copy(BUSYBOX, os.path.join(self.rootfs, "bin", "busybox"))

    def run(self, *args):
        p = subprocess.run(
            ["unshare", "-m", "sh", "-c",
             'mount --make-rprivate / && mount -t cgroup2 none /sys/fs/cgroup && exec "$@"', "sh",
             PODMAN, "--root", os.path.join(self.dir, "storage"), "--runroot", os.path.join(self.dir, "run"),
             "--tmpdir", os.path.join(self.dir, "tmp"), "--cgroup-manager", "cgroupfs", "--events-backend", "none",
             "--hooks-dir", self.hooks_dir] + list(args),
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        return p.returncode, p.stdout + p.stderr

    def start(self, name, annotations, cgroup_parent):
        nofile = min(1024, resource.getrlimit(resource.RLIMIT_NOFILE)[1])  # enough for a sleep
        nproc = min(1024, resource.getrlimit(resource.RLIMIT_NPROC)[1])
        args = ["run", "-d", "--name", name, "--privileged", "--pids-limit=-1",
                "--network=none", "--ulimit", "nofile=%d:%d" % (nofile, nofile),
                "--ulimit", "nproc=%d:%d" % (nproc, nproc), "--cgroup-parent", cgroup_parent]
        for k, v in annotations.items():
            args += ["--annotation", "%s=%s" % (k, v)]
        # --rootfs is a flag: the first argument is then the tree, the rest the command.
        return self.run(*(args + ["--rootfs", self.rootfs, "/bin/busybox", "sleep", "1000"]))

    def pid(self, name):
        code, out = self.run("inspect", "-f", "{{.State.Pid}}", name)
        return int(out.split()[0]) if code == 0 else None

    def hook_runs(self):
        try:
            with open(self.marker) as f:
                return [json.loads(line).get("status") for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def hook_stderr(self):
        try:
            with open(self.hook_log) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def cleanup(self):
        self.run("rm", "-af")
        subprocess.run(["umount", "-R", os.path.join(self.dir, "storage")], capture_output=True)
        shutil.rmtree(self.dir, True)
