/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The bus front around the core: it learns of departures and deadlines and
 * hands them to the core as transactions, and publishes what changed. */

#include "bus/manager.h"

#include <errno.h>
#include <malloc.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"
#include "util/macro.h"

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

void manager_arm_expiry(Manager *m) {
        int64_t next = core_next_deadline(&m->core);
        if (next <= 0) {
                (void) sd_event_source_set_enabled(m->expiry_source, SD_EVENT_OFF);
                return;
        }
        (void) sd_event_source_set_time(m->expiry_source, (uint64_t) next);
        (void) sd_event_source_set_enabled(m->expiry_source, SD_EVENT_ONESHOT);
}

/* Each STATUS= is a datagram that wakes the service manager (PID 1), and
 * sd_notify() blocks while its queue is full: a broker serving thousands of
 * changes a second tells the first of a burst at once and then at most one
 * a second, each saying what holds at that moment. */
#define STATUS_INTERVAL_USEC (1000u * 1000u)

static void send_status(Manager *m) {
        size_t n = store_size(&m->core.store);
        if (m->core.effective >= 0)
                (void) sd_notifyf(false, "STATUS=effective %d µs, %zu request(s)", (int) m->core.effective, n);
        else
                (void) sd_notifyf(false, "STATUS=no bound, %zu request(s)", n);
        (void) sd_event_now(m->event, CLOCK_MONOTONIC, &m->status_sent_usec);
}

static int on_status_due(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) s, (void) usec;
        send_status(userdata);
        return 0;
}

void manager_notify_status(Manager *m) {
        int enabled = SD_EVENT_OFF;
        uint64_t now;

        /* Not run by a service manager: not even the formatting. */
        if (!m->notify)
                return;
        if (m->status_source && sd_event_source_get_enabled(m->status_source, &enabled) >= 0 && enabled != SD_EVENT_OFF)
                return; /* one is due: it will say what holds then */
        if (m->status_sent_usec == 0 || sd_event_now(m->event, CLOCK_MONOTONIC, &now) < 0 ||
            now >= m->status_sent_usec + STATUS_INTERVAL_USEC) {
                send_status(m);
                return;
        }
        uint64_t due = m->status_sent_usec + STATUS_INTERVAL_USEC;
        int r = m->status_source
                        ? sd_event_source_set_time(m->status_source, due)
                        : sd_event_add_time(m->event, &m->status_source, CLOCK_MONOTONIC, due, 0, on_status_due, m);
        if (r >= 0)
                r = sd_event_source_set_enabled(m->status_source, SD_EVENT_ONESHOT);
        if (r < 0)
                send_status(m); /* no timer: better a datagram too many than a status that lies */
}

/* The change signals are built with sd_bus_message_append_basic(), not
 * sd_bus_emit_signal() and sd_bus_message_append(), whose format strings are
 * parsed anew each time: these run after every change (measured with
 * callgrind: 17.6k → 15.3k instructions a PropertiesChanged). */
static int emit_latency_changed(sd_bus *bus, const char *path, const char *type, int32_t value) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *s = NULL;
        int r = sd_bus_message_new_signal(bus, &s, path, PMQOS_QOS_INTERFACE, "LatencyChanged");
        if (r >= 0)
                r = sd_bus_message_append_basic(s, 's', type);
        if (r >= 0)
                r = sd_bus_message_append_basic(s, 'i', &value);
        return r < 0 ? r : sd_bus_send(bus, s, NULL);
}

static int emit_requests_changed(sd_bus *bus, const char *path) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *s = NULL;
        int r = sd_bus_message_new_signal(bus, &s, path, PMQOS_QOS_INTERFACE, "RequestsChanged");
        return r < 0 ? r : sd_bus_send(bus, s, NULL);
}

static int emit_compat(Manager *m, const ChangeSet *changes) {
        static const char *const paths[] = { PMQOS_OBJECT_PATH, PMQOS_UPOWER_POLICY_PATH };
        int r = 0, k;

        /* From each path, each change yields one signal: UPower-era proxies subscribe per path. */
        for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
                if (changes->latency && (k = emit_latency_changed(m->bus, paths[i], "cpu_dma", m->core.effective)) < 0)
                        r = k;
                if (changes->wakeup &&
                    (k = emit_latency_changed(m->bus, paths[i], "cpu_wakeup", m->core.wakeup_effective)) < 0)
                        r = k;
                if (changes->requests && (k = emit_requests_changed(m->bus, paths[i])) < 0)
                        r = k;
        }
        return r;
}

/* One "{sv}" entry of PropertiesChanged's dictionary. */
static int append_property(sd_bus_message *s, const char *name, char type, const void *value) {
        const char signature[] = { type, 0 };
        int r = sd_bus_message_open_container(s, 'e', "sv");
        if (r >= 0)
                r = sd_bus_message_append_basic(s, 's', name);
        if (r >= 0)
                r = sd_bus_message_open_container(s, 'v', signature);
        if (r >= 0)
                r = sd_bus_message_append_basic(s, type, value);
        if (r >= 0)
                r = sd_bus_message_close_container(s);
        if (r >= 0)
                r = sd_bus_message_close_container(s);
        return r;
}

/* Built here rather than by sd_bus_emit_properties_changed(), which looks
 * every property up in the vtables and calls its getter: the values are at
 * hand. */
static int emit_properties(Manager *m, const ChangeSet *changes) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *s = NULL;
        int r;

        if (!changes->latency && !changes->count && !changes->floor && !changes->battery)
                return 0;
        int32_t effective = m->core.effective, floor = core_floor(&m->core);
        uint32_t count = (uint32_t) store_size(&m->core.store);
        int on_battery = m->core.on_battery;
        r = sd_bus_message_new_signal(m->bus, &s, PMQOS_OBJECT_PATH, "org.freedesktop.DBus.Properties",
                                      "PropertiesChanged");
        if (r >= 0)
                r = sd_bus_message_append_basic(s, 's', PMQOS_NATIVE_INTERFACE);
        if (r >= 0)
                r = sd_bus_message_open_container(s, 'a', "{sv}");
        if (r >= 0 && changes->latency)
                r = append_property(s, "EffectiveLatency", 'i', &effective);
        if (r >= 0 && changes->count)
                r = append_property(s, "RequestCount", 'u', &count);
        if (r >= 0 && changes->floor)
                r = append_property(s, "MinimumLatency", 'i', &floor);
        if (r >= 0 && changes->battery)
                r = append_property(s, "OnBattery", 'b', &on_battery);
        if (r >= 0)
                r = sd_bus_message_close_container(s);
        if (r >= 0)
                r = sd_bus_message_open_container(s, 'a', "s");
        if (r >= 0)
                r = sd_bus_message_close_container(s);
        if (r >= 0)
                r = sd_bus_send(m->bus, s, NULL);
        return r;
}

/* PropertiesChanged and STATUS= say what holds now, not every step: a burst
 * of changes (a thousand clients leaving at once) is told once, when the
 * burst is over — an idle-priority event, run when nothing else is pending.
 * A change with nothing behind it is told at once, without that extra turn
 * of the event loop. */
/* glibc keeps what a burst freed (a thousand clients of ten requests each
 * leaving left 2 MiB resident): once at least TRIM_MIN_FREED of what is
 * tracked (requests and clients) went since its peak, and no fewer than are
 * left, the free memory goes back to the kernel — a handful of times for a
 * burst of any size. After a change, never on a timer. */
#define TRIM_MIN_FREED 64u

static void give_back_memory(Manager *m) {
        size_t n = store_size(&m->core.store) + hashmap_size(&m->clients.by_name);
        if (n > m->trim_high)
                m->trim_high = n;
        else if (m->trim_high - n >= TRIM_MIN_FREED && m->trim_high - n >= n) {
                (void) malloc_trim(0);
                m->trim_high = n;
        }
}

static int on_publish(sd_event_source *s, void *userdata) {
        Manager *m = userdata;
        ChangeSet c = m->pending;

        (void) s;
        m->pending = (ChangeSet){};
        (void) sd_event_source_set_enabled(m->publish_source, SD_EVENT_OFF);
        int r = emit_properties(m, &c);
        if (r < 0)
                log_warning("Cannot emit PropertiesChanged: %s", strerror(-r));
        if (c.latency || c.count)
                manager_notify_status(m);
        if (c.count)
                give_back_memory(m);
        return 0;
}

/* Whether more messages wait in the bus connection's socket: then this
 * change is one of a burst. */
static bool bus_input_waiting(sd_bus *bus) {
        int fd = sd_bus_get_fd(bus), n = 0;
        return fd >= 0 && ioctl(fd, FIONREAD, &n) >= 0 && n > 0;
}

/* LatencyChanged and RequestsChanged: one per change, as the contract says. */
static void publish_now(Manager *m, const ChangeSet *changes) {
        if (!m->bus)
                return;
        int r = emit_compat(m, changes);
        if (r < 0)
                log_warning("Cannot emit change signals: %s", strerror(-r));
}

/* The rest of a change: the expiry timer, and what is told once a burst is over. */
static void publish_rest(Manager *m, const ChangeSet *changes) {
        if (changes->requests)
                manager_arm_expiry(m);
        if (!m->bus)
                return;
        m->pending.latency |= changes->latency;
        m->pending.count |= changes->count;
        m->pending.floor |= changes->floor;
        m->pending.battery |= changes->battery;
        if (!m->pending.latency && !m->pending.count && !m->pending.floor && !m->pending.battery)
                return;
        if (bus_input_waiting(m->bus))
                (void) sd_event_source_set_enabled(m->publish_source, SD_EVENT_ONESHOT);
        else
                (void) on_publish(m->publish_source, m);
}

void manager_publish(Manager *m, const ChangeSet *changes) {
        publish_now(m, changes);
        publish_rest(m, changes);
}

static int on_expiry(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        ChangeSet changes;

        (void) s, (void) usec;
        int r = core_expire(&m->core, now_realtime_usec(), &changes);
        if (r < 0)
                log_error("Cannot lift expired requests: %s", strerror(-r));
        manager_publish(m, &changes);
        manager_arm_expiry(m);
        return 0;
}

/* A departure of this many requests lets the woken peers run before its bookkeeping. */
#define DEPARTURE_YIELD_MIN 64u

/* A client left: its dying requests go in one transaction, one signal. */
static void on_departed(Client *c, void *userdata) {
        Manager *m = userdata;
        ChangeSet changes;

        if (c->owner.n_requests == 0)
                return;
        unsigned n = c->owner.n_requests;
        /* The kernel and LatencyChanged first: whoever waits for the bound to
         * lift hears it before the bookkeeping of a thousand requests. */
        int r = core_drop_owner(&m->core, &c->owner, &changes);
        if (r < 0)
                log_error("Cannot lift the requests of %s from %s: %s", c->name, m->core.sink.path, strerror(-r));
        publish_now(m, &changes);
        /* That bookkeeping takes a few hundred µs for a thousand requests; the
         * bus, and whoever waits for LatencyChanged, were just woken and run
         * first where they share this CPU (measured: vanish p50 1.08 → 0.86 ms
         * on two cores). Once per large departure, never in a loop. */
        if (n >= DEPARTURE_YIELD_MIN)
                (void) sched_yield();
        core_drop_owner_finish(&m->core, &c->owner);
        publish_rest(m, &changes);
        log_debug("%s left the bus; %u request(s) released or detached.", c->name, n);
}

int manager_new(Manager **ret, sd_event *event, const ManagerConfig *config) {
        CoreConfig core = config->core;
        int r;

        Manager *m = calloc(1, sizeof(Manager));
        if (!m)
                return -ENOMEM;
        m->event = sd_event_ref(event);
        m->explainer.helper_fd = -1; /* before anything can fail: manager_free() looks at it */
        m->limits = config->limits;
        m->notify = getenv("NOTIFY_SOCKET") != NULL;
        clients_init(&m->clients, m->limits.max_clients, on_departed, m);

        core.seed = random_seed();
        r = core_init(&m->core, &core);
        if (r < 0) {
                manager_free(m);
                return r;
        }
        /* Before any thread exists (polkit's) and while root: the helper is a fork. */
        (void) explainer_start_helper(m, config->helper_uid, config->helper_gid);
        r = sd_event_add_time(event, &m->expiry_source, CLOCK_REALTIME, UINT64_MAX, 1000, on_expiry, m);
        if (r >= 0)
                r = sd_event_source_set_enabled(m->expiry_source, SD_EVENT_OFF);
        if (r >= 0)
                r = sd_event_add_defer(event, &m->publish_source, on_publish, m);
        if (r >= 0)
                r = sd_event_source_set_priority(m->publish_source, SD_EVENT_PRIORITY_IDLE);
        if (r >= 0)
                r = sd_event_source_set_enabled(m->publish_source, SD_EVENT_OFF);
        if (r >= 0)
                r = explainer_attach_event(m);
        if (r >= 0)
                r = auth_new(&m->auth, event, m->limits.max_polkit_in_flight);
        if (r < 0) {
                log_error("Cannot set up the event loop: %s", strerror(-r));
                manager_free(m);
                return r;
        }
        calls_init(&m->calls, &m->clients, m->auth, &m->limits);

        /* The kernel gets the loaded bounds in manager_start(), once the
         * previous run's owners are known: one write, no gap between. */
        r = core_load(&m->core, now_realtime_usec());
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
        /* Calls first (they point at clients and polkit queries), then the
         * requests, then the clients that owned them. */
        if (m->auth)
                calls_done(&m->calls);
        explainer_done(&m->explainer);
        manager_rules_done(m); /* the rules' requests go with the core */
        core_done(&m->core);
        clients_done(&m->clients);
        auth_free(m->auth);
        sd_event_source_disable_unref(m->expiry_source);
        sd_event_source_disable_unref(m->publish_source);
        sd_event_source_disable_unref(m->status_source);
        for (size_t i = 0; i < ELEMENTSOF(m->battery_slots); i++)
                sd_bus_slot_unref(m->battery_slots[i]);
        free(m->upower_owner);
        sd_bus_unref(m->bus);
        sd_event_unref(m->event);
        free(m);
        return NULL;
}

int manager_attach_bus(Manager *m, sd_bus *bus) {
        m->bus = sd_bus_ref(bus);
        calls_attach_bus(&m->calls, bus);
        return clients_watch(&m->clients, bus);
}

void manager_set_limits(Manager *m, const Limits *limits, int32_t default_floor, int32_t battery_floor) {
        ChangeSet changes;

        /* Live requests and calls above a new limit stay; only new ones are refused. */
        m->limits = *limits;
        m->clients.max = limits->max_clients;
        auth_set_max_in_flight(m->auth, limits->max_polkit_in_flight);
        int r = core_set_default_floor(&m->core, default_floor, &changes);
        if (r < 0)
                log_error("Cannot apply the new default floor: %s", strerror(-r));
        manager_publish(m, &changes);
        r = core_set_battery(&m->core, m->core.on_battery, battery_floor, &changes);
        if (r < 0)
                log_error("Cannot apply the new battery floor: %s", strerror(-r));
        manager_publish(m, &changes);
}
