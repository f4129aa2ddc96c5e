/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* polkit checks without ever blocking the sd-event loop.
 *
 * polkit-gobject-1 needs a running GMainContext. Rather than folding GLib's
 * loop into sd-event (two schedulers, re-entrancy when GLib dispatches from
 * inside an sd-event callback), the context runs on one dedicated thread that
 * does nothing but polkit: the main thread hands it a query with
 * an idle source on its context, the thread calls
 * polkit_authority_check_authorization() asynchronously, and the answer comes
 * back through a mutex-protected queue and an eventfd that sd-event watches.
 * Only the main thread ever touches the daemon's state or runs callbacks. */

#include "bus/auth.h"
#include "bus/auth-thread.h"

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
#include "util/text.h"

AuthQuery *auth_query_free(AuthQuery *q) {
        if (q) {
                g_clear_object(&q->cancellable);
                free(q->bus_name);
                free(q->action);
                free(q->key);
                free(q);
        }
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
        q->wait_timer = sd_event_source_disable_unref(q->wait_timer);
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

/* fn on the polkit thread, always: g_main_context_invoke() would run it
 * here when the thread does not hold the context yet (its context is GLib's
 * default one, which is also this thread's default). */
static void run_on_thread(Auth *a, GSourceFunc fn, void *data) {
        GSource *s = g_idle_source_new();
        g_source_set_priority(s, G_PRIORITY_DEFAULT);
        g_source_set_callback(s, fn, data, NULL);
        g_source_attach(s, a->context);
        g_source_unref(s);
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
        run_on_thread(a, auth_thread_start_check, q);
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

static int on_wait_timeout(sd_event_source *s, uint64_t usec, void *userdata);

/* q waits for a place at polkitd, at the back (or the front), for as long
 * as it would wait for polkitd's answer: with every place held by checks
 * polkitd does not answer, it is refused at its deadline, not when polkitd
 * wakes up or its caller gives up. Without memory for the timer it waits
 * without one, as long as its caller does. */
static void wait_push(Auth *a, AuthQuery *q, bool front) {
        q->waiting = true;
        if (front) {
                q->wait_next = a->wait_head;
                if (a->wait_head)
                        a->wait_head->wait_prev = q;
                else
                        a->wait_tail = q;
                a->wait_head = q;
        } else {
                q->wait_prev = a->wait_tail;
                if (a->wait_tail)
                        a->wait_tail->wait_next = q;
                else
                        a->wait_head = q;
                a->wait_tail = q;
        }
        if (!q->wait_timer) {
                uint64_t ms = q->interactive ? AUTH_INTERACTIVE_TIMEOUT_MS : AUTH_TIMEOUT_MS;
                (void) sd_event_add_time(a->event, &q->wait_timer, CLOCK_MONOTONIC, q->asked + ms * 1000, 1000,
                                         on_wait_timeout, q);
        }
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
                        wait_push(a, q, true); /* out of memory: it waits again, at the front */
                        return;
                }
        }
}

/* q's answer to whoever asked, and to its twins. */
static void give_answer(Auth *a, AuthQuery *q) {
        q->answer_given = true;
        live_unlink(a, q);
        leader_close(a, q);
        if (!q->cancelled)
                q->callback(q->result, q->userdata);
        /* One at a time from the list: a callback may cancel another twin. */
        for (AuthQuery *t; (t = q->twins_head);) {
                /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): unlinked before its free */
                twin_unlink(t);
                live_unlink(a, t);
                t->callback(q->result, t->userdata);
                auth_query_free(t);
        }
}

/* q waited its time for a place at polkitd: every place is held by a check
 * polkitd has not answered (or by a user's own). Refused as one polkitd
 * does not answer is; it never reached polkitd, so it simply goes. */
static int on_wait_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        AuthQuery *q = userdata;
        Auth *a = q->auth;

        (void) s, (void) usec;
        log_caller_warning("A check of %s for %s waited %u s for a place at polkit (%u of %u taken, %u of them "
                           "this user's); denying.",
                           q->action, q->bus_name,
                           (unsigned) ((q->interactive ? AUTH_INTERACTIVE_TIMEOUT_MS : AUTH_TIMEOUT_MS) / 1000),
                           a->n_in_flight, a->max_in_flight, owner_in_flight(a, q->owner));
        wait_unlink(a, q);
        q->result = AUTH_UNAVAILABLE;
        give_answer(a, q);
        auth_query_free(q);
        return 0;
}

/* A check comes back answered, and once polkit-gobject-1 let go of it
 * (at once, unless it timed out: auth-thread.c) its place at polkitd is
 * free and so is it. */
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
                g_mutex_lock(&a->lock);
                AuthQuery *next = q->next;
                q->queued = false; /* from here the thread may queue it again */
                bool let_go = !q->timed_out || q->call_done;
                g_mutex_unlock(&a->lock);
                if (let_go)
                        answered(a, q);
                if (!q->answer_given)
                        give_answer(a, q);
                if (let_go)
                        auth_query_free(q);
                q = next;
        }
        dispatch_waiting(a);
        return 0;
}

/* What GLib and libpolkit log (a caller that left before polkitd looked at
 * it makes one warning each) takes pmqosd's limit for lines callers can
 * cause, escaped like every caller's text. */
static GLogWriterOutput glib_writer(GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer data) {
        (void) data;
        for (gsize i = 0; i < n_fields; i++) {
                if (strcmp(fields[i].key, "MESSAGE") != 0)
                        continue;
                size_t len = fields[i].length < 0 ? strlen(fields[i].value) : (size_t) fields[i].length;
                char *text = text_clean(fields[i].value, len, 1024);
                if (level & (G_LOG_LEVEL_DEBUG | G_LOG_LEVEL_INFO))
                        log_debug("GLib: %s", text ? text : "?");
                else
                        log_caller_warning("GLib: %s", text ? text : "?");
                free(text);
        }
        return G_LOG_WRITER_HANDLED;
}

int auth_new(Auth **ret, sd_event *event, unsigned max_in_flight) {
        static bool writer_set;
        int r;

        if (!writer_set) {
                g_log_set_writer_func(glib_writer, NULL, NULL);
                writer_set = true;
        }

        Auth *a = calloc(1, sizeof(Auth));
        if (!a)
                return -ENOMEM;
        g_mutex_init(&a->lock);
        a->event = event;
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

        /* GLib's global default context, which nothing else in pmqosd
         * runs: polkit-gobject-1 makes its proxy on a worker thread
         * (polkit_authority_get_async()), and the proxy's NameOwnerChanged
         * subscription (a restarted polkitd) is dispatched there. */
        a->context = g_main_context_ref(g_main_context_default());
        a->loop = g_main_loop_new(a->context, FALSE);
        a->stop_cancellable = g_cancellable_new();
        a->thread = g_thread_new("pmqosd-polkit", auth_thread_main, a);
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
                        q->callback(AUTH_UNAVAILABLE, q->userdata);
                }
                g_cancellable_cancel(q->cancellable);
        }
        while (a->wait_head)
                wait_unlink(a, a->wait_head); /* still on the live list, freed below */
        run_on_thread(a, auth_thread_stop, a);
        g_thread_join(a->thread);

        while (a->done_head) {
                AuthQuery *q = a->done_head;
                a->done_head = q->next;
                if (!q->answer_given) /* a timed-out one that was answered is no longer live */
                        live_unlink(a, q);
                auth_query_free(q);
        }
        while (a->live) {
                AuthQuery *q = a->live;
                /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): live_unlink() advanced the list before the free */
                live_unlink(a, q);
                auth_query_free(q);
        }

        g_main_loop_unref(a->loop);
        g_main_context_unref(a->context);
        g_object_unref(a->stop_cancellable);
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
                auth_query_free(q);
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
                (void) sd_event_now(a->event, CLOCK_MONOTONIC, &q->asked);
                wait_push(a, q, false);
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
                auth_query_free(q);
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
                auth_query_free(q);
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
