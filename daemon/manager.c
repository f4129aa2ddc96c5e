/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The effective values are derived, never stored apart from what the kernel
 * was last given: a commit recomputes them from the store and the floor. */

#include "manager.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "bus.h"
#include "client.h"
#include "log.h"
#include "state.h"

static uint64_t random_seed(void) {
        uint64_t seed = 0;
        if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed)) {
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                seed = (uint64_t) ts.tv_nsec ^ ((uint64_t) ts.tv_sec << 32) ^ (uint64_t) getpid();
        }
        return seed;
}

int64_t now_realtime_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int on_expiry(sd_event_source *s, uint64_t usec, void *userdata);

int manager_new(Manager **ret, sd_event *event, const ManagerConfig *config) {
        int r;

        Manager *m = calloc(1, sizeof(Manager));
        if (!m)
                return -ENOMEM;

        m->event = sd_event_ref(event);
        m->sink = (Sink) SINK_INIT;
        m->floor = m->admin_floor = PMQOS_LATENCY_NONE;
        m->default_floor = config->default_floor;
        m->notify = getenv("NOTIFY_SOCKET") != NULL;
        m->effective = PMQOS_LATENCY_NONE;
        m->limits = config->limits;
        m->state_owner = config->state_owner;
        store_init(&m->store, random_seed());
        hashmap_init(&m->clients, &hashmap_string_ops);
        hashmap_init(&m->pending_by_uid, &hashmap_u32_ops);

        m->state_dir = strdup(config->state_dir);
        if (!m->state_dir || cpu_sink_init(&m->cpus, config->sysfs_root) < 0) {
                manager_free(m);
                return -ENOMEM;
        }

        r = sink_open(&m->sink, config->device);
        if (r < 0) {
                log_error("Cannot open %s: %s", config->device, strerror(-r));
                manager_free(m);
                return r;
        }

        r = sd_event_add_time(event, &m->expiry_source, CLOCK_REALTIME, UINT64_MAX, 1000, on_expiry, m);
        if (r >= 0)
                r = sd_event_source_set_enabled(m->expiry_source, SD_EVENT_OFF);
        if (r >= 0)
                r = auth_new(&m->auth, event, m->limits.max_polkit_in_flight);
        if (r < 0) {
                log_error("Cannot set up the event loop: %s", strerror(-r));
                manager_free(m);
                return r;
        }

        *ret = m;
        return 0;
}

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;

        /* Give every CPU back what it had; the device request goes with the fd. */
        if (m->cpus.n_originals > 0) {
                int r = cpu_sink_restore_all(&m->cpus);
                if (r < 0)
                        log_error("Cannot restore every CPU's pm_qos_resume_latency_us: %s", strerror(-r));
                m->originals_dirty = true;
        }
        if ((m->state_dirty || m->originals_dirty) && m->state_dir) {
                TextBuffer b = {};
                if (state_serialize(&m->store, m->admin_floor, NULL, 0, &b) >= 0)
                        (void) state_save(m->state_dir, b.data, b.len, m->state_dirty);
                free(b.data);
        }

        store_done(&m->store);
        clients_free_all(m);
        auth_free(m->auth);
        hashmap_clear(&m->pending_by_uid); /* every call ended with the clients */
        sd_event_source_disable_unref(m->expiry_source);
        sink_close(&m->sink);
        cpu_sink_done(&m->cpus);
        free(m->state_dir);
        sd_bus_unref(m->bus);
        sd_event_unref(m->event);
        free(m);
        return NULL;
}

/* ---- persistence ---- */

int manager_save_state(Manager *m) {
        TextBuffer b = {};
        int r = state_serialize(&m->store, m->admin_floor, m->cpus.originals, m->cpus.n_originals, &b);
        if (r >= 0)
                r = state_save(m->state_dir, b.data, b.len, m->state_dirty);
        free(b.data);
        if (r < 0) {
                /* Keep serving from memory; the next change tries again. */
                log_error("Cannot save state to %s: %s; persistent requests live in memory only until it works.",
                          m->state_dir, strerror(-r));
                return r;
        }
        m->state_dirty = m->originals_dirty = false;
        return 0;
}

/* A saved per-CPU request naming a CPU that is gone or offline now is kept
 * (listed, cancellable, saved again) but bounds nothing until the next
 * start finds its CPUs: it must not stop pmqosd from starting. */
static void mark_if_cpus_gone(Manager *m, Request *req) {
        for (size_t i = 0; i < req->n_cpus; i++) {
                int r = cpu_sink_check_cpu(&m->cpus, req->cpus[i]);
                if (r < 0) {
                        req->inactive = true;
                        log_warning("Saved request %" PRIu32 " names CPU %" PRIu32 ", which is %s; keeping it, "
                                    "inactive, until a start finds that CPU.",
                                    req->cookie, req->cpus[i], r == -EHOSTDOWN ? "offline" : "absent");
                        return;
                }
        }
}

int manager_load_state(Manager *m) {
        StateData d;
        int r;

        r = state_dir_prepare(m->state_dir, m->state_owner);
        if (r < 0) {
                log_error("Cannot use state directory %s: %s", m->state_dir, strerror(-r));
                return r;
        }
        r = state_load(m->state_dir, &d);
        if (r < 0) {
                log_error("Cannot load state from %s: %s", m->state_dir, strerror(-r));
                return r;
        }

        /* Originals in the file mean the last run died while constraining CPUs. */
        if (d.n_originals > 0) {
                r = cpu_sink_restore_originals(&m->cpus, d.originals, d.n_originals);
                if (r < 0)
                        log_error("Cannot restore CPU latency values left by the previous run: %s", strerror(-r));
                else
                        log_info("Restored the per-CPU latency values of %zu CPU(s) left by the previous run.",
                                 d.n_originals);
                m->originals_dirty = true;
        }

        int64_t now = now_realtime_usec();
        size_t n_loaded = 0;
        m->admin_floor = d.floor;
        m->floor = manager_floor(m);
        for (size_t i = 0; i < d.n_requests; i++) {
                Request *req = d.requests[i];
                if (req->expires_usec > 0 && req->expires_usec <= now) {
                        m->state_dirty = true;
                        continue; /* ended while we were down */
                }
                mark_if_cpus_gone(m, req);
                if (store_get(&m->store, req->cookie) || store_add(&m->store, req, NULL) < 0)
                        continue;
                d.requests[i] = NULL;
                n_loaded++;
        }
        state_data_done(&d);

        r = manager_commit(m);
        if (r < 0) {
                log_error("Cannot apply the saved latency requests: %s", strerror(-r));
                return r;
        }
        m->latency_changed = m->requests_changed = m->floor_changed = false;
        m->reported_count = store_size(&m->store);
        if (n_loaded > 0 || m->floor >= 0)
                log_info("Loaded %zu persistent request(s) and floor %d from %s.", n_loaded, (int) m->floor,
                         m->state_dir);
        return 0;
}

/* ---- committing ---- */

static void arm_expiry(Manager *m) {
        int64_t next = store_next_expiry(&m->store);
        if (next <= 0) {
                (void) sd_event_source_set_enabled(m->expiry_source, SD_EVENT_OFF);
                return;
        }
        (void) sd_event_source_set_time(m->expiry_source, (uint64_t) next);
        (void) sd_event_source_set_enabled(m->expiry_source, SD_EVENT_ONESHOT);
}

static int commit_cpus(Manager *m) {
        bool remembered = false;
        int r;

        /* Record every original before the first write that would lose it. */
        for (uint32_t cpu = 0; cpu < m->store.n_cpu_heaps; cpu++) {
                int32_t target = effective_latency(store_cpu_min(&m->store, cpu), m->floor);
                if (target >= 0 && !cpu_sink_constrains(&m->cpus, cpu)) {
                        r = cpu_sink_remember(&m->cpus, cpu);
                        if (r < 0)
                                return r;
                        remembered = true;
                }
        }
        if (remembered) {
                m->originals_dirty = true;
                (void) manager_save_state(m);
        }

        for (uint32_t cpu = 0; cpu < m->store.n_cpu_heaps; cpu++) {
                int32_t target = effective_latency(store_cpu_min(&m->store, cpu), m->floor);
                if (target == cpu_sink_written(&m->cpus, cpu))
                        continue;
                r = cpu_sink_write(&m->cpus, cpu, target);
                if (r < 0)
                        return r;
                if (target < 0)
                        m->originals_dirty = true; /* an original went back and is forgotten */
        }
        return 0;
}

int manager_commit(Manager *m) {
        int32_t effective = effective_latency(store_min(&m->store), m->floor);
        int r;

        r = sink_apply(&m->sink, effective);
        if (r < 0)
                return r;
        if (effective != m->effective) {
                m->effective = effective;
                m->latency_changed = true;
        }

        if (m->store.n_cpu_heaps > 0 || m->cpus.n_originals > 0) {
                r = commit_cpus(m);
                if (r < 0)
                        return r;
        }

        arm_expiry(m);
        if (m->state_dirty || m->originals_dirty)
                (void) manager_save_state(m);
        return 0;
}

static int on_expiry(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        int64_t now = now_realtime_usec();
        unsigned n = 0;
        Request *req;

        (void) s, (void) usec;
        while ((req = store_first_expired(&m->store, now))) {
                log_debug("Request %" PRIu32 " reached its deadline.", req->cookie);
                if (req->persistent)
                        m->state_dirty = true;
                store_remove(&m->store, req);
                n++;
        }
        if (n > 0)
                m->requests_changed = true;
        int r = manager_commit(m);
        if (r < 0)
                log_error("Cannot lift expired requests: %s", strerror(-r));
        manager_emit_signals(m);
        return 0;
}

void manager_notify_status(Manager *m) {
        /* Not run by a service manager: not even the formatting. */
        if (!m->notify)
                return;
        if (m->effective >= 0)
                (void) sd_notifyf(false, "STATUS=effective %d µs, %zu request(s)", (int) m->effective,
                                  store_size(&m->store));
        else
                (void) sd_notifyf(false, "STATUS=no bound, %zu request(s)", store_size(&m->store));
}

void manager_emit_signals(Manager *m) {
        size_t count = store_size(&m->store);
        bool count_changed = count != m->reported_count;

        if (!m->latency_changed && !m->requests_changed && !m->floor_changed && !count_changed)
                return;

        int r = bus_upower_emit(m, m->latency_changed, m->requests_changed);
        if (r >= 0)
                r = bus_native_emit(m, m->latency_changed, count_changed, m->floor_changed);
        if (r < 0)
                log_warning("Cannot emit change signals: %s", strerror(-r));
        if (m->latency_changed || count_changed)
                manager_notify_status(m);
        m->reported_count = count;
        m->latency_changed = m->requests_changed = m->floor_changed = false;
}

void manager_set_limits(Manager *m, const Limits *limits, int32_t default_floor) {
        /* Live requests and calls above a new limit stay; only new ones are refused. */
        m->limits = *limits;
        auth_set_max_in_flight(m->auth, limits->max_polkit_in_flight);
        m->default_floor = default_floor;

        int32_t old = m->floor;
        m->floor = manager_floor(m);
        if (m->floor == old)
                return;
        m->floor_changed = true;
        int r = manager_commit(m);
        if (r < 0) {
                log_error("Cannot apply the new default floor: %s", strerror(-r));
                m->floor = old;
                m->floor_changed = false;
                (void) manager_commit(m);
                return;
        }
        manager_emit_signals(m);
}

int manager_attach_bus(Manager *m, sd_bus *bus) {
        m->bus = sd_bus_ref(bus);
        int r = clients_watch(m);
        if (r < 0)
                return r;
        r = bus_upower_add(m);
        if (r < 0)
                return r;
        return bus_native_add(m);
}
