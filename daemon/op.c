/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Every change of the request set or the floor goes through here, whichever
 * interface it came from, so both views stay the same store and follow the
 * same rules: validate (the caller did) → authorize → act → reply → signal. */

#include "op.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "util.h"
#include "validate.h"

Op *op_new(Manager *m, sd_bus_message *message, OpKind kind) {
        Op *op = calloc(1, sizeof(Op));
        if (!op)
                return NULL;
        op->manager = m;
        op->message = sd_bus_message_ref(message);
        op->kind = kind;
        op->value = PMQOS_LATENCY_NONE;
        return op;
}

/* Calls in progress of one user, while it has any. */
typedef struct UidPending {
        uint32_t uid;
        unsigned n;
        bool interactive; /* a check of this user waits for a person at polkit's dialog */
} UidPending;

static UidPending *uid_pending(Manager *m, uid_t uid, bool create) {
        uint32_t key = uid;
        UidPending *p = hashmap_get(&m->pending_by_uid, &key);
        if (p || !create)
                return p;
        p = calloc(1, sizeof(UidPending));
        if (!p)
                return NULL;
        p->uid = uid;
        if (hashmap_put(&m->pending_by_uid, &p->uid, p) < 0) {
                free(p);
                return NULL;
        }
        return p;
}

static void uid_release(Op *op) {
        Manager *m = op->manager;
        UidPending *p = op->charged_uid || op->holds_interactive ? uid_pending(m, op->client->uid, false) : NULL;
        if (!p)
                return;
        if (op->holds_interactive)
                p->interactive = false;
        if (op->charged_uid)
                p->n--;
        op->charged_uid = op->holds_interactive = false;
        if (p->n == 0 && !p->interactive)
                free(hashmap_remove(&m->pending_by_uid, &p->uid));
}

Op *op_free(Op *op) {
        if (op) {
                Client *c = op->client;
                auth_query_cancel(op->auth_query);
                if (c) {
                        if (op->charged_uid)
                                op->manager->n_pending--;
                        uid_release(op);
                        client_unwait(c, &op->waiter);
                }
                sd_bus_message_unref(op->message);
                client_unref(c);
                free(op->reason);
                free(op->cpus);
                free(op);
        }
        return NULL;
}

static void op_reply_error(Op *op, const char *name, const char *message) {
        int r = sd_bus_reply_method_errorf(op->message, name, "%s", message);
        if (r < 0)
                log_debug("Cannot send error reply to %s: %s", op->client ? op->client->name : "?", strerror(-r));
}

/* ---- acting ---- */

static bool check_limits(Op *op) {
        Manager *m = op->manager;
        Client *c = op->client;
        char msg[256];

        if (c->uid == 0)
                return true;
        if (c->owner.n_requests >= m->limits.max_per_connection) {
                snprintf(msg, sizeof(msg),
                         "This connection already holds %u latency requests, the most one connection may hold.",
                         c->owner.n_requests);
                op_reply_error(op, SD_BUS_ERROR_LIMITS_EXCEEDED, msg);
                return false;
        }
        unsigned n_uid = store_count_uid(&m->store, c->uid);
        if (n_uid >= m->limits.max_per_uid) {
                snprintf(msg, sizeof(msg), "User %u already holds %u latency requests, the most one user may hold.",
                         (unsigned) c->uid, n_uid);
                op_reply_error(op, SD_BUS_ERROR_LIMITS_EXCEEDED, msg);
                return false;
        }
        return true;
}

/* The store is back as it was: bring the kernel back too, then tell the caller. */
static void reply_commit_failure(Op *op, int r) {
        char msg[256];
        (void) manager_commit(op->manager);
        op->manager->latency_changed = false;
        snprintf(msg, sizeof(msg), "Cannot write the latency bound to the kernel (%s): %s.", op->manager->sink.path,
                 strerror(-r));
        log_error("%s", msg);
        op_reply_error(op, PMQOS_ERROR_FAILED, msg);
}

static void execute_request(Op *op) {
        Manager *m = op->manager;
        Client *c = op->client;
        int r;

        if (!check_limits(op))
                return;

        Request *req = request_new(&m->store);
        if (!req) {
                op_reply_error(op, SD_BUS_ERROR_NO_MEMORY, "Out of memory.");
                return;
        }
        req->value = op->value;
        req->type = op->type;
        req->uid = c->uid;
        req->pid = c->pid;
        req->persistent = op->persistent;
        req->created_usec = now_realtime_usec();
        req->expires_usec = op->timeout_usec > 0 ? req->created_usec + (int64_t) op->timeout_usec : 0;
        req->exec = shared_string_ref(c->exec);
        if (op->reason && op->reason[0]) {
                req->reason = op->reason;
                op->reason = NULL;
        }
        if (request_set_cpus(req, op->cpus, op->n_cpus) < 0) {
                request_free(req);
                op_reply_error(op, SD_BUS_ERROR_NO_MEMORY, "Out of memory.");
                return;
        }
        uint32_t cookie = req->cookie;

        r = store_add(&m->store, req, &c->owner);
        if (r < 0) {
                request_free(req);
                op_reply_error(op, SD_BUS_ERROR_NO_MEMORY, "Out of memory.");
                return;
        }
        if (req->persistent)
                m->state_dirty = true;
        r = manager_commit(m);
        if (r < 0) {
                store_remove(&m->store, req);
                reply_commit_failure(op, r);
                return;
        }

        m->requests_changed = true;
        r = sd_bus_reply_method_return(op->message, "u", cookie);
        if (r < 0)
                log_debug("Cannot reply to %s: %s", c->name, strerror(-r));
        log_debug("Request %" PRIu32 " of %s (uid %u): %" PRIi32 " µs%s.", cookie, c->name, (unsigned) c->uid,
                  op->value, op->persistent ? ", persistent" : "");
        manager_emit_signals(m);
}

/* Gives req a new value and brings the kernel along; on failure puts both
 * back and replies with the reason. Returns whether it worked. */
static bool set_value_or_undo(Op *op, Request *req, int32_t value) {
        Manager *m = op->manager;
        int32_t old = req->value;

        if (store_update(&m->store, req, value) < 0) {
                op_reply_error(op, SD_BUS_ERROR_NO_MEMORY, "Out of memory.");
                return false;
        }
        int r = manager_commit(m);
        if (r < 0) {
                (void) store_update(&m->store, req, old);
                reply_commit_failure(op, r);
                return false;
        }
        return true;
}

static void execute_update_or_cancel(Op *op) {
        Manager *m = op->manager;
        int r;

        Request *req = store_get(&m->store, op->cookie);
        if (!req) {
                op_reply_error(op, PMQOS_ERROR_NO_SUCH_REQUEST, "No latency request has this cookie.");
                return;
        }

        if (op->kind == OP_CANCEL) {
                bool persistent = req->persistent;
                /* Out of the heaps first, so a failed write can put it back as it was. */
                if (!set_value_or_undo(op, req, PMQOS_LATENCY_NONE))
                        return;
                store_remove(&m->store, req);
                if (persistent) {
                        m->state_dirty = true;
                        (void) manager_save_state(m);
                }
        } else {
                if (req->value == op->value)
                        goto reply;
                if (req->persistent)
                        m->state_dirty = true;
                if (!set_value_or_undo(op, req, op->value))
                        return;
        }
        m->requests_changed = true;

reply:
        r = sd_bus_reply_method_return(op->message, NULL);
        if (r < 0)
                log_debug("Cannot reply to %s: %s", op->client->name, strerror(-r));
        log_debug("%s request %" PRIu32 " for %s.", op->kind == OP_CANCEL ? "Cancelled" : "Updated", op->cookie,
                  op->client->name);
        manager_emit_signals(m);
}

static void execute_set_floor(Op *op) {
        Manager *m = op->manager;
        int32_t old = m->floor, old_admin = m->admin_floor;
        int r;

        m->admin_floor = op->value;
        m->floor = manager_floor(m);
        if (old_admin != m->admin_floor)
                m->state_dirty = true;
        if (old != m->floor)
                m->floor_changed = true;
        r = manager_commit(m);
        if (r < 0) {
                m->admin_floor = old_admin;
                m->floor = old;
                m->floor_changed = false;
                reply_commit_failure(op, r);
                return;
        }

        r = sd_bus_reply_method_return(op->message, NULL);
        if (r < 0)
                log_debug("Cannot reply to %s: %s", op->client->name, strerror(-r));
        if (old != m->floor)
                log_info("Minimum latency set to %" PRIi32 " µs by uid %u.", m->floor, (unsigned) op->client->uid);
        manager_emit_signals(m);
}

static void op_execute(Op *op) {
        switch (op->kind) {
        case OP_REQUEST:
                execute_request(op);
                break;
        case OP_UPDATE:
        case OP_CANCEL:
                execute_update_or_cancel(op);
                break;
        case OP_SET_FLOOR:
                execute_set_floor(op);
                break;
        }
        op_free(op);
}

/* ---- authorizing ---- */

static void on_auth_result(AuthResult result, void *userdata) {
        Op *op = userdata;

        op->auth_query = NULL;
        switch (result) {
        case AUTH_ALLOWED:
                op_execute(op);
                return;
        case AUTH_CHALLENGE:
                op_reply_error(op, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED,
                               "This needs authentication: retry allowing interactive authorization.");
                break;
        case AUTH_DENIED:
                op_reply_error(op, SD_BUS_ERROR_ACCESS_DENIED, "Not authorized to change CPU latency requests.");
                break;
        }
        op_free(op);
}

/* What a new request of this kind needs: a long timeout is as good as
 * persistent, so it needs what persistence needs. */
static const char *request_action(const Manager *m, bool persistent, uint64_t timeout_usec) {
        if (persistent || timeout_usec > (uint64_t) m->limits.max_unprivileged_timeout_sec * 1000000u)
                return ACTION_REQUEST_LATENCY_PERSISTENT;
        return ACTION_REQUEST_LATENCY;
}

static bool is_stricter(int32_t value, int32_t old) {
        return value >= 0 && (old < 0 || value < old);
}

static const char *required_action(Op *op, bool *ret_unknown) {
        const Manager *m = op->manager;

        *ret_unknown = false;
        switch (op->kind) {
        case OP_REQUEST:
                return request_action(m, op->persistent, op->timeout_usec);
        case OP_UPDATE:
        case OP_CANCEL: {
                const Request *req = store_get(&m->store, op->cookie);
                if (!req) {
                        *ret_unknown = true;
                        return NULL;
                }
                /* The owner is the user who made it, whether or not it is still connected. */
                if (req->uid != op->client->uid)
                        return ACTION_CANCEL_REQUEST;
                /* Tightening one's own bound is asking anew: authorized like a new request. */
                if (op->kind == OP_UPDATE && is_stricter(op->value, req->value)) {
                        int64_t left = req->expires_usec > 0 ? req->expires_usec - now_realtime_usec() : 0;
                        return request_action(m, req->persistent, left > 0 ? (uint64_t) left : 0);
                }
                return NULL;
        }
        case OP_SET_FLOOR:
                return ACTION_SET_MINIMUM_LATENCY;
        }
        return NULL;
}

static void op_authorize(Op *op) {
        Manager *m = op->manager;
        Client *c = op->client;
        char msg[256];
        bool unknown;

        const char *action = required_action(op, &unknown);
        if (unknown) {
                op_reply_error(op, PMQOS_ERROR_NO_SUCH_REQUEST, "No latency request has this cookie.");
                op_free(op);
                return;
        }
        if (!action || c->uid == 0) {
                op_execute(op);
                return;
        }
        /* Fail fast on limits before anyone is asked for a password. */
        if (op->kind == OP_REQUEST && !check_limits(op)) {
                op_free(op);
                return;
        }

        bool interactive = sd_bus_message_get_allow_interactive_authorization(op->message) > 0;
        if (interactive) {
                /* A check waiting for a person holds polkit's answer for minutes:
                 * one per user, so no user can crowd out the others. */
                UidPending *p = uid_pending(m, c->uid, true);
                if (!p || p->interactive) {
                        snprintf(msg, sizeof(msg),
                                 "An authentication of user %u is already in progress; answer or cancel it first.",
                                 (unsigned) c->uid);
                        op_reply_error(op, SD_BUS_ERROR_LIMITS_EXCEEDED, msg);
                        op_free(op);
                        return;
                }
                p->interactive = true;
                op->holds_interactive = true;
        }

        int r = auth_check(m->auth, c->uid, c->name, action, interactive, on_auth_result, op, &op->auth_query);
        if (r < 0) {
                log_caller_warning("Cannot check authorization of %s for %s: %s", c->name, action, strerror(-r));
                on_auth_result(AUTH_DENIED, op);
        }
}

/* The caller's uid is known: count the call against it, then authorize. */
static void on_client_event(Client *c, void *userdata) {
        Op *op = userdata;
        Manager *m = op->manager;
        char msg[256];

        if (c->state != CLIENT_READY) {
                op_free(op); /* gone: nobody to reply to, nothing to do for it */
                return;
        }
        if (c->uid != 0) {
                UidPending *p = uid_pending(m, c->uid, true);
                if (!p) {
                        op_reply_error(op, SD_BUS_ERROR_NO_MEMORY, "Out of memory.");
                        op_free(op);
                        return;
                }
                if (p->n >= m->limits.max_pending_per_uid)
                        snprintf(msg, sizeof(msg),
                                 "User %u already has %u calls in progress, the most one user may have.",
                                 (unsigned) c->uid, p->n);
                else if (m->n_pending >= m->limits.max_pending)
                        snprintf(msg, sizeof(msg),
                                 "pmqosd has %u calls in progress, the most it takes at once; retry later.",
                                 m->n_pending);
                else {
                        p->n++;
                        m->n_pending++;
                        op->charged_uid = true;
                }
                if (!op->charged_uid) {
                        op_reply_error(op, SD_BUS_ERROR_LIMITS_EXCEEDED, msg);
                        if (p->n == 0 && !p->interactive)
                                free(hashmap_remove(&m->pending_by_uid, &p->uid));
                        op_free(op);
                        return;
                }
        }
        op_authorize(op);
}

/* Refuses the call before it started: nothing of it is kept. */
static int refuse(Op *op, const char *text) {
        op_reply_error(op, SD_BUS_ERROR_LIMITS_EXCEEDED, text);
        op_free(op);
        return 1;
}

int op_start(Op *op) {
        Manager *m = op->manager;
        const char *sender = sd_bus_message_get_sender(op->message);
        Client *c;
        char msg[256];

        int r = client_get(m, sender, &c);
        if (r == -EUSERS) {
                snprintf(msg, sizeof(msg), "pmqosd already tracks %u connections, the most it tracks at once.",
                         m->limits.max_clients);
                return refuse(op, msg);
        }
        if (r < 0) {
                op_free(op);
                return r;
        }
        /* Root is exempt once known; until then every connection is bounded
         * alike. The per-user and global bounds apply once the uid is known
         * (on_client_event()), so a flood cannot lock root out. */
        bool root = c->state == CLIENT_READY && c->uid == 0;
        if (!root && c->n_waiters >= m->limits.max_pending_per_connection) {
                snprintf(msg, sizeof(msg),
                         "This connection already has %u calls in progress, the most one connection may have.",
                         c->n_waiters);
                return refuse(op, msg);
        }

        op->client = client_ref(c);
        op->waiter = (ClientWaiter){ .callback = on_client_event, .userdata = op };
        client_wait(c, &op->waiter);
        return 1;
}
