/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The broker's state and the one path every change takes: store → effective
 * value → kernel → reply → signals. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "hashmap.h"
#include "sink.h"
#include "store.h"

#define PMQOS_BUS_NAME "org.freedesktop.PMQoS"
#define PMQOS_OBJECT_PATH "/org/freedesktop/PMQoS"
#define UPOWER_POLICY_PATH "/org/freedesktop/UPower/Policy"
#define UPOWER_QOS_INTERFACE "org.freedesktop.UPower.QoS"

#define PMQOS_DEFAULT_MAX_PER_CONNECTION 64u
#define PMQOS_DEFAULT_MAX_PER_UID 256u

typedef struct Auth Auth;
typedef struct Client Client;

typedef struct Manager {
        sd_event *event;
        sd_bus *bus;
        Store store;
        Sink sink;
        Auth *auth;
        Hashmap clients; /* unique bus name → Client, for clients still on the bus */

        int32_t floor;     /* administrator minimum, PMQOS_LATENCY_NONE if unset */
        int32_t effective; /* what the sink holds, as the API reports it */

        unsigned max_per_connection;
        unsigned max_per_uid;

        bool latency_changed;  /* signals owed for the change being committed */
        bool requests_changed;
        bool verbose;
} Manager;

int manager_new(Manager **ret, sd_event *event, sd_bus *bus, const char *device);
Manager *manager_free(Manager *m);

/* Recomputes the effective value and brings the kernel to it. On failure the
 * previous value stays in force (in the kernel and in m->effective): the
 * caller undoes its change of the store. */
int manager_commit(Manager *m);
/* Emits the signals owed by the last commits. Call after the method reply. */
void manager_emit_signals(Manager *m);

int manager_add_objects(Manager *m);
