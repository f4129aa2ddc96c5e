/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The one emitter (publish.c): the only place that sends LatencyChanged,
 * RequestsChanged, PropertiesChanged and STATUS=, and arms the deadline
 * timer. Features and handlers hand it what their transaction changed. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "bus/client.h"
#include "bus/gate.h"
#include "core/core.h"

typedef struct Publisher {
        sd_event *event;
        sd_bus *bus;         /* NULL until publisher_attach_bus(): nothing is emitted before */
        const BusGate *gate; /* what the bus reads through, when it does */
        Core *core;
        const Clients *clients;          /* counted when memory is given back */
        sd_event_source *expiry_source;  /* armed for the earliest deadline only */
        sd_event_source *publish_source; /* PropertiesChanged and STATUS= of pending, once a burst is over */
        ChangeSet pending;
        size_t trim_high;               /* requests and clients at most since memory was last given back */
        bool notify;                    /* run by a service manager that wants STATUS= */
        sd_event_source *status_source; /* armed while a STATUS= waits for its turn */
        uint64_t status_sent_usec;      /* CLOCK_MONOTONIC of the last STATUS=, 0 before the first */
} Publisher;

int publisher_init(Publisher *p, sd_event *event, Core *core, const Clients *clients);
void publisher_attach_bus(Publisher *p, sd_bus *bus);
void publisher_done(Publisher *p);

/* What a transaction changed, made known: LatencyChanged and RequestsChanged
 * at both object paths at once; PropertiesChanged and STATUS= once the
 * current burst of changes is over; and the deadline timer follows the
 * requests. publish() is publish_now() then publish_rest(); a departure
 * runs its bookkeeping between the two. */
void publish(Publisher *p, const ChangeSet *changes);
void publish_now(Publisher *p, const ChangeSet *changes);
void publish_rest(Publisher *p, const ChangeSet *changes);

/* The one deadline timer, armed for the earliest timed request. */
void publish_arm_expiry(Publisher *p);

/* Tells the service manager what holds now (STATUS=): at once, or when a
 * second has passed since it was last told (one timer, armed only then). */
void publish_status(Publisher *p);
