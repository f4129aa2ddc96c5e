# SPDX-License-Identifier: LGPL-2.1-or-later
"""pmqosd --check-config: the configuration and the unit rules read as a
start or a reload would, what is wrong said as file:line: key: why with the
whole refused value; the README's example and the installed default are
accepted; the unit's reload runs the check first. Needs no root and no
running daemon."""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import unittest

from contract import NATIVE_IFACE, POLICY_FILE
from fixtures import BrokerTestCase, PMQOSD, SOURCE_ROOT, main, wait_for
from fake_sysfs import CSTATE_LATENCY, CSTATE_NAMES, make_cstate_sysfs


class TestCheckConfig(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="pmqos-config-")
        self.rules = os.path.join(self.dir, "rules.d")
        os.mkdir(self.rules)
        self.addCleanup(subprocess.run, ["rm", "-rf", self.dir])

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def check(self, config, *extra, env=None):
        return subprocess.run([PMQOSD, "--check-config", "--config", config, "--rules-dir", self.rules, *extra],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30,
                              env=dict(os.environ, **(env or {})))

    def test_good_file(self):
        proc = self.check(self.write("good.conf", "[pmqosd]\nMaxTimeoutSec=3600\nDefaultMinimumLatency=10\n"))
        self.assertEqual((proc.returncode, proc.stdout, proc.stderr), (0, "", ""))

    def test_bad_value_whole(self):
        value = "a rather long value that the old message cut in the middle of a word"
        path = self.write("bad.conf", "[pmqosd]\n# a comment\nMaxTimeoutSec=%s\n" % value)
        proc = self.check(path)
        self.assertEqual(proc.returncode, 1)
        self.assertIn('%s:3: MaxTimeoutSec: invalid value "%s"' % (path, value), proc.stderr)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)

    def test_inline_comment_is_a_value(self):
        # As in systemd's files, "#" starts a comment only at the start of a line.
        path = self.write("inline.conf", "[pmqosd]\nMaxTimeoutSec=300 # five minutes\n")
        proc = self.check(path)
        self.assertEqual(proc.returncode, 1)
        self.assertIn('%s:2: MaxTimeoutSec: invalid value "300 # five minutes"' % path, proc.stderr)

    def test_command_line_numbers_as_the_file_reads_them(self):
        # pmqosd's own options take the file's grammar: decimal digits (a
        # leading zero is decimal), no sign; --max-timeout a span too.
        good = self.write("empty.conf", "")
        for option, value in (("--max-timeout", "5min"), ("--max-timeout", "010"),
                              ("--max-requests-per-uid", "010"), ("--max-requests-per-connection", "64")):
            proc = self.check(good, option, value)
            self.assertEqual((proc.returncode, proc.stderr), (0, ""), (option, value))
        for option, value in (("--max-timeout", "+5"), ("--max-timeout", "1.5s"), ("--max-timeout", "0"),
                              ("--max-requests-per-uid", " 5"), ("--max-requests-per-uid", "+5"),
                              ("--max-requests-per-uid", "0x10"), ("--max-requests-per-connection", "5min")):
            proc = self.check(good, option, value)
            self.assertEqual(proc.returncode, 2, (option, value))
            self.assertIn('invalid', proc.stderr)
            self.assertIn('"%s"' % value, proc.stderr)

    def test_unknown_key_and_missing_file(self):
        proc = self.check(self.write("unknown.conf", "[pmqosd]\nMaxTimeoutSecs=5\n"))
        self.assertEqual(proc.returncode, 1)
        self.assertRegex(proc.stderr, r"unknown\.conf:2: MaxTimeoutSecs: unknown key")
        proc = self.check(os.path.join(self.dir, "absent.conf"))
        self.assertEqual(proc.returncode, 1)
        self.assertIn("absent.conf", proc.stderr)

    def test_bad_rule_file(self):
        good = self.write("good.conf", "[pmqosd]\n")
        with open(os.path.join(self.rules, "db.conf"), "w") as f:
            f.write("[Rule]\nUnit=postgresql.service\nLatency=fast\n")
        proc = self.check(good)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("db.conf", proc.stderr)

    def test_cstate_names(self):
        """A C-state name where a latency is taken, looked up in the cpuidle
        of --sysfs-root (or $PMQOS_SYSFS_ROOT); an unknown one, or any on a
        machine without cpuidle, refused as file:line: key: why."""
        sysfs = make_cstate_sysfs()
        self.addCleanup(shutil.rmtree, sysfs, True)
        good = self.write("good.conf", "[pmqosd]\nDefaultMinimumLatency=C1\nOnBatteryMinimumLatency=c1e\n")
        rule = os.path.join(self.rules, "db.conf")
        with open(rule, "w") as f:
            f.write("[Rule]\nUnit=db.service\nLatency=C6\n")
        proc = self.check(good, "--sysfs-root", sysfs)
        self.assertEqual((proc.returncode, proc.stdout, proc.stderr), (0, "", ""))
        proc = self.check(good, env={"PMQOS_SYSFS_ROOT": sysfs})
        self.assertEqual((proc.returncode, proc.stderr), (0, ""))

        bad = self.write("bad.conf", "[pmqosd]\n# the deepest\nOnBatteryMinimumLatency=C1F\n")
        proc = self.check(bad, "--sysfs-root", sysfs)
        self.assertEqual((proc.returncode, proc.stderr),
                         (1, 'pmqosd: Bad configuration: %s:3: OnBatteryMinimumLatency: invalid value "C1F", expected '
                             'a C-state this machine has (%s)\n' % (bad, CSTATE_NAMES)))
        with open(rule, "w") as f:
            f.write("[Rule]\nUnit=db.service\nLatency=C10 s\n")
        proc = self.check(good, "--sysfs-root", sysfs)
        self.assertEqual((proc.returncode, proc.stderr),
                         (1, 'pmqosd: Bad unit rule: %s:3: Latency: invalid value "C10 s", expected a C-state this '
                             'machine has (%s)\n' % (rule, CSTATE_NAMES)))

        # Both files named in one run; without cpuidle no name stands for anything.
        empty = os.path.join(self.dir, "no-cpuidle")
        proc = self.check(good, "--sysfs-root", empty)
        self.assertEqual(proc.returncode, 1)
        self.assertEqual(proc.stderr.splitlines(), [
            'pmqosd: Bad configuration: %s:2: DefaultMinimumLatency: invalid value "C1", expected microseconds: this '
            'machine shows no C-states (no cpuidle under %s/devices/system/cpu)' % (good, empty),
            'pmqosd: Bad unit rule: %s:3: Latency: invalid value "C10 s", expected microseconds: this machine shows '
            'no C-states (no cpuidle under %s/devices/system/cpu)' % (rule, empty)])

    def test_readme_example_and_installed_default(self):
        with open(os.path.join(SOURCE_ROOT, "README.md")) as f:
            readme = f.read()
        section = readme[readme.index("### Configuration"):]
        example = re.search(r"```ini\n(.*?)```", section, re.S).group(1)
        self.assertIn("[pmqosd]", example)
        proc = self.check(self.write("readme.conf", example))
        self.assertEqual((proc.returncode, proc.stderr), (0, ""), example)
        proc = self.check(os.path.join(SOURCE_ROOT, "daemon", "pmqosd.conf"))
        self.assertEqual((proc.returncode, proc.stderr), (0, ""))

    def test_drop_ins_are_read(self):
        main_file = self.write("main.conf", "[pmqosd]\n")
        os.mkdir(main_file + ".d")
        self.write("main.conf.d/10-a.conf", "MaxTimeoutSec=10\n")
        self.write("main.conf.d/README", "not a configuration\n")  # only *.conf
        self.write("main.conf.d/.hidden.conf", "not one either\n")
        self.assertEqual(self.check(main_file).returncode, 0)
        self.write("main.conf.d/20-b.conf", "MaxTimeoutSec=soon\n")
        proc = self.check(main_file)
        self.assertEqual(proc.returncode, 1)
        self.assertIn('main.conf.d/20-b.conf:1: MaxTimeoutSec: invalid value "soon"', proc.stderr)

    def test_unprivileged_timeout_above_the_longest(self):
        """MaxUnprivilegedTimeoutSec above MaxTimeoutSec promises what no
        request may have: refused with the file, line and key that set it,
        whichever file sets the other (accepted before)."""
        bad = self.write("unpriv.conf", "[pmqosd]\nMaxTimeoutSec=1h\n# callers without persistent\n"
                                        "MaxUnprivilegedTimeoutSec=2h\n")
        proc = self.check(bad)
        self.assertEqual((proc.returncode, proc.stderr),
                         (1, "pmqosd: Bad configuration: %s:4: MaxUnprivilegedTimeoutSec: 7200 s is above "
                             "MaxTimeoutSec (3600 s, %s:2), the longest timeout any request may have\n" % (bad, bad)))
        # Lowered by a drop-in: the drop-in's line named too.
        main_file = self.write("main.conf", "[pmqosd]\nMaxUnprivilegedTimeoutSec=600\n")
        os.mkdir(main_file + ".d")
        drop_in = self.write("main.conf.d/50-short.conf", "MaxTimeoutSec=300\n")
        proc = self.check(main_file)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("%s:2: MaxUnprivilegedTimeoutSec: 600 s is above MaxTimeoutSec (300 s, %s:1)"
                      % (main_file, drop_in), proc.stderr)
        # --max-timeout wins over the files: it is what is compared.
        proc = self.check(self.write("ok.conf", "MaxUnprivilegedTimeoutSec=600\n"), "--max-timeout", "5min")
        self.assertIn("MaxUnprivilegedTimeoutSec: 600 s is above MaxTimeoutSec (300 s, --max-timeout)", proc.stderr)
        # Equal, or only MaxTimeoutSec lowered below the default 300 s, is fine.
        for text in ("MaxTimeoutSec=600\nMaxUnprivilegedTimeoutSec=600\n", "MaxTimeoutSec=60\n"):
            proc = self.check(self.write("fine.conf", text))
            self.assertEqual((proc.returncode, proc.stderr), (0, ""), text)

    def test_reload_checks_first(self):
        with open(os.path.join(SOURCE_ROOT, "dbus", "pmqosd.service.in")) as f:
            reloads = [line for line in f.read().splitlines() if line.startswith("ExecReload=")]
        self.assertEqual(reloads, ["ExecReload=+@libexecdir@/pmqosd --check-config",
                                   "ExecReload=+/bin/kill -HUP $MAINPID"])


class TestAdministratorDocs(unittest.TestCase):
    def test_every_polkit_action_documented(self):
        """Each action of the shipped policy has its row in the README's
        table and its entry in pmqosd(8)'s AUTHORIZATION (request-latency-for-others
        had neither)."""
        with open(os.path.join(SOURCE_ROOT, "policy", POLICY_FILE)) as f:
            actions = re.findall(r'<action id="([^"]+)"', f.read())
        self.assertEqual(len(actions), 5, actions)
        with open(os.path.join(SOURCE_ROOT, "README.md")) as f:
            readme = f.read()
        with open(os.path.join(SOURCE_ROOT, "daemon", "pmqosd.8")) as f:
            page = f.read()
        section = page[page.index(".SH AUTHORIZATION"):page.index(".SH RESTARTS")]
        for action in actions:
            self.assertTrue(re.search(r"\n *\| `%s` \| [^|]+ \| [^|]+ \|\n" % re.escape(action), readme),
                            "README's table has no row for " + action)
            self.assertTrue(".TP\n.B %s\n" % action.replace("-", "\\-") in section,
                            "pmqosd(8) AUTHORIZATION has no entry for " + action)

    def test_run_daemon_says_which_device(self):
        """tests/run-daemon, the README's first command, takes the real
        device: its --help (before: none, it built and started pmqosd) and
        the README say so, and how to give a file instead."""
        proc = subprocess.run(["bash", os.path.join(SOURCE_ROOT, "tests", "run-daemon"), "--help"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("Usage: tests/run-daemon [--device FILE]", proc.stdout)
        self.assertIn("It takes the real /dev/cpu_dma_latency", proc.stdout)
        with open(os.path.join(SOURCE_ROOT, "README.md")) as f:
            readme = f.read()
        first = readme[readme.index("## Set up"):readme.index("## A five-minute tour")]
        self.assertIn("tests/run-daemon --device /tmp/latency", first)
        self.assertIn("It takes\nthe real device unless `--device FILE`", first)


class TestDropInPrecedence(BrokerTestCase):
    """The main file, then its drop-ins in lexical order of their names: a
    later file's key wins, a key it does not set stays (pmqosd.conf(5))."""

    def test_lexical_order_wins(self):
        d = tempfile.mkdtemp(prefix="pmqos-config-")
        self.addCleanup(subprocess.run, ["rm", "-rf", d])
        main_file = os.path.join(d, "pmqosd.conf")
        os.mkdir(main_file + ".d")
        for name, text in (("pmqosd.conf", "[pmqosd]\nDefaultMinimumLatency=100\nOnBatteryMinimumLatency=7\n"),
                           ("pmqosd.conf.d/20-b.conf", "DefaultMinimumLatency=300\n"),
                           ("pmqosd.conf.d/10-a.conf", "DefaultMinimumLatency=200\n")):
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        self.start_daemon(("--config", main_file))
        self.assertEqual(self.client().call("Explain", None, iface=NATIVE_IFACE)[0]["floor"], 300)
        os.unlink(os.path.join(d, "pmqosd.conf.d", "20-b.conf"))
        self.start_daemon(("--config", main_file))
        self.assertEqual(self.client().call("Explain", None, iface=NATIVE_IFACE)[0]["floor"], 200)


class TestCStateFloor(BrokerTestCase):
    """DefaultMinimumLatency=C1E: the floor is the state's largest exit
    latency on an online CPU of this machine (a fake cpuidle tree), looked
    up again at each reload; a reload naming no state of this machine
    keeps the previous configuration, as any refused value does."""

    def test_floor_named_by_a_cstate(self):
        sysfs = make_cstate_sysfs()
        self.addCleanup(shutil.rmtree, sysfs, True)
        d = tempfile.mkdtemp(prefix="pmqos-config-")
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, "pmqosd.conf")
        with open(path, "w") as f:
            f.write("[pmqosd]\nDefaultMinimumLatency=C1E\nMaxTimeoutSec=60\n")
        self.start_daemon(("--config", path, "--sysfs-root", sysfs))
        c = self.client()
        explain = lambda: c.call("Explain", None, iface=NATIVE_IFACE)[0]
        self.assertEqual(explain()["floor"], CSTATE_LATENCY["C1E"])  # cpu2's 25 µs, not offline cpu3's
        c.request(1)
        self.assertEqual(c.latency(), CSTATE_LATENCY["C1E"])

        def reload(text, logged):
            with open(path, "w") as f:
                f.write(text)
            before = self.daemon.output().count(logged)
            self.daemon.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: self.daemon.output().count(logged) > before, what="the reload")

        reload("DefaultMinimumLatency=C1\n", "Reloaded")
        self.assertEqual((explain()["floor"], c.latency()), (CSTATE_LATENCY["C1"], CSTATE_LATENCY["C1"]))
        reload("DefaultMinimumLatency=C6\n\nDefaultMinimumLatency=C8\n", "Keeping the previous configuration")
        self.assertIn('Bad configuration: %s:3: DefaultMinimumLatency: invalid value "C8", expected a C-state this '
                      'machine has (%s)' % (path, CSTATE_NAMES), self.daemon.output())
        self.assertEqual((explain()["floor"], c.latency()), (CSTATE_LATENCY["C1"], CSTATE_LATENCY["C1"]))


if __name__ == "__main__":
    main()
