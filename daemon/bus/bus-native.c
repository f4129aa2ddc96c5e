/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* org.freedesktop.PMQoS at /org/freedesktop/PMQoS: requests with options,
 * in-place updates, full listings and properties. Same core and same
 * actions as the UPower view, so the two always agree. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bus/actions.h"
#include "bus/bus.h"
#include "bus/ledger-reply.h"
#include "bus/request-entry.h"
#include "bus/request-options.h"
#include "model/store-page.h"
#include "model/validate.h"
#include "sys/cpu-sink.h"

static int check_cpus_exist(Manager *m, const RequestOptions *o, sd_bus_error *error) {
        for (size_t i = 0; i < o->n_cpus; i++) {
                int r = cpu_sink_check_cpu(&m->core.cpus, o->cpus[i]);
                if (r == -EHOSTDOWN)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "CPU %" PRIu32 " is offline; bring it online or leave it out.",
                                                 o->cpus[i]);
                if (r < 0)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "There is no CPU %" PRIu32 " with a latency bound on this machine.",
                                                 o->cpus[i]);
        }
        return 0;
}

/* The options of Request, Hold and RequestFor, read and checked into *nr
 * (its strings and CPUs are o's). Returns 0, or what the handler returns. */
static int read_new_request(Manager *m, sd_bus_message *message, const char *type, int32_t value, bool held,
                            RequestOptions *o, NewRequest *nr, sd_bus_error *error) {
        QosType t;
        ValidationError v = {};
        int r;

        if (bus_parse_type(m, type, &t, &v) < 0 || check_latency_value(value, &v) < 0)
                return bus_reply_validation_error(error, &v);
        r = parse_request_options(message, m->limits.max_timeout_sec, o, &v);
        if (r < 0)
                return v.name ? bus_reply_validation_error(error, &v) : r;
        if (held && o->persistent)
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS,
                                        "A request bound to a descriptor, process or cgroup cannot be persistent: "
                                        "it ends with what it is bound to.");
        if (t == QOS_TYPE_CPU_WAKEUP && o->n_cpus > 0)
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS,
                                        "The cpus option is for cpu_dma: cpu_wakeup is one bound for the whole "
                                        "machine.");
        r = check_cpus_exist(m, o, error);
        if (r < 0)
                return r;
        *nr = (NewRequest){ .type = t,
                            .value = value,
                            .persistent = o->persistent,
                            .timeout_usec = (uint64_t) o->timeout_sec * 1000000u,
                            .reason = o->reason,
                            .cpus = o->cpus,
                            .n_cpus = o->n_cpus };
        return 0;
}

static int method_request(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        CALL_SCOPE(m, message);
        _cleanup_(request_options_done) RequestOptions o = {};
        const char *type;
        int32_t value;
        NewRequest nr;
        int r;

        r = sd_bus_message_read(message, "si", &type, &value);
        if (r >= 0)
                r = read_new_request(m, message, type, value, false, &o, &nr, error);
        return r < 0 ? r : action_request(m, message, &nr, error);
}

static int method_hold(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        CALL_SCOPE(m, message);
        _cleanup_(request_options_done) RequestOptions o = {};
        const char *type;
        int32_t value;
        NewRequest nr;
        int r;

        r = sd_bus_message_read(message, "si", &type, &value);
        if (r >= 0)
                r = read_new_request(m, message, type, value, true, &o, &nr, error);
        return r < 0 ? r : action_hold(m, message, &nr, error);
}

static int method_request_for(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        CALL_SCOPE(m, message);
        _cleanup_(request_options_done) RequestOptions o = {};
        const char *type;
        int32_t value;
        int target;
        NewRequest nr;
        int r;

        r = sd_bus_message_read(message, "sih", &type, &value, &target);
        if (r >= 0)
                r = read_new_request(m, message, type, value, true, &o, &nr, error);
        return r < 0 ? r : action_request_for(m, message, &nr, target, error);
}

static int method_update(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        CALL_SCOPE(m, message);
        uint32_t cookie;
        int32_t value;
        ValidationError v;
        int r;

        r = sd_bus_message_read(message, "ui", &cookie, &value);
        if (r < 0)
                return r;
        if (check_latency_value(value, &v) < 0)
                return bus_reply_validation_error(error, &v);
        return action_update(m, message, cookie, value, error);
}

/* Explain() and ExplainFolded() (identical CPUs in one entry): answered by
 * the explainer's next round, with every call of either. */
static int queue_explain(sd_bus_message *message, Manager *m, bool folded, sd_bus_error *error) {
        CALL_SCOPE(m, message);
        Client *c;

        int r = call_know_caller(&m->calls, message, &c, error);
        if (r <= 0)
                return r < 0 ? r : 1; /* 0: the bus tells who it is, and this runs again */
        return explainer_queue(&m->explainer, message, c->uid, folded, error);
}

static int method_explain(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        return queue_explain(message, userdata, false, error);
}

static int method_explain_folded(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        return queue_explain(message, userdata, true, error);
}

static int method_list_requests(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        (void) error;
        r = sd_bus_message_new_method_return(message, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "a{sv}");
        if (r < 0)
                return r;
        STORE_FOREACH(req, &m->core.store) {
                r = bus_append_request(reply, req);
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

/* ListRequestsPage(after, max): the next page of ListRequests() in cookie
 * order, so that no reply has to hold the whole store. */
static int method_list_requests_page(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const Request *page[STORE_PAGE_MAX];
        uint32_t after, max, next;
        size_t n;
        int r;

        (void) error;
        r = sd_bus_message_read(message, "uu", &after, &max);
        if (r < 0)
                return r;
        store_page(&m->core.store, after, store_page_size(max), page, &n, &next);
        r = sd_bus_message_new_method_return(message, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "a{sv}");
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = bus_append_request(reply, page[i]);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = sd_bus_message_append(reply, "u", next);
        return r < 0 ? r : sd_bus_send(NULL, reply, NULL);
}

static int property_get_effective(sd_bus *bus, const char *path, const char *interface, const char *property,
                                  sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        return sd_bus_message_append(reply, "i", m->core.effective);
}

static int property_get_kernel(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        int32_t v;
        int r = sink_read(&m->core.sink, &v);
        if (r < 0)
                return sd_bus_error_setf(error, PMQOS_ERROR_FAILED, "Cannot read %s: %s.", m->core.sink.path,
                                         strerror(-r));
        return sd_bus_message_append(reply, "i", v);
}

static int property_get_minimum(sd_bus *bus, const char *path, const char *interface, const char *property,
                                sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        return sd_bus_message_append(reply, "i", core_floor(&m->core));
}

static int property_get_count(sd_bus *bus, const char *path, const char *interface, const char *property,
                              sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        return sd_bus_message_append(reply, "u", (uint32_t) store_size(&m->core.store));
}

/* Not reached: bus_native_properties_filter() takes every Set of
 * MinimumLatency, because a setter must answer at once and polkit may make
 * it wait. Should a Set slip past the filter, it is refused, not applied. */
static int property_set_minimum(sd_bus *bus, const char *path, const char *interface, const char *property,
                                sd_bus_message *value, void *userdata, sd_bus_error *error) {
        return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED, "Not authorized to set the minimum latency.");
}

/* Properties.Set of MinimumLatency takes the path of SetMinimumLatency
 * (authorization may have to wait, which a property setter cannot): this
 * filter sees it first. Every other message passes through untouched. */
int bus_native_properties_filter(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        const char *interface, *property, *contents;
        int32_t value;
        ValidationError v;
        int r;

        if (!sd_bus_message_is_method_call(message, "org.freedesktop.DBus.Properties", "Set") ||
            !sd_bus_message_get_path(message) || strcmp(sd_bus_message_get_path(message), PMQOS_OBJECT_PATH) != 0)
                return 0;
        /* Filters run before sd-bus checks the body against the method's
         * signature: any other shape is sd-bus's to refuse. */
        if (!sd_bus_message_has_signature(message, "ssv"))
                return 0;
        if (sd_bus_message_read(message, "ss", &interface, &property) < 0 ||
            strcmp(interface, PMQOS_NATIVE_INTERFACE) != 0 || strcmp(property, "MinimumLatency") != 0) {
                (void) sd_bus_message_rewind(message, true);
                return 0;
        }

        CALL_SCOPE(m, message);
        r = sd_bus_message_peek_type(message, NULL, &contents);
        if (r < 0 || strcmp(contents, "i") != 0)
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS,
                                        "MinimumLatency is of type 'i' (µs, or -1 for none).");
        r = sd_bus_message_read(message, "v", "i", &value);
        if (r < 0)
                return r;
        if (check_latency_value(value, &v) < 0)
                return bus_reply_validation_error(error, &v);
        r = action_set_floor(m, message, value, error);
        return r < 0 ? r : 1;
}

static int property_get_on_battery(sd_bus *bus, const char *path, const char *interface, const char *property,
                                   sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        const Manager *m = userdata;
        return sd_bus_message_append(reply, "b", (int) m->core.on_battery);
}

static int property_get_version(sd_bus *bus, const char *path, const char *interface, const char *property,
                                sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return sd_bus_message_append(reply, "s", PMQOS_VERSION);
}

const sd_bus_vtable bus_native_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD_WITH_ARGS("Request", SD_BUS_ARGS("s", type, "i", value, "a{sv}", options),
                                SD_BUS_RESULT("u", cookie), method_request, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Hold", SD_BUS_ARGS("s", type, "i", value, "a{sv}", options),
                                SD_BUS_RESULT("u", cookie, "h", fd), method_hold, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("RequestFor", SD_BUS_ARGS("s", type, "i", value, "h", target, "a{sv}", options),
                                SD_BUS_RESULT("u", cookie), method_request_for, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Update", SD_BUS_ARGS("u", cookie, "i", value), SD_BUS_NO_RESULT, method_update,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Cancel", SD_BUS_ARGS("u", cookie), SD_BUS_NO_RESULT, bus_method_cancel,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListRequests", SD_BUS_NO_ARGS, SD_BUS_RESULT("aa{sv}", requests), method_list_requests,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Explain", SD_BUS_NO_ARGS, SD_BUS_RESULT("a{sv}", explanation), method_explain,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ExplainFolded", SD_BUS_NO_ARGS, SD_BUS_RESULT("a{sv}", explanation),
                                method_explain_folded, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Ledger", SD_BUS_NO_ARGS, SD_BUS_RESULT("aa{sv}", rows), bus_method_ledger,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListRequestsPage", SD_BUS_ARGS("u", after, "u", max),
                                SD_BUS_RESULT("aa{sv}", requests, "u", next), method_list_requests_page,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_PROPERTY("EffectiveLatency", "i", property_get_effective, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("KernelLatency", "i", property_get_kernel, 0, 0),
        SD_BUS_WRITABLE_PROPERTY("MinimumLatency", "i", property_get_minimum, property_set_minimum, 0,
                                 SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE | SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_PROPERTY("RequestCount", "u", property_get_count, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Version", "s", property_get_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("OnBattery", "b", property_get_on_battery, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_VTABLE_END,
};
