/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One screen per action. A step that must wait (the caller's identity,
 * polkit's answer) returns 0 and the message comes back; everything before
 * it is simply done again then, against the state of that moment. */

#include "bus/actions.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/log.h"

/* A long timeout outlives its caller as persistence does: it needs what persistence needs. */
const char *request_action(const Manager *m, bool persistent, uint64_t timeout_usec) {
        if (persistent || timeout_usec > (uint64_t) m->limits.max_unprivileged_timeout_sec * 1000000u)
                return ACTION_REQUEST_LATENCY_PERSISTENT;
        return ACTION_REQUEST_LATENCY;
}

int check_request_limits(const Manager *m, const Client *c, sd_bus_error *error) {
        if (c->uid == 0)
                return 0;
        if (c->owner.n_requests >= m->limits.max_per_connection)
                return sd_bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
                                         "This connection already holds %u latency requests, the most one connection "
                                         "may hold.",
                                         c->owner.n_requests);
        unsigned n = store_count_uid(&m->core.store, c->uid);
        if (n >= m->limits.max_per_uid)
                return sd_bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
                                         "User %u already holds %u latency requests, the most one user may hold.",
                                         (unsigned) c->uid, n);
        return 0;
}

/* The core undid the change; the caller hears why. */
int kernel_refused(Manager *m, int r, sd_bus_error *error) {
        char msg[800];
        /* The file that refused: the device, the wakeup device or a CPU's (core_commit()). */
        const char *path = m->core.refused[0] ? m->core.refused : m->core.sink.path;
        snprintf(msg, sizeof(msg), "Cannot write the latency bound to the kernel (%s): %s.", path, strerror(-r));
        log_error("%s", msg);
        return sd_bus_error_set(error, PMQOS_ERROR_FAILED, msg);
}

Request *new_request(Manager *m, const Client *c, const NewRequest *nr) {
        Request *req = request_new(&m->core.store);
        if (!req)
                return NULL;
        req->value = nr->value;
        req->type = nr->type;
        req->uid = c->uid;
        req->pid = c->pid;
        req->persistent = nr->persistent;
        req->created_usec = now_realtime_usec();
        req->expires_usec = nr->timeout_usec > 0 ? req->created_usec + (int64_t) nr->timeout_usec : 0;
        req->exec = shared_string_ref(c->exec);
        req->origin = origin_ref(c->origin);
        if ((nr->reason && nr->reason[0] && !(req->reason = strdup(nr->reason))) ||
            request_set_cpus(req, nr->cpus, nr->n_cpus) < 0)
                return request_free(req);
        return req;
}

int action_request(Manager *m, sd_bus_message *message, const NewRequest *nr, sd_bus_error *error) {
        ChangeSet changes;
        Client *c;
        int r;

        /* 1. Who asks: 0 means the bus is asked, and the message comes back. */
        r = call_know_caller(&m->calls, message, &c, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        /* 2. Limits, before anyone is asked for a password. */
        r = check_request_limits(m, c, error);
        if (r < 0)
                return r;
        /* 3. polkit: 0 means it is asked, and the message comes back with the answer. */
        r = call_authorize(&m->calls, message, c, request_action(m, nr->persistent, nr->timeout_usec), error);
        if (r <= 0)
                return r < 0 ? r : 1;
        /* 4. One transaction. */
        Request *req = new_request(m, c, nr);
        if (!req)
                return -ENOMEM;
        uint32_t cookie = req->cookie;
        r = core_add(&m->core, req, &c->owner, &changes);
        if (r < 0)
                return kernel_refused(m, r, error);
        /* 5. Reply, then signals. */
        r = sd_bus_reply_method_return(message, "u", cookie);
        publish(&m->pub, &changes);
        return r;
}

static bool is_stricter(int32_t value, int32_t old) {
        return value >= 0 && (old < 0 || value < old);
}

/* Another user's request needs cancel-request; making one's own bound
 * stricter is asking anew, authorized like a new request of its kind. */
static const char *change_action(const Manager *m, const Client *c, const Request *req, bool update, int32_t value) {
        if (req->uid != c->uid)
                return ACTION_CANCEL_REQUEST;
        if (update && is_stricter(value, req->value)) {
                int64_t left = req->expires_usec > 0 ? req->expires_usec - now_realtime_usec() : 0;
                return request_action(m, req->persistent, left > 0 ? (uint64_t) left : 0);
        }
        return NULL;
}

static int change_request(Manager *m, sd_bus_message *message, uint32_t cookie, bool update, int32_t value,
                          sd_bus_error *error) {
        ChangeSet changes;
        Client *c;
        int r;

        r = call_know_caller(&m->calls, message, &c, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        Request *req = store_get(&m->core.store, cookie);
        if (!req)
                return sd_bus_error_set(error, PMQOS_ERROR_NO_SUCH_REQUEST, "No latency request has this cookie.");
        const Rule *rule = unit_rules_rule_of(&m->rules, req);
        if (rule)
                /* Not even root: the rule would only take it again. */
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                         "Request %" PRIu32 " is held for the unit rule in %s while %s is active; "
                                         "edit or remove that file, then reload pmqosd.",
                                         cookie, rule->file, rule->unit);
        r = call_authorize(&m->calls, message, c, change_action(m, c, req, update, value), error);
        if (r <= 0)
                return r < 0 ? r : 1;

        r = update ? core_update(&m->core, req, value, c->uid, &changes) : core_cancel(&m->core, req, c->uid, &changes);
        if (r < 0)
                return kernel_refused(m, r, error);
        r = sd_bus_reply_method_return(message, NULL);
        publish(&m->pub, &changes);
        return r;
}

int action_update(Manager *m, sd_bus_message *message, uint32_t cookie, int32_t value, sd_bus_error *error) {
        return change_request(m, message, cookie, true, value, error);
}

int action_cancel(Manager *m, sd_bus_message *message, uint32_t cookie, sd_bus_error *error) {
        return change_request(m, message, cookie, false, PMQOS_LATENCY_NONE, error);
}

int action_set_floor(Manager *m, sd_bus_message *message, int32_t value, sd_bus_error *error) {
        ChangeSet changes;
        Client *c;
        int r;

        r = call_know_caller(&m->calls, message, &c, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        r = call_authorize(&m->calls, message, c, ACTION_SET_MINIMUM_LATENCY, error);
        if (r <= 0)
                return r < 0 ? r : 1;

        r = core_set_floor(&m->core, value, c->uid, &changes);
        if (r < 0)
                return kernel_refused(m, r, error);
        r = sd_bus_reply_method_return(message, NULL);
        publish(&m->pub, &changes);
        return r;
}
