/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The requests a client made, and how they reach the broker: issued by the
 * public calls, checked and issued again when the broker comes back after a
 * restart (it re-adopts those of connections still on the bus itself, so
 * only what it lacks goes out again, once). */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libpmqos-client.h"

Entry *client_entry_free(Entry *e) {
        if (e) {
                free(e->reason);
                free(e->cpus);
                free(e);
        }
        return NULL;
}

Entry *client_find_entry(pmqos_client *c, uint32_t cookie, Entry ***ret_link) {
        for (Entry **p = &c->entries; *p; p = &(*p)->next)
                if ((*p)->cookie == cookie) {
                        if (ret_link)
                                *ret_link = p;
                        return *p;
                }
        return NULL;
}

/* The a{sv} options of Request, Hold and RequestFor. */
int client_append_options(sd_bus_message *m, const RequestArgs *a) {
        int r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r < 0)
                return r;
        if (a->reason) {
                r = sd_bus_message_append(m, "{sv}", "reason", "s", a->reason);
                if (r < 0)
                        return r;
        }
        if (a->persistent) {
                r = sd_bus_message_append(m, "{sv}", "persistent", "b", 1);
                if (r < 0)
                        return r;
        }
        if (a->timeout_sec > 0) {
                r = sd_bus_message_append(m, "{sv}", "timeout", "u", a->timeout_sec);
                if (r < 0)
                        return r;
        }
        if (a->n_cpus > 0) {
                r = sd_bus_message_open_container(m, 'e', "sv");
                if (r >= 0)
                        r = sd_bus_message_append(m, "s", "cpus");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'v', "au");
                if (r >= 0)
                        r = sd_bus_message_append_array(m, 'u', a->cpus, a->n_cpus * sizeof(uint32_t));
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                if (r < 0)
                        return r;
        }
        return sd_bus_message_close_container(m);
}

static int append_request(sd_bus_message *m, const void *data) {
        const RequestArgs *a = data;
        int r = sd_bus_message_append(m, "si", "cpu_dma", a->value);
        return r < 0 ? r : client_append_options(m, a);
}

int client_issue(pmqos_client *c, const RequestArgs *a, uint32_t *ret_cookie) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r = client_call(c, NATIVE_IFACE, "Request", &reply, append_request, a);
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "u", ret_cookie);
        return r < 0 ? client_map_error(c, NULL, r) : 0;
}

/* Which of our requests the new broker still has: it re-adopts those of
 * connections still on the bus before it takes its name, so they are
 * listed by the time we hear it is back. Returns 0 with every entry's
 * "kept" flag set, or a negative errno (then nothing is known). */
static int mark_kept(pmqos_client *c) {
        pmqos_request_info *infos = NULL;
        const char *me = NULL;
        size_t n = 0;

        int r = sd_bus_get_unique_name(c->bus, &me);
        if (r < 0)
                return r;
        r = client_list(c, &infos, &n);
        if (r < 0)
                return r;
        for (Entry *e = c->entries; e; e = e->next) {
                e->kept = false;
                for (size_t i = 0; i < n && !e->kept; i++)
                        /* A connection-bound one must still be ours; a timed one may have been detached. */
                        e->kept = infos[i].cookie == e->broker_cookie &&
                                  (e->deadline_usec > 0 || strcmp(infos[i].sender, me) == 0);
        }
        pmqos_request_info_free(infos, n);
        return 0;
}

/* The broker came back: issue again what it forgot, once. Persistent
 * requests it kept itself, under the same cookies. */
static void reissue_all(pmqos_client *c) {
        uint64_t now = client_now_usec();
        /* The application's view of the last error is not ours to change from here. */
        char *saved_error = c->last_error;
        c->last_error = NULL;

        bool known = mark_kept(c) >= 0;
        for (Entry **p = &c->entries; *p;) {
                Entry *e = *p;
                if (e->persistent || (known && e->kept)) {
                        p = &e->next;
                        continue;
                }
                uint32_t timeout = 0;
                if (e->deadline_usec > 0) {
                        if (e->deadline_usec <= now + 1000000) { /* under a second left: let it end */
                                *p = e->next;
                                client_entry_free(e);
                                continue;
                        }
                        timeout = (uint32_t) ((e->deadline_usec - now) / 1000000u);
                }
                RequestArgs a = { .value = e->value,
                                  .reason = e->reason,
                                  .timeout_sec = timeout,
                                  .cpus = e->cpus,
                                  .n_cpus = e->n_cpus };
                if (client_issue(c, &a, &e->broker_cookie) < 0) {
                        /* Lost for good (denied now, limits…): forget it rather than lie. */
                        *p = e->next;
                        client_entry_free(e);
                        continue;
                }
                p = &e->next;
        }
        free(c->last_error);
        c->last_error = saved_error;
}

void client_set_broker(pmqos_client *c, const char *unique) {
        free(c->broker);
        c->broker = unique && unique[0] ? strdup(unique) : NULL;
}

int client_on_name_owner_changed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        pmqos_client *c = userdata;
        const char *name, *old_owner, *new_owner;

        (void) error;
        /* The bus's word only: a peer may send us a look-alike directly, and
         * sd-bus's match on a well-known sender lets it through. */
        const char *sender = sd_bus_message_get_sender(m);
        if (!sender || strcmp(sender, "org.freedesktop.DBus") != 0 || !sd_bus_message_has_signature(m, "sss") ||
            sd_bus_message_read(m, "sss", &name, &old_owner, &new_owner) < 0 || strcmp(name, BUS_NAME) != 0)
                return 0;
        client_set_broker(c, new_owner);
        if (new_owner[0] == 0) {
                c->broker_gone = true;
                client_emit(c, PMQOS_EVENT_BROKER_LOST, PMQOS_LATENCY_NONE);
                return 0;
        }
        c->broker_gone = false;
        reissue_all(c);
        client_emit(c, PMQOS_EVENT_BROKER_RESTARTED, PMQOS_LATENCY_NONE);
        return 0;
}
