# SPDX-License-Identifier: LGPL-2.1-or-later
"""The adversary on the host: per-CPU requests for duplicate or vanished CPUs,
the state directory (FIFOs, foreign owners, links), and the unit's privileges
(see adversary.py)."""

import os
import pwd
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import time
import unittest

from gi.repository import GLib

from contract import INVALID, NATIVE_IFACE, PEER
from fixtures import (BrokerTestCase, IS_ROOT, NOBODY, PMQOSD, SOURCE_ROOT, TIME_SCALE, main, proc_status,
                      skip_notice, strace)
from fake_sysfs import make_fake_sysfs
from hostenv import POLKIT_USERS
from adversary import AdversaryTestCase, UNDER_WRAPPER, polkit_ready, set_up_module, tear_down_module

setUpModule = set_up_module
tearDownModule = tear_down_module


class TestCpus(AdversaryTestCase):
    def setUp(self):
        self.sysfs = make_fake_sysfs({0: "0", 1: "100"})
        self.addCleanup(shutil.rmtree, self.sysfs, True)
        self.daemon_args = ("--sysfs-root", self.sysfs)
        super().setUp()

    def cpu_value(self, cpu):
        with open(os.path.join(self.sysfs, "devices/system/cpu/cpu%d/power/pm_qos_resume_latency_us" % cpu)) as f:
            return f.read().strip()

    def test_1024_duplicates_are_one_cpu(self):
        c = self.client()
        cookie = c.call("Request", "sia{sv}", "cpu_dma", 40, {"cpus": GLib.Variant("au", [1] * 1024)},
                        iface=NATIVE_IFACE)[0]
        native = {r["cookie"]: r for r in c.call("ListRequests", iface=NATIVE_IFACE)[0]}
        self.assertEqual(native[cookie]["cpus"], [1])
        self.assertEqual(self.cpu_value(1), "40")
        err = c.call_error("Request", "sia{sv}", "cpu_dma", 40, {"cpus": GLib.Variant("au", [1] * 1025)},
                           iface=NATIVE_IFACE)
        self.assertEqual(err[0], INVALID)
        c.call("Cancel", "u", cookie, iface=NATIVE_IFACE)
        self.assertEqual(self.cpu_value(1), "100")
        self.assertIntact()

    def test_saved_request_for_a_vanished_cpu(self):
        """Used to stop pmqosd from starting, with the state not moved aside."""
        self.daemon.stop()
        state_dir = self.daemon.state_dir
        with open(os.path.join(state_dir, "state"), "w") as f:
            f.write("pmqos-state 1\nfloor -1\n"
                    "request cookie=99 type=cpu_dma value=30 uid=0 pid=1 created=1 expires=0 cpus=0,7 "
                    "exec=gone reason=\nend\n")
        self.start_daemon(self.daemon_args, state_dir=state_dir)
        self.keep_honest()
        self.assertIn("names CPU 7, which is absent", self.daemon.output())
        native = {r["cookie"]: r for r in self.honest.call("ListRequests", iface=NATIVE_IFACE)[0]}
        self.assertEqual(native[99]["cpus"], [0, 7])
        self.assertEqual(self.cpu_value(0), "0")  # inactive: CPU 0 not bounded either
        self.assertIntact()
        self.honest.cancel(99)
        with open(os.path.join(state_dir, "state")) as f:
            self.assertNotIn("cookie=99", f.read())

    def test_a_per_cpu_pair_costs_two_fsyncs(self):
        if UNDER_WRAPPER:
            skip_notice("fsync count", "pmqosd runs under a checker")
            return
        c = self.client()
        c.call("Request", "sia{sv}", "cpu_dma", 41, {"cpus": GLib.Variant("au", [1])}, iface=NATIVE_IFACE)  # warm up
        trace = os.path.join(self.bus.dir, "strace.out")
        st = strace(self.daemon.proc.pid, "fsync,fdatasync", trace, follow=True)
        for _ in range(3):
            cookie = c.call("Request", "sia{sv}", "cpu_dma", 42, {"cpus": GLib.Variant("au", [0])},
                            iface=NATIVE_IFACE)[0]
            c.call("Cancel", "u", cookie, iface=NATIVE_IFACE)
        c.call("Ping", iface=PEER)  # every fsync of the calls before is done: they are before the replies
        time.sleep(0.3)  # and none comes late (assert_persists, but for a count)
        st.send_signal(signal.SIGINT)
        st.wait()
        with open(trace) as f:
            n = sum(1 for line in f if re.search(r"\bf(data)?sync\(", line))
        self.assertLessEqual(n, 6, "%d fsyncs for 3 per-CPU pairs" % n)
        self.assertIntact(700)




@unittest.skipUnless(IS_ROOT, "needs root: other owners, FIFOs and users")
class TestStateDirectory(BrokerTestCase):
    def fresh_dir(self, mode=0o700, uid=0):
        d = tempfile.mkdtemp(prefix="pmqos-state-", dir=self.bus.dir)
        os.chmod(d, mode)
        os.chown(d, uid, uid)
        return d

    def test_fifo_as_state_file(self):
        """Used to hang the start with SIGTERM blocked."""
        d = self.fresh_dir()
        os.mkfifo(os.path.join(d, "state"))
        self.start_daemon((), state_dir=d)
        self.assertIn("not a regular file", self.daemon.output())
        self.assertTrue(any(n.startswith("state.corrupt-") for n in os.listdir(d)))
        c = self.client()
        self.assertEqual(c.latency(), -1)

    def test_foreign_owner_or_writable_dir_refused(self):
        for mode, uid, expect in ((0o700, NOBODY, "belongs to uid %d" % NOBODY), (0o770, 0, "writable by group"),
                                  (0o707, 0, "writable by group or others")):
            with self.subTest(mode=oct(mode), uid=uid):
                d = self.fresh_dir(mode, uid)
                p = subprocess.run([PMQOSD, "--device", self.kernel.path, "--state-dir", d], env=self.bus.env,
                                   capture_output=True, text=True, timeout=30 * TIME_SCALE)
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertIn(expect, p.stderr)
        link = os.path.join(self.bus.dir, "state-link")
        os.symlink(self.fresh_dir(), link)
        p = subprocess.run([PMQOSD, "--device", self.kernel.path, "--state-dir", link], env=self.bus.env,
                           capture_output=True, text=True, timeout=30 * TIME_SCALE)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("symbolic link", p.stderr)

    def test_user_cannot_make_root_chown_through_links(self):
        """pmqosd --user pmqos chowned <state-dir>/state as root, following a
        symlink the pmqos user planted: a root 0600 file became pmqos's."""
        pw = pwd.getpwnam("pmqos")
        secret = os.path.join(self.bus.dir, "secret")
        with open(secret, "w") as f:
            f.write("pmqos-state 1\nfloor -1\nend\n")  # even a valid state file
        os.chmod(secret, 0o600)
        # A symlink: not followed at load (moved aside) nor when the directory is handed over.
        d = self.fresh_dir(0o700, pw.pw_uid)
        os.symlink(secret, os.path.join(d, "state"))
        self.start_daemon(("--user", "pmqos"), state_dir=d)
        self.assertIn("not a regular file", self.daemon.output())
        st = os.stat(secret)
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (0, 0o600))
        self.daemon.stop()
        # A hard link: loaded (it is a valid file), but never handed over.
        d = self.fresh_dir(0o700, pw.pw_uid)
        os.link(secret, os.path.join(d, "state"))
        p = subprocess.run([PMQOSD, "--device", self.kernel.path, "--state-dir", d, "--user", "pmqos"],
                           env=self.bus.env, capture_output=True, text=True, timeout=30 * TIME_SCALE)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("not a plain file with one link", p.stderr)
        st = os.stat(secret)
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (0, 0o600))
        self.start_daemon((), state_dir=self.fresh_dir())


@unittest.skipUnless(polkit_ready, "needs root and polkitd")
class TestUnitPrivileges(BrokerTestCase):
    """The closest run to the shipped unit without a service manager here:
    pmqosd with the unit's ExecStart arguments, its capability bounding set
    and NoNewPrivileges. It must end as user pmqos with no capability at all
    (bounding set included) and still serve."""

    with_polkit = True

    def unit(self):
        with open(os.path.join(os.environ.get("PMQOS_BUILD_ROOT", os.path.join(SOURCE_ROOT, "build")), "dbus",
                               "pmqosd.service")) as f:
            text = f.read()
        exec_start = re.search(r"^ExecStart=(\S+)(.*)$", text, re.M)
        caps = re.search(r"^CapabilityBoundingSet=(.*)$", text, re.M).group(1).split()
        return exec_start.group(2).split(), caps

    def test_runs_as_pmqos_with_nothing_left(self):
        args, caps = self.unit()
        self.assertEqual(args, ["--user", "pmqos"])
        bounding = "-all," + ",".join("+" + c.lower().replace("cap_", "") for c in caps)
        env_wrapper = os.environ.get("PMQOSD_WRAPPER", "")
        os.environ["PMQOSD_WRAPPER"] = "setpriv --bounding-set=%s --inh-caps=-all --no-new-privs %s" % (
            bounding, env_wrapper)
        try:
            self.start_daemon(tuple(args))
        finally:
            os.environ["PMQOSD_WRAPPER"] = env_wrapper
        pw = pwd.getpwnam("pmqos")
        f = proc_status(self.daemon.proc.pid)
        self.assertEqual(f["Uid"].split(), [str(pw.pw_uid)] * 4)
        self.assertEqual(f["Gid"].split(), [str(pw.pw_gid)] * 4)
        self.assertEqual(f["Groups"], "")
        for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            self.assertEqual(int(f[k], 16), 0, "%s is %s" % (k, f[k]))
        self.assertEqual(f["NoNewPrivs"], "1")
        c = self.client()
        cookie = c.request(222)
        self.assertKernelAtMost(222)
        u = pwd.getpwnam(POLKIT_USERS["member"])
        m = self.peer(uid=u.pw_uid, gid=u.pw_gid)
        self.assertEqual(m.call("RequestLatency", "sib", "cpu_dma", 111, False)[0], "ok")
        self.assertEqual(c.latency(), 111)
        c.cancel(cookie)


if __name__ == "__main__":
    main()
