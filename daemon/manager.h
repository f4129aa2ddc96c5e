/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The broker's state and the one path every change takes: store → effective
 * value → kernel → reply → signals. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "contract.h"
#include "cpu-sink.h"
#include "hashmap.h"
#include "sink.h"
#include "store.h"

typedef struct ManagerConfig {
        const char *device;
        const char *state_dir;
        const char *sysfs_root;
        Limits limits;
        int32_t default_floor;
        uid_t state_owner; /* who may own an existing state directory besides us: the --user */
} ManagerConfig;

typedef struct Auth Auth;
typedef struct Client Client;

typedef struct Manager {
        sd_event *event;
        sd_bus *bus;
        Store store;
        Sink sink;
        CpuSink cpus;
        Auth *auth;
        char *state_dir;
        uid_t state_owner;
        sd_event_source *expiry_source;
        Hashmap clients;               /* unique bus name → Client, for clients still on the bus */
        Client *idle_head, *idle_tail; /* clients with nothing pending and no request, oldest first */
        unsigned n_idle;
        Hashmap pending_by_uid; /* uid → UidPending, for users with calls in progress */
        unsigned n_pending;     /* calls in progress of callers other than root, once their uid is known */

        int32_t floor;         /* the floor in force: admin_floor, else default_floor */
        int32_t admin_floor;   /* set over the bus, persisted; PMQOS_LATENCY_NONE if unset */
        int32_t default_floor; /* from the configuration file; PMQOS_LATENCY_NONE if unset */
        int32_t effective;     /* what the sink holds, as the API reports it */

        Limits limits;

        size_t reported_count; /* RequestCount as last announced */
        bool state_dirty;      /* persistent requests or the floor changed: saved durably */
        bool originals_dirty;  /* only CPU originals changed: they mean nothing after a reboot, so the
                                * save needs no fsync of the directory */

        bool latency_changed; /* signals owed for the change being committed */
        bool requests_changed;
        bool floor_changed;
        bool verbose;
        bool notify; /* run by a service manager that wants STATUS= */
} Manager;

/* Opens the device and the per-CPU files. No bus yet: see manager_attach_bus(). */
int manager_new(Manager **ret, sd_event *event, const ManagerConfig *config);
/* Exports the objects on bus; the name is the caller's to take. */
int manager_attach_bus(Manager *m, sd_bus *bus);
/* Restores what a crashed run left on CPUs, loads persistent requests and the
 * floor, and brings the kernel to them: before the bus name is taken. */
int manager_load_state(Manager *m);
Manager *manager_free(Manager *m);
static inline void manager_freep(Manager **m) {
        manager_free(*m);
}

/* Recomputes the effective values and brings the kernel (device and CPUs) to
 * them, then saves state if persistent data changed. On failure the caller
 * undoes its change of the store and commits again. */
int manager_commit(Manager *m);
/* Saves persistent requests, the floor and CPU originals; logs on failure
 * and keeps them in memory, to try again at the next change. */
int manager_save_state(Manager *m);
/* Tells the service manager what holds now (STATUS=). */
void manager_notify_status(Manager *m);
/* Emits the signals owed by the last commits. Call after the method reply. */
void manager_emit_signals(Manager *m);

/* The floor in force follows the administrator's, else the configured default. */
static inline int32_t manager_floor(const Manager *m) {
        return m->admin_floor >= 0 ? m->admin_floor : m->default_floor;
}

/* Applies limits and the default floor (after a reload). */
void manager_set_limits(Manager *m, const Limits *limits, int32_t default_floor);

int64_t now_realtime_usec(void);
