# SPDX-License-Identifier: LGPL-2.1-or-later
"""pmqosctl's first-contact additions (issue 43): the Bound: line counting
per-CPU bounds; status --check against a real external holder of the device
and a real foreign write to cpu1's pm_qos_resume_latency_us (put back
after); list --full and --no-legend, nothing cut when not on a terminal;
one "no constraint" (-1) in every field of status --json; check-config
(pmqosd --check-config through pmqosctl, drop-ins, C-state names); the bash
completion's verbs and C-state names."""

import glob
import json
import os
import subprocess
import shutil
import sys
import tempfile
import time

from contract import LATENCY_MAX
from fake_sysfs import cpu_file
from fixtures import main
import test_pmqosctl
from test_pmqosctl import PMQOSCTL, CtlTestCase, on_a_terminal

SYSFS = "/sys"


class Holder:
    """A process outside pmqosd holding the device at value (as TuneD does)."""

    def __init__(self, path, value, marker):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "import os, struct, sys; fd = os.open(sys.argv[1], os.O_RDWR); "
             "os.write(fd, struct.pack('=i', int(sys.argv[2]))); print(flush=True); sys.stdin.read()",
             path, str(value), marker], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.proc.stdout.readline()
        self.pid = self.proc.pid

    def stop(self):
        self.proc.stdin.close()
        self.proc.wait()
        self.proc.stdout.close()


class StatusTestCase(CtlTestCase):
    fake_sysfs_daemon = test_pmqosctl.TestCommands.fake_sysfs_daemon  # cpu0–3 online, cpu3's file at 40

    def unconstrained(self):
        """The machine-wide value at the kernel's default before the test (no other holder binds)."""
        if self.kernel.read() != LATENCY_MAX:
            self.skipTest("another holder of the device binds it: %d µs" % self.kernel.read())


class TestBoundLine(StatusTestCase):
    def test_per_cpu_only_bound_is_not_none(self):
        """A request for cpu1 only, and cpu3's file written by someone else
        (the fake sysfs): the Bound: line names both, not "none"."""
        self.unconstrained()
        self.fake_sysfs_daemon()
        cookie = self.ctl("request", "10", "--cpus", "1", "--timeout", "60", "--reason", "pod web-0",
                          check=0).stdout.strip()
        out = self.ctl("status", check=0).stdout
        self.assertRegex(out, r"Bound:    none machine-wide; cpu1 10 µs by request %s of uid 0 pid \d+ `[^`]*` "
                              r"\(pod web-0\); cpu3 40 µs written to its pm_qos_resume_latency_us by someone else\n"
                         % cookie)
        self.assertNotIn("nothing asks for one", out)

    def test_machine_wide_bound_with_a_stricter_cpu(self):
        self.fake_sysfs_daemon()
        self.ctl("request", "500", "--timeout", "60", check=0)
        cookie = self.ctl("request", "10", "--cpus", "1", "--timeout", "60", check=0).stdout.strip()
        out = self.ctl("status", check=0).stdout
        self.assertRegex(out, r"Bound:    \d+ µs, set by [^\n]*; cpu1 10 µs by request %s of uid 0" % cookie)

    def test_fake_sysfs_rig(self):
        """The rig of the tests above: without any request, only cpu3's foreign file bounds."""
        self.unconstrained()
        self.fake_sysfs_daemon()
        out = self.ctl("status", check=0).stdout
        self.assertIn("Bound:    none machine-wide; cpu3 40 µs written to its pm_qos_resume_latency_us by "
                      "someone else\n", out)


class TestCheck(StatusTestCase):
    def test_clean_is_0(self):
        self.unconstrained()
        proc = self.ctl("status", "--check", check=0)
        self.assertIn("The kernel applies what pmqosd asks", proc.stdout)
        self.ctl("request", "55", "--timeout", "60", check=0)
        self.ctl("status", "--check", check=0)

    def test_external_holder_is_1_and_named(self):
        if not self.kernel.real:
            self.skipTest("needs the real device: a holder pmqosd does not see")
        self.unconstrained()
        self.ctl("request", "55", "--timeout", "60", check=0)
        holder = Holder(self.kernel.path, 7, "tuned-alike")
        self.addCleanup(holder.stop)
        proc = self.ctl("status", "--check", check=1)
        lines = proc.stdout.splitlines()
        self.assertEqual(len(lines), 1, proc.stdout)
        self.assertRegex(lines[0], r"^/dev/cpu_dma_latency: the kernel is at 7 µs, pmqosd asks for 55 µs: "
                                   r"`[^`]*tuned-alike` \(pid %d\) holds /dev/cpu_dma_latency itself$" % holder.pid)

    def test_foreign_write_is_1(self):
        path = cpu_file(SYSFS, 1)
        if not self.kernel.real or not os.path.exists(path):
            self.skipTest("needs the real device and cpu1's pm_qos_resume_latency_us")
        self.unconstrained()
        with open(path) as f:
            saved = f.read().strip()

        def put_back():
            with open(path, "w") as f:
                f.write(saved)
        self.addCleanup(put_back)
        self.ctl("status", "--check", check=0)
        with open(path, "w") as f:
            f.write("n/a")
        # The writer is named once pmqosd has read the write's event (its
        # watch needs root: without it, "someone else"). Here: this process.
        named = 'cpu1: pm_qos_resume_latency_us holds "n/a", not what pmqosd wrote: written by pid %d (' % os.getpid()
        anon = 'cpu1: pm_qos_resume_latency_us holds "n/a", not what pmqosd wrote: written by someone else'
        deadline = time.monotonic() + 5
        while True:
            proc = self.ctl("status", "--check", check=1)
            lines = proc.stdout.splitlines()
            if os.geteuid() != 0 or (lines and lines[0].startswith(named)) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(len(lines), 1, proc.stdout)
        if os.geteuid() == 0:
            self.assertTrue(lines[0].startswith(named) and lines[0].endswith(")"), lines[0])
        else:
            self.assertEqual(lines[0], anon)
        self.assertNotIn("someone else", proc.stdout if os.geteuid() == 0 else "")
        # The ledger charges cpu1's blocked state to that writer, said as such
        # (it said "another holder of the device", which nobody was).
        plain = self.ctl("status", check=0).stdout
        self.assertIn("another program (holding the device, or writing a CPU's file)", plain)
        self.assertNotIn("another holder of the device", plain)
        put_back()
        self.ctl("status", "--check", check=0)

    def test_blocked_state_entered_is_1(self):
        """The ledger's verdict (fake sysfs): at 50 µs cpu2's C6 (85 µs) is
        blocked; once its usage counter grows, --check names cpu2."""
        root = self.fake_sysfs_daemon()
        self.ctl("request", "50", "--timeout", "60", check=0)
        line = "cpu2: a C-state its bound blocks was entered since the bound took effect"
        self.assertNotIn(line, self.ctl("status", "--check").stdout)
        with open(os.path.join(root, "devices/system/cpu/cpu2/cpuidle/state2/usage"), "w") as f:
            f.write("905\n")  # 900 before: 5 entries into the blocked C6
        proc = self.ctl("status", "--check", check=1)
        self.assertIn(line + " (5 entries into blocked states since pmqosd started): the kernel does not obey it\n",
                      proc.stdout)

    def test_usage(self):
        for args in (("--check", "--json"), ("--check", "--watch"), ("--check", "x")):
            self.assertEqual(self.ctl("status", *args, check=2).stdout, "")


class TestListAndJson(StatusTestCase):
    REASON = "pod default/web-0 container " + "0123456789abcdef" * 4  # a 64-character container id

    def test_not_cut_when_not_a_terminal(self):
        self.ctl("request", "70", "--timeout", "60", "--reason", self.REASON, check=0)
        lines = self.ctl("list", check=0).stdout.splitlines()
        self.assertTrue(lines[0].startswith("COOKIE"), lines)
        self.assertIn(self.REASON, lines[1])
        self.assertNotIn("\u2026", lines[1])

    def test_full_and_no_legend_on_a_terminal(self):
        self.ctl("request", "70", "--timeout", "60", "--reason", self.REASON, check=0)
        env = dict(self.bus.env, COLUMNS="")
        status, out = on_a_terminal([PMQOSCTL, "list"], env, columns=80)
        self.assertEqual(status, 0, out)
        self.assertNotIn(self.REASON, out)  # cut to the terminal, as before
        status, out = on_a_terminal([PMQOSCTL, "list", "--full"], env, columns=80)
        self.assertEqual(status, 0, out)
        self.assertIn(self.REASON, out)
        self.assertNotIn("\u2026", out)
        status, out = on_a_terminal([PMQOSCTL, "list", "--full", "--no-legend"], env, columns=80)
        self.assertEqual(status, 0, out)
        lines = out.rstrip("\n").split("\n")
        self.assertEqual(len(lines), 1, out)
        self.assertNotIn("COOKIE", out)
        self.assertIn(self.REASON, lines[0])
        self.assertEqual(self.ctl("list", "--no-legend", check=0).stdout.count("\n"), 1)

    def test_json_no_constraint_is_minus_1(self):
        self.unconstrained()
        e = json.loads(self.ctl("status", "--json", check=0).stdout)
        self.assertEqual((e["effective"], e["kernel"], e["floor"]), (-1, -1, -1))
        self.assertTrue(all(cpu["bound"] == -1 for cpu in e["cpus"]), e["cpus"])
        self.assertNotIn(str(LATENCY_MAX), json.dumps(e))
        self.ctl("request", "55", "--timeout", "60", check=0)
        e = json.loads(self.ctl("status", "--json", check=0).stdout)
        if self.kernel.real:
            self.assertEqual((e["effective"], e["kernel"]), (55, 55))


class TestCheckConfig(CtlTestCase):
    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix="pmqos-check-config-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.conf = os.path.join(self.dir, "pmqosd.conf")
        os.mkdir(self.conf + ".d")

    def write(self, path, text):
        with open(path, "w") as f:
            f.write(text)

    def check(self, status):
        env = {k: v for k, v in os.environ.items() if k != "DBUS_SYSTEM_BUS_ADDRESS"}  # no broker needed
        return self.ctl("check-config", self.conf, env=env, check=status)

    def test_cstate_names_resolved_and_drop_ins_read(self):
        names = sorted({open(p).read().strip() for p in glob.glob(SYSFS + "/devices/system/cpu/cpu*/cpuidle/state*/name")})
        if not names:
            self.skipTest("this machine shows no cpuidle states")
        self.write(self.conf, "[pmqosd]\nMaxTimeoutSec=5min\nDefaultMinimumLatency=%s\n" % names[-1].lower())
        self.write(os.path.join(self.conf + ".d", "50-battery.conf"), "[pmqosd]\nOnBatteryMinimumLatency=%s\n" % names[0])
        out = self.check(0).stdout
        self.assertIn("%s: read\n" % self.conf, out)
        self.assertRegex(out, r"line 3: DefaultMinimumLatency=%s is \d+ µs on this machine" % names[-1].lower())
        self.assertIn("%s.d/50-battery.conf: read\n" % self.conf, out)
        self.assertRegex(out, r"line 2: OnBatteryMinimumLatency=%s is \d+ µs on this machine" % names[0])

    def test_error_names_file_line_and_key(self):
        self.write(self.conf, "[pmqosd]\n\nMaxTimeoutSec=soon\n")
        proc = self.check(1)
        self.assertIn("%s:3: MaxTimeoutSec" % self.conf, proc.stderr)
        self.assertEqual(proc.stdout, "")

    def test_error_in_a_drop_in_names_the_drop_in(self):
        self.write(self.conf, "[pmqosd]\nMaxTimeoutSec=60\n")
        drop_in = os.path.join(self.conf + ".d", "90-local.conf")
        self.write(drop_in, "[pmqosd]\nDefaultMinimumLatency=C99-nowhere\n")
        proc = self.check(1)
        self.assertIn("%s:2: DefaultMinimumLatency" % drop_in, proc.stderr)

    def test_usage(self):
        self.assertEqual(self.ctl("check-config", "a", "b", check=2).stdout, "")
        self.assertIn("Usage: pmqosctl check-config", self.ctl("check-config", "--help", check=0).stdout)


# bash-completion's helpers, as the completion calls them, recording what they were asked.
COMPLETION_STUBS = r"""
_init_completion() { words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; cur=${COMP_WORDS[COMP_CWORD]};
                     prev=${COMP_WORDS[COMP_CWORD-1]}; }
_filedir() { COMPREPLY=("FILEDIR:$*"); }
_command_offset() { COMPREPLY=("COMMAND:$1"); }
source "$1"; shift
COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _pmqosctl; printf '%s\n' "${COMPREPLY[@]}"
"""


class TestCompletion(CtlTestCase):
    root_only = False

    def complete(self, *words):
        script = os.path.join(os.environ["PMQOS_SOURCE_ROOT"], "client-lib", "pmqosctl", "pmqosctl.bash-completion")
        proc = subprocess.run(["bash", "-c", COMPLETION_STUBS, "bash", script, "pmqosctl", *words],
                              capture_output=True, text=True, timeout=30)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return proc.stdout.splitlines()

    def test_verbs(self):
        for verb in ("run", "check-config", "metrics", "status", "list"):
            self.assertIn(verb, self.complete(""))
        self.assertIn("--check", self.complete("status", "--"))
        self.assertIn("--full", self.complete("list", "--"))
        self.assertEqual(self.complete("run", "--cpus", "1", "--", ""), ["COMMAND:5"])
        self.assertIn("--clamp", self.complete("run", "--"))
        self.assertEqual(self.complete("check-config", ""), ["FILEDIR:conf"])
        self.assertEqual(self.complete("metrics", "--textfile", ""), ["FILEDIR:"])

    def test_cstate_names_where_a_latency_is_expected(self):
        names = sorted({open(p).read().strip() for p in glob.glob(SYSFS + "/devices/system/cpu/cpu*/cpuidle/state*/name")})
        if not names:
            self.skipTest("this machine shows no cpuidle states")
        quoted = [n.replace(" ", "\\ ") for n in names]  # "haltpoll\ idle": one word for the shell
        for words in (("hold", ""), ("request", ""), ("set-minimum", ""), ("run", "--clamp", "")):
            got = self.complete(*words)
            for name in quoted:
                self.assertIn(name, got, words)
        self.assertEqual(self.complete("hold", names[-1][:3]), [n for n in quoted if n.startswith(names[-1][:3])])
        self.assertNotIn(quoted[0], self.complete("hold", "20", ""))  # USEC given: options only
        self.assertNotIn(quoted[0], self.complete("hold", "--reason", ""))


if __name__ == "__main__":
    main()
