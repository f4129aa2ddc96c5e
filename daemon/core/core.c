/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One commit path for every change: effective values derived from the store
 * and the floor, the device and the CPUs brought to them, state saved. A
 * transaction that the kernel refuses is undone and committed again, so the
 * kernel never holds what the store does not. */

#include "core/core.h"
#include "core/core-internal.h"
#include "core/ledger-holders.h"
#include "record/audit.h"

#include <assert.h>
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
        if (!c->state_dir || cpu_sink_init(&c->cpus, config->sysfs_root) < 0 ||
            ledger_init(&c->ledger, config->sysfs_root, c->cpus.n_fds, NULL) < 0) {
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
        ledger_done(&c->ledger);
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

/* The file that refused, for core_commit()'s caller (Core.refused). */
static int refused_cpu(Core *c, uint32_t cpu, int r) {
        cpu_sink_path(&c->cpus, cpu, c->refused, sizeof(c->refused));
        return r;
}

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
                                return refused_cpu(c, cpu, r);
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
                        return refused_cpu(c, cpu, r);
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
                        return refused_cpu(c, cpu, r);
                c->originals_dirty = true;
        }
        return 0;
}

/* sink_apply(), and the audit entry the first time the kernel is seen to
 * ignore a write. */
static int refused_sink(Core *c, const Sink *s, int r) {
        snprintf(c->refused, sizeof(c->refused), "%s", s->path);
        return r;
}

static int apply(Sink *s, int32_t usec) {
        bool ignored = s->ignores_writes;
        int r = sink_apply(s, usec);
        if (!ignored && s->ignores_writes)
                audit_kernel_ignores_writes(s->path, s->ignored_reported, s->written);
        return r;
}

static void ledger_settle(Core *c, bool read_files) {
        int32_t base = c->admin_floor >= 0 ? c->admin_floor : c->default_floor;
        LedgerFacts f = { .store = &c->store,
                          .cpus = &c->cpus,
                          .sink = &c->sink,
                          .effective = c->effective,
                          .floor = core_floor(c),
                          .battery_floor = c->on_battery && c->battery_floor > base };
        ledger_holders_settle(&c->ledger, &f, read_files);
}

void core_ledger_query(Core *c) {
        ledger_settle(c, true);
        ledger_sample(&c->ledger);
}

/* Brings the kernel and the state file to the store, and the ledger to the kernel. */
int core_commit(Core *c) {
        int32_t effective = effective_latency(store_min(&c->store), core_floor(c));
        int r;

        c->refused[0] = 0;
        r = apply(&c->sink, effective);
        if (r < 0)
                return refused_sink(c, &c->sink, r);
        c->effective = effective;
        if (core_has_wakeup(c)) {
                int32_t wakeup = effective_latency(store_wakeup_min(&c->store), core_floor(c));
                r = apply(&c->wakeup, wakeup);
                if (r < 0)
                        return refused_sink(c, &c->wakeup, r);
                c->wakeup_effective = wakeup;
        }
        if (c->store.n_cpu_heaps > 0 || c->cpus.n_originals > 0) {
                r = commit_cpus(c);
                if (r < 0)
                        return r;
        }
        if (c->state_dirty || c->originals_dirty)
                (void) core_save(c);
        ledger_settle(c, false);
        return 0;
}

Before core_before(const Core *c) {
        return (Before){ .effective = c->effective,
                         .wakeup_effective = c->wakeup_effective,
                         .floor = core_floor(c),
                         .count = store_size(&c->store),
                         .state_dirty = c->state_dirty };
}

/* What changed, for the signals; a new effective value also for the audit trail. */
void core_changed(const Core *c, const Before *b, bool requests, ChangeSet *changes) {
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
static void record(Core *c, TextBuffer *lines, size_t n_lines, long live_delta) {
        bool whole = c->pending_whole;
        /* Departures first; written whole, the record has this transaction too. */
        core_flush_record(c);
        if (!whole)
                runtime_record_append(&c->record, lines, n_lines, live_delta, &c->store);
        free(lines->data);
        *lines = (TextBuffer){};
}

void core_discard_pending_record(Core *c) {
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
        core_discard_pending_record(c);
}

/* The kernel refused: the caller put the store back; bring the kernel back too. */
int core_undo(Core *c, const Before *b, int error, ChangeSet *changes) {
        char refused[sizeof(c->refused)];
        memcpy(refused, c->refused, sizeof(refused)); /* what the caller hears of, not the commit back */
        c->state_dirty = b->state_dirty;
        int r = core_commit(c);
        if (r < 0)
                log_error_errno(r, "Cannot bring %s back after a failed write: %m", c->refused);
        memcpy(c->refused, refused, sizeof(refused));
        *changes = (ChangeSet){};
        return error;
}

/* ---- transactions ---- */

int core_add(Core *c, Request *r, RequestOwner *owner, ChangeSet *changes) {
        return core_add_for(c, r, owner, NULL, changes);
}

int core_add_for(Core *c, Request *r, RequestOwner *owner, const char *asker, ChangeSet *changes) {
        assert(c && r && changes);
        Before b = core_before(c);
        int k = store_add(&c->store, r, owner);
        if (k < 0) {
                request_free(r);
                *changes = (ChangeSet){};
                return k;
        }
        if (r->persistent)
                c->state_dirty = true;
        k = core_commit(c);
        if (k < 0) {
                store_remove(&c->store, r);
                return core_undo(c, &b, k, changes);
        }
        if (recorded(c, r)) {
                TextBuffer lines = {};
                runtime_format_add(&lines, r);
                record(c, &lines, 1, 1);
        }
        audit_request_added_for(r, asker);
        core_changed(c, &b, true, changes);
        return 0;
}

int core_update(Core *c, Request *r, int32_t value, uid_t by_uid, ChangeSet *changes) {
        assert(c && r && changes);
        Before b = core_before(c);
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
        k = core_commit(c);
        if (k < 0) {
                (void) store_update(&c->store, r, old); /* room was reserved for old: cannot fail */
                return core_undo(c, &b, k, changes);
        }
        if (recorded(c, r)) {
                TextBuffer lines = {};
                runtime_format_value(&lines, r->cookie, value);
                record(c, &lines, 1, 0);
        }
        audit_request_changed(r, old, by_uid);
        core_changed(c, &b, true, changes);
        return 0;
}

int core_cancel(Core *c, Request *r, uid_t by_uid, ChangeSet *changes) {
        return core_end(c, r, AUDIT_END_CANCELLED, by_uid, changes);
}

int core_end(Core *c, Request *r, AuditEnd how, uid_t by_uid, ChangeSet *changes) {
        assert(c && r && changes);
        Before b = core_before(c);
        int32_t old = r->value;
        bool persistent = r->persistent, was_recorded = recorded(c, r);
        uint32_t cookie = r->cookie;

        /* Out of the heaps first, so that a failed write can put it back as it was. */
        int k = store_update(&c->store, r, PMQOS_LATENCY_NONE);
        if (k >= 0)
                k = core_commit(c);
        if (k < 0) {
                (void) store_update(&c->store, r, old);
                return core_undo(c, &b, k, changes);
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
        core_changed(c, &b, true, changes);
        return 0;
}

int core_drop_owner(Core *c, RequestOwner *owner, ChangeSet *changes) {
        assert(c && owner && changes);
        unsigned n_dying = store_unplace_owner(&c->store, owner);
        int32_t effective = c->effective, wakeup = c->wakeup_effective;

        int k = n_dying > 0 ? core_commit(c) : 0;
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
        assert(c && changes);
        Before b = core_before(c);
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
        int k = core_commit(c);
        record(c, &lines, n_lines, -(long) n_lines);
        core_changed(c, &b, n > 0, changes);
        return k;
}
