/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The polkit thread (auth.c says why there is one): its GMainContext runs
 * the checks polkit-gobject-1 makes asynchronously, and hands each answer
 * back through the result queue and the eventfd. It never touches the
 * daemon's state. */

#include <errno.h>
#include <gio/gio.h>
#include <polkit/polkit.h>
#include <stdint.h>
#include <unistd.h>

#include "bus/auth-thread.h"
#include "util/log.h"

static void thread_maybe_quit(Auth *a) {
        if (a->stopping && a->in_flight == 0)
                g_main_loop_quit(a->loop);
}

/* Under a->lock: q goes to the main thread, unless it is on its way already. */
static bool queue_locked(Auth *a, AuthQuery *q) {
        if (q->queued)
                return false;
        q->queued = true;
        q->next = NULL;
        if (a->done_tail)
                a->done_tail->next = q;
        else
                a->done_head = q;
        a->done_tail = q;
        return true;
}

static void wake_main(Auth *a) {
        uint64_t one = 1;
        if (write(a->efd, &one, sizeof(one)) < 0)
                log_error("Cannot wake the main loop for a polkit answer: %m");
}

/* Hands q (its answer, or that polkit-gobject-1 let go of it) to the main thread. */
static void queue_answer(Auth *a, AuthQuery *q, bool call_done) {
        g_mutex_lock(&a->lock);
        if (call_done)
                q->call_done = true;
        bool queued = queue_locked(a, q);
        g_mutex_unlock(&a->lock);
        if (queued)
                wake_main(a);
}

/* polkit-gobject-1 is done with q. */
static void call_done(Auth *a) {
        a->in_flight--;
        thread_maybe_quit(a);
}

static void thread_deliver(AuthQuery *q) {
        Auth *a = q->auth;

        if (q->timeout_id) {
                GSource *timeout = g_main_context_find_source_by_id(a->context, q->timeout_id);
                if (timeout)
                        g_source_destroy(timeout);
                q->timeout_id = 0;
        }
        queue_answer(a, q, true);
        call_done(a);
}

/* The caller hears "unavailable" now, not when polkit-gobject-1 gives up:
 * it tells polkitd to cancel and waits for that answer too, which a stalled
 * polkitd gives late or never. */
static gboolean on_check_timeout(gpointer userdata) {
        AuthQuery *q = userdata;
        q->timeout_id = 0;
        log_caller_warning("polkit did not answer about %s for %s in time; denying.", q->action, q->bus_name);
        g_mutex_lock(&q->auth->lock);
        q->timed_out = true;
        g_mutex_unlock(&q->auth->lock);
        q->result = AUTH_UNAVAILABLE;
        queue_answer(q->auth, q, false);
        if (q->interactive) /* a non-interactive check keeps its place at polkitd until polkitd answers */
                g_cancellable_cancel(q->cancellable);
        return G_SOURCE_REMOVE;
}

/* q's call ends with result; one that timed out was answered already, and
 * only its place at polkitd goes back. */
static void finish(AuthQuery *q, AuthResult result) {
        Auth *a = q->auth;
        if (q->timed_out) {
                queue_answer(a, q, true);
                call_done(a);
                return;
        }
        q->result = result;
        thread_deliver(q);
}

static void on_check_done(GObject *source, GAsyncResult *res, gpointer userdata) {
        AuthQuery *q = userdata;
        g_autoptr(GError) error = NULL;

        g_autoptr(PolkitAuthorizationResult) result =
                polkit_authority_check_authorization_finish(POLKIT_AUTHORITY(source), res, &error);
        if (!result) {
                if (!q->timed_out && !g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
                        log_caller_warning("polkit check of %s for %s failed: %s", q->action, q->bus_name,
                                           error->message);
                finish(q, AUTH_UNAVAILABLE);
        } else if (polkit_authorization_result_get_is_authorized(result))
                finish(q, AUTH_ALLOWED);
        else if (polkit_authorization_result_get_is_challenge(result) && !q->interactive)
                finish(q, AUTH_CHALLENGE);
        else
                finish(q, AUTH_DENIED);
}

static void start_call(Auth *a, AuthQuery *q) {
        if (!a->authority || q->timed_out || g_cancellable_is_cancelled(q->cancellable)) {
                finish(q, AUTH_UNAVAILABLE);
                return;
        }
        g_autoptr(PolkitSubject) subject = polkit_system_bus_name_new(q->bus_name);
        PolkitCheckAuthorizationFlags flags = q->interactive ? POLKIT_CHECK_AUTHORIZATION_FLAGS_ALLOW_USER_INTERACTION
                                                             : POLKIT_CHECK_AUTHORIZATION_FLAGS_NONE;
        polkit_authority_check_authorization(a->authority, subject, q->action, NULL, flags,
                                             q->interactive ? q->cancellable : a->stop_cancellable, on_check_done, q);
}

static void on_authority(GObject *source, GAsyncResult *res, gpointer userdata) {
        Auth *a = userdata;
        g_autoptr(GError) error = NULL;

        (void) source;
        a->authority = polkit_authority_get_finish(res, &error);
        if (!a->authority && !g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
                log_warning("polkit unreachable: %s", error->message);
        g_clear_object(&a->get_cancellable);
        g_clear_object(&a->bus);
        AuthQuery *q = a->awaiting_head;
        a->awaiting_head = a->awaiting_tail = NULL;
        while (q) {
                AuthQuery *next = q->awaiting_next;
                start_call(a, q);
                q = next;
        }
}

/* polkit's proxy asks polkitd for its properties as it is made: made
 * asynchronously, so that a polkitd that does not answer stalls nothing
 * here and the checks waiting for it still time out. */
static void get_authority(Auth *a, AuthQuery *q) {
        q->awaiting_next = NULL;
        if (a->awaiting_tail)
                a->awaiting_tail->awaiting_next = q;
        else
                a->awaiting_head = q;
        a->awaiting_tail = q;
        if (a->get_cancellable)
                return; /* on its way */

        /* pmqosd owns its exit: losing the bus must not raise SIGTERM behind
         * its back. GLib keeps the shared connection only while someone holds
         * it: held until the proxy has it, or a worker thread would make a
         * new one, exiting on close. */
        g_autoptr(GError) error = NULL;
        a->bus = g_bus_get_sync(G_BUS_TYPE_SYSTEM, NULL, &error);
        a->get_cancellable = g_cancellable_new();
        if (!a->bus) {
                log_warning("polkit unreachable: cannot connect to the system bus: %s", error->message);
                g_cancellable_cancel(a->get_cancellable);
        } else
                g_dbus_connection_set_exit_on_close(a->bus, FALSE);
        polkit_authority_get_async(a->get_cancellable, on_authority, a);
}

gboolean auth_thread_start_check(gpointer userdata) {
        AuthQuery *q = userdata;
        Auth *a = q->auth;

        a->in_flight++;
        g_autoptr(GSource) timeout =
                g_timeout_source_new(q->interactive ? AUTH_INTERACTIVE_TIMEOUT_MS : AUTH_TIMEOUT_MS);
        g_source_set_callback(timeout, on_check_timeout, q, NULL);
        q->timeout_id = g_source_attach(timeout, a->context);
        if (a->authority)
                start_call(a, q);
        else
                get_authority(a, q);
        return G_SOURCE_REMOVE;
}

gboolean auth_thread_stop(gpointer userdata) {
        Auth *a = userdata;
        a->stopping = true;
        if (a->get_cancellable)
                g_cancellable_cancel(a->get_cancellable);
        g_cancellable_cancel(a->stop_cancellable);
        thread_maybe_quit(a);
        return G_SOURCE_REMOVE;
}

gpointer auth_thread_main(gpointer userdata) {
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
