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

gboolean auth_thread_start_check(gpointer userdata) {
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

gboolean auth_thread_stop(gpointer userdata) {
        Auth *a = userdata;
        a->stopping = true;
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
