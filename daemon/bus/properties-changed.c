/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "bus/properties-changed.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

int properties_changed_read(sd_bus_message *message, const char *interface, const char *property, const char *type,
                            void *ret) {
        const char *name;
        bool changed = false, invalidated = false;
        int r;

        if (!sd_bus_message_has_signature(message, "sa{sv}as"))
                return -EBADMSG;
        r = sd_bus_message_read(message, "s", &name);
        if (r < 0)
                return r;
        if (strcmp(name, interface) != 0)
                return PROPERTY_ABSENT;
        r = sd_bus_message_enter_container(message, 'a', "{sv}");
        while (r > 0 && (r = sd_bus_message_enter_container(message, 'e', "sv")) > 0) {
                r = sd_bus_message_read(message, "s", &name);
                if (r >= 0 && strcmp(name, property) == 0) {
                        r = sd_bus_message_read(message, "v", type, ret);
                        changed = r >= 0;
                } else if (r >= 0)
                        r = sd_bus_message_skip(message, "v");
                if (r >= 0)
                        r = sd_bus_message_exit_container(message);
                if (r < 0)
                        return r;
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(message);
        if (r >= 0)
                r = sd_bus_message_enter_container(message, 'a', "s");
        while (r >= 0 && (r = sd_bus_message_read(message, "s", &name)) > 0)
                invalidated = invalidated || strcmp(name, property) == 0;
        if (r < 0)
                return r;
        return invalidated ? PROPERTY_INVALIDATED : changed ? PROPERTY_CHANGED : PROPERTY_ABSENT;
}
