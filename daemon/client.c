/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tracking is fully asynchronous: AddMatch for the name's NameOwnerChanged is
 * sent first and GetConnectionCredentials right after it on the same
 * connection, so the bus answers the second only once the match is in place.
 * A successful answer therefore proves that a later departure will be seen;
 * an error (NameHasNoOwner) proves the client already left. */

#include "client.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

#define EXEC_MAX 4096

static SharedString *read_cmdline(pid_t pid) {
        char path[64], buf[EXEC_MAX];
        snprintf(path, sizeof(path), "/proc/%d/cmdline", (int) pid);

        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return shared_string_new("");
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n < 0)
                n = 0;

        /* Arguments joined by spaces; a truncated line is still useful. */
        for (ssize_t i = 0; i < n; i++)
                if (buf[i] == 0 || buf[i] == '\n')
                        buf[i] = ' ';
        while (n > 0 && buf[n - 1] == ' ')
                n--;
        buf[n] = 0;
        return shared_string_new(buf);
}

Client *client_ref(Client *c) {
        if (c)
                c->n_ref++;
        return c;
}

Client *client_unref(Client *c) {
        if (!c || --c->n_ref > 0)
                return NULL;

        sd_bus_slot_unref(c->match_slot);
        sd_bus_slot_unref(c->creds_slot);
        free(c->name);
        shared_string_unref(c->exec);
        free(c);
        return NULL;
}

static void run_waiters(Client *c) {
        /* Callbacks may add waiters or make the client vanish: detach the list first. */
        ClientWaiter *w = c->waiters_head;
        c->waiters_head = c->waiters_tail = NULL;

        client_ref(c);
        while (w) {
                ClientWaiter *next = w->next;
                w->next = NULL;
                w->callback(c, w->userdata);
                w = next;
        }
        client_unref(c);
}

void client_wait(Client *c, ClientWaiter *w) {
        if (c->state != CLIENT_RESOLVING) {
                w->callback(c, w->userdata);
                return;
        }
        w->next = NULL;
        if (c->waiters_tail)
                c->waiters_tail->next = w;
        else
                c->waiters_head = w;
        c->waiters_tail = w;
}

void client_vanished(Client *c) {
        Manager *m = c->manager;

        if (c->state == CLIENT_GONE)
                return;
        c->state = CLIENT_GONE;

        hashmap_remove(&m->clients, c->name);
        c->match_slot = sd_bus_slot_unref(c->match_slot);
        c->creds_slot = sd_bus_slot_unref(c->creds_slot);

        unsigned n = store_drop_owner(&m->store, &c->owner);
        if (n > 0) {
                m->requests_changed = true;
                int r = manager_commit(m);
                if (r < 0)
                        log_error("Cannot lift the requests of %s from %s: %s", c->name, m->sink.path, strerror(-r));
                manager_emit_signals(m);
                log_debug("%s left the bus; %u request(s) released or detached.", c->name, n);
        }

        run_waiters(c);
        client_unref(c); /* the map's reference */
}

static int on_name_owner_changed(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Client *c = userdata;
        const char *name, *old_owner, *new_owner;

        (void) error;
        if (sd_bus_message_read(message, "sss", &name, &old_owner, &new_owner) < 0)
                return 0;
        /* A unique name is never handed to anyone else: any change means it left. */
        if (strcmp(name, c->name) == 0 && new_owner[0] == 0)
                client_vanished(c);
        return 0;
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
                log_error("The bus gave no usable credentials for %s: %s", c->name, strerror(-r));
                client_vanished(c);
                return 0;
        }

        c->uid = uid;
        c->pid = (pid_t) pid;
        c->exec = read_cmdline(c->pid);
        if (!c->exec) {
                client_vanished(c);
                return 0;
        }
        c->state = CLIENT_READY;
        run_waiters(c);
        return 0;
}

int client_get(Manager *m, const char *name, Client **ret) {
        char match[400];
        int r;

        Client *c = hashmap_get(&m->clients, name);
        if (c) {
                *ret = c;
                return 0;
        }

        if (!name || name[0] != ':' || strlen(name) > 200)
                return -EINVAL; /* only unique names can send us method calls */

        c = calloc(1, sizeof(Client));
        if (!c)
                return -ENOMEM;
        c->n_ref = 1;
        c->manager = m;
        c->state = CLIENT_RESOLVING;
        c->name = strdup(name);
        c->owner.name = c->name;
        if (!c->name) {
                client_unref(c);
                return -ENOMEM;
        }

        snprintf(match, sizeof(match),
                 "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
                 "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='%s'",
                 name);
        r = sd_bus_add_match_async(m->bus, &c->match_slot, match, on_name_owner_changed, NULL, c);
        if (r >= 0)
                r = sd_bus_call_method_async(m->bus, &c->creds_slot, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                             "org.freedesktop.DBus", "GetConnectionCredentials", on_credentials, c, "s",
                                             name);
        if (r >= 0)
                r = hashmap_put(&m->clients, c->name, c);
        if (r < 0) {
                client_unref(c);
                return r;
        }

        *ret = c;
        return 0;
}

void clients_free_all(Manager *m) {
        Client *c;
        size_t i;

        /* The store is freed first, so every owner list is empty by now. */
        while ((i = 0, hashmap_next(&m->clients, &i, (void **) &c))) {
                hashmap_remove(&m->clients, c->name);
                c->state = CLIENT_GONE;
                run_waiters(c);
                /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): c left the map before it was freed */
                client_unref(c);
        }
        hashmap_clear(&m->clients);
}
