/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Re-adoption at start: the previous run's connection-bound requests come
 * back to owners still connected to the same bus, checked with the bus's
 * own credentials, before the name is taken and before READY=1. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-id128.h>

#include "util/clock.h"
#include "bus/actions.h"
#include "util/log.h"
#include "bus/manager.h"
#include "util/macro.h"

/* The bus answers GetConnectionCredentials at once; this only bounds a bus that is stuck. */
#define ADOPT_TIMEOUT_USEC (10u * 1000000u)

/* One recorded sender: is it still there, and who is it? */
typedef struct Adoption {
        Client *client;
        ClientWaiter waiter;
        unsigned *n_waiting;
        bool told;
} Adoption;

static void on_client(Client *c, void *userdata) {
        Adoption *a = userdata;
        (void) c;
        if (!a->told) { /* READY, or GONE: either ends the wait */
                a->told = true;
                (*a->n_waiting)--;
        }
}

/* Runs the bus until every sender is known (or the bus fails or stalls). */
static void wait_for_senders(Manager *m, const unsigned *n_waiting) {
        uint64_t deadline = (uint64_t) now_realtime_usec() + ADOPT_TIMEOUT_USEC;

        while (*n_waiting > 0) {
                int r = sd_bus_process(m->bus, NULL);
                if (r > 0)
                        continue;
                uint64_t now = (uint64_t) now_realtime_usec();
                if (r < 0 || now >= deadline) {
                        log_warning(
                                "Cannot learn whether %u previous client(s) are still connected: %s; their requests "
                                "that die with their connection end.",
                                *n_waiting, r < 0 ? strerror(-r) : "the bus does not answer");
                        return;
                }
                (void) sd_bus_wait(m->bus, deadline - now);
        }
}

static bool same_peer(const Client *c, const Request *r) {
        return c->state == CLIENT_READY && c->uid == r->uid && c->pid == r->pid;
}

int manager_start(Manager *m, ChangeSet *ret_changes) {
        RuntimeData *d = &m->core.adoptable;
        char bus_id[SD_ID128_STRING_MAX] = "";
        sd_id128_t id;
        unsigned n_waiting = 0;
        Hashmap by_sender;
        int r;

        r = sd_bus_get_bus_id(m->bus, &id);
        if (r >= 0)
                sd_id128_to_string(id, bus_id);
        else
                log_warning_errno(r, "Cannot read the bus's id: %m; no request of the previous run can be re-adopted.");
        /* Unique names are never reused on one bus, but a new bus hands out the same ones again. */
        bool same_bus = r >= 0 && d->n_entries > 0 && strcmp(d->bus_id, bus_id) == 0;
        if (d->n_entries > 0 && !same_bus)
                log_info("The runtime record is of another bus; its requests that die with their connection end.");

        RequestOwner **owners = calloc(d->n_entries ?: 1, sizeof(RequestOwner *));
        Adoption *adoptions = calloc(d->n_entries ?: 1, sizeof(Adoption));
        if (!owners || !adoptions) {
                free(owners);
                free(adoptions);
                return -ENOMEM;
        }
        hashmap_init(&by_sender, &hashmap_string_ops);

        /* 1. Ask the bus about every sender at once; its answers arrive in order with departures. */
        size_t n_adoptions = 0;
        for (size_t i = 0; same_bus && i < d->n_entries; i++) {
                const char *sender = d->entries[i].sender;
                Client *c;
                if (!sender[0] || hashmap_get(&by_sender, sender))
                        continue;
                r = client_get(&m->clients, sender, &c);
                if (r < 0) {
                        log_warning_errno(r, "Cannot track previous client %s: %m; its requests end.", sender);
                        continue;
                }
                Adoption *a = &adoptions[n_adoptions++];
                *a = (Adoption){ .client = client_ref(c), .n_waiting = &n_waiting };
                a->waiter = (ClientWaiter){ .callback = on_client, .userdata = a };
                n_waiting++;
                client_wait(c, &a->waiter);
                if (hashmap_put(&by_sender, sender, a) < 0)
                        break; /* out of memory: the rest are not adopted */
        }
        wait_for_senders(m, &n_waiting);

        /* 2. Each request goes back to its owner if that is the very same connection. */
        for (size_t i = 0; i < d->n_entries; i++) {
                Adoption *a = d->entries[i].sender[0] ? hashmap_get(&by_sender, d->entries[i].sender) : NULL;
                if (a && same_peer(a->client, d->entries[i].request))
                        owners[i] = &a->client->owner;
        }
        hashmap_clear(&by_sender);
        /* 2b. Each held request goes back to its process or cgroup, if that still is the same one. */
        size_t n_entries = d->n_entries;
        Hold **held = held_rebind(m, d, owners);
        holds_drop_stored(&m->holds); /* what the store gave back that no entry claimed */

        /* 3. The unit rules whose units run, in the same first write. */
        unit_rules_prime(&m->rules);

        /* 4. One transaction: adopted, detached or dropped; the kernel once. */
        r = core_start(&m->core, bus_id[0] ? bus_id : NULL, owners, now_realtime_usec(), ret_changes);
        for (size_t i = 0; i < n_adoptions; i++) {
                client_unwait(adoptions[i].client, &adoptions[i].waiter);
                client_unref(adoptions[i].client);
        }
        held_rebind_done(held, n_entries);
        free(owners);
        free(adoptions);
        publish_arm_expiry(&m->pub);
        if (r >= 0)
                log_debug("Checked %zu previous client(s) on bus %s.", n_adoptions, bus_id);
        return r;
}
