# SPDX-License-Identifier: LGPL-2.1-or-later
"""libpmqos's structures as ctypes sees them, and their conversion to the
dictionaries the binding returns (ListRequests' keys, Explain()'s)."""

import ctypes


class _RequestInfo(ctypes.Structure):
    _fields_ = [("cookie", ctypes.c_uint32), ("value", ctypes.c_int32), ("uid", ctypes.c_uint32),
                ("pid", ctypes.c_uint32), ("exec", ctypes.c_char_p), ("reason", ctypes.c_char_p),
                ("sender", ctypes.c_char_p), ("created", ctypes.c_int64), ("expires", ctypes.c_int64),
                ("persistent", ctypes.c_bool), ("cpus", ctypes.POINTER(ctypes.c_uint32)), ("n_cpus", ctypes.c_size_t),
                ("type", ctypes.c_char_p), ("bound_to", ctypes.c_char_p), ("target", ctypes.c_char_p)]


class _CStateInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("latency", ctypes.c_uint32), ("allowed", ctypes.c_bool),
                ("disabled", ctypes.c_bool), ("usage", ctypes.c_uint64), ("time", ctypes.c_uint64)]


class _CpuInfo(ctypes.Structure):
    _fields_ = [("cpu", ctypes.c_uint32), ("bound", ctypes.c_int32), ("resume_latency", ctypes.c_char_p),
                ("foreign", ctypes.c_bool), ("cstates", ctypes.POINTER(_CStateInfo)), ("n_cstates", ctypes.c_size_t)]


class _CpuGroupInfo(ctypes.Structure):
    _fields_ = [("cpus", ctypes.POINTER(ctypes.c_uint32)), ("n_cpus", ctypes.c_size_t), ("bound", ctypes.c_int32),
                ("resume_latency", ctypes.c_char_p), ("foreign", ctypes.c_bool),
                ("cstates", ctypes.POINTER(_CStateInfo)), ("n_cstates", ctypes.c_size_t)]


class _CpuCostInfo(ctypes.Structure):
    _fields_ = [("cpu", ctypes.c_uint32), ("shallow_idle", ctypes.c_uint64), ("blocked_entries", ctypes.c_uint64),
                ("verified", ctypes.c_bool)]


class _HolderInfo(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint32), ("uid", ctypes.c_uint32), ("exec", ctypes.c_char_p)]


class _UnscannedInfo(ctypes.Structure):
    _fields_ = [("uid", ctypes.c_uint32), ("processes", ctypes.c_uint32)]


class _RuleInfo(ctypes.Structure):
    _fields_ = [("file", ctypes.c_char_p), ("unit", ctypes.c_char_p), ("latency", ctypes.c_int32),
                ("cpus", ctypes.POINTER(ctypes.c_uint32)), ("n_cpus", ctypes.c_size_t), ("state", ctypes.c_char_p),
                ("holds", ctypes.c_bool)]


class _Explanation(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_int32), ("kernel", ctypes.c_int32), ("floor", ctypes.c_int32),
                ("wakeup_effective", ctypes.c_int32), ("wakeup_kernel", ctypes.c_int32),
                ("bound_by", ctypes.c_char_p), ("binding", ctypes.POINTER(_RequestInfo)),
                ("holders", ctypes.POINTER(_HolderInfo)), ("n_holders", ctypes.c_size_t),
                ("holders_complete", ctypes.c_bool), ("cpus", ctypes.POINTER(_CpuInfo)), ("n_cpus", ctypes.c_size_t),
                ("kernel_ignores_writes", ctypes.c_bool), ("rules", ctypes.POINTER(_RuleInfo)),
                ("n_rules", ctypes.c_size_t), ("rules_followed", ctypes.c_bool),
                ("holders_left_out", ctypes.c_uint32), ("holders_unscanned", ctypes.POINTER(_UnscannedInfo)),
                ("n_holders_unscanned", ctypes.c_size_t),
                # LIBPMQOS_1.3: pmqos_explain_folded()'s groups of identical CPUs
                ("cpu_groups", ctypes.POINTER(_CpuGroupInfo)), ("n_cpu_groups", ctypes.c_size_t),
                # LIBPMQOS_1.5: what the bounds cost on each CPU (the ledger), cpu_costs[i] for cpus[i]
                ("cpu_costs", ctypes.POINTER(_CpuCostInfo)), ("n_cpu_costs", ctypes.c_size_t)]


def _text(b):
    return b.decode("utf-8", "replace") if b is not None else ""


def _struct_dict(st, renames=None):
    out = {}
    for name, _ in st._fields_:
        if name.startswith("n_"):
            continue
        v = getattr(st, name)
        out[(renames or {}).get(name, name)] = _text(v) if isinstance(v, bytes) or v is None else v
    return out


def _request_dict(info):
    entry = _struct_dict(info)
    entry["cpus"] = [info.cpus[i] for i in range(info.n_cpus)]
    return entry


def _cpu_groups(e):
    groups = []
    for i in range(e.n_cpu_groups):
        g = e.cpu_groups[i]
        entry = _struct_dict(g)
        entry["cpus"] = [g.cpus[k] for k in range(g.n_cpus)]
        entry["cstates"] = [_struct_dict(g.cstates[k]) for k in range(g.n_cstates)]
        groups.append(entry)
    return groups


def _explanation_dict(e, folded=False, costs=False):
    binding = _request_dict(e.binding.contents) if e.binding else {}
    rules = []
    for i in range(e.n_rules):
        entry = _struct_dict(e.rules[i])
        entry["cpus"] = [e.rules[i].cpus[k] for k in range(e.rules[i].n_cpus)]
        rules.append(entry)
    cpus = []
    for i in range(e.n_cpus):
        c = e.cpus[i]
        entry = _struct_dict(c)
        entry["cstates"] = [_struct_dict(c.cstates[k]) for k in range(c.n_cstates)]
        if costs and i < e.n_cpu_costs:
            cost = _struct_dict(e.cpu_costs[i])
            del cost["cpu"]
            entry.update(cost)
        cpus.append(entry)
    return {"effective": e.effective, "kernel": e.kernel, "floor": e.floor, "wakeup_effective": e.wakeup_effective,
            "wakeup_kernel": e.wakeup_kernel, "bound_by": _text(e.bound_by),
            "binding": binding, "external_holders": [_struct_dict(e.holders[i]) for i in range(e.n_holders)],
            "external_holders_complete": e.holders_complete, "external_holders_left_out": e.holders_left_out,
            "external_holders_unscanned": [_struct_dict(e.holders_unscanned[i]) for i in range(e.n_holders_unscanned)],
            ("cpu_groups" if folded else "cpus"): _cpu_groups(e) if folded else cpus,
            "kernel_ignores_writes": e.kernel_ignores_writes, "rules": rules, "rules_followed": e.rules_followed}
