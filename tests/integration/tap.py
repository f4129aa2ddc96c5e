# SPDX-License-Identifier: LGPL-2.1-or-later
"""How the integration tests report: unittest's report on stderr, TAP on
stdout for meson (protocol 'tap'), a SKIP: line for every skip."""

import sys
import unittest

import hostenv


class TapResult(unittest.TextTestResult):
    """unittest's report on stderr, and TAP on stdout, so that meson (protocol
    'tap') lists every test case as its own result and a red run names the
    case. A skip is also said on a SKIP: line: never silent."""

    def __init__(self, stream, descriptions, verbosity):
        super().__init__(stream, descriptions, verbosity)
        self.tap_count = 0

    def tap(self, ok, test, note=""):
        self.tap_count += 1
        sys.stdout.write("%s %d - %s%s\n" % ("ok" if ok else "not ok", self.tap_count, test.id(), note))
        sys.stdout.flush()

    def addSuccess(self, test):
        super().addSuccess(test)
        self.tap(True, test)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.tap(False, test)

    def addError(self, test, err):
        super().addError(test, err)
        self.tap(False, test)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        sys.stderr.write("SKIP: %s (%s)\n" % (test.id(), reason))
        self.tap(True, test, " # SKIP %s" % reason)

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self.tap(False, subtest)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self.tap(True, test, " # TODO expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.tap(False, test)


def main():
    """Runs the module's tests: the report on stderr, TAP on stdout; as root
    in a private copy of the host (hostenv.enter_private_host)."""
    hostenv.enter_private_host()
    runner = unittest.TextTestRunner(stream=sys.stderr, verbosity=2, resultclass=TapResult)
    program = unittest.main(testRunner=runner, exit=False)
    result = program.result
    sys.stdout.write("1..%d\n" % result.tap_count)
    sys.exit(0 if result.wasSuccessful() else 1)
