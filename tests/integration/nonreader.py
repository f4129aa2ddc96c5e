# SPDX-License-Identifier: LGPL-2.1-or-later
"""A raw bus client that never reads its socket, for the adversary suite.
Run as any uid (setpriv). It opens --connections connections (EXTERNAL auth,
Hello), then sends method calls to pmqosd on them in turn, --rate per second
in all, cycling through --methods (Introspect, Explain, ExplainFolded, GetAll,
ListRequests, ListRequestsPage, GetLatencyRequests, Ping), and never reads a
byte after BEGIN, so every reply stays queued in the bus for it. Prints one
JSON line a second with how many calls it sent; ends when stdin closes."""

import argparse
import json
import os
import select
import socket
import sys
import time

import gi

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

DEST = "org.freedesktop.PMQoS"
PATH = "/org/freedesktop/PMQoS"
CALLS = {
    "Introspect": (PATH, "org.freedesktop.DBus.Introspectable", "Introspect", None),
    "Explain": (PATH, "org.freedesktop.PMQoS", "Explain", None),
    "GetAll": (PATH, "org.freedesktop.DBus.Properties", "GetAll", ("(s)", ("org.freedesktop.PMQoS",))),
    "ListRequests": (PATH, "org.freedesktop.PMQoS", "ListRequests", None),
    "ListRequestsPage": (PATH, "org.freedesktop.PMQoS", "ListRequestsPage", ("(uu)", (0, 0))),
    "ExplainFolded": (PATH, "org.freedesktop.PMQoS", "ExplainFolded", None),
    "GetLatencyRequests": (PATH, "org.freedesktop.UPower.QoS", "GetLatencyRequests", None),
    "Ping": (PATH, "org.freedesktop.DBus.Peer", "Ping", None),
}


def blob(dest, path, iface, member, body, serial):
    msg = Gio.DBusMessage.new_method_call(dest, path, iface, member)
    if body:
        msg.set_body(GLib.Variant(*body))
    msg.set_serial(serial)
    return msg.to_blob(Gio.DBusCapabilityFlags.NONE)


def connect(address):
    path = address.split("unix:path=", 1)[1].split(",", 1)[0]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # replies pile up in the bus, not here
    s.connect(path)
    s.sendall(b"\0AUTH EXTERNAL " + str(os.getuid()).encode().hex().encode() + b"\r\n")
    line = b""
    while not line.endswith(b"\r\n"):
        line += s.recv(1)  # the auth exchange is the only thing ever read
    if not line.startswith(b"OK"):
        raise SystemExit("auth refused: %r" % line)
    s.sendall(b"BEGIN\r\n")
    s.sendall(blob("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "Hello", None, 1))
    s.setblocking(False)
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=1)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--methods", default="Introspect,Explain")
    args = ap.parse_args()
    address = os.environ["DBUS_SYSTEM_BUS_ADDRESS"]
    conns = [connect(address) for _ in range(args.connections)]
    out = [b"" for _ in conns]
    methods = [CALLS[m] for m in args.methods.split(",")]
    serial = 2
    sent = blocked = 0
    start = last_report = time.monotonic()
    sys.stdout.write(json.dumps({"connected": len(conns)}) + "\n")
    sys.stdout.flush()
    while True:
        now = time.monotonic()
        due = int((now - start) * args.rate) - (sent + blocked)
        for _ in range(max(0, min(due, 100))):
            i = (sent + blocked) % len(conns)
            if len(out[i]) > 65536:
                blocked += 1  # the bus stopped reading this one: it is not this client that waits
                continue
            out[i] += blob(DEST, *methods[serial % len(methods)], serial)
            serial += 1
            sent += 1
        for i, s in enumerate(conns):
            try:
                if out[i]:
                    out[i] = out[i][s.send(out[i]):]
            except BlockingIOError:
                pass
        if now - last_report >= 1:
            sys.stdout.write(json.dumps({"sent": sent, "blocked": blocked}) + "\n")
            sys.stdout.flush()
            last_report = now
        ready, _, _ = select.select([sys.stdin], [], [], 0.001)
        if ready and not sys.stdin.read(1):
            break


if __name__ == "__main__":
    main()
