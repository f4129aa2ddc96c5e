/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* polkit checks without ever blocking the sd-event loop.
 *
 * polkit-gobject-1 needs a running GMainContext. Rather than folding GLib's
 * loop into sd-event (two schedulers, re-entrancy when GLib dispatches from
 * inside an sd-event callback), the context runs on one dedicated thread that
 * does nothing but polkit: the main thread hands it a query with
 * g_main_context_invoke(), the thread calls
 * polkit_authority_check_authorization() asynchronously, and the answer comes
 * back through a mutex-protected queue and an eventfd that sd-event watches.
 * Only the main thread ever touches the daemon's state or runs callbacks. */

#include "bus/auth.h"

#include <errno.h>
#include <gio/gio.h>
#include <polkit/polkit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "util/hashmap.h"
#include "util/log.h"

/* polkitd answers a non-interactive check in milliseconds; past this it is
 * wedged and the caller is better off with a prompt "no" (fail closed). */
#define AUTH_TIMEOUT_MS 5000
/* A person typing a password gets longer, as D-Bus gives a method call. */
#define AUTH_INTERACTIVE_TIMEOUT_MS (5 * 60 * 1000)

struct AuthQuery {
        Auth *auth;
        char *bus_name;
        char *action;
        bool interactive;
        AuthCallback callback;
        void *userdata;
        bool cancelled;    /* main thread only */
        AuthResult result; /* written by the GLib thread before queueing */
        GCancellable *cancellable;
        guint timeout_id;                 /* GLib thread only */
        AuthQuery *next;                  /* in the result queue */
        AuthQuery *live_prev, *live_next; /* main thread: every query not yet delivered */
        bool waiting;                     /* main thread: not yet handed to polkit */
        bool in_flight;                   /* main thread: handed to polkit, not yet answered */
        uint32_t owner;                   /* the caller's uid, for fair turns */
        AuthQuery *wait_prev, *wait_next;
        /* One check answers every identical one asked while it is live (same
         * caller, action and interactivity): the first is the leader, the
         * others its twins, which polkitd never sees. */
        char *key;
        AuthQuery *leader;                /* set on a twin */
        AuthQuery *twins_head;            /* on a leader */
        AuthQuery *twin_prev, *twin_next; /* on a twin */
};

/* Checks of one user that polkitd has at once. */
typedef struct OwnerCount {
        uint32_t owner;
        unsigned n;
} OwnerCount;

struct Auth {
        sd_event_source *event_source;
        int efd;
        GMainContext *context;
        GMainLoop *loop;
        GThread *thread;

        /* GLib thread only. */
        PolkitAuthority *authority;
        unsigned in_flight;
        bool stopping;

        GMutex lock; /* guards the result queue */
        AuthQuery *done_head, *done_tail;

        AuthQuery *live; /* main thread */
        /* Main thread: checks handed to polkit and not yet answered, at most
         * max_in_flight; the rest wait here, first come first served. */
        unsigned n_in_flight, max_in_flight;
        AuthQuery *wait_head, *wait_tail;
        Hashmap in_flight_by_owner; /* uid → OwnerCount, while it has checks at polkitd */
        Hashmap leaders;            /* key → the live leader that twins may join */
};

static AuthQuery *query_free(AuthQuery *q) {
        if (q) {
                g_clear_object(&q->cancellable);
                free(q->bus_name);
                free(q->action);
                free(q->key);
                free(q);
        }
        return NULL;
}

/* ---- GLib thread ---- */

static void thread_maybe_quit(Auth *a) {
        if (a->stopping && a->in_flight == 0)
                g_main_loop_quit(a->loop);
}

static void thread_deliver(AuthQuery *q) {
        Auth *a = q->auth;

        if (q->timeout_id) {
                GSource *timeout = g_main_context_find_source_by_id(a->context, q->timeout_id);
                if (timeout)
                        g_source_destroy(timeout);
                q->timeout_id = 0;
        }

        g_mutex_lock(&a->lock);
        q->next = NULL;
        if (a->done_tail)
                a->done_tail->next = q;
        else
                a->done_head = q;
        a->done_tail = q;
        g_mutex_unlock(&a->lock);

        uint64_t one = 1;
        if (write(a->efd, &one, sizeof(one)) < 0)
                log_error("Cannot wake the main loop for a polkit answer: %m");

        a->in_flight--;
        thread_maybe_quit(a);
}

static gboolean on_check_timeout(gpointer userdata) {
        AuthQuery *q = userdata;
        q->timeout_id = 0;
        log_caller_warning("polkit did not answer about %s for %s in time; denying.", q->action, q->bus_name);
        g_cancellable_cancel(q->cancellable);
        return G_SOURCE_REMOVE;
}

static void on_check_done(GObject *source, GAsyncResult *res, gpointer userdata) {
        AuthQuery *q = userdata;
        g_autoptr(GError) error = NULL;

        g_autoptr(PolkitAuthorizationResult) result =
                polkit_authority_check_authorization_finish(POLKIT_AUTHORITY(source), res, &error);
        if (!result) {
                if (!g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
                        log_caller_warning("polkit check of %s for %s failed: %s", q->action, q->bus_name,
                                           error->message);
                q->result = AUTH_DENIED;
        } else if (polkit_authorization_result_get_is_authorized(result))
                q->result = AUTH_ALLOWED;
        else if (polkit_authorization_result_get_is_challenge(result) && !q->interactive)
                q->result = AUTH_CHALLENGE;
        else
                q->result = AUTH_DENIED;

        thread_deliver(q);
}

static PolkitAuthority *thread_authority(Auth *a) {
        g_autoptr(GError) error = NULL;

        if (a->authority)
                return a->authority;

        /* pmqosd owns its exit: losing the bus must not raise SIGTERM behind its back. */
        g_autoptr(GDBusConnection) bus = g_bus_get_sync(G_BUS_TYPE_SYSTEM, NULL, &error);
        if (!bus) {
                log_warning("polkit unreachable: cannot connect to the system bus: %s", error->message);
                return NULL;
        }
        g_dbus_connection_set_exit_on_close(bus, FALSE);

        a->authority = polkit_authority_get_sync(NULL, &error);
        if (!a->authority)
                log_warning("polkit unreachable: %s", error->message);
        return a->authority;
}

static gboolean thread_start_check(gpointer userdata) {
        AuthQuery *q = userdata;
        Auth *a = q->auth;

        a->in_flight++;
        PolkitAuthority *authority = thread_authority(a);
        if (!authority || g_cancellable_is_cancelled(q->cancellable)) {
                q->result = AUTH_DENIED;
                thread_deliver(q);
                return G_SOURCE_REMOVE;
        }

        g_autoptr(PolkitSubject) subject = polkit_system_bus_name_new(q->bus_name);
        PolkitCheckAuthorizationFlags flags = q->interactive ? POLKIT_CHECK_AUTHORIZATION_FLAGS_ALLOW_USER_INTERACTION
                                                             : POLKIT_CHECK_AUTHORIZATION_FLAGS_NONE;
        /* g_timeout_add() would attach to the global default context: use ours. */
        g_autoptr(GSource) timeout =
                g_timeout_source_new(q->interactive ? AUTH_INTERACTIVE_TIMEOUT_MS : AUTH_TIMEOUT_MS);
        g_source_set_callback(timeout, on_check_timeout, q, NULL);
        q->timeout_id = g_source_attach(timeout, a->context);
        polkit_authority_check_authorization(authority, subject, q->action, NULL, flags, q->cancellable, on_check_done,
                                             q);
        return G_SOURCE_REMOVE;
}

static gboolean thread_stop(gpointer userdata) {
        Auth *a = userdata;
        a->stopping = true;
        thread_maybe_quit(a);
        return G_SOURCE_REMOVE;
}

static gpointer thread_main(gpointer userdata) {
        Auth *a = userdata;

        g_main_context_push_thread_default(a->context);
        g_main_loop_run(a->loop);
        g_clear_object(&a->authority);
        /* Let GDBus finish what the authority's teardown queued. */
        while (g_main_context_iteration(a->context, FALSE))
                ;
        g_main_context_pop_thread_default(a->context);
        return NULL;
}

/* ---- main thread ---- */

static void live_unlink(Auth *a, AuthQuery *q) {
        if (q->live_prev)
                q->live_prev->live_next = q->live_next;
        else
                a->live = q->live_next;
        if (q->live_next)
                q->live_next->live_prev = q->live_prev;
        q->live_prev = q->live_next = NULL;
}

static void wait_unlink(Auth *a, AuthQuery *q) {
        if (q->wait_prev)
                q->wait_prev->wait_next = q->wait_next;
        else
                a->wait_head = q->wait_next;
        if (q->wait_next)
                q->wait_next->wait_prev = q->wait_prev;
        else
                a->wait_tail = q->wait_prev;
        q->wait_prev = q->wait_next = NULL;
        q->waiting = false;
}

/* No more twins join q (answered, or cancelled with nobody to answer). */
static void leader_close(Auth *a, AuthQuery *q) {
        if (q->key && hashmap_get(&a->leaders, q->key) == q)
                hashmap_remove(&a->leaders, q->key);
}

static void twin_unlink(AuthQuery *t) {
        AuthQuery *l = t->leader;
        if (t->twin_prev)
                t->twin_prev->twin_next = t->twin_next;
        else
                l->twins_head = t->twin_next;
        if (t->twin_next)
                t->twin_next->twin_prev = t->twin_prev;
        t->twin_prev = t->twin_next = NULL;
        t->leader = NULL;
}

static unsigned owner_in_flight(Auth *a, uint32_t owner) {
        const OwnerCount *c = hashmap_get(&a->in_flight_by_owner, &owner);
        return c ? c->n : 0;
}

static int dispatch(Auth *a, AuthQuery *q) {
        OwnerCount *c = hashmap_get(&a->in_flight_by_owner, &q->owner);
        if (!c) {
                c = calloc(1, sizeof(OwnerCount));
                if (!c)
                        return -ENOMEM;
                c->owner = q->owner;
                if (hashmap_put(&a->in_flight_by_owner, &c->owner, c) < 0) {
                        free(c);
                        return -ENOMEM;
                }
        }
        c->n++;
        q->in_flight = true;
        a->n_in_flight++;
        g_main_context_invoke(a->context, thread_start_check, q);
        return 0;
}

static void answered(Auth *a, AuthQuery *q) {
        OwnerCount *c = hashmap_get(&a->in_flight_by_owner, &q->owner);
        if (c && --c->n == 0)
                free(hashmap_remove(&a->in_flight_by_owner, &q->owner));
        q->in_flight = false;
        a->n_in_flight--;
}

static bool may_dispatch(Auth *a, uint32_t owner) {
        return a->n_in_flight < a->max_in_flight && owner_in_flight(a, owner) < AUTH_IN_FLIGHT_PER_OWNER;
}

/* First come, first served, but a user with AUTH_IN_FLIGHT_PER_OWNER checks
 * at polkitd waits while others go: one user's flood queues behind itself. */
static void dispatch_waiting(Auth *a) {
        for (AuthQuery *q = a->wait_head, *next; q && a->n_in_flight < a->max_in_flight; q = next) {
                next = q->wait_next;
                if (owner_in_flight(a, q->owner) >= AUTH_IN_FLIGHT_PER_OWNER)
                        continue;
                wait_unlink(a, q);
                if (dispatch(a, q) < 0) {
                        /* Out of memory: it waits again, at the front. */
                        q->waiting = true;
                        q->wait_next = a->wait_head;
                        if (a->wait_head)
                                a->wait_head->wait_prev = q;
                        else
                                a->wait_tail = q;
                        a->wait_head = q;
                        return;
                }
        }
}

static int on_results(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Auth *a = userdata;
        uint64_t n;

        (void) s, (void) revents;
        (void) read(fd, &n, sizeof(n));

        g_mutex_lock(&a->lock);
        AuthQuery *q = a->done_head;
        a->done_head = a->done_tail = NULL;
        g_mutex_unlock(&a->lock);

        while (q) {
                AuthQuery *next = q->next;
                live_unlink(a, q);
                answered(a, q);
                leader_close(a, q);
                if (!q->cancelled)
                        q->callback(q->result, q->userdata);
                /* One at a time from the list: a callback may cancel another twin. */
                for (AuthQuery *t; (t = q->twins_head);) {
                        /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): unlinked before its free */
                        twin_unlink(t);
                        live_unlink(a, t);
                        t->callback(q->result, t->userdata);
                        query_free(t);
                }
                query_free(q);
                q = next;
        }
        dispatch_waiting(a);
        return 0;
}

int auth_new(Auth **ret, sd_event *event, unsigned max_in_flight) {
        int r;

        Auth *a = calloc(1, sizeof(Auth));
        if (!a)
                return -ENOMEM;
        g_mutex_init(&a->lock);
        a->max_in_flight = max_in_flight > 0 ? max_in_flight : 1;
        hashmap_init(&a->in_flight_by_owner, &hashmap_u32_ops);
        hashmap_init(&a->leaders, &hashmap_string_ops);

        a->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (a->efd < 0) {
                r = -errno;
                free(a);
                return r;
        }
        r = sd_event_add_io(event, &a->event_source, a->efd, EPOLLIN, on_results, a);
        if (r < 0) {
                close(a->efd);
                free(a);
                return r;
        }

        a->context = g_main_context_new();
        a->loop = g_main_loop_new(a->context, FALSE);
        a->thread = g_thread_new("pmqosd-polkit", thread_main, a);
        *ret = a;
        return 0;
}

Auth *auth_free(Auth *a) {
        if (!a)
                return NULL;

        /* Whoever still waits hears "no" now, so that nothing it owns leaks;
         * then cancel what is in flight, wait for the thread to see every
         * answer come back (cancelled calls return at once), drop the rest. */
        for (AuthQuery *q = a->live; q; q = q->live_next) {
                if (!q->cancelled) {
                        q->cancelled = true;
                        q->callback(AUTH_DENIED, q->userdata);
                }
                g_cancellable_cancel(q->cancellable);
        }
        while (a->wait_head)
                wait_unlink(a, a->wait_head); /* still on the live list, freed below */
        g_main_context_invoke(a->context, thread_stop, a);
        g_thread_join(a->thread);

        while (a->done_head) {
                AuthQuery *q = a->done_head;
                a->done_head = q->next;
                live_unlink(a, q);
                query_free(q);
        }
        while (a->live) {
                AuthQuery *q = a->live;
                /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): live_unlink() advanced the list before the free */
                live_unlink(a, q);
                query_free(q);
        }

        g_main_loop_unref(a->loop);
        g_main_context_unref(a->context);
        sd_event_source_disable_unref(a->event_source);
        close(a->efd);
        g_mutex_clear(&a->lock);
        OwnerCount *c;
        for (size_t i = 0; hashmap_next(&a->in_flight_by_owner, &i, (void **) &c);)
                free(c);
        hashmap_clear(&a->in_flight_by_owner);
        hashmap_clear(&a->leaders);
        free(a);
        return NULL;
}

void auth_set_max_in_flight(Auth *a, unsigned max_in_flight) {
        a->max_in_flight = max_in_flight > 0 ? max_in_flight : 1;
        dispatch_waiting(a);
}

int auth_check(Auth *a, uint32_t owner, const char *bus_name, const char *action, bool interactive,
               AuthCallback callback, void *userdata, AuthQuery **ret_query) {
        AuthQuery *q = calloc(1, sizeof(AuthQuery));
        if (!q)
                return -ENOMEM;
        q->auth = a;
        q->owner = owner;
        q->bus_name = strdup(bus_name);
        q->action = strdup(action);
        q->interactive = interactive;
        q->callback = callback;
        q->userdata = userdata;
        q->cancellable = g_cancellable_new();
        if (!q->bus_name || !q->action || asprintf(&q->key, "%s\n%s\n%d", bus_name, action, interactive) < 0) {
                q->key = NULL;
                query_free(q);
                return -ENOMEM;
        }

        q->live_next = a->live;
        if (a->live)
                a->live->live_prev = q;
        a->live = q;

        AuthQuery *leader = hashmap_get(&a->leaders, q->key);
        if (leader) {
                /* The same question is being asked: its answer is this one's too. */
                q->leader = leader;
                q->twin_next = leader->twins_head;
                if (leader->twins_head)
                        leader->twins_head->twin_prev = q;
                leader->twins_head = q;
                *ret_query = q;
                return 0;
        }
        (void) hashmap_put(&a->leaders, q->key, q); /* out of memory: it is asked alone */

        if (!may_dispatch(a, owner) || dispatch(a, q) < 0) {
                q->waiting = true;
                q->wait_prev = a->wait_tail;
                if (a->wait_tail)
                        a->wait_tail->wait_next = q;
                else
                        a->wait_head = q;
                a->wait_tail = q;
        }
        *ret_query = q;
        return 0;
}

/* Nobody wants q's answer any more (it is cancelled and has no twins). */
static void abandon(Auth *a, AuthQuery *q) {
        leader_close(a, q);
        if (q->waiting) {
                /* Never reached polkit: gone at once, its place to the next. */
                wait_unlink(a, q);
                live_unlink(a, q);
                query_free(q);
        } else
                g_cancellable_cancel(q->cancellable);
}

AuthQuery *auth_query_cancel(AuthQuery *q) {
        if (!q)
                return NULL;
        Auth *a = q->auth;
        if (q->leader) {
                AuthQuery *l = q->leader;
                twin_unlink(q);
                live_unlink(a, q);
                query_free(q);
                if (l->cancelled && !l->twins_head)
                        abandon(a, l);
                return NULL;
        }
        q->cancelled = true;
        /* Its twins still wait for the answer: the check goes on for them. */
        if (!q->twins_head)
                abandon(a, q);
        return NULL;
}
