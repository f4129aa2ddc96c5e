# SPDX-License-Identifier: LGPL-2.1-or-later
"""libpmqos's Hold()/RequestFor() calls, through ctypes on the built
library: pmqos_hold_fd()'s descriptor ends the request at its close (after
the client is freed), pmqos_request_for_pidfd() ends with the process,
pmqos_request_for_cgroup() refuses a non-cgroup path, and every failure
leaves *ret_cookie 0 and *ret_fd -1. The kernel value is read back.
pmqos_request_for_fd_type() with PMQOS_TYPE_CPU_WAKEUP writes the wakeup
device (a file here), not cpu_dma's, and pmqos_get_latency_type() reads it;
without a wakeup device -EOPNOTSUPP."""

import ctypes
import errno
import os
import struct
import subprocess
import sys
import tempfile
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

from fixtures import BrokerTestCase, IS_ROOT, LATENCY_MAX, main  # noqa: E402

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
    lb.pmqos_request_for_fd_type.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int32, ctypes.c_int,
                                             ctypes.c_char_p, ctypes.c_uint32, U32P, ctypes.c_size_t, U32P]
    lb.pmqos_get_latency_type.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int32)]
    return lb


CPU_DMA, CPU_WAKEUP = 0, 1


@unittest.skipUnless(IS_ROOT and LIBRARY, "needs root and PMQOS_LIBRARY (run through meson test)")
class LibCase(BrokerTestCase):
    def setUp(self):
        super().setUp()
        _ = self.daemon
        os.environ["DBUS_SYSTEM_BUS_ADDRESS"] = self.bus.address
        self.lib = lib()
        self.c = ctypes.c_void_p()
        self.assertEqual(self.lib.pmqos_client_new(ctypes.byref(self.c)), 0)
        self.addCleanup(lambda: self.lib.pmqos_client_free(self.c))
        self.value = 30 + os.getpid() % 7


@unittest.skipUnless(IS_ROOT and LIBRARY, "needs root and PMQOS_LIBRARY (run through meson test)")
class TestLibHeld(LibCase):

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

    def test_request_for_fd_type_without_wakeup_device(self):
        pidfd = os.pidfd_open(os.getpid())
        self.addCleanup(os.close, pidfd)
        cookie = ctypes.c_uint32(7)
        r = self.lib.pmqos_request_for_fd_type(self.c, CPU_WAKEUP, self.value, pidfd, None, 0, None, 0,
                                               ctypes.byref(cookie))
        self.assertEqual((r, cookie.value), (-errno.EOPNOTSUPP, 0))
        cookie = ctypes.c_uint32(7)
        r = self.lib.pmqos_request_for_fd_type(self.c, 7, self.value, pidfd, None, 0, None, 0, ctypes.byref(cookie))
        self.assertEqual((r, cookie.value), (-errno.EINVAL, 0))
        self.assertEqual(self.client().requests(), [])


@unittest.skipUnless(IS_ROOT and LIBRARY, "needs root and PMQOS_LIBRARY (run through meson test)")
class TestLibWakeupType(LibCase):
    """The same calls against a pmqosd with a wakeup device (a file)."""

    def setUp(self):
        fd, self.wakeup = tempfile.mkstemp(prefix="pmqos-wakeup-")
        os.write(fd, struct.pack("=i", LATENCY_MAX))
        os.close(fd)
        self.addCleanup(os.unlink, self.wakeup)
        self.daemon_args = ("--wakeup-device", self.wakeup)
        super().setUp()

    def wakeup_value(self):
        with open(self.wakeup, "rb") as f:
            return struct.unpack("=i", f.read(4))[0]

    def latency_type(self, t):
        v = ctypes.c_int32(5)
        self.assertEqual(self.lib.pmqos_get_latency_type(self.c, t, ctypes.byref(v)), 0)
        return v.value

    def test_request_for_fd_type_wakeup(self):
        proc = subprocess.Popen(["sleep", "600"])
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        pidfd = os.pidfd_open(proc.pid)
        cookie = ctypes.c_uint32()
        r = self.lib.pmqos_request_for_fd_type(self.c, CPU_WAKEUP, self.value, pidfd, b"lib", 0, None, 0,
                                               ctypes.byref(cookie))
        os.close(pidfd)
        self.assertEqual(r, 0)
        self.assertGreater(cookie.value, 0)
        self.assertEqual(self.wakeup_value(), self.value)
        self.assertEqual(self.latency_type(CPU_WAKEUP), self.value)
        self.assertEqual(self.latency_type(CPU_DMA), -1)  # cpu_dma's device left alone
        self.assertEqual([q[6] for q in self.client().requests()], ["cpu_wakeup"])  # (…, type, …)
        proc.kill()
        proc.wait()
        self.assert_eventually(lambda: self.wakeup_value() == LATENCY_MAX, what="the wakeup bound to lift")
        self.assertEqual(self.latency_type(CPU_WAKEUP), -1)


if __name__ == "__main__":
    main()
