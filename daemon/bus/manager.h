/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The bus front, composed: the core it drives, the clients and their calls
 * in progress, polkit, the one emitter, and the features (battery, unit
 * rules, the explainer), each with its own state. The manager builds, wires
 * and frees them; the method handlers get it as their userdata. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "bus/auth.h"
#include "bus/battery.h"
#include "bus/budget.h"
#include "bus/calls.h"
#include "bus/client.h"
#include "bus/explain.h"
#include "record/holds.h"
#include "bus/publish.h"
#include "bus/unit-rules.h"
#include "conf/config.h"
#include "core/core.h"
#include "dbus/contract.h"

typedef struct ManagerConfig {
        CoreConfig core;
        Limits limits;
        uid_t helper_uid; /* what the holder scan helper becomes; (uid_t) -1: stays who pmqosd is */
        gid_t helper_gid;
} ManagerConfig;

typedef struct Manager {
        sd_event *event;
        sd_bus *bus;
        BusGate *gate; /* main.c's: the bus reads through it */
        Core core;
        Clients clients;
        Calls calls;
        Holds holds; /* requests held by a descriptor, a process or a cgroup */
        Auth *auth;
        Limits limits;
        Publisher pub;
        Explainer explainer;
        Budget *budget; /* what each caller may make pmqosd send */
        Battery battery;
        UnitRules rules;
} Manager;

/* Opens the device and the per-CPU files and loads the state and the
 * runtime record: before the bus. The kernel is left as it is. */
int manager_new(Manager **ret, sd_event *event, const ManagerConfig *config);
Manager *manager_free(Manager *m);
static inline void manager_freep(Manager **m) {
        manager_free(*m);
}

/* The bus is connected: departures are watched on it from now on. */
int manager_attach_bus(Manager *m, sd_bus *bus);

/* After manager_attach_bus(), before the name is taken: re-adopts the
 * previous run's requests whose owners are still on this bus (adopt.c),
 * brings the kernel to everything loaded, and starts the runtime record.
 * *ret_changes is for publish() once the name is ours. */
int manager_start(Manager *m, ChangeSet *ret_changes);

/* owner is gone (a client left the bus, a hold ended): its dying requests
 * end in one transaction, one signal; who names it in the debug log. */
void manager_drop_owner(Manager *m, RequestOwner *owner, const char *who);

/* Applies limits and the default floor (after a reload). */
void manager_set_limits(Manager *m, const Limits *limits, int32_t default_floor, int32_t battery_floor);
