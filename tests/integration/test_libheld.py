# SPDX-License-Identifier: LGPL-2.1-or-later
"""libpmqos's Hold()/RequestFor() calls, through ctypes on the built
library: pmqos_hold_fd()'s descriptor ends the request at its close (after
the client is freed), pmqos_request_for_pidfd() ends with the process,
pmqos_request_for_cgroup() refuses a non-cgroup path, and every failure
leaves *ret_cookie 0 and *ret_fd -1. The kernel value is read back."""

import ctypes
import os
import subprocess
import sys
import unittest

# A sanitizer build of libpmqos needs its runtime loaded first (as test_binding).
_lib = os.environ.get("PMQOS_LIBRARY")
if _lib and "PMQOS_TEST_REEXEC" not in os.environ:
    _ldd = subprocess.run(["ldd", _lib], stdout=subprocess.PIPE, text=True).stdout
    _pre = [line.split("=>")[1].split()[0] for line in _ldd.splitlines()
            if "=>" in line and ("libasan" in line or "libubsan" in line)]
    if _pre:
        os.execve(sys.executable, [sys.executable] + sys.argv,
                  dict(os.environ, LD_PRELOAD=":".join(_pre), ASAN_OPTIONS="detect_leaks=0",
                       PMQOS_TEST_REEXEC="1"))

from fixtures import BrokerTestCase, IS_ROOT, main  # noqa: E402

LIBRARY = os.environ.get("PMQOS_LIBRARY", "")
U32P = ctypes.POINTER(ctypes.c_uint32)


def lib():
    lb = ctypes.CDLL(LIBRARY)
    lb.pmqos_client_new.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    lb.pmqos_client_free.argtypes = [ctypes.c_void_p]
    lb.pmqos_client_free.restype = ctypes.c_void_p
    lb.pmqos_hold_fd.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p, ctypes.c_uint32, U32P,
                                 ctypes.c_size_t, U32P, ctypes.POINTER(ctypes.c_int)]
    lb.pmqos_request_for_pidfd.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int, ctypes.c_char_p,
                                           ctypes.c_uint32, U32P, ctypes.c_size_t, U32P]
    lb.pmqos_request_for_cgroup.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p, ctypes.c_char_p,
                                            ctypes.c_uint32, U32P, ctypes.c_size_t, U32P]
    return lb


@unittest.skipUnless(IS_ROOT and LIBRARY, "needs root and PMQOS_LIBRARY (run through meson test)")
class TestLibHeld(BrokerTestCase):
    def setUp(self):
        super().setUp()
        _ = self.daemon
        os.environ["DBUS_SYSTEM_BUS_ADDRESS"] = self.bus.address
        self.lib = lib()
        self.c = ctypes.c_void_p()
        self.assertEqual(self.lib.pmqos_client_new(ctypes.byref(self.c)), 0)
        self.addCleanup(lambda: self.lib.pmqos_client_free(self.c))
        self.value = 30 + os.getpid() % 7

    def test_hold_fd_outlives_client(self):
        cookie, fd = ctypes.c_uint32(), ctypes.c_int()
        r = self.lib.pmqos_hold_fd(self.c, self.value, b"lib", 0, None, 0, ctypes.byref(cookie), ctypes.byref(fd))
        self.assertEqual(r, 0)
        self.assertGreater(cookie.value, 0)
        self.assertGreaterEqual(fd.value, 0)
        self.lib.pmqos_client_free(self.c)
        self.c = ctypes.c_void_p()
        self.assertKernelAtMost(self.value)
        os.close(fd.value)
        self.assert_eventually(self.kernel.released, what="the bound to lift at the descriptor's close")

    def test_hold_fd_failure_leaves_nothing(self):
        cookie, fd = ctypes.c_uint32(7), ctypes.c_int(7)
        r = self.lib.pmqos_hold_fd(self.c, -5, None, 0, None, 0, ctypes.byref(cookie), ctypes.byref(fd))
        self.assertLess(r, 0)
        self.assertEqual((cookie.value, fd.value), (0, -1))

    def test_request_for_pidfd(self):
        proc = subprocess.Popen(["sleep", "600"])
        pidfd = os.pidfd_open(proc.pid)
        cookie = ctypes.c_uint32()
        r = self.lib.pmqos_request_for_pidfd(self.c, self.value, pidfd, b"lib", 0, None, 0, ctypes.byref(cookie))
        os.close(pidfd)
        self.assertEqual(r, 0)
        self.assertKernelAtMost(self.value)
        proc.kill()
        proc.wait()
        self.assert_eventually(self.kernel.released, what="the bound to lift at the process's exit")

    def test_request_for_cgroup_not_a_cgroup(self):
        cookie = ctypes.c_uint32(7)
        r = self.lib.pmqos_request_for_cgroup(self.c, self.value, b"/tmp", None, 0, None, 0, ctypes.byref(cookie))
        self.assertLess(r, 0)
        self.assertEqual(cookie.value, 0)


if __name__ == "__main__":
    main()
