/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One property out of a PropertiesChanged signal, as pmqosd follows
 * UPower's OnBattery and systemd's ActiveState. */
#pragma once

#include <systemd/sd-bus.h>

typedef enum PropertyChange {
        PROPERTY_ABSENT = 0,      /* another interface, or the property is not named */
        PROPERTY_CHANGED = 1,     /* its new value was read */
        PROPERTY_INVALIDATED = 2, /* named without a value: ask for it */
} PropertyChange;

/* Reads message ("sa{sv}as", checked here: a match's callback runs before
 * sd-bus checks anything) for property of interface. type is the value's
 * D-Bus type, "b" (ret: int *) or "s" (ret: const char **, valid as long as
 * message). Returns a PropertyChange, or a negative errno for a message that
 * is not a well-formed PropertiesChanged. */
int properties_changed_read(sd_bus_message *message, const char *interface, const char *property, const char *type,
                            void *ret);
