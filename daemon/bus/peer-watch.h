/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A service followed on the bus (UPower for the battery, systemd for the
 * unit rules): its name's owner through NameOwnerChanged, and only the
 * signals of the connection that answered for the name count — sd-bus lets
 * any peer's signal sent to us directly through a match on a well-known
 * sender. Event-driven: nothing is polled. */
#pragma once

#include <stdbool.h>
#include <systemd/sd-bus.h>

#include "bus/properties-changed.h"

typedef struct PeerWatch PeerWatch;
/* The name got an owner (arrived: ask it again) or lost it (its word no
 * longer holds). The owner whose signals count is forgotten either way. */
typedef void (*PeerOwnerChanged)(PeerWatch *w, bool arrived, void *userdata);

struct PeerWatch {
        const char *name; /* the well-known name followed (a literal) */
        char *owner;      /* the unique name that answered for it; NULL: none yet */
        sd_bus_slot *owner_slot;
        PeerOwnerChanged on_owner;
        void *userdata;
};

void peer_watch_init(PeerWatch *w, const char *name, PeerOwnerChanged on_owner, void *userdata);
/* Follows name's NameOwnerChanged on bus; sync: the match is in place when
 * this returns (else it is asked for without waiting). */
int peer_watch_start(PeerWatch *w, sd_bus *bus, bool sync);
void peer_watch_done(PeerWatch *w);

/* reply (to a call addressed to name) came from the connection that answers
 * for it now: its signals count from now on. */
void peer_watch_answered(PeerWatch *w, sd_bus_message *reply);
/* Whether message comes from the owner that answered. */
bool peer_watch_from_owner(const PeerWatch *w, sd_bus_message *message);
/* properties_changed_read() of a signal from the owner; from anyone else,
 * PROPERTY_ABSENT. */
int peer_watch_read_property(const PeerWatch *w, sd_bus_message *message, const char *interface, const char *property,
                             const char *type, void *ret);
