# SPDX-License-Identifier: LGPL-2.1-or-later
"""Requests not bound to the Client: Hold() (bound to a descriptor the
caller owns) and RequestFor() (bound to a process or a cgroup v2
directory), through libpmqos's pmqos_hold_fd() and pmqos_request_for_fd(); and
pmqos.hold, the with block of one request of a Client of its own.

    with pmqos.Client() as c:
        h = c.hold(50, reason="render")      # lives while any copy of h.fd is open
        subprocess.run(["render"], pass_fds=[h.fd])
        h.close()
        c.request_for(20, pid=worker.pid)    # ends when that process exits
        c.request_for(20, cgroup="/sys/fs/cgroup/render.slice")  # when emptied

Used through Client.hold() and Client.request_for(); see pmqos."""

import ctypes
import errno
import os

from . import Client, Error, InvalidArgument, _check_cpus, _check_usec, _Closing, _ERRORS, _invalid, _library, _raise

PID_MAX = 2 ** 22  # the kernel's PID_MAX_LIMIT: no pid is larger

_ready = False


def _lib():
    global _ready
    lib = _library()
    if not _ready:
        p = ctypes.c_void_p
        u32p = ctypes.POINTER(ctypes.c_uint32)
        lib.pmqos_hold_fd.argtypes = [p, ctypes.c_int32, ctypes.c_char_p, ctypes.c_uint32, u32p, ctypes.c_size_t,
                                      u32p, ctypes.POINTER(ctypes.c_int)]
        lib.pmqos_request_for_fd.argtypes = [p, ctypes.c_int32, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32,
                                             u32p, ctypes.c_size_t, u32p]
        _ready = True
    return lib


def _common(usec, reason, cpus):
    usec = _check_usec(usec)
    cpu_list = _check_cpus(cpus)
    if reason is not None and not isinstance(reason, str):
        raise _invalid("a reason is a str, not %r" % (reason,))
    cpu_array = (ctypes.c_uint32 * len(cpu_list))(*cpu_list) if cpu_list else None
    cpu_ptr = ctypes.cast(cpu_array, ctypes.POINTER(ctypes.c_uint32)) if cpu_array else None
    return usec, reason.encode() if reason is not None else None, cpu_array, cpu_ptr, len(cpu_list)


def _os_error(e, what):
    """An OSError opening a target, as a pmqos.Error: a missing process or
    path is a bad argument (not NoSuchRequest, which is about cookies)."""
    if e.errno in (errno.ESRCH, errno.ENOENT, errno.ENOTDIR, errno.EINVAL):
        cls = InvalidArgument
    else:
        cls = _ERRORS.get(e.errno, Error)
    return cls("%s: %s" % (what, e.strerror or e), e.errno or 0)


class Hold(_Closing):
    """A request that lives while any copy of its descriptor fd is open, in
    this process or any other (pass fd to a child with subprocess's
    pass_fds), whatever becomes of the Client that made it. close() (or the
    end of a with block, or garbage collection) closes this copy; the
    request ends when the last copy is closed. After close(), fd is -1."""

    def __init__(self, cookie, fd):
        self.cookie = cookie
        self.fd = fd

    def close(self):
        """Closes this process's copy of the descriptor; idempotent."""
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    @property
    def closed(self):
        return self.fd < 0

    def fileno(self):
        if self.fd < 0:
            raise ValueError("the hold is closed")
        return self.fd

    def __repr__(self):
        return "<pmqos.Hold cookie=%d fd=%d>" % (self.cookie, self.fd)


def hold_fd(c, usec, reason=None, cpus=None):
    """Client.hold(): a Hold (its cookie and descriptor)."""
    usec, reason_b, cpu_array, cpu_ptr, n_cpus = _common(usec, reason, cpus)
    cookie, fd = ctypes.c_uint32(), ctypes.c_int(-1)
    r = _lib().pmqos_hold_fd(c, usec, reason_b, 0, cpu_ptr, n_cpus, ctypes.byref(cookie), ctypes.byref(fd))
    if r < 0:
        _raise(r, c, "hold refused")
    return Hold(cookie.value, fd.value)


def _check_pid(pid):
    if not isinstance(pid, int) or isinstance(pid, bool):
        raise _invalid("a pid is an int, not %r" % (pid,))
    if not 1 <= pid <= PID_MAX:
        raise _invalid("pid %d is out of range; pids are 1 … %d" % (pid, PID_MAX))
    return pid


def _open_target(pid, cgroup):
    """The descriptor RequestFor() binds to (the caller closes it)."""
    if (pid is None) == (cgroup is None):
        raise _invalid("give exactly one of pid or cgroup")
    if pid is not None:
        _check_pid(pid)
        try:
            return os.pidfd_open(pid)
        except OSError as e:
            raise _os_error(e, "cannot open process %d" % pid) from None
    try:
        path = os.fspath(cgroup)
    except TypeError:
        raise _invalid("a cgroup is a path (str, bytes or os.PathLike), not %r" % (cgroup,)) from None
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (OSError, ValueError) as e:
        if isinstance(e, ValueError):  # an embedded NUL
            raise _invalid("cgroup path %r is not a path" % (path,)) from None
        raise _os_error(e, "cannot open cgroup %r" % (path,)) from None


def request_for(c, usec, pid=None, cgroup=None, reason=None, cpus=None):
    """Client.request_for(): the cookie of a request that ends when process
    pid exits, or when the cgroup v2 directory cgroup has no process left
    (or is removed)."""
    usec, reason_b, cpu_array, cpu_ptr, n_cpus = _common(usec, reason, cpus)
    target = _open_target(pid, cgroup)
    try:
        cookie = ctypes.c_uint32()
        r = _lib().pmqos_request_for_fd(c, usec, target, reason_b, 0, cpu_ptr, n_cpus, ctypes.byref(cookie))
    finally:
        os.close(target)
    if r < 0:
        _raise(r, c, "request for %s refused" % ("process %d" % pid if pid is not None else "cgroup %r" % (cgroup,)))
    return cookie.value


class hold:
    """Context manager holding one request for the duration of a with block:
    usec on every CPU, or on the CPUs listed in cpus only; reason is shown
    in listings.

    Leaving the block returns only after pmqosd confirmed the bound is gone."""

    def __init__(self, usec, reason=None, cpus=None):
        self.usec = _check_usec(usec)
        self.reason = reason
        self.cpus = _check_cpus(cpus)
        self.client = None
        self.cookie = None

    def __enter__(self):
        self.client = Client()
        try:
            self.cookie = self.client.request(self.usec, reason=self.reason, cpus=self.cpus)
        except BaseException:
            self.client.close()
            raise
        return self

    def __exit__(self, *exc):
        self.client.close()
        return False
