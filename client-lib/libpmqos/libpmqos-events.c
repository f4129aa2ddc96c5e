/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Change notifications and event-loop integration: the broker's signals as
 * callbacks, and the client's descriptor for the application's own loop. */

#include <errno.h>

#include "libpmqos-thread.h"

static int on_latency_changed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        pmqos_client *c = userdata;
        const char *type;
        int32_t value;

        (void) error;
        if (client_from_broker(c, m) && sd_bus_message_has_signature(m, "si") &&
            sd_bus_message_read(m, "si", &type, &value) >= 0)
                client_emit(c, PMQOS_EVENT_LATENCY_CHANGED, value);
        return 0;
}

static int on_requests_changed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        (void) error;
        if (client_from_broker(userdata, m))
                client_emit(userdata, PMQOS_EVENT_REQUESTS_CHANGED, PMQOS_LATENCY_NONE);
        return 0;
}

/* Handles what arrived while the caller was busy (a restart, above all). */
_public_ int pmqos_client_set_event_callback(pmqos_client *c, pmqos_event_callback callback, void *userdata) {
        int r;

        if (!c)
                return -EINVAL;
        CLIENT_SCOPE(c);
        c->callback = callback;
        c->userdata = userdata;
        if (callback && !c->latency_slot) {
                r = sd_bus_match_signal(c->bus, &c->latency_slot, BUS_NAME, OBJECT_PATH, QOS_IFACE, "LatencyChanged",
                                        on_latency_changed, c);
                if (r >= 0)
                        r = sd_bus_match_signal(c->bus, &c->requests_slot, BUS_NAME, OBJECT_PATH, QOS_IFACE,
                                                "RequestsChanged", on_requests_changed, c);
                if (r < 0) {
                        c->latency_slot = sd_bus_slot_unref(c->latency_slot);
                        return client_map_error(c, NULL, r);
                }
        } else if (!callback) {
                c->latency_slot = sd_bus_slot_unref(c->latency_slot);
                c->requests_slot = sd_bus_slot_unref(c->requests_slot);
        }
        return 0;
}

/* The application polls the fd from now on: the helper thread is not needed. */
_public_ int pmqos_client_get_fd(pmqos_client *c) {
        if (!c)
                return -EINVAL;
        CLIENT_SCOPE(c);
        c->integrated = true;
        client_helper_stop(c, false);
        return sd_bus_get_fd(c->bus);
}

_public_ int pmqos_client_get_events(pmqos_client *c) {
        if (!c)
                return -EINVAL;
        CLIENT_SCOPE(c);
        return sd_bus_get_events(c->bus);
}

_public_ int pmqos_client_process(pmqos_client *c) {
        if (!c)
                return -EINVAL;
        CLIENT_SCOPE(c);
        return client_dispatch(c);
}

_public_ int pmqos_client_wait(pmqos_client *c, uint64_t timeout_usec) {
        CLIENT_ENTER(c, false);
        int r = sd_bus_wait(c->bus, timeout_usec);
        if (r < 0)
                return client_map_error(c, NULL, r);
        return client_dispatch(c);
}
