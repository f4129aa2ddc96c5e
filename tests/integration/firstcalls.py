# SPDX-License-Identifier: LGPL-2.1-or-later
"""Connections that each make their first calls before the bus could say
whose they are, for the adversary suite. Run as any uid (setpriv). It opens
--connections connections and on each sends Hello and --calls calls of
--method in the same write (so that they reach pmqosd before pmqosd learns
the caller's user), never reading; once stdin closes it reads for --read
seconds whatever waits for it in the bus and prints one JSON line: the
bytes it got."""

import argparse
import json
import os
import select
import socket
import sys
import time

from nonreader import CALLS, DEST, blob


def connect_and_call(address, call, n):
    path = address.split("unix:path=", 1)[1].split(",", 1)[0]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall(b"\0AUTH EXTERNAL " + str(os.getuid()).encode().hex().encode() + b"\r\n")
    line = b""
    while not line.endswith(b"\r\n"):
        line += s.recv(1)
    if not line.startswith(b"OK"):
        raise SystemExit("auth refused: %r" % line)
    s.sendall(b"BEGIN\r\n"
              + blob("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "Hello", None, 1)
              + b"".join(blob(DEST, *call, 2 + i) for i in range(n)))
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=40)
    ap.add_argument("--method", default="ListRequests")
    ap.add_argument("--calls", type=int, default=1)
    ap.add_argument("--read", type=float, default=3.0)
    args = ap.parse_args()
    address = os.environ["DBUS_SYSTEM_BUS_ADDRESS"]
    conns = [connect_and_call(address, CALLS[args.method], args.calls) for _ in range(args.connections)]
    sys.stdout.write(json.dumps({"connected": len(conns)}) + "\n")
    sys.stdout.flush()
    sys.stdin.read()
    got = 0
    for s in conns:
        s.setblocking(False)
    deadline = time.monotonic() + args.read
    while time.monotonic() < deadline:
        ready, _, _ = select.select(conns, [], [], 0.2)
        for s in ready:
            try:
                got += len(s.recv(1 << 20))
            except BlockingIOError:
                pass
    sys.stdout.write(json.dumps({"bytes": got}) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
