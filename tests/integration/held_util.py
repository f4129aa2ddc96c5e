# SPDX-License-Identifier: LGPL-2.1-or-later
"""Calls that carry descriptors (Hold, RequestFor) over a Gio connection,
and the cgroups the held-request tests make; shared by test_held*.py and
the scripts they run as other processes (which import it by path)."""

import os
import time

import gi

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

BUS_NAME = "org.freedesktop.PMQoS"
PATH = "/org/freedesktop/PMQoS"
NATIVE_IFACE = "org.freedesktop.PMQoS"
CGROUP2_CANDIDATES = ("/sys/fs/cgroup/unified", "/sys/fs/cgroup")


def connect(address):
    return Gio.DBusConnection.new_for_address_sync(
        address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
        None, None)


def _conn(c):
    return getattr(c, "conn", c)


def call_fds(c, method, signature, args, fds=(), flags=0):
    """A call with descriptors (dup'd: the caller keeps its own); returns the
    reply's values and the descriptors it carried."""
    fdl = Gio.UnixFDList.new_from_array([os.dup(fd) for fd in fds])
    reply, out = _conn(c).call_with_unix_fd_list_sync(
        BUS_NAME, PATH, NATIVE_IFACE, method, GLib.Variant("(%s)" % signature, args), None,
        Gio.DBusCallFlags(flags), 10000, fdl, None)
    return reply.unpack(), (out.steal_fds() if out else [])


def hold(c, value, options=None, type_="cpu_dma"):
    """Hold(): (cookie, the descriptor it lives as long as)."""
    (cookie, index), fds = call_fds(c, "Hold", "sia{sv}", (type_, value, options or {}))
    for i, fd in enumerate(fds):
        if i != index:
            os.close(fd)
    return cookie, fds[index]


def request_for(c, value, target_fd, options=None, flags=0):
    (cookie,), _ = call_fds(c, "RequestFor", "siha{sv}", ("cpu_dma", value, 0, options or {}), [target_fd], flags)
    return cookie


def requests_by_cookie(c):
    reply = _conn(c).call_sync(BUS_NAME, PATH, NATIVE_IFACE, "ListRequests", None, None, Gio.DBusCallFlags.NONE,
                               10000, None)
    return {e["cookie"]: e for e in reply.unpack()[0]}


def cgroup_root():
    """Where a cgroup v2 hierarchy is mounted that we may make cgroups in, or None."""
    for root in CGROUP2_CANDIDATES:
        if os.path.exists(os.path.join(root, "cgroup.procs")) and os.access(root, os.W_OK):
            with open("/proc/self/mountinfo") as f:
                if any(line.split()[4] == root and " - cgroup2 " in line for line in f):
                    return root
    return None


def make_cgroup(test, uid=None):
    """A fresh cgroup for test (removed at its cleanup, once empty), or the
    test skipped saying why."""
    root = cgroup_root()
    if not root:
        from fixtures import skip_notice
        skip_notice("cgroup-bound requests", "no writable cgroup2 hierarchy")
        test.skipTest("no writable cgroup2 hierarchy")
    path = os.path.join(root, "pmqos-test-%d-%d" % (os.getpid(), time.monotonic_ns()))
    os.mkdir(path)
    if uid is not None:
        os.chown(path, uid, uid)

    def remove():
        for _ in range(200):
            try:
                os.rmdir(path)
                return
            except OSError:
                time.sleep(0.01)  # its last process is still being reaped
    test.addCleanup(remove)
    return path
