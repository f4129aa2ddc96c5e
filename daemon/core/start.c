/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A start: the state file's persistent requests and floor loaded, the
 * previous run's per-CPU originals taken over, and the runtime record's
 * connection-bound requests re-adopted for the owners still on the bus,
 * all brought to the kernel in one commit. */

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/core-internal.h"
#include "core/core.h"
#include "record/audit.h"
#include "record/durable-file.h"
#include "record/state-file.h"
#include "util/log.h"

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
                /* A held request without its hold back ended with it, whatever its timeout. */
                bool dropped = expired || (!owner && (req->expires_usec == 0 || req->hold != HOLD_NONE)) ||
                               store_get(&c->store, req->cookie);
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

        r = core_commit(c);
        if (r < 0) {
                log_error_errno(r, "Cannot apply the loaded latency requests: %m");
                free(lines.data);
                *changes = (ChangeSet){};
                return r;
        }
        if (bus_id) {
                core_discard_pending_record(c);
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
