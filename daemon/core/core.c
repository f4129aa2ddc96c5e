/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One commit path for every change: effective values derived from the store
 * and the floor, the device and the CPUs brought to them, state saved. A
 * transaction that the kernel refuses is undone and committed again, so the
 * kernel never holds what the store does not. */

#include "core/core.h"
#include "record/audit.h"

#include <errno.h>
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "record/durable-file.h"
#include "record/state-file.h"

/* The wakeup device where the kernel has one (Linux 6.19+): taken back from
 * the service manager, or opened; without it cpu_wakeup is NotSupported. */
static void open_wakeup(Core *c, const CoreConfig *config) {
        if (!config->wakeup_device || !config->wakeup_device[0])
                return;
        if (config->have_wakeup_fd) {
                c->wakeup_adopted = sink_adopt(&c->wakeup, config->wakeup_device, config->wakeup_fd) >= 0;
                if (c->wakeup_adopted)
                        return;
        }
        int r = sink_open(&c->wakeup, config->wakeup_device);
        if (r < 0 && r != -ENOENT)
                log_warning_errno(r, "Cannot open %s: %m; cpu_wakeup requests are not supported.",
                                  config->wakeup_device);
}

int core_init(Core *c, const CoreConfig *config) {
        int r;

        *c = (Core){
                .sink = SINK_INIT,
                .wakeup = SINK_INIT,
                .wakeup_effective = PMQOS_LATENCY_NONE,
                .admin_floor = PMQOS_LATENCY_NONE,
                .default_floor = config->default_floor,
                .battery_floor = config->battery_floor,
                .effective = PMQOS_LATENCY_NONE,
                .state_owner = config->state_owner,
        };
        store_init(&c->store, config->seed);
        c->state_dir = strdup(config->state_dir);
        if (!c->state_dir || cpu_sink_init(&c->cpus, config->sysfs_root) < 0) {
                log_error_errno(ENOMEM, "Cannot set up: %m");
                return -ENOMEM;
        }
        /* A restart under a service manager that kept our descriptor: the
         * kernel still holds the previous run's bound, and keeps it. */
        if (config->have_device_fd) {
                r = sink_adopt(&c->sink, config->device, config->device_fd);
                if (r == -ENOMEM) {
                        log_error_errno(ENOMEM, "Cannot set up: %m");
                        return r;
                }
                c->device_adopted = r >= 0;
                if (r < 0)
                        log_warning("The descriptor the service manager kept is not %s open for writing; opening it "
                                    "anew.",
                                    config->device);
        }
        if (!c->device_adopted) {
                r = sink_open(&c->sink, config->device);
                if (r < 0) {
                        log_error_errno(r, "Cannot open %s: %m", config->device);
                        return r;
                }
        }
        open_wakeup(c, config);
        (void) runtime_record_init(&c->record, config->runtime_dir, config->state_owner); /* logs; not fatal */
        return 0;
}

void core_done(Core *c) {
        core_flush_record(c);
        if (c->cpus.n_originals > 0 && !c->keep_cpus) {
                int r = cpu_sink_restore_all(&c->cpus);
                if (r < 0)
                        log_error_errno(r, "Cannot restore every CPU's pm_qos_resume_latency_us: %m");
                c->originals_dirty = true;
        }
        if ((c->state_dirty || c->originals_dirty) && c->state_dir)
                (void) core_save(c);
        store_done(&c->store);
        runtime_data_done(&c->adoptable);
        runtime_record_done(&c->record);
        sink_close(&c->sink);
        sink_close(&c->wakeup);
        cpu_sink_done(&c->cpus);
        free(c->state_dir);
        c->state_dir = NULL;
}

/* ---- persistence ---- */

int core_save(Core *c) {
        TextBuffer b = {};
        int r = state_serialize(&c->store, c->admin_floor, c->cpus.originals, c->cpus.n_originals, &b);
        if (r >= 0)
                r = state_save(c->state_dir, b.data, b.len, c->state_dirty);
        free(b.data);
        if (r < 0) {
                /* Keep serving from memory; the next change tries again. */
                log_error_errno(r,
                                "Cannot save state to %s: %m; persistent requests live in memory only until it works.",
                                c->state_dir);
                return r;
        }
        c->state_dirty = c->originals_dirty = false;
        return 0;
}

/* ---- committing ---- */

static int commit_cpus(Core *c) {
        int32_t floor = core_floor(c);
        bool remembered = false;
        int r;

        /* Record every original, on disk, before the first write that would lose it. */
        for (uint32_t cpu = 0; cpu < c->store.n_cpu_heaps; cpu++) {
                int32_t target = effective_latency(store_cpu_min(&c->store, cpu), floor);
                if (target >= 0 && !cpu_sink_constrains(&c->cpus, cpu)) {
                        r = cpu_sink_remember(&c->cpus, cpu);
                        if (r < 0)
                                return r;
                        remembered = true;
                }
        }
        if (remembered) {
                c->originals_dirty = true;
                (void) core_save(c);
        }

        for (uint32_t cpu = 0; cpu < c->store.n_cpu_heaps; cpu++) {
                int32_t target = effective_latency(store_cpu_min(&c->store, cpu), floor);
                if (target == cpu_sink_written(&c->cpus, cpu))
                        continue;
                r = cpu_sink_write(&c->cpus, cpu, target);
                if (r < 0)
                        return r;
                if (target < 0)
                        c->originals_dirty = true; /* an original went back and is forgotten */
        }

        /* CPUs taken over from the previous run that no request names now. */
        for (size_t i = 0; i < c->cpus.n_originals;) {
                uint32_t cpu = c->cpus.originals[i].cpu;
                if (cpu < c->store.n_cpu_heaps) {
                        i++;
                        continue;
                }
                r = cpu_sink_write(&c->cpus, cpu, PMQOS_LATENCY_NONE); /* forgets originals[i] */
                if (r < 0)
                        return r;
                c->originals_dirty = true;
        }
        return 0;
}

/* sink_apply(), and the audit entry the first time the kernel is seen to
 * ignore a write. */
static int apply(Sink *s, int32_t usec) {
        bool ignored = s->ignores_writes;
        int r = sink_apply(s, usec);
        if (!ignored && s->ignores_writes)
                audit_kernel_ignores_writes(s->path, s->ignored_reported, s->written);
        return r;
}

/* Brings the kernel and the state file to the store. */
static int commit(Core *c) {
        int32_t effective = effective_latency(store_min(&c->store), core_floor(c));
        int r;

        r = apply(&c->sink, effective);
        if (r < 0)
                return r;
        c->effective = effective;
        if (core_has_wakeup(c)) {
                int32_t wakeup = effective_latency(store_wakeup_min(&c->store), core_floor(c));
                r = apply(&c->wakeup, wakeup);
                if (r < 0)
                        return r;
                c->wakeup_effective = wakeup;
        }
        if (c->store.n_cpu_heaps > 0 || c->cpus.n_originals > 0) {
                r = commit_cpus(c);
                if (r < 0)
                        return r;
        }
        if (c->state_dirty || c->originals_dirty)
                (void) core_save(c);
        return 0;
}

/* The snapshot a transaction compares with to say what changed. */
typedef struct Before {
        int32_t effective, wakeup_effective, floor;
        size_t count;
        bool state_dirty;
} Before;

static Before before(const Core *c) {
        return (Before){ .effective = c->effective,
                         .wakeup_effective = c->wakeup_effective,
                         .floor = core_floor(c),
                         .count = store_size(&c->store),
                         .state_dirty = c->state_dirty };
}

/* What changed, for the signals; a new effective value also for the audit trail. */
static void changed(const Core *c, const Before *b, bool requests, ChangeSet *changes) {
        if (c->effective != b->effective)
                audit_latency_changed(QOS_TYPE_CPU_DMA, b->effective, c->effective);
        if (c->wakeup_effective != b->wakeup_effective)
                audit_latency_changed(QOS_TYPE_CPU_WAKEUP, b->wakeup_effective, c->wakeup_effective);
        *changes = (ChangeSet){ .latency = c->effective != b->effective,
                                .wakeup = c->wakeup_effective != b->wakeup_effective,
                                .requests = requests,
                                .count = store_size(&c->store) != b->count,
                                .floor = core_floor(c) != b->floor };
}

/* Whether the runtime record follows r: every request that is not
 * persistent, when a record is kept (no formatting work otherwise). */
static bool recorded(const Core *c, const Request *r) {
        return c->record.dir && !r->persistent && !r->rule;
}

/* The runtime record follows every request that is not persistent: lines
 * of one transaction, one write. */
static void discard_pending_record(Core *c);

static void record(Core *c, TextBuffer *lines, size_t n_lines, long live_delta) {
        bool whole = c->pending_whole;
        /* Departures first; written whole, the record has this transaction too. */
        core_flush_record(c);
        if (!whole)
                runtime_record_append(&c->record, lines, n_lines, live_delta, &c->store);
        free(lines->data);
        *lines = (TextBuffer){};
}

static void discard_pending_record(Core *c) {
        free(c->record_pending.data);
        c->record_pending = (TextBuffer){};
        c->pending_lines = 0;
        c->pending_delta = 0;
        c->pending_whole = false;
}

void core_flush_record(Core *c) {
        if (c->pending_whole)
                runtime_record_rewrite(&c->record, &c->store);
        else if (c->pending_lines > 0)
                runtime_record_append(&c->record, &c->record_pending, c->pending_lines, c->pending_delta, &c->store);
        discard_pending_record(c);
}

/* The kernel refused: the caller put the store back; bring the kernel back too. */
static int undo(Core *c, const Before *b, int error, ChangeSet *changes) {
        c->state_dirty = b->state_dirty;
        int r = commit(c);
        if (r < 0)
                log_error_errno(r, "Cannot bring %s back after a failed write: %m", c->sink.path);
        *changes = (ChangeSet){};
        return error;
}

/* ---- transactions ---- */

int core_add(Core *c, Request *r, RequestOwner *owner, ChangeSet *changes) {
        Before b = before(c);
        int k = store_add(&c->store, r, owner);
        if (k < 0) {
                request_free(r);
                *changes = (ChangeSet){};
                return k;
        }
        if (r->persistent)
                c->state_dirty = true;
        k = commit(c);
        if (k < 0) {
                store_remove(&c->store, r);
                return undo(c, &b, k, changes);
        }
        if (recorded(c, r)) {
                TextBuffer lines = {};
                runtime_format_add(&lines, r);
                record(c, &lines, 1, 1);
        }
        audit_request_added(r);
        changed(c, &b, true, changes);
        return 0;
}

int core_update(Core *c, Request *r, int32_t value, uid_t by_uid, ChangeSet *changes) {
        Before b = before(c);
        int32_t old = r->value;

        if (value == old) {
                *changes = (ChangeSet){};
                return 0;
        }
        int k = store_update(&c->store, r, value);
        if (k < 0) {
                *changes = (ChangeSet){};
                return k;
        }
        if (r->persistent)
                c->state_dirty = true;
        k = commit(c);
        if (k < 0) {
                (void) store_update(&c->store, r, old); /* room was reserved for old: cannot fail */
                return undo(c, &b, k, changes);
        }
        if (recorded(c, r)) {
                TextBuffer lines = {};
                runtime_format_value(&lines, r->cookie, value);
                record(c, &lines, 1, 0);
        }
        audit_request_changed(r, old, by_uid);
        changed(c, &b, true, changes);
        return 0;
}

int core_cancel(Core *c, Request *r, uid_t by_uid, ChangeSet *changes) {
        return core_end(c, r, AUDIT_END_CANCELLED, by_uid, changes);
}

int core_end(Core *c, Request *r, AuditEnd how, uid_t by_uid, ChangeSet *changes) {
        Before b = before(c);
        int32_t old = r->value;
        bool persistent = r->persistent, was_recorded = recorded(c, r);
        uint32_t cookie = r->cookie;

        /* Out of the heaps first, so that a failed write can put it back as it was. */
        int k = store_update(&c->store, r, PMQOS_LATENCY_NONE);
        if (k >= 0)
                k = commit(c);
        if (k < 0) {
                (void) store_update(&c->store, r, old);
                return undo(c, &b, k, changes);
        }
        audit_request_ended(r, old, how, by_uid);
        store_remove(&c->store, r);
        if (persistent) {
                c->state_dirty = true;
                (void) core_save(c);
        } else if (was_recorded) {
                TextBuffer lines = {};
                runtime_format_remove(&lines, cookie);
                record(c, &lines, 1, -1);
        }
        changed(c, &b, true, changes);
        return 0;
}

static int set_floors(Core *c, int32_t admin_floor, int32_t default_floor, const char *why, ChangeSet *changes) {
        Before b = before(c);
        int32_t old_admin = c->admin_floor, old_default = c->default_floor;

        c->admin_floor = admin_floor;
        c->default_floor = default_floor;
        if (admin_floor != old_admin)
                c->state_dirty = true;
        int k = commit(c);
        if (k < 0) {
                c->admin_floor = old_admin;
                c->default_floor = old_default;
                return undo(c, &b, k, changes);
        }
        if (core_floor(c) != b.floor)
                audit_floor_changed(b.floor, core_floor(c), why);
        changed(c, &b, false, changes);
        return 0;
}

int core_set_floor(Core *c, int32_t admin_floor, uid_t by_uid, ChangeSet *changes) {
        char why[64];
        snprintf(why, sizeof(why), "the administrator floor was set by uid %u", (unsigned) by_uid);
        return set_floors(c, admin_floor, c->default_floor, why, changes);
}

int core_set_default_floor(Core *c, int32_t default_floor, ChangeSet *changes) {
        return set_floors(c, c->admin_floor, default_floor, "the configured default floor changed", changes);
}

int core_set_battery(Core *c, bool on_battery, int32_t battery_floor, ChangeSet *changes) {
        Before b = before(c);
        bool old_on = c->on_battery;
        int32_t old_floor = c->battery_floor;

        c->on_battery = on_battery;
        c->battery_floor = battery_floor;
        int k = commit(c);
        if (k < 0) {
                c->on_battery = old_on;
                c->battery_floor = old_floor;
                return undo(c, &b, k, changes);
        }
        if (core_floor(c) != b.floor)
                audit_floor_changed(b.floor, core_floor(c),
                                    on_battery != old_on ? (on_battery ? "the machine went on battery"
                                                                       : "the machine went on mains power")
                                                         : "the configured battery floor changed");
        changed(c, &b, false, changes);
        changes->battery = on_battery != old_on;
        return 0;
}

int core_drop_owner(Core *c, RequestOwner *owner, ChangeSet *changes) {
        unsigned n_dying = store_unplace_owner(&c->store, owner);
        int32_t effective = c->effective, wakeup = c->wakeup_effective;

        int k = n_dying > 0 ? commit(c) : 0;
        c->dropped_effective = effective;
        c->dropped_wakeup = wakeup;
        /* The floor stays; the count changes by the requests that die. */
        *changes = (ChangeSet){ .latency = c->effective != effective,
                                .wakeup = c->wakeup_effective != wakeup,
                                .requests = owner->n_requests > 0,
                                .count = n_dying > 0 };
        return k;
}

void core_drop_owner_finish(Core *c, RequestOwner *owner) {
        size_t n_lines = 0;
        long delta = 0;

        for (Request *r = owner->head; r; r = r->owner_next) {
                if (request_dies_with_owner(r))
                        audit_request_ended(r, r->value, AUDIT_END_OWNER_LEFT, r->uid);
                if (recorded(c, r)) {
                        n_lines++;
                        delta -= request_dies_with_owner(r);
                }
        }
        if (c->effective != c->dropped_effective)
                audit_latency_changed(QOS_TYPE_CPU_DMA, c->dropped_effective, c->effective);
        if (c->wakeup_effective != c->dropped_wakeup)
                audit_latency_changed(QOS_TYPE_CPU_WAKEUP, c->dropped_wakeup, c->wakeup_effective);
        /* A line per request, unless they (with those of departures before,
         * not written yet) would have the record written whole anyway: then
         * it is written whole once, from the outcome. */
        if (!c->pending_whole &&
            runtime_record_rewrite_due(&c->record, c->pending_lines + n_lines, c->pending_delta + delta)) {
                c->pending_whole = true;
                free(c->record_pending.data);
                c->record_pending = (TextBuffer){};
        }
        for (Request *r = owner->head; r && !c->pending_whole; r = r->owner_next)
                if (recorded(c, r) && request_dies_with_owner(r))
                        runtime_format_remove(&c->record_pending, r->cookie);
                else if (recorded(c, r))
                        runtime_format_detach(&c->record_pending, r->cookie);
        c->pending_lines += n_lines;
        c->pending_delta += delta;
        (void) store_drop_owner(&c->store, owner);
}

int core_expire(Core *c, int64_t now, ChangeSet *changes) {
        Before b = before(c);
        TextBuffer lines = {};
        size_t n_lines = 0;
        Request *r;
        unsigned n = 0;

        while ((r = store_first_expired(&c->store, now))) {
                audit_request_ended(r, r->value, AUDIT_END_EXPIRED, r->uid);
                if (r->persistent)
                        c->state_dirty = true;
                else if (recorded(c, r)) {
                        runtime_format_remove(&lines, r->cookie);
                        n_lines++;
                }
                store_remove(&c->store, r);
                n++;
        }
        int k = commit(c);
        record(c, &lines, n_lines, -(long) n_lines);
        changed(c, &b, n > 0, changes);
        return k;
}

/* ---- loading ---- */

/* A saved per-CPU request naming a CPU that is gone or offline now is kept
 * (listed, cancellable, saved again) but bounds nothing until the next
 * start finds its CPUs: it must not stop pmqosd from starting. */
static void mark_if_cpus_gone(Core *c, Request *req) {
        for (size_t i = 0; i < req->n_cpus; i++) {
                int r = cpu_sink_check_cpu(&c->cpus, req->cpus[i]);
                if (r < 0) {
                        req->inactive = true;
                        log_warning("Saved request %" PRIu32 " names CPU %" PRIu32 ", which is %s; keeping it, "
                                    "inactive, until a start finds that CPU.",
                                    req->cookie, req->cpus[i], r == -EHOSTDOWN ? "offline" : "absent");
                        return;
                }
        }
}

int core_load(Core *c, int64_t now) {
        StateData d;
        int r;

        r = durable_dir_prepare(c->state_dir, c->state_owner);
        if (r < 0) {
                log_error_errno(r, "Cannot use state directory %s: %m", c->state_dir);
                return r;
        }
        r = state_load(c->state_dir, &d);
        if (r < 0) {
                log_error_errno(r, "Cannot load state from %s: %m", c->state_dir);
                return r;
        }

        /* Originals in the file: the last run died, or restarted, while
         * constraining CPUs. They are taken over without a write; the commit
         * in core_start() gives back only what no request needs now. */
        if (d.n_originals > 0) {
                r = cpu_sink_adopt_originals(&c->cpus, d.originals, d.n_originals);
                if (r < 0) {
                        log_error_errno(r, "Cannot take over the per-CPU latency values of the previous run: %m");
                        state_data_done(&d);
                        return r;
                }
                c->originals_dirty = true;
        }

        size_t n_loaded = 0;
        c->admin_floor = d.floor;
        for (size_t i = 0; i < d.n_requests; i++) {
                Request *req = d.requests[i];
                if (req->expires_usec > 0 && req->expires_usec <= now) {
                        c->state_dirty = true;
                        continue; /* ended while we were down */
                }
                mark_if_cpus_gone(c, req);
                if (store_get(&c->store, req->cookie) || store_add(&c->store, req, NULL) < 0)
                        continue;
                d.requests[i] = NULL;
                n_loaded++;
        }
        state_data_done(&d);
        if (n_loaded > 0 || core_floor(c) >= 0)
                log_info("Loaded %zu persistent request(s) and floor %d from %s.", n_loaded, (int) core_floor(c),
                         c->state_dir);
        return runtime_record_load(&c->record, &c->adoptable);
}

int core_add_loaded(Core *c, Request *r) {
        int k = store_add(&c->store, r, NULL);
        if (k < 0) {
                request_free(r);
                return k;
        }
        audit_request_added(r);
        return 0;
}

int core_start(Core *c, const char *bus_id, RequestOwner *const *owners, int64_t now, ChangeSet *changes) {
        RuntimeData *d = &c->adoptable;
        int32_t previous_min = store_min(&c->store), previous_wakeup = store_wakeup_min(&c->store);
        size_t n_adopted = 0, n_ownerless = 0, n_detached = 0, n_dropped = 0;
        int r;

        /* A record of this very bus goes on: only what this start changes in
         * it is appended. Another bus's (or none) is written anew below. */
        bool resume = bus_id && d->length > 0 && strcmp(d->bus_id, bus_id) == 0;
        size_t n_recorded = d->n_entries, length = d->length, n_changes = d->n_changes;
        TextBuffer lines = {};
        size_t n_lines = 0;

        for (size_t i = 0; i < d->n_entries; i++) {
                Request *req = d->entries[i].request;
                RequestOwner *owner = owners ? owners[i] : NULL;

                /* What the previous run asked of the kernel, to say whether this one asks the same. */
                int32_t *min = req->type == QOS_TYPE_CPU_WAKEUP ? &previous_wakeup : &previous_min;
                if (req->n_cpus == 0 && req->value >= 0 && (*min < 0 || req->value < *min))
                        *min = req->value;
                bool expired = req->expires_usec > 0 && req->expires_usec <= now;
                bool dropped = expired || (!owner && req->expires_usec == 0) || store_get(&c->store, req->cookie);
                if (!dropped) {
                        mark_if_cpus_gone(c, req);
                        dropped = store_add(&c->store, req, owner) < 0;
                }
                if (dropped) {
                        n_dropped++;
                        if (resume) {
                                runtime_format_remove(&lines, req->cookie);
                                n_lines++;
                        }
                        continue;
                }
                d->entries[i].request = NULL;
                n_adopted++;
                if (!owner)
                        n_ownerless++;
                if (!owner && d->entries[i].sender[0]) {
                        n_detached++; /* a timed request whose owner left while we were down */
                        if (resume) {
                                runtime_format_detach(&lines, req->cookie);
                                n_lines++;
                        }
                }
        }
        runtime_data_done(d);

        r = commit(c);
        if (r < 0) {
                log_error_errno(r, "Cannot apply the loaded latency requests: %m");
                free(lines.data);
                *changes = (ChangeSet){};
                return r;
        }
        if (bus_id) {
                discard_pending_record(c);
                if (resume)
                        (void) runtime_record_resume(&c->record, bus_id, length, n_changes, n_recorded, &lines, n_lines,
                                                     -(long) n_dropped, &c->store); /* logs */
                else /* written whole from the store: whatever was left behind is in it */
                        (void) runtime_record_start(&c->record, bus_id, &c->store); /* logs */
        }
        free(lines.data);
        if (n_adopted + n_dropped > 0)
                log_info("Re-adopted %zu request(s) of the previous run (%zu timed ones without an owner on the bus); "
                         "%zu ended with their owner or deadline while pmqosd was down.",
                         n_adopted, n_ownerless, n_dropped);
        int32_t wakeup_before =
                core_has_wakeup(c) ? effective_latency(previous_wakeup, core_floor(c)) : PMQOS_LATENCY_NONE;
        *changes = (ChangeSet){ .latency = c->effective != effective_latency(previous_min, core_floor(c)),
                                .wakeup = c->wakeup_effective != wakeup_before,
                                .requests = n_dropped + n_detached > 0,
                                .count = n_dropped > 0 };
        return 0;
}
