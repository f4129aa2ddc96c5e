/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* On battery or not, as UPower says: its OnBattery property followed through
 * PropertiesChanged and through its name's owner, never polled. While it is
 * true, OnBatteryMinimumLatency is one more floor (core_set_battery()). */

#include "bus/battery.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#include "util/log.h"
#include "util/macro.h"

#define UPOWER_NAME "org.freedesktop.UPower"
#define UPOWER_PATH "/org/freedesktop/UPower"
#define UPOWER_INTERFACE "org.freedesktop.UPower"

static void set_on_battery(Battery *b, bool on) {
        ChangeSet changes;

        if (on == b->core->on_battery)
                return;
        int r = core_set_battery(b->core, on, b->core->battery_floor, &changes);
        if (r < 0) {
                log_error_errno(r, "Cannot apply the battery floor: %m");
                return;
        }
        log_info("%s.", on ? "On battery" : "On mains power");
        publish(b->pub, &changes);
}

static int on_get_reply(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Battery *b = userdata;
        int on;

        (void) error;
        b->get = sd_bus_slot_unref(b->get);
        /* No UPower (or one without the property): mains, as far as we know. */
        if (sd_bus_message_is_method_error(reply, NULL) || sd_bus_message_read(reply, "v", "b", &on) < 0)
                on = false;
        else
                peer_watch_answered(&b->upower, reply);
        set_on_battery(b, on);
        return 0;
}

static void ask(Battery *b) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *call = NULL;

        b->get = sd_bus_slot_unref(b->get);
        int r = sd_bus_message_new_method_call(b->bus, &call, UPOWER_NAME, UPOWER_PATH,
                                               "org.freedesktop.DBus.Properties", "Get");
        if (r >= 0)
                r = sd_bus_message_append(call, "ss", UPOWER_INTERFACE, "OnBattery");
        /* Asking must not start UPower where nobody runs it. */
        if (r >= 0)
                r = sd_bus_message_set_auto_start(call, false);
        if (r >= 0)
                r = sd_bus_call_async(b->bus, &b->get, call, on_get_reply, b, 0);
        if (r < 0)
                log_warning_errno(r, "Cannot ask UPower whether the machine is on battery: %m");
}

static int on_properties_changed(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Battery *b = userdata;
        int on;

        (void) error;
        int r = peer_watch_read_property(&b->upower, message, UPOWER_INTERFACE, "OnBattery", "b", &on);
        if (r == PROPERTY_CHANGED)
                set_on_battery(b, on);
        else if (r == PROPERTY_INVALIDATED)
                ask(b); /* its value is to be asked for */
        return 0;
}

static void on_upower_owner(PeerWatch *w, bool arrived, void *userdata) {
        Battery *b = userdata;
        (void) w;
        if (arrived)
                ask(b); /* UPower started: what does it say? (its reply names its owner) */
        else
                set_on_battery(b, false); /* UPower left: its word no longer holds */
}

void battery_init(Battery *b, Core *core, Publisher *pub) {
        assert(b && core && pub);
        *b = (Battery){ .core = core, .pub = pub };
        peer_watch_init(&b->upower, UPOWER_NAME, on_upower_owner, b);
}

int battery_watch(Battery *b, sd_bus *bus) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        const char *me, *owner;
        int r;

        assert(b && bus && !b->bus);
        /* pmqosd holds UPower's name itself (--upower-name): there is no UPower to follow. */
        if (sd_bus_get_name_creds(bus, UPOWER_NAME, SD_BUS_CREDS_UNIQUE_NAME, &creds) >= 0 &&
            sd_bus_get_unique_name(bus, &me) >= 0 && sd_bus_creds_get_unique_name(creds, &owner) >= 0 &&
            strcmp(owner, me) == 0)
                return 0;
        b->bus = sd_bus_ref(bus);
        r = sd_bus_match_signal(bus, &b->properties, UPOWER_NAME, UPOWER_PATH, "org.freedesktop.DBus.Properties",
                                "PropertiesChanged", on_properties_changed, b);
        if (r >= 0)
                r = peer_watch_start(&b->upower, bus, true);
        if (r < 0) {
                log_warning_errno(r, "Cannot follow UPower's OnBattery: %m; the battery floor does not apply.");
                return r;
        }
        ask(b);
        return 0;
}

void battery_done(Battery *b) {
        b->properties = sd_bus_slot_unref(b->properties);
        b->get = sd_bus_slot_unref(b->get);
        peer_watch_done(&b->upower);
        b->bus = sd_bus_unref(b->bus);
}
