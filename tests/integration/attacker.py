# SPDX-License-Identifier: LGPL-2.1-or-later
"""A hostile local user, for the adversary suite. Runs as any uid (setpriv)
and does one thing per invocation, printing one JSON line when it has done
it, then waits for stdin to close (so that its connections stay until the
test lets them go):

  agent-flood N        registers a polkit authentication agent for its own
                       process that never answers, then sends N interactive
                       SetMinimumLatency calls at once over 4 connections;
                       prints how each was answered within --wait seconds
  connections N        opens N connections, each making one mutating call
                       (CancelRequest of an unknown cookie); prints the answers
  cycles N             N times: connects, sends SetMinimumLatency, leaves
                       without waiting for the answer
  flood N              sends N SetMinimumLatency calls flagged
                       no-reply-expected as fast as it can, then one Ping
  pipeline N           sends N RequestLatency calls at once on one
                       connection and prints how each was answered
"""

import argparse
import collections
import json
import os
import sys
import time

import gi

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

BUS_NAME = "org.freedesktop.PMQoS"
PATH = "/org/freedesktop/PMQoS"
QOS = "org.freedesktop.UPower.QoS"
AUTHORITY = ("org.freedesktop.PolicyKit1", "/org/freedesktop/PolicyKit1/Authority",
             "org.freedesktop.PolicyKit1.Authority")
AGENT_XML = """
<node><interface name="org.freedesktop.PolicyKit1.AuthenticationAgent">
  <method name="BeginAuthentication">
    <arg type="s" direction="in"/><arg type="s" direction="in"/><arg type="s" direction="in"/>
    <arg type="a{ss}" direction="in"/><arg type="s" direction="in"/><arg type="a(sa{sv})" direction="in"/>
  </method>
  <method name="CancelAuthentication"><arg type="s" direction="in"/></method>
</interface></node>
"""


def connect():
    return Gio.DBusConnection.new_for_address_sync(
        os.environ["DBUS_SYSTEM_BUS_ADDRESS"],
        Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
        None, None)


def start_time(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def error_name(e):
    return Gio.DBusError.get_remote_error(e) or "local:" + e.message


def collect(conns, calls, wait):
    """Starts every call (conn, method, signature, args, flags) at once; returns
    a Counter of answers ("ok" or the error name) that came within wait s."""
    loop = GLib.MainLoop()
    answers = collections.Counter()
    left = [len(calls)]

    def done(conn, res, _):
        try:
            conn.call_finish(res)
            answers["ok"] += 1
        except GLib.Error as e:
            answers[error_name(e)] += 1
        left[0] -= 1
        if left[0] == 0:
            loop.quit()

    for conn, method, sig, args, flags in calls:
        conn.call(BUS_NAME, PATH, QOS, method, GLib.Variant(sig, args), None, flags, 600000, None, done, None)
    GLib.timeout_add(int(wait * 1000), loop.quit)
    loop.run()
    answers["unanswered"] = left[0]
    return answers


def agent_flood(n, wait):
    conns = [connect() for _ in range(4)]
    begun = []

    def on_call(connection, sender, path, iface, method, params, invocation):
        if method == "BeginAuthentication":
            begun.append(invocation)  # never answered
        else:
            invocation.return_value(None)

    node = Gio.DBusNodeInfo.new_for_xml(AGENT_XML)
    conns[0].register_object("/org/pmqos/Attacker", node.interfaces[0], on_call, None, None)
    subject = ("unix-process", {"pid": GLib.Variant("u", os.getpid()),
                                "start-time": GLib.Variant("t", start_time(os.getpid()))})
    conns[0].call_sync(*AUTHORITY, "RegisterAuthenticationAgent",
                       GLib.Variant("((sa{sv})ss)", (subject, "C", "/org/pmqos/Attacker")), None, 0, -1, None)
    flags = Gio.DBusCallFlags.ALLOW_INTERACTIVE_AUTHORIZATION
    calls = [(conns[i % 4], "SetMinimumLatency", "(si)", ("cpu_dma", 5), flags) for i in range(n)]
    answers = collect(conns, calls, wait)
    answers["agent_asked"] = len(begun)
    return answers, conns


def many_connections(n):
    conns, answers = [], collections.Counter()
    for _ in range(n):
        c = connect()
        conns.append(c)
        try:
            c.call_sync(BUS_NAME, PATH, QOS, "CancelRequest", GLib.Variant("(u)", (1,)), None, 0, 10000, None)
            answers["ok"] += 1
        except GLib.Error as e:
            answers[error_name(e)] += 1
    return answers, conns


def flood(n):
    conn = connect()
    start = time.monotonic()
    for _ in range(n):
        msg = Gio.DBusMessage.new_method_call(BUS_NAME, PATH, QOS, "SetMinimumLatency")
        msg.set_body(GLib.Variant("(si)", ("cpu_dma", 7)))
        msg.set_flags(Gio.DBusMessageFlags.NO_REPLY_EXPECTED)
        conn.send_message(msg, Gio.DBusSendMessageFlags.NONE)
    conn.flush_sync(None)
    sent = time.monotonic() - start
    # A round trip: everything before it has reached pmqosd.
    conn.call_sync(BUS_NAME, PATH, "org.freedesktop.DBus.Peer", "Ping", None, None, 0, 600000, None)
    return {"sent": n, "seconds": round(sent, 2), "drained": round(time.monotonic() - start, 2)}, [conn]


def pipeline(n, wait):
    conn = connect()
    calls = [(conn, "RequestLatency", "(sib)", ("cpu_dma", 1000 + i, False), 0) for i in range(n)]
    return collect([conn], calls, wait), [conn]


def cycles(n):
    """n times: connect, send a SetMinimumLatency (pmqosd asks polkit), leave at once."""
    for _ in range(n):
        conn = connect()
        msg = Gio.DBusMessage.new_method_call(BUS_NAME, PATH, QOS, "SetMinimumLatency")
        msg.set_body(GLib.Variant("(si)", ("cpu_dma", 9)))
        conn.send_message(msg, Gio.DBusSendMessageFlags.NONE)
        conn.flush_sync(None)
        conn.close_sync(None)
    return {"cycles": n}, []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["agent-flood", "connections", "cycles", "flood", "pipeline"])
    ap.add_argument("n", type=int)
    ap.add_argument("--wait", type=float, default=5.0)
    args = ap.parse_args()
    if args.what == "agent-flood":
        out, keep = agent_flood(args.n, args.wait)
    elif args.what == "connections":
        out, keep = many_connections(args.n)
    elif args.what == "cycles":
        out, keep = cycles(args.n)
    elif args.what == "flood":
        out, keep = flood(args.n)
    else:
        out, keep = pipeline(args.n, args.wait)
    sys.stdout.write(json.dumps(dict(out)) + "\n")
    sys.stdout.flush()
    sys.stdin.read()  # hold the connections until the test closes our stdin
    del keep


if __name__ == "__main__":
    main()
