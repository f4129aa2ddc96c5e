/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The effective value is derived, never stored apart from what the kernel was
 * last given: a commit recomputes it from the store and the floor. */

#include "manager.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "bus.h"
#include "client.h"
#include "log.h"

static uint64_t random_seed(void) {
        uint64_t seed = 0;
        if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed)) {
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                seed = (uint64_t) ts.tv_nsec ^ ((uint64_t) ts.tv_sec << 32) ^ (uint64_t) getpid();
        }
        return seed;
}

int manager_new(Manager **ret, sd_event *event, sd_bus *bus, const char *device) {
        int r;

        Manager *m = calloc(1, sizeof(Manager));
        if (!m)
                return -ENOMEM;

        m->event = sd_event_ref(event);
        m->bus = sd_bus_ref(bus);
        m->sink = (Sink) SINK_INIT;
        m->floor = PMQOS_LATENCY_NONE;
        m->effective = PMQOS_LATENCY_NONE;
        m->max_per_connection = PMQOS_DEFAULT_MAX_PER_CONNECTION;
        m->max_per_uid = PMQOS_DEFAULT_MAX_PER_UID;
        store_init(&m->store, random_seed());
        hashmap_init(&m->clients, &hashmap_string_ops);

        r = sink_open(&m->sink, device);
        if (r < 0) {
                log_error("Cannot open %s: %s", device, strerror(-r));
                manager_free(m);
                return r;
        }

        r = auth_new(&m->auth, event);
        if (r < 0) {
                manager_free(m);
                return r;
        }

        *ret = m;
        return 0;
}

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;

        store_done(&m->store);
        clients_free_all(m);
        auth_free(m->auth);
        sink_close(&m->sink);
        sd_bus_unref(m->bus);
        sd_event_unref(m->event);
        free(m);
        return NULL;
}

int manager_commit(Manager *m) {
        int32_t effective = effective_latency(store_min(&m->store), m->floor);

        int r = sink_apply(&m->sink, effective);
        if (r < 0)
                return r;

        if (effective != m->effective) {
                m->effective = effective;
                m->latency_changed = true;
        }
        return 0;
}

void manager_emit_signals(Manager *m) {
        if (!m->latency_changed && !m->requests_changed)
                return;

        int r = bus_upower_emit(m, m->latency_changed, m->requests_changed);
        if (r < 0)
                log_warning("Cannot emit change signals: %s", strerror(-r));
        m->latency_changed = m->requests_changed = false;
}

int manager_add_objects(Manager *m) {
        return bus_upower_add(m);
}
