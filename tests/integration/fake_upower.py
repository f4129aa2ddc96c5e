# SPDX-License-Identifier: LGPL-2.1-or-later
"""A stand-in for UPower on the test bus: owns org.freedesktop.UPower and
exports /org/freedesktop/UPower with the OnBattery property, emitting
PropertiesChanged as UPower does. Driven by lines on stdin: "battery 1",
"battery 0", "invalidate" (PropertiesChanged naming OnBattery as
invalidated); prints "ready" once the name is owned, "ok" after each line."""

import sys

from gi.repository import Gio, GLib

XML = """<node><interface name="org.freedesktop.UPower">
<property name="OnBattery" type="b" access="read"/></interface></node>"""

state = {"on": sys.argv[1] == "1" if len(sys.argv) > 1 else False}


def get_property(conn, sender, path, iface, name):
    return GLib.Variant("b", state["on"])


def main():
    conn = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
    info = Gio.DBusNodeInfo.new_for_xml(XML).interfaces[0]
    conn.register_object("/org/freedesktop/UPower", info, None, get_property, None)
    loop = GLib.MainLoop()

    def acquired(*_):
        print("ready", flush=True)

    Gio.bus_own_name_on_connection(conn, "org.freedesktop.UPower", Gio.BusNameOwnerFlags.NONE, acquired,
                                   lambda *_: loop.quit())

    def on_line(channel, condition):
        line = sys.stdin.readline()
        if not line:
            loop.quit()
            return False
        words = line.split()
        if words[0] == "battery":
            state["on"] = words[1] == "1"
            changed, invalidated = {"OnBattery": GLib.Variant("b", state["on"])}, []
        else:
            changed, invalidated = {}, ["OnBattery"]
        conn.emit_signal(None, "/org/freedesktop/UPower", "org.freedesktop.DBus.Properties", "PropertiesChanged",
                         GLib.Variant("(sa{sv}as)", ("org.freedesktop.UPower", changed, invalidated)))
        conn.flush_sync(None)
        print("ok", flush=True)
        return True

    GLib.io_add_watch(GLib.IOChannel.unix_new(sys.stdin.fileno()), GLib.IO_IN | GLib.IO_HUP, on_line)
    loop.run()


if __name__ == "__main__":
    main()
