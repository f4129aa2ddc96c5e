# SPDX-License-Identifier: LGPL-2.1-or-later
"""A bus client in its own process (often as another user, via setpriv),
driven by the tests with one JSON object per line on stdin; it answers one
JSON line each. Its connection lives exactly as long as the process."""

import json
import os
import sys

import gi

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402


def decode(arg):
    """JSON cannot carry a variant: {"__variant__": [type, value]} stands for one."""
    if isinstance(arg, dict) and set(arg) == {"__variant__"}:
        t, v = arg["__variant__"]
        return GLib.Variant(t, decode(v))
    if isinstance(arg, dict):
        return {k: decode(v) for k, v in arg.items()}
    if isinstance(arg, list):
        return [decode(v) for v in arg]
    return arg


def main():
    conn = Gio.DBusConnection.new_for_address_sync(
        os.environ["DBUS_SYSTEM_BUS_ADDRESS"],
        Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
        None,
        None,
    )
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["op"] == "name":
            out = {"name": conn.get_unique_name()}
        elif msg["op"] == "call":
            sig = msg["signature"]
            params = GLib.Variant("(%s)" % sig, tuple(decode(a) for a in msg["args"])) if sig else None
            flags = Gio.DBusCallFlags.NONE
            if msg.get("interactive"):
                flags |= Gio.DBusCallFlags.ALLOW_INTERACTIVE_AUTHORIZATION
            try:
                reply = conn.call_sync(
                    msg.get("dest", "org.freedesktop.PMQoS"), msg["path"], msg["iface"], msg["method"], params,
                    None, flags,
                    60000, None,
                )
                out = {"result": list(reply.unpack()) if reply is not None else []}
            except GLib.Error as e:
                out = {"error": Gio.DBusError.get_remote_error(e) or "", "message": e.message}
        elif msg["op"] == "burst":
            # n copies of one call, every one sent before any answer is read.
            sig = msg["signature"]
            params = GLib.Variant("(%s)" % sig, tuple(decode(a) for a in msg["args"])) if sig else None
            results = [None] * msg["n"]

            def done(c, res, i):
                try:
                    reply = c.call_finish(res)
                    results[i] = {"result": list(reply.unpack()) if reply is not None else []}
                except GLib.Error as e:
                    results[i] = {"error": Gio.DBusError.get_remote_error(e) or "", "message": e.message}

            for i in range(msg["n"]):
                conn.call(msg.get("dest", "org.freedesktop.PMQoS"), msg["path"], msg["iface"], msg["method"], params,
                          None, Gio.DBusCallFlags.NONE, 60000, None, done, i)
            while any(r is None for r in results):
                GLib.MainContext.default().iteration(True)
            out = {"results": results}
        else:
            out = {"error": "bad-op", "message": msg["op"]}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
