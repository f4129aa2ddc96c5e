/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The bus front's state: the core it drives, the clients and their calls in
 * progress, polkit, the deadline timer, and the one place that turns what a
 * transaction changed into signals and the service manager's STATUS=. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "bus/auth.h"
#include "bus/calls.h"
#include "bus/client.h"
#include "conf/config.h"
#include "dbus/contract.h"
#include "core/core.h"
#include "bus/explain.h"
#include "conf/rules.h"

typedef struct ManagerConfig {
        CoreConfig core;
        Limits limits;
        uid_t helper_uid; /* what the holder scan helper becomes; (uid_t) -1: stays who pmqosd is */
        gid_t helper_gid;
} ManagerConfig;

typedef struct RuleWatch RuleWatch;

typedef struct Manager {
        sd_event *event;
        sd_bus *bus;
        Core core;
        Clients clients;
        Calls calls;
        Auth *auth;
        Limits limits;
        Explainer explainer;
        sd_event_source *expiry_source;  /* armed for the earliest deadline only */
        sd_event_source *publish_source; /* PropertiesChanged and STATUS= of pending, once a burst is over */
        ChangeSet pending;
        size_t trim_high;              /* requests and clients at most since memory was last given back */
        sd_bus_slot *battery_slots[3]; /* UPower's PropertiesChanged, its owner, a Get in flight */
        char *upower_owner;            /* the unique name that answered for UPower, whose signals count */
        RuleWatch **rule_watches;      /* one per unit rule (unit-rules.c) */
        size_t n_rule_watches;
        sd_bus_slot *systemd_slots[3];  /* systemd's owner, UnitNew, a Subscribe in flight */
        char *systemd_owner;            /* the unique name that answered for systemd, whose signals count */
        bool notify;                    /* run by a service manager that wants STATUS= */
        sd_event_source *status_source; /* armed while a STATUS= waits for its turn */
        uint64_t status_sent_usec;      /* CLOCK_MONOTONIC of the last STATUS=, 0 before the first */
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
 * *ret_changes is for manager_publish() once the name is ours. */
int manager_start(Manager *m, ChangeSet *ret_changes);

/* What a transaction changed, made known: LatencyChanged and RequestsChanged
 * at both object paths at once; PropertiesChanged and STATUS= once the
 * current burst of changes is over; and the deadline timer follows the
 * requests. The only function that emits signals. */
void manager_publish(Manager *m, const ChangeSet *changes);

/* The one deadline timer, armed for the earliest timed request. */
void manager_arm_expiry(Manager *m);

/* Tells the service manager what holds now (STATUS=): at once, or when a
 * second has passed since it was last told (one timer, armed only then). */
void manager_notify_status(Manager *m);

/* Applies limits and the default floor (after a reload). */
void manager_set_limits(Manager *m, const Limits *limits, int32_t default_floor, int32_t battery_floor);

/* Follows UPower's OnBattery (battery.c): its PropertiesChanged and its name
 * owner, event-driven; not when pmqosd serves org.freedesktop.UPower itself. */
int manager_watch_battery(Manager *m);

/* Unit rules (unit-rules.c): the rules to follow, taken from *rules (left
 * empty); unchanged rules keep their request, others end or begin. */
int manager_set_rules(Manager *m, RuleSet *rules);
/* Follows systemd on the bus (after manager_attach_bus()). */
int manager_watch_rules(Manager *m);
/* Before the kernel is first written (manager_start()): asks systemd at
 * once which rules' units run, so that their bounds are in that first
 * write. */
void manager_rules_prime(Manager *m);
void manager_rules_done(Manager *m);
/* For Explain(): how many rules hold a bound now, each rule with its unit's
 * ActiveState ("" unknown) and whether it holds, and the rule a request
 * comes from (NULL if none). */
size_t manager_rules_active(const Manager *m);
const RuleWatch *manager_rule(const Manager *m, size_t i, const Rule **ret_rule, const char **ret_state,
                              bool *ret_holds);
const Rule *manager_rule_of(const Manager *m, const Request *req);

int64_t now_realtime_usec(void);
