# SPDX-License-Identifier: LGPL-2.1-or-later
"""Hold CPU latency bounds through pmqosd, the system's latency broker.

    import pmqos

    with pmqos.hold(50, reason="audio session"):
        run_realtime_work()          # every CPU wakes within 50 µs meanwhile

    with pmqos.Client() as c:
        cookie = c.request(100)
        c.update(cookie, 20)
        print(c.latency)             # the effective bound, -1 when none
        c.cancel(cookie)
        with c.hold(50) as h:        # a pmqos.Hold: lives while any copy of h.fd is open
            subprocess.run(cmd, pass_fds=[h.fd])
        c.request_for(20, pid=pid)   # or cgroup=PATH: ends when that process/cgroup does

A thin ctypes layer over libpmqos.so.1: no compiler needed. Requests made
through a Client end when it is closed (or the process exits); close() and
the end of a hold block return only after pmqosd confirmed the bound is
gone, so the code after them runs without it. A restart of pmqosd keeps
the requests (pmqosd re-adopts them; the library issues again what it did
not). Failures raise pmqos.Error subclasses that are also the matching
built-in exceptions.
"""

import ctypes
import datetime
import errno
import glob
import os
import re

from ._structs import _Explanation, _RequestInfo, _explanation_dict, _request_dict

__all__ = [
    "Client", "hold", "Hold", "Error", "AccessDenied", "InvalidArgument", "NoSuchRequest", "BrokerUnavailable",
    "LimitsExceeded", "NotSupported", "LibraryUnavailable", "LATENCY_NONE", "LATENCY_MAX", "__version__",
]

# pmqos's version (meson.build's project(); the binding test checks they agree).
__version__ = "0.1.0"

LATENCY_NONE = -1
LATENCY_MAX = 2000000000


class Error(Exception):
    """A pmqos call failed. errno is the library's error number."""

    def __init__(self, message, errnum=0):
        super().__init__(message)
        self.errno = errnum


class AccessDenied(Error, PermissionError):
    """The broker (polkit) refused."""


class InvalidArgument(Error, ValueError):
    """An argument is out of range or malformed."""


class NoSuchRequest(Error, LookupError):
    """No live request has this cookie."""


class BrokerUnavailable(Error, ConnectionError):
    """pmqosd is not running, or the system bus is absent."""


class LimitsExceeded(Error):
    """A per-connection or per-user limit is reached."""


class NotSupported(Error):
    """Not supported on this system."""


class LibraryUnavailable(Error, OSError):
    """libpmqos.so.1 cannot be loaded (missing, or unusable): the message
    names the file and says why. Raised by the first call that needs it."""


_ERRORS = {
    errno.EACCES: AccessDenied,
    errno.EPERM: AccessDenied,
    errno.EINVAL: InvalidArgument,
    errno.ENOENT: NoSuchRequest,
    errno.ECONNREFUSED: BrokerUnavailable,
    errno.EHOSTDOWN: BrokerUnavailable,
    errno.ENOTCONN: BrokerUnavailable,
    errno.EUSERS: LimitsExceeded,
    errno.EOPNOTSUPP: NotSupported,
}


_SONAME = "libpmqos.so.1"


def _load():
    # PMQOS_LIBRARY points at a build tree's library; otherwise the installed soname.
    path = os.environ.get("PMQOS_LIBRARY") or _SONAME
    try:
        return ctypes.CDLL(path, use_errno=False)
    except OSError as e:
        where = "PMQOS_LIBRARY=%s" % path if path != _SONAME else _SONAME
        raise LibraryUnavailable("cannot load %s: %s (install libpmqos1, or point PMQOS_LIBRARY at a build's "
                                 "client-lib/libpmqos/libpmqos.so.1)" % (where, e), e.errno or 0) from None


_lib = None


def _library():
    global _lib
    if _lib is None:
        lib = _load()
        try:
            _declare(lib)
        except AttributeError as e:
            raise LibraryUnavailable("cannot use %s: %s (a libpmqos older than this module)"
                                     % (lib._name, e), 0) from None
        _lib = lib
    return _lib


def _declare(lib):
    """The signatures of what the module calls; AttributeError for a function lib lacks."""
    p = ctypes.c_void_p
    u32p = ctypes.POINTER(ctypes.c_uint32)
    i32p = ctypes.POINTER(ctypes.c_int32)
    lib.pmqos_client_new.argtypes = [ctypes.POINTER(p)]
    lib.pmqos_client_free.argtypes = [p]
    lib.pmqos_client_free.restype = p
    lib.pmqos_request_full.argtypes = [p, ctypes.c_int32, ctypes.c_char_p, ctypes.c_uint32, u32p,
                                       ctypes.c_size_t, ctypes.c_uint64, u32p]
    lib.pmqos_update.argtypes = [p, ctypes.c_uint32, ctypes.c_int32]
    lib.pmqos_cancel.argtypes = [p, ctypes.c_uint32]
    lib.pmqos_get_latency.argtypes = [p, i32p]
    lib.pmqos_client_last_error.argtypes = [p]
    lib.pmqos_client_last_error.restype = ctypes.c_char_p
    lib.pmqos_client_process.argtypes = [p]
    lib.pmqos_explain.argtypes = [p, ctypes.POINTER(ctypes.POINTER(_Explanation))]
    lib.pmqos_explanation_free.argtypes = [ctypes.POINTER(_Explanation)]
    lib.pmqos_explanation_free.restype = p
    lib.pmqos_request_info_free.argtypes = [ctypes.POINTER(_RequestInfo), ctypes.c_size_t]
    # Since LIBPMQOS_1.3: an older library lacks them (AttributeError when used).
    if hasattr(lib, "pmqos_explain_folded"):
        lib.pmqos_explain_folded.argtypes = [p, ctypes.POINTER(ctypes.POINTER(_Explanation))]
    if hasattr(lib, "pmqos_list_requests_page"):
        lib.pmqos_list_requests_page.argtypes = [p, ctypes.c_uint32, ctypes.c_uint32,
                                                 ctypes.POINTER(ctypes.POINTER(_RequestInfo)),
                                                 ctypes.POINTER(ctypes.c_size_t), u32p]


def _raise(r, client=None, what="pmqos call failed"):
    errnum = -r
    message = None
    if client:
        raw = _library().pmqos_client_last_error(client)
        message = raw.decode("utf-8", "replace") if raw else None
    if not message:
        # the same sentence as pmqos_strerror(), so C and Python programs say one thing
        lib = _library()
        lib.pmqos_strerror.restype = ctypes.c_char_p
        lib.pmqos_strerror.argtypes = [ctypes.c_int]
        raw = lib.pmqos_strerror(r)
        message = raw.decode("utf-8", "replace") if raw else os.strerror(errnum)
    cls = _ERRORS.get(errnum, Error)
    raise cls("%s: %s" % (what, message), errnum)


U32_MAX = 2 ** 32 - 1
CPU_MAX = 8191  # the kernel's NR_CPUS ceiling, as pmqosd's

# The value grammar of every pmqos surface (pmqosctl(1), "Values"): decimal
# only, time spans as systemd writes them, units for latencies.
_UNITS = {"us": 1, "usec": 1, "\u00b5s": 1, "ms": 1000, "msec": 1000,
          "s": 10 ** 6, "sec": 10 ** 6, "second": 10 ** 6, "seconds": 10 ** 6,
          "m": 60 * 10 ** 6, "min": 60 * 10 ** 6, "minute": 60 * 10 ** 6, "minutes": 60 * 10 ** 6,
          "h": 3600 * 10 ** 6, "hr": 3600 * 10 ** 6, "hour": 3600 * 10 ** 6, "hours": 3600 * 10 ** 6,
          "d": 86400 * 10 ** 6, "day": 86400 * 10 ** 6, "days": 86400 * 10 ** 6,
          "w": 604800 * 10 ** 6, "week": 604800 * 10 ** 6, "weeks": 604800 * 10 ** 6}
_SPAN_PART = re.compile(r" *([0-9]+)(?:\.([0-9]+))? *([a-z\u00b5]*)", re.ASCII | re.IGNORECASE)


def _timespan_usec(text, default_unit):
    """"2min 30s", "1.5h", "50us" in µs; a bare number counts in default_unit µs."""
    total, pos, text = 0, 0, text.rstrip(" ")
    if not text.strip():
        raise ValueError(text)
    while pos < len(text):
        m = _SPAN_PART.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(text)
        whole, frac, unit = m.groups()
        if unit and unit not in _UNITS:
            raise ValueError(text)
        scale = _UNITS[unit] if unit else default_unit
        total += int(whole) * scale + (int(frac[:9]) * scale // 10 ** len(frac[:9]) if frac else 0)
        pos = m.end()
    return total


def _invalid(message):
    return InvalidArgument(message, errno.EINVAL)


def _cstate_latency(name):
    """The largest exit latency an online CPU gives the C-state called name
    (any case), as pmqosctl takes it; None if no CPU has it."""
    root = os.environ.get("PMQOS_SYSFS_ROOT") or "/sys"
    best = None
    for cpu in glob.glob(os.path.join(root, "devices/system/cpu/cpu[0-9]*")):
        try:
            with open(os.path.join(cpu, "online")) as f:
                if f.read().strip() != "1":
                    continue
        except OSError:
            pass  # cpu0 often has no "online": it is
        for state in glob.glob(os.path.join(cpu, "cpuidle/state*")):
            try:
                with open(os.path.join(state, "name")) as f:
                    if f.read().strip().lower() != name.lower():
                        continue
                with open(os.path.join(state, "latency")) as f:
                    v = int(f.read().strip())
            except (OSError, ValueError):
                continue
            best = v if best is None else max(best, v)
    return best


def _check_usec(usec):
    """A latency: an int (µs, or -1: none), or a string — "50", "50us",
    "2ms", or a C-state name of this machine ("C1E")."""
    if isinstance(usec, str):
        try:
            value = _timespan_usec(usec, 1)
        except ValueError:
            value = _cstate_latency(usec) if re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", usec) else None
            if value is None:
                raise _invalid("latency %r is neither µs (50, 50us, 2ms) nor a C-state of this machine" % usec)
        usec = value
    elif not isinstance(usec, int) or isinstance(usec, bool):
        raise _invalid("latency must be an int (µs) or a string, not %r" % (usec,))
    if not (usec == LATENCY_NONE or 0 <= usec <= LATENCY_MAX):
        raise _invalid("latency %d µs is out of range; use 0 … %d, or -1" % (usec, LATENCY_MAX))
    return usec


def _check_timeout(timeout):
    """Whole seconds, 1 … 2^32-1: an int, a timedelta or a time span
    ("30s", "5min", "1h"); None or 0: no timeout."""
    if timeout is None:
        return 0
    if isinstance(timeout, datetime.timedelta):
        usec = (timeout.days * 86400 + timeout.seconds) * 10 ** 6 + timeout.microseconds
    elif isinstance(timeout, str):
        try:
            usec = _timespan_usec(timeout, 10 ** 6)
        except ValueError:
            raise _invalid("timeout %r is not a time span (30, 30s, 5min, 1h)" % timeout) from None
    elif isinstance(timeout, int) and not isinstance(timeout, bool):
        usec = timeout * 10 ** 6
    else:
        raise _invalid("timeout must be whole seconds (an int, a timedelta or \"5min\"), not %r" % (timeout,))
    if usec == 0:
        return 0
    if usec < 0 or usec % 10 ** 6 or usec // 10 ** 6 > U32_MAX:
        raise _invalid("timeout %r is out of range; use whole seconds, 1 … %d" % (timeout, U32_MAX))
    return usec // 10 ** 6


def _check_cookie(cookie):
    if not isinstance(cookie, int) or isinstance(cookie, bool):
        raise _invalid("a cookie is an int, not %r" % (cookie,))
    if not 1 <= cookie <= U32_MAX:
        raise _invalid("cookie %d is out of range; cookies are 1 … %d" % (cookie, U32_MAX))
    return cookie


def _check_cpus(cpus):
    cpu_list = list(cpus or [])
    for cpu in cpu_list:
        if not isinstance(cpu, int) or isinstance(cpu, bool) or not 0 <= cpu <= CPU_MAX:
            raise _invalid("CPU %r is not a CPU number, 0 … %d" % (cpu, CPU_MAX))
    return cpu_list


class _Closing:
    """A context manager that closes its object at the end, and at garbage
    collection if nobody did (Client and Hold)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Client(_Closing):
    """A connection to pmqosd. Requests made through it end when it closes."""

    def __init__(self):
        self._c = ctypes.c_void_p()
        r = _library().pmqos_client_new(ctypes.byref(self._c))
        if r < 0:
            self._c = None
            _raise(r, None, "cannot reach pmqosd")

    def _handle(self):
        if not self._c:
            raise Error("the client is closed", errno.EBADF)
        return self._c

    def close(self):
        """Disconnects; every request made through this client that is neither
        timed nor persistent ends, and pmqosd has confirmed it (the kernel
        has the new value) when this returns."""
        if self._c:
            _library().pmqos_client_free(self._c)
            self._c = None

    def request(self, usec, reason=None, timeout=None, cpus=None, persistent=False):
        """Asks that CPUs wake within usec µs; returns the request's cookie.

        usec: µs as an int (-1: listed, no bound), or a string: "50", "50us",
        "2ms", or a C-state name of this machine ("C1E"); reason: shown in
        listings; timeout: whole seconds (an int, a timedelta or a time span
        such as "30s", "5min", "1h") after which the request ends by itself
        (it then outlives the client); cpus: only these CPUs; persistent:
        survives the client and broker restarts (needs authorization).
        Values out of range raise InvalidArgument: nothing is wrapped."""
        usec = _check_usec(usec)
        seconds = _check_timeout(timeout)
        cpu_list = _check_cpus(cpus)
        if reason is not None and not isinstance(reason, str):
            raise _invalid("a reason is a str, not %r" % (reason,))
        c = self._handle()
        cookie = ctypes.c_uint32()
        cpu_array = (ctypes.c_uint32 * len(cpu_list))(*cpu_list) if cpu_list else None
        r = _library().pmqos_request_full(
            c, usec, reason.encode() if reason is not None else None, seconds,
            ctypes.cast(cpu_array, ctypes.POINTER(ctypes.c_uint32)) if cpu_array else None, len(cpu_list),
            1 if persistent else 0, ctypes.byref(cookie))
        if r < 0:
            _raise(r, c, "request refused")
        return cookie.value

    def update(self, cookie, usec):
        """Changes a request's value in place."""
        usec = _check_usec(usec)
        _check_cookie(cookie)
        c = self._handle()
        r = _library().pmqos_update(c, cookie, usec)
        if r < 0:
            _raise(r, c, "cannot update request %d" % cookie)

    def cancel(self, cookie):
        """Ends a request."""
        _check_cookie(cookie)
        c = self._handle()
        r = _library().pmqos_cancel(c, cookie)
        if r < 0:
            _raise(r, c, "cannot cancel request %d" % cookie)

    def hold(self, usec, reason=None, cpus=None):
        """A pmqos.Hold: a request (arguments as request()) that lives while
        any copy of its descriptor is open, here or in a process it was
        passed to, whatever becomes of this client."""
        return _held.hold_fd(self._handle(), usec, reason, cpus)

    def request_for(self, usec, pid=None, cgroup=None, reason=None, cpus=None):
        """A request that ends when process pid exits, or when the cgroup v2
        directory cgroup (a path) has no process left; exactly one of the
        two. Returns its cookie."""
        return _held.request_for(self._handle(), usec, pid, cgroup, reason, cpus)

    @property
    def latency(self):
        """The effective bound the broker asks the kernel for (-1: none)."""
        c = self._handle()
        v = ctypes.c_int32()
        r = _library().pmqos_get_latency(c, ctypes.byref(v))
        if r < 0:
            _raise(r, c, "cannot read the latency")
        return v.value

    def explain(self):
        """What sets the bound and who else holds the device, as a dict with
        the keys of the broker's Explain(): effective, kernel, floor,
        bound_by ("request", "floor", "default-floor", "battery-floor",
        "external" or "none"), binding (the binding request's listing keys,
        {} if none), external_holders (pid, uid, exec; root's first),
        external_holders_complete, external_holders_left_out (holders not
        listed), external_holders_unscanned (uid, processes: not looked at
        for the scan's bound per user), cpus (cpu, bound, resume_latency,
        foreign, foreign_writer, shallow_idle, blocked_entries, verified,
        cstates: name, latency, allowed, disabled, usage, time,
        disabled_by), kernel_ignores_writes, rules and rules_followed. A
        writer (foreign_writer: of the CPU's pm_qos_resume_latency_us;
        disabled_by: of the state's disable file) is the last process but
        pmqosd that wrote it: pid, comm, unit, value, when (µs since the
        epoch); {} when none. The cost keys need LIBPMQOS_1.5, the writers
        LIBPMQOS_1.6 (an older library leaves them out)."""
        return self._explain(_library().pmqos_explain, False)

    def explain_folded(self):
        """explain(), but with identical CPUs in one entry: small on a machine
        of many CPUs. The dict has cpu_groups instead of cpus: cpus (the
        group's CPU numbers, ascending), bound, resume_latency, foreign and
        cstates (name, latency, allowed, disabled, and usage and time summed
        over the group's CPUs). CPUs are in one group when their bound,
        resume_latency, foreign and C-states (but usage and time) are equal.
        What differs from CPU to CPU is per CPU, in explain() only: the cost
        keys (shallow_idle, blocked_entries, verified) and the writers."""
        return self._explain(_library().pmqos_explain_folded, True)

    def _explain(self, call, folded):
        c = self._handle()
        e = ctypes.POINTER(_Explanation)()
        r = call(c, ctypes.byref(e))
        if r < 0:
            _raise(r, c, "cannot read the explanation")
        try:
            # cpu_costs exist in the structure from LIBPMQOS_1.5 on (pmqos_ledger() with them).
            d = _explanation_dict(e.contents, folded, hasattr(_library(), "pmqos_ledger"))
            _costs.add_custody(e, d.get("cpus", []))  # LIBPMQOS_1.6: who wrote each CPU's knobs
            return d
        finally:
            _library().pmqos_explanation_free(e)

    def ledger(self):
        """What the bounds cost since pmqosd started: the broker's Ledger(), a
        list with one dict per holder that bound a CPU while it blocked a
        C-state there: kind ("request", "floor", "battery-floor", "rule",
        "external" or "other": older rows folded), uid (4294967295: not
        known), comm, unit ("" if none), cookie (its last request's, 0 for
        the others), active (it binds a CPU with a state blocked now), held,
        shallow_idle (µs, summed over CPUs) and blocked_entries (0 when the
        kernel obeyed). Needs libpmqos with LIBPMQOS_1.5."""
        return _costs.ledger(self._handle())

    def list_requests_page(self, after=0, max=0):
        """One page of every client's requests: (requests, next). requests:
        those whose cookie is greater than after, in ascending cookie order,
        at most max of them (0: 256; more than 1024 is taken as 1024), each a
        dict with the keys of the broker's ListRequests (cookie, type, value,
        uid, pid, exec, reason, created, persistent, expires, cpus, sender,
        bound_to, target). next: the last one's cookie when more follow, else
        0; call again with after=next until next is 0 to see them all."""
        for name, v in (("after", after), ("max", max)):
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= U32_MAX:
                raise _invalid("%s is an int from 0 to %d, not %r" % (name, U32_MAX, v))
        c = self._handle()
        infos = ctypes.POINTER(_RequestInfo)()
        n, nxt = ctypes.c_size_t(), ctypes.c_uint32()
        r = _library().pmqos_list_requests_page(c, after, max, ctypes.byref(infos), ctypes.byref(n),
                                                ctypes.byref(nxt))
        if r < 0:
            _raise(r, c, "cannot list requests")
        try:
            return [_request_dict(infos[i]) for i in range(n.value)], nxt.value
        finally:
            _library().pmqos_request_info_free(infos, n.value)

    def process(self):
        """Handles pending events (re-issues requests after a broker restart)."""
        r = _library().pmqos_client_process(self._handle())
        if r < 0:
            _raise(r, self._c, "lost the bus")


from . import held as _held  # noqa: E402  (it uses the names above)
from .held import Hold, hold  # noqa: E402
from . import costs as _costs  # noqa: E402
