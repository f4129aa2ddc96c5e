/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libpmqos's public calls: a client is one private system bus connection
 * and the record of the requests made through it (libpmqos-issue.c); every
 * call goes through libpmqos-call.c. */

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "libpmqos-thread.h"

/* How long pmqos_client_free() waits for a broker that does not answer. */
#define RELEASE_TIMEOUT_USEC (5u * 1000000u)

/* Calls on c and the helper thread take turns: recursive, as a callback may
 * call back in; priority-inheriting, as the caller may be a real-time thread
 * waiting on the lock the (SCHED_OTHER) helper thread holds. */
static int client_lock_init(pmqos_client *c) {
        pthread_mutexattr_t attr;
        int r = pthread_mutexattr_init(&attr);
        if (r != 0)
                return -r;
        r = pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
        if (r == 0)
                r = pthread_mutexattr_setprotocol(&attr, PTHREAD_PRIO_INHERIT);
        if (r == 0)
                r = pthread_mutex_init(&c->lock, &attr);
        pthread_mutexattr_destroy(&attr);
        return -r;
}

/* Ask the bus for the broker and make sure it answers (the bus may start it
 * for us); the answer names the broker. */
static int client_connect(pmqos_client *c) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r = sd_bus_open_system(&c->bus);
        if (r < 0)
                return r == -ENOMEM ? r : -EHOSTDOWN;
        /* Only the broker's own name: no wake-ups for everyone else's comings and goings. */
        r = sd_bus_add_match(c->bus, &c->owner_slot,
                             "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
                             "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='" BUS_NAME "'",
                             client_on_name_owner_changed, c);
        if (r < 0)
                return r == -ENOMEM ? r : -EHOSTDOWN;
        r = client_call(c, "org.freedesktop.DBus.Peer", "Ping", &reply, NULL, NULL);
        if (r < 0)
                return r;
        client_set_broker(c, sd_bus_message_get_sender(reply));
        return 0;
}

_public_ int pmqos_client_new(pmqos_client **ret) {
        if (!ret)
                return -EINVAL;
        *ret = NULL; /* on every failure: pmqos_client_free(*ret) is then a no-op */

        pmqos_client *c = calloc(1, sizeof(pmqos_client));
        if (!c)
                return -ENOMEM;
        c->wake_fd = -1;
        int r = client_lock_init(c);
        if (r < 0) {
                free(c);
                return r;
        }
        r = client_connect(c);
        if (r < 0) {
                pmqos_client_free(c);
                return r;
        }
        *ret = c;
        return 0;
}

typedef struct Release {
        unsigned n_pending;
} Release;

static int on_released(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Release *rel = userdata;
        (void) reply, (void) error;
        rel->n_pending--; /* done or refused (already gone): either way not ours any more */
        return 0;
}

/* Ends every request that dies with the connection and waits until the
 * broker said so: all calls sent at once (one round trip for any number),
 * the broker answering each after the kernel has the new value. Then
 * closing the connection loses nothing, and the caller may read the
 * kernel at once. */
static void release_all(pmqos_client *c) {
        Release rel = { 0 };
        uint64_t timeout = c->call_timeout_usec > 0 && c->call_timeout_usec < RELEASE_TIMEOUT_USEC
                                   ? c->call_timeout_usec
                                   : RELEASE_TIMEOUT_USEC;
        uint64_t deadline = client_now_usec() + timeout;

        if (c->broker_gone)
                return; /* its bounds went with it */
        for (Entry *e = c->entries; e; e = e->next) {
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
                if (e->persistent || e->deadline_usec > 0)
                        continue;
                if (sd_bus_message_new_method_call(c->bus, &m, BUS_NAME, OBJECT_PATH, NATIVE_IFACE, "Cancel") < 0 ||
                    sd_bus_message_append(m, "u", e->broker_cookie) < 0 ||
                    sd_bus_call_async(c->bus, NULL, m, on_released, &rel, timeout) < 0)
                        break; /* the connection is gone: so are its requests */
                rel.n_pending++;
        }
        while (rel.n_pending > 0) {
                int r = sd_bus_process(c->bus, NULL);
                if (r > 0)
                        continue;
                uint64_t now = client_now_usec();
                if (r < 0 || now >= deadline || sd_bus_wait(c->bus, deadline - now) < 0)
                        break; /* unreachable: closing the connection is all that is left */
        }
}

_public_ pmqos_client *pmqos_client_free(pmqos_client *c) {
        if (!c)
                return NULL;
        client_lock(c);
        client_helper_stop(c, true);
        release_all(c);
        while (c->entries) {
                Entry *e = c->entries;
                c->entries = e->next;
                client_entry_free(e);
        }
        sd_bus_slot_unref(c->owner_slot);
        sd_bus_slot_unref(c->latency_slot);
        sd_bus_slot_unref(c->requests_slot);
        sd_bus_flush_close_unref(c->bus);
        if (c->wake_fd >= 0)
                close(c->wake_fd);
        free(c->last_error);
        free(c->broker);
        pthread_mutex_unlock(&c->lock);
        pthread_mutex_destroy(&c->lock);
        free(c);
        return NULL;
}

_public_ const char *pmqos_client_last_error(pmqos_client *c) {
        return c ? c->last_error : NULL;
}

_public_ int pmqos_client_set_timeout(pmqos_client *c, uint64_t timeout_usec) {
        if (!c)
                return -EINVAL;
        CLIENT_SCOPE(c);
        c->call_timeout_usec = timeout_usec;
        return 0;
}

_public_ int pmqos_client_set_allow_interactive(pmqos_client *c, bool allow) {
        if (!c)
                return -EINVAL;
        CLIENT_SCOPE(c);
        c->interactive = allow;
        return 0;
}

_public_ int pmqos_request_full(pmqos_client *c, int32_t usec, const char *reason, uint32_t timeout_sec,
                                const uint32_t *cpus, size_t n_cpus, uint64_t flags, uint32_t *ret_cookie) {
        uint32_t cookie;
        int r;

        if (ret_cookie)
                *ret_cookie = 0; /* never a cookie: what a failure leaves */
        CLIENT_ENTER(c, !ret_cookie || (n_cpus > 0 && !cpus) || (flags & ~(uint64_t) PMQOS_REQUEST_PERSISTENT));

        Entry *e = calloc(1, sizeof(Entry));
        if (!e)
                return -ENOMEM;
        e->value = usec;
        e->persistent = flags & PMQOS_REQUEST_PERSISTENT;
        e->reason = reason ? strdup(reason) : NULL;
        e->n_cpus = n_cpus;
        if (n_cpus > 0) {
                e->cpus = malloc(n_cpus * sizeof(uint32_t));
                if (e->cpus)
                        memcpy(e->cpus, cpus, n_cpus * sizeof(uint32_t));
        }
        if ((reason && !e->reason) || (n_cpus > 0 && !e->cpus)) {
                client_entry_free(e);
                return -ENOMEM;
        }
        if (timeout_sec > 0)
                e->deadline_usec = client_now_usec() + (uint64_t) timeout_sec * 1000000u;

        RequestArgs a = { .value = usec,
                          .reason = reason,
                          .timeout_sec = timeout_sec,
                          .cpus = cpus,
                          .n_cpus = n_cpus,
                          .persistent = e->persistent };
        r = client_issue(c, &a, &cookie);
        if (r < 0) {
                client_entry_free(e);
                return r;
        }
        e->cookie = e->broker_cookie = cookie;
        e->next = c->entries;
        c->entries = e;
        *ret_cookie = cookie;
        if (!e->persistent)
                client_helper_start(c); /* so that a broker restart needs no call of ours */
        return 0;
}

_public_ int pmqos_request(pmqos_client *c, int32_t usec, uint32_t *ret_cookie) {
        return pmqos_request_full(c, usec, NULL, 0, NULL, 0, 0, ret_cookie);
}

typedef struct UpdateArgs {
        uint32_t cookie;
        int32_t value;
} UpdateArgs;

static int append_update(sd_bus_message *m, const void *data) {
        const UpdateArgs *a = data;
        return sd_bus_message_append(m, "ui", a->cookie, a->value);
}

static int append_cookie(sd_bus_message *m, const void *data) {
        return sd_bus_message_append(m, "u", *(const uint32_t *) data);
}

_public_ int pmqos_update(pmqos_client *c, uint32_t cookie, int32_t usec) {
        CLIENT_ENTER(c, false);

        Entry *e = client_find_entry(c, cookie, NULL);
        UpdateArgs a = { .cookie = e ? e->broker_cookie : cookie, .value = usec };
        int r = client_call(c, NATIVE_IFACE, "Update", NULL, append_update, &a);
        if (r < 0)
                return r;
        if (e)
                e->value = usec;
        return 0;
}

_public_ int pmqos_cancel(pmqos_client *c, uint32_t cookie) {
        Entry **link = NULL;

        CLIENT_ENTER(c, false);

        Entry *e = client_find_entry(c, cookie, &link);
        uint32_t broker_cookie = e ? e->broker_cookie : cookie;
        int r = client_call(c, NATIVE_IFACE, "Cancel", NULL, append_cookie, &broker_cookie);
        if (r < 0)
                return r;
        if (e) {
                *link = e->next;
                client_entry_free(e);
        }
        return 0;
}

static int append_property_name(sd_bus_message *m, const void *data) {
        return sd_bus_message_append(m, "ss", NATIVE_IFACE, (const char *) data);
}

/* Properties.Get through client_call(), so that the call's timeout holds. */
static int get_property(pmqos_client *c, const char *name, char type, void *ret) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char sig[2] = { type, 0 };

        CLIENT_ENTER(c, !ret);
        int r = client_call(c, "org.freedesktop.DBus.Properties", "Get", &reply, append_property_name, name);
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "v", sig, ret);
        return r < 0 ? client_map_error(c, NULL, r == -ENOMEM ? r : -EBADMSG) : 0;
}

_public_ int pmqos_get_latency(pmqos_client *c, int32_t *ret_usec) {
        return get_property(c, "EffectiveLatency", 'i', ret_usec);
}

_public_ int pmqos_get_kernel_latency(pmqos_client *c, int32_t *ret_usec) {
        return get_property(c, "KernelLatency", 'i', ret_usec);
}

_public_ int pmqos_get_minimum_latency(pmqos_client *c, int32_t *ret_usec) {
        return get_property(c, "MinimumLatency", 'i', ret_usec);
}

_public_ int pmqos_get_request_count(pmqos_client *c, uint32_t *ret_count) {
        return get_property(c, "RequestCount", 'u', ret_count);
}

static int append_floor(sd_bus_message *m, const void *data) {
        return sd_bus_message_append(m, "si", "cpu_dma", *(const int32_t *) data);
}

_public_ int pmqos_set_minimum_latency(pmqos_client *c, int32_t usec) {
        CLIENT_ENTER(c, false);
        return client_call(c, QOS_IFACE, "SetMinimumLatency", NULL, append_floor, &usec);
}
