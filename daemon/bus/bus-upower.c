/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* org.freedesktop.UPower.QoS, signature for signature what UPower exported
 * until 2013, at both object paths. Handlers read and validate arguments,
 * then hand the change to actions.c; reads are answered at once. */

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bus/bus.h"
#include "bus/actions.h"
#include "model/validate.h"

int bus_reply_validation_error(sd_bus_error *error, const ValidationError *v) {
        return sd_bus_error_set(error, v->name, v->message);
}

static int method_request_latency(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        CALL_SCOPE(m, message);
        const char *type;
        int32_t value;
        int persistent;
        QosType t;
        ValidationError v;
        int r;

        r = sd_bus_message_read(message, "sib", &type, &value, &persistent);
        if (r < 0)
                return r;
        if (bus_parse_type(m, type, &t, &v) < 0 || check_latency_value(value, &v) < 0)
                return bus_reply_validation_error(error, &v);
        return action_request(m, message, &(NewRequest){ .type = t, .value = value, .persistent = persistent }, error);
}

int bus_method_cancel(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        CALL_SCOPE(m, message);
        uint32_t cookie;
        int r;

        r = sd_bus_message_read(message, "u", &cookie);
        if (r < 0)
                return r;
        return action_cancel(m, message, cookie, error);
}

/* CancelRequest(s type, u cookie): the shape UPower had before 0.9.17, which
 * bindings generated from that XML (OCaml obus, Deepin's Go) still send.
 * sd-bus dispatches by member name and refuses any body but the vtable's
 * "u", so this filter sees the old shape first; introspection keeps
 * showing "u". The type must be the request's. */
int bus_upower_old_cancel_filter(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        const char *type, *path = sd_bus_message_get_path(message);
        uint32_t cookie;
        QosType t;
        ValidationError v;
        int r;

        if (!sd_bus_message_is_method_call(message, PMQOS_QOS_INTERFACE, "CancelRequest") ||
            !sd_bus_message_has_signature(message, "su") || !path ||
            (strcmp(path, PMQOS_OBJECT_PATH) != 0 && strcmp(path, PMQOS_UPOWER_POLICY_PATH) != 0))
                return 0;

        CALL_SCOPE(m, message);
        r = sd_bus_message_read(message, "su", &type, &cookie);
        if (r < 0)
                return r;
        if (bus_parse_type(m, type, &t, &v) < 0)
                return bus_reply_validation_error(error, &v);
        const Request *req = store_get(&m->core.store, cookie);
        if (req && req->type != t)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Request %" PRIu32 " is of type %s, not %s.",
                                         cookie, qos_type_to_string(req->type), type);
        r = action_cancel(m, message, cookie, error);
        return r < 0 ? r : 1;
}

static int method_get_latency(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        const char *type;
        QosType t;
        ValidationError v;
        int r;

        r = sd_bus_message_read(message, "s", &type);
        if (r < 0)
                return r;
        if (bus_parse_type(m, type, &t, &v) < 0)
                return bus_reply_validation_error(error, &v);
        return sd_bus_reply_method_return(message, "i",
                                          t == QOS_TYPE_CPU_WAKEUP ? m->core.wakeup_effective : m->core.effective);
}

static int method_get_latency_requests(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        (void) error;
        r = sd_bus_message_new_method_return(message, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "(uuusxbssi)");
        if (r < 0)
                return r;
        STORE_FOREACH(req, &m->core.store) {
                r = sd_bus_message_append(reply, "(uuusxbssi)", req->cookie, (uint32_t) req->uid, (uint32_t) req->pid,
                                          request_exec(req), req->created_usec / 1000000, (int) req->persistent,
                                          qos_type_to_string(req->type), request_reason(req), req->value);
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_set_minimum_latency(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        CALL_SCOPE(m, message);
        const char *type;
        int32_t value;
        QosType t;
        ValidationError v;
        int r;

        r = sd_bus_message_read(message, "si", &type, &value);
        if (r < 0)
                return r;
        if (bus_parse_type(m, type, &t, &v) < 0 || check_latency_value(value, &v) < 0)
                return bus_reply_validation_error(error, &v);
        return action_set_floor(m, message, value, error);
}

const sd_bus_vtable bus_upower_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD_WITH_ARGS("RequestLatency", SD_BUS_ARGS("s", type, "i", value, "b", persistent),
                                SD_BUS_RESULT("u", cookie), method_request_latency, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("CancelRequest", SD_BUS_ARGS("u", cookie), SD_BUS_NO_RESULT, bus_method_cancel,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetLatency", SD_BUS_ARGS("s", type), SD_BUS_RESULT("i", value), method_get_latency,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetLatencyRequests", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(uuusxbssi)", requests),
                                method_get_latency_requests, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("SetMinimumLatency", SD_BUS_ARGS("s", type, "i", value), SD_BUS_NO_RESULT,
                                method_set_minimum_latency, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_SIGNAL_WITH_ARGS("LatencyChanged", SD_BUS_ARGS("s", type, "i", value), 0),
        SD_BUS_SIGNAL("RequestsChanged", NULL, 0),
        SD_BUS_VTABLE_END,
};
