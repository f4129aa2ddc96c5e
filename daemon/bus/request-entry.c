/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One request as ListRequests() and Explain() show it. */

#include "bus/request-entry.h"

#include "model/validate.h"

int bus_append_request(sd_bus_message *reply, const Request *req) {
        int r = sd_bus_message_open_container(reply, 'a', "{sv}");
        if (r < 0)
                return r;
        r = sd_bus_message_append(reply, "{sv}{sv}{sv}{sv}{sv}{sv}{sv}{sv}{sv}{sv}{sv}{sv}{sv}", "cookie", "u",
                                  req->cookie, "type", "s", qos_type_to_string(req->type), "value", "i", req->value,
                                  "uid", "u", (uint32_t) req->uid, "pid", "u", (uint32_t) req->pid, "exec", "s",
                                  request_exec(req), "reason", "s", request_reason(req), "created", "x",
                                  req->created_usec, "persistent", "b", (int) req->persistent, "expires", "x",
                                  req->expires_usec, "sender", "s", request_sender(req), "bound_to", "s",
                                  request_bound_to(req), "target", "s", request_target(req));
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'e', "sv");
        if (r >= 0)
                r = sd_bus_message_append(reply, "s", "cpus");
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'v', "au");
        if (r >= 0)
                r = sd_bus_message_append_array(reply, 'u', req->cpus, req->n_cpus * sizeof(uint32_t));
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_message_close_container(reply);
}
