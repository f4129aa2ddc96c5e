/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The two steps of a method call that may have to wait — knowing the caller
 * and asking polkit — without continuations: a step that must wait returns
 * 0, and the very message is processed again (sd_bus_enqueue_for_read())
 * once the bus or polkit answered, so a handler simply runs twice. Each call
 * in progress is counted against its connection, its user and the daemon. */
#pragma once

#include <stdbool.h>
#include <systemd/sd-bus.h>

#include "bus/auth.h"
#include "bus/client.h"
#include "conf/config.h"
#include "util/hashmap.h"

typedef struct Calls {
        sd_bus *bus;
        Clients *clients;
        Auth *auth;
        const Limits *limits;
        Hashmap by_message;     /* sd_bus_message (its identity) → PendingCall */
        Hashmap by_uid;         /* uid → the user's calls at polkit */
        unsigned n_charged;     /* calls at polkit, of everyone but root */
        unsigned n_wait_caller; /* calls waiting for the bus to say who sent them */
        /* Messages kept (waiting for the bus, polkit, or a Ping: budget.c):
         * each keeps every descriptor attached to it, referenced or not, and
         * sd-bus says of none how many it has. max_kept is what the
         * descriptor limit leaves room for (calls_set_max_kept()). */
        unsigned n_kept, max_kept;
} Calls;

void calls_init(Calls *calls, Clients *clients, Auth *auth, const Limits *limits);
/* Drops every call in progress, unanswered (at shutdown). */
void calls_done(Calls *calls);
void calls_attach_bus(Calls *calls, sd_bus *bus);

/* The descriptors a kept message may carry: dbus-daemon's bound per message
 * (max_message_unix_fds, 16 on the system bus). */
#define CALLS_FDS_PER_MESSAGE 16u
/* How many messages may be kept at once, at most (from the descriptor limit). */
void calls_set_max_kept(Calls *calls, unsigned max_kept);
/* One more message kept (by budget.c), unless the room for them is used up
 * down to reserve: false then. calls_unkeep() gives it back. */
bool calls_keep(Calls *calls, unsigned reserve);
void calls_unkeep(Calls *calls);

/* Whether message is a call in progress here: one that runs again. */
bool calls_has(const Calls *calls, sd_bus_message *message);

/* Who sent message. 1: known, *ret set; 0: asked of the bus, message comes
 * back once it answered; negative: refused, *error set (LimitsExceeded). */
int call_know_caller(Calls *calls, sd_bus_message *message, Client **ret, sd_bus_error *error);

/* Whether c may do action (NULL: nothing to ask; root is never asked).
 * 1: yes; 0: polkit was asked, message comes back with the answer; negative:
 * no, *error set (AccessDenied, InteractiveAuthorizationRequired,
 * LimitsExceeded). */
int call_authorize(Calls *calls, sd_bus_message *message, Client *c, const char *action, sd_bus_error *error);

/* Ends a handler's run over message: its record goes, unless it now waits
 * (for the bus or polkit). Until then the caller counts as busy. */
typedef struct CallScope {
        Calls *calls;
        sd_bus_message *message;
} CallScope;
void call_scope_done(CallScope *scope);
