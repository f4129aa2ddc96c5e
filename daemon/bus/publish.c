/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The one emitter: what a transaction changed (a ChangeSet) made known as
 * signals and as the service manager's STATUS=, and the one deadline timer
 * that follows the requests. Every feature hands its changes here. */

#include "bus/publish.h"

#include <assert.h>
#include <errno.h>
#include <malloc.h>
#include <string.h>
#include <sys/ioctl.h>
#include <systemd/sd-daemon.h>

#include "dbus/contract.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/macro.h"

void publish_arm_expiry(Publisher *p) {
        int64_t next = core_next_deadline(p->core);
        if (next <= 0) {
                (void) sd_event_source_set_enabled(p->expiry_source, SD_EVENT_OFF);
                return;
        }
        (void) sd_event_source_set_time(p->expiry_source, (uint64_t) next);
        (void) sd_event_source_set_enabled(p->expiry_source, SD_EVENT_ONESHOT);
}

/* Each STATUS= is a datagram that wakes the service manager (PID 1), and
 * sd_notify() blocks while its queue is full: a broker serving thousands of
 * changes a second tells the first of a burst at once and then at most one
 * a second, each saying what holds at that moment. */
#define STATUS_INTERVAL_USEC (1000u * 1000u)

static void send_status(Publisher *p) {
        size_t n = store_size(&p->core->store);
        if (p->core->effective >= 0)
                (void) sd_notifyf(false, "STATUS=effective %d µs, %zu request(s)", (int) p->core->effective, n);
        else
                (void) sd_notifyf(false, "STATUS=no bound, %zu request(s)", n);
        (void) sd_event_now(p->event, CLOCK_MONOTONIC, &p->status_sent_usec);
}

static int on_status_due(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) s, (void) usec;
        send_status(userdata);
        return 0;
}

void publish_status(Publisher *p) {
        int enabled = SD_EVENT_OFF;
        uint64_t now;

        /* Not run by a service manager: not even the formatting. */
        if (!p->notify)
                return;
        if (p->status_source && sd_event_source_get_enabled(p->status_source, &enabled) >= 0 && enabled != SD_EVENT_OFF)
                return; /* one is due: it will say what holds then */
        if (p->status_sent_usec == 0 || sd_event_now(p->event, CLOCK_MONOTONIC, &now) < 0 ||
            now >= p->status_sent_usec + STATUS_INTERVAL_USEC) {
                send_status(p);
                return;
        }
        uint64_t due = p->status_sent_usec + STATUS_INTERVAL_USEC;
        int r = p->status_source
                        ? sd_event_source_set_time(p->status_source, due)
                        : sd_event_add_time(p->event, &p->status_source, CLOCK_MONOTONIC, due, 0, on_status_due, p);
        if (r >= 0)
                r = sd_event_source_set_enabled(p->status_source, SD_EVENT_ONESHOT);
        if (r < 0)
                send_status(p); /* no timer: better a datagram too many than a status that lies */
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

static int emit_compat(Publisher *p, const ChangeSet *changes) {
        static const char *const paths[] = { PMQOS_OBJECT_PATH, PMQOS_UPOWER_POLICY_PATH };
        int r = 0, k;

        /* From each path, each change yields one signal: UPower-era proxies subscribe per path. */
        for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
                if (changes->latency && (k = emit_latency_changed(p->bus, paths[i], "cpu_dma", p->core->effective)) < 0)
                        r = k;
                if (changes->wakeup &&
                    (k = emit_latency_changed(p->bus, paths[i], "cpu_wakeup", p->core->wakeup_effective)) < 0)
                        r = k;
                if (changes->requests && (k = emit_requests_changed(p->bus, paths[i])) < 0)
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
static int emit_properties(Publisher *p, const ChangeSet *changes) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *s = NULL;
        int r;

        if (!changes->latency && !changes->count && !changes->floor && !changes->battery)
                return 0;
        int32_t effective = p->core->effective, floor = core_floor(p->core);
        uint32_t count = (uint32_t) store_size(&p->core->store);
        int on_battery = p->core->on_battery;
        r = sd_bus_message_new_signal(p->bus, &s, PMQOS_OBJECT_PATH, "org.freedesktop.DBus.Properties",
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
                r = sd_bus_send(p->bus, s, NULL);
        return r;
}

/* glibc keeps what a burst freed (a thousand clients of ten requests each
 * leaving left 2 MiB resident): once at least TRIM_MIN_FREED of what is
 * tracked (requests and clients) went since its peak, and no fewer than are
 * left, the free memory goes back to the kernel — a handful of times for a
 * burst of any size. After a change, never on a timer. */
#define TRIM_MIN_FREED 64u

static void give_back_memory(Publisher *p) {
        size_t n = store_size(&p->core->store) + hashmap_size(&p->clients->by_name);
        if (n > p->trim_high)
                p->trim_high = n;
        else if (p->trim_high - n >= TRIM_MIN_FREED && p->trim_high - n >= n) {
                (void) malloc_trim(0);
                p->trim_high = n;
        }
}

static int on_publish(sd_event_source *s, void *userdata) {
        Publisher *p = userdata;
        ChangeSet c = p->pending;

        (void) s;
        p->pending = (ChangeSet){};
        (void) sd_event_source_set_enabled(p->publish_source, SD_EVENT_OFF);
        int r = emit_properties(p, &c);
        if (r < 0)
                log_warning_errno(r, "Cannot emit PropertiesChanged: %m");
        if (c.latency || c.count)
                publish_status(p);
        if (c.count)
                give_back_memory(p);
        return 0;
}

/* Whether more messages wait in the bus connection's socket: then this
 * change is one of a burst. */
static bool bus_input_waiting(const Publisher *p) {
        int fd = sd_bus_get_fd(p->bus), n = 0;
        if (fd < 0)
                return bus_gate_input_waiting(p->gate);
        return ioctl(fd, FIONREAD, &n) >= 0 && n > 0;
}

/* LatencyChanged and RequestsChanged: one per change, as the contract says. */
void publish_now(Publisher *p, const ChangeSet *changes) {
        assert(p && changes);
        if (!p->bus)
                return;
        int r = emit_compat(p, changes);
        if (r < 0)
                log_warning_errno(r, "Cannot emit change signals: %m");
}

/* The rest of a change: the expiry timer, and what is told once a burst is over.
 *
 * PropertiesChanged and STATUS= say what holds now, not every step: a burst
 * of changes (a thousand clients leaving at once) is told once, when the
 * burst is over — an idle-priority event, run when nothing else is pending.
 * A change with nothing behind it is told at once, without that extra turn
 * of the event loop. */
void publish_rest(Publisher *p, const ChangeSet *changes) {
        assert(p && changes);
        if (changes->requests)
                publish_arm_expiry(p);
        if (!p->bus)
                return;
        p->pending.latency |= changes->latency;
        p->pending.count |= changes->count;
        p->pending.floor |= changes->floor;
        p->pending.battery |= changes->battery;
        if (!p->pending.latency && !p->pending.count && !p->pending.floor && !p->pending.battery)
                return;
        if (bus_input_waiting(p))
                (void) sd_event_source_set_enabled(p->publish_source, SD_EVENT_ONESHOT);
        else
                (void) on_publish(p->publish_source, p);
}

void publish(Publisher *p, const ChangeSet *changes) {
        publish_now(p, changes);
        publish_rest(p, changes);
}

static int on_expiry(sd_event_source *s, uint64_t usec, void *userdata) {
        Publisher *p = userdata;
        ChangeSet changes;

        (void) s, (void) usec;
        int r = core_expire(p->core, now_realtime_usec(), &changes);
        if (r < 0)
                log_error_errno(r, "Cannot lift expired requests: %m");
        publish(p, &changes);
        publish_arm_expiry(p);
        return 0;
}

int publisher_init(Publisher *p, sd_event *event, Core *core, const Clients *clients) {
        assert(p && event && core && clients);
        *p = (Publisher){ .event = sd_event_ref(event), .core = core, .clients = clients };
        p->notify = getenv("NOTIFY_SOCKET") != NULL;
        int r = sd_event_add_time(event, &p->expiry_source, CLOCK_REALTIME, UINT64_MAX, 1000, on_expiry, p);
        if (r >= 0)
                r = sd_event_source_set_enabled(p->expiry_source, SD_EVENT_OFF);
        if (r >= 0)
                r = sd_event_add_defer(event, &p->publish_source, on_publish, p);
        if (r >= 0)
                r = sd_event_source_set_priority(p->publish_source, SD_EVENT_PRIORITY_IDLE);
        if (r >= 0)
                r = sd_event_source_set_enabled(p->publish_source, SD_EVENT_OFF);
        return r;
}

void publisher_attach_bus(Publisher *p, sd_bus *bus) {
        p->bus = sd_bus_ref(bus);
}

void publisher_done(Publisher *p) {
        sd_event_source_disable_unref(p->expiry_source);
        sd_event_source_disable_unref(p->publish_source);
        sd_event_source_disable_unref(p->status_source);
        sd_bus_unref(p->bus);
        sd_event_unref(p->event);
        *p = (Publisher){};
}
