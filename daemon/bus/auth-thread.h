/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The polkit thread (auth-thread.c) and what the main thread's half
 * (auth.c) shares with it: a query, the checker, and the thread's entry
 * points. Only auth.c includes it. */
#pragma once

#include <gio/gio.h>
#include <polkit/polkit.h>
#include <systemd/sd-event.h>
#include <stdbool.h>
#include <stdint.h>

#include "bus/auth-types.h"
#include "util/hashmap.h"

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
        guint timeout_id; /* GLib thread only */
        /* Not answered in time: "unavailable" goes to the main thread at
         * once, while polkit-gobject-1 holds the query until its call returns
         * (when polkitd answers the cancellation, or later); it then comes
         * back to the main thread, which frees it and its place at polkitd.
         * timed_out, call_done and queued under Auth.lock. */
        bool timed_out, call_done, queued;
        bool answer_given;                /* main thread */
        AuthQuery *awaiting_next;         /* GLib thread: waits for the authority */
        AuthQuery *next;                  /* in the result queue */
        AuthQuery *live_prev, *live_next; /* main thread: every query not yet delivered */
        bool waiting;                     /* main thread: not yet handed to polkit */
        uint64_t asked;                   /* main thread: when (CLOCK_MONOTONIC, µs) */
        sd_event_source *wait_timer;      /* main thread: while waiting, its deadline */
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
        sd_event *event;
        sd_event_source *event_source;
        int efd;
        GMainContext *context;
        GMainLoop *loop;
        GThread *thread;

        /* GLib thread only. */
        PolkitAuthority *authority;
        GCancellable *get_cancellable; /* while the authority is being made */
        GDBusConnection *bus;          /* held until then: see get_authority() */
        /* A non-interactive check is not cancelled when it times out or its
         * caller leaves: polkit-gobject-1 would return at once while polkitd
         * still has it, and its place would go to the next one (a stalled
         * polkitd would be handed check after check). Only the stop cancels
         * it. An interactive one (at most one a user) is cancelled, so that
         * the agent's dialog goes. */
        GCancellable *stop_cancellable;
        AuthQuery *awaiting_head, *awaiting_tail; /* checks that wait for it */
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

AuthQuery *auth_query_free(AuthQuery *q); /* either thread, once the other let go */

/* Run on the polkit thread (an idle source on its context, g_thread_new()). */
gboolean auth_thread_start_check(gpointer userdata); /* userdata: the AuthQuery */
gboolean auth_thread_stop(gpointer userdata);        /* userdata: the Auth */
gpointer auth_thread_main(gpointer userdata);        /* userdata: the Auth */
