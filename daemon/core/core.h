/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The transaction core: every change of the request set and the floors is
 * one call that changes the store, brings the kernel (device and per-CPU
 * files) to it, persists, undoes everything if the kernel refuses, and says
 * what changed. No bus, no event loop: time is a parameter. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "record/audit.h"
#include "sys/cpu-sink.h"
#include "sys/foreign-writes.h"
#include "sys/ledger.h"
#include "record/runtime-record.h"
#include "sys/sink.h"
#include "model/store.h"

typedef struct CoreConfig {
        const char *device;
        const char *state_dir;
        const char *sysfs_root;
        const char *runtime_dir; /* the runtime record's directory; NULL or "": none */
        uid_t state_owner;       /* who may own an existing state directory besides us: the --user */
        bool have_device_fd;     /* device_fd is the device, kept for us by the service manager */
        int device_fd;
        const char *wakeup_device; /* /dev/cpu_wakeup_latency (Linux 6.19+); NULL or "": none, cpu_wakeup unsupported */
        bool have_wakeup_fd;       /* wakeup_fd is it, kept for us by the service manager */
        int wakeup_fd;
        int32_t default_floor;
        int32_t battery_floor; /* in force while on battery; PMQOS_LATENCY_NONE: none */
        uint64_t seed;         /* for cookies */
} CoreConfig;

/* What one transaction changed; the bus front turns it into signals. */
typedef struct ChangeSet {
        bool latency;  /* the effective value */
        bool wakeup;   /* the effective cpu_wakeup value */
        bool requests; /* the request set: added, removed, changed or detached */
        bool count;    /* how many requests there are */
        bool floor;    /* the floor in force */
        bool battery;  /* whether the machine runs on battery */
} ChangeSet;

typedef struct Core {
        Store store;
        Sink sink;
        Sink wakeup; /* /dev/cpu_wakeup_latency; fd -1 where the kernel has none */
        CpuSink cpus;
        Ledger ledger; /* what the bounds cost, per CPU and holder (core/ledger-holders.h) */
        char *state_dir;
        uid_t state_owner;
        RuntimeRecord record;
        /* Departures' record lines, written after their signals (core_flush_record()) */
        TextBuffer record_pending;
        size_t pending_lines;
        long pending_delta;
        bool pending_whole;                        /* instead of lines: the record is to be written whole */
        int32_t dropped_effective, dropped_wakeup; /* before core_drop_owner(), for core_drop_owner_finish() */
        RuntimeData adoptable;                     /* what the previous run recorded, until core_start() */
        bool device_adopted;                       /* the device descriptor came from the service manager */
        bool wakeup_adopted;                       /* so did the wakeup device's */
        bool keep_cpus;                            /* core_done() leaves per-CPU bounds for the next run (a restart) */
        int32_t admin_floor;                       /* set over the bus, persisted; PMQOS_LATENCY_NONE if unset */
        int32_t default_floor;                     /* from the configuration; PMQOS_LATENCY_NONE if unset */
        int32_t battery_floor;                     /* from the configuration: a further floor while on_battery */
        bool on_battery;                           /* as UPower last said; false without UPower */
        int32_t effective;                         /* what the device was last given, as the API reports it */
        int32_t wakeup_effective; /* what the wakeup device was last given; PMQOS_LATENCY_NONE without one */
        bool state_dirty;         /* persistent requests or the admin floor changed: saved durably */
        bool originals_dirty;     /* only CPU originals changed: they mean nothing after a reboot, so the
                                   * save needs no fsync of the directory */
        char refused[600];        /* the file the last failed core_commit() could not write, for its caller */

        /* Who else wrote the per-CPU idle knobs (bus/custody.c), for Explain(); NULL: not watched. */
        const ForeignWatch *foreign;
} Core;

/* Opens the device (or takes the one the service manager kept) and every
 * CPU's file (this needs root). Logs why on failure; core_done() applies
 * either way. */
int core_init(Core *c, const CoreConfig *config);
/* Gives every CPU back what it had (unless keep_cpus: a restart, whose next
 * run re-adopts them from the originals saved in the state file) and saves
 * what is unsaved; the device request goes with its descriptor. */
void core_done(Core *c);

/* Loads persistent requests and the floor, takes over what the previous run
 * left on CPUs, and reads its runtime record into c->adoptable; the kernel
 * is not touched yet. Logs why on failure. */
int core_load(Core *c, int64_t now);

/* The bus front checked c->adoptable: owners[i] is the live owner of
 * c->adoptable.entries[i] (same bus, same name, uid and pid), or NULL.
 * Requests with an owner are adopted as they were; timed ones without an
 * owner stay, detached; the others are dropped. Then the kernel is brought
 * to all of it (one write at most to the device, and only the CPUs that
 * differ) and a new runtime record begins for bus_id. owners may be NULL
 * (nothing to adopt). *changes says what differs from what the previous
 * run had. */
int core_start(Core *c, const char *bus_id, RequestOwner *const *owners, int64_t now, ChangeSet *changes);
/* Before core_start(): takes r (no owner) into the store without a write;
 * core_start()'s one commit includes it. On failure r is freed. */
int core_add_loaded(Core *c, Request *r);

static inline bool core_has_wakeup(const Core *c) {
        return c->wakeup.fd >= 0;
}

/* The floor in force, for both types: the administrator's, else the
 * configured default; on battery, the battery floor too where it is higher. */
static inline int32_t core_floor(const Core *c) {
        int32_t f = c->admin_floor >= 0 ? c->admin_floor : c->default_floor;
        if (c->on_battery && c->battery_floor > f)
                f = c->battery_floor;
        return f;
}

/* Each returns 0 with *changes filled, or a negative errno with the store,
 * the kernel and the state file as they were before the call. */

/* Takes r (with its cookie from request_new()) into the store for owner
 * (may be NULL); r is the core's on every return: on failure it is already
 * freed (request_free(), or store_remove() after a refused write), so the
 * caller must not touch it again. */
int core_add(Core *c, Request *r, RequestOwner *owner, ChangeSet *changes);
/* The same for a request made on behalf of another process (RequestFor()
 * on a pidfd): r is named after that process, and asker ("pid N (exec)" of
 * the caller) goes to the audit trail, which alone keeps who asked. */
int core_add_for(Core *c, Request *r, RequestOwner *owner, const char *asker, ChangeSet *changes);
/* by_uid: who asks, for the audit trail (audit.h), which every transaction
 * writes to once it succeeded. */
int core_update(Core *c, Request *r, int32_t value, uid_t by_uid, ChangeSet *changes);
/* Ends and frees r. */
int core_cancel(Core *c, Request *r, uid_t by_uid, ChangeSet *changes);
/* The same, saying why in the audit trail (a unit rule's request ending). */
int core_end(Core *c, Request *r, AuditEnd how, uid_t by_uid, ChangeSet *changes);
int core_set_floor(Core *c, int32_t admin_floor, uid_t by_uid, ChangeSet *changes);
int core_set_default_floor(Core *c, int32_t default_floor, ChangeSet *changes);
/* The machine went on battery or off it (UPower), or the configured battery floor changed. */
int core_set_battery(Core *c, bool on_battery, int32_t battery_floor, ChangeSet *changes);

/* These cannot be undone (the owner left, the time came): on a kernel
 * failure the store change stays, the error is returned, and the next
 * successful transaction brings the kernel along. */
/* The owner left. First the kernel: its dying requests stop counting and the
 * kernel is brought to the rest, *changes says what that changed; then,
 * once the signals that a waiting client needs are out,
 * core_drop_owner_finish() forgets them (audit trail, record, memory).
 * Nothing else may use c in between. */
int core_drop_owner(Core *c, RequestOwner *owner, ChangeSet *changes);
void core_drop_owner_finish(Core *c, RequestOwner *owner);
/* Departures leave the runtime record behind: nobody waits for it, and a
 * record that still names a departed owner adopts nothing of it after a
 * restart (its requests end, or stay detached if timed, as the lines would
 * have said). The next transaction that records, and core_done(), bring it
 * along first; its lines are bounded (past the size of a rewrite, the
 * record is due to be written whole instead). */
void core_flush_record(Core *c);
static inline bool core_record_pending(const Core *c) {
        return c->pending_whole || c->pending_lines > 0;
}
int core_expire(Core *c, int64_t now, ChangeSet *changes);

/* The earliest deadline of a timed request (CLOCK_REALTIME µs), or 0. */
static inline int64_t core_next_deadline(const Core *c) {
        return store_next_expiry(&c->store);
}

/* The ledger (sys/ledger.h) as of now, for whoever asks (Explain, Ledger):
 * the per-CPU files read, each CPU's holder settled
 * (core/ledger-holders.h), every CPU with a blocked state sampled. After
 * each commit the ledger is settled without reading the files. */
void core_ledger_query(Core *c);

/* Saves persistent requests, the floor and CPU originals; logs on failure and
 * keeps them in memory, to try again at the next change. */
int core_save(Core *c);
