# SPDX-License-Identifier: LGPL-2.1-or-later
"""A polkit authentication agent for one process that answers late.

Registered (as root) for the unix-process given by --pid, it receives
BeginAuthentication, waits --delay seconds, then tells polkitd the
authentication succeeded (AuthenticationAgentResponse2 with the first
identity offered) and returns. Prints "ready" once registered and
"answered" after it has answered."""

import argparse
import os
import sys

import gi

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

AGENT_XML = """
<node>
  <interface name="org.freedesktop.PolicyKit1.AuthenticationAgent">
    <method name="BeginAuthentication">
      <arg type="s" name="action_id" direction="in"/>
      <arg type="s" name="message" direction="in"/>
      <arg type="s" name="icon_name" direction="in"/>
      <arg type="a{ss}" name="details" direction="in"/>
      <arg type="s" name="cookie" direction="in"/>
      <arg type="a(sa{sv})" name="identities" direction="in"/>
    </method>
    <method name="CancelAuthentication">
      <arg type="s" name="cookie" direction="in"/>
    </method>
  </interface>
</node>
"""
AGENT_PATH = "/org/pmqos/TestAgent"
AUTHORITY = ("org.freedesktop.PolicyKit1", "/org/freedesktop/PolicyKit1/Authority",
             "org.freedesktop.PolicyKit1.Authority")


def start_time(pid):
    with open("/proc/%d/stat" % pid) as f:
        # Field 22, counted after the parenthesised command name.
        return int(f.read().rsplit(")", 1)[1].split()[19])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--delay", type=float, default=3.0)
    args = ap.parse_args()

    conn = Gio.DBusConnection.new_for_address_sync(
        os.environ["DBUS_SYSTEM_BUS_ADDRESS"],
        Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
        None, None)
    loop = GLib.MainLoop()

    def answer(invocation, cookie, identity):
        # polkitd may have given up on this authentication meanwhile (its
        # subject left): answering then fails, and that is fine.
        try:
            conn.call_sync(*AUTHORITY, "AuthenticationAgentResponse2",
                           GLib.Variant("(us(sa{sv}))", (0, cookie, identity)), None, 0, -1, None)
            invocation.return_value(None)
        except GLib.Error as e:
            print("answer refused: %s" % e.message, file=sys.stderr, flush=True)
        print("answered", flush=True)
        return GLib.SOURCE_REMOVE

    def on_call(connection, sender, path, iface, method, params, invocation):
        if method == "BeginAuthentication":
            action_id, message, icon, details, cookie, identities = params.unpack()
            print("begin", flush=True)
            # Hand back the first identity offered, with its variant types rebuilt.
            kind, props = identities[0]
            typed = {k: GLib.Variant("u", v) if isinstance(v, int) else GLib.Variant("s", v)
                     for k, v in props.items()}
            GLib.timeout_add(int(args.delay * 1000), answer, invocation, cookie, (kind, typed))
        else:
            print("cancelled", flush=True)
            invocation.return_value(None)

    node = Gio.DBusNodeInfo.new_for_xml(AGENT_XML)
    conn.register_object(AGENT_PATH, node.interfaces[0], on_call, None, None)

    subject = ("unix-process", {"pid": GLib.Variant("u", args.pid),
                                "start-time": GLib.Variant("t", start_time(args.pid))})
    conn.call_sync(*AUTHORITY, "RegisterAuthenticationAgent",
                   GLib.Variant("((sa{sv})ss)", (subject, "C", AGENT_PATH)), None, 0, -1, None)
    print("ready", flush=True)
    loop.run()


if __name__ == "__main__":
    sys.exit(main())
