/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The peers that hold requests or have calls pending: their credentials, read
 * once from the bus, and their departure, seen through one bus-wide match. */
#pragma once

#include <stdbool.h>
#include <string.h>
#include <sys/types.h>

#include <systemd/sd-bus.h>

#include "util/hashmap.h"
#include "model/store.h"

/* Recently used clients with nothing pending and no request, kept so that
 * their next call needs no credentials round trip; the oldest is forgotten. */
#define CLIENT_IDLE_MAX 64u

typedef enum ClientState {
        CLIENT_RESOLVING, /* credentials asked of the bus, not yet known */
        CLIENT_READY,
        CLIENT_GONE, /* left the bus; anything still pointing here must drop its work */
} ClientState;

/* One call of the client's in progress. It is told once when the
 * credentials are known (READY) and once more if the client leaves (GONE);
 * it must client_unwait() when done. */
typedef struct ClientWaiter ClientWaiter;
typedef struct Client Client;
struct ClientWaiter {
        void (*callback)(Client *c, void *userdata); /* check c->state for the event */
        void *userdata;
        bool linked, told_ready;
        ClientWaiter *prev, *next;
};

typedef struct Clients Clients;

struct Client {
        unsigned n_ref;
        Clients *registry;
        ClientState state;
        uid_t uid;
        pid_t pid;
        SharedString *exec; /* cleaned command line */
        Origin *origin;     /* its comm and unit, read with exec */
        sd_bus_slot *creds_slot;
        RequestOwner owner;
        ClientWaiter *waiters_head, *waiters_tail;
        unsigned n_waiters; /* calls of this connection in progress */
        bool idle;
        Client *idle_prev, *idle_next;
        char name[]; /* unique bus name, in the record: one allocation a connection */
};

/* Every connection pmqosd tracks, and how it hears that one left. */
struct Clients {
        sd_bus *bus;
        Hashmap by_name;               /* unique bus name → Client, for clients still on the bus */
        Client *idle_head, *idle_tail; /* nothing pending and no request, oldest first */
        unsigned n_idle;
        unsigned max; /* MaxClients */
        /* Told when a client left, before its calls in progress hear it: the
         * owner of the requests drops them. */
        void (*departed)(Client *c, void *userdata);
        void *userdata;
        /* Told when a client's credentials became known (READY), before
         * its calls in progress hear it; may be NULL (budget.c sets it). */
        void (*resolved)(Client *c, void *userdata);
        void *resolved_userdata;
};

/* Whether message comes from the bus itself (org.freedesktop.DBus), not
 * from a peer that sent it to us directly: sd-bus cannot tell the two apart
 * in a match on a well-known sender. */
static inline bool bus_message_from_driver(sd_bus_message *message) {
        const char *sender = sd_bus_message_get_sender(message);
        return sender && strcmp(sender, "org.freedesktop.DBus") == 0;
}

void clients_init(Clients *cs, unsigned max, void (*departed)(Client *c, void *userdata), void *userdata);
/* Frees every client record, at shutdown; requests are the store's to free. */
void clients_done(Clients *cs);

/* Installs the one match on NameOwnerChanged that tells of every departure,
 * synchronously: before the bus name is taken. */
int clients_watch(Clients *cs, sd_bus *bus);

/* Finds the client with this unique name, or starts tracking it. -EUSERS
 * when MaxClients are tracked and none of them is idle. */
int client_get(Clients *cs, const char *name, Client **ret);

/* /proc/PID/cmdline, arguments joined by spaces, cleaned (text.h) and cut at
 * PMQOS_EXEC_MAX bytes; "" when it cannot be read. NULL only when out of memory. */
char *process_command_line(pid_t pid);
/* pid's comm and systemd unit as they are now ("" where unreadable):
 * checked by the caller to be still that process where that matters.
 * NULL only when out of memory. */
Origin *process_origin(pid_t pid);
Client *client_ref(Client *c);
Client *client_unref(Client *c);

/* Registers a call in progress; w->callback runs at once if the client is
 * already READY or GONE. */
void client_wait(Client *c, ClientWaiter *w);
/* The call is done; a client with nothing left becomes idle. NULL-safe for c. */
void client_unwait(Client *c, ClientWaiter *w);
