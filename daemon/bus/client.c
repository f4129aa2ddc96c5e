/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Departures are seen through one match, installed at start, on every
 * NameOwnerChanged that ends a name: no per-client match that could exhaust
 * the bus's quota of matches, and nothing to fail per client. A new client's
 * GetConnectionCredentials is answered after that match is in place, so a
 * success proves a later departure will be seen; an error (NameHasNoOwner)
 * proves it already left. */

#include "bus/client.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cpuidle.h"
#include "util/log.h"
#include "util/text.h"

/* /proc/PID/cmdline is read up to this much; what is kept is PMQOS_EXEC_MAX. */
#define CMDLINE_READ_MAX 4096

char *process_command_line(pid_t pid) {
        char path[64], buf[CMDLINE_READ_MAX];
        snprintf(path, sizeof(path), "/proc/%d/cmdline", (int) pid);

        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd < 0 ? 0 : read(fd, buf, sizeof(buf));
        if (fd >= 0)
                close(fd);
        if (n < 0)
                n = 0;

        /* Arguments joined by spaces; a truncated line is still useful. */
        for (ssize_t i = 0; i < n; i++)
                if (buf[i] == 0)
                        buf[i] = ' ';
        while (n > 0 && buf[n - 1] == ' ')
                n--;
        /* Anything else a process put there is escaped: it reaches the bus and terminals. */
        return text_clean(buf, (size_t) n, PMQOS_EXEC_MAX);
}

/* The last ".service" or ".scope" component of a control group path. */
static void unit_of_cgroup(const char *path, char *unit, size_t size) {
        const char *best = NULL;
        size_t best_len = 0;
        for (const char *p = path; *p;) {
                const char *end = strchr(p, '/');
                size_t len = end ? (size_t) (end - p) : strlen(p);
                if ((len > 8 && memcmp(p + len - 8, ".service", 8) == 0) ||
                    (len > 6 && memcmp(p + len - 6, ".scope", 6) == 0)) {
                        best = p;
                        best_len = len;
                }
                p += len + (end ? 1 : 0);
        }
        if (best)
                snprintf(unit, size, "%.*s", (int) (best_len < size ? best_len : size - 1), best);
}

/* What reaches the bus and Prometheus labels: printable ASCII only. */
static void printable(char *s) {
        for (; *s; s++)
                if ((unsigned char) *s < 0x20 || (unsigned char) *s >= 0x7f)
                        *s = '?';
}

Origin *process_origin(pid_t pid) {
        char path[64], buf[4096], comm[PMQOS_COMM_MAX] = "", unit[PMQOS_UNIT_MAX] = "";
        snprintf(path, sizeof(path), "/proc/%d/comm", (int) pid);
        if (pid > 0 && sysfs_read_at(AT_FDCWD, path, buf, sizeof(buf)) > 0)
                snprintf(comm, sizeof(comm), "%.15s", buf);
        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int) pid);
        if (pid > 0 && sysfs_read_at(AT_FDCWD, path, buf, sizeof(buf)) > 0) {
                char *v2 = strstr(buf, "0::");
                if (v2) {
                        char *nl = strchr(v2, '\n');
                        if (nl)
                                *nl = 0;
                        unit_of_cgroup(v2 + 3, unit, sizeof(unit));
                }
        }
        printable(comm);
        printable(unit);
        return origin_new(comm, unit);
}

static SharedString *read_cmdline(pid_t pid) {
        char *clean = process_command_line(pid);
        if (!clean)
                return NULL;
        SharedString *s = shared_string_new(clean);
        free(clean);
        return s;
}

Client *client_ref(Client *c) {
        if (c)
                c->n_ref++;
        return c;
}

Client *client_unref(Client *c) {
        if (!c || --c->n_ref > 0)
                return NULL;

        sd_bus_slot_unref(c->creds_slot);
        shared_string_unref(c->exec);
        origin_unref(c->origin);
        free(c);
        return NULL;
}

/* ---- idle clients: a bounded cache, oldest first ---- */

static void idle_unlink(Client *c) {
        Clients *m = c->registry;
        if (!c->idle)
                return;
        if (c->idle_prev)
                c->idle_prev->idle_next = c->idle_next;
        else
                m->idle_head = c->idle_next;
        if (c->idle_next)
                c->idle_next->idle_prev = c->idle_prev;
        else
                m->idle_tail = c->idle_prev;
        c->idle_prev = c->idle_next = NULL;
        c->idle = false;
        m->n_idle--;
}

/* Stops tracking a client that holds nothing and waits for nothing. */
static void client_forget(Client *c) {
        idle_unlink(c);
        hashmap_remove(&c->registry->by_name, c->name);
        c->state = CLIENT_GONE;
        client_unref(c); /* the map's reference */
}

static bool is_idle(const Client *c) {
        return c->state == CLIENT_READY && c->n_waiters == 0 && c->owner.n_requests == 0;
}

/* Forgets the oldest client of the idle list that still is idle; one that
 * is busy again only leaves the list. Returns whether one was forgotten. */
static bool forget_oldest_idle(Clients *m) {
        while (m->idle_head) {
                Client *c = m->idle_head;
                if (is_idle(c)) {
                        client_forget(c);
                        return true;
                }
                idle_unlink(c);
        }
        return false;
}

static void check_idle(Client *c) {
        Clients *m = c->registry;

        if (c->idle || !is_idle(c))
                return;
        /* Room first: the oldest goes, never c itself. */
        if (m->n_idle >= CLIENT_IDLE_MAX)
                (void) forget_oldest_idle(m);
        c->idle = true;
        c->idle_next = NULL;
        c->idle_prev = m->idle_tail;
        if (m->idle_tail)
                m->idle_tail->idle_next = c;
        else
                m->idle_head = c;
        m->idle_tail = c;
        m->n_idle++;
}

static void on_owner_emptied(RequestOwner *o) {
        check_idle((Client *) ((char *) o - offsetof(Client, owner)));
}

/* ---- calls in progress ---- */

void client_wait(Client *c, ClientWaiter *w) {
        idle_unlink(c);
        w->linked = true;
        w->told_ready = false;
        w->next = NULL;
        w->prev = c->waiters_tail;
        if (c->waiters_tail)
                c->waiters_tail->next = w;
        else
                c->waiters_head = w;
        c->waiters_tail = w;
        c->n_waiters++;
        if (c->state != CLIENT_RESOLVING) {
                w->told_ready = true;
                w->callback(c, w->userdata);
        }
}

static void waiter_unlink(Client *c, ClientWaiter *w) {
        if (!w->linked)
                return;
        if (w->prev)
                w->prev->next = w->next;
        else
                c->waiters_head = w->next;
        if (w->next)
                w->next->prev = w->prev;
        else
                c->waiters_tail = w->prev;
        w->prev = w->next = NULL;
        w->linked = false;
        c->n_waiters--;
}

void client_unwait(Client *c, ClientWaiter *w) {
        if (!c)
                return;
        waiter_unlink(c, w);
        check_idle(c);
}

/* Tells every waiter not told yet that the credentials are known. A
 * callback may end any call of the list, so look again from the start. */
static void tell_ready(Client *c) {
        client_ref(c);
        for (;;) {
                ClientWaiter *w = c->waiters_head;
                while (w && w->told_ready)
                        w = w->next;
                if (!w || c->state != CLIENT_READY)
                        break;
                w->told_ready = true;
                w->callback(c, w->userdata);
        }
        check_idle(c);
        client_unref(c);
}

/* Ends every call in progress: each waiter hears GONE once, unlinked first. */
static void tell_gone(Client *c) {
        ClientWaiter *w;
        client_ref(c);
        while ((w = c->waiters_head)) {
                waiter_unlink(c, w);
                w->callback(c, w->userdata);
        }
        client_unref(c);
}

/* The client left: whoever owns its requests hears it first, then its
 * calls in progress, and the record goes. */
static void client_vanished(Client *c) {
        Clients *cs = c->registry;

        if (c->state == CLIENT_GONE)
                return;
        c->state = CLIENT_GONE;

        idle_unlink(c);
        hashmap_remove(&cs->by_name, c->name);
        c->creds_slot = sd_bus_slot_unref(c->creds_slot);
        /* The map's reference keeps c until the end. */
        if (cs->departed)
                cs->departed(c, cs->userdata);
        tell_gone(c);
        client_unref(c);
}

static int on_name_owner_changed(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Clients *cs = userdata;
        const char *name, *old_owner, *new_owner;

        (void) error;
        /* Only the bus's word counts. sd-bus matches a well-known sender
         * locally against any unique one, so a peer's NameOwnerChanged sent
         * to us directly would pass the match: it must not end anyone's
         * requests. */
        if (!bus_message_from_driver(message) || !sd_bus_message_has_signature(message, "sss") ||
            sd_bus_message_read(message, "sss", &name, &old_owner, &new_owner) < 0)
                return 0;
        /* A unique name is never handed to anyone else: losing its owner means it left. */
        if (name[0] != ':' || new_owner[0] != 0)
                return 0;
        Client *c = hashmap_get(&cs->by_name, name);
        if (c)
                client_vanished(c);
        return 0;
}

void clients_init(Clients *cs, unsigned max, void (*departed)(Client *c, void *userdata), void *userdata) {
        *cs = (Clients){ .max = max, .departed = departed, .userdata = userdata };
        hashmap_init(&cs->by_name, &hashmap_string_ops);
}

int clients_watch(Clients *cs, sd_bus *bus) {
        cs->bus = bus;
        /* arg2='' : only a name losing its owner, which for a unique name is a departure. */
        return sd_bus_add_match(bus, NULL,
                                "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
                                "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg2=''",
                                on_name_owner_changed, cs);
}

static int read_credentials(sd_bus_message *reply, uint32_t *uid, uint32_t *pid) {
        bool have_uid = false, have_pid = false;
        int r;

        r = sd_bus_message_enter_container(reply, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                const char *key;
                r = sd_bus_message_read(reply, "s", &key);
                if (r < 0)
                        return r;
                if (strcmp(key, "UnixUserID") == 0) {
                        r = sd_bus_message_read(reply, "v", "u", uid);
                        have_uid = r >= 0;
                } else if (strcmp(key, "ProcessID") == 0) {
                        r = sd_bus_message_read(reply, "v", "u", pid);
                        have_pid = r >= 0;
                } else
                        r = sd_bus_message_skip(reply, "v");
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(reply);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        if (!have_uid || !have_pid)
                return -ENODATA;
        return 0;
}

static int on_credentials(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Client *c = userdata;
        uint32_t uid = 0, pid = 0;
        int r;

        (void) error;
        c->creds_slot = sd_bus_slot_unref(c->creds_slot);

        const sd_bus_error *e = sd_bus_message_get_error(reply);
        if (e) {
                /* NameHasNoOwner: it left before we could see it leave. */
                log_debug("%s is gone before its credentials were known: %s", c->name, e->message);
                client_vanished(c);
                return 0;
        }

        r = read_credentials(reply, &uid, &pid);
        if (r < 0) {
                log_error_errno(r, "The bus gave no usable credentials for %s: %m", c->name);
                client_vanished(c);
                return 0;
        }

        c->uid = uid;
        c->pid = (pid_t) pid;
        c->exec = read_cmdline(c->pid);
        c->origin = process_origin(c->pid);
        if (!c->exec || !c->origin) {
                client_vanished(c);
                return 0;
        }
        c->state = CLIENT_READY;
        if (c->registry->resolved)
                c->registry->resolved(c, c->registry->resolved_userdata);
        tell_ready(c);
        return 0;
}

int client_get(Clients *m, const char *name, Client **ret) {
        int r;

        Client *c = hashmap_get(&m->by_name, name);
        if (c) {
                *ret = c;
                return 0;
        }

        if (!name || name[0] != ':' || strlen(name) > 200)
                return -EINVAL; /* only unique names can send us method calls */
        if (hashmap_size(&m->by_name) >= m->max && !forget_oldest_idle(m))
                return -EUSERS;

        size_t len = strlen(name);
        c = calloc(1, sizeof(Client) + len + 1);
        if (!c)
                return -ENOMEM;
        c->n_ref = 1;
        c->registry = m;
        c->state = CLIENT_RESOLVING;
        memcpy(c->name, name, len + 1);
        c->owner.name = c->name;
        c->owner.emptied = on_owner_emptied;

        r = sd_bus_call_method_async(m->bus, &c->creds_slot, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                     "org.freedesktop.DBus", "GetConnectionCredentials", on_credentials, c, "s", name);
        if (r >= 0)
                r = hashmap_put(&m->by_name, c->name, c);
        if (r < 0) {
                client_unref(c);
                return r;
        }

        *ret = c;
        return 0;
}

void clients_done(Clients *m) {
        Client *c;
        size_t i;

        /* The store is freed first, so every owner list is empty by now. */
        while ((i = 0, hashmap_next(&m->by_name, &i, (void **) &c))) {
                hashmap_remove(&m->by_name, c->name);
                idle_unlink(c);
                c->state = CLIENT_GONE;
                tell_gone(c);
                /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): c left the map before it was freed */
                client_unref(c);
        }
        hashmap_clear(&m->by_name);
}
