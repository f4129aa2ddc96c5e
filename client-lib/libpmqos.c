/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libpmqos on sd-bus: one private system bus connection per client, a local
 * record of the requests made through it (to issue them again when the
 * broker restarts), and error names mapped to errno values. */

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>

#include "libpmqos-internal.h"

/* How long pmqos_client_free() waits for a broker that does not answer. */
#define RELEASE_TIMEOUT_USEC (5u * 1000000u)

static uint64_t now_monotonic_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static void set_last_error(pmqos_client *c, const char *message) {
        free(c->last_error);
        c->last_error = message ? strdup(message) : NULL;
}

int client_map_error(pmqos_client *c, const sd_bus_error *e, int r) {
        static const struct {
                const char *name;
                int errnum;
        } table[] = {
                { SD_BUS_ERROR_ACCESS_DENIED, EACCES },
                { SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED, EACCES },
                { SD_BUS_ERROR_INVALID_ARGS, EINVAL },
                { PMQOS_ERROR_NO_SUCH_REQUEST, ENOENT },
                { SD_BUS_ERROR_LIMITS_EXCEEDED, EUSERS },
                { SD_BUS_ERROR_NOT_SUPPORTED, EOPNOTSUPP },
                { SD_BUS_ERROR_SERVICE_UNKNOWN, ECONNREFUSED },
                { SD_BUS_ERROR_NAME_HAS_NO_OWNER, ECONNREFUSED },
                { SD_BUS_ERROR_NO_REPLY, ECONNREFUSED },
                { SD_BUS_ERROR_UNKNOWN_OBJECT, ECONNREFUSED },
                { PMQOS_ERROR_FAILED, EIO },
                { SD_BUS_ERROR_NO_MEMORY, ENOMEM },
        };

        if (e && sd_bus_error_is_set(e)) {
                set_last_error(c, e->message ?: e->name);
                for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
                        if (strcmp(e->name, table[i].name) == 0)
                                return -table[i].errnum;
                int k = sd_bus_error_get_errno(e);
                return k > 0 ? -k : -EIO;
        }
        if (r == -ENOTCONN || r == -ECONNRESET)
                set_last_error(c, "The connection to the system bus was lost.");
        return r < 0 ? r : -EIO;
}

/* ---- requests we made ---- */

static Entry *entry_free(Entry *e) {
        if (e) {
                free(e->reason);
                free(e->cpus);
                free(e);
        }
        return NULL;
}

static Entry *find_entry(pmqos_client *c, uint32_t cookie, Entry ***ret_link) {
        for (Entry **p = &c->entries; *p; p = &(*p)->next)
                if ((*p)->cookie == cookie) {
                        if (ret_link)
                                *ret_link = p;
                        return *p;
                }
        return NULL;
}

/* ---- calls ---- */

int client_call(pmqos_client *c, const char *iface, const char *member, sd_bus_message **ret_reply,
                int (*append)(sd_bus_message *m, const void *data), const void *data) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        int r;

        r = sd_bus_message_new_method_call(c->bus, &m, BUS_NAME, OBJECT_PATH, iface, member);
        if (r < 0)
                return client_map_error(c, NULL, r);
        if (append) {
                r = append(m, data);
                if (r < 0)
                        return client_map_error(c, NULL, r);
        }
        if (c->interactive) {
                r = sd_bus_message_set_allow_interactive_authorization(m, true);
                if (r < 0)
                        return client_map_error(c, NULL, r);
        }
        r = sd_bus_call(c->bus, m, c->interactive ? INTERACTIVE_TIMEOUT_USEC : 0, &e, ret_reply);
        if (r < 0)
                return client_map_error(c, &e, r);
        set_last_error(c, NULL);
        return 0;
}

typedef struct RequestArgs {
        int32_t value;
        const char *reason;
        uint32_t timeout_sec;
        const uint32_t *cpus;
        size_t n_cpus;
        bool persistent;
} RequestArgs;

static int append_request(sd_bus_message *m, const void *data) {
        const RequestArgs *a = data;
        int r;

        r = sd_bus_message_append(m, "si", "cpu_dma", a->value);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(m, 'a', "{sv}");
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

static int issue(pmqos_client *c, const RequestArgs *a, uint32_t *ret_cookie) {
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
        uint64_t now = now_monotonic_usec();
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
                                entry_free(e);
                                continue;
                        }
                        timeout = (uint32_t) ((e->deadline_usec - now) / 1000000u);
                }
                RequestArgs a = { .value = e->value,
                                  .reason = e->reason,
                                  .timeout_sec = timeout,
                                  .cpus = e->cpus,
                                  .n_cpus = e->n_cpus };
                if (issue(c, &a, &e->broker_cookie) < 0) {
                        /* Lost for good (denied now, limits…): forget it rather than lie. */
                        *p = e->next;
                        entry_free(e);
                        continue;
                }
                p = &e->next;
        }
        free(c->last_error);
        c->last_error = saved_error;
}

bool client_from_broker(pmqos_client *c, sd_bus_message *m) {
        const char *sender = sd_bus_message_get_sender(m);
        return c->broker && sender && strcmp(sender, c->broker) == 0;
}

static void set_broker(pmqos_client *c, const char *unique) {
        free(c->broker);
        c->broker = unique && unique[0] ? strdup(unique) : NULL;
}

void client_emit(pmqos_client *c, pmqos_event event, int32_t usec) {
        if (c->callback)
                c->callback(c, event, usec, c->userdata);
}

static int on_name_owner_changed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        pmqos_client *c = userdata;
        const char *name, *old_owner, *new_owner;

        (void) error;
        /* The bus's word only: a peer may send us a look-alike directly, and
         * sd-bus's match on a well-known sender lets it through. */
        const char *sender = sd_bus_message_get_sender(m);
        if (!sender || strcmp(sender, "org.freedesktop.DBus") != 0 || !sd_bus_message_has_signature(m, "sss") ||
            sd_bus_message_read(m, "sss", &name, &old_owner, &new_owner) < 0 || strcmp(name, BUS_NAME) != 0)
                return 0;
        set_broker(c, new_owner);
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

int client_dispatch(pmqos_client *c) {
        int r;
        while ((r = sd_bus_process(c->bus, NULL)) > 0)
                ;
        if (r < 0)
                return client_map_error(c, NULL, r);
        return 0;
}

/* ---- public API ---- */

_public_ int pmqos_client_new(pmqos_client **ret) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        if (!ret)
                return -EINVAL;

        pmqos_client *c = calloc(1, sizeof(pmqos_client));
        if (!c)
                return -ENOMEM;
        pthread_mutexattr_t attr;
        pthread_mutexattr_init(&attr);
        pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
        pthread_mutex_init(&c->lock, &attr);
        pthread_mutexattr_destroy(&attr);
        c->wake_fd = -1;

        r = sd_bus_open_system(&c->bus);
        if (r < 0) {
                pthread_mutex_destroy(&c->lock);
                free(c);
                return r == -ENOMEM ? r : -EHOSTDOWN;
        }
        /* Only the broker's own name: no wake-ups for everyone else's comings and goings. */
        r = sd_bus_add_match(c->bus, &c->owner_slot,
                             "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
                             "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='" BUS_NAME "'",
                             on_name_owner_changed, c);
        if (r < 0) {
                pmqos_client_free(c);
                return r == -ENOMEM ? r : -EHOSTDOWN;
        }

        /* Make sure someone answers (the bus may start it for us); the answer names the broker. */
        r = client_call(c, "org.freedesktop.DBus.Peer", "Ping", &reply, NULL, NULL);
        if (r < 0) {
                pmqos_client_free(c);
                return r;
        }
        set_broker(c, sd_bus_message_get_sender(reply));
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
        uint64_t deadline = now_monotonic_usec() + RELEASE_TIMEOUT_USEC;

        if (c->broker_gone)
                return; /* its bounds went with it */
        for (Entry *e = c->entries; e; e = e->next) {
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
                if (e->persistent || e->deadline_usec > 0)
                        continue;
                if (sd_bus_message_new_method_call(c->bus, &m, BUS_NAME, OBJECT_PATH, NATIVE_IFACE, "Cancel") < 0 ||
                    sd_bus_message_append(m, "u", e->broker_cookie) < 0 ||
                    sd_bus_call_async(c->bus, NULL, m, on_released, &rel, RELEASE_TIMEOUT_USEC) < 0)
                        break; /* the connection is gone: so are its requests */
                rel.n_pending++;
        }
        while (rel.n_pending > 0) {
                int r = sd_bus_process(c->bus, NULL);
                if (r > 0)
                        continue;
                uint64_t now = now_monotonic_usec();
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
                entry_free(e);
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

        if (!c || !ret_cookie || (n_cpus > 0 && !cpus) || (flags & ~(uint64_t) PMQOS_REQUEST_PERSISTENT))
                return -EINVAL;
        CLIENT_SCOPE(c);
        r = client_dispatch(c);
        if (r < 0)
                return r;

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
                entry_free(e);
                return -ENOMEM;
        }
        if (timeout_sec > 0)
                e->deadline_usec = now_monotonic_usec() + (uint64_t) timeout_sec * 1000000u;

        RequestArgs a = { .value = usec,
                          .reason = reason,
                          .timeout_sec = timeout_sec,
                          .cpus = cpus,
                          .n_cpus = n_cpus,
                          .persistent = e->persistent };
        r = issue(c, &a, &cookie);
        if (r < 0) {
                entry_free(e);
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
        if (!c)
                return -EINVAL;
        CLIENT_SCOPE(c);
        int r = client_dispatch(c);
        if (r < 0)
                return r;

        Entry *e = find_entry(c, cookie, NULL);
        UpdateArgs a = { .cookie = e ? e->broker_cookie : cookie, .value = usec };
        r = client_call(c, NATIVE_IFACE, "Update", NULL, append_update, &a);
        if (r < 0)
                return r;
        if (e)
                e->value = usec;
        return 0;
}

_public_ int pmqos_cancel(pmqos_client *c, uint32_t cookie) {
        Entry **link = NULL;

        if (!c)
                return -EINVAL;
        CLIENT_SCOPE(c);
        int r = client_dispatch(c);
        if (r < 0)
                return r;

        Entry *e = find_entry(c, cookie, &link);
        uint32_t broker_cookie = e ? e->broker_cookie : cookie;
        r = client_call(c, NATIVE_IFACE, "Cancel", NULL, append_cookie, &broker_cookie);
        if (r < 0)
                return r;
        if (e) {
                *link = e->next;
                entry_free(e);
        }
        return 0;
}

static int get_property(pmqos_client *c, const char *name, char type, void *ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        int r;

        if (!c || !ret)
                return -EINVAL;
        CLIENT_SCOPE(c);
        r = client_dispatch(c);
        if (r < 0)
                return r;
        r = type == 'i' ? sd_bus_get_property_trivial(c->bus, BUS_NAME, OBJECT_PATH, NATIVE_IFACE, name, &e, 'i',
                                                      (int32_t *) ret)
                        : sd_bus_get_property_trivial(c->bus, BUS_NAME, OBJECT_PATH, NATIVE_IFACE, name, &e, 'u',
                                                      (uint32_t *) ret);
        if (r < 0)
                return client_map_error(c, &e, r);
        set_last_error(c, NULL);
        return 0;
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
        if (!c)
                return -EINVAL;
        CLIENT_SCOPE(c);
        int r = client_dispatch(c);
        if (r < 0)
                return r;
        return client_call(c, QOS_IFACE, "SetMinimumLatency", NULL, append_floor, &usec);
}
