# SPDX-License-Identifier: LGPL-2.1-or-later
"""Runs the C tests of libpmqos (tests/unit/libpmqos/test-libpmqos.c) against a live
broker: private bus, real polkitd with the project's policy, pmqosd restarted
whenever it exits (as systemd's Restart= would), and test users."""

import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from fixtures import BrokerTestCase, IS_ROOT, PrivateBus, TIME_SCALE, main, skip_notice
from hostenv import POLKITD_PRESENT, POLKIT_USERS, polkit_install, polkit_uninstall

SOURCE_ROOT = os.environ.get("PMQOS_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLES_DIR = os.environ.get("PMQOS_EXAMPLES_DIR", "")
LIBRARY = os.environ.get("PMQOS_LIBRARY", "")
VALGRIND = shutil.which("valgrind")
# An ASan build's library: its programs are checked by ASan itself, which
# must come first (no valgrind around them), and the snippets built here link
# its runtime as meson's own programs do.
LIBRARY_HAS_ASAN = bool(LIBRARY) and "libasan" in subprocess.run(["ldd", LIBRARY], capture_output=True,
                                                                  text=True).stdout
TEST_BINARY = os.environ.get("PMQOS_TEST_LIBPMQOS",
                             os.path.join(os.path.dirname(os.environ.get("PMQOSD", "")), "..", "tests",
                                          "test-libpmqos"))


def setUpModule():
    polkit_install()


def tearDownModule():
    polkit_uninstall()


@unittest.skipUnless(IS_ROOT and POLKITD_PRESENT, "needs root and polkitd")
class TestLibrary(BrokerTestCase):
    with_polkit = True
    daemon_args = ("--max-requests-per-connection", "2")

    def run_binary(self, mode, env, supervise=False):
        proc = subprocess.Popen([TEST_BINARY, mode], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        restarts = 0
        while proc.poll() is None:
            if supervise and self.daemon.proc.poll() is not None:
                self.daemon.log.close()
                restarts += 1
                try:
                    self.start_daemon(self.daemon_args, state_dir=self.daemon.state_dir)
                except AssertionError:
                    # The test binary killed it again before it was seen to own its
                    # name (it watches the name too): that exit counts, start another.
                    pass
            time.sleep(0.01)
        out = proc.stdout.read()
        proc.stdout.close()
        sys.stderr.write(out)
        if proc.returncode == 77:
            skip_notice("libpmqos " + mode, out.strip().splitlines()[-1])
            self.skipTest(out.strip())
        self.assertEqual(proc.returncode, 0, out)
        return restarts

    def env(self):
        member = pwd.getpwnam(POLKIT_USERS["member"])
        plain = pwd.getpwnam(POLKIT_USERS["plain"])
        return dict(self.bus.env, PMQOS_TEST_DEVICE=self.kernel.path, PMQOS_TEST_RUNTIME_DIR=self.bus.runtime_dir,
                    PMQOS_TEST_ROUNDS="1000" if TIME_SCALE == 1 else "100",
                    PMQOS_TEST_MEMBER_UID=str(member.pw_uid), PMQOS_TEST_MEMBER_GID=str(member.pw_gid),
                    PMQOS_TEST_PLAIN_UID=str(plain.pw_uid), PMQOS_TEST_PLAIN_GID=str(plain.pw_gid))

    def test_sched_fifo_caller(self):
        """A SCHED_FIFO caller's request starts the helper thread as SCHED_OTHER."""
        self.start_daemon()
        self.run_binary("sched-fifo", self.env())

    def test_with_broker(self):
        self.start_daemon()
        restarts = self.run_binary("broker", self.env(), supervise=True)
        self.assertEqual(restarts, 2)  # the two restart tests stopped it once each

    def test_without_broker(self):
        empty = PrivateBus()
        try:
            self.run_binary("no-broker", dict(self.env(), DBUS_SYSTEM_BUS_ADDRESS=empty.address))
        finally:
            empty.stop()

    def test_without_bus(self):
        self.run_binary("no-bus", dict(self.env(), DBUS_SYSTEM_BUS_ADDRESS="unix:path=/nonexistent/bus"))


def snippet_program(text, origin):
    """The first C example in text that calls pmqos_client_new (in a ```c
    fence, indented, or in a C comment) as a whole program."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^( \*     |    )?pmqos_client \*c\b", line)
        if not m:
            continue
        prefix = m.group(1) or ""
        body = []
        for line in lines[i:]:
            if line.startswith("```") or (not line.startswith(prefix) and line.strip() not in ("", "*")):
                break
            body.append(line[len(prefix):] if line.startswith(prefix) else "")
        while body and not body[-1].strip():
            body.pop()
        return ("#include <stdint.h>\n#include <stdio.h>\n#include <pmqos.h>\n"
                "static void run_low_latency_work(void) {}\n"
                "int main(void) {\n%s\n        return 0;\n}\n" % "\n".join("        " + b for b in body))
    raise AssertionError("%s shows no C example calling pmqos_client_new()" % origin)


class Examples:
    """The examples as users meet them: client-lib/examples/*.c as built and
    installed, and the snippets of README.md and pmqos.h compiled as they
    stand. Each is run under valgrind when it is installed."""

    def setUp(self):
        if not EXAMPLES_DIR or not LIBRARY:
            self.skipTest("PMQOS_EXAMPLES_DIR and PMQOS_LIBRARY unset (run through meson test)")
        self.tmp = tempfile.mkdtemp(prefix="pmqos-examples-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        super().setUp()

    def programs(self):
        progs = {name: [os.path.join(EXAMPLES_DIR, name)] for name in ("first-request", "hold-busy")}
        progs["hold-busy"].append("0.3")
        for origin in ("README.md", os.path.join("client-lib", "libpmqos", "pmqos.h")):
            with open(os.path.join(SOURCE_ROOT, origin)) as f:
                source = snippet_program(f.read(), origin)
            name = os.path.basename(origin).replace(".", "-")
            path = os.path.join(self.tmp, name + ".c")
            with open(path, "w") as f:
                f.write(source)
            libdir = os.path.dirname(LIBRARY)
            sanitize = ["-fsanitize=address,undefined"] if LIBRARY_HAS_ASAN else []
            cc = subprocess.run([os.environ.get("CC", "cc"), "-Wall", "-Werror", *sanitize, "-o", path[:-2], path,
                                 "-I" + os.path.join(SOURCE_ROOT, "client-lib", "libpmqos"), "-L" + libdir, "-lpmqos",
                                 "-Wl,-rpath," + libdir], stderr=subprocess.PIPE, text=True)
            self.assertEqual(cc.returncode, 0, "%s's example does not compile:\n%s\n%s" % (origin, source, cc.stderr))
            progs[origin] = [path[:-2]]
        return progs

    def run_example(self, argv, env):
        cmd = argv
        if VALGRIND and not LIBRARY_HAS_ASAN:
            cmd = [VALGRIND, "-q", "--error-exitcode=99", "--leak-check=full", "--errors-for-leak-kinds=definite",
                   *argv]
        return subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=120 * TIME_SCALE)


class TestExamplesWithoutBroker(Examples, unittest.TestCase):
    """What a first try meets: no broker, or no bus at all. Each example ends
    cleanly with one line saying why, and valgrind finds nothing."""

    def test_no_broker_and_no_bus(self):
        if not VALGRIND and not LIBRARY_HAS_ASAN:
            skip_notice("the examples under valgrind", "valgrind is not installed; run without it")
        empty = PrivateBus()
        self.addCleanup(empty.stop)
        for name, argv in self.programs().items():
            for address, why in ((empty.address, "pmqosd is not running"),
                                 ("unix:path=/nonexistent/bus", "The system bus is not available")):
                proc = self.run_example(argv, dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=address))
                what = "%s with %s" % (name, why)
                self.assertIn(proc.returncode, (0, 1), "%s: %s" % (what, proc.stderr))
                self.assertIn(why, proc.stderr, what)
                self.assertEqual(len(proc.stderr.strip().splitlines()), 1, "%s: %s" % (what, proc.stderr))


class TestExamplesWithBroker(Examples, BrokerTestCase):
    def test_against_a_broker(self):
        self.start_daemon()
        for name, argv in self.programs().items():
            proc = self.run_example(argv, self.bus.env)
            self.assertEqual(proc.returncode, 0, "%s: %s" % (name, proc.stderr))
            self.assertEqual(proc.stderr, "", name)
            self.assertKernelReleased()

    def test_hold_busy_holds_while_it_runs(self):
        self.start_daemon()
        proc = subprocess.Popen([os.path.join(EXAMPLES_DIR, "hold-busy"), "30"], env=self.bus.env,
                                stdout=subprocess.PIPE, text=True)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        self.assertRegex(proc.stdout.readline(), r"^holding 50 µs \(cookie \d+\)")
        self.assertKernelAtMost(50)
        proc.kill()
        self.assertKernelReleased()


if not IS_ROOT:
    skip_notice("libpmqos C tests and the examples against a broker", "need root (users, polkit files, device)")

if __name__ == "__main__":
    main()
