# SPDX-License-Identifier: LGPL-2.1-or-later
"""The contract the integration tests check, in one place: bus names, object
paths, interfaces, error names and polkit action ids as pmqosd publishes them
(dbus/*.xml, policy/org.freedesktop.pmqos.policy). A test names these, never
spells them out."""

# Names and paths
BUS_NAME = "org.freedesktop.PMQoS"
UPOWER_BUS_NAME = "org.freedesktop.UPower"  # the compat name (--upower-name), also UPower's own
PATH = "/org/freedesktop/PMQoS"
UPOWER_PATH = "/org/freedesktop/UPower/Policy"
QOS_IFACE = "org.freedesktop.UPower.QoS"
NATIVE_IFACE = "org.freedesktop.PMQoS"
POLKIT_BUS_NAME = "org.freedesktop.PolicyKit1"

# The bus itself and the standard interfaces
DBUS_NAME = "org.freedesktop.DBus"
DBUS_PATH = "/org/freedesktop/DBus"
DBUS_IFACE = "org.freedesktop.DBus"
PROPS = "org.freedesktop.DBus.Properties"
PEER = "org.freedesktop.DBus.Peer"
INTROSPECTABLE = "org.freedesktop.DBus.Introspectable"
STANDARD_IFACES = {PEER, INTROSPECTABLE, PROPS}

# Error names (SPEC 3.3): the standard ones pmqosd uses, and its own
INVALID = "org.freedesktop.DBus.Error.InvalidArgs"
ACCESS_DENIED = "org.freedesktop.DBus.Error.AccessDenied"
INTERACTIVE = "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired"
LIMITS = "org.freedesktop.DBus.Error.LimitsExceeded"
NOT_SUPPORTED = "org.freedesktop.DBus.Error.NotSupported"
PROPERTY_READ_ONLY = "org.freedesktop.DBus.Error.PropertyReadOnly"
UNKNOWN_METHOD = "org.freedesktop.DBus.Error.UnknownMethod"
UNKNOWN_OBJECT = "org.freedesktop.DBus.Error.UnknownObject"
UNKNOWN_INTERFACE = "org.freedesktop.DBus.Error.UnknownInterface"
UNKNOWN_PROPERTY = "org.freedesktop.DBus.Error.UnknownProperty"
NO_SUCH_REQUEST = "org.freedesktop.PMQoS.Error.NoSuchRequest"
FAILED = "org.freedesktop.PMQoS.Error.Failed"

# polkit action ids (SPEC 4)
ACTION_REQUEST = "org.freedesktop.pmqos.request-latency"
ACTION_REQUEST_PERSISTENT = "org.freedesktop.pmqos.request-latency-persistent"
ACTION_CANCEL = "org.freedesktop.pmqos.cancel-request"
ACTION_SET_MINIMUM = "org.freedesktop.pmqos.set-minimum-latency"
ACTION_REQUEST_FOR_OTHERS = "org.freedesktop.pmqos.request-latency-for-others"
POLICY_FILE = "org.freedesktop.pmqos.policy"  # under policy/ in the tree, /usr/share/polkit-1/actions installed
RULES_FILE = "org.freedesktop.pmqos.rules"
BUS_POLICY_FILE = "org.freedesktop.PMQoS.conf"  # under dbus/, installed in system.d

# The kernel side
DEVICE = "/dev/cpu_dma_latency"
LATENCY_MAX = 2000000000
