/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* On battery or not, as UPower says: its OnBattery property followed through
 * PropertiesChanged and through its name's owner, never polled. While it is
 * true, OnBatteryMinimumLatency is one more floor (core_set_battery()). */

#include <errno.h>
#include <string.h>

#include "util/log.h"
#include "bus/manager.h"
#include "bus/properties-changed.h"
#include "util/macro.h"

#define UPOWER_NAME "org.freedesktop.UPower"
#define UPOWER_PATH "/org/freedesktop/UPower"
#define UPOWER_INTERFACE "org.freedesktop.UPower"

enum { SLOT_PROPERTIES, SLOT_OWNER, SLOT_GET };

static void set_on_battery(Manager *m, bool on) {
        ChangeSet changes;

        if (on == m->core.on_battery)
                return;
        int r = core_set_battery(&m->core, on, m->core.battery_floor, &changes);
        if (r < 0) {
                log_error("Cannot apply the battery floor: %s", strerror(-r));
                return;
        }
        log_info("%s.", on ? "On battery" : "On mains power");
        manager_publish(m, &changes);
}

static int on_get_reply(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        int on;

        (void) error;
        m->battery_slots[SLOT_GET] = sd_bus_slot_unref(m->battery_slots[SLOT_GET]);
        /* No UPower (or one without the property): mains, as far as we know. */
        if (sd_bus_message_is_method_error(reply, NULL) || sd_bus_message_read(reply, "v", "b", &on) < 0)
                on = false;
        else {
                /* The connection that answered for UPower's name: only its signals count. */
                const char *sender = sd_bus_message_get_sender(reply);
                free(m->upower_owner);
                m->upower_owner = sender ? strdup(sender) : NULL;
        }
        set_on_battery(m, on);
        return 0;
}

static void ask(Manager *m) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *call = NULL;

        m->battery_slots[SLOT_GET] = sd_bus_slot_unref(m->battery_slots[SLOT_GET]);
        int r = sd_bus_message_new_method_call(m->bus, &call, UPOWER_NAME, UPOWER_PATH,
                                               "org.freedesktop.DBus.Properties", "Get");
        if (r >= 0)
                r = sd_bus_message_append(call, "ss", UPOWER_INTERFACE, "OnBattery");
        /* Asking must not start UPower where nobody runs it. */
        if (r >= 0)
                r = sd_bus_message_set_auto_start(call, false);
        if (r >= 0)
                r = sd_bus_call_async(m->bus, &m->battery_slots[SLOT_GET], call, on_get_reply, m, 0);
        if (r < 0)
                log_warning("Cannot ask UPower whether the machine is on battery: %s", strerror(-r));
}

static int on_properties_changed(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        int r;

        (void) error;
        /* From UPower's own connection only: sd-bus lets any peer's signal
         * sent to us directly through a match on a well-known sender. */
        const char *sender = sd_bus_message_get_sender(message);
        if (!m->upower_owner || !sender || strcmp(sender, m->upower_owner) != 0)
                return 0;
        int on;
        r = properties_changed_read(message, UPOWER_INTERFACE, "OnBattery", "b", &on);
        if (r == PROPERTY_CHANGED)
                set_on_battery(m, on);
        else if (r == PROPERTY_INVALIDATED)
                ask(m); /* its value is to be asked for */
        return 0;
}

static int on_owner_changed(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        const char *name, *old_owner, *new_owner;

        (void) error;
        if (!bus_message_from_driver(message) || !sd_bus_message_has_signature(message, "sss") ||
            sd_bus_message_read(message, "sss", &name, &old_owner, &new_owner) < 0 || strcmp(name, UPOWER_NAME) != 0)
                return 0;
        m->upower_owner = mfree(m->upower_owner);
        if (new_owner[0])
                ask(m); /* UPower started: what does it say? (its reply names its owner) */
        else
                set_on_battery(m, false); /* UPower left: its word no longer holds */
        return 0;
}

int manager_watch_battery(Manager *m) {
        int r;

        /* pmqosd holds UPower's name itself (--upower-name): there is no UPower to follow. */
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        const char *me, *owner;
        if (sd_bus_get_name_creds(m->bus, UPOWER_NAME, SD_BUS_CREDS_UNIQUE_NAME, &creds) >= 0 &&
            sd_bus_get_unique_name(m->bus, &me) >= 0 && sd_bus_creds_get_unique_name(creds, &owner) >= 0 &&
            strcmp(owner, me) == 0)
                return 0;
        r = sd_bus_match_signal(m->bus, &m->battery_slots[SLOT_PROPERTIES], UPOWER_NAME, UPOWER_PATH,
                                "org.freedesktop.DBus.Properties", "PropertiesChanged", on_properties_changed, m);
        if (r >= 0)
                r = sd_bus_add_match(m->bus, &m->battery_slots[SLOT_OWNER],
                                     "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
                                     "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='" UPOWER_NAME
                                     "'",
                                     on_owner_changed, m);
        if (r < 0) {
                log_warning("Cannot follow UPower's OnBattery: %s; the battery floor does not apply.", strerror(-r));
                return r;
        }
        ask(m);
        return 0;
}
