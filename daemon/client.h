/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The peers that hold requests: their credentials, read once from the bus,
 * and the match that tells us, without polling, when they leave. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "manager.h"
#include "store.h"

typedef enum ClientState {
        CLIENT_RESOLVING, /* credentials asked of the bus, not yet known */
        CLIENT_READY,
        CLIENT_GONE, /* left the bus; anything still pointing here must drop its work */
} ClientState;

typedef struct ClientWaiter ClientWaiter;
struct ClientWaiter {
        void (*callback)(Client *c, void *userdata); /* check c->state for the outcome */
        void *userdata;
        ClientWaiter *next;
};

struct Client {
        unsigned n_ref;
        Manager *manager;
        char *name; /* unique bus name */
        ClientState state;
        uid_t uid;
        pid_t pid;
        SharedString *exec;
        sd_bus_slot *match_slot;
        sd_bus_slot *creds_slot;
        RequestOwner owner;
        ClientWaiter *waiters_head, *waiters_tail;
};

/* Finds the client with this unique name, or starts tracking it. */
int client_get(Manager *m, const char *name, Client **ret);
Client *client_ref(Client *c);
Client *client_unref(Client *c);

/* Runs w->callback once the client is READY or GONE (at once if it already is). */
void client_wait(Client *c, ClientWaiter *w);

/* The client left: its dying requests go in one step, one commit, one signal. */
void client_vanished(Client *c);

/* Frees every client record, at shutdown; requests are the store's to free. */
void clients_free_all(Manager *m);
