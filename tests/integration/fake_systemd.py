# SPDX-License-Identifier: LGPL-2.1-or-later
"""A stand-in for systemd's manager on the test bus, for the unit rules:
owns org.freedesktop.systemd1, answers Subscribe, LoadUnit and GetUnit
(NoSuchUnit for a unit it was never told of), serves each unit's ActiveState
and a service's ControlGroup at its object path and emits PropertiesChanged
(and UnitNew) as systemd does. Driven by lines on stdin: "state UNIT STATE",
"quiet UNIT STATE" (no signal), "invalidate UNIT", "new UNIT", "cgroup UNIT
PATH" (its ControlGroup; "-" for none), "reloads" (answered "ok N": the
Reload calls so far, as systemctl daemon-reload makes), "fail-reload" (Reload
answers AccessDenied from now on); prints "ready" once the name is owned,
"ok" after each line. Subscribe is counted: "subscribed N" on stderr."""

import sys

from gi.repository import Gio, GLib

XML = """<node>
<interface name="org.freedesktop.systemd1.Manager">
  <method name="Subscribe"/>
  <method name="Reload"/>
  <method name="LoadUnit"><arg type="s" direction="in"/><arg type="o" direction="out"/></method>
  <method name="GetUnit"><arg type="s" direction="in"/><arg type="o" direction="out"/></method>
  <signal name="UnitNew"><arg type="s"/><arg type="o"/></signal>
</interface>
<interface name="org.freedesktop.systemd1.Unit">
  <property name="ActiveState" type="s" access="read"/>
</interface>
<interface name="org.freedesktop.systemd1.Service">
  <property name="ControlGroup" type="s" access="read"/>
</interface>
</node>"""

units = {}  # name -> ActiveState
cgroups = {}  # name -> ControlGroup
reload = {"calls": 0, "fail": False}


def unit_path(name):
    # systemd's escaping: every byte outside [A-Za-z0-9] as _XX.
    return "/org/freedesktop/systemd1/unit/" + "".join(
        c if c.isalnum() and c.isascii() else "_%02x" % ord(c) for c in name)


def main():
    conn = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
    node = Gio.DBusNodeInfo.new_for_xml(XML)
    manager, unit_iface, service_iface = node.interfaces
    registered = set()
    loop = GLib.MainLoop()

    def register(name):
        units.setdefault(name, "inactive")
        if name in registered:
            return

        def get_property(c, sender, path, iface, prop):
            return GLib.Variant("s", units[name] if prop == "ActiveState" else cgroups.get(name, ""))
        conn.register_object(unit_path(name), unit_iface, None, get_property, None)
        if name.endswith(".service"):
            conn.register_object(unit_path(name), service_iface, None, get_property, None)
        registered.add(name)

    def on_call(c, sender, path, iface, method, params, invocation):
        if method == "Subscribe":
            sys.stderr.write("subscribed\n")
            invocation.return_value(None)
        elif method == "Reload":
            reload["calls"] += 1
            if reload["fail"]:
                invocation.return_dbus_error("org.freedesktop.DBus.Error.AccessDenied", "Reload refused by the test")
            else:
                invocation.return_value(None)
        elif method == "GetUnit" and params.unpack()[0] not in units:
            invocation.return_dbus_error("org.freedesktop.systemd1.NoSuchUnit",
                                         "Unit %s not loaded." % params.unpack()[0])
        else:
            (name,) = params.unpack()
            register(name)
            invocation.return_value(GLib.Variant("(o)", (unit_path(name),)))
    conn.register_object("/org/freedesktop/systemd1", manager, on_call, None, None)

    def acquired(*_):
        print("ready", flush=True)

    Gio.bus_own_name_on_connection(conn, "org.freedesktop.systemd1", Gio.BusNameOwnerFlags.NONE, acquired,
                                   lambda *_: loop.quit())

    def emit(name, changed, invalidated):
        conn.emit_signal(None, unit_path(name), "org.freedesktop.DBus.Properties", "PropertiesChanged",
                         GLib.Variant("(sa{sv}as)", ("org.freedesktop.systemd1.Unit", changed, invalidated)))

    def on_line(channel, condition):
        line = sys.stdin.readline()
        if not line:
            loop.quit()
            return False
        words = line.split()
        if words[0] == "state":
            register(words[1])
            units[words[1]] = words[2]
            emit(words[1], {"ActiveState": GLib.Variant("s", words[2]), "SubState": GLib.Variant("s", "x")}, [])
        elif words[0] == "quiet":  # a change systemd does not announce
            register(words[1])
            units[words[1]] = words[2]
        elif words[0] == "cgroup":
            register(words[1])
            cgroups[words[1]] = "" if words[2] == "-" else words[2]
        elif words[0] == "invalidate":
            emit(words[1], {}, ["ActiveState"])
        elif words[0] == "new":
            register(words[1])
            conn.emit_signal(None, "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager", "UnitNew",
                             GLib.Variant("(so)", (words[1], unit_path(words[1]))))
        elif words[0] == "fail-reload":
            reload["fail"] = True
        conn.flush_sync(None)
        print("ok %d" % reload["calls"] if words[0] == "reloads" else "ok", flush=True)
        return True

    GLib.io_add_watch(GLib.IOChannel.unix_new(sys.stdin.fileno()), GLib.IO_IN | GLib.IO_HUP, on_line)
    loop.run()


if __name__ == "__main__":
    main()
