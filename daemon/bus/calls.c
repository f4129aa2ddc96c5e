/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A call that waits is a PendingCall keyed by its message: waiting for the
 * bus to say who sent it, or for polkit. When the answer comes, the message
 * is enqueued for reading again and its handler runs anew, finding the
 * answer here; if the caller leaves first, the call is dropped unanswered. */

#include "bus/calls.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

typedef enum CallState {
        CALL_WAIT_CALLER, /* GetConnectionCredentials asked */
        CALL_WAIT_AUTH,   /* polkit asked */
        CALL_ANSWERED,    /* its handler runs (again): the record lives until the run ends */
} CallState;

typedef struct PendingCall {
        Calls *calls;
        sd_bus_message *message;
        Client *client;
        ClientWaiter waiter; /* every call of a connection: its per-connection count */
        CallState state;
        bool for_auth;      /* the answer is polkit's (else the bus's) */
        const char *action; /* what polkit was asked (an ACTION_* constant) */
        AuthResult result;
        AuthQuery *query;
        bool charged;           /* counted for the user and the daemon */
        bool kept;              /* counted in n_kept: waits for the bus or polkit */
        bool holds_interactive; /* the user's one check that may wait for a person */
} PendingCall;

/* A user's calls at polkit, while it has any. */
typedef struct UidCalls {
        uint32_t uid;
        unsigned n;
        bool interactive;
} UidCalls;

static UidCalls *uid_calls(Calls *calls, uid_t uid, bool create) {
        uint32_t key = uid;
        UidCalls *u = hashmap_get(&calls->by_uid, &key);
        if (u || !create)
                return u;
        u = calloc(1, sizeof(UidCalls));
        if (!u)
                return NULL;
        u->uid = uid;
        if (hashmap_put(&calls->by_uid, &u->uid, u) < 0) {
                free(u);
                return NULL;
        }
        return u;
}

static void uid_calls_gc(Calls *calls, UidCalls *u) {
        if (u && u->n == 0 && !u->interactive)
                free(hashmap_remove(&calls->by_uid, &u->uid));
}

static void pending_free(PendingCall *pc) {
        Calls *calls = pc->calls;

        hashmap_remove(&calls->by_message, pc->message);
        pc->query = auth_query_cancel(pc->query);
        if (pc->charged || pc->holds_interactive) {
                UidCalls *u = uid_calls(calls, pc->client->uid, false);
                if (u && pc->charged) {
                        u->n--;
                        calls->n_charged--;
                }
                if (u && pc->holds_interactive)
                        u->interactive = false;
                uid_calls_gc(calls, u);
        }
        if (pc->state == CALL_WAIT_CALLER)
                calls->n_wait_caller--;
        if (pc->kept)
                calls_unkeep(calls);
        client_unwait(pc->client, &pc->waiter);
        client_unref(pc->client);
        sd_bus_message_unref(pc->message);
        free(pc);
}

/* The answer is in: the handler runs again over the same message. */
static void answered(PendingCall *pc) {
        if (pc->state == CALL_WAIT_CALLER)
                pc->calls->n_wait_caller--;
        pc->state = CALL_ANSWERED;
        int r = sd_bus_enqueue_for_read(pc->calls->bus, pc->message);
        if (r < 0) {
                log_caller_warning_errno(r, "Cannot process the call of %s again: %m", pc->client->name);
                (void) sd_bus_reply_method_errorf(pc->message, SD_BUS_ERROR_NO_MEMORY, "Out of memory.");
                pending_free(pc);
        }
}

static void on_client_event(Client *c, void *userdata) {
        PendingCall *pc = userdata;

        if (c->state == CLIENT_GONE)
                pending_free(pc); /* nobody to answer, nothing to do for it */
        else if (pc->state == CALL_WAIT_CALLER)
                answered(pc);
}

static PendingCall *pending_new(Calls *calls, sd_bus_message *message, Client *c, CallState state) {
        PendingCall *pc = calloc(1, sizeof(PendingCall));
        if (!pc)
                return NULL;
        *pc = (PendingCall){ .calls = calls,
                             .message = sd_bus_message_ref(message),
                             .client = client_ref(c),
                             .state = state,
                             .waiter = { .callback = on_client_event } };
        pc->waiter.userdata = pc;
        if (hashmap_put(&calls->by_message, message, pc) < 0) {
                client_unref(c);
                sd_bus_message_unref(message);
                free(pc);
                return NULL;
        }
        client_wait(c, &pc->waiter);
        return pc;
}

static int refuse(sd_bus_error *error, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(sd_bus_error *error, const char *fmt, ...) {
        char msg[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        return sd_bus_error_set(error, SD_BUS_ERROR_LIMITS_EXCEEDED, msg);
}

void calls_init(Calls *calls, Clients *clients, Auth *auth, const Limits *limits) {
        *calls = (Calls){ .clients = clients, .auth = auth, .limits = limits, .max_kept = UINT_MAX };
        hashmap_init(&calls->by_message, &hashmap_ptr_ops);
        hashmap_init(&calls->by_uid, &hashmap_u32_ops);
}

void calls_attach_bus(Calls *calls, sd_bus *bus) {
        calls->bus = bus;
}

void calls_set_max_kept(Calls *calls, unsigned max_kept) {
        calls->max_kept = max_kept;
}

bool calls_keep(Calls *calls, unsigned reserve) {
        if (calls->n_kept + reserve >= calls->max_kept)
                return false;
        calls->n_kept++;
        return true;
}

void calls_unkeep(Calls *calls) {
        calls->n_kept--;
}

void calls_done(Calls *calls) {
        PendingCall *pc;
        size_t i;

        while ((i = 0, hashmap_next(&calls->by_message, &i, (void **) &pc)))
                pending_free(pc);
        hashmap_clear(&calls->by_message);
        UidCalls *u;
        for (i = 0; hashmap_next(&calls->by_uid, &i, (void **) &u);)
                free(u);
        hashmap_clear(&calls->by_uid);
}

bool calls_has(const Calls *calls, sd_bus_message *message) {
        return hashmap_get(&calls->by_message, message) != NULL;
}

int call_know_caller(Calls *calls, sd_bus_message *message, Client **ret, sd_bus_error *error) {
        PendingCall *pc = hashmap_get(&calls->by_message, message);
        Client *c;

        if (pc) {
                if (pc->client->state != CLIENT_READY)
                        return 0;
                *ret = pc->client;
                return 1;
        }

        int r = client_get(calls->clients, sd_bus_message_get_sender(message), &c);
        if (r == -EUSERS)
                return refuse(error, "pmqosd already tracks %u connections, the most it tracks at once.",
                              calls->clients->max);
        if (r < 0)
                return r;
        if (c->state == CLIENT_READY) {
                /* The call is in progress for this run of its handler: the
                 * client is busy (never forgotten as idle) until the run ends. */
                if (!pending_new(calls, message, c, CALL_ANSWERED))
                        return -ENOMEM;
                *ret = c;
                return 1;
        }
        /* Until the bus says who it is, every connection is bounded alike,
         * and all of them together; but a connection's first call always
         * waits (root's first call among them) while descriptors are left. */
        if (c->n_waiters >= calls->limits->max_pending_per_connection)
                return refuse(error,
                              "This connection already has %u calls in progress, the most one connection may have.",
                              c->n_waiters);
        if (c->n_waiters > 0 && calls->n_wait_caller >= calls->limits->max_pending)
                return refuse(error,
                              "pmqosd has %u calls waiting for the bus to say who made them, the most it "
                              "keeps at once (MaxPending); retry later.",
                              calls->n_wait_caller);
        if (!calls_keep(calls, 0))
                return refuse(error, "pmqosd keeps %u calls, all its descriptor limit leaves room for; retry later.",
                              calls->n_kept);
        pc = pending_new(calls, message, c, CALL_WAIT_CALLER);
        if (!pc) {
                calls_unkeep(calls);
                return -ENOMEM;
        }
        pc->kept = true;
        calls->n_wait_caller++;
        return 0;
}

static void on_auth_result(AuthResult result, void *userdata) {
        PendingCall *pc = userdata;

        pc->query = NULL;
        pc->result = result;
        answered(pc);
}

/* A request that outlives its caller: what it needs, and what would allow
 * it (group pmqos's rule grants only request-latency). */
static int refuse_persistent(const Limits *l, const char *name, sd_bus_error *error) {
        return sd_bus_error_setf(error, name,
                                 "A persistent request, or one with a timeout over %" PRIu32
                                 " s (MaxUnprivilegedTimeoutSec), needs " ACTION_REQUEST_LATENCY_PERSISTENT
                                 ", which polkit did not grant (group pmqos does not give it): an administrator's "
                                 "password does (retry allowing interactive authorization, e.g. on a terminal or with "
                                 "sudo), or ask a timeout of at most %" PRIu32 " s.",
                                 l->max_unprivileged_timeout_sec, l->max_unprivileged_timeout_sec);
}

/* The refusal names the action, so that the caller knows what to ask for:
 * another user's target needs more than a request of one's own, a request
 * that outlives its caller more than a group member has. */
static int auth_answer(const Limits *l, AuthResult result, const char *action, sd_bus_error *error) {
        bool others = action && strcmp(action, ACTION_REQUEST_LATENCY_FOR_OTHERS) == 0;
        bool persistent = action && strcmp(action, ACTION_REQUEST_LATENCY_PERSISTENT) == 0;
        const char *what = others ? "The target is another user's process or cgroup: this" : "This";
        switch (result) {
        case AUTH_ALLOWED:
                return 1;
        case AUTH_CHALLENGE:
                if (persistent)
                        return refuse_persistent(l, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED, error);
                return sd_bus_error_setf(error, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED,
                                         "%s needs authentication (%s): retry allowing interactive authorization.",
                                         what, action ? action : "polkit");
        case AUTH_DENIED:
                break;
        case AUTH_UNAVAILABLE:
                /* Fail closed, and say why: a retry may well be granted. */
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                         "Not authorized to change CPU latency requests: polkit gave no answer about "
                                         "%s (not running, failing, or not in time); retry later.",
                                         action ? action : "it");
        }
        if (persistent)
                return refuse_persistent(l, SD_BUS_ERROR_ACCESS_DENIED, error);
        if (others)
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED, "%s needs %s, which polkit did not grant.",
                                         what, action);
        return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED, "Not authorized to change CPU latency requests.");
}

/* Room for one more call of c at polkit: per connection, per user, in all,
 * and one interactive check per user. Returns 0, or refuses. */
static int make_room(Calls *calls, Client *c, bool interactive, bool pc_kept, UidCalls *u, sd_bus_error *error) {
        const Limits *l = calls->limits;

        /* The call asking is one of c's waiters already. */
        if (c->n_waiters > l->max_pending_per_connection)
                return refuse(error,
                              "This connection already has %u calls in progress, the most one connection may have.",
                              c->n_waiters);
        if (u->n >= l->max_pending_per_uid)
                return refuse(error, "User %u already has %u calls in progress, the most one user may have.",
                              (unsigned) c->uid, u->n);
        if (calls->n_charged >= l->max_pending)
                return refuse(error, "pmqosd has %u calls in progress, the most it takes at once; retry later.",
                              calls->n_charged);
        if (!pc_kept && calls->n_kept >= calls->max_kept)
                return refuse(error, "pmqosd keeps %u calls, all its descriptor limit leaves room for; retry later.",
                              calls->n_kept);
        /* A check waiting for a person holds polkit's answer for minutes. */
        if (interactive && u->interactive)
                return refuse(error, "An authentication of user %u is already in progress; answer or cancel it first.",
                              (unsigned) c->uid);
        return 0;
}

/* Hands pc's question to polkit; the message comes back with the answer. */
static int ask(Calls *calls, PendingCall *pc, Client *c, const char *action, bool interactive, sd_bus_error *error) {
        pc->action = action;
        pc->state = CALL_WAIT_AUTH;
        int r = auth_check(calls->auth, c->uid, c->name, action, interactive, on_auth_result, pc, &pc->query);
        if (r < 0) {
                log_caller_warning_errno(r, "Cannot check authorization of %s for %s: %m", c->name, action);
                pending_free(pc);
                return auth_answer(calls->limits, AUTH_UNAVAILABLE, action, error);
        }
        return 0;
}

int call_authorize(Calls *calls, sd_bus_message *message, Client *c, const char *action, sd_bus_error *error) {
        PendingCall *pc = hashmap_get(&calls->by_message, message);
        int r;

        if (!action || c->uid == 0)
                return 1;
        if (!pc) /* call_know_caller() was not asked first */
                return -EINVAL;
        bool interactive = sd_bus_message_get_allow_interactive_authorization(message) > 0;
        if (pc->for_auth) {
                /* Answered: the message came back. The record stays until the run ends. */
                if (pc->state != CALL_ANSWERED)
                        return 0;
                if (strcmp(pc->action, action) == 0)
                        return auth_answer(calls->limits, pc->result, action, error);
                /* The call needs another action than polkit answered for (a
                 * reload changed MaxUnprivilegedTimeoutSec meanwhile): that
                 * answer is stale, polkit is asked again. Still counted. */
                log_debug("%s now needs %s, not %s: asking polkit again.", c->name, action, pc->action);
                return ask(calls, pc, c, action, interactive, error);
        }

        UidCalls *u = uid_calls(calls, c->uid, true);
        if (!u)
                return -ENOMEM;
        r = make_room(calls, c, interactive, pc->kept, u, error);
        if (r < 0) {
                uid_calls_gc(calls, u);
                return r;
        }
        /* The run's record becomes the wait for polkit. */
        pc->for_auth = true;
        pc->charged = true;
        if (!pc->kept) {
                pc->kept = true;
                calls->n_kept++;
        }
        u->n++;
        calls->n_charged++;
        if (interactive)
                u->interactive = pc->holds_interactive = true;
        return ask(calls, pc, c, action, interactive, error);
}

void call_scope_done(CallScope *scope) {
        PendingCall *pc = hashmap_get(&scope->calls->by_message, scope->message);
        if (pc && pc->state == CALL_ANSWERED)
                pending_free(pc);
}
