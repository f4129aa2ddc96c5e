/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "bus/peer-watch.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus/client.h"
#include "util/macro.h"

void peer_watch_init(PeerWatch *w, const char *name, PeerOwnerChanged on_owner, void *userdata) {
        assert(w && name && on_owner);
        *w = (PeerWatch){ .name = name, .on_owner = on_owner, .userdata = userdata };
}

static int on_owner_changed(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        PeerWatch *w = userdata;
        const char *name, *old_owner, *new_owner;

        (void) error;
        if (!bus_message_from_driver(message) || !sd_bus_message_has_signature(message, "sss") ||
            sd_bus_message_read(message, "sss", &name, &old_owner, &new_owner) < 0 || strcmp(name, w->name) != 0)
                return 0;
        w->owner = mfree(w->owner);
        w->on_owner(w, new_owner[0] != 0, w->userdata);
        return 0;
}

int peer_watch_start(PeerWatch *w, sd_bus *bus, bool sync) {
        char match[256];

        assert(w && bus);
        /* Well-known names have no quote: the name goes into the match as it is. */
        snprintf(match, sizeof(match),
                 "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
                 "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='%s'",
                 w->name);
        w->owner_slot = sd_bus_slot_unref(w->owner_slot);
        return sync ? sd_bus_add_match(bus, &w->owner_slot, match, on_owner_changed, w)
                    : sd_bus_add_match_async(bus, &w->owner_slot, match, on_owner_changed, NULL, w);
}

void peer_watch_done(PeerWatch *w) {
        w->owner_slot = sd_bus_slot_unref(w->owner_slot);
        w->owner = mfree(w->owner);
}

void peer_watch_answered(PeerWatch *w, sd_bus_message *reply) {
        const char *sender = sd_bus_message_get_sender(reply);
        free(w->owner);
        w->owner = sender ? strdup(sender) : NULL;
}

bool peer_watch_from_owner(const PeerWatch *w, sd_bus_message *message) {
        const char *sender = sd_bus_message_get_sender(message);
        return w->owner && sender && strcmp(sender, w->owner) == 0;
}

int peer_watch_read_property(const PeerWatch *w, sd_bus_message *message, const char *interface, const char *property,
                             const char *type, void *ret) {
        if (!peer_watch_from_owner(w, message))
                return PROPERTY_ABSENT;
        return properties_changed_read(message, interface, property, type, ret);
}
