# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the bounds cost and who wrote each CPU's idle knobs, through
libpmqos's pmqos_ledger() (LIBPMQOS_1.5) and pmqos_explanation_custody()
(LIBPMQOS_1.6).

    with pmqos.Client() as c:
        for row in c.ledger():             # one per holder that bound a CPU
            print(row["kind"], row["comm"], row["shallow_idle"], row["blocked_entries"])
        for cpu in c.explain()["cpus"]:
            print(cpu["cpu"], cpu["foreign_writer"].get("comm"))   # {}: nobody but pmqosd

Used through Client.ledger() and Client.explain(); see pmqos."""

import ctypes

from . import LibraryUnavailable, _library, _raise
from ._structs import _Explanation, _struct_dict, _text


class _LedgerRow(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_char_p), ("uid", ctypes.c_uint32), ("comm", ctypes.c_char_p),
                ("unit", ctypes.c_char_p), ("cookie", ctypes.c_uint32), ("active", ctypes.c_bool),
                ("held", ctypes.c_uint64), ("shallow_idle", ctypes.c_uint64), ("blocked_entries", ctypes.c_uint64)]


class _WriterInfo(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint32), ("comm", ctypes.c_char_p), ("unit", ctypes.c_char_p),
                ("value", ctypes.c_char_p), ("when", ctypes.c_int64)]


class _CpuCustodyInfo(ctypes.Structure):
    _fields_ = [("cpu", ctypes.c_uint32), ("foreign_writer", _WriterInfo),
                ("disabled_by", ctypes.POINTER(_WriterInfo)), ("n_disabled_by", ctypes.c_size_t)]


_ready = False


def _lib(need):
    """The library with what this module calls declared; LibraryUnavailable
    when it lacks need (a libpmqos older than the node that added it)."""
    global _ready
    lib = _library()
    if not _ready:
        p = ctypes.c_void_p
        if hasattr(lib, "pmqos_ledger"):  # LIBPMQOS_1.5
            rows = ctypes.POINTER(_LedgerRow)
            lib.pmqos_ledger.argtypes = [p, ctypes.POINTER(rows), ctypes.POINTER(ctypes.c_size_t)]
            lib.pmqos_ledger_free.argtypes = [rows, ctypes.c_size_t]
            lib.pmqos_ledger_free.restype = p
        if hasattr(lib, "pmqos_explanation_custody"):  # LIBPMQOS_1.6
            lib.pmqos_explanation_custody.argtypes = [ctypes.POINTER(_Explanation), ctypes.c_size_t]
            lib.pmqos_explanation_custody.restype = ctypes.POINTER(_CpuCustodyInfo)
        _ready = True
    if need and not hasattr(lib, need):
        raise LibraryUnavailable("%s lacks %s (a libpmqos older than this module)" % (lib._name, need), 0)
    return lib


def ledger(c):
    """Client.ledger(): Ledger()'s rows as dicts."""
    lib = _lib("pmqos_ledger")
    rows = ctypes.POINTER(_LedgerRow)()
    n = ctypes.c_size_t()
    r = lib.pmqos_ledger(c, ctypes.byref(rows), ctypes.byref(n))
    if r < 0:
        _raise(r, c, "cannot read the ledger")
    try:
        return [_struct_dict(rows[i]) for i in range(n.value)]
    finally:
        lib.pmqos_ledger_free(rows, n.value)


def _writer(w):
    """A writer as Explain() sends it: {} when nobody but pmqosd (pid 0)."""
    if w.pid == 0:
        return {}
    return {"pid": w.pid, "comm": _text(w.comm), "unit": _text(w.unit), "value": _text(w.value), "when": w.when}


def add_custody(e, cpus):
    """Explain()'s foreign_writer (per CPU) and disabled_by (per C-state)
    into the dicts of cpus, from the explanation e (a pointer), when the
    library reads them (LIBPMQOS_1.6) and the broker sent them."""
    lib = _lib(None)
    if not hasattr(lib, "pmqos_explanation_custody"):
        return
    for i, entry in enumerate(cpus):
        custody = lib.pmqos_explanation_custody(e, i)
        if not custody:
            return
        entry["foreign_writer"] = _writer(custody.contents.foreign_writer)
        for k, st in enumerate(entry["cstates"][:custody.contents.n_disabled_by]):
            st["disabled_by"] = _writer(custody.contents.disabled_by[k])
